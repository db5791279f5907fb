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
        c.sliding_window = Some((window, pattern));
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

#[cfg(test)]
mod tests {
    use stampo_gguf::Gguf;
    use stampo_gguf::writer::{GgufWriter, OwnedValue};

    use super::*;

    /// Gemma 3 270M's metadata, with and without a pattern: every sixth layer is global.
    #[test]
    fn layers_are_local_but_the_last_of_each_cycle() {
        for (pattern, global) in [(None, vec![5, 11, 17]), (Some(4), vec![3, 7, 11, 15])] {
            let mut w = GgufWriter::new();
            w.add("general.architecture", OwnedValue::String("gemma3".into()));
            for (k, v) in [
                ("block_count", 18),
                ("embedding_length", 640),
                ("attention.head_count", 4),
                ("attention.head_count_kv", 1),
                ("attention.key_length", 256),
                ("context_length", 32_768),
                ("attention.sliding_window", 512),
            ] {
                w.add(&format!("gemma3.{k}"), OwnedValue::U32(v));
            }
            if let Some(p) = pattern {
                w.add(
                    "gemma3.attention.sliding_window_pattern",
                    OwnedValue::U32(p),
                );
            }
            let bytes = w.to_bytes();
            let gguf = Gguf::parse(&bytes).expect("parses");
            let c = config(&ArchMetadata::new(gguf.metadata(), "gemma3")).expect("configures");
            let windows: Vec<Option<usize>> = (0..18).map(|i| c.window(i)).collect();
            let expected: Vec<Option<usize>> = (0..18)
                .map(|i| (!global.contains(&i)).then_some(512))
                .collect();
            assert_eq!(windows, expected, "pattern {pattern:?}");
        }
    }
}
