//! Request bodies as llama.cpp's server and OpenAI clients send them, and what they resolve to.

use serde_json::{Value, json};
use stampo_engine::request::custom_json;
use stampo_engine::{Constraint, Error, Prompt, Request, SamplingParams, Stage, ToolChoice};

fn completion(body: Value) -> Request {
    Request::from_completion(&body).expect("body should be accepted")
}

fn chat(body: Value) -> Request {
    Request::from_chat(&body).expect("body should be accepted")
}

fn user(text: &str) -> Value {
    json!([{"role": "user", "content": text}])
}

#[test]
fn completion_defaults_are_llama_cpp_defaults() {
    let r = completion(json!({"prompt": "Ciao"}));
    assert_eq!(r.prompt, Prompt::Text("Ciao".into()));
    assert_eq!(r.n_predict, None, "n_predict defaults to -1: unlimited");
    let s = &r.sampling;
    assert_eq!(
        (s.temperature, s.top_k, s.top_p, s.min_p, s.typical_p),
        (0.8, 40, 0.95, 0.05, 1.0)
    );
    assert_eq!((s.repeat_penalty, s.repeat_last_n), (1.0, 64));
    assert_eq!((s.presence_penalty, s.frequency_penalty), (0.0, 0.0));
    assert_eq!(s.seed, None);
    assert_eq!(
        s.stages,
        [
            Stage::Penalties,
            Stage::TopK,
            Stage::TypicalP,
            Stage::TopP,
            Stage::MinP,
            Stage::Temperature
        ]
    );
    assert!(r.stop.is_empty() && !r.ignore_eos && !r.stream);
    assert!(r.cache_prompt, "cache_prompt defaults to true");
    assert_eq!(r.n_probs, 0);
    assert_eq!(r.constraint, Constraint::None);
    assert!(r.warnings.is_empty());
}

#[test]
fn every_completion_field_is_read() {
    let r = completion(json!({
        "prompt": [1, 2, 3], "n_predict": 32, "temperature": 0, "top_k": 5, "top_p": 0.5,
        "min_p": 0.1, "typical_p": 0.9, "repeat_penalty": 1.1, "repeat_last_n": -1,
        "presence_penalty": 0.2, "frequency_penalty": 0.3, "seed": 42, "stop": ["\n", ""],
        "ignore_eos": true, "grammar": "root ::= \"si\" | \"no\"", "n_probs": 3,
        "samplers": ["top_k", "temperature"], "cache_prompt": false, "min_keep": 2,
        "stream": true, "return_tokens": true
    }));
    assert_eq!(r.prompt, Prompt::Tokens(vec![1, 2, 3]));
    assert_eq!(r.n_predict, Some(32));
    let expected = SamplingParams {
        temperature: 0.0,
        top_k: 5,
        top_p: 0.5,
        min_p: 0.1,
        typical_p: 0.9,
        min_keep: 2,
        repeat_penalty: 1.1,
        repeat_last_n: -1,
        presence_penalty: 0.2,
        frequency_penalty: 0.3,
        seed: Some(42),
        stages: vec![Stage::TopK, Stage::Temperature],
    };
    assert_eq!(r.sampling, expected);
    assert_eq!(
        r.stop,
        ["\n"],
        "empty stop strings are dropped, as llama.cpp does"
    );
    assert!(r.ignore_eos && r.stream && r.return_tokens && !r.cache_prompt);
    assert_eq!(
        r.constraint,
        Constraint::Gbnf("root ::= \"si\" | \"no\"".into())
    );
    assert_eq!(r.n_probs, 3);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

#[test]
fn wrong_types_are_errors_naming_the_field() {
    let cases = [
        (json!({"prompt": "x", "temperature": "hot"}), "temperature"),
        (json!({"prompt": "x", "top_k": 1.5}), "top_k"),
        (json!({"prompt": "x", "stream": "yes"}), "stream"),
        (json!({"prompt": "x", "stop": [1]}), "stop[0]"),
        (json!({"prompt": "x", "grammar": 7}), "grammar"),
        (json!({"prompt": ["a", {}]}), "prompt[1]"),
        (json!({"prompt": "x", "samplers": 3}), "samplers"),
        (
            json!({"prompt": "x", "stream_options": {"include_usage": 1}}),
            "stream_options.include_usage",
        ),
        (
            json!({"messages": [{"role": "user", "content": 5}]}),
            "messages[0].content",
        ),
        (json!({"messages": user("x"), "tools": {}}), "tools"),
        (
            json!({"messages": user("x"), "response_format": {"type": "json_object", "schema": 3}}),
            "response_format.schema",
        ),
    ];
    for (body, field) in cases {
        match Request::from_body(&body) {
            Err(Error::FieldType { field: f, .. }) => assert_eq!(f, field, "{body}"),
            other => panic!("{body}: expected a type error on `{field}`, got {other:?}"),
        }
    }
}

#[test]
fn an_integral_float_is_an_integer() {
    assert_eq!(
        completion(json!({"prompt": "x", "top_k": 10.0}))
            .sampling
            .top_k,
        10
    );
}

#[test]
fn unknown_and_ignored_fields_become_warnings() {
    let r = completion(json!({"prompt": "x", "temprature": 0.1, "mirostat": 2, "model": "m"}));
    let fields: Vec<&str> = r.warnings.iter().map(|w| w.field.as_str()).collect();
    assert_eq!(
        fields,
        ["temprature", "mirostat"],
        "`model` needs no warning"
    );
    assert!(r.warnings[0].message.contains("unknown"));
    assert!(r.warnings[1].message.contains("not implemented"));
}

#[test]
fn grammar_and_json_schema_together_are_refused() {
    let body = json!({"prompt": "x", "grammar": "root ::= \"a\"", "json_schema": {}});
    assert!(matches!(
        Request::from_completion(&body),
        Err(Error::Conflict { .. })
    ));
    let body = json!({"messages": user("x"), "grammar": "root ::= \"a\"", "json_schema": {}});
    assert!(matches!(
        Request::from_chat(&body),
        Err(Error::Conflict { .. })
    ));
    let body = json!({"messages": user("x"), "grammar": "root ::= \"a\"",
                      "response_format": {"type": "json_object"}});
    assert!(matches!(
        Request::from_chat(&body),
        Err(Error::Conflict { .. })
    ));
}

#[test]
fn response_format_in_every_shape() {
    let schema = json!({"type": "object", "properties": {"nome": {"type": "string"}}});
    let cases = [
        ("text", json!({"type": "text"}), Constraint::None),
        (
            "json_object",
            json!({"type": "json_object"}),
            Constraint::AnyJson,
        ),
        (
            "json_object + schema",
            json!({"type": "json_object", "schema": schema}),
            Constraint::JsonSchema(schema.clone()),
        ),
        (
            "json_schema + json_schema.schema",
            json!({"type": "json_schema", "json_schema": {"name": "p", "strict": true, "schema": schema}}),
            Constraint::JsonSchema(schema.clone()),
        ),
        (
            "json_schema + top-level schema",
            json!({"type": "json_schema", "schema": schema}),
            Constraint::JsonSchema(schema.clone()),
        ),
        (
            "WebLLM: schema as a string",
            json!({"type": "json_object", "schema": schema.to_string()}),
            Constraint::JsonSchema(schema.clone()),
        ),
        (
            "WebLLM: grammar",
            json!({"type": "grammar", "grammar": "root ::= \"x\""}),
            Constraint::Gbnf("root ::= \"x\"".into()),
        ),
    ];
    for (name, format, expected) in cases {
        let r = chat(json!({"messages": user("x"), "response_format": format}));
        assert_eq!(r.constraint, expected, "{name}");
        assert!(r.warnings.is_empty(), "{name}: {:?}", r.warnings);
    }
}

#[test]
fn response_format_errors() {
    let bad_string = json!({"messages": user("x"), "response_format": {"type": "json_object", "schema": "{nope"}});
    match Request::from_chat(&bad_string) {
        Err(Error::InvalidValue { field, .. }) => assert_eq!(field, "response_format.schema"),
        other => panic!("{other:?}"),
    }
    let bad_type = json!({"messages": user("x"), "response_format": {"type": "xml"}});
    match Request::from_chat(&bad_type) {
        Err(Error::InvalidValue { field, .. }) => assert_eq!(field, "response_format.type"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn response_format_overrides_json_schema_with_a_warning() {
    let r = chat(
        json!({"messages": user("x"), "json_schema": {"type": "string"},
                        "response_format": {"type": "json_object"}}),
    );
    assert_eq!(r.constraint, Constraint::AnyJson);
    assert_eq!(r.warnings[0].field, "json_schema");
}

fn weather_tool() -> Value {
    json!({"type": "function", "function": {"name": "get_weather", "description": "Meteo",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})
}

#[test]
fn tool_choice_in_every_form() {
    let cases = [
        (json!("auto"), ToolChoice::Auto),
        (json!("required"), ToolChoice::Required),
        (json!("none"), ToolChoice::None),
        (
            json!({"type": "function", "function": {"name": "get_weather"}}),
            ToolChoice::Named("get_weather".into()),
        ),
    ];
    for (choice, expected) in cases {
        let r = chat(
            json!({"messages": user("x"), "tools": [weather_tool()], "tool_choice": choice,
                            "parallel_tool_calls": true}),
        );
        assert_eq!(r.tool_choice, expected);
        assert_eq!(r.tools.len(), 1);
        match (&expected, &r.constraint) {
            (ToolChoice::None, Constraint::None) => {}
            (_, Constraint::Tools(t)) => {
                assert_eq!(t.choice, expected);
                assert!(t.parallel);
            }
            (_, other) => panic!("{expected:?} resolved to {other:?}"),
        }
    }
}

#[test]
fn tools_refusals() {
    let with_grammar =
        json!({"messages": user("x"), "tools": [weather_tool()], "grammar": "root ::= \"a\""});
    match Request::from_chat(&with_grammar) {
        Err(Error::Conflict { message }) => {
            assert_eq!(message, "Cannot use custom grammar constraints with tools.")
        }
        other => panic!("{other:?}"),
    }
    // With tool_choice "none" the tools are only shown: the grammar is allowed.
    let none = json!({"messages": user("x"), "tools": [weather_tool()], "tool_choice": "none", "grammar": "root ::= \"a\""});
    assert!(Request::from_chat(&none).is_ok());
    let unknown = json!({"messages": user("x"), "tools": [weather_tool()],
                         "tool_choice": {"type": "function", "function": {"name": "send_email"}}});
    assert!(
        matches!(Request::from_chat(&unknown), Err(Error::UnknownTool { name }) if name == "send_email")
    );
}

#[test]
fn length_fields_precedence() {
    // llama.cpp: n_predict, else max_completion_tokens, else max_tokens.
    assert_eq!(
        chat(json!({"messages": user("x"), "max_tokens": 10})).n_predict,
        Some(10)
    );
    assert_eq!(
        chat(json!({"messages": user("x"), "max_tokens": 10, "max_completion_tokens": 20}))
            .n_predict,
        Some(20)
    );
    assert_eq!(
        chat(json!({"messages": user("x"), "max_tokens": 10, "n_predict": 5})).n_predict,
        Some(5)
    );
}

#[test]
fn samplers_as_names_or_letters() {
    let r = completion(json!({"prompt": "x", "samplers": "kt"}));
    assert_eq!(r.sampling.stages, [Stage::TopK, Stage::Temperature]);
    let r = completion(json!({"prompt": "x", "samplers": ["min_p", "dry", "bogus"]}));
    assert_eq!(r.sampling.stages, [Stage::MinP]);
    let fields: Vec<&str> = r.warnings.iter().map(|w| w.field.as_str()).collect();
    assert_eq!(fields, ["samplers[1]", "samplers[2]"]);
}

#[test]
fn chat_fields() {
    let r = chat(json!({
        "messages": [
            {"role": "system", "content": "Estrai i dati."},
            {"role": "user", "content": [{"type": "text", "text": "Mario, "}, {"type": "text", "text": "35 anni"}]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Roma\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "sole"}
        ],
        "chat_template_kwargs": {"enable_thinking": false}, "stream": true,
        "stream_options": {"include_usage": true}, "logprobs": true, "top_logprobs": 2
    }));
    let Prompt::Messages(m) = &r.prompt else {
        panic!("not messages")
    };
    assert_eq!(m[1].content.as_deref(), Some("Mario, 35 anni"));
    assert_eq!(m[2].tool_calls[0].arguments, "{\"city\":\"Roma\"}");
    assert_eq!(m[3].tool_call_id.as_deref(), Some("c1"));
    assert_eq!(r.enable_thinking, Some(false));
    assert!(r.stream && r.include_usage);
    assert_eq!(r.n_probs, 2);
}

#[test]
fn chat_refusals() {
    let cases = [
        json!({"messages": [{"role": "user"}]}),
        json!({"messages": user("x"), "top_logprobs": 3}),
        json!({"messages": user("x"), "chat_template_kwargs": {"enable_thinking": "true"}}),
        json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}),
    ];
    for body in cases {
        assert!(
            Request::from_chat(&body).is_err(),
            "{body} should be refused"
        );
    }
    assert!(matches!(
        Request::from_chat(&json!({})),
        Err(Error::MissingField { field: "messages" })
    ));
    assert!(matches!(
        Request::from_completion(&json!({})),
        Err(Error::MissingField { field: "prompt" })
    ));
    assert!(matches!(
        Request::from_body(&json!([1])),
        Err(Error::BodyNotObject { .. })
    ));
}

#[test]
fn seed_minus_one_means_random() {
    assert_eq!(
        completion(json!({"prompt": "x", "seed": -1})).sampling.seed,
        None
    );
    assert_eq!(
        completion(json!({"prompt": "x", "seed": 0})).sampling.seed,
        Some(0)
    );
}

#[test]
fn mixed_prompts_and_multiple_prompts() {
    let r = completion(json!({"prompt": [1, "ciao", 2]}));
    assert!(matches!(r.prompt, Prompt::Pieces(ref p) if p.len() == 3));
    assert!(Request::from_completion(&json!({"prompt": ["a", "b"]})).is_err());
}

// ---- Custom JSON, merged as llama.cpp's web UI merges it (Object.assign) ----

fn body() -> serde_json::Map<String, Value> {
    json!({"messages": user("x"), "temperature": 0.8, "response_format": {"type": "json_object"}})
        .as_object()
        .cloned()
        .expect("object")
}

#[test]
fn custom_json_overrides_top_level_keys_shallowly() {
    let mut b = body();
    let w = custom_json::merge_text(
        &mut b,
        r#"{"temperature": 0, "response_format": {"schema": {"type": "string"}}, "top_k": 1}"#,
    );
    assert!(w.is_empty());
    assert_eq!(b["temperature"], json!(0));
    // Shallow: the nested object replaces the body's whole, `type` is gone.
    assert_eq!(b["response_format"], json!({"schema": {"type": "string"}}));
    let keys: Vec<&str> = b.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        ["messages", "temperature", "response_format", "top_k"],
        "new keys go last"
    );
}

#[test]
fn custom_json_null_is_copied() {
    let mut b = body();
    custom_json::merge_text(&mut b, r#"{"response_format": null}"#);
    assert_eq!(b["response_format"], Value::Null);
    // …and a null field reads as absent, so the request is unconstrained.
    let r = Request::from_chat(&Value::Object(b)).expect("accepted");
    assert_eq!(r.constraint, Constraint::None);
}

#[test]
fn custom_json_that_does_not_parse_leaves_the_body_alone() {
    let mut b = body();
    let before = b.clone();
    let w = custom_json::merge_text(&mut b, "{temperature: 0}");
    assert_eq!(b, before);
    assert_eq!(w.len(), 1);
    assert!(
        custom_json::merge_text(&mut b, "").is_empty(),
        "an empty setting is skipped"
    );
    assert_eq!(b, before);
}

#[test]
fn custom_json_non_objects_follow_object_assign() {
    let mut b = body();
    let w = custom_json::merge_text(&mut b, "[5, 6]");
    assert_eq!((b["0"].clone(), b["1"].clone()), (json!(5), json!(6)));
    assert_eq!(w.len(), 1);
    let mut b = body();
    let before = b.clone();
    let w = custom_json::merge_text(&mut b, "42");
    assert_eq!(b, before, "a number has no own properties");
    assert_eq!(w.len(), 1);
    let mut b = body();
    custom_json::merge_text(&mut b, "\"ab\"");
    assert_eq!((b["0"].clone(), b["1"].clone()), (json!("a"), json!("b")));
}

#[test]
fn custom_json_can_switch_on_a_schema() {
    let mut b = json!({"messages": user("Mario ha 35 anni"), "temperature": 0.8})
        .as_object()
        .cloned()
        .expect("object");
    custom_json::merge_text(
        &mut b,
        r#"{"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "object"}}}, "samplers": ["top_k"]}"#,
    );
    let r = Request::from_chat(&Value::Object(b)).expect("accepted");
    assert_eq!(
        r.constraint,
        Constraint::JsonSchema(json!({"type": "object"}))
    );
    assert_eq!(r.sampling.stages, [Stage::TopK]);
}
