//! Helpers shared by the engine's tests that need a default model.

use std::path::PathBuf;

/// SmolLM2-135M-Instruct in `$STAMPO_MODELS`, or `None` (after printing `SKIPPED`) when it is
/// absent and `STAMPO_REQUIRE_FIXTURES` is not `1`.
#[allow(dead_code)]
pub fn smollm2_path() -> Option<PathBuf> {
    stampo_test_data::model_path(stampo_test_data::SMOLLM2)
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
