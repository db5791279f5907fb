//! The validity badge: is an output valid for the constraint its request carried? A JSON
//! Schema is checked by the `jsonschema` crate, a validator independent of stampo's grammar,
//! so a bug in the compiler cannot vouch for itself. A GBNF grammar has no other judge than
//! stampo's own matcher, and the badge says so.

use serde_json::{Map, Value};

/// The request fields that carry a constraint.
const CONSTRAINT_FIELDS: [&str; 3] = ["grammar", "json_schema", "response_format"];

/// Whether a Custom JSON object sets the constraint itself, replacing the editor's.
pub fn sets_constraint(custom: &Value) -> bool {
    CONSTRAINT_FIELDS.iter().any(|k| custom.get(k).is_some())
}

/// `custom` without its constraint fields: what the unconstrained run merges.
pub fn without_constraint(custom: &Value) -> Value {
    let mut rest = custom.as_object().cloned().unwrap_or_default();
    rest.retain(|k, _| !CONSTRAINT_FIELDS.contains(&k.as_str()));
    Value::Object(rest)
}

/// `body` with `custom` merged over it, shallowly, as the package and llama.cpp's web UI do.
pub fn merged(body: &Value, custom: Option<&Value>) -> Value {
    let mut out: Map<String, Value> = body.as_object().cloned().unwrap_or_default();
    if let Some(Value::Object(custom)) = custom {
        out.extend(custom.clone());
    }
    Value::Object(out)
}

/// What an output is judged against.
pub enum Judge {
    /// No constraint: nothing to judge.
    Nothing,
    /// `json_object` without a schema: any JSON value.
    AnyJson,
    Schema(Box<jsonschema::Validator>),
    /// The validator could not compile the schema (stampo may still have enforced it).
    Unjudged(String),
    Grammar(String),
}

/// A badge: whether the output passed, and what to say.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub ok: bool,
    pub text: String,
}

impl Judge {
    /// The constraint a chat body carries, resolved as the engine resolves it: `grammar`;
    /// else `response_format` (any shape), which wins over `json_schema`; else `json_schema`.
    /// A body the engine refuses (both `grammar` and a schema) fails before any output.
    pub fn of_body(body: &Value) -> Judge {
        if let Some(g) = body["grammar"].as_str().filter(|g| !g.is_empty()) {
            return Judge::Grammar(g.to_string());
        }
        let format = &body["response_format"];
        match format["type"].as_str() {
            Some("json_object" | "json_schema") => {
                return match format["json_schema"].get("schema").or(format.get("schema")) {
                    Some(schema) => Judge::schema(schema),
                    None => Judge::AnyJson,
                };
            }
            Some("grammar") => {
                if let Some(g) = format["grammar"].as_str() {
                    return Judge::Grammar(g.to_string());
                }
            }
            _ => {}
        }
        body.get("json_schema")
            .map_or(Judge::Nothing, Judge::schema)
    }

    fn schema(schema: &Value) -> Judge {
        // WebLLM's clients send the schema as a string.
        let parsed;
        let schema = match schema {
            Value::String(text) => match serde_json::from_str::<Value>(text) {
                Ok(v) => {
                    parsed = v;
                    &parsed
                }
                Err(e) => return Judge::Unjudged(format!("the schema is not JSON: {e}")),
            },
            other => other,
        };
        match jsonschema::validator_for(schema) {
            Ok(v) => Judge::Schema(Box::new(v)),
            Err(e) => Judge::Unjudged(e.to_string()),
        }
    }

    /// The badge for `output`; `None` when nothing constrained it.
    pub fn verdict(&self, output: &str) -> Option<Verdict> {
        let verdict = |ok, text: String| Some(Verdict { ok, text });
        let json = || serde_json::from_str::<Value>(output);
        match self {
            Judge::Nothing => None,
            Judge::AnyJson => match json() {
                Ok(_) => verdict(true, "valid JSON".into()),
                Err(_) => verdict(false, "not JSON".into()),
            },
            Judge::Schema(validator) => {
                let Ok(doc) = json() else {
                    return verdict(false, "not JSON".into());
                };
                match validator.iter_errors(&doc).next() {
                    None => verdict(
                        true,
                        "valid: the schema holds (checked by jsonschema)".into(),
                    ),
                    Some(e) => {
                        let at = e.instance_path().to_string();
                        let at = if at.is_empty() {
                            "the document".into()
                        } else {
                            at
                        };
                        verdict(false, format!("invalid at {at}: {e}"))
                    }
                }
            }
            Judge::Unjudged(why) => verdict(
                false,
                format!("not checked: the validator refused the schema ({why})"),
            ),
            Judge::Grammar(g) => match stampo_wasm::gbnf_accepts(g, output) {
                Ok(true) => verdict(
                    true,
                    "valid: in the grammar's language (stampo's matcher)".into(),
                ),
                Ok(false) => verdict(false, "outside the grammar's language".into()),
                Err((_, why)) => verdict(false, format!("not checked: {why}")),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text(judge: &Judge, output: &str) -> Option<String> {
        judge
            .verdict(output)
            .map(|v| format!("{} {}", v.ok, v.text))
    }

    #[test]
    fn a_schema_in_any_shape_is_judged_by_the_validator() {
        let schema = json!({"type": "object", "properties": {"eta": {"type": "integer", "maximum": 120}}, "required": ["eta"]});
        for body in [
            json!({"response_format": {"type": "json_schema", "json_schema": {"schema": schema}}}),
            json!({"response_format": {"type": "json_schema", "schema": schema}}),
            json!({"response_format": {"type": "json_object", "schema": schema.to_string()}}),
            json!({"json_schema": schema}),
            // response_format wins over json_schema, as in the engine and llama.cpp.
            json!({"json_schema": {"type": "string"}, "response_format": {"type": "json_object", "schema": schema}}),
        ] {
            let judge = Judge::of_body(&body);
            assert_eq!(
                text(&judge, r#"{"eta": 34}"#).as_deref(),
                Some("true valid: the schema holds (checked by jsonschema)"),
                "{body}"
            );
            let bad = text(&judge, r#"{"eta": 150}"#).unwrap_or_default();
            assert!(bad.starts_with("false invalid at /eta: 150"), "{bad}");
            assert_eq!(text(&judge, "{").as_deref(), Some("false not JSON"));
        }
    }

    #[test]
    fn multiple_of_is_exact_in_decimal() {
        // 19.99 / 0.01 is 1998.9999999999998 in binary floating point; it is a multiple.
        let judge = Judge::of_body(&json!({"json_schema": {"multipleOf": 0.01}}));
        assert!(judge.verdict("19.99").is_some_and(|v| v.ok));
        assert!(judge.verdict("19.999").is_some_and(|v| !v.ok));
    }

    #[test]
    fn grammars_json_object_and_nothing() {
        let g = Judge::of_body(&json!({"grammar": "root ::= \"yes\" | \"no\""}));
        assert_eq!(
            text(&g, "yes").as_deref(),
            Some("true valid: in the grammar's language (stampo's matcher)")
        );
        assert_eq!(
            text(&g, "maybe").as_deref(),
            Some("false outside the grammar's language")
        );
        let any = Judge::of_body(&json!({"response_format": {"type": "json_object"}}));
        assert_eq!(text(&any, "[1]").as_deref(), Some("true valid JSON"));
        assert!(
            Judge::of_body(&json!({"response_format": {"type": "text"}}))
                .verdict("x")
                .is_none()
        );
        let refused = Judge::of_body(&json!({"json_schema": {"type": 7}}));
        assert!(
            text(&refused, "1")
                .unwrap_or_default()
                .starts_with("false not checked")
        );
    }

    #[test]
    fn custom_json_constraint_fields() {
        let custom = json!({"json_schema": {"type": "string"}, "temperature": 0.5});
        assert!(sets_constraint(&custom));
        assert!(!sets_constraint(&json!({"temperature": 0.5})));
        assert_eq!(without_constraint(&custom), json!({"temperature": 0.5}));
        let body = merged(&json!({"a": 1, "temperature": 0}), Some(&custom));
        assert_eq!(body["temperature"], 0.5);
        assert_eq!(body["a"], 1);
    }
}
