//! Responses and stream chunks shaped like llama.cpp's server: the `/completion` object
//! (`to_json_non_oaicompat`) and OpenAI's `chat.completion` / `chat.completion.chunk`
//! (`to_json_oaicompat_chat*`), each with stampo's `warnings` and `mask_stats` added.

use serde::Serialize;
use serde_json::{Value, json};

use crate::generate::{Output, StopKind, TokenProbs, Vocabulary};
use crate::reasoning::split_reasoning;
use crate::request::{Constraint, Request, ToolCall};
use crate::tool_calls::parse_tool_output;

/// OpenAI's `finish_reason`, plus `cancelled` for a generation the caller stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    Stop,
    Length,
    ToolCalls,
    Cancelled,
}

/// OpenAI's `usage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub completion_tokens: usize,
    pub prompt_tokens: usize,
    pub total_tokens: usize,
}

impl Usage {
    pub fn of(out: &Output) -> Self {
        Self {
            completion_tokens: out.tokens.len(),
            prompt_tokens: out.n_prompt,
            total_tokens: out.tokens.len() + out.n_prompt,
        }
    }
}

/// Identity of a response: the caller owns ids and the wall clock (none in wasm's std).
#[derive(Debug, Clone)]
pub struct ResponseMeta {
    pub id: String,
    /// Unix seconds.
    pub created: u64,
    pub model: String,
}

/// The assistant's message after reading tool calls out of constrained output.
#[derive(Debug, Clone, PartialEq)]
pub struct AssistantMessage {
    pub content: Option<String>,
    /// The reasoning block of a thinking model (`enable_thinking`), without its tags.
    pub reasoning_content: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: FinishReason,
}

impl AssistantMessage {
    /// llama.cpp: `length` when the limit ended generation, else `tool_calls` when calls were
    /// made, else `stop`.
    pub fn from_output(request: &Request, out: &Output, id_prefix: &str) -> Self {
        let base = match out.stop {
            StopKind::Limit => FinishReason::Length,
            StopKind::Cancelled => FinishReason::Cancelled,
            StopKind::Eos | StopKind::Word => FinishReason::Stop,
        };
        let (reasoning_content, text) = if request.enable_thinking == Some(true) {
            split_reasoning(&out.text)
        } else {
            (None, out.text.clone())
        };
        if let Constraint::Tools(_) = request.constraint
            && let Some(parsed) = parse_tool_output(&text, id_prefix)
        {
            let finish_reason = if parsed.calls.is_empty() || base != FinishReason::Stop {
                base
            } else {
                FinishReason::ToolCalls
            };
            return Self {
                content: parsed.content,
                reasoning_content,
                tool_calls: parsed.calls,
                finish_reason,
            };
        }
        Self {
            content: Some(text),
            reasoning_content,
            tool_calls: Vec::new(),
            finish_reason: base,
        }
    }

    fn to_json(&self) -> Value {
        let mut m = json!({"role": "assistant", "content": self.content});
        if let Some(r) = &self.reasoning_content {
            m["reasoning_content"] = json!(r);
        }
        if !self.tool_calls.is_empty() {
            m["tool_calls"] = Value::Array(self.tool_calls.iter().map(tool_call_json).collect());
        }
        m
    }
}

fn tool_call_json(c: &ToolCall) -> Value {
    json!({"type": "function", "id": c.id, "function": {"name": c.name, "arguments": c.arguments}})
}

fn stop_type(kind: StopKind) -> &'static str {
    match kind {
        StopKind::Eos => "eos",
        StopKind::Word => "word",
        StopKind::Limit => "limit",
        StopKind::Cancelled => "none",
    }
}

/// One token's `n_probs` entry (`completion_token_output::to_json`, log-probabilities).
fn probs_json(p: &TokenProbs, vocab: &dyn Vocabulary) -> Value {
    let entry = |token: u32, prob: f32| {
        let bytes = vocab.token_bytes(token);
        // nlohmann would turn log(0) = -inf into null; llama.cpp sends the lowest float.
        let logprob = if prob == 0.0 { f32::MIN } else { prob.ln() };
        json!({"id": token, "token": String::from_utf8_lossy(bytes), "bytes": bytes, "logprob": logprob})
    };
    let mut v = entry(p.token, p.p);
    v["top_logprobs"] = Value::Array(p.top.iter().map(|t| entry(t.token, t.p)).collect());
    v
}

fn extras(request: &Request, out: &Output, res: &mut Value) {
    if !request.warnings.is_empty() {
        res["warnings"] = json!(request.warnings);
    }
    if let Some(stats) = &out.mask_stats {
        res["mask_stats"] = json!(stats);
    }
}

/// The sampling settings echoed as llama.cpp's `generation_settings` (a subset).
fn generation_settings(request: &Request) -> Value {
    let s = &request.sampling;
    json!({
        "seed": s.seed.unwrap_or(u32::MAX), "temperature": s.temperature, "top_k": s.top_k,
        "top_p": s.top_p, "min_p": s.min_p, "typical_p": s.typical_p, "min_keep": s.min_keep,
        "repeat_last_n": s.repeat_last_n, "repeat_penalty": s.repeat_penalty,
        "presence_penalty": s.presence_penalty, "frequency_penalty": s.frequency_penalty,
        "n_predict": request.n_predict.map_or(-1, i64::from), "ignore_eos": request.ignore_eos,
        "stream": request.stream, "n_probs": request.n_probs, "stop": request.stop,
        "samplers": s.stages,
    })
}

/// llama.cpp's final `/completion` object. When streaming, `content` is empty: the text
/// went out in the chunks.
pub fn completion_response(
    request: &Request,
    out: &Output,
    vocab: &dyn Vocabulary,
    meta: &ResponseMeta,
) -> Value {
    let mut res = json!({
        "index": 0,
        "content": if request.stream { "" } else { out.text.as_str() },
        "tokens": if request.return_tokens { out.tokens.clone() } else { Vec::new() },
        "id_slot": 0,
        "stop": true,
        "model": meta.model,
        "tokens_predicted": out.tokens.len(),
        "tokens_evaluated": out.n_prompt,
        "generation_settings": generation_settings(request),
        "has_new_line": out.text.contains('\n'),
        "truncated": out.truncated,
        "stop_type": stop_type(out.stop),
        "stopping_word": out.stopping_word.clone().unwrap_or_default(),
        "tokens_cached": out.n_prompt + out.tokens.len(),
        "timings": out.timings,
    });
    if !request.stream && !out.probs.is_empty() {
        res["completion_probabilities"] =
            Value::Array(out.probs.iter().map(|p| probs_json(p, vocab)).collect());
    }
    extras(request, out, &mut res);
    res
}

/// One `/completion` stream chunk (`stop: false`).
pub fn completion_chunk(text: &str, tokens: &[u32], request: &Request) -> Value {
    json!({
        "index": 0,
        "content": text,
        "tokens": if request.return_tokens { tokens.to_vec() } else { Vec::new() },
        "stop": false,
        "id_slot": 0,
    })
}

/// OpenAI's `chat.completion`, with llama.cpp's `timings`.
pub fn chat_response(
    request: &Request,
    out: &Output,
    vocab: &dyn Vocabulary,
    meta: &ResponseMeta,
) -> Value {
    let message = AssistantMessage::from_output(request, out, &format!("{}_call_", meta.id));
    let mut choice = json!({
        "finish_reason": message.finish_reason,
        "index": 0,
        "message": message.to_json(),
    });
    if !out.probs.is_empty() {
        choice["logprobs"] =
            json!({"content": out.probs.iter().map(|p| probs_json(p, vocab)).collect::<Vec<_>>()});
    }
    let mut res = json!({
        "choices": [choice],
        "created": meta.created,
        "model": meta.model,
        "system_fingerprint": concat!("stampo-", env!("CARGO_PKG_VERSION")),
        "object": "chat.completion",
        "usage": Usage::of(out),
        "id": meta.id,
        "timings": out.timings,
    });
    extras(request, out, &mut res);
    res
}

fn chunk(meta: &ResponseMeta, choices: Value) -> Value {
    json!({
        "choices": choices,
        "created": meta.created,
        "id": meta.id,
        "model": meta.model,
        "system_fingerprint": concat!("stampo-", env!("CARGO_PKG_VERSION")),
        "object": "chat.completion.chunk",
    })
}

/// The first chat chunk: the role, no content yet (as llama.cpp sends it).
pub fn chat_chunk_start(meta: &ResponseMeta) -> Value {
    chunk(
        meta,
        json!([{"finish_reason": null, "index": 0, "delta": {"role": "assistant", "content": null}}]),
    )
}

/// A content delta. Under a tools constraint the text is JSON for the parser, not for the
/// user: callers send nothing until [`chat_chunks_end`] turns it into tool-call deltas.
pub fn chat_chunk_delta(meta: &ResponseMeta, text: &str) -> Value {
    chunk(
        meta,
        json!([{"finish_reason": null, "index": 0, "delta": {"content": text}}]),
    )
}

/// The closing chunks: tool calls (if any), the `finish_reason`, then `usage` when
/// `stream_options.include_usage` asked for it; `timings` ride on the last one.
pub fn chat_chunks_end(request: &Request, out: &Output, meta: &ResponseMeta) -> Vec<Value> {
    let mut chunks = Vec::new();
    let message = AssistantMessage::from_output(request, out, &format!("{}_call_", meta.id));
    if let Constraint::Tools(_) = request.constraint {
        let mut delta = json!({});
        if let Some(content) = &message.content {
            delta["content"] = json!(content);
        }
        if !message.tool_calls.is_empty() {
            let calls: Vec<Value> = message
                .tool_calls
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let mut v = tool_call_json(c);
                    v["index"] = json!(i);
                    v
                })
                .collect();
            delta["tool_calls"] = Value::Array(calls);
        }
        chunks.push(chunk(
            meta,
            json!([{"finish_reason": null, "index": 0, "delta": delta}]),
        ));
    }
    chunks.push(chunk(
        meta,
        json!([{"finish_reason": message.finish_reason, "index": 0, "delta": {}}]),
    ));
    if request.include_usage {
        let mut usage = chunk(meta, json!([]));
        usage["usage"] = json!(Usage::of(out));
        chunks.push(usage);
    }
    if let Some(last) = chunks.last_mut() {
        last["timings"] = json!(out.timings);
        extras(request, out, last);
    }
    chunks
}
