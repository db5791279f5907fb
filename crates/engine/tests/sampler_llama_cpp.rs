//! stampo's chain against llama.cpp's own: `tests/fixtures/sampler/generate.py` ran
//! llama.cpp's samplers (penalties → top-k → typical → top-p → min-p → temperature → dist,
//! through llama-cpp-python's C API) on fixed logits with fixed seeds and recorded the
//! tokens drawn, step after step from one chain. Replaying them here checks the stage
//! definitions, the order they leave the candidates in, MT19937 and the draw itself.

use serde_json::Value;
use stampo_engine::{Sampler, SamplingParams, Stage};

fn fixture() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/sampler/chains.json"
    );
    let text = std::fs::read_to_string(path).expect("the committed fixture");
    serde_json::from_str(&text).expect("JSON")
}

fn f(p: &Value, key: &str, default: f64) -> f32 {
    p.get(key).and_then(Value::as_f64).unwrap_or(default) as f32
}

#[test]
fn every_chain_draws_what_llama_cpp_drew() {
    let fx = fixture();
    let logits: Vec<f32> = fx["logits"]
        .as_array()
        .expect("logits")
        .iter()
        .map(|v| v.as_f64().expect("number") as f32)
        .collect();
    let history: Vec<u32> = fx["history"]
        .as_array()
        .expect("history")
        .iter()
        .map(|v| v.as_u64().expect("id") as u32)
        .collect();
    let cases = fx["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 24);
    let mut mismatches = Vec::new();
    for case in cases {
        let p = &case["params"];
        let params = SamplingParams {
            temperature: f(p, "temp", 0.8),
            top_k: p["top_k"].as_i64().expect("top_k") as i32,
            top_p: f(p, "top_p", 1.0),
            min_p: f(p, "min_p", 0.0),
            typical_p: f(p, "typ_p", 1.0),
            min_keep: p.get("min_keep").and_then(Value::as_u64).unwrap_or(0) as u32,
            repeat_penalty: f(p, "repeat", 1.0),
            repeat_last_n: p.get("last_n").and_then(Value::as_i64).unwrap_or(64) as i32,
            frequency_penalty: f(p, "freq", 0.0),
            presence_penalty: f(p, "present", 0.0),
            seed: Some(case["seed"].as_u64().expect("seed") as u32),
            stages: Stage::DEFAULT_ORDER.to_vec(),
        };
        let mut sampler = Sampler::new(params, 0, 4096);
        for &t in &history {
            sampler.accept(t);
        }
        let expected: Vec<u32> = case["draws"]
            .as_array()
            .expect("draws")
            .iter()
            .map(|v| v.as_u64().expect("id") as u32)
            .collect();
        let got: Vec<u32> = expected
            .iter()
            .map(|_| {
                let t = sampler.sample(&logits, None).expect("a token").token;
                sampler.accept(t);
                t
            })
            .collect();
        if got != expected {
            mismatches.push(format!(
                "{} seed {}:\n  llama.cpp {expected:?}\n  stampo    {got:?}",
                case["name"], case["seed"]
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
