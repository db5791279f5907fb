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

// The examples live in web/examples/, where the grammar crate's random-walk test reads them too.
pub const PERSON: &str = include_str!("../examples/person.json");
const ORDER: &str = include_str!("../examples/order.json");
const TOOL_CALL: &str = include_str!("../examples/tool-call.json");
const LISTING: &str = include_str!("../examples/listing.json");
const TREE: &str = include_str!("../examples/tree.json");
