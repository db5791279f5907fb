//! The chat-only part of a body: `messages`, `response_format`, `tools`, `tool_choice`,
//! `parallel_tool_calls`, `chat_template_kwargs`, `logprobs`.

use serde::Serialize;
use serde_json::Value;

use super::fields::{Fields, type_error};
use super::{
    Constraint, Request, ToolChoice, ToolConstraint, Warning, response_format, schema_constraint,
    tools,
};
use crate::error::Error;

/// One chat message, as the chat template sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    pub role: String,
    /// The text; array content (`[{"type": "text", "text": ...}]`) is joined.
    pub content: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
}

/// A tool call in an assistant message (request) or in a response, OpenAI-shaped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as JSON text, as OpenAI sends them.
    pub arguments: String,
}

pub(crate) fn read_messages(v: &Value) -> Result<Vec<Message>, Error> {
    let items = v
        .as_array()
        .ok_or_else(|| type_error("messages", "an array", v))?;
    items
        .iter()
        .enumerate()
        .map(|(i, m)| read_message(i, m))
        .collect()
}

fn read_message(i: usize, v: &Value) -> Result<Message, Error> {
    let at = |field: &str| format!("messages[{i}].{field}");
    let map = v
        .as_object()
        .ok_or_else(|| type_error(&format!("messages[{i}]"), "an object", v))?;
    let role = match map.get("role") {
        Some(Value::String(r)) => r.clone(),
        Some(other) => return Err(type_error(&at("role"), "a string", other)),
        None => {
            return Err(Error::InvalidValue {
                field: at("role"),
                message: "is required".into(),
            });
        }
    };
    let content = match map.get("content") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for (j, part) in parts.iter().enumerate() {
                let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
                match (kind, part.get("text")) {
                    ("text", Some(Value::String(t))) => text.push_str(t),
                    _ => {
                        return Err(Error::InvalidValue {
                            field: format!("messages[{i}].content[{j}]"),
                            message: format!("unsupported content part type `{kind}` (only text)"),
                        });
                    }
                }
            }
            Some(text)
        }
        Some(other) => return Err(type_error(&at("content"), "a string or an array", other)),
    };
    // llama.cpp: non-assistant messages need content; assistant ones content or tool calls.
    let tool_calls = match map.get("tool_calls") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(calls)) => calls
            .iter()
            .enumerate()
            .map(|(j, c)| read_tool_call(&format!("messages[{i}].tool_calls[{j}]"), c))
            .collect::<Result<_, _>>()?,
        Some(other) => return Err(type_error(&at("tool_calls"), "an array", other)),
    };
    if content.is_none() && (role != "assistant" || tool_calls.is_empty()) {
        return Err(Error::InvalidValue {
            field: at("content"),
            message: "is required (an assistant message may give tool_calls instead)".into(),
        });
    }
    let text = |key: &str| -> Result<Option<String>, Error> {
        match map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(type_error(&at(key), "a string", other)),
        }
    };
    Ok(Message {
        role,
        content,
        tool_calls,
        tool_call_id: text("tool_call_id")?,
        name: text("name")?,
        reasoning_content: text("reasoning_content")?,
    })
}

fn read_tool_call(path: &str, v: &Value) -> Result<ToolCall, Error> {
    let function = v.get("function").ok_or_else(|| Error::InvalidValue {
        field: format!("{path}.function"),
        message: "is required".into(),
    })?;
    let name = match function.get("name") {
        Some(Value::String(n)) => n.clone(),
        other => {
            return Err(type_error(
                &format!("{path}.function.name"),
                "a string",
                other.unwrap_or(&Value::Null),
            ));
        }
    };
    // OpenAI sends arguments as a JSON string; some clients send the object itself.
    let arguments = match function.get("arguments") {
        None | Some(Value::Null) => "{}".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    let id = v
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    Ok(ToolCall {
        id,
        name,
        arguments,
    })
}

/// Reads the chat fields into `request` and resolves its constraint, refusing the
/// combinations llama.cpp refuses.
pub(crate) fn read_chat_fields(f: &mut Fields<'_>, request: &mut Request) -> Result<(), Error> {
    let grammar = f.string("grammar")?.filter(|g| !g.is_empty());
    let json_schema = f.get("json_schema");
    if grammar.is_some() && json_schema.is_some() {
        return Err(Error::Conflict {
            message: "Cannot use both json_schema and grammar",
        });
    }
    let mut constraint = match (grammar, json_schema) {
        (Some(g), _) => Constraint::Gbnf(g.to_string()),
        (None, Some(schema)) => schema_constraint("json_schema", schema)?,
        (None, None) => Constraint::None,
    };
    if let Some(format) = f.object("response_format")?
        && let Some(from_format) = response_format::read(format, &mut request.warnings)?
    {
        if let Constraint::Gbnf(_) = constraint {
            return Err(Error::Conflict {
                message: "Either \"json_schema\" or \"grammar\" can be specified, but not both",
            });
        }
        if json_schema.is_some() {
            // llama.cpp lets response_format win over json_schema without a word.
            request.warnings.push(Warning::new(
                "json_schema",
                "overridden by response_format, which takes precedence",
            ));
        }
        constraint = from_format;
    }

    request.tools = match f.array("tools")? {
        Some(list) => tools::read_tools(list)?,
        None => Vec::new(),
    };
    request.tool_choice = match f.get("tool_choice") {
        Some(v) => tools::read_tool_choice(v)?,
        None => ToolChoice::Auto,
    };
    request.parallel_tool_calls = f.bool("parallel_tool_calls", false)?;
    if let ToolChoice::Named(name) = &request.tool_choice
        && !request.tools.iter().any(|t| &t.name == name)
    {
        return Err(Error::UnknownTool { name: name.clone() });
    }
    if request.tool_choice == ToolChoice::Required && request.tools.is_empty() {
        return Err(Error::InvalidValue {
            field: "tool_choice".into(),
            message: "is \"required\" but no tools are offered".into(),
        });
    }
    if !request.tools.is_empty() && request.tool_choice != ToolChoice::None {
        match constraint {
            Constraint::Gbnf(_) => {
                return Err(Error::Conflict {
                    message: "Cannot use custom grammar constraints with tools.",
                });
            }
            Constraint::None => {}
            _ => {
                return Err(Error::Conflict {
                    message: "Cannot use a JSON response format with tools: tool calls already constrain the output.",
                });
            }
        }
        constraint = Constraint::Tools(ToolConstraint {
            tools: request.tools.clone(),
            choice: request.tool_choice.clone(),
            parallel: request.parallel_tool_calls,
        });
    }
    request.constraint = constraint;

    if let Some(kwargs) = f.object("chat_template_kwargs")? {
        request.chat_template_kwargs = kwargs.clone();
        request.enable_thinking = match kwargs.get("enable_thinking") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            // llama.cpp: "invalid type for \"enable_thinking\" (expected boolean, got string)".
            Some(other) => {
                return Err(type_error(
                    "chat_template_kwargs.enable_thinking",
                    "a boolean",
                    other,
                ));
            }
        };
    }
    request.add_generation_prompt = f.bool("add_generation_prompt", true)?;

    // OpenAI's logprobs: `logprobs: true` with `top_logprobs` (default 20, as llama.cpp).
    let logprobs = f.bool("logprobs", false)?;
    let top_logprobs = f.i64("top_logprobs", 20)?;
    if logprobs {
        request.n_probs = u32::try_from(top_logprobs.max(0)).unwrap_or(u32::MAX);
    } else if f.has("top_logprobs") {
        return Err(Error::InvalidValue {
            field: "top_logprobs".into(),
            message: "requires logprobs to be set to true".into(),
        });
    }
    Ok(())
}
