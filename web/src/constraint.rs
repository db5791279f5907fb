//! What the page constrains output with: a JSON Schema or a GBNF grammar, as edited in the
//! schema panel and applied by the extraction panels.

use leptos::prelude::*;
use serde_json::{Map, Value, json};

/// Which language the editor holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Schema,
    Gbnf,
}

/// The editor's text and mode, shared by the panels.
#[derive(Clone, Copy)]
pub struct Constraint {
    pub text: RwSignal<String>,
    pub mode: RwSignal<Mode>,
}

impl Constraint {
    pub fn new(text: &str) -> Self {
        Constraint {
            text: RwSignal::new(text.to_string()),
            mode: RwSignal::new(Mode::Schema),
        }
    }

    /// Adds the constraint to a request body: `response_format` with the schema, or
    /// `grammar`. Nothing when the text does not parse (the panel shows why).
    pub fn apply(&self, body: &mut Map<String, Value>) {
        let text = self.text.get_untracked();
        match self.mode.get_untracked() {
            Mode::Schema => {
                if let Ok(schema) = serde_json::from_str::<Value>(&text) {
                    body.insert(
                        "response_format".into(),
                        json!({"type": "json_schema", "json_schema": {"name": "extraction", "schema": schema}}),
                    );
                }
            }
            Mode::Gbnf => {
                body.insert("grammar".into(), Value::String(text));
            }
        }
    }

    /// The GBNF the output must match (the schema's, compiled), for the validity badge.
    pub fn gbnf(&self) -> Option<String> {
        let text = self.text.get();
        match self.mode.get() {
            Mode::Gbnf => stampo_wasm::check_gbnf_json(&text).ok().map(|_| text),
            Mode::Schema => stampo_wasm::compile_schema_json(&text, false)
                .ok()
                .and_then(|j| serde_json::from_str::<Value>(&j).ok())
                .and_then(|v| v["gbnf"].as_str().map(str::to_string)),
        }
    }

    /// Whether the output should also be JSON (schema mode).
    pub fn wants_json(&self) -> bool {
        self.mode.get() == Mode::Schema
    }
}

/// Example schemas to start from: (label, schema text).
pub const EXAMPLES: &[(&str, &str)] = &[
    ("Person (nome, eta, citta)", PERSON),
    ("Order ($defs, anyOf, pattern, multipleOf)", ORDER),
    ("Tool call (get_weather)", TOOL_CALL),
    ("Real-estate listing", LISTING),
    ("Recursive tree", TREE),
];

/// A GBNF example for the grammar mode.
pub const YES_NO_GBNF: &str = "root ::= \"yes\" | \"no\"\n";

pub const PERSON: &str = r#"{
  "type": "object",
  "properties": {
    "nome": { "type": "string", "minLength": 1 },
    "eta": { "type": "integer", "minimum": 0, "maximum": 120 },
    "citta": { "type": "string" }
  },
  "required": ["nome", "eta", "citta"],
  "additionalProperties": false
}"#;

const ORDER: &str = r##"{
  "$defs": {
    "item": {
      "type": "object",
      "properties": {
        "sku": { "type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$" },
        "quantity": { "type": "integer", "minimum": 1 },
        "price": { "type": "number", "multipleOf": 0.01 }
      },
      "required": ["sku", "quantity", "price"],
      "additionalProperties": false
    }
  },
  "type": "object",
  "properties": {
    "order_id": { "type": "string" },
    "items": { "type": "array", "items": { "$ref": "#/$defs/item" }, "minItems": 1 },
    "payment": {
      "anyOf": [
        { "type": "object", "properties": { "card_last4": { "type": "string", "pattern": "^[0-9]{4}$" } }, "required": ["card_last4"] },
        { "type": "object", "properties": { "iban": { "type": "string" } }, "required": ["iban"] }
      ]
    }
  },
  "required": ["order_id", "items", "payment"]
}"##;

const TOOL_CALL: &str = r#"{
  "type": "object",
  "properties": {
    "name": { "const": "get_weather" },
    "arguments": {
      "type": "object",
      "properties": {
        "city": { "type": "string" },
        "unit": { "enum": ["celsius", "fahrenheit"] }
      },
      "required": ["city", "unit"],
      "additionalProperties": false
    }
  },
  "required": ["name", "arguments"],
  "additionalProperties": false
}"#;

const LISTING: &str = r#"{
  "type": "object",
  "properties": {
    "kind": { "enum": ["apartment", "house", "studio", "villa"] },
    "rooms": { "type": "integer", "minimum": 1, "maximum": 20 },
    "area_m2": { "type": "number", "minimum": 10 },
    "price_eur": { "type": "integer", "minimum": 0 },
    "city": { "type": "string" },
    "features": { "type": "array", "items": { "type": "string" }, "maxItems": 8 },
    "available_from": { "type": "string", "format": "date" }
  },
  "required": ["kind", "rooms", "price_eur", "city"],
  "additionalProperties": false
}"#;

const TREE: &str = r##"{
  "$defs": {
    "node": {
      "type": "object",
      "properties": {
        "name": { "type": "string" },
        "children": { "type": "array", "items": { "$ref": "#/$defs/node" }, "maxItems": 4 }
      },
      "required": ["name", "children"],
      "additionalProperties": false
    }
  },
  "$ref": "#/$defs/node"
}"##;
