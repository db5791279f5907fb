//! Shared test helpers: where the default models live, and loading a tokenizer from one.
#![allow(clippy::unwrap_used, clippy::panic, dead_code)]

use std::path::PathBuf;

use stampo_tokenizer::Tokenizer;

pub const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
pub const QWEN25: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
pub const GEMMA3: &str = "gemma-3-270m-q4_k_m.gguf";
pub const MODELS: [(&str, &str); 3] = [
    ("smollm2", SMOLLM2),
    ("qwen2.5", QWEN25),
    ("gemma3", GEMMA3),
];

pub use stampo_test_data::model_bytes;

pub fn tokenizer(file: &str) -> Option<Tokenizer> {
    let bytes = model_bytes(file)?;
    let g = stampo_gguf::Gguf::parse_header(&bytes).expect("parse");
    Some(Tokenizer::from_gguf(&g).expect("tokenizer"))
}

pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/tokenizer")
}
