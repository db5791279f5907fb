//! stampo's side of the grammar benchmark (`bench/grammar/peers.py` runs the peers on the
//! same cases): per schema, compile time; per token, mask time while walking each valid
//! instance; how many valid instances were rejected and invalid ones accepted.
//!
//! ```sh
//! cargo run -p stampo-grammar --release --example bench_masks -- \
//!     bench/grammar/out/cases-smollm2.json [--json OUT.json] [--peers PEERS.json]
//! ```

#![allow(clippy::unwrap_used, clippy::panic)] // a measurement tool: fail loudly

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use stampo_grammar::{CompiledGrammar, Matcher, Vocabulary, json_schema};

fn stats(xs: &mut [f64]) -> Value {
    if xs.is_empty() {
        return Value::Null;
    }
    xs.sort_by(f64::total_cmp);
    let q = |p: f64| xs[((xs.len() - 1) as f64 * p).round() as usize];
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    json!({"n": xs.len(), "mean": mean, "p50": q(0.5), "p99": q(0.99), "max": xs[xs.len() - 1]})
}

fn median(mut xs: Vec<f64>) -> Option<f64> {
    xs.sort_by(f64::total_cmp);
    (!xs.is_empty()).then(|| {
        if xs.len() % 2 == 1 {
            xs[xs.len() / 2]
        } else {
            (xs[xs.len() / 2 - 1] + xs[xs.len() / 2]) / 2.0
        }
    })
}

fn ids(v: &Value) -> Vec<Vec<u32>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| {
            s.as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_u64().unwrap() as u32)
                .collect()
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args
        .first()
        .expect("usage: bench_masks CASES.json [--json OUT] [--peers PEERS.json]");
    let opt = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
    };
    let cases: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let tokens: Vec<Vec<u8>> = cases["vocab_hex"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let h = h.as_str().unwrap();
            (0..h.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
                .collect()
        })
        .collect();
    let mut special = vec![false; tokens.len()];
    for s in cases["special"].as_array().unwrap() {
        special[s.as_u64().unwrap() as usize] = true;
    }
    let eos: Vec<u32> = cases["eos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_u64().unwrap() as u32)
        .collect();
    let t0 = Instant::now();
    let vocab = Arc::new(Vocabulary::new(tokens, special, eos.clone()));
    println!(
        "vocabulary: {} tokens, trie {} nodes, built in {:.1} ms",
        vocab.len(),
        vocab.trie_nodes(),
        t0.elapsed().as_secs_f64() * 1e3
    );
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut files = Vec::new();
    for case in cases["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let t0 = Instant::now();
        let compiled = json_schema::compile(&case["schema"], &Default::default())
            .map_err(|e| e.to_string())
            .and_then(|c| CompiledGrammar::new(&c.grammar).map_err(|e| e.to_string()))
            .map(Arc::new)
            .and_then(|g| Matcher::with_vocabulary(g, vocab.clone()).map_err(|e| e.to_string()));
        let compile_ms = t0.elapsed().as_secs_f64() * 1e3;
        let mut m = match compiled {
            Ok(m) => m,
            Err(e) => {
                println!("{name}: refused: {e}");
                files.push(json!({"name": name, "error": e}));
                continue;
            }
        };
        let (mut times, mut rejected, mut accepted_invalid) = (Vec::new(), 0, 0);
        for toks in ids(&case["valid"]) {
            m.reset();
            let mut ok = true;
            for &t in &toks {
                let t0 = Instant::now();
                m.compute_mask(&mut mask).unwrap();
                times.push(t0.elapsed().as_secs_f64() * 1e6);
                let allowed = mask[t as usize / 32] >> (t % 32) & 1 == 1;
                if !allowed || m.commit_token(t).is_err() {
                    ok = false;
                    break;
                }
            }
            if !(ok && m.can_end()) {
                rejected += 1;
            }
        }
        for toks in ids(&case["invalid"]) {
            m.reset();
            if m.commit_tokens(&toks).is_ok() && m.can_end() {
                accepted_invalid += 1;
            }
        }
        let s = stats(&mut times);
        println!(
            "{name}: compile {compile_ms:.2} ms, mask p50 {:.1} µs p99 {:.1} µs max {:.1} µs, valid rejected {rejected}, invalid accepted {accepted_invalid}",
            s["p50"].as_f64().unwrap_or(0.0),
            s["p99"].as_f64().unwrap_or(0.0),
            s["max"].as_f64().unwrap_or(0.0)
        );
        files.push(json!({"name": name, "compile_ms": compile_ms, "mask_us": s, "valid_rejected": rejected, "invalid_accepted": accepted_invalid}));
    }
    let ok: Vec<&Value> = files
        .iter()
        .filter(|f| f.get("compile_ms").is_some())
        .collect();
    let summary = json!({
        "compiled": ok.len(),
        "refused": files.len() - ok.len(),
        "compile_ms_p50": median(ok.iter().map(|f| f["compile_ms"].as_f64().unwrap()).collect()),
        "mask_p50_us_median_over_schemas": median(ok.iter().filter_map(|f| f["mask_us"]["p50"].as_f64()).collect()),
        "valid_rejected": ok.iter().map(|f| f["valid_rejected"].as_u64().unwrap()).sum::<u64>(),
        "invalid_accepted": ok.iter().map(|f| f["invalid_accepted"].as_u64().unwrap()).sum::<u64>(),
    });
    println!("stampo {summary}");
    if let Some(peers) = opt("--peers") {
        let peers: Value = serde_json::from_str(&std::fs::read_to_string(peers).unwrap()).unwrap();
        print_ratios(&files, &peers);
    }
    if let Some(out) = opt("--json") {
        let result = json!({"model": cases["model"], "engine": "stampo", "summary": summary, "files": files});
        std::fs::write(out, serde_json::to_string_pretty(&result).unwrap()).unwrap();
    }
}

/// Over the schemas every engine compiled: medians of per-schema p50/p99/max mask times and
/// compile times, and stampo's ratio to each peer (below 1 = stampo faster).
fn print_ratios(ours: &[Value], peers: &Value) {
    let Some(engines) = peers["engines"].as_object() else {
        return;
    };
    let compiled = |files: &[Value], name: &str| {
        files
            .iter()
            .find(|f| f["name"] == name && f.get("compile_ms").is_some())
            .cloned()
    };
    for (engine, data) in engines {
        let theirs: Vec<Value> = data["files"].as_array().cloned().unwrap_or_default();
        let both: Vec<(Value, Value)> = ours
            .iter()
            .filter_map(|f| {
                Some((
                    compiled(ours, f["name"].as_str()?)?,
                    compiled(&theirs, f["name"].as_str()?)?,
                ))
            })
            .collect();
        let col = |pick: &dyn Fn(&Value) -> Option<f64>, side: usize| {
            median(
                both.iter()
                    .filter_map(|p| pick(if side == 0 { &p.0 } else { &p.1 }))
                    .collect(),
            )
            .unwrap_or(f64::NAN)
        };
        println!(
            "vs {engine} on {} schemas both compiled (medians over schemas; ratio = stampo / {engine}):",
            both.len()
        );
        for (label, pick) in [
            (
                "compile ms",
                &(|f: &Value| f["compile_ms"].as_f64()) as &dyn Fn(&Value) -> Option<f64>,
            ),
            ("mask p50 µs", &|f: &Value| f["mask_us"]["p50"].as_f64()),
            ("mask p99 µs", &|f: &Value| f["mask_us"]["p99"].as_f64()),
            ("mask max µs", &|f: &Value| f["mask_us"]["max"].as_f64()),
        ] {
            let (a, b) = (col(pick, 0), col(pick, 1));
            println!(
                "  {label:12} stampo {a:10.2}  {engine} {b:10.2}  ratio {:.2}",
                a / b
            );
        }
    }
}
