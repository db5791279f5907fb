//! Greedy continuation of token ids, for checking a model by hand without a tokenizer.
//!
//! `cargo run --release -p stampo-model --example greedy -- MODEL.gguf 504,3575,282 [N]`
//! prints the `N` (default 16) greedy token ids, comma-separated.

use stampo_gguf::Gguf;
use stampo_model::{DeviceKind, LoadOptions, Result, Transformer, to_vec};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(path), Some(ids)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: greedy MODEL.gguf ID,ID,... [N]");
        std::process::exit(2);
    };
    let n: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(16);
    let ids: Vec<u32> = ids
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let bytes = std::fs::read(path).map_err(|e| stampo_model::ModelError::Readback {
        what: "model file",
        reason: e.to_string(),
    })?;
    let gguf = Gguf::parse(&bytes)?;
    let model = Transformer::load(
        &gguf,
        &DeviceKind::Cpu.device()?,
        LoadOptions {
            context: ids.len() + n + 1,
        },
    )?;
    let mut cache = model.new_cache();
    let mut logits = to_vec(model.forward(&ids, &mut cache, false)?)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let next = logits
            .iter()
            .enumerate()
            .fold(0, |b, (i, &v)| if v > logits[b] { i } else { b }) as u32;
        out.push(next.to_string());
        logits = to_vec(model.forward(&[next], &mut cache, false)?)?;
    }
    println!("{}", out.join(","));
    Ok(())
}
