//! Greedy constrained decoding against llama.cpp: `tests/fixtures/greedy/generate.py` ran ten
//! requests (three person extractions, json_object, a get_weather call, an enum array, GBNF
//! yes/no, a list, a number) through llama-cpp-python on SmolLM2 and recorded the model's
//! logits at every step. Replaying those logits through stampo's tokenizer vocabulary,
//! grammar (compiled from the same schema or GBNF), mask and greedy sampler must choose
//! exactly the tokens llama.cpp chose.

mod common;

use std::ops::ControlFlow;
use std::sync::Arc;

use serde_json::Value;
use stampo_engine::constraint::{self, GrammarConstraint};
use stampo_engine::generate::{BoxError, Control, GenerateOptions, LogitsSource, generate};
use stampo_engine::text::TokenizerText;
use stampo_engine::timing::StdClock;
use stampo_engine::{Constraint, Sampler, SamplingParams};

/// llama.cpp's recorded logits, one step per forward call (absent tokens at -1e30).
struct Replay<'a> {
    steps: &'a [Value],
    n_vocab: usize,
    at: usize,
}

impl LogitsSource for Replay<'_> {
    fn forward(&mut self, _tokens: &[u32]) -> Result<Vec<f32>, BoxError> {
        let mut logits = vec![-1e30f32; self.n_vocab];
        if let Some(step) = self.steps.get(self.at) {
            let ids = step["ids"].as_array().ok_or("ids")?;
            let values = step["logits"].as_array().ok_or("logits")?;
            for (id, v) in ids.iter().zip(values) {
                logits[id.as_u64().ok_or("id")? as usize] = v.as_f64().ok_or("logit")? as f32;
            }
        }
        self.at += 1;
        Ok(logits)
    }
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_u64)
                .map(|t| t as u32)
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn greedy_choices_match_llama_cpp_on_ten_requests() {
    let Some(path) = common::smollm2_path() else {
        return;
    };
    let bytes = std::fs::read(path).expect("read");
    let gguf = stampo_gguf::Gguf::parse(&bytes).expect("gguf");
    let text =
        TokenizerText::new(stampo_tokenizer::Tokenizer::from_gguf(&gguf).expect("tokenizer"));
    let gv = Arc::new(text.grammar_vocabulary());
    let fixture = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/greedy/cases.json"
    ))
    .expect("fixture");
    let fixture: Value = serde_json::from_str(&fixture).expect("JSON");
    let n_vocab = fixture["n_vocab"].as_u64().expect("n_vocab") as usize;
    let cases = fixture["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 10);
    let clock = StdClock::default();
    let mut failures = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap_or("?");
        let c = &case["constraint"];
        let constraint = match (c.get("gbnf"), c.get("json_schema")) {
            (Some(g), _) => Constraint::Gbnf(g.as_str().expect("gbnf").to_string()),
            (None, Some(s)) => Constraint::JsonSchema(s.clone()),
            _ => panic!("{name}: no constraint"),
        };
        let compiled = constraint::compile(&constraint, false)
            .expect("compiles")
            .expect("a constraint");
        let mut matcher = GrammarConstraint::new(&compiled, Arc::clone(&gv)).expect("matcher");
        let steps = case["steps"].as_array().expect("steps");
        let mut model = Replay {
            steps,
            n_vocab,
            at: 0,
        };
        let mut sampler = Sampler::new(
            SamplingParams {
                temperature: 0.0,
                ..SamplingParams::default()
            },
            0,
            512,
        );
        let opts = GenerateOptions {
            n_predict: Some(48),
            stop: Vec::new(),
            ignore_eos: false,
            n_probs: 0,
            finish_in_budget: false,
            n_ctx: 512,
            overlap: false,
            fast_forward: false,
        };
        let mut on_event = |_: &stampo_engine::Event<'_>| ControlFlow::Continue(());
        let mut control = Control {
            on_event: &mut on_event,
            cancel: None,
            clock: &clock,
        };
        let prompt = ids(&case["prompt_tokens"]);
        let expected = ids(&case["tokens"]);
        let out = generate(
            &mut model,
            &text,
            Some(&mut matcher),
            &mut sampler,
            &prompt,
            &opts,
            &mut control,
        );
        match out {
            Ok(out) if out.tokens == expected => {}
            Ok(out) => {
                let at = out
                    .tokens
                    .iter()
                    .zip(&expected)
                    .take_while(|(a, b)| a == b)
                    .count();
                failures.push(format!(
                    "{name}: first difference at step {at}: llama.cpp {:?}, stampo {:?}\n  llama.cpp: {:?}\n  stampo:    {:?}",
                    expected.get(at),
                    out.tokens.get(at),
                    case["text"],
                    out.text
                ));
            }
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
