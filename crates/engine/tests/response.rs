//! Responses shaped like llama.cpp's server and OpenAI's API, built from a generation's output.

use serde_json::{Value, json};
use stampo_engine::Request;
use stampo_engine::generate::{Output, StopKind, TokenProbs, Vocabulary};
use stampo_engine::response::{ResponseMeta, chat_chunks_end, chat_response, completion_response};
use stampo_engine::sampler::TokenProb;
use stampo_engine::timing::{MaskStats, Timings};

struct Bytes;
impl Vocabulary for Bytes {
    fn token_bytes(&self, token: u32) -> &[u8] {
        const ALL: [u8; 128] = {
            let mut a = [0u8; 128];
            let mut i = 0;
            while i < 128 {
                a[i] = i as u8;
                i += 1;
            }
            a
        };
        ALL.get(token as usize..token as usize + 1).unwrap_or(&[])
    }
    fn end_of_generation(&self) -> &[u32] {
        &[]
    }
}

fn output(text: &str, stop: StopKind) -> Output {
    Output {
        text: text.into(),
        tokens: text.bytes().map(u32::from).collect(),
        stop,
        stopping_word: None,
        truncated: false,
        n_prompt: 7,
        probs: Vec::new(),
        timings: Timings::new(7, 14.0, text.len(), 20.0),
        mask_stats: Some(MaskStats::from_samples(&[10.0, 30.0], 20.0, None)),
        fast_forwarded: 0,
        forward_passes: text.len(),
    }
}

fn meta() -> ResponseMeta {
    ResponseMeta {
        id: "chatcmpl-1".into(),
        created: 1_700_000_000,
        model: "smollm2".into(),
    }
}

fn chat_body(extra: Value) -> Request {
    let mut body = json!({"messages": [{"role": "user", "content": "Che tempo fa a Roma?"}]});
    for (k, v) in extra.as_object().expect("object") {
        body[k] = v.clone();
    }
    Request::from_chat(&body).expect("accepted")
}

fn weather() -> Value {
    json!([{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])
}

#[test]
fn completion_response_mirrors_llama_cpp() {
    let request = Request::from_completion(&json!({"prompt": "x", "n_probs": 1, "colour": "red"}))
        .expect("accepted");
    let mut out = output("si", StopKind::Eos);
    out.probs = vec![TokenProbs {
        token: b's' as u32,
        p: 0.5,
        top: vec![TokenProb {
            token: b's' as u32,
            p: 0.5,
        }],
    }];
    let r = completion_response(&request, &out, &Bytes, &meta());
    assert_eq!(r["content"], "si");
    assert_eq!(r["stop"], true);
    assert_eq!(r["stop_type"], "eos");
    assert_eq!(r["tokens_predicted"], 2);
    assert_eq!(r["tokens_evaluated"], 7);
    assert_eq!(r["timings"]["prompt_per_second"], 500.0);
    for key in [
        "prompt_n",
        "prompt_ms",
        "predicted_n",
        "predicted_ms",
        "predicted_per_token_ms",
        "cache_n",
    ] {
        assert!(r["timings"].get(key).is_some(), "timings.{key}");
    }
    assert_eq!(r["completion_probabilities"][0]["token"], "s");
    assert_eq!(
        r["completion_probabilities"][0]["top_logprobs"][0]["logprob"],
        json!(0.5f32.ln())
    );
    assert_eq!(
        r["warnings"][0]["field"], "colour",
        "unknown fields come back as warnings"
    );
    assert_eq!(r["mask_stats"]["steps"], 2);
    assert_eq!(r["generation_settings"]["top_k"], 40);
}

#[test]
fn chat_response_is_openai_shaped() {
    let r = chat_response(
        &chat_body(json!({})),
        &output("Sole.", StopKind::Eos),
        &Bytes,
        &meta(),
    );
    assert_eq!(r["object"], "chat.completion");
    assert_eq!(
        r["choices"][0]["message"],
        json!({"role": "assistant", "content": "Sole."})
    );
    assert_eq!(r["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        r["usage"],
        json!({"completion_tokens": 5, "prompt_tokens": 7, "total_tokens": 12})
    );
    let cut = chat_response(
        &chat_body(json!({})),
        &output("Sol", StopKind::Limit),
        &Bytes,
        &meta(),
    );
    assert_eq!(cut["choices"][0]["finish_reason"], "length");
}

#[test]
fn tool_calls_come_back_openai_shaped() {
    let request = chat_body(json!({"tools": weather(), "tool_choice": "required"}));
    let out = output(
        r#"{"tool_call": {"name": "get_weather", "arguments": {"city": "Roma"}}}"#,
        StopKind::Eos,
    );
    let r = chat_response(&request, &out, &Bytes, &meta());
    let choice = &r["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], Value::Null);
    assert_eq!(
        choice["message"]["tool_calls"],
        json!([{"type": "function", "id": "chatcmpl-1_call_0",
                "function": {"name": "get_weather", "arguments": "{\"city\":\"Roma\"}"}}])
    );
    // Under `auto` the model may answer in text instead.
    let request = chat_body(json!({"tools": weather()}));
    let r = chat_response(
        &request,
        &output(r#"{"response": "Ciao"}"#, StopKind::Eos),
        &Bytes,
        &meta(),
    );
    assert_eq!(r["choices"][0]["message"]["content"], "Ciao");
    assert_eq!(r["choices"][0]["finish_reason"], "stop");
}

#[test]
fn stream_end_chunks_follow_openai() {
    let request = chat_body(json!({"stream": true, "stream_options": {"include_usage": true}}));
    let chunks = chat_chunks_end(&request, &output("ok", StopKind::Eos), &meta());
    assert_eq!(chunks.len(), 2);
    assert_eq!(chunks[0]["choices"][0]["finish_reason"], "stop");
    assert_eq!(chunks[0]["object"], "chat.completion.chunk");
    assert_eq!(
        chunks[1]["choices"],
        json!([]),
        "the usage chunk has no choices"
    );
    assert_eq!(chunks[1]["usage"]["total_tokens"], 9);
    assert!(chunks[1].get("timings").is_some() && chunks[0].get("timings").is_none());

    let request = chat_body(json!({"stream": true, "tools": weather(), "tool_choice": "required"}));
    let out = output(
        r#"{"tool_call": {"name": "get_weather", "arguments": {"city": "Roma"}}}"#,
        StopKind::Eos,
    );
    let chunks = chat_chunks_end(&request, &out, &meta());
    assert_eq!(
        chunks[0]["choices"][0]["delta"]["tool_calls"][0]["index"],
        0
    );
    assert_eq!(
        chunks[0]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"],
        "get_weather"
    );
    assert_eq!(chunks[1]["choices"][0]["finish_reason"], "tool_calls");
}
