//! `stampo generate`: the raw prompt (no chat template) decoded greedily, as llama.cpp's
//! `llama-simple` does — the plainest check that the forward pass is right.

use std::path::PathBuf;
use std::time::Instant;

use serde_json::json;
use stampo_model::to_vec;
use stampo_tokenizer::DecodeOptions;

#[derive(clap::Args)]
pub struct Args {
    /// The model file.
    #[arg(short, long)]
    model: PathBuf,
    /// The prompt, tokenised as llama.cpp does (BOS added when the model asks for it).
    #[arg(short, long)]
    prompt: String,
    /// Tokens to generate.
    #[arg(short = 'n', long, default_value_t = 32)]
    n_predict: usize,
    /// Where the model runs: `cpu` or `wgpu`.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// KV cache size in tokens (capped at the model's context length).
    #[arg(long, default_value_t = 2048)]
    ctx: usize,
    /// Print a JSON object (prompt ids, generated ids, text, the top logits of the first
    /// generated position, timings) instead of the text.
    #[arg(long)]
    json: bool,
    /// How many of the first position's largest logits `--json` reports.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Keep generating past an end-of-generation token.
    #[arg(long)]
    ignore_eos: bool,
}

pub fn run(args: &Args) -> Result<(), String> {
    let t_load = Instant::now();
    let (tok, model) = super::model_file::load_transformer(&args.model, &args.device, args.ctx)?;
    let load_ms = t_load.elapsed().as_secs_f64() * 1e3;
    // What the device's allocator holds once the weights are loaded, before the KV cache.
    let pools = model.device().memory_pool_usage();
    let mut cache = model.new_cache();

    let prompt = tok.encode(&args.prompt, true, false);
    if prompt.is_empty() {
        return Err("the prompt is empty after tokenisation".into());
    }
    let budget = cache.capacity().saturating_sub(prompt.len());
    let n_predict = args.n_predict.min(budget);

    let t_prompt = Instant::now();
    let mut logits = to_vec(
        model
            .forward(&prompt, &mut cache, false)
            .map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let prompt_ms = t_prompt.elapsed().as_secs_f64() * 1e3;
    let top = top_logits(&logits, args.top);

    let t_decode = Instant::now();
    let mut generated = Vec::with_capacity(n_predict);
    let mut decoder = tok.stream_decoder(false);
    for step in 0..n_predict {
        let id = argmax(&logits);
        if !args.ignore_eos && tok.is_eog(id) {
            break;
        }
        generated.push(id);
        if !args.json {
            use std::io::Write;
            print!("{}", tok.stream_push(&mut decoder, id));
            let _ = std::io::stdout().flush();
        }
        if step + 1 < n_predict {
            logits = to_vec(
                model
                    .forward(&[id], &mut cache, false)
                    .map_err(|e| e.to_string())?,
            )
            .map_err(|e| e.to_string())?;
        }
    }
    let decode_ms = t_decode.elapsed().as_secs_f64() * 1e3;
    // The first generated token's logits come from the prefill; decode steps are the rest.
    let decode_steps = generated.len().saturating_sub(1).max(1);
    if args.json {
        let text = tok.decode(&generated, DecodeOptions::default());
        let out = json!({
            "prompt_ids": prompt,
            "generated_ids": generated,
            "text": text,
            "top_logits": top,
            "device": args.device,
            "memory": {
                "gguf_tensor_bytes": model.gguf_tensor_bytes(),
                "weight_bytes": model.weight_bytes(),
                "device_bytes_in_use": pools.map(|p| p.bytes_in_use),
                "device_bytes_reserved": pools.map(|p| p.bytes_reserved),
            },
            "timings": {
                "load_ms": load_ms,
                "prompt_n": prompt.len(),
                "prompt_ms": prompt_ms,
                "prompt_per_second": prompt.len() as f64 / (prompt_ms / 1e3),
                "predicted_n": generated.len(),
                "predicted_ms": decode_ms,
                "predicted_per_second": decode_steps as f64 / (decode_ms / 1e3),
            },
        });
        println!("{out}");
    } else {
        println!();
        eprintln!(
            "prompt: {} tokens in {prompt_ms:.0} ms; generated {} tokens at {:.1} tokens/s",
            prompt.len(),
            generated.len(),
            decode_steps as f64 / (decode_ms / 1e3)
        );
    }
    Ok(())
}

/// The index of the largest logit (the first one on ties, as llama.cpp's greedy sampler).
fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best as u32
}

/// The `n` largest logits as `[id, logit]` pairs, largest first.
fn top_logits(logits: &[f32], n: usize) -> Vec<(u32, f32)> {
    let mut idx: Vec<u32> = (0..logits.len() as u32).collect();
    let n = n.min(idx.len());
    if n == 0 {
        return Vec::new();
    }
    idx.select_nth_unstable_by(n - 1, |&a, &b| {
        logits[b as usize].total_cmp(&logits[a as usize])
    });
    idx.truncate(n);
    idx.sort_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]));
    idx.into_iter().map(|i| (i, logits[i as usize])).collect()
}
