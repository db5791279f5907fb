//! Any bytes as a JSON Schema: compiling must return a grammar or an error, never panic,
//! hang or exhaust memory; a compiled grammar must be accepted by the matcher's compiler.

#![no_main]

use libfuzzer_sys::fuzz_target;
use stampo_grammar::CompiledGrammar;
use stampo_grammar::json_schema::{Options, compile_str};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(compiled) = compile_str(text, &Options::default()) {
        // The grammar must be well-formed IR (every rule reference in range), which the
        // automaton compiler checks; its own budget errors are fine.
        let _ = CompiledGrammar::new(&compiled.grammar);
        let _ = compiled.grammar.to_string();
        let _ = compiled.report.to_string();
    }
});
