//! Any string as a `pattern`: compiling must return an expression or a located error,
//! never panic; the offset of an error lies within the pattern.

#![no_main]

use libfuzzer_sys::fuzz_target;
use stampo_grammar::regex::{Encoding, RegexError, compile};

fuzz_target!(|data: &[u8]| {
    let Ok(pattern) = std::str::from_utf8(data) else { return };
    for encoding in [Encoding::Raw, Encoding::JsonString] {
        match compile(pattern, encoding, 100) {
            Ok(_) => {}
            Err(RegexError::Syntax { offset, .. } | RegexError::Unsupported { offset, .. }) => {
                assert!(offset <= pattern.len(), "offset {offset} outside {pattern:?}");
            }
            Err(RegexError::RepetitionTooLarge { .. }) => {}
        }
    }
});
