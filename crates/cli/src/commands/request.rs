//! `stampo request` and `stampo run`: requests through the engine on a real model.
//!
//! `request` takes a llama.cpp `/completion` or OpenAI `/v1/chat/completions` body and prints
//! the server-shaped response (or, for `"stream": true`, the `data:` lines a server sends).
//! `run` builds such a body from flags, streams the text and prints stats lines.

use std::io::{IsTerminal, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};
use stampo_engine::request::custom_json;
use stampo_engine::response::ResponseMeta;
use stampo_engine::timing::StdClock;
use stampo_engine::{Completed, LoadedModel, Request, Streaming};

/// Flags every model-running command shares.
#[derive(clap::Args)]
pub struct ModelArgs {
    /// The model file.
    #[arg(short, long)]
    model: PathBuf,
    /// Where the model runs: `cpu` or `wgpu`.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// KV cache size in tokens (capped at the model's context length).
    #[arg(long, default_value_t = 4096)]
    ctx: usize,
    /// Refuse schema keywords the grammar cannot enforce instead of warning about them.
    #[arg(long)]
    strict: bool,
}

#[derive(clap::Args)]
pub struct RequestArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// The request body (a JSON file; `-` reads standard input).
    body: PathBuf,
    /// A JSON object merged over the body last, as llama.cpp's web UI merges "Custom JSON".
    #[arg(long)]
    custom_json: Option<String>,
}

#[derive(clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// The prompt (the user message with `--chat`).
    #[arg(short, long)]
    prompt: String,
    /// Apply the model's chat template (a `/v1/chat/completions` request).
    #[arg(long)]
    chat: bool,
    /// A system message (with `--chat`).
    #[arg(long, requires = "chat")]
    system: Option<String>,
    /// Any JSON object (`response_format: json_object`).
    #[arg(long, conflicts_with_all = ["json_schema", "grammar_file"])]
    json: bool,
    /// Output valid against this JSON Schema file.
    #[arg(long, conflicts_with = "grammar_file")]
    json_schema: Option<PathBuf>,
    /// Output in the language of this GBNF file.
    #[arg(long)]
    grammar_file: Option<PathBuf>,
    /// Tokens to generate at most (-1: until the end or the context is full).
    #[arg(short = 'n', long, default_value_t = -1, allow_hyphen_values = true)]
    n_predict: i64,
    /// Sampling temperature (0: greedy).
    #[arg(long, default_value_t = 0.8)]
    temp: f64,
    /// Seed of the sampler's generator.
    #[arg(long)]
    seed: Option<u32>,
    /// Append the tokens of text the grammar forces without sampling them (the request
    /// field `fast_forward`).
    #[arg(long)]
    fast_forward: bool,
    /// Print timings and mask statistics after the output.
    #[arg(long)]
    stats: bool,
}

pub fn run_request(args: &RequestArgs) -> Result<(), String> {
    let text = if args.body.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).map_err(|e| format!("stdin: {e}"))?
    } else {
        std::fs::read_to_string(&args.body).map_err(|e| format!("{}: {e}", args.body.display()))?
    };
    let mut body: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", args.body.display()))?;
    let mut warnings = Vec::new();
    if let (Some(custom), Some(map)) = (&args.custom_json, body.as_object_mut()) {
        warnings = custom_json::merge_text(map, custom);
    }
    let mut request = Request::from_body(&body).map_err(|e| e.to_string())?;
    request.warnings.extend(warnings);
    let mut loaded = load(&args.model)?;
    let stream = request.stream;
    let mut on_chunk = |chunk: &Value| {
        println!("data: {chunk}\n");
        ControlFlow::Continue(())
    };
    let done = execute(&mut loaded, &request, args.model.strict, &mut on_chunk)?;
    if stream {
        println!("data: [DONE]");
    } else {
        println!(
            "{}",
            serde_json::to_string_pretty(&done.response).map_err(|e| e.to_string())?
        );
    }
    Ok(())
}

pub fn run(args: &RunArgs) -> Result<(), String> {
    let mut body = Map::new();
    if args.chat {
        let mut messages = Vec::new();
        if let Some(system) = &args.system {
            messages.push(json!({"role": "system", "content": system}));
        }
        messages.push(json!({"role": "user", "content": args.prompt}));
        body.insert("messages".into(), Value::Array(messages));
        body.insert("max_tokens".into(), json!(args.n_predict));
    } else {
        body.insert("prompt".into(), json!(args.prompt));
        body.insert("n_predict".into(), json!(args.n_predict));
    }
    body.insert("temperature".into(), json!(args.temp));
    body.insert("stream".into(), json!(true));
    if let Some(seed) = args.seed {
        body.insert("seed".into(), json!(seed));
    }
    if args.fast_forward {
        body.insert("fast_forward".into(), json!(true));
    }
    if args.json {
        // `/completion` takes no `response_format` (llama.cpp's server ignores it there, and
        // so does stampo, with a warning): a raw prompt gets the same constraint as a schema.
        if args.chat {
            body.insert("response_format".into(), json!({"type": "json_object"}));
        } else {
            body.insert("json_schema".into(), json!({"type": "object"}));
        }
    }
    if let Some(path) = &args.json_schema {
        let schema: Value =
            serde_json::from_str(&read(path)?).map_err(|e| format!("{}: {e}", path.display()))?;
        body.insert("json_schema".into(), schema);
    }
    if let Some(path) = &args.grammar_file {
        body.insert("grammar".into(), Value::String(read(path)?));
    }
    let request = Request::from_body(&Value::Object(body)).map_err(|e| e.to_string())?;
    let mut loaded = load(&args.model)?;
    // The text arrives as chunks shaped for a server; print only their text.
    let mut on_chunk = |chunk: &Value| {
        let piece = chunk["content"]
            .as_str()
            .or_else(|| chunk["choices"][0]["delta"]["content"].as_str());
        if let Some(piece) = piece {
            print!("{piece}");
            let _ = std::io::stdout().flush();
        }
        ControlFlow::Continue(())
    };
    let done = execute(&mut loaded, &request, args.model.strict, &mut on_chunk)?;
    println!();
    for w in &request.warnings {
        eprintln!("warning: {}: {}", w.field, w.message);
    }
    if args.stats {
        print_stats(&done);
    }
    Ok(())
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Reads and loads the model, with a line of progress on standard error.
fn load(args: &ModelArgs) -> Result<LoadedModel, String> {
    let device = super::model_file::device(&args.device)?;
    let t0 = Instant::now();
    let label = format!("loading {} ...", args.model.display());
    eprint!("{label} ");
    let bytes = super::model_file::read_first(&args.model)?;
    // On a terminal the line counts the weights' upload in percent, rewritten in place.
    let tty = std::io::stderr().is_terminal();
    let mut shown = 0;
    let mut progress = |done: usize, total: usize| {
        let percent = done * 100 / total.max(1);
        if tty && percent > shown {
            shown = percent;
            eprint!("\r{label} {percent:3}%");
        }
    };
    let loaded = LoadedModel::load_reporting(&bytes, &device, args.ctx, &mut progress)
        .map_err(|e| format!("{}: {e}", args.model.display()))?;
    if tty {
        eprint!("\r{label} ");
    }
    eprintln!(
        "{} ({:.0} MB) in {:.0} ms",
        loaded.name,
        bytes.len() as f64 / 1e6,
        t0.elapsed().as_secs_f64() * 1e3
    );
    Ok(loaded)
}

fn execute(
    loaded: &mut LoadedModel,
    request: &Request,
    strict: bool,
    on_chunk: &mut dyn FnMut(&Value) -> ControlFlow<()>,
) -> Result<Completed, String> {
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let meta = ResponseMeta {
        id: format!("stampo-{created}"),
        created,
        model: loaded.name.clone(),
    };
    let clock = StdClock::default();
    let mut streaming = Streaming {
        on_chunk,
        cancel: None,
        should_stop: None,
        clock: &clock,
    };
    // A random seed (`seed: -1`) falls back to the clock, as llama.cpp draws one.
    let fallback_seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    loaded
        .session(strict)
        .run(request, &meta, fallback_seed, &mut streaming)
        .map_err(|e| e.to_string())
}

/// The stats lines of `stampo run --stats`.
fn print_stats(done: &Completed) {
    let t = &done.output.timings;
    eprintln!(
        "prompt: {} tokens ({} cached) in {:.0} ms ({:.1} tokens/s)",
        t.prompt_n, t.cache_n, t.prompt_ms, t.prompt_per_second
    );
    eprintln!(
        "generated: {} tokens in {:.0} ms ({:.1} tokens/s), {} fast-forwarded, {} forward passes, stop: {:?}",
        t.predicted_n,
        t.predicted_ms,
        t.predicted_per_second,
        done.output.fast_forwarded,
        done.output.forward_passes,
        done.output.stop
    );
    if let Some(m) = &done.output.mask_stats {
        eprintln!(
            "mask: {} steps, mean {:.1} µs, p99 {:.1} µs, {:.2}% of decode time",
            m.steps,
            m.mean_us,
            m.p99_us,
            m.share_of_decode * 100.0
        );
    }
}
