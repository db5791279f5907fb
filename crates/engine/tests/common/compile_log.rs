//! CubeCL's compilation log, for the tests that no request compiles a kernel after the
//! warm-up: one line a kernel CubeCL compiles, whichever wgpu device it compiles for.

use std::path::{Path, PathBuf};

use cubecl::config::compilation::CompilationLogLevel;
use cubecl::config::{CubeClRuntimeConfig, RuntimeConfig};

/// Logs CubeCL's compilations to a file of this process's own, and returns its path. The
/// configuration is read once a process, when the first wgpu device comes up: call this first.
pub fn log_compilations() -> PathBuf {
    let path = std::env::temp_dir().join(format!("stampo-compiles-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let mut config = CubeClRuntimeConfig::default();
    config.compilation.logger.level = CompilationLogLevel::Basic;
    config.compilation.logger.file = Some(path.clone());
    assert!(
        CubeClRuntimeConfig::try_set(config),
        "CubeCL's configuration was read before the test set it"
    );
    path
}

/// What the log holds so far.
pub fn logged(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Fails, naming `what` and the kernels, when the log holds more than `before`.
pub fn assert_none_since(path: &Path, before: &str, what: &str) {
    let now = logged(path);
    assert_eq!(
        now.len(),
        before.len(),
        "{what} compiled:\n{}",
        now.get(before.len()..).unwrap_or_default()
    );
}
