//! Any string as a `pattern`: compiling (with look-ahead's automaton where the pattern opens
//! with one) and building its matcher must return a result or a located error, never panic;
//! the offset of an error lies within the pattern.

#![no_main]

use libfuzzer_sys::fuzz_target;
use stampo_grammar::regex::{Encoding, RegexError, grammar, matcher};

fn located(pattern: &str, e: RegexError) {
    match e {
        RegexError::Syntax { offset, .. } | RegexError::Unsupported { offset, .. } => {
            assert!(offset <= pattern.len(), "offset {offset} outside {pattern:?}");
        }
        RegexError::RepetitionTooLarge { .. } | RegexError::TooLarge { .. } => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(pattern) = std::str::from_utf8(data) else { return };
    for encoding in [Encoding::Raw, Encoding::JsonString] {
        if let Err(e) = grammar(pattern, encoding, 100) {
            located(pattern, e);
        }
    }
    match matcher(pattern) {
        Ok(m) => {
            m.is_match(pattern);
        }
        Err(e) => located(pattern, e),
    }
});
