//! `response_format` in every shape clients send it:
//!
//! | body | constraint |
//! |---|---|
//! | `{"type": "text"}` | none |
//! | `{"type": "json_object"}` | any JSON |
//! | `{"type": "json_object", "schema": {...}}` (llama.cpp) | the schema |
//! | `{"type": "json_schema", "json_schema": {"schema": {...}}}` (OpenAI) | the schema |
//! | `{"type": "json_schema", "schema": {...}}` (top-level schema) | the schema |
//! | `{"type": "json_object", "schema": "{...}"}` (WebLLM: the schema as a string) | the schema |
//! | `{"type": "grammar", "grammar": "root ::= ..."}` (WebLLM) | the GBNF |

use serde_json::{Map, Value};

use super::fields::{Fields, type_error};
use super::{Constraint, Warning, schema_constraint};
use crate::error::Error;

/// Resolves `response_format`; `Ok(None)` for `text` (no constraint).
pub(crate) fn read(
    format: &Map<String, Value>,
    warnings: &mut Vec<Warning>,
) -> Result<Option<Constraint>, Error> {
    let mut f = Fields::new(format);
    let kind = f
        .string("type")
        .map_err(|_| field_error("response_format.type", "a string", format.get("type")))?
        .unwrap_or("");
    let constraint = match kind {
        "" | "text" => None,
        "json_object" => Some(match f.get("schema") {
            Some(schema) => schema_constraint("response_format.schema", schema)?,
            None => Constraint::AnyJson,
        }),
        "json_schema" => {
            let wrapped = match f.get("json_schema") {
                Some(Value::Object(wrapper)) => {
                    let mut w = Fields::new(wrapper);
                    let schema = w.get("schema");
                    // `name`, `strict` and `description` are OpenAI's; the schema is enforced
                    // strictly whatever `strict` says.
                    let _ = (w.get("name"), w.get("strict"), w.get("description"));
                    for key in w.unread() {
                        warnings.push(Warning::new(
                            format!("response_format.json_schema.{key}"),
                            "unknown field, ignored",
                        ));
                    }
                    schema
                }
                Some(other) => {
                    return Err(type_error(
                        "response_format.json_schema",
                        "an object",
                        other,
                    ));
                }
                None => None,
            };
            Some(match (wrapped, f.get("schema")) {
                (Some(schema), _) => {
                    schema_constraint("response_format.json_schema.schema", schema)?
                }
                (None, Some(schema)) => schema_constraint("response_format.schema", schema)?,
                // llama.cpp falls back to the empty schema `{}`: any JSON value.
                (None, None) => Constraint::AnyJson,
            })
        }
        "grammar" => match f.string("grammar")? {
            Some(g) => Some(Constraint::Gbnf(g.to_string())),
            None => {
                return Err(Error::MissingField {
                    field: "response_format.grammar",
                });
            }
        },
        other => {
            return Err(Error::InvalidValue {
                field: "response_format.type".into(),
                message: format!(
                    "must be one of \"text\", \"json_object\", \"json_schema\" or \"grammar\", but got: {other}"
                ),
            });
        }
    };
    for key in f.unread() {
        warnings.push(Warning::new(
            format!("response_format.{key}"),
            "unknown field, ignored",
        ));
    }
    Ok(constraint)
}

fn field_error(field: &str, expected: &'static str, got: Option<&Value>) -> Error {
    type_error(field, expected, got.unwrap_or(&Value::Null))
}
