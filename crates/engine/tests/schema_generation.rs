//! JSON Schema, any-JSON and tool-call constraints compiled by the grammar crate and driven
//! through the generation loop by a noisy fake model (a test double drawing arbitrary logits
//! from a fixed-seed generator): whatever the model wants, the output must be valid.

use std::ops::ControlFlow;
use std::sync::Arc;

use serde_json::{Value, json};
use stampo_engine::constraint::{self, GrammarConstraint};
use stampo_engine::generate::{
    BoxError, Control, GenerateOptions, LogitsSource, StopKind, Vocabulary, generate,
};
use stampo_engine::timing::StdClock;
use stampo_engine::tool_calls::parse_tool_output;
use stampo_engine::{Constraint, Error, Request, Sampler, SamplingParams};
use stampo_grammar::vocab::Vocabulary as GrammarVocabulary;

const EOS: u32 = 256 + 6;

/// Single bytes plus a few multi-byte JSON-ish tokens, and an end-of-sequence token.
fn pieces() -> Vec<Vec<u8>> {
    let mut p: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for w in ["{\"", "\":", "\"nome", "\"eta", "\"citta", "Roma"] {
        p.push(w.as_bytes().to_vec());
    }
    p.push(Vec::new());
    p
}

struct Vocab(Vec<Vec<u8>>);

impl Vocabulary for Vocab {
    fn token_bytes(&self, token: u32) -> &[u8] {
        self.0.get(token as usize).map_or(&[], Vec::as_slice)
    }
    fn end_of_generation(&self) -> &[u32] {
        &[EOS]
    }
    /// One token per byte: the byte's own id.
    fn tokenize(&self, bytes: &[u8]) -> Option<Vec<u32>> {
        Some(bytes.iter().map(|&b| u32::from(b)).collect())
    }
}

/// Arbitrary logits in [-4, 4) from a 64-bit LCG (Knuth's MMIX constants), fixed seed.
struct NoisyModel(u64);

impl LogitsSource for NoisyModel {
    fn forward(&mut self, _tokens: &[u32]) -> Result<Vec<f32>, BoxError> {
        Ok((0..=EOS)
            .map(|_| {
                self.0 = self
                    .0
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 8.0 - 4.0
            })
            .collect())
    }
}

fn generate_under(c: &Constraint, seed: u32, n_predict: u32) -> (String, StopKind) {
    let out = generate_with(c, seed, n_predict, false);
    (out.text, out.stop)
}

fn generate_with(
    c: &Constraint,
    seed: u32,
    n_predict: u32,
    fast_forward: bool,
) -> stampo_engine::Output {
    let compiled = constraint::compile(c, false)
        .expect("compiles")
        .expect("a constraint");
    let special = vec![false; pieces().len()];
    let gv = Arc::new(GrammarVocabulary::new(pieces(), special, vec![EOS]));
    let mut matcher = GrammarConstraint::new(&compiled, gv).expect("matcher");
    let params = SamplingParams {
        temperature: 1.2,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        seed: Some(seed),
        ..SamplingParams::default()
    };
    let mut sampler = Sampler::new(params, 0, 4096);
    let opts = GenerateOptions {
        n_predict: Some(n_predict),
        stop: Vec::new(),
        ignore_eos: false,
        n_probs: 0,
        finish_in_budget: true,
        n_ctx: 4096,
        overlap: true,
        fast_forward,
    };
    let clock = StdClock::default();
    let mut on_event = |_: &stampo_engine::Event<'_>| ControlFlow::Continue(());
    let mut control = Control {
        on_event: &mut on_event,
        cancel: None,
        clock: &clock,
    };
    let mut model = NoisyModel(u64::from(seed) + 1);
    generate(
        &mut model,
        &Vocab(pieces()),
        Some(&mut matcher),
        &mut sampler,
        &[1],
        &opts,
        &mut control,
    )
    .expect("generation succeeds")
}

fn person_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "nome": {"type": "string", "maxLength": 12},
            "eta": {"type": "integer", "minimum": 0, "maximum": 120},
            "citta": {"type": "string", "maxLength": 12}
        },
        "required": ["nome", "eta", "citta"],
        "additionalProperties": false
    })
}

#[test]
fn the_italian_person_extraction_is_always_valid() {
    let schema = person_schema();
    for seed in 0..12 {
        let (text, stop) = generate_under(&Constraint::JsonSchema(schema.clone()), seed, 120);
        assert_eq!(
            stop,
            StopKind::Eos,
            "seed {seed}: finish-in-budget closes the document: {text}"
        );
        let v: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("seed {seed}: {e}: {text}"));
        let o = v.as_object().expect("an object");
        let keys: Vec<&str> = o.keys().map(String::as_str).collect();
        assert_eq!(keys, ["nome", "eta", "citta"], "seed {seed}: {text}");
        let eta = o["eta"]
            .as_i64()
            .unwrap_or_else(|| panic!("seed {seed}: eta not an integer: {text}"));
        assert!((0..=120).contains(&eta), "seed {seed}: {text}");
        assert!(o["nome"].as_str().is_some_and(|s| s.chars().count() <= 12));
    }
}

#[test]
fn json_object_mode_gives_json() {
    for seed in 0..8 {
        let (text, _) = generate_under(&Constraint::AnyJson, seed, 60);
        // Checked for syntax only: the grammar allows numbers like 1e35795273, which are
        // JSON but out of f64's range, and `IgnoredAny` scans numbers without converting.
        let parsed = serde_json::from_str::<serde::de::IgnoredAny>(&text);
        assert!(parsed.is_ok(), "seed {seed}: {text:?}");
    }
}

#[test]
fn required_tool_choice_calls_only_offered_tools_with_valid_arguments() {
    let body = json!({
        "messages": [{"role": "user", "content": "Che tempo fa a Roma?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string", "maxLength": 10}},
            "required": ["city"], "additionalProperties": false}}}],
        "tool_choice": "required"
    });
    let request = Request::from_chat(&body).expect("accepted");
    for seed in 0..8 {
        let (text, stop) = generate_under(&request.constraint, seed, 100);
        assert_eq!(stop, StopKind::Eos, "seed {seed}: {text}");
        let parsed =
            parse_tool_output(&text, "call_").unwrap_or_else(|| panic!("seed {seed}: {text}"));
        assert_eq!(parsed.calls.len(), 1);
        assert_eq!(parsed.calls[0].name, "get_weather");
        let args: Value =
            serde_json::from_str(&parsed.calls[0].arguments).expect("arguments are JSON");
        assert!(args["city"].is_string(), "seed {seed}: {text}");
    }
}

#[test]
fn bad_grammars_and_schemas_are_errors_naming_the_field() {
    let gbnf = constraint::compile(&Constraint::Gbnf("root ::= \"unterminated".into()), false);
    assert!(
        matches!(
            gbnf,
            Err(Error::Grammar {
                field: "grammar",
                ..
            })
        ),
        "{:?}",
        gbnf.err()
    );
    let schema = constraint::compile(
        &Constraint::JsonSchema(json!({"$ref": "#/$defs/missing"})),
        false,
    );
    assert!(
        matches!(
            schema,
            Err(Error::Schema {
                field: "json_schema",
                ..
            })
        ),
        "{:?}",
        schema.err()
    );
    assert!(
        constraint::compile(&Constraint::None, false)
            .expect("ok")
            .is_none()
    );
}

#[test]
fn unenforced_keywords_come_back_as_warnings_or_refusals_in_strict_mode() {
    let schema = json!({"type": "array", "items": {"type": "integer"}, "uniqueItems": true});
    let compiled = constraint::compile(&Constraint::JsonSchema(schema.clone()), false)
        .expect("compiles")
        .expect("a constraint");
    assert!(
        compiled
            .warnings
            .iter()
            .any(|w| w.field.starts_with("json_schema#") && w.message.contains("uniqueItems")),
        "{:?}",
        compiled.warnings
    );
    assert!(matches!(
        constraint::compile(&Constraint::JsonSchema(schema), true),
        Err(Error::Schema { .. })
    ));
}

#[test]
fn fast_forward_appends_forced_text_without_sampling_it() {
    let schema = person_schema();
    for seed in 0..6 {
        let slow = generate_with(&Constraint::JsonSchema(schema.clone()), seed, 120, false);
        let fast = generate_with(&Constraint::JsonSchema(schema.clone()), seed, 120, true);
        assert_eq!(slow.fast_forwarded, 0);
        assert_eq!(
            slow.forward_passes,
            slow.tokens.len() - 1,
            "one pass per token but the last"
        );
        // Property names are forced once their opening quote is out (whitespace may come
        // between JSON tokens, so less is forced around them).
        assert!(
            fast.fast_forwarded >= 3,
            "seed {seed}: {}",
            fast.fast_forwarded
        );
        assert!(
            fast.forward_passes + fast.fast_forwarded <= fast.tokens.len(),
            "seed {seed}"
        );
        let v: Value = serde_json::from_str(&fast.text)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}: {}", fast.text));
        assert!(
            v["eta"].as_i64().is_some_and(|e| (0..=120).contains(&e)),
            "seed {seed}: {}",
            fast.text
        );
    }
}
