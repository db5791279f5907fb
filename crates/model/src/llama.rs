//! llama (SmolLM2, Llama 2/3, …): the reference decoder. Pre-RMSNorm, grouped-query attention
//! without biases, SwiGLU MLP, RoPE on adjacent pairs ("normal": the GGUF converter permutes
//! Q/K so), the output projection tied to the embedding table when `output.weight` is absent.

use crate::config::{ArchMetadata, ModelConfig};
use crate::error::Result;
use crate::layers::RopeStyle;

/// The configuration of a `llama` GGUF.
pub fn config(meta: &ArchMetadata<'_, '_>) -> Result<ModelConfig> {
    ModelConfig::common(meta, RopeStyle::Normal)
}
