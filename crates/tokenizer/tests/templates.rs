//! Chat templates rendered by stampo (minijinja) against the same templates rendered by
//! jinja2 the way transformers renders them (`tests/fixtures/tokenizer/templates.json`,
//! made by `make_template_fixtures.py`): the three default models' templates (Gemma 3's
//! built-in fallback) and two synthetic templates using namespace, loop controls,
//! `tojson(indent=…)`, `strftime_now`, string methods and `enable_thinking`.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use serde_json::Value;
use stampo_tokenizer::template::DateTime;
use stampo_tokenizer::{ChatRequest, ChatTemplate, TemplateOrigin, TokenizerError};

fn fixture() -> Value {
    serde_json::from_slice(&std::fs::read(common::fixtures_dir().join("templates.json")).unwrap())
        .unwrap()
}

const NOW: DateTime = DateTime {
    year: 2024,
    month: 11,
    day: 29,
    hour: 15,
    minute: 4,
    second: 5,
};

#[test]
fn renders_like_transformers() {
    let fx = fixture();
    let mut failures = Vec::new();
    let cases = fx["cases"].as_array().unwrap();
    for case in cases {
        let tname = case["template"].as_str().unwrap();
        let t = &fx["templates"][tname];
        let tmpl = ChatTemplate::from_source(
            t["source"].as_str().unwrap(),
            t["bos_token"].as_str().unwrap(),
            t["eos_token"].as_str().unwrap(),
        );
        let conv = &fx["conversations"][case["conversation"].as_str().unwrap()];
        let req = ChatRequest {
            messages: conv["messages"].clone(),
            tools: conv.get("tools").cloned(),
            add_generation_prompt: case["add_generation_prompt"].as_bool().unwrap(),
            kwargs: case["kwargs"].as_object().unwrap().clone(),
            now: Some(NOW),
        };
        let label = format!(
            "{tname} / {} / agp {} / {}",
            case["conversation"], req.add_generation_prompt, case["kwargs"]
        );
        match (tmpl.render(&req), case.get("expected"), case.get("error")) {
            (Ok(got), Some(want), _) if got == want.as_str().unwrap() => {}
            (Ok(got), Some(want), _) => failures.push(format!(
                "{label}:\n--- ours\n{got}\n--- jinja2\n{}",
                want.as_str().unwrap()
            )),
            (Err(TokenizerError::Template { message, .. }), _, Some(err))
                if message.contains(err.as_str().unwrap()) => {}
            (got, _, _) => failures.push(format!(
                "{label}: ours {got:?}, jinja2 {:?}",
                case.get("error")
            )),
        }
    }
    eprintln!(
        "templates: {}/{} cases identical to jinja2",
        cases.len() - failures.len(),
        cases.len()
    );
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn errors_name_the_template_line() {
    let tmpl = ChatTemplate::from_source("line one\n{{ messages[0].content }}\n{% if %}", "", "");
    let err = tmpl.render(&ChatRequest::default()).unwrap_err();
    assert!(
        matches!(err, TokenizerError::Template { line: Some(3), .. }),
        "{err}"
    );
    assert!(err.to_string().contains("line 3"), "{err}");

    let tmpl = ChatTemplate::from_source("a\n{{ raise_exception('no system role') }}", "", "");
    let err = tmpl
        .render(&ChatRequest {
            messages: serde_json::json!([]),
            ..Default::default()
        })
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "chat template: no system role (template line 2)"
    );
}

#[test]
fn models_use_their_template_or_say_which_fallback() {
    let fx = fixture();
    for (name, file) in common::MODELS {
        let Some(bytes) = common::model_bytes(file) else {
            continue;
        };
        let g = stampo_gguf::Gguf::parse_header(&bytes).unwrap();
        let tok = stampo_tokenizer::Tokenizer::from_gguf(&g).unwrap();
        let tmpl = ChatTemplate::from_gguf(&g, &tok).unwrap();
        let want = &fx["templates"][name];
        assert_eq!(tmpl.source(), want["source"].as_str().unwrap(), "{name}");
        match want["origin"].as_str().unwrap() {
            "file" => assert_eq!(tmpl.origin(), &TemplateOrigin::File),
            _ => {
                assert!(
                    matches!(
                        tmpl.origin(),
                        TemplateOrigin::Builtin { name: "gemma3", .. }
                    ),
                    "{name}"
                );
                assert!(
                    tmpl.notice().unwrap().contains("no chat template"),
                    "{name}"
                );
            }
        }
    }
}
