//! Requests shaped like llama.cpp's server: the `/completion` body and the OpenAI
//! `/v1/chat/completions` body, resolved into one [`Request`].
//!
//! Reading follows `tools/server/server-task.cpp` (`params_from_json_cmpl`) and
//! `server-common.cpp` (`oaicompat_chat_params_parse`): the same field names, the same
//! defaults, the same refusals. Two deliberate differences, both towards telling the user:
//! a field of the wrong type is an error naming the field (llama.cpp logs and uses the
//! default), and a field nobody reads comes back as a [`Warning`] (llama.cpp drops it).

mod chat;
pub mod custom_json;
mod fields;
mod response_format;
mod tools;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::{Error, json_type_name};
use crate::sampler::{SamplingParams, Stage, StageName};
pub use chat::{Message, ToolCall};
use fields::{Fields, as_integer, type_error};
pub use tools::{Tool, ToolChoice};

/// Which server endpoint the body was written for; it decides the response's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    /// llama.cpp's `/completion`.
    Completion,
    /// OpenAI's `/v1/chat/completions`.
    Chat,
}

/// What the model is given.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    /// A plain string, tokenized with the model's tokenizer.
    Text(String),
    /// Token ids, used as they are.
    Tokens(Vec<u32>),
    /// llama.cpp's mixed form: `[12, 34, "text", 56]`.
    Pieces(Vec<PromptPiece>),
    /// Chat messages, rendered through the model's chat template.
    Messages(Vec<Message>),
}

/// One element of a mixed prompt.
#[derive(Debug, Clone, PartialEq)]
pub enum PromptPiece {
    Text(String),
    Token(u32),
}

/// The one constraint a request resolves to, whichever field it came from.
#[derive(Debug, Clone, PartialEq)]
pub enum Constraint {
    /// Unconstrained text.
    None,
    /// A GBNF grammar (`grammar`, or WebLLM's `response_format: {type: "grammar"}`).
    Gbnf(String),
    /// A JSON Schema (`json_schema`, or `response_format` with a schema).
    JsonSchema(Value),
    /// Any JSON value: `response_format: {type: "json_object"}` without a schema. llama.cpp
    /// compiles this as the empty schema `{}`, which admits any value.
    AnyJson,
    /// Tool calls: `tools` with `tool_choice` other than `none`.
    Tools(ToolConstraint),
}

/// The tools part of a request, once `tool_choice` has been checked against `tools`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolConstraint {
    pub tools: Vec<Tool>,
    pub choice: ToolChoice,
    pub parallel: bool,
}

/// Something the request asked for that stampo did not do, returned with the response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warning {
    /// The field (a top-level key, or a path such as `samplers[2]`).
    pub field: String,
    pub message: String,
}

impl Warning {
    pub(crate) fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// A resolved request: every field read, checked and defaulted.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub endpoint: Endpoint,
    pub prompt: Prompt,
    /// `n_predict` / `max_tokens` / `max_completion_tokens`; `None` is llama.cpp's -1
    /// (until end of generation or the context is full).
    pub n_predict: Option<u32>,
    pub sampling: SamplingParams,
    /// `stop`: strings that end generation; they are not part of the returned text.
    pub stop: Vec<String>,
    /// `ignore_eos`: end-of-generation tokens are never sampled.
    pub ignore_eos: bool,
    pub constraint: Constraint,
    /// `n_probs` (or OpenAI's `logprobs` + `top_logprobs`): alternatives reported per token.
    pub n_probs: u32,
    /// `cache_prompt`, default true: reuse the KV cache of a common prompt prefix.
    pub cache_prompt: bool,
    pub stream: bool,
    /// `stream_options.include_usage`: a last chunk carrying `usage`.
    pub include_usage: bool,
    /// `return_tokens`: put the token ids in the `/completion` response.
    pub return_tokens: bool,
    /// The tools offered (also when `tool_choice` is `none`: the template still shows them).
    pub tools: Vec<Tool>,
    pub tool_choice: ToolChoice,
    pub parallel_tool_calls: bool,
    /// `chat_template_kwargs`, passed to the chat template.
    pub chat_template_kwargs: Map<String, Value>,
    /// `chat_template_kwargs.enable_thinking`, when given.
    pub enable_thinking: Option<bool>,
    /// `add_generation_prompt`, default true.
    pub add_generation_prompt: bool,
    /// stampo's `finish_in_budget`: near `n_predict`, steer to the grammar's shortest ending
    /// instead of cutting the document (`finish_reason` stays `stop`).
    pub finish_in_budget: bool,
    /// stampo's `fast_forward`: append the tokens of text the grammar forces without
    /// sampling them (one batched forward pass instead of one per token).
    pub fast_forward: bool,
    pub warnings: Vec<Warning>,
}

/// Fields llama.cpp's server reads that stampo accepts and does not act on. Present in a
/// body, each gets a warning saying so (never an error: clients send them by habit).
const IGNORED_FIELDS: &[(&str, &str)] = &[
    ("dynatemp_range", "dynamic temperature is not implemented"),
    (
        "dynatemp_exponent",
        "dynamic temperature is not implemented",
    ),
    ("top_n_sigma", "the top-n-sigma sampler is not implemented"),
    ("xtc_probability", "the XTC sampler is not implemented"),
    ("xtc_threshold", "the XTC sampler is not implemented"),
    ("dry_multiplier", "the DRY sampler is not implemented"),
    ("dry_base", "the DRY sampler is not implemented"),
    ("dry_allowed_length", "the DRY sampler is not implemented"),
    ("dry_penalty_last_n", "the DRY sampler is not implemented"),
    (
        "dry_sequence_breakers",
        "the DRY sampler is not implemented",
    ),
    ("mirostat", "mirostat is not implemented"),
    ("mirostat_tau", "mirostat is not implemented"),
    ("mirostat_eta", "mirostat is not implemented"),
    ("logit_bias", "logit_bias is not implemented"),
    ("n_keep", "context shifting is not implemented"),
    ("n_discard", "context shifting is not implemented"),
    ("n_indent", "n_indent is not implemented"),
    ("t_max_predict_ms", "time limits are not implemented"),
    ("t_max_prompt_ms", "time limits are not implemented"),
    ("id_slot", "there is one slot"),
    ("lora", "LoRA adapters are not supported"),
    (
        "timings_per_token",
        "timings come with the final response only",
    ),
    (
        "post_sampling_probs",
        "probabilities are reported before sampling",
    ),
    ("response_fields", "response_fields is not implemented"),
    ("grammar_lazy", "lazy grammars are not implemented"),
    ("grammar_triggers", "lazy grammars are not implemented"),
    ("preserved_tokens", "lazy grammars are not implemented"),
    ("reasoning_format", "reasoning is returned in the content"),
    (
        "n_cache_reuse",
        "KV cache reuse by shifting is not implemented",
    ),
];

/// Fields an OpenAI client sends that need no action here (one model, one choice).
const SILENT_FIELDS: &[&str] = &["model", "user", "n", "n_cmpl"];

impl Request {
    /// Reads a body of either shape: one with `messages` is a chat body.
    pub fn from_body(body: &Value) -> Result<Self, Error> {
        let is_chat = body.as_object().is_some_and(|m| m.contains_key("messages"));
        if is_chat {
            Self::from_chat(body)
        } else {
            Self::from_completion(body)
        }
    }

    /// Reads a llama.cpp `/completion` body.
    pub fn from_completion(body: &Value) -> Result<Self, Error> {
        let map = body_object(body)?;
        let mut f = Fields::new(map);
        let prompt = match f.get("prompt") {
            Some(v) => read_prompt(v)?,
            None => return Err(Error::MissingField { field: "prompt" }),
        };
        let mut request = Self::read_shared(&mut f, Endpoint::Completion, prompt)?;
        let grammar = f.string("grammar")?;
        let json_schema = f.get("json_schema");
        request.constraint = match (grammar, json_schema) {
            (Some(_), Some(_)) => {
                return Err(Error::Conflict {
                    message: r#"either "json_schema" or "grammar" can be specified, but not both"#,
                });
            }
            (Some(g), None) if !g.is_empty() => Constraint::Gbnf(g.to_string()),
            (None, Some(schema)) => schema_constraint("json_schema", schema)?,
            _ => Constraint::None,
        };
        if request.n_probs == 0 && f.has("logprobs") {
            // `/completion` with OpenAI's integer `logprobs` (used only when `n_probs` is absent).
            request.n_probs = read_count(&mut f, "logprobs", 0)?;
        }
        request.finish(&f);
        Ok(request)
    }

    /// Reads an OpenAI `/v1/chat/completions` body (with llama.cpp's extra fields).
    pub fn from_chat(body: &Value) -> Result<Self, Error> {
        let map = body_object(body)?;
        let mut f = Fields::new(map);
        let messages = match f.get("messages") {
            Some(v) => chat::read_messages(v)?,
            None => return Err(Error::MissingField { field: "messages" }),
        };
        let mut request = Self::read_shared(&mut f, Endpoint::Chat, Prompt::Messages(messages))?;
        chat::read_chat_fields(&mut f, &mut request)?;
        request.finish(&f);
        Ok(request)
    }

    /// The fields both endpoints share: sampling, length, stop, streaming.
    fn read_shared(f: &mut Fields<'_>, endpoint: Endpoint, prompt: Prompt) -> Result<Self, Error> {
        let d = SamplingParams::default();
        let max_tokens = f.i64("max_tokens", -1)?;
        let max_completion = f.i64("max_completion_tokens", max_tokens)?;
        let n_predict = f.i64("n_predict", max_completion)?;
        let repeat_last_n = f.i64("repeat_last_n", i64::from(d.repeat_last_n))?;
        if repeat_last_n < -1 {
            return Err(Error::InvalidValue {
                field: "repeat_last_n".into(),
                message: "must be >= -1".into(),
            });
        }
        let mut warnings = Vec::new();
        let seed = f.i64("seed", -1)?;
        let sampling = SamplingParams {
            temperature: f.f32("temperature", d.temperature)?,
            top_k: clamp_i32(f.i64("top_k", i64::from(d.top_k))?),
            top_p: f.f32("top_p", d.top_p)?,
            min_p: f.f32("min_p", d.min_p)?,
            typical_p: f.f32("typical_p", d.typical_p)?,
            min_keep: read_count(f, "min_keep", d.min_keep)?,
            repeat_penalty: f.f32("repeat_penalty", d.repeat_penalty)?,
            repeat_last_n: clamp_i32(repeat_last_n),
            presence_penalty: f.f32("presence_penalty", d.presence_penalty)?,
            frequency_penalty: f.f32("frequency_penalty", d.frequency_penalty)?,
            // llama.cpp reads the seed as uint32: -1 wraps to LLAMA_DEFAULT_SEED, "random".
            seed: match seed as u32 {
                u32::MAX => None,
                s => Some(s),
            },
            stages: read_samplers(f, &mut warnings)?,
        };
        let stream_options = f.object("stream_options")?;
        let include_usage = match stream_options {
            Some(o) => {
                let mut so = Fields::new(o);
                let usage = so
                    .bool("include_usage", false)
                    .map_err(|e| prefix(e, "stream_options."))?;
                for key in so.unread() {
                    warnings.push(Warning::new(
                        format!("stream_options.{key}"),
                        "unknown field, ignored",
                    ));
                }
                usage
            }
            None => false,
        };
        Ok(Self {
            endpoint,
            prompt,
            n_predict: u32::try_from(n_predict).ok(),
            sampling,
            stop: read_stop(f)?,
            ignore_eos: f.bool("ignore_eos", false)?,
            constraint: Constraint::None,
            n_probs: read_count(f, "n_probs", 0)?,
            cache_prompt: f.bool("cache_prompt", true)?,
            stream: f.bool("stream", false)?,
            include_usage,
            return_tokens: f.bool("return_tokens", false)?,
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            parallel_tool_calls: false,
            chat_template_kwargs: Map::new(),
            enable_thinking: None,
            add_generation_prompt: true,
            finish_in_budget: f.bool("finish_in_budget", false)?,
            fast_forward: f.bool("fast_forward", false)?,
            warnings,
        })
    }

    /// Turns what nobody read into warnings.
    fn finish(&mut self, f: &Fields<'_>) {
        for key in f.unread() {
            if SILENT_FIELDS.contains(&key.as_str()) {
                continue;
            }
            let message = match IGNORED_FIELDS.iter().find(|(k, _)| *k == key) {
                Some((_, why)) => format!("accepted and ignored: {why}"),
                None => "unknown field, ignored".to_string(),
            };
            self.warnings.push(Warning::new(key, message));
        }
    }
}

fn body_object(body: &Value) -> Result<&Map<String, Value>, Error> {
    body.as_object().ok_or(Error::BodyNotObject {
        got: json_type_name(body),
    })
}

/// A non-negative count; a negative one reads as 0, as llama.cpp's loops over it do.
fn read_count<'a>(f: &mut Fields<'a>, key: &'a str, default: u32) -> Result<u32, Error> {
    let v = f.i64(key, i64::from(default))?;
    Ok(u32::try_from(v.max(0)).unwrap_or(u32::MAX))
}

fn clamp_i32(v: i64) -> i32 {
    v.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
}

fn prefix(e: Error, p: &str) -> Error {
    match e {
        Error::FieldType {
            field,
            expected,
            got,
        } => Error::FieldType {
            field: format!("{p}{field}"),
            expected,
            got,
        },
        other => other,
    }
}

/// `prompt`: a string, token ids, or llama.cpp's mix of both.
fn read_prompt(v: &Value) -> Result<Prompt, Error> {
    match v {
        Value::String(s) => Ok(Prompt::Text(s.clone())),
        Value::Array(items) => {
            let strings = items.iter().filter(|x| x.is_string()).count();
            if strings > 1 && strings == items.len() {
                return Err(Error::InvalidValue {
                    field: "prompt".into(),
                    message: "several prompts in one request are not supported; send one request per prompt".into(),
                });
            }
            let mut pieces = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                pieces.push(match item {
                    Value::String(s) => PromptPiece::Text(s.clone()),
                    _ => PromptPiece::Token(read_token(item).ok_or_else(|| {
                        type_error(&format!("prompt[{i}]"), "a token id or a string", item)
                    })?),
                });
            }
            if pieces.iter().all(|p| matches!(p, PromptPiece::Token(_))) {
                let tokens = pieces
                    .into_iter()
                    .filter_map(|p| match p {
                        PromptPiece::Token(t) => Some(t),
                        PromptPiece::Text(_) => None,
                    })
                    .collect();
                return Ok(Prompt::Tokens(tokens));
            }
            Ok(Prompt::Pieces(pieces))
        }
        other => Err(type_error(
            "prompt",
            "a string or an array of token ids",
            other,
        )),
    }
}

fn read_token(v: &Value) -> Option<u32> {
    as_integer(v).and_then(|i| u32::try_from(i).ok())
}

/// `stop`: a string or an array of strings; empty strings are dropped, as llama.cpp does.
fn read_stop(f: &mut Fields<'_>) -> Result<Vec<String>, Error> {
    match f.get("stop") {
        None => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(if s.is_empty() {
            vec![]
        } else {
            vec![s.clone()]
        }),
        Some(Value::Array(items)) => {
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let s = item
                    .as_str()
                    .ok_or_else(|| type_error(&format!("stop[{i}]"), "a string", item))?;
                if !s.is_empty() {
                    out.push(s.to_string());
                }
            }
            Ok(out)
        }
        Some(other) => Err(type_error("stop", "a string or an array of strings", other)),
    }
}

/// `samplers`: an array of names or a string of one-letter names, as llama.cpp reads it.
/// Names llama.cpp drops with a log line come back as warnings.
fn read_samplers(f: &mut Fields<'_>, warnings: &mut Vec<Warning>) -> Result<Vec<Stage>, Error> {
    let mut stages = Vec::new();
    let mut push = |resolved: StageName, field: String, shown: &str| match resolved {
        StageName::Known(stage) => stages.push(stage),
        StageName::Unsupported => warnings.push(Warning::new(
            field,
            format!("sampler `{shown}` is not implemented, left out of the chain"),
        )),
        StageName::Unknown => warnings.push(Warning::new(
            field,
            format!("unknown sampler `{shown}`, left out of the chain"),
        )),
    };
    match f.get("samplers") {
        None => return Ok(Stage::DEFAULT_ORDER.to_vec()),
        Some(Value::String(chars)) => {
            for c in chars.chars() {
                push(Stage::from_char(c), "samplers".to_string(), &c.to_string());
            }
        }
        Some(Value::Array(names)) => {
            for (i, name) in names.iter().enumerate() {
                let name = name
                    .as_str()
                    .ok_or_else(|| type_error(&format!("samplers[{i}]"), "a string", name))?;
                push(Stage::from_name(name), format!("samplers[{i}]"), name);
            }
        }
        Some(other) => {
            return Err(type_error(
                "samplers",
                "an array of names or a string",
                other,
            ));
        }
    }
    Ok(stages)
}

/// A schema given as an object, or (as WebLLM sends it) as a string holding JSON.
fn schema_constraint(field: &str, schema: &Value) -> Result<Constraint, Error> {
    let schema = match schema {
        Value::String(text) => {
            serde_json::from_str::<Value>(text).map_err(|e| Error::InvalidValue {
                field: field.to_string(),
                message: format!("the schema string is not valid JSON: {e}"),
            })?
        }
        other => other.clone(),
    };
    match &schema {
        Value::Object(_) | Value::Bool(true) => Ok(Constraint::JsonSchema(schema)),
        other => Err(type_error(field, "a JSON Schema object", other)),
    }
}
