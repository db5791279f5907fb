//! Prefill and decode speed of one model on one device, printed as one JSON line.
//!
//! `cargo run --release -p stampo-model --example bench -- MODEL.gguf [PREFILL] [DECODE] [cpu|wgpu|noop] [top=K]`
//! (threads: `STAMPO_THREADS`). Each step's greedy token is chosen on the host among the logits
//! read back, or with `top=K` among the K most likely chosen on the device (`top_logits`: 2K words
//! read back; K = 1 is greedy decoding's choice, 40 the candidates of llama.cpp's default chain). `noop` (built with `--features noop`) is the wgpu device on
//! wgpu's noop backend: every launch made as on a GPU, no kernel run, so its speeds are the
//! host's ceiling, not a model's (`device::noop_wgpu_device`). Token ids are a fixed
//! deterministic sequence inside the vocabulary, so runs are comparable; `bench/model/bench.py`
//! runs llama.cpp on the same ids. A warm-up (the same prefill and one step, then the split
//! attention of a step past 256 keys: `warmup_s`) runs first and is not counted: on the wgpu
//! device it compiles the kernels. `slowest_step_ms` and `slowest_step_position` name the
//! slowest decoding step: on the wgpu device each crossing of a multiple of 256 keys records a
//! new step graph.

use std::time::Instant;

// The allocator the `stampo` binary uses, set up the same way (see crates/cli/src/main.rs:
// freed memory is kept a second before it goes back to the kernel), so the numbers agree.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn keep_freed_memory_a_while() {
    // mimalloc.h's `mi_option_purge_delay`, in milliseconds.
    const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    // SAFETY: not thread safe; the first thing `main` does, before any other thread exists.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, 1000) };
}

use stampo_gguf::Gguf;
use stampo_model::quant::pool::Pool;
use stampo_model::{
    DeviceKind, LoadOptions, Result, Tensor, Transformer, read_top, to_vec, top_logits,
};

/// The `i`-th benchmark token id (the same formula as bench/model/bench.py).
fn token(i: usize, vocab: usize) -> u32 {
    ((i * 7919 + 13) % (vocab.min(32_000) - 100) + 100) as u32
}

/// The most likely token of a step's `logits`: among the `top` chosen on the device, or from
/// every logit read back.
fn greedy(logits: Tensor<2>, top: Option<usize>) -> Result<u32> {
    if let Some(k) = top {
        return Ok(read_top(top_logits(logits, None, k)?)?
            .first()
            .map_or(0, |&(id, _)| id));
    }
    Ok(argmax(&to_vec(logits)?))
}

fn argmax(logits: &[f32]) -> u32 {
    logits
        .iter()
        .enumerate()
        .fold(0, |b, (i, &v)| if v > logits[b] { i } else { b }) as u32
}

fn main() -> Result<()> {
    keep_freed_memory_a_while();
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: bench MODEL.gguf [PREFILL] [DECODE] [cpu|wgpu|noop] [top=K]");
        std::process::exit(2);
    };
    let prefill: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(128);
    let decode: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(64);
    let device_name = args.get(4).map_or("cpu", String::as_str);
    let top = args
        .get(5)
        .and_then(|a| a.strip_prefix("top="))
        .and_then(|k| k.parse::<usize>().ok());
    let bytes = std::fs::read(path).map_err(|e| stampo_model::ModelError::Readback {
        what: "model file",
        reason: e.to_string(),
    })?;
    let gguf = Gguf::parse(&bytes)?;
    let device = match device_name {
        #[cfg(feature = "noop")]
        "noop" => stampo_model::device::noop_wgpu_device()?,
        name => DeviceKind::parse(name)?.device()?,
    };
    let t0 = Instant::now();
    let model = Transformer::load(
        &gguf,
        &device,
        LoadOptions {
            context: prefill + decode + 1,
        },
    )?;
    let load_s = t0.elapsed().as_secs_f64();
    let vocab = model.vocab_size();
    let ids: Vec<u32> = (0..prefill).map(|i| token(i, vocab)).collect();
    // The same prefill and one decoding step first, in a cache of their own: on the wgpu
    // device they compile the kernels for these shapes (once per process), which is not the
    // speed of either.
    let t_warm = Instant::now();
    {
        let mut warm = model.new_cache();
        let next = token(prefill, vocab);
        if !ids.is_empty() {
            to_vec(model.forward(&ids, &mut warm, false)?)?;
        }
        // With `top`, the kernel choosing the most likely compiles here too.
        greedy(model.forward(&[next], &mut warm, false)?, top)?;
        // Past 256 keys a step splits each query's keys: those kernels too.
        model.compile_split_attention(&warm)?;
    }
    let warmup_s = t_warm.elapsed().as_secs_f64();
    let mut cache = model.new_cache();
    let t1 = Instant::now();
    let logits = to_vec(model.forward(&ids, &mut cache, false)?)?;
    let prefill_s = t1.elapsed().as_secs_f64();
    let mut next = argmax(&logits);
    // The mean hides a stall of one step.
    let (mut slowest_s, mut slowest_at) = (0.0f64, 0);
    let t2 = Instant::now();
    for i in 0..decode {
        let t_step = Instant::now();
        next = greedy(model.forward(&[next], &mut cache, false)?, top)?;
        let step_s = t_step.elapsed().as_secs_f64();
        if step_s > slowest_s {
            (slowest_s, slowest_at) = (step_s, prefill + i);
        }
    }
    let decode_s = t2.elapsed().as_secs_f64();
    println!(
        "{{\"model\":{:?},\"device\":{:?},\"top_on_device\":{},\"threads\":{},\"load_s\":{load_s:.3},\"warmup_s\":{warmup_s:.3},\"prefill_tokens\":{prefill},\"prefill_tok_s\":{:.2},\"decode_tokens\":{decode},\"decode_tok_s\":{:.2},\"slowest_step_ms\":{:.2},\"slowest_step_position\":{slowest_at},\"weight_bytes\":{},\"gguf_tensor_bytes\":{}}}",
        path,
        device_name,
        top.unwrap_or(0),
        Pool::global().threads(),
        prefill as f64 / prefill_s,
        decode as f64 / decode_s,
        slowest_s * 1e3,
        model.weight_bytes(),
        model.gguf_tensor_bytes(),
    );
    Ok(())
}
