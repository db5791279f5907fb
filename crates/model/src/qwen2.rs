//! qwen2 (Qwen2.5, Qwen2.5-Coder): llama's decoder with biases on the Q, K and V projections
//! and NeoX-style RoPE (pairs `(x[i], x[i + d/2])`), a large frequency base.

use crate::config::{ArchMetadata, ModelConfig};
use crate::error::Result;
use crate::layers::RopeStyle;

/// The configuration of a `qwen2` GGUF.
pub fn config(meta: &ArchMetadata<'_, '_>) -> Result<ModelConfig> {
    let mut c = ModelConfig::common(meta, RopeStyle::Neox)?;
    c.qkv_bias = true;
    Ok(c)
}
