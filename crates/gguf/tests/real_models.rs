//! The three default models, when present in `$STAMPO_MODELS` (scripts/fetch-models.sh):
//! every file parses and every tensor dequantises. Skipped, with a note, when absent
//! (and a failure when `STAMPO_REQUIRE_FIXTURES` is set, as in CI).

use stampo_gguf::{Gguf, dequantize_to_vec};

fn models_dir() -> std::path::PathBuf {
    match std::env::var_os("STAMPO_MODELS") {
        Some(d) => d.into(),
        None => {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(std::path::PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".cache"))
                })
                .unwrap_or_default();
            cache.join("stampo/models")
        }
    }
}

fn load(file: &str) -> Option<Vec<u8>> {
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

const MODELS: [(&str, &str); 3] = [
    ("SmolLM2-135M-Instruct.Q4_1.gguf", "llama"),
    ("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "qwen2"),
    ("gemma-3-270m-q4_k_m.gguf", "gemma3"),
];

#[test]
fn default_models_parse_and_dequantise() {
    for (file, arch) in MODELS {
        let Some(bytes) = load(file) else { continue };
        let g = Gguf::parse(&bytes).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(g.architecture().unwrap(), arch);
        assert!(g.metadata().arch_require::<u32>("context_length").unwrap() > 0);
        for t in g.tensors() {
            let v = dequantize_to_vec(t.ty, g.tensor_data(t))
                .unwrap_or_else(|e| panic!("{file} {}: {e}", t.name));
            assert_eq!(v.len() as u64, t.elements());
        }
    }
}
