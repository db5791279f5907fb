//! What the grammar costs per generated token on a real vocabulary, without a model: the
//! logits come from a fixed-seed generator, the tokenizer and vocabulary from a GGUF file.
//!
//! ```sh
//! cargo run --release -p stampo-engine --example mask_cost -- \
//!     $HOME/.cache/stampo/models/SmolLM2-135M-Instruct.Q4_1.gguf
//! ```
//!
//! For each constraint it runs a few seeded generations (temperature 1, finish inside the
//! budget) and prints the grammar step's cost (commit + next mask: mean, p99, max µs) and
//! the sampler's cost per token with and without the mask, for comparison with a forward
//! pass of the model.

use std::ops::ControlFlow;
use std::sync::Arc;

use serde_json::json;
use stampo_engine::constraint::{self, GrammarConstraint};
use stampo_engine::generate::{BoxError, Control, GenerateOptions, LogitsSource, generate};
use stampo_engine::text::TokenizerText;
use stampo_engine::timing::{Clock, StdClock};
use stampo_engine::{Constraint, Request, Sampler, SamplingParams};

/// Logits in [-4, 4) from a 64-bit LCG (Knuth's MMIX constants).
struct Noise {
    state: u64,
    n: usize,
}

impl LogitsSource for Noise {
    fn forward(&mut self, _tokens: &[u32]) -> Result<Vec<f32>, BoxError> {
        Ok((0..self.n)
            .map(|_| {
                self.state = self
                    .state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((self.state >> 40) as f32 / (1u64 << 24) as f32) * 8.0 - 4.0
            })
            .collect())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: mask_cost MODEL.gguf")?;
    let bytes = std::fs::read(&path)?;
    let gguf = stampo_gguf::Gguf::parse(&bytes)?;
    let text = TokenizerText::new(stampo_tokenizer::Tokenizer::from_gguf(&gguf)?);
    let n_vocab = text.tokenizer().n_vocab();
    let clock = StdClock::default();
    let t0 = clock.now_ms();
    let gv = Arc::new(text.grammar_vocabulary());
    println!(
        "{path}: {n_vocab} tokens, grammar vocabulary built in {:.1} ms",
        clock.now_ms() - t0
    );

    let person = json!({"type": "object", "properties": {
        "nome": {"type": "string"}, "eta": {"type": "integer", "minimum": 0, "maximum": 120},
        "citta": {"type": "string"}}, "required": ["nome", "eta", "citta"], "additionalProperties": false});
    let tools = Request::from_chat(&json!({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required",
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}]}))?
    .constraint;
    let cases = [
        ("person schema", Constraint::JsonSchema(person)),
        ("json_object", Constraint::AnyJson),
        ("get_weather tool", tools),
        (
            "gbnf yes/no list",
            Constraint::Gbnf(
                r#"root ::= "[" item ("," item)* "]"
item ::= "\"yes\"" | "\"no\"""#
                    .into(),
            ),
        ),
    ];
    for (name, c) in cases {
        let compiled = constraint::compile(&c, false)?.ok_or("no constraint")?;
        let mut all_us = Vec::new();
        let (mut tokens, mut decode_ms) = (0usize, 0.0f64);
        let (mut ff_tokens, mut ff_forced, mut ff_passes) = (0usize, 0usize, 0usize);
        for seed in 0..5u32 {
            let mut m = GrammarConstraint::new(&compiled, Arc::clone(&gv))?;
            let params = SamplingParams {
                temperature: 1.0,
                seed: Some(seed),
                ..SamplingParams::default()
            };
            let mut sampler = Sampler::new(params, 0, 4096);
            let opts = GenerateOptions {
                n_predict: Some(200),
                stop: Vec::new(),
                ignore_eos: false,
                n_probs: 0,
                finish_in_budget: true,
                n_ctx: 4096,
                overlap: false,
                fast_forward: false,
            };
            let mut on_event = |_: &stampo_engine::Event<'_>| ControlFlow::Continue(());
            let mut control = Control {
                on_event: &mut on_event,
                cancel: None,
                clock: &clock,
            };
            let mut model = Noise {
                state: u64::from(seed),
                n: n_vocab,
            };
            let out = generate(
                &mut model,
                &text,
                Some(&mut m),
                &mut sampler,
                &[1],
                &opts,
                &mut control,
            )?;
            tokens += out.tokens.len();
            decode_ms += out.timings.predicted_ms;
            let s = out.mask_stats.ok_or("no stats")?;
            // The same request with fast-forward: how many tokens skip sampling and how
            // many forward passes remain.
            let mut m = GrammarConstraint::new(&compiled, Arc::clone(&gv))?;
            let params = SamplingParams {
                temperature: 1.0,
                seed: Some(seed),
                ..SamplingParams::default()
            };
            let mut sampler = Sampler::new(params, 0, 4096);
            let mut model = Noise {
                state: u64::from(seed),
                n: n_vocab,
            };
            let ff_opts = GenerateOptions {
                fast_forward: true,
                ..opts.clone()
            };
            let mut on_event = |_: &stampo_engine::Event<'_>| ControlFlow::Continue(());
            let mut control = Control {
                on_event: &mut on_event,
                cancel: None,
                clock: &clock,
            };
            let ff = generate(
                &mut model,
                &text,
                Some(&mut m),
                &mut sampler,
                &[1],
                &ff_opts,
                &mut control,
            )?;
            ff_tokens += ff.tokens.len();
            ff_forced += ff.fast_forwarded;
            ff_passes += ff.forward_passes;
            // Re-derive the per-step samples' summary across runs from each run's own.
            all_us.push((s.steps, s.mean_us, s.p99_us, s.max_us));
        }
        let steps: usize = all_us.iter().map(|r| r.0).sum();
        let mean = all_us.iter().map(|r| r.0 as f64 * r.1).sum::<f64>() / steps as f64;
        let p99 = all_us.iter().map(|r| r.2).fold(0.0, f64::max);
        let max = all_us.iter().map(|r| r.3).fold(0.0, f64::max);
        println!(
            "{name:>18}: {steps} grammar steps, mean {mean:.1} µs, worst per-run p99 {p99:.1} µs, max {max:.1} µs; \
             loop without a model {:.1} µs/token",
            decode_ms * 1e3 / tokens as f64
        );
        println!(
            "{:>18}  fast-forward: {ff_forced} of {ff_tokens} tokens appended without sampling, {ff_passes} forward passes",
            ""
        );
    }

    // The sampler alone on this vocabulary, for scale (no mask).
    let mut sampler = Sampler::new(
        SamplingParams {
            seed: Some(1),
            ..SamplingParams::default()
        },
        0,
        4096,
    );
    let mut noise = Noise {
        state: 9,
        n: n_vocab,
    };
    let logits = noise.forward(&[]).map_err(|e| e.to_string())?;
    let t = clock.now_ms();
    for _ in 0..200 {
        sampler.sample(&logits, None);
    }
    println!(
        "sampler chain (server defaults, no mask): {:.1} µs/token",
        (clock.now_ms() - t) * 1e3 / 200.0
    );
    Ok(())
}
