//! The engine on the real default model (SmolLM2-135M-Instruct, from `$STAMPO_MODELS`): the
//! seeds' requests through [`LoadedModel`] always give documents of the asked shape (judged by
//! the `jsonschema` crate, an independent validator, not by stampo's grammar), a request
//! that repeats the previous prompt's start reuses its KV cache without changing the output,
//! and a cancelled request leaves the model serving as before.

// Test helpers fail the test by panicking, as assertions do.
#![allow(clippy::panic)]

mod common;

use std::ops::ControlFlow;

use common::compile_log;

use serde_json::{Value, json};
use stampo_engine::generate::LogitsSource;
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
    run_streaming(model, body, &mut |_| ControlFlow::Continue(()))
}

/// Runs `body`, handing each server-shaped chunk to `on_chunk` (`Break` cancels).
fn run_streaming(
    model: &mut LoadedModel,
    body: Value,
    on_chunk: &mut dyn FnMut(&Value) -> ControlFlow<()>,
) -> Completed {
    let request = Request::from_body(&body).expect("valid request");
    let meta = ResponseMeta {
        id: "test".into(),
        created: 0,
        model: model.name.clone(),
    };
    let clock = StdClock::default();
    let mut streaming = Streaming {
        on_chunk,
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

/// Fails unless `doc` is valid against `schema` by the `jsonschema` crate's judgement.
fn assert_valid(schema: &Value, doc: &Value) {
    let validator =
        jsonschema::validator_for(schema).unwrap_or_else(|e| panic!("the schema compiles: {e}"));
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{doc} fails its schema: {errors:?}");
}

fn chat_with_schema(system: &str, user: &str, schema: &Value) -> Value {
    json!({
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": user}
        ],
        "max_tokens": 160,
        // Near the budget, steer to the schema's shortest ending: every document is whole.
        "finish_in_budget": true,
        "response_format": {"type": "json_schema", "json_schema": {"name": "doc", "schema": schema}}
    })
}

/// The seeds' order schema: `$defs`, `anyOf`, `pattern` and `multipleOf`.
fn order_schema() -> Value {
    json!({
        "$defs": {
            "item": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
                    "quantity": {"type": "integer", "minimum": 1},
                    "price": {"type": "number", "multipleOf": 0.01}
                },
                "required": ["sku", "quantity", "price"],
                "additionalProperties": false
            }
        },
        "type": "object",
        "properties": {
            "order_id": {"type": "string"},
            "items": {"type": "array", "items": {"$ref": "#/$defs/item"}, "minItems": 1},
            "payment": {
                "anyOf": [
                    {"type": "object", "properties": {"card_last4": {"type": "string", "pattern": "^[0-9]{4}$"}}, "required": ["card_last4"]},
                    {"type": "object", "properties": {"iban": {"type": "string"}}, "required": ["iban"]}
                ]
            }
        },
        "required": ["order_id", "items", "payment"]
    })
}

fn weather_tool() -> Value {
    json!({"type": "function", "function": {
        "name": "get_weather",
        "description": "The current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"enum": ["celsius", "fahrenheit"]}
            },
            "required": ["city", "unit"],
            "additionalProperties": false
        }
    }})
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
    let body = person_body("");
    assert_valid(&body["response_format"]["json_schema"]["schema"], &person);
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
/// the path WebGPU takes in the browser) when no grammar runs beside it; when one does, the
/// mask is computed beside the layers and only the allowed rows of the head are computed and
/// read back ([`stampo_engine::LogitsSource::submit_wanted`]), and greedy decoding's token is
/// chosen on the device ([`stampo_engine::LogitsSource::submit_top`]): they give the CPU's
/// tokens, the schema's shape, and the tokens the sampler chooses among the same device's
/// logits read back whole (`n_probs`). After the warm-up none of them compiles a kernel
/// (CubeCL's compilation log; `compiles_once.rs` for a long context).
#[test]
fn on_the_wgpu_device_requests_run_through_the_async_loop() {
    let Some(path) = common::smollm2_path() else {
        return;
    };
    // The only test of this file on the wgpu device: CubeCL is first set up here.
    let log = compile_log::log_compilations();
    let Some(device) = common::wgpu_device() else {
        return;
    };
    let bytes = std::fs::read(&path).expect("the model file reads");
    let mut gpu = LoadedModel::load(&bytes, &device, 256).expect("SmolLM2 loads on wgpu");
    let mut cpu = load().expect("SmolLM2 loads on the CPU");
    // The warm-up's passes (a prompt, steps under masks) are forgotten, and its first step
    // was recorded for replay.
    stampo_engine::block_on(gpu.source.warm_up()).expect("warm-up");
    let warmed = compile_log::logged(&log);
    assert_eq!(gpu.source.step_graphs(), Some("recorded"));
    let probe = json!({"prompt": "The capital of France is", "n_predict": 2, "temperature": 0});
    let (on_cpu, on_gpu) = (run(&mut cpu, probe.clone()), run(&mut gpu, probe));
    assert_eq!(
        on_gpu.output.tokens[0], on_cpu.output.tokens[0],
        "the same first token"
    );
    assert_eq!(on_gpu.output.timings.cache_n, 0, "the warm-up is forgotten");
    // A cache too small for the warm-up's prompt (or its three steps) warms up as far as it
    // holds, and serves requests after.
    let mut tiny = LoadedModel::load(&bytes, &device, 4).expect("SmolLM2 loads on wgpu");
    assert_eq!(tiny.source.context_size(), 4);
    stampo_engine::block_on(tiny.source.warm_up()).expect("warm-up in 4 positions");
    let one = json!({"prompt": "Paris", "n_predict": 1, "temperature": 0});
    assert_eq!(run(&mut tiny, one).output.tokens.len(), 1);
    let city = json!({
        "prompt": "The capital of France is",
        "n_predict": 8,
        "temperature": 0,
        "json_schema": {"enum": ["Paris", "London", "Rome"]}
    });
    let done = run(&mut gpu, city.clone());
    let text = done.response["content"].as_str().expect("content");
    let answer: Value = serde_json::from_str(text).expect("JSON");
    assert!(
        ["Paris", "London", "Rome"].contains(&answer.as_str().unwrap_or("")),
        "{text}"
    );
    assert_eq!(done.response["stop_type"], "eos");
    assert_eq!(
        done.output.tokens,
        run(&mut cpu, city.clone()).output.tokens
    );
    // With `ignore_eos` the finished grammar leaves no token at all: the step that asked for
    // none ends the request, whether the device chose or the logits were read back.
    for n_probs in [0, 1] {
        let mut body = city.clone();
        body["ignore_eos"] = json!(true);
        body["n_probs"] = json!(n_probs);
        gpu.source.begin(&[]).expect("the cache empties");
        let done = run(&mut gpu, body);
        assert_eq!(
            done.response["content"].as_str(),
            Some(text),
            "n_probs {n_probs}"
        );
    }

    // Greedy, and llama.cpp's default chain at a temperature: the most likely tokens (1, 40)
    // chosen on the device, or among every logit read back for `n_probs`.
    for sampling in [
        json!({"temperature": 0}),
        json!({"temperature": 0.8, "seed": 3}),
    ] {
        let mut body = json!({"prompt": "Once upon a time", "n_predict": 12});
        for (k, v) in sampling.as_object().expect("an object") {
            body[k] = v.clone();
        }
        let mut whole = body.clone();
        whole["n_probs"] = json!(1);
        let tokens: Vec<Vec<u32>> = [body, whole]
            .into_iter()
            .map(|body| {
                gpu.source.begin(&[]).expect("the cache empties");
                run(&mut gpu, body).output.tokens
            })
            .collect();
        assert_eq!(tokens[0], tokens[1], "{sampling}");
    }
    compile_log::assert_none_since(&log, &warmed, "the requests after the warm-up");
    let _ = std::fs::remove_file(&log);
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

/// The order schema, greedy and sampled under three seeds: every document is whole (the
/// budget is steered) and valid by an independent validator.
#[test]
fn the_order_schema_holds_greedy_and_sampled() {
    let Some(mut model) = load() else { return };
    let schema = order_schema();
    let text = "Ordine A-1043: 2 pezzi ABC-1234 a 9,99 euro, 1 pezzo XYZ-0001 a 120,50. \
                Pagato con la carta che finisce per 4421.";
    let samplings = [
        json!({"temperature": 0}),
        json!({"temperature": 0.9, "seed": 1}),
        json!({"temperature": 0.9, "seed": 2}),
        json!({"temperature": 1.2, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "seed": 3}),
    ];
    for sampling in samplings {
        let mut body = chat_with_schema("Extract the order as JSON.", text, &schema);
        for (k, v) in sampling.as_object().expect("an object") {
            body[k] = v.clone();
        }
        let done = run(&mut model, body);
        let finish = &done.response["choices"][0]["finish_reason"];
        assert!(
            finish == "stop" || finish == "length",
            "{sampling}: {finish}"
        );
        assert_valid(&schema, &content(&done));
    }
}

/// Under a schema the CPU model computes only the output head's rows of the tokens the mask
/// allows (and end-of-generation's); `n_probs` makes it compute every logit (the report
/// takes them all). The tokens drawn are the same, greedy and sampled. (Each run on a model
/// of its own: a repeated prompt would be decoded from the cache, not prefilled, and a
/// prefill's last position is not bit for bit a decoding step's.)
#[test]
fn computing_only_the_allowed_logits_changes_no_token() {
    let Some(mut model) = load() else { return };
    let mut other = load().expect("loads again");
    let prompt = "Ordine A-1043: 2 pezzi ABC-1234 a 9,99 euro. Pagato con la carta 4421.\n\
                  The order as JSON: ";
    for sampling in [
        json!({"temperature": 0}),
        json!({"temperature": 0.9, "seed": 2}),
    ] {
        let tokens: Vec<Vec<u32>> = [(0, &mut model), (1, &mut other)]
            .into_iter()
            .map(|(n_probs, model)| {
                let mut body = json!({
                    "prompt": prompt, "n_predict": 48, "n_probs": n_probs,
                    "json_schema": order_schema()
                });
                for (k, v) in sampling.as_object().expect("an object") {
                    body[k] = v.clone();
                }
                let tokens = run(model, body).output.tokens;
                model.source.begin(&[]).expect("the cache empties");
                tokens
            })
            .collect();
        assert!(tokens[0].len() > 10, "{sampling}: {:?}", tokens[0]);
        assert_eq!(tokens[0], tokens[1], "{sampling}");
    }
}

/// `tool_choice: "required"` calls the offered tool with arguments valid for its parameters;
/// a named `tool_choice` calls that tool and no other.
#[test]
fn a_get_weather_tool_call_has_valid_arguments() {
    let Some(mut model) = load() else { return };
    let other = json!({"type": "function", "function": {
        "name": "get_time", "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}}
    }});
    let choices = [
        json!("required"),
        json!({"type": "function", "function": {"name": "get_weather"}}),
    ];
    for choice in choices {
        let done = run(
            &mut model,
            json!({
                "messages": [{"role": "user", "content": "What's the weather like in Rome, in celsius?"}],
                "tools": [other.clone(), weather_tool()],
                "tool_choice": choice,
                "temperature": 0,
                "max_tokens": 96,
                "finish_in_budget": true
            }),
        );
        let choice0 = &done.response["choices"][0];
        assert_eq!(choice0["finish_reason"], "tool_calls", "{}", done.response);
        let calls = choice0["message"]["tool_calls"].as_array().expect("calls");
        assert!(!calls.is_empty());
        for call in calls {
            if choice != "required" {
                assert_eq!(call["function"]["name"], "get_weather", "{call}");
            }
            let tool = match call["function"]["name"].as_str() {
                Some("get_weather") => weather_tool(),
                Some("get_time") => other.clone(),
                name => panic!("a tool nobody offered: {name:?}"),
            };
            let args: Value =
                serde_json::from_str(call["function"]["arguments"].as_str().expect("arguments"))
                    .expect("arguments are JSON");
            assert_valid(&tool["function"]["parameters"], &args);
        }
    }
}

/// llama.cpp's `grammars/list.gbnf`: every line the model writes is a list item.
#[test]
fn llama_cpps_list_grammar_holds() {
    let Some(mut model) = load() else { return };
    let grammar = "root ::= item+\n\n# Excludes various line break characters\n\
                   item ::= \"- \" [^\\r\\n\\x0b\\x0c\\x85\\u2028\\u2029]+ \"\\n\"\n";
    let done = run(
        &mut model,
        json!({"prompt": "Three fruits I like:\n", "n_predict": 40, "temperature": 0, "grammar": grammar}),
    );
    let text = done.response["content"].as_str().expect("content");
    let stopped = done.response["stop_type"] == "eos";
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    assert!(!lines.is_empty(), "{text:?}");
    for (i, line) in lines.iter().enumerate() {
        let whole = line.ends_with('\n');
        // Only the last line may be cut by n_predict.
        assert!(whole || (i + 1 == lines.len() && !stopped), "{text:?}");
        let item = line
            .strip_prefix("- ")
            .unwrap_or_else(|| panic!("{text:?}"));
        let item = item.strip_suffix('\n').unwrap_or(item);
        assert!(!(whole && item.is_empty()), "an empty item in {text:?}");
        assert!(
            !item.contains(['\r', '\x0b', '\x0c', '\u{85}', '\u{2028}', '\u{2029}']),
            "{text:?}"
        );
    }
}

/// Cancelling mid-stream ends the request as `cancelled`, and the next request on the same
/// model gives what a fresh model gives: the cut-off generation leaves nothing behind.
#[test]
fn a_cancelled_request_leaves_the_model_as_it_was() {
    let Some(mut model) = load() else { return };
    let mut chunks = 0;
    let done = run_streaming(
        &mut model,
        json!({"prompt": "Once upon a time", "n_predict": 64, "temperature": 0, "stream": true}),
        &mut |_| {
            chunks += 1;
            if chunks == 5 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        },
    );
    assert!(
        done.output.tokens.len() <= 5,
        "{} tokens",
        done.output.tokens.len()
    );
    assert_eq!(done.response["stop_type"], "none", "{}", done.response);

    let next = json!({"prompt": "Once upon a time there was", "n_predict": 12, "temperature": 0});
    let after = run(&mut model, next.clone());
    let fresh = run(&mut load().expect("loads again"), next);
    assert_eq!(after.output.tokens, fresh.output.tokens);
}
