//! Where the tests find what the repository does not hold, and what they do when it is absent.
//!
//! The default models come from `scripts/fetch-models.sh` into `$STAMPO_MODELS` (by default
//! the model cache that `scripts/env.sh` names); the JSON Schema benchmark data lies in
//! `../shared/data` beside a developer's clone, and a user's clone has none. A test that needs
//! either skips with a `SKIPPED` line when it is absent, unless `STAMPO_REQUIRE_FIXTURES=1`
//! (set by `scripts/test.sh`, so in CI) makes the absence a failure.

// Absence under `STAMPO_REQUIRE_FIXTURES=1` fails the test, as an assertion does.
#![allow(clippy::panic)]

use std::path::{Path, PathBuf};

/// The three default models' files, in [`models_dir`].
pub const DEFAULT_MODELS: [&str; 3] = [
    "SmolLM2-135M-Instruct.Q4_1.gguf",
    "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "gemma-3-270m-q4_k_m.gguf",
];

/// SmolLM2-135M-Instruct, the default model.
pub const SMOLLM2: &str = DEFAULT_MODELS[0];

/// Whether an absent model or data file fails the test (`STAMPO_REQUIRE_FIXTURES=1`) rather
/// than skipping it.
pub fn required() -> bool {
    std::env::var("STAMPO_REQUIRE_FIXTURES").as_deref() == Ok("1")
}

/// Where the models are: `$STAMPO_MODELS`, else `stampo/models` in `$XDG_CACHE_HOME` or
/// `$HOME/.cache`, as `scripts/env.sh` has it.
pub fn models_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("STAMPO_MODELS") {
        return dir.into();
    }
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache")
        })
        .join("stampo/models")
}

/// The path of model `file` in [`models_dir`], or `None` after a `SKIPPED` line when it is
/// absent and not [`required`].
#[track_caller]
pub fn model_path(file: &str) -> Option<PathBuf> {
    present(&format!("model {file}"), models_dir().join(file))
}

/// The bytes of model `file`, or `None` as [`model_path`] has it.
#[track_caller]
pub fn model_bytes(file: &str) -> Option<Vec<u8>> {
    let path = model_path(file)?;
    match std::fs::read(&path) {
        Ok(bytes) => Some(bytes),
        Err(e) => panic!("model {file}: reading {}: {e}", path.display()),
    }
}

/// `rel` in `../shared/data` beside the workspace, or `None` after a `SKIPPED` line naming
/// `what` when it is absent and not [`required`].
#[track_caller]
pub fn shared_data(what: &str, rel: &str) -> Option<PathBuf> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    present(what, workspace.join("../shared/data").join(rel))
}

/// `path` when it exists; otherwise a failure naming `what` where [`required`], else `None`
/// after a `SKIPPED` line.
#[track_caller]
pub fn present(what: &str, path: PathBuf) -> Option<PathBuf> {
    present_or(required(), what, path)
}

#[track_caller]
fn present_or(required: bool, what: &str, path: PathBuf) -> Option<PathBuf> {
    if path.exists() {
        return Some(path);
    }
    if required {
        panic!(
            "{what} not found at {} and STAMPO_REQUIRE_FIXTURES=1 (models: scripts/fetch-models.sh)",
            path.display()
        );
    }
    println!("SKIPPED: {what} not found at {}", path.display());
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_present_path_is_given_back_either_way() {
        let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        assert_eq!(
            present_or(false, "this crate", here.clone()),
            Some(here.clone())
        );
        assert_eq!(present_or(true, "this crate", here.clone()), Some(here));
    }

    #[test]
    fn an_absent_path_skips_unless_required() {
        let absent = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("no such file");
        assert_eq!(present_or(false, "nothing", absent.clone()), None);
        let failure = std::panic::catch_unwind(|| present_or(true, "nothing", absent))
            .expect_err("required and absent fails");
        let message = failure
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        assert!(message.starts_with("nothing not found at "), "{message}");
    }
}
