//! Model hyper-parameters read from GGUF metadata, through one helper that prefixes the
//! architecture and names the missing key.

use stampo_gguf::{FromValue, Metadata};

use crate::error::{ModelError, Result};
use crate::layers::{Activation, RopeStyle};

/// `llama.attention.layer_norm_rms_epsilon` when the file omits it (llama.cpp's default).
pub const DEFAULT_RMS_EPS: f32 = 1e-5;
/// `rope.freq_base` when the file omits it (llama.cpp's default).
pub const DEFAULT_ROPE_BASE: f32 = 10_000.0;

/// What a caller chooses when loading a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadOptions {
    /// KV cache positions wanted; capped at the model's context length.
    pub context: usize,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions { context: 4096 }
    }
}

/// Everything the shared transformer needs to know about one architecture.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// `general.architecture`.
    pub architecture: String,
    /// Transformer blocks.
    pub layers: usize,
    /// Residual stream width.
    pub d_model: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads.
    pub kv_heads: usize,
    /// Values per head.
    pub head_dim: usize,
    /// Context length the model was trained for.
    pub context_length: usize,
    /// RMSNorm epsilon.
    pub rms_eps: f32,
    /// Rotary pairing.
    pub rope_style: RopeStyle,
    /// RoPE frequency base of global layers.
    pub rope_base: f32,
    /// RoPE frequency base of sliding-window layers.
    pub rope_base_local: f32,
    /// Position multiplier (linear RoPE scaling: `1 / factor`).
    pub rope_scale: f32,
    /// The MLP gate's activation.
    pub activation: Activation,
    /// Multiplier of `q·k`.
    pub attention_scale: f32,
    /// Multiplier of the token embeddings (gemma3: `sqrt(d_model)`).
    pub embedding_scale: Option<f32>,
    /// Sliding window and the layers' cycle: layer `i` is local unless it closes a cycle of
    /// `pattern` layers (`i % pattern == pattern - 1`).
    pub sliding_window: Option<(usize, usize)>,
    /// Q/K projections have biases (qwen2).
    pub qkv_bias: bool,
    /// Per-head RMSNorm of queries and keys (gemma3).
    pub qk_norm: bool,
    /// RMSNorm after attention and after the MLP, before each residual add (gemma3).
    pub post_norms: bool,
}

/// Metadata reads for one architecture: `key("block_count")` reads `llama.block_count`.
pub struct ArchMetadata<'m, 'a> {
    metadata: &'m Metadata<'a>,
    arch: &'a str,
}

impl<'m, 'a> ArchMetadata<'m, 'a> {
    /// Reads keys of `arch`.
    pub fn new(metadata: &'m Metadata<'a>, arch: &'a str) -> Self {
        ArchMetadata { metadata, arch }
    }

    /// The full key of `suffix`.
    pub fn key(&self, suffix: &str) -> String {
        format!("{}.{suffix}", self.arch)
    }

    /// A required value.
    pub fn require<T: FromValue<'a>>(&self, suffix: &str) -> Result<T> {
        Ok(self.metadata.require(&self.key(suffix))?)
    }

    /// An optional value.
    pub fn optional<T: FromValue<'a>>(&self, suffix: &str) -> Result<Option<T>> {
        Ok(self.metadata.optional(&self.key(suffix))?)
    }

    /// A required count, as `usize`.
    pub fn count(&self, suffix: &str) -> Result<usize> {
        let v: u64 = self.require(suffix)?;
        self.positive(suffix, v)
    }

    /// An optional count, as `usize`.
    pub fn optional_count(&self, suffix: &str) -> Result<Option<usize>> {
        match self.optional::<u64>(suffix)? {
            Some(v) => Ok(Some(self.positive(suffix, v)?)),
            None => Ok(None),
        }
    }

    fn positive(&self, suffix: &str, v: u64) -> Result<usize> {
        match usize::try_from(v) {
            Ok(v) if v > 0 => Ok(v),
            _ => Err(ModelError::BadMetadata {
                key: self.key(suffix),
                reason: format!("{v} is not a usable positive count"),
            }),
        }
    }

    /// A required positive, finite number.
    pub fn require_positive(&self, suffix: &str) -> Result<f32> {
        let v = self.require(suffix)?;
        self.positive_number(suffix, v)
    }

    /// An optional positive, finite number, `default` when absent.
    pub fn optional_positive(&self, suffix: &str, default: f32) -> Result<f32> {
        match self.optional(suffix)? {
            Some(v) => self.positive_number(suffix, v),
            None => Ok(default),
        }
    }

    // A frequency base, a norm's epsilon or a scaling factor of zero, below or NaN would run
    // and give garbage.
    fn positive_number(&self, suffix: &str, v: f32) -> Result<f32> {
        if v.is_finite() && v > 0.0 {
            Ok(v)
        } else {
            Err(self.bad(suffix, format!("{v} is not a positive finite number")))
        }
    }

    /// A metadata error for `suffix`.
    pub fn bad(&self, suffix: &str, reason: impl Into<String>) -> ModelError {
        ModelError::BadMetadata {
            key: self.key(suffix),
            reason: reason.into(),
        }
    }
}

impl ModelConfig {
    /// The fields every supported architecture reads the same way; the architecture's module
    /// then sets what is particular to it.
    pub fn common(meta: &ArchMetadata<'_, '_>, rope_style: RopeStyle) -> Result<ModelConfig> {
        let layers = meta.count("block_count")?;
        let d_model = meta.count("embedding_length")?;
        let heads = meta.count("attention.head_count")?;
        let kv_heads = meta
            .optional_count("attention.head_count_kv")?
            .unwrap_or(heads);
        if !heads.is_multiple_of(kv_heads) {
            return Err(meta.bad(
                "attention.head_count_kv",
                format!("{kv_heads} does not divide the {heads} query heads"),
            ));
        }
        let head_dim = match meta.optional_count("attention.key_length")? {
            Some(d) => d,
            None if d_model % heads == 0 => d_model / heads,
            None => {
                return Err(meta.bad("attention.head_count", "does not divide embedding_length"));
            }
        };
        if let Some(v) = meta.optional_count("attention.value_length")?
            && v != head_dim
        {
            return Err(meta.bad("attention.value_length", "differs from key_length"));
        }
        if head_dim % 2 == 1 {
            return Err(meta.bad(
                "attention.key_length",
                format!(
                    "a head of {head_dim} values (key_length, else embedding_length / \
                     head_count) is odd: rotary embedding turns pairs"
                ),
            ));
        }
        if let Some(rot) = meta.optional_count("rope.dimension_count")?
            && rot != head_dim
        {
            return Err(meta.bad(
                "rope.dimension_count",
                format!("partial rotary embedding ({rot} of {head_dim}) is not supported"),
            ));
        }
        let rope_scale = match meta.optional::<&str>("rope.scaling.type")? {
            None | Some("none") => 1.0,
            Some("linear") => 1.0 / meta.require_positive("rope.scaling.factor")?,
            Some(other) => {
                return Err(meta.bad(
                    "rope.scaling.type",
                    format!("'{other}' is not supported (none, linear)"),
                ));
            }
        };
        let rope_base = meta.optional_positive("rope.freq_base", DEFAULT_ROPE_BASE)?;
        Ok(ModelConfig {
            architecture: String::new(),
            layers,
            d_model,
            heads,
            kv_heads,
            head_dim,
            context_length: meta.count("context_length")?,
            rms_eps: meta.optional_positive("attention.layer_norm_rms_epsilon", DEFAULT_RMS_EPS)?,
            rope_style,
            rope_base,
            rope_base_local: rope_base,
            rope_scale,
            activation: Activation::Silu,
            attention_scale: 1.0 / (head_dim as f32).sqrt(),
            embedding_scale: None,
            sliding_window: None,
            qkv_bias: false,
            qk_norm: false,
            post_norms: false,
        })
    }

    /// The sliding window of layer `i`, if it is a local layer.
    pub fn window(&self, layer: usize) -> Option<usize> {
        match self.sliding_window {
            Some((w, pattern)) if layer % pattern < pattern - 1 => Some(w),
            _ => None,
        }
    }

    /// Refuses sizes that only a broken file gives, before anything is allocated by them:
    /// more blocks than the file has tensors, or a product of heads and head size, or a KV
    /// cache of `capacity` positions, beyond what this machine's addresses count (a 32-bit
    /// wasm module's first of all). Each would otherwise end the process in an allocation
    /// failure or an overflow rather than in an error.
    pub fn check_sizes(
        &self,
        meta: &ArchMetadata<'_, '_>,
        tensors: usize,
        capacity: usize,
    ) -> Result<()> {
        if self.layers > tensors {
            return Err(meta.bad(
                "block_count",
                format!(
                    "{} blocks, but the file holds {tensors} tensors",
                    self.layers
                ),
            ));
        }
        let fits = |factors: &[usize]| {
            factors
                .iter()
                .try_fold(1usize, |n, &f| n.checked_mul(f))
                .is_some_and(|n| n <= isize::MAX as usize)
        };
        let heads = self.heads.max(self.kv_heads);
        if !fits(&[heads, self.head_dim, self.d_model, 4]) {
            return Err(meta.bad(
                "attention.head_count",
                format!(
                    "{heads} heads of {} values over a width of {} overflow",
                    self.head_dim, self.d_model
                ),
            ));
        }
        // Both tensors of each layer's cache, in `f32` at most; the rotation tables hold less.
        if !fits(&[self.layers, capacity, self.kv_heads, self.head_dim, 2, 4]) {
            return Err(meta.bad(
                "context_length",
                format!(
                    "a KV cache of {capacity} positions (the context asked for, capped at \
                     this) does not fit this machine's address space"
                ),
            ));
        }
        Ok(())
    }
}
