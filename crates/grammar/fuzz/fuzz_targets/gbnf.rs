//! Any string as GBNF: parsing must return a grammar or a located error, never panic, hang
//! or exhaust memory; a parsed grammar prints back as GBNF that parses again, and compiles
//! to an automaton (or a budget error) that a matcher can run.

#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use stampo_grammar::{CompiledGrammar, Matcher, gbnf};

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(grammar) = gbnf::parse(src) else {
        return;
    };
    let printed = grammar.to_string();
    if let Err(e) = gbnf::parse(&printed) {
        panic!("printed GBNF does not parse: {e}\n{printed}");
    }
    if let Ok(g) = CompiledGrammar::new(&grammar) {
        let mut m = Matcher::new(Arc::new(g));
        let _ = m.consume_bytes(&data[..data.len().min(32)]);
        let _ = m.closing_bytes();
    }
});
