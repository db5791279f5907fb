//! Whole requests through a [`Session`]: a byte-level fake tokenizer with a plain chat
//! template and a scripted fake model (test doubles), checked on the server-shaped output.

use std::ops::ControlFlow;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use stampo_engine::generate::{BoxError, LogitsSource, Vocabulary};
use stampo_engine::response::ResponseMeta;
use stampo_engine::timing::StdClock;
use stampo_engine::{Error, Message, PromptEncoder, Request, Session, Streaming, Tool};
use stampo_grammar::vocab::Vocabulary as GrammarVocabulary;

const EOS: u32 = 256;

fn pieces() -> Vec<Vec<u8>> {
    let mut p: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    p.push(Vec::new());
    p
}

struct Bytes(Vec<Vec<u8>>);

impl Vocabulary for Bytes {
    fn token_bytes(&self, token: u32) -> &[u8] {
        self.0.get(token as usize).map_or(&[], Vec::as_slice)
    }
    fn end_of_generation(&self) -> &[u32] {
        &[EOS]
    }
}

/// One token per byte; the chat template writes `role: content` lines.
struct PlainTemplate;

impl PromptEncoder for PlainTemplate {
    fn encode(&self, text: &str) -> Vec<u32> {
        text.bytes().map(u32::from).collect()
    }
    fn apply_chat_template(
        &self,
        messages: &[Message],
        _tools: &[Tool],
        add_generation_prompt: bool,
        _kwargs: &Map<String, Value>,
    ) -> Result<String, BoxError> {
        let mut s: String = messages
            .iter()
            .map(|m| format!("{}: {}\n", m.role, m.content.as_deref().unwrap_or("")))
            .collect();
        if add_generation_prompt {
            s.push_str("assistant: ");
        }
        Ok(s)
    }
}

/// Favours the bytes of `text`, one per step, then EOS; records what it was fed.
struct Scripted {
    text: Vec<u8>,
    step: usize,
    fed: Vec<u32>,
}

impl LogitsSource for Scripted {
    fn forward(&mut self, tokens: &[u32]) -> Result<Vec<f32>, BoxError> {
        self.fed.extend_from_slice(tokens);
        let mut logits = vec![0.0; EOS as usize + 1];
        let want = self.text.get(self.step).map_or(EOS, |&b| u32::from(b));
        logits[want as usize] = 10.0;
        self.step += 1;
        Ok(logits)
    }
}

fn meta() -> ResponseMeta {
    ResponseMeta {
        id: "chatcmpl-t".into(),
        created: 0,
        model: "test".into(),
    }
}

fn run(
    body: Value,
    model_text: &str,
) -> (
    Result<stampo_engine::Completed, Error>,
    Vec<Value>,
    Vec<u32>,
) {
    let request = Request::from_body(&body).expect("accepted");
    let mut model = Scripted {
        text: model_text.as_bytes().to_vec(),
        step: 0,
        fed: Vec::new(),
    };
    let special = vec![false; pieces().len()];
    let mut session = Session {
        model: &mut model,
        encoder: &PlainTemplate,
        vocab: &Bytes(pieces()),
        grammar_vocab: Arc::new(GrammarVocabulary::new(pieces(), special, vec![EOS])),
        n_ctx: 2048,
        strict: false,
    };
    let mut chunks = Vec::new();
    let clock = StdClock::default();
    let mut on_chunk = |c: &Value| {
        chunks.push(c.clone());
        ControlFlow::Continue(())
    };
    let mut streaming = Streaming {
        on_chunk: &mut on_chunk,
        cancel: None,
        should_stop: None,
        clock: &clock,
    };
    let done = session.run(&request, &meta(), 1, &mut streaming);
    (done, chunks, model.fed)
}

#[test]
fn a_chat_request_with_a_schema_answers_valid_json() {
    let body = json!({
        "messages": [{"role": "user", "content": "Mario Rossi, 35 anni, di Roma"}],
        "temperature": 0,
        "response_format": {"type": "json_schema", "json_schema": {"schema": {
            "type": "object",
            "properties": {"nome": {"type": "string"}, "eta": {"type": "integer", "minimum": 0, "maximum": 120}},
            "required": ["nome", "eta"], "additionalProperties": false}}}
    });
    // The model tries an age the schema forbids and then some chatter.
    let (done, chunks, fed) = run(body, r#"{"nome":"Mario","eta":350} ecco"#);
    let done = done.expect("ran");
    assert!(chunks.is_empty(), "not streaming");
    assert_eq!(
        String::from_utf8(fed[..6].iter().map(|&t| t as u8).collect()).unwrap(),
        "user: "
    );
    let content = done.response["choices"][0]["message"]["content"]
        .as_str()
        .expect("content")
        .to_string();
    let v: Value = serde_json::from_str(&content).unwrap_or_else(|e| panic!("{e}: {content}"));
    assert_eq!(v["nome"], "Mario");
    assert!(
        v["eta"].as_i64().is_some_and(|e| (0..=120).contains(&e)),
        "{content}"
    );
    assert_eq!(done.response["choices"][0]["finish_reason"], "stop");
    assert!(
        done.response["mask_stats"]["steps"]
            .as_u64()
            .is_some_and(|s| s > 0)
    );
}

#[test]
fn a_streamed_chat_request_sends_openai_chunks() {
    let body = json!({"messages": [{"role": "user", "content": "Ciao"}], "temperature": 0, "stream": true,
                      "stream_options": {"include_usage": true}, "stop": ["!"]});
    let (done, chunks, _) = run(body, "Ciao a te! Come va?");
    let done = done.expect("ran");
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "Ciao a te");
    let n = chunks.len();
    assert_eq!(chunks[n - 2]["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        chunks[n - 1]["usage"]["completion_tokens"],
        done.output.tokens.len()
    );
}

#[test]
fn a_completion_request_streams_llama_cpp_chunks() {
    let body = json!({"prompt": "Q: si o no?\nA:", "grammar": "root ::= \" si\" | \" no\"", "stream": true, "temperature": 0});
    let (done, chunks, _) = run(body, " forse");
    let done = done.expect("ran");
    assert_eq!(done.output.text, " no", "the grammar overrides the model");
    let last = chunks.last().expect("chunks");
    assert_eq!(
        (last["stop"].clone(), last["content"].clone()),
        (json!(true), json!(""))
    );
    let streamed: String = chunks[..chunks.len() - 1]
        .iter()
        .filter_map(|c| c["content"].as_str())
        .collect();
    assert_eq!(streamed, " no");
}

#[test]
fn a_bad_grammar_fails_before_any_forward_pass() {
    let (done, _, fed) = run(json!({"prompt": "x", "grammar": "root ::= [broken"}), "x");
    assert!(
        matches!(
            done,
            Err(Error::Grammar {
                field: "grammar",
                ..
            })
        ),
        "{:?}",
        done.err()
    );
    assert!(fed.is_empty(), "no unconstrained output, no work");
}

#[test]
fn tool_calls_end_to_end() {
    let body = json!({
        "messages": [{"role": "user", "content": "Meteo a Roma?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
        "tool_choice": "required", "temperature": 0
    });
    let (done, _, fed) = run(
        body,
        r#"{"tool_call": {"name": "get_weather", "arguments": {"city": "Roma"}}}"#,
    );
    let done = done.expect("ran");
    let prompt = String::from_utf8(
        fed.iter()
            .take_while(|&&t| t < 256)
            .map(|&t| t as u8)
            .collect(),
    )
    .unwrap();
    assert!(
        prompt.starts_with("system: Respond in JSON format"),
        "{prompt}"
    );
    let call = &done.response["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "get_weather");
    assert_eq!(call["function"]["arguments"], r#"{"city":"Roma"}"#);
    assert_eq!(done.response["choices"][0]["finish_reason"], "tool_calls");
}

#[test]
fn a_thinking_model_reasons_before_the_constrained_answer() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": false});
    let body = json!({
        "messages": [{"role": "user", "content": "a?"}], "temperature": 0,
        "chat_template_kwargs": {"enable_thinking": true},
        "response_format": {"type": "json_schema", "json_schema": {"schema": schema}}
    });
    let (done, _, _) = run(body.clone(), "<think>Serve un intero.</think>\n\n{\"a\":7}");
    let message = &done.expect("ran").response["choices"][0]["message"];
    assert_eq!(message["reasoning_content"], "Serve un intero.");
    assert_eq!(message["content"], "{\"a\":7}");

    // Out of budget while thinking: the block is closed and the shortest document follows.
    let mut short = body.clone();
    short["max_tokens"] = json!(30);
    short["finish_in_budget"] = json!(true);
    let (done, _, _) = run(short, "<think>Ci penso a lungo, molto a lungo, davvero");
    let done = done.expect("ran");
    let content = done.response["choices"][0]["message"]["content"]
        .as_str()
        .expect("content")
        .to_string();
    let v: Value =
        serde_json::from_str(&content).unwrap_or_else(|e| panic!("{e}: {:?}", done.output.text));
    assert!(v["a"].is_i64(), "{content}");
    assert!(done.output.tokens.len() <= 30);

    // Without enable_thinking the same model is held to the schema from the first token.
    let mut plain = body;
    plain["chat_template_kwargs"] = json!({});
    let (done, _, _) = run(plain, "<think>x</think>{\"a\":7}");
    let done = done.expect("ran");
    assert!(done.output.text.starts_with('{'), "{:?}", done.output.text);
}
