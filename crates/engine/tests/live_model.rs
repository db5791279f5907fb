//! The engine on the real default model (SmolLM2-135M-Instruct, from `$STAMPO_MODELS`): the
//! seeds' requests through [`LoadedModel`] always give documents of the asked shape, and a
//! request that repeats the previous prompt's start reuses its KV cache without changing
//! the output.

// Test helpers fail the test by panicking, as assertions do.
#![allow(clippy::panic)]

mod common;

use std::ops::ControlFlow;

use serde_json::{Value, json};
use stampo_engine::response::ResponseMeta;
use stampo_engine::timing::StdClock;
use stampo_engine::{Completed, LoadedModel, Request, Streaming};
use stampo_model::DeviceKind;

fn load() -> Option<LoadedModel> {
    let path = common::smollm2_path()?;
    let bytes = std::fs::read(&path).expect("the model file reads");
    let device = DeviceKind::Cpu.device().expect("cpu device");
    Some(LoadedModel::load(&bytes, &device, 1024).expect("SmolLM2 loads"))
}

fn run(model: &mut LoadedModel, body: Value) -> Completed {
    let request = Request::from_body(&body).expect("valid request");
    let meta = ResponseMeta {
        id: "test".into(),
        created: 0,
        model: model.name.clone(),
    };
    let clock = StdClock::default();
    let mut on_chunk = |_: &Value| ControlFlow::Continue(());
    let mut streaming = Streaming {
        on_chunk: &mut on_chunk,
        cancel: None,
        should_stop: None,
        clock: &clock,
    };
    model
        .session(false)
        .run(&request, &meta, 42, &mut streaming)
        .expect("request runs")
}

fn content(done: &Completed) -> Value {
    let text = done.response["choices"][0]["message"]["content"]
        .as_str()
        .expect("content");
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn person_body(text: &str) -> Value {
    json!({
        "messages": [
            {"role": "system", "content": "Estrai la persona dal testo come JSON."},
            {"role": "user", "content": text}
        ],
        "temperature": 0,
        "max_tokens": 96,
        "response_format": {"type": "json_schema", "json_schema": {"name": "persona", "schema": {
            "type": "object",
            "properties": {
                "nome": {"type": "string"},
                "eta": {"type": "integer", "minimum": 0, "maximum": 120},
                "citta": {"type": "string"}
            },
            "required": ["nome", "eta", "citta"],
            "additionalProperties": false
        }}}
    })
}

#[test]
fn person_extraction_has_the_schemas_shape_and_reuses_the_prompt_prefix() {
    let Some(mut model) = load() else { return };
    let first = run(
        &mut model,
        person_body("Mi chiamo Giulia Rossi, ho 34 anni e vivo a Torino."),
    );
    let person = content(&first);
    let obj = person.as_object().expect("an object");
    assert_eq!(obj.len(), 3, "{person}");
    assert!(
        obj["nome"].is_string() && obj["citta"].is_string(),
        "{person}"
    );
    let eta = obj["eta"].as_i64().expect("eta is an integer");
    assert!((0..=120).contains(&eta), "{person}");
    assert_eq!(first.output.timings.cache_n, 0);

    // Same system prompt, another user message: the shared prefix comes from the cache.
    let other = person_body("Sono Marco Bianchi, 58 anni, di Napoli.");
    let cached = run(&mut model, other.clone());
    assert!(
        cached.output.timings.cache_n > 10,
        "cache_n {}",
        cached.output.timings.cache_n
    );
    // And the output is what a fresh model gives for that request.
    let mut fresh_model = load().expect("loads again");
    let fresh = run(&mut fresh_model, other);
    assert_eq!(fresh.output.tokens, cached.output.tokens);
}

#[test]
fn json_object_mode_and_a_gbnf_grammar_hold_on_the_real_model() {
    let Some(mut model) = load() else { return };
    let done = run(
        &mut model,
        json!({
            "messages": [{"role": "user", "content": "Describe a cat as a JSON object."}],
            "temperature": 0.8, "seed": 7, "max_tokens": 64,
            "response_format": {"type": "json_object"}
        }),
    );
    // As in llama.cpp, `json_object` without a schema means any JSON value.
    let text = done.response["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or("");
    if done.response["choices"][0]["finish_reason"] == "stop" {
        assert!(serde_json::from_str::<Value>(text).is_ok(), "{text}");
    }

    let done = run(
        &mut model,
        json!({
            "prompt": "Is the sky blue? Answer:",
            "n_predict": 8, "temperature": 0,
            "grammar": "root ::= \" \"? (\"yes\" | \"no\")"
        }),
    );
    let text = done.response["content"].as_str().expect("content");
    assert!(
        ["yes", "no", " yes", " no"].contains(&text),
        "{text:?} is not in the grammar's language"
    );
}

/// On the wgpu device the loop awaits each step's logits ([`stampo_engine::LogitsSource::submit`],
/// the path WebGPU takes in the browser) when no grammar runs beside it, and overlaps the
/// mask on a thread when one does: both give the CPU's first token, and the schema's shape.
#[test]
fn on_the_wgpu_device_requests_run_through_the_async_loop() {
    let Some(path) = common::smollm2_path() else {
        return;
    };
    let Some(device) = common::wgpu_device() else {
        return;
    };
    let bytes = std::fs::read(&path).expect("the model file reads");
    let mut gpu = LoadedModel::load(&bytes, &device, 256).expect("SmolLM2 loads on wgpu");
    let mut cpu = load().expect("SmolLM2 loads on the CPU");
    let probe = json!({"prompt": "The capital of France is", "n_predict": 2, "temperature": 0});
    let (on_cpu, on_gpu) = (run(&mut cpu, probe.clone()), run(&mut gpu, probe));
    assert_eq!(
        on_gpu.output.tokens[0], on_cpu.output.tokens[0],
        "the same first token"
    );
    let city = json!({
        "prompt": "The capital of France is",
        "n_predict": 8,
        "temperature": 0,
        "json_schema": {"enum": ["Paris", "London", "Rome"]}
    });
    let done = run(&mut gpu, city);
    let text = done.response["content"].as_str().expect("content");
    let answer: Value = serde_json::from_str(text).expect("JSON");
    assert!(
        ["Paris", "London", "Rome"].contains(&answer.as_str().unwrap_or("")),
        "{text}"
    );
    assert_eq!(done.response["stop_type"], "eos");
}

#[test]
fn a_warm_up_pass_changes_nothing_a_request_sees() {
    let Some(mut cold) = load() else { return };
    let mut warm = load().expect("SmolLM2 loads again");
    stampo_engine::block_on(warm.source.warm_up()).expect("warm-up");
    let body = json!({"prompt": "The capital of France is", "n_predict": 4, "temperature": 0});
    let (a, b) = (run(&mut cold, body.clone()), run(&mut warm, body));
    assert_eq!(a.output.tokens, b.output.tokens);
    assert_eq!(
        b.output.timings.cache_n, 0,
        "the warm-up's token is forgotten"
    );
}
