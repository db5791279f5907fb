//! Split GGUF files (`model-00001-of-00003.gguf` …), as written by llama.cpp's
//! `gguf-split`: each part is a GGUF file of its own with `split.no`, `split.count` and
//! `split.tensors.count`; the first part carries the model's metadata. [`SplitGguf`]
//! loads the parts as one model.

use std::collections::HashMap;

use crate::error::{GgufError, Result};
use crate::file::{Gguf, TensorInfo};
use crate::metadata::Metadata;

/// `split.no`: this part's index, from 0.
pub const KEY_SPLIT_NO: &str = "split.no";
/// `split.count`: the number of parts.
pub const KEY_SPLIT_COUNT: &str = "split.count";
/// `split.tensors.count`: tensors in all parts together.
pub const KEY_SPLIT_TENSORS_COUNT: &str = "split.tensors.count";

/// The file name of part `no` (from 0) of `count`: `{prefix}-{no+1:05}-of-{count:05}.gguf`
/// (llama.cpp's `llama_split_path`).
pub fn split_path(prefix: &str, no: u32, count: u32) -> String {
    format!("{prefix}-{:05}-of-{count:05}.gguf", no + 1)
}

/// Recognises a split file name: `(prefix, no from 0, count)`.
pub fn parse_split_path(path: &str) -> Option<(&str, u32, u32)> {
    let stem = path.strip_suffix(".gguf")?;
    // "-NNNNN-of-NNNNN" is 15 characters.
    if stem.len() < 15 || !stem.is_char_boundary(stem.len() - 15) {
        return None;
    }
    let (prefix, tail) = stem.split_at(stem.len() - 15);
    let b = tail.as_bytes();
    if b[0] != b'-' || &tail[6..10] != "-of-" {
        return None;
    }
    let no: u32 = tail[1..6].parse().ok()?;
    let count: u32 = tail[10..15].parse().ok()?;
    (no >= 1 && no <= count).then_some((prefix, no - 1, count))
}

/// A model made of one or more GGUF parts, read as one.
#[derive(Debug, Clone)]
pub struct SplitGguf<'a> {
    parts: Vec<Gguf<'a>>,
    /// Tensor name → (part, index in that part's table).
    index: HashMap<&'a str, (usize, usize)>,
}

impl<'a> SplitGguf<'a> {
    /// Parses the parts, given in order (a single unsplit file is one part).
    pub fn parse(parts: &[&'a [u8]]) -> Result<Self> {
        let parsed = parts
            .iter()
            .map(|p| Gguf::parse(p))
            .collect::<Result<Vec<_>>>()?;
        Self::from_parts(parsed)
    }

    /// Joins parsed parts, checking that they belong together.
    pub fn from_parts(parts: Vec<Gguf<'a>>) -> Result<Self> {
        let split_err = |reason: String| GgufError::Split { reason };
        if parts.is_empty() {
            return Err(split_err("no parts".into()));
        }
        let n = parts.len();
        for (i, p) in parts.iter().enumerate() {
            let m = p.metadata();
            let no: Option<u32> = m.optional(KEY_SPLIT_NO)?;
            let count: Option<u32> = m.optional(KEY_SPLIT_COUNT)?;
            match (no, count) {
                (None, None) if n == 1 => {}
                (Some(no), Some(count)) => {
                    if no as usize != i {
                        return Err(split_err(format!(
                            "part {} has split.no = {no}: parts are out of order",
                            i + 1
                        )));
                    }
                    if count as usize != n {
                        return Err(split_err(format!(
                            "part {} says split.count = {count}, but {n} parts were given",
                            i + 1
                        )));
                    }
                }
                _ => {
                    return Err(split_err(format!(
                        "part {} is not a split GGUF part (split.no / split.count)",
                        i + 1
                    )));
                }
            }
        }
        let mut index = HashMap::new();
        for (pi, p) in parts.iter().enumerate() {
            for t in p.tensors() {
                if index.insert(t.name, (pi, t.index)).is_some() {
                    return Err(GgufError::DuplicateTensor {
                        name: t.name.to_string(),
                    });
                }
            }
        }
        if let Some(total) = parts[0]
            .metadata()
            .optional::<u64>(KEY_SPLIT_TENSORS_COUNT)?
            && total != index.len() as u64
        {
            return Err(split_err(format!(
                "split.tensors.count is {total} but the parts hold {} tensors",
                index.len()
            )));
        }
        Ok(SplitGguf { parts, index })
    }

    /// The parts, in order.
    pub fn parts(&self) -> &[Gguf<'a>] {
        &self.parts
    }
    /// The model's metadata (the first part's).
    pub fn metadata(&self) -> &Metadata<'a> {
        self.parts[0].metadata()
    }
    /// Every tensor with the part holding it, in part order then table order.
    pub fn tensors(&self) -> impl Iterator<Item = (usize, &TensorInfo<'a>)> + '_ {
        self.parts
            .iter()
            .enumerate()
            .flat_map(|(i, p)| p.tensors().iter().map(move |t| (i, t)))
    }
    /// The number of tensors in all parts.
    pub fn tensor_count(&self) -> usize {
        self.index.len()
    }
    /// A tensor and the part holding it.
    pub fn tensor(&self, name: &str) -> Option<(&Gguf<'a>, &TensorInfo<'a>)> {
        let &(p, t) = self.index.get(name)?;
        Some((&self.parts[p], &self.parts[p].tensors()[t]))
    }
    /// A tensor's bytes, without copying.
    pub fn tensor_data(&self, name: &str) -> Result<&'a [u8]> {
        let (part, t) = self.tensor(name).ok_or_else(|| GgufError::MissingTensor {
            name: name.to_string(),
        })?;
        Ok(part.tensor_data(t))
    }
}
