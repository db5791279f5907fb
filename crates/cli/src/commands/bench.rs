//! `stampo bench grammar`: how fast and how right the grammar engine is on JSON Schemas.
//!
//! Per schema file: compiled or refused (with the message), compile time, the time of each
//! token mask while walking every valid instance token by token (mean, p50, p99, max), and
//! how many valid instances were rejected and invalid ones accepted; totals at the end.
//!
//! Inputs, either:
//! - `--tokenizer MODEL.gguf --schemas DIR`: every `.json` in DIR, a plain schema (compiled
//!   and timed only) or a MaskBench file (`{schema, tests: [{data, valid}]}`) whose
//!   instances are serialised compactly and tokenized by the model's tokenizer; or
//! - `--cases CASES.json`: vocabulary and token sequences written by
//!   `bench/grammar/peers.py`, so stampo walks exactly the tokens the peers walked.
//!
//! `--peers PEERS.json` (from `peers.py`) prints stampo's ratio to each peer.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use stampo_grammar::Vocabulary;
use stampo_grammar::bench::{self, Case, describe, median, summarise};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(clap::Subcommand)]
enum What {
    /// Compile time and per-token mask time on JSON Schemas.
    Grammar(GrammarArgs),
}

#[derive(clap::Args)]
struct GrammarArgs {
    /// The GGUF model whose tokenizer gives the vocabulary and tokenizes instances.
    #[arg(long, requires = "schemas", conflicts_with = "cases")]
    tokenizer: Option<PathBuf>,
    /// A folder of schema or MaskBench `.json` files.
    #[arg(long)]
    schemas: Option<PathBuf>,
    /// Pre-tokenized cases from `bench/grammar/peers.py` (instead of --tokenizer/--schemas).
    #[arg(long)]
    cases: Option<PathBuf>,
    /// Write the per-file results and totals as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Peers' results from `bench/grammar/peers.py`, to print ratios.
    #[arg(long)]
    peers: Option<PathBuf>,
}

pub fn run(args: &Args) -> Result<(), String> {
    let What::Grammar(a) = &args.what;
    let (vocab, cases, model) = match (&a.cases, &a.tokenizer, &a.schemas) {
        (Some(path), _, _) => load_cases(path)?,
        (None, Some(model), Some(dir)) => load_schemas(model, dir)?,
        _ => return Err("give --tokenizer MODEL.gguf --schemas DIR, or --cases CASES.json".into()),
    };
    let vocab = Arc::new(vocab);
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut files = Vec::new();
    let start = Instant::now();
    let mut now_us = || start.elapsed().as_secs_f64() * 1e6;
    for case in &cases {
        let record = bench::run_case(case, &vocab, &mut mask, &mut now_us);
        println!("{}", describe(&record));
        files.push(record);
    }
    let summary = summarise(&files);
    println!("total: {summary}");
    if let Some(peers) = &a.peers {
        let text =
            std::fs::read_to_string(peers).map_err(|e| format!("{}: {e}", peers.display()))?;
        let peers: Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", peers.display()))?;
        print_ratios(&files, &peers);
    }
    if let Some(out) = &a.json {
        let result =
            json!({"model": model, "engine": "stampo", "summary": summary, "files": files});
        let text = serde_json::to_string_pretty(&result).map_err(|e| e.to_string())?;
        std::fs::write(out, text).map_err(|e| format!("{}: {e}", out.display()))?;
    }
    Ok(())
}

/// Reads one number of a per-file record.
type Metric = fn(&Value) -> Option<f64>;

/// Over the schemas both engines compiled: medians over schemas of compile time and of each
/// schema's mask p50/p99/max, and stampo's ratio (below 1: stampo faster).
fn print_ratios(ours: &[Value], peers: &Value) {
    let Some(engines) = peers["engines"].as_object() else {
        return;
    };
    let compiled = |files: &[Value], name: &Value| {
        files
            .iter()
            .find(|f| &f["name"] == name && f.get("compile_ms").is_some())
            .cloned()
    };
    let metrics: [(&str, Metric); 4] = [
        ("compile ms", |f| f["compile_ms"].as_f64()),
        ("mask p50 µs", |f| f["mask_us"]["p50"].as_f64()),
        ("mask p99 µs", |f| f["mask_us"]["p99"].as_f64()),
        ("mask max µs", |f| f["mask_us"]["max"].as_f64()),
    ];
    for (engine, data) in engines {
        let theirs: Vec<Value> = data["files"].as_array().cloned().unwrap_or_default();
        let both: Vec<(Value, Value)> = ours
            .iter()
            .filter_map(|f| Some((compiled(ours, &f["name"])?, compiled(&theirs, &f["name"])?)))
            .collect();
        println!(
            "vs {engine}, {} schemas both compiled (median over schemas; ratio = stampo / {engine}):",
            both.len()
        );
        for (label, pick) in metrics {
            let a = median(both.iter().filter_map(|p| pick(&p.0)).collect()).unwrap_or(f64::NAN);
            let b = median(both.iter().filter_map(|p| pick(&p.1)).collect()).unwrap_or(f64::NAN);
            println!(
                "  {label:12} stampo {a:10.2}  {engine} {b:10.2}  ratio {:.2}",
                a / b
            );
        }
    }
}

fn load_cases(path: &PathBuf) -> Result<(Vocabulary, Vec<Case>, Value), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let (vocab, cases) =
        bench::cases_from_json(&v).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((vocab, cases, v["model"].clone()))
}

fn load_schemas(model: &PathBuf, dir: &PathBuf) -> Result<(Vocabulary, Vec<Case>, Value), String> {
    let bytes = std::fs::read(model).map_err(|e| format!("{}: {e}", model.display()))?;
    let gguf =
        stampo_gguf::Gguf::parse_header(&bytes).map_err(|e| format!("{}: {e}", model.display()))?;
    let tok = stampo_tokenizer::Tokenizer::from_gguf(&gguf)
        .map_err(|e| format!("{}: {e}", model.display()))?;
    let n = tok.n_vocab() as u32;
    let eog: Vec<u32> = (0..n).filter(|&t| tok.is_eog(t)).collect();
    let vocab = Vocabulary::new(
        (0..n).map(|id| tok.token_bytes(id).to_vec()).collect(),
        (0..n).map(|id| tok.is_control(id)).collect(),
        eog,
    );
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    let mut cases = Vec::new();
    for p in paths {
        let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        let v: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))?;
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let encode = |t: &Value| {
            tok.encode(
                &serde_json::to_string(&t["data"]).unwrap_or_default(),
                false,
                false,
            )
        };
        let tests = v["tests"].as_array();
        let (schema, valid, invalid) = match (v.get("schema"), tests) {
            (Some(s), Some(tests)) => (
                s.clone(),
                tests
                    .iter()
                    .filter(|t| t["valid"] == true)
                    .map(encode)
                    .collect(),
                tests
                    .iter()
                    .filter(|t| t["valid"] == false)
                    .map(encode)
                    .collect(),
            ),
            _ => (v.clone(), Vec::new(), Vec::new()),
        };
        cases.push(Case {
            name,
            schema,
            valid,
            invalid,
        });
    }
    let model_name = model.file_name().map(|n| n.to_string_lossy().to_string());
    Ok((vocab, cases, json!(model_name)))
}
