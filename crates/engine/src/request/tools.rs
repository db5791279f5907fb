//! `tools` and `tool_choice` as OpenAI defines them.

use serde::Serialize;
use serde_json::Value;

use super::fields::type_error;
use crate::error::Error;

/// A function the model may call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tool {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of the arguments object (`{"type": "object"}` when absent).
    pub parameters: Value,
}

/// `tool_choice`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model answers in text or calls tools (llama.cpp's and OpenAI's default).
    Auto,
    /// No tool calls; the tools are still shown to the template.
    None,
    /// At least one tool call.
    Required,
    /// A call to this function.
    Named(String),
}

pub(crate) fn read_tools(list: &[Value]) -> Result<Vec<Tool>, Error> {
    let mut tools = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        let at = |f: &str| format!("tools[{i}].{f}");
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("function");
        if kind != "function" {
            return Err(Error::InvalidValue {
                field: at("type"),
                message: format!("only \"function\" tools are supported, got \"{kind}\""),
            });
        }
        let function = match item.get("function") {
            Some(Value::Object(_)) => &item["function"],
            Some(other) => return Err(type_error(&at("function"), "an object", other)),
            None => {
                return Err(Error::InvalidValue {
                    field: at("function"),
                    message: "is required".into(),
                });
            }
        };
        let name = match function.get("name") {
            Some(Value::String(n)) if !n.is_empty() => n.clone(),
            other => {
                return Err(type_error(
                    &at("function.name"),
                    "a non-empty string",
                    other.unwrap_or(&Value::Null),
                ));
            }
        };
        if tools.iter().any(|t: &Tool| t.name == name) {
            return Err(Error::InvalidValue {
                field: at("function.name"),
                message: format!("the tool `{name}` is offered twice"),
            });
        }
        let description = match function.get("description") {
            None | Some(Value::Null) => None,
            Some(Value::String(d)) => Some(d.clone()),
            Some(other) => return Err(type_error(&at("function.description"), "a string", other)),
        };
        let parameters = match function.get("parameters") {
            None | Some(Value::Null) => serde_json::json!({"type": "object"}),
            Some(p @ Value::Object(_)) => p.clone(),
            Some(other) => {
                return Err(type_error(
                    &at("function.parameters"),
                    "a JSON Schema object",
                    other,
                ));
            }
        };
        tools.push(Tool {
            name,
            description,
            parameters,
        });
    }
    Ok(tools)
}

pub(crate) fn read_tool_choice(v: &Value) -> Result<ToolChoice, Error> {
    match v {
        Value::String(s) => match s.as_str() {
            "auto" => Ok(ToolChoice::Auto),
            "none" => Ok(ToolChoice::None),
            "required" => Ok(ToolChoice::Required),
            other => Err(Error::InvalidValue {
                field: "tool_choice".into(),
                message: format!(
                    "must be \"auto\", \"none\", \"required\" or a named function, got \"{other}\""
                ),
            }),
        },
        Value::Object(o) => match o.get("function").and_then(|f| f.get("name")) {
            Some(Value::String(name)) => Ok(ToolChoice::Named(name.clone())),
            other => Err(type_error(
                "tool_choice.function.name",
                "a string",
                other.unwrap_or(&Value::Null),
            )),
        },
        other => Err(type_error("tool_choice", "a string or an object", other)),
    }
}
