//! The grammar benchmark's walk on a cases file from `bench/grammar/peers.py`, natively,
//! without the CLI's model crates: the native side of `bench/browser/grammar.mjs`, which runs
//! the same walk in the wasm build in Chromium. Prints `{"summary", "files"}` as JSON.
//!
//!     cargo run --release -p stampo-grammar --example bench_cases -- CASES.json

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use stampo_grammar::bench;

fn main() -> Result<(), String> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: bench_cases CASES.json")?;
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))?;
    let (vocab, cases) = bench::cases_from_json(&v).map_err(|e| format!("{path}: {e}"))?;
    let vocab = Arc::new(vocab);
    let mut mask = vec![0u32; vocab.mask_words()];
    let start = Instant::now();
    let mut now_us = || start.elapsed().as_secs_f64() * 1e6;
    let files: Vec<Value> = cases
        .iter()
        .map(|case| bench::run_case(case, &vocab, &mut mask, &mut now_us))
        .collect();
    println!(
        "{}",
        json!({"summary": bench::summarise(&files), "files": files})
    );
    Ok(())
}
