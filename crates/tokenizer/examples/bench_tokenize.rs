//! Tokenizer and header-parsing timings for `bench/tokenizer/bench.py`:
//! `cargo run --release -p stampo-tokenizer --example bench_tokenize -- MODEL.gguf TEXT_FILE RUNS IDS_OUT`
//! prints one JSON line: the best of RUNS encode times of TEXT_FILE (no BOS, no special
//! parsing, as the bench's llama.cpp side), the time to parse the header and tensor table,
//! and the time to build the tokenizer; writes the ids to IDS_OUT (JSON) for comparison.

use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        eprintln!("usage: bench_tokenize MODEL.gguf TEXT_FILE RUNS IDS_OUT");
        std::process::exit(2);
    }
    let bytes = std::fs::read(&args[1]).expect("model");
    let text = std::fs::read_to_string(&args[2]).expect("text");
    let runs: usize = args[3].parse().expect("runs");

    let mut parse_s = f64::MAX;
    for _ in 0..10 {
        let t = Instant::now();
        let g = stampo_gguf::Gguf::parse(&bytes).expect("parse");
        std::hint::black_box(&g);
        parse_s = parse_s.min(t.elapsed().as_secs_f64());
    }
    let g = stampo_gguf::Gguf::parse(&bytes).expect("parse");
    let t = Instant::now();
    let tok = stampo_tokenizer::Tokenizer::from_gguf(&g).expect("tokenizer");
    let load_s = t.elapsed().as_secs_f64();

    let mut best = f64::MAX;
    let mut ids = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        ids = tok.encode(&text, false, false);
        best = best.min(t.elapsed().as_secs_f64());
    }
    std::fs::write(&args[4], serde_json::to_string(&ids).expect("json")).expect("write ids");
    println!(
        "{{\"encode_s\": {best}, \"tokens\": {}, \"bytes\": {}, \"parse_header_s\": {parse_s}, \"tokenizer_load_s\": {load_s}}}",
        ids.len(),
        text.len()
    );
}
