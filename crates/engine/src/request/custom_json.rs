//! *Custom JSON*: a JSON object merged over the request body last and shallowly, exactly as
//! llama.cpp's web UI does it (`tools/server/webui/src/lib/services/chat.service.ts`):
//!
//! ```js
//! if (custom) {
//!   try {
//!     const customParams = typeof custom === 'string' ? JSON.parse(custom) : custom;
//!     Object.assign(requestBody, customParams);
//!   } catch (error) { console.warn('Failed to parse custom parameters:', error); }
//! }
//! ```
//!
//! So: an empty setting does nothing; each top-level key replaces the body's key whole (a
//! nested object is not merged into the body's); `null` values are copied as `null`; text
//! that is not JSON leaves the body as it was (the UI only logs it — here it is a warning).
//! `Object.assign` copies own enumerable properties, so an array source assigns `"0"`,
//! `"1"`, …, a string source assigns one key per UTF-16 unit, and numbers, booleans and
//! `null` assign nothing; each of those gets a warning too, since it is surely a mistake.

use serde_json::{Map, Value};

use super::Warning;

const FIELD: &str = "custom";

/// Merges Custom JSON text over `body`. Returns what the user should be told.
pub fn merge_text(body: &mut Map<String, Value>, custom: &str) -> Vec<Warning> {
    if custom.is_empty() {
        return Vec::new();
    }
    match serde_json::from_str::<Value>(custom) {
        Ok(value) => merge_value(body, &value),
        Err(e) => vec![Warning::new(
            FIELD,
            format!("Custom JSON is not valid JSON ({e}); the request was sent without it"),
        )],
    }
}

/// Merges an already-parsed Custom JSON value over `body` (`Object.assign(body, value)`).
pub fn merge_value(body: &mut Map<String, Value>, custom: &Value) -> Vec<Warning> {
    match custom {
        Value::Object(fields) => {
            for (key, value) in fields {
                body.insert(key.clone(), value.clone());
            }
            Vec::new()
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                body.insert(i.to_string(), item.clone());
            }
            vec![not_an_object(
                "an array: its elements were assigned as keys \"0\", \"1\", …",
            )]
        }
        Value::String(text) => {
            for (i, unit) in text.encode_utf16().enumerate() {
                // A lone surrogate cannot live in a Rust string; it becomes U+FFFD.
                let ch = char::decode_utf16([unit])
                    .next()
                    .and_then(Result::ok)
                    .unwrap_or(char::REPLACEMENT_CHARACTER);
                body.insert(i.to_string(), Value::String(ch.to_string()));
            }
            vec![not_an_object(
                "a string: its characters were assigned as keys \"0\", \"1\", …",
            )]
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {
            vec![not_an_object("not an object: nothing was merged")]
        }
    }
}

fn not_an_object(what: &str) -> Warning {
    Warning::new(FIELD, format!("Custom JSON is {what}"))
}
