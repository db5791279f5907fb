//! Helpers shared by the engine's tests that need the default model.

use std::path::PathBuf;

/// SmolLM2-135M-Instruct in `$STAMPO_MODELS` (default `~/.cache/stampo/models`), or `None`
/// (after printing `SKIPPED`) when it is absent and `STAMPO_REQUIRE_FIXTURES` is not `1`.
pub fn smollm2_path() -> Option<PathBuf> {
    model_path("SmolLM2-135M-Instruct.Q4_1.gguf")
}

/// The model file `name` in `$STAMPO_MODELS`, by [`smollm2_path`]'s rule.
pub fn model_path(name: &str) -> Option<PathBuf> {
    let dir = std::env::var("STAMPO_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/stampo/models")
        });
    let path = dir.join(name);
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var("STAMPO_REQUIRE_FIXTURES").as_deref() != Ok("1"),
        "{} not found",
        path.display()
    );
    println!("SKIPPED: {name} not found at {}", path.display());
    None
}

/// CubeCL's compilation log.
#[allow(dead_code)]
pub mod compile_log;

/// The wgpu device or a skip, by the model tests' rule (one file, included by path).
#[allow(dead_code)]
#[path = "../../../model/tests/common/wgpu.rs"]
mod wgpu;
#[allow(unused_imports)]
pub use wgpu::wgpu_device;
