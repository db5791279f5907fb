//! stampo's browser API, compiled to wasm32 and wrapped by wasm-bindgen.
//!
//! The grammar engine (JSON Schema → GBNF and keyword report, GBNF checking, matching a
//! document against a grammar), the GGUF reader (a model file's summary), and [`Engine`]: a
//! model loaded on WebGPU or the CPU answering llama.cpp- and OpenAI-shaped requests.
//!
//! Values cross the boundary as JSON text, so the JS side needs no generated classes and a
//! handle never has to be freed. Every failure is a JS `Error` with a stable `code`
//! (see [`ErrorCode`]) and a message naming what and where.

mod api;
#[cfg(feature = "engine")]
mod engine;
mod error;
#[cfg(all(feature = "engine", target_feature = "atomics"))]
mod threads;

pub use api::{
    bench_grammar, bench_grammar_json, check_gbnf, check_gbnf_json, compile_schema,
    compile_schema_json, gbnf_accepts, grammar_accepts, inspect_gguf, summarize_gguf,
};
#[cfg(feature = "engine")]
pub use engine::{DeviceChoice, Engine, EngineCore, LoaderCore, ModelLoader, RunEnv, begin_load};
pub use error::ErrorCode;
pub use error::error_message;
