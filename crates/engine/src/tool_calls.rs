//! Tool calls as constrained JSON, in llama.cpp's *generic* tool-call format
//! (`common/chat.cpp`, used for models without a native tool syntax):
//!
//! - one call: `{"tool_call": {"name": "get_weather", "arguments": {...}}}`
//! - `parallel_tool_calls`: `{"tool_calls": [{"name": ..., "arguments": ...}, ...]}`
//! - `tool_choice: "auto"` also allows `{"response": "text for the user"}`.
//!
//! Each call's `name` is a `const` from the offered tools (only the named one under a named
//! `tool_choice`) and its `arguments` are that tool's `parameters` schema, so the grammar
//! makes an unknown tool or malformed arguments impossible. The parsed calls come back
//! OpenAI-shaped ([`ToolCall`] with the arguments as JSON text).

use serde_json::{Value, json};

use crate::request::{ToolCall, ToolChoice, ToolConstraint};

/// The JSON Schema the output must match.
pub fn tools_schema(t: &ToolConstraint) -> Value {
    let callable: Vec<Value> = t
        .tools
        .iter()
        .filter(|tool| match &t.choice {
            ToolChoice::Named(name) => &tool.name == name,
            _ => true,
        })
        .map(|tool| {
            json!({
                "type": "object",
                "properties": {
                    "name": {"const": tool.name},
                    "arguments": tool.parameters,
                },
                "required": ["name", "arguments"],
                "additionalProperties": false,
            })
        })
        .collect();
    let call = if callable.len() == 1 {
        callable.into_iter().next().unwrap_or(Value::Null)
    } else {
        json!({"anyOf": callable})
    };
    let calls = if t.parallel {
        json!({
            "type": "object",
            "properties": {"tool_calls": {"type": "array", "items": call, "minItems": 1}},
            "required": ["tool_calls"],
            "additionalProperties": false,
        })
    } else {
        json!({
            "type": "object",
            "properties": {"tool_call": call},
            "required": ["tool_call"],
            "additionalProperties": false,
        })
    };
    match t.choice {
        ToolChoice::Auto => json!({"anyOf": [calls, {
            "type": "object",
            "properties": {"response": {"type": "string"}},
            "required": ["response"],
            "additionalProperties": false,
        }]}),
        _ => calls,
    }
}

/// The instruction added to the system prompt so the model knows the format the grammar
/// will hold it to (the schema itself is what constrains; this only helps the model).
pub fn tools_instruction(t: &ToolConstraint) -> String {
    let schema = tools_schema(t);
    let what = match (&t.choice, t.parallel) {
        (ToolChoice::Auto, false) => {
            "either with `tool_call` (a request to call a tool) or with `response` (a reply to the user)"
        }
        (ToolChoice::Auto, true) => {
            "either with `tool_calls` (requests to call tools) or with `response` (a reply to the user)"
        }
        (_, false) => "with `tool_call` (a request to call a tool)",
        (_, true) => "with `tool_calls` (requests to call tools)",
    };
    format!("Respond in JSON format, {what}, following this schema:\n{schema}")
}

/// The assistant message read back from constrained output.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedToolOutput {
    /// `response` text under `tool_choice: "auto"`.
    pub content: Option<String>,
    pub calls: Vec<ToolCall>,
}

/// Reads constrained output; `None` when it is not a complete document (generation was cut
/// by the length limit), in which case the raw text is returned as content.
pub fn parse_tool_output(text: &str, id_prefix: &str) -> Option<ParsedToolOutput> {
    let value: Value = serde_json::from_str(text).ok()?;
    let call = |i: usize, c: &Value| -> Option<ToolCall> {
        Some(ToolCall {
            id: format!("{id_prefix}{i}"),
            name: c.get("name")?.as_str()?.to_string(),
            arguments: c.get("arguments")?.to_string(),
        })
    };
    if let Some(c) = value.get("tool_call") {
        return Some(ParsedToolOutput {
            content: None,
            calls: vec![call(0, c)?],
        });
    }
    if let Some(list) = value.get("tool_calls").and_then(Value::as_array) {
        let calls = list
            .iter()
            .enumerate()
            .map(|(i, c)| call(i, c))
            .collect::<Option<Vec<_>>>()?;
        return Some(ParsedToolOutput {
            content: None,
            calls,
        });
    }
    let response = value.get("response")?.as_str()?.to_string();
    Some(ParsedToolOutput {
        content: Some(response),
        calls: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Tool;

    fn tools(choice: ToolChoice, parallel: bool) -> ToolConstraint {
        let tool = |name: &str| Tool {
            name: name.into(),
            description: None,
            parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        };
        ToolConstraint {
            tools: vec![tool("get_weather"), tool("get_time")],
            choice,
            parallel,
        }
    }

    #[test]
    fn a_named_choice_offers_only_that_tool() {
        let s = tools_schema(&tools(ToolChoice::Named("get_time".into()), false));
        assert_eq!(
            s["properties"]["tool_call"]["properties"]["name"],
            json!({"const": "get_time"})
        );
        assert_eq!(s["required"], json!(["tool_call"]));
    }

    #[test]
    fn required_offers_every_tool_and_auto_adds_a_response() {
        let s = tools_schema(&tools(ToolChoice::Required, true));
        let any = &s["properties"]["tool_calls"]["items"]["anyOf"];
        assert_eq!(any.as_array().map(Vec::len), Some(2));
        assert_eq!(s["properties"]["tool_calls"]["minItems"], 1);
        let auto = tools_schema(&tools(ToolChoice::Auto, false));
        assert_eq!(auto["anyOf"][1]["required"], json!(["response"]));
    }

    #[test]
    fn output_comes_back_openai_shaped() {
        let one = parse_tool_output(
            r#"{"tool_call": {"name": "get_weather", "arguments": {"city": "Roma"}}}"#,
            "call_",
        );
        let one = one.expect("parsed");
        assert_eq!(
            one.calls,
            vec![ToolCall {
                id: "call_0".into(),
                name: "get_weather".into(),
                arguments: r#"{"city":"Roma"}"#.into()
            }]
        );
        let many = parse_tool_output(
            r#"{"tool_calls": [{"name": "get_weather", "arguments": {}}, {"name": "get_time", "arguments": {"city": "Oslo"}}]}"#,
            "c",
        )
        .expect("parsed");
        assert_eq!(
            many.calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
            ["c0", "c1"]
        );
        let text = parse_tool_output(r#"{"response": "Ciao!"}"#, "c").expect("parsed");
        assert_eq!(
            (text.content.as_deref(), text.calls.len()),
            (Some("Ciao!"), 0)
        );
        assert!(parse_tool_output(r#"{"tool_call": {"name": "get_wea"#, "c").is_none());
    }
}
