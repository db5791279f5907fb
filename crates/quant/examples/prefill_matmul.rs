//! Prefill-sized products on one thread, per format and shape, printed as GMAC/s.
//!
//! `cargo run --release -p stampo-quant --example prefill_matmul -- [TOKENS] [SECONDS]`
//!
//! A prefill multiplies every weight matrix by all of a prompt's activation rows, so its speed
//! is the kernels' arithmetic rate rather than memory bandwidth. Each case times
//! `quant_matmul` of one random matrix (the default models' shapes) by `TOKENS` random rows
//! (default 512) on a pool of one thread, repeated for `SECONDS` (default 2), and prints the
//! multiply-adds per second.

use std::io::Write;
use std::time::Instant;

use stampo_quant::QuantFormat;
use stampo_quant::matmul::{QuantMatrix, quant_matmul};
use stampo_quant::pool::Pool;
use stampo_quant::sample::{Rng, random_matrix};

fn main() {
    let mut args = std::env::args().skip(1);
    let tokens: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(512);
    let seconds: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(2.0);
    let pool = Pool::new(1);
    // (format, rows, cols): Qwen2.5's gate/up (Q5_0) and down (Q4_K, Q6_K), SmolLM2's
    // gate/up (Q4_1).
    let cases = [
        (QuantFormat::Q5_0, 4864, 896),
        (QuantFormat::Q4_1, 1536, 576),
        (QuantFormat::Q4K, 896, 4864),
        (QuantFormat::Q6K, 896, 4864),
    ];
    let mut rng = Rng(0x5eed);
    for (format, rows, cols) in cases {
        let bytes = random_matrix(format, rows, cols, &mut rng);
        let w = QuantMatrix {
            bytes: std::sync::Arc::new(bytes),
            offset: 0,
            format,
            rows,
            cols,
        };
        let x: Vec<f32> = (0..tokens * cols).map(|_| rng.float()).collect();
        let mut sink = quant_matmul(&w, &x, tokens, &pool)[0];
        let (start, mut runs) = (Instant::now(), 0u32);
        while runs < 2 || start.elapsed().as_secs_f64() < seconds {
            sink += quant_matmul(&w, &x, tokens, &pool)[0];
            runs += 1;
        }
        let secs = start.elapsed().as_secs_f64() / f64::from(runs);
        let gmacs = (rows * cols * tokens) as f64 / secs / 1e9;
        let line = format!(
            "{{\"format\":\"{format}\",\"rows\":{rows},\"cols\":{cols},\"tokens\":{tokens},\"ms\":{:.2},\"gmac_s\":{gmacs:.2},\"check\":{sink}}}",
            secs * 1e3
        );
        // A reader that stops early (`| head`) ends the run quietly.
        if writeln!(std::io::stdout(), "{line}").is_err() {
            return;
        }
    }
}
