//! Helpers shared by the engine's tests that need the default model.

use std::path::PathBuf;

/// SmolLM2-135M-Instruct in `$STAMPO_MODELS` (default `~/.cache/stampo/models`), or `None`
/// (after printing `SKIPPED`) when it is absent and `STAMPO_REQUIRE_FIXTURES` is not `1`.
pub fn smollm2_path() -> Option<PathBuf> {
    let dir = std::env::var("STAMPO_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/stampo/models")
        });
    let path = dir.join("SmolLM2-135M-Instruct.Q4_1.gguf");
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var("STAMPO_REQUIRE_FIXTURES").as_deref() != Ok("1"),
        "{} not found",
        path.display()
    );
    println!("SKIPPED: SmolLM2 not found at {}", path.display());
    None
}

/// burn's wgpu device (lavapipe where there is no GPU), or `None` (after printing `SKIPPED`)
/// when it cannot start, or stampo-model was built without it, and `STAMPO_REQUIRE_WGPU` is
/// not `1`. (The model crate's tests have the same rule.)
#[allow(dead_code)]
pub fn wgpu_device() -> Option<stampo_model::Device> {
    match stampo_model::DeviceKind::Wgpu.device() {
        Ok(device) => Some(device),
        Err(e) => {
            assert!(
                std::env::var("STAMPO_REQUIRE_WGPU").as_deref() != Ok("1"),
                "STAMPO_REQUIRE_WGPU=1 but {e}"
            );
            println!("SKIPPED the wgpu device: {e}");
            None
        }
    }
}
