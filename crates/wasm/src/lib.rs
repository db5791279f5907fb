//! stampo's browser API, compiled to wasm32 and wrapped by wasm-bindgen.
//!
//! What is here today: the grammar engine (JSON Schema → GBNF and keyword report, GBNF
//! checking, matching a document against a grammar) and the GGUF reader (a model file's
//! summary). The engine's generation API joins it when the engine and model crates can run
//! in the browser.
//!
//! Values cross the boundary as JSON text, so the JS side needs no generated classes and a
//! handle never has to be freed. Every failure is a JS `Error` with a stable `code`
//! (see [`ErrorCode`]) and a message naming what and where.

mod api;
mod error;

pub use api::{
    check_gbnf, check_gbnf_json, compile_schema, compile_schema_json, gbnf_accepts,
    grammar_accepts, inspect_gguf, summarize_gguf,
};
pub use error::ErrorCode;
pub use error::error_message;
