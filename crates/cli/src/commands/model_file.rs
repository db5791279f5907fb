//! Loading a model file for the model commands: the whole file, or every part of a split
//! file (`-00001-of-0000N.gguf`) when given any part.

use std::path::{Path, PathBuf};

use stampo_gguf::split::{parse_split_path, split_path};

/// The bytes of each part of the model at `path`, in order.
pub fn read_parts(path: &Path) -> Result<Vec<(PathBuf, Vec<u8>)>, String> {
    let s = path.to_string_lossy();
    let paths: Vec<PathBuf> = match parse_split_path(&s) {
        Some((prefix, _, count)) => (0..count)
            .map(|i| PathBuf::from(split_path(prefix, i, count)))
            .collect(),
        None => vec![path.to_path_buf()],
    };
    paths
        .into_iter()
        .map(|p| {
            std::fs::read(&p)
                .map(|b| (p.clone(), b))
                .map_err(|e| format!("{}: {e}", p.display()))
        })
        .collect()
}

/// The first part's bytes (metadata and tokenizer live there).
pub fn read_first(path: &Path) -> Result<Vec<u8>, String> {
    let mut parts = read_parts(path)?;
    Ok(parts.swap_remove(0).1)
}

/// A tokenizer and the parsed header of the model at `path`.
pub fn with_tokenizer<T>(
    path: &Path,
    f: impl FnOnce(&stampo_gguf::Gguf<'_>, &stampo_tokenizer::Tokenizer) -> Result<T, String>,
) -> Result<T, String> {
    let bytes = read_first(path)?;
    let g =
        stampo_gguf::Gguf::parse_header(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    let tok = stampo_tokenizer::Tokenizer::from_gguf(&g)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    f(&g, &tok)
}

/// The device named `name` (`cpu` or `wgpu`).
pub fn device(name: &str) -> Result<stampo_model::Device, String> {
    stampo_model::DeviceKind::parse(name)
        .and_then(stampo_model::DeviceKind::device)
        .map_err(|e| e.to_string())
}

/// The tokenizer and the transformer of the model at `path`, loaded onto the device named
/// `device` with a KV cache of `context` positions.
pub fn load_transformer(
    path: &Path,
    device: &str,
    context: usize,
) -> Result<(stampo_tokenizer::Tokenizer, stampo_model::Transformer), String> {
    let device = self::device(device)?;
    let bytes = read_first(path)?;
    let at = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let gguf = stampo_gguf::Gguf::parse(&bytes).map_err(|e| at(&e))?;
    let tok = stampo_tokenizer::Tokenizer::from_gguf(&gguf).map_err(|e| at(&e))?;
    let model =
        stampo_model::Transformer::load(&gguf, &device, stampo_model::LoadOptions { context })
            .map_err(|e| at(&e))?;
    Ok((tok, model))
}
