//! `stampo perplexity`: llama.cpp's perplexity over a text file. The text is tokenized once
//! (BOS first when the model wants one) and cut into chunks of `--ctx` tokens, each chunk's
//! first token replaced by BOS, as llama.cpp does; in each chunk the tokens of the second half
//! are scored given everything before them in the chunk.

use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    /// The model file.
    #[arg(short, long)]
    model: PathBuf,
    /// The text file.
    #[arg(short, long)]
    file: PathBuf,
    /// Tokens per chunk.
    #[arg(long, default_value_t = 512)]
    ctx: usize,
    /// Where the model runs: `cpu` or `wgpu`.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Stop after this many chunks (all by default).
    #[arg(long)]
    chunks: Option<usize>,
}

pub fn run(args: &Args) -> Result<(), String> {
    if args.ctx < 4 {
        return Err("--ctx must be at least 4".into());
    }
    let text =
        std::fs::read_to_string(&args.file).map_err(|e| format!("{}: {e}", args.file.display()))?;
    let (tok, model) = super::model_file::load_transformer(&args.model, &args.device, args.ctx)?;
    let ctx = args.ctx.min(model.new_cache().capacity());
    // The BOS at the text's start shifts every chunk's boundary by one, as in llama.cpp.
    let ids = tok.encode(&text, true, false);
    let available = ids.len() / ctx;
    let n_chunks = args.chunks.map_or(available, |c| c.min(available));
    if n_chunks == 0 {
        return Err(format!(
            "{} tokens: need at least --ctx {ctx} for one chunk",
            ids.len()
        ));
    }
    eprintln!(
        "{} tokens, {n_chunks} chunks of {ctx}, scoring the second half of each",
        ids.len()
    );
    let mut cache = model.new_cache();
    let (mut nll, mut nll2, mut count) = (0.0f64, 0.0f64, 0usize);
    let t0 = Instant::now();
    for c in 0..n_chunks {
        let mut chunk = ids[c * ctx..(c + 1) * ctx].to_vec();
        if let (true, Some(bos)) = (tok.add_bos(), tok.bos()) {
            chunk[0] = bos;
        }
        cache.reset();
        let log_probs = model
            .chunk_log_probs(&chunk, &mut cache)
            .map_err(|e| e.to_string())?;
        for lp in log_probs {
            nll -= lp;
            nll2 += lp * lp;
            count += 1;
        }
        eprint!("[{}]{:.4} ", c + 1, (nll / count as f64).exp());
    }
    eprintln!();
    let mean = nll / count as f64;
    let ppl = mean.exp();
    // llama.cpp's uncertainty: the standard error of the mean NLL, carried through exp.
    let var = (nll2 / count as f64 - mean * mean).max(0.0);
    let err = ppl * (var / (count as f64 - 1.0).max(1.0)).sqrt();
    println!(
        "Final estimate: PPL = {ppl:.4} +/- {err:.5} ({count} tokens scored in {:.1} s)",
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}
