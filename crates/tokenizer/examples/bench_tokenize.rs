//! Tokenizer and header-parsing timings for `bench/tokenizer/bench.py`:
//! `cargo run --release -p stampo-tokenizer --example bench_tokenize -- MODEL.gguf TEXT_FILE RUNS IDS_OUT [CHUNK]`
//! prints one JSON line: the best of RUNS encode times of TEXT_FILE (no BOS, no special
//! parsing, as the bench's llama.cpp side), the time to parse the header and tensor table,
//! and the time to build the tokenizer; writes the ids to IDS_OUT (JSON) for comparison.
//! With CHUNK, the text is encoded in pieces of at most CHUNK bytes cut after a newline
//! (as `bench.py --chunk` cuts it for llama.cpp), the ids concatenated.

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
    let pieces = match args.get(5) {
        Some(chunk) => chunks(&text, chunk.parse().expect("chunk")),
        None => vec![text.as_str()],
    };

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
        ids = pieces
            .iter()
            .flat_map(|piece| tok.encode(piece, false, false))
            .collect();
        best = best.min(t.elapsed().as_secs_f64());
    }
    std::fs::write(&args[4], serde_json::to_string(&ids).expect("json")).expect("write ids");
    println!(
        "{{\"encode_s\": {best}, \"tokens\": {}, \"bytes\": {}, \"parse_header_s\": {parse_s}, \"tokenizer_load_s\": {load_s}}}",
        ids.len(),
        text.len()
    );
}

/// Pieces of at most `size` bytes, each cut just after its last newline (a piece with no
/// newline is cut at `size`, on a character boundary).
fn chunks(text: &str, size: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + size).min(text.len());
        if end < text.len() {
            match text.as_bytes()[start..end]
                .iter()
                .rposition(|&b| b == b'\n')
            {
                Some(nl) if nl > 0 => end = start + nl + 1,
                _ => {
                    while !text.is_char_boundary(end) {
                        end -= 1;
                    }
                }
            }
        }
        out.push(&text[start..end]);
        start = end;
    }
    out
}
