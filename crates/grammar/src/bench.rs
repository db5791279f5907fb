//! The grammar benchmark's walk, shared by `stampo bench grammar` (native) and the wasm
//! build's `benchGrammar` (in a browser): per schema, the compile time, the time of each token
//! mask while walking every valid instance token by token, and how many valid instances were
//! rejected and invalid ones accepted. The caller brings the clock (`std::time::Instant`
//! natively, `performance.now()` in a browser), so this module needs none.
//!
//! Records are JSON objects, the format of `bench/grammar/out/*.json`.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::{CompiledGrammar, Matcher, Vocabulary, json_schema};

/// One schema with its instances as token ids.
pub struct Case {
    pub name: String,
    pub schema: Value,
    pub valid: Vec<Vec<u32>>,
    pub invalid: Vec<Vec<u32>>,
}

/// Compiles `case.schema` for `vocab` and walks its instances; `now_us()` reads a clock in
/// microseconds. `mask` has `vocab.mask_words()` words.
pub fn run_case(
    case: &Case,
    vocab: &Arc<Vocabulary>,
    mask: &mut [u32],
    now_us: &mut dyn FnMut() -> f64,
) -> Value {
    let t0 = now_us();
    let compiled = json_schema::compile(&case.schema, &Default::default())
        .map_err(|e| e.to_string())
        .and_then(|c| CompiledGrammar::new(&c.grammar).map_err(|e| e.to_string()))
        .and_then(|g| {
            Matcher::with_vocabulary(Arc::new(g), vocab.clone()).map_err(|e| e.to_string())
        });
    let compile_ms = (now_us() - t0) / 1e3;
    let mut m = match compiled {
        Ok(m) => m,
        Err(e) => return json!({"name": case.name, "error": e}),
    };
    let (mut times, mut rejected, mut accepted_invalid) = (Vec::new(), 0u32, 0u32);
    for tokens in &case.valid {
        m.reset();
        let mut ok = true;
        for &t in tokens {
            let t0 = now_us();
            let computed = m.compute_mask(mask);
            times.push(now_us() - t0);
            let allowed = mask
                .get(t as usize / 32)
                .is_some_and(|w| w >> (t % 32) & 1 == 1);
            if computed.is_err() || !allowed || m.commit_token(t).is_err() {
                ok = false;
                break;
            }
        }
        if !(ok && m.can_end()) {
            rejected += 1;
        }
    }
    for tokens in &case.invalid {
        m.reset();
        if m.commit_tokens(tokens).is_ok() && m.can_end() {
            accepted_invalid += 1;
        }
    }
    json!({
        "name": case.name,
        "compile_ms": compile_ms,
        "mask_us": stats(&mut times),
        "valid_rejected": rejected,
        "invalid_accepted": accepted_invalid,
    })
}

/// One line of a record, for a terminal.
pub fn describe(r: &Value) -> String {
    let name = r["name"].as_str().unwrap_or_default();
    if let Some(e) = r["error"].as_str() {
        return format!("{name}: refused: {e}");
    }
    let m = &r["mask_us"];
    let f = |v: &Value| v.as_f64().unwrap_or(0.0);
    format!(
        "{name}: compile {:.2} ms, mask µs mean {:.1} p50 {:.1} p99 {:.1} max {:.1} ({} masks), valid rejected {}, invalid accepted {}",
        f(&r["compile_ms"]),
        f(&m["mean"]),
        f(&m["p50"]),
        f(&m["p99"]),
        f(&m["max"]),
        m["n"].as_u64().unwrap_or(0),
        r["valid_rejected"],
        r["invalid_accepted"],
    )
}

/// `{n, mean, p50, p99, max}` of `xs` (sorted in place); null when empty.
pub fn stats(xs: &mut [f64]) -> Value {
    if xs.is_empty() {
        return Value::Null;
    }
    xs.sort_by(f64::total_cmp);
    let q = |p: f64| xs[((xs.len() - 1) as f64 * p).round() as usize];
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    json!({"n": xs.len(), "mean": mean, "p50": q(0.5), "p99": q(0.99), "max": xs[xs.len() - 1]})
}

/// The median, or `None` of nothing.
pub fn median(mut xs: Vec<f64>) -> Option<f64> {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    (n > 0).then(|| {
        if n % 2 == 1 {
            xs[n / 2]
        } else {
            (xs[n / 2 - 1] + xs[n / 2]) / 2.0
        }
    })
}

/// Totals over records: compiled and refused, medians, rejections.
pub fn summarise(files: &[Value]) -> Value {
    let ok: Vec<&Value> = files
        .iter()
        .filter(|f| f.get("compile_ms").is_some())
        .collect();
    let sum = |k: &str| ok.iter().filter_map(|f| f[k].as_u64()).sum::<u64>();
    json!({
        "compiled": ok.len(),
        "refused": files.len() - ok.len(),
        "compile_ms_p50": median(ok.iter().filter_map(|f| f["compile_ms"].as_f64()).collect()),
        "mask_p50_us_median_over_schemas": median(ok.iter().filter_map(|f| f["mask_us"]["p50"].as_f64()).collect()),
        "valid_rejected": sum("valid_rejected"),
        "invalid_accepted": sum("invalid_accepted"),
    })
}

/// The vocabulary and cases of a file written by `bench/grammar/peers.py`
/// (`{vocab_hex, special, eos, cases: [{name, schema, valid, invalid}]}`), so that stampo
/// walks exactly the tokens its peers walked.
pub fn cases_from_json(v: &Value) -> Result<(Vocabulary, Vec<Case>), String> {
    let bad = || "not a cases file from bench/grammar/peers.py".to_string();
    let ids = |x: &Value| -> Vec<u32> {
        x.as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t.as_u64())
            .map(|t| t as u32)
            .collect()
    };
    let tokens: Vec<Vec<u8>> = v["vocab_hex"]
        .as_array()
        .ok_or_else(bad)?
        .iter()
        .map(|h| {
            let h = h.as_str().unwrap_or_default();
            (0..h.len() / 2)
                .filter_map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).ok())
                .collect()
        })
        .collect();
    let mut special = vec![false; tokens.len()];
    for s in ids(&v["special"]) {
        if let Some(x) = special.get_mut(s as usize) {
            *x = true;
        }
    }
    let vocab = Vocabulary::new(tokens, special, ids(&v["eos"]));
    let cases = v["cases"]
        .as_array()
        .ok_or_else(bad)?
        .iter()
        .map(|c| Case {
            name: c["name"].as_str().unwrap_or_default().to_string(),
            schema: c["schema"].clone(),
            valid: c["valid"]
                .as_array()
                .into_iter()
                .flatten()
                .map(ids)
                .collect(),
            invalid: c["invalid"]
                .as_array()
                .into_iter()
                .flatten()
                .map(ids)
                .collect(),
        })
        .collect();
    Ok((vocab, cases))
}
