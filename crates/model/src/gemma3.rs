//! gemma3 (Gemma 3): local sliding-window layers (RoPE base 10 000) interleaved with global
//! layers (every sixth by default; RoPE base from `rope.freq_base`), RMSNorm of each query and
//! key head, norms before *and* after attention and MLP, GeGLU (tanh GELU) MLP, embeddings
//! scaled by `sqrt(d_model)`, NeoX RoPE, `q·k` scaled by `1/sqrt(head_dim)`.
//!
//! The GGUF converter stores the norm weights as `1 + w`, so plain RMSNorm applies.

use crate::config::{ArchMetadata, ModelConfig};
use crate::error::Result;
use crate::layers::{Activation, RopeStyle};

/// Layers per local/global cycle when the file gives no pattern (llama.cpp's default).
pub const DEFAULT_SWA_PATTERN: usize = 6;
/// RoPE frequency base of local layers when the file omits `rope.freq_base_swa`.
pub const DEFAULT_LOCAL_ROPE_BASE: f32 = 10_000.0;

/// The configuration of a `gemma3` GGUF.
pub fn config(meta: &ArchMetadata<'_, '_>) -> Result<ModelConfig> {
    let mut c = ModelConfig::common(meta, RopeStyle::Neox)?;
    c.activation = Activation::GeluTanh;
    c.qk_norm = true;
    c.post_norms = true;
    c.embedding_scale = Some((c.d_model as f32).sqrt());
    if let Some(window) = meta.optional_count("attention.sliding_window")? {
        let pattern = meta
            .optional_count("attention.sliding_window_pattern")?
            .unwrap_or(DEFAULT_SWA_PATTERN);
        // Layer `i` is local unless it closes a cycle of `pattern` layers.
        let local = (0..c.layers).map(|i| i % pattern < pattern - 1).collect();
        c.sliding_window = Some((window, local));
        c.rope_base_local =
            meta.optional_positive("rope.freq_base_swa", DEFAULT_LOCAL_ROPE_BASE)?;
    }
    if meta
        .optional::<f32>("final_logit_softcapping")?
        .is_some_and(|s| s != 0.0)
    {
        return Err(meta.bad(
            "final_logit_softcapping",
            "logit soft-capping is not supported",
        ));
    }
    Ok(c)
}
