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

pub fn models_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("STAMPO_MODELS") {
        return d.into();
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_default();
    cache.join("stampo/models")
}

/// The model's bytes, or `None` (with a note) when absent; absent is a failure when
/// `STAMPO_REQUIRE_FIXTURES` is set, as in CI.
pub fn model_bytes(file: &str) -> Option<Vec<u8>> {
    let path = models_dir().join(file);
    match std::fs::read(&path) {
        Ok(b) => Some(b),
        Err(e) if std::env::var_os("STAMPO_REQUIRE_FIXTURES").is_some() => {
            panic!(
                "{}: {e} (STAMPO_REQUIRE_FIXTURES is set; run scripts/fetch-models.sh)",
                path.display()
            )
        }
        Err(_) => {
            eprintln!(
                "skipped: {} not present (scripts/fetch-models.sh)",
                path.display()
            );
            None
        }
    }
}

pub fn tokenizer(file: &str) -> Option<Tokenizer> {
    let bytes = model_bytes(file)?;
    let g = stampo_gguf::Gguf::parse_header(&bytes).expect("parse");
    Some(Tokenizer::from_gguf(&g).expect("tokenizer"))
}

pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/tokenizer")
}
