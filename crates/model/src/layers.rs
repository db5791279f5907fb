//! The building blocks every architecture shares, written once: RMSNorm, rotary embeddings,
//! grouped-query attention over a preallocated KV cache, and the gated MLP.

use burn::module::{Module, Param};
use burn::tensor::activation::{gelu_approximate, softmax};
use burn::tensor::{Bool, DType, Device, FloatDType, Tensor, TensorData};

use crate::quant::QLinear;

/// Root-mean-square normalisation with a learned scale (ggml's `rms_norm` then `mul`).
#[derive(Module, Debug)]
pub struct RmsNorm {
    /// The scale, `[dim]`.
    pub weight: Param<Tensor<1>>,
    /// Added to the mean square before the square root.
    #[module(skip)]
    pub eps: f64,
}

impl RmsNorm {
    /// A norm over the last dimension with scale `weight`.
    pub fn new(weight: Tensor<1>, eps: f64) -> RmsNorm {
        RmsNorm {
            weight: Param::from_tensor(weight),
            eps,
        }
    }

    /// # Shapes
    /// - `x`: `[..., dim]`, output the same.
    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        // ggml squares in f32 and sums in f64; an f32 sum rounds differently in the last bit,
        // enough to flip an 8-bit activation quant now and then.
        // WebGPU has no f64: there the sum stays in f32.
        let squares = x.clone().square();
        let ms = if squares.device().supports_dtype(DType::F64) {
            squares
                .cast(FloatDType::F64)
                .mean_dim(D - 1)
                .cast(FloatDType::F32)
        } else {
            squares.mean_dim(D - 1)
        };
        let x = x * (ms + self.eps).sqrt().recip();
        x * self.weight.val().unsqueeze::<D>()
    }
}

/// Which halves of a head rotate together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeStyle {
    /// Adjacent pairs `(x[2i], x[2i+1])` (llama.cpp's `LLAMA_ROPE_TYPE_NORM`).
    Normal,
    /// Pairs `(x[i], x[i + d/2])` (GPT-NeoX; llama.cpp's `LLAMA_ROPE_TYPE_NEOX`).
    Neox,
}

/// Rotary position embedding: cos/sin tables for every position the cache can hold.
#[derive(Module, Debug)]
pub struct Rope {
    /// `[positions, head_dim / 2]`.
    cos: Tensor<2>,
    /// `[positions, head_dim / 2]`.
    sin: Tensor<2>,
    #[module(skip)]
    style: RopeStyle,
}

impl Rope {
    /// Tables for `positions` positions of heads of `head_dim`, frequency base `base`, positions
    /// multiplied by `scale` (linear scaling; 1 when absent). The angles are computed as ggml
    /// does: `θ_i = p · scale · base^(-2i/d)`, the power accumulated by repeated products.
    pub fn new(
        head_dim: usize,
        positions: usize,
        base: f32,
        scale: f32,
        style: RopeStyle,
        device: &Device,
    ) -> Rope {
        let half = head_dim / 2;
        let theta_scale = base.powf(-2.0 / head_dim as f32);
        let mut cos = Vec::with_capacity(positions * half);
        let mut sin = Vec::with_capacity(positions * half);
        for p in 0..positions {
            let mut theta = p as f32 * scale;
            for _ in 0..half {
                cos.push(theta.cos());
                sin.push(theta.sin());
                theta *= theta_scale;
            }
        }
        Rope {
            cos: Tensor::from_data(TensorData::new(cos, [positions, half]), device),
            sin: Tensor::from_data(TensorData::new(sin, [positions, half]), device),
            style,
        }
    }

    /// Rotates `x` for positions `start..start + tokens`.
    ///
    /// # Shapes
    /// - `x`: `[heads, tokens, head_dim]`, output the same.
    pub fn forward(&self, x: Tensor<3>, start: usize) -> Tensor<3> {
        let [heads, tokens, dim] = x.dims();
        let half = dim / 2;
        let cos = self.cos.clone().narrow(0, start, tokens).unsqueeze::<3>();
        let sin = self.sin.clone().narrow(0, start, tokens).unsqueeze::<3>();
        match self.style {
            RopeStyle::Neox => {
                let a = x.clone().narrow(2, 0, half);
                let b = x.narrow(2, half, half);
                let ra = a.clone() * cos.clone() - b.clone() * sin.clone();
                let rb = b * cos + a * sin;
                Tensor::cat(vec![ra, rb], 2)
            }
            RopeStyle::Normal => {
                let pairs = x.reshape([heads, tokens, half, 2]);
                let a = pairs.clone().narrow(3, 0, 1).reshape([heads, tokens, half]);
                let b = pairs.narrow(3, 1, 1).reshape([heads, tokens, half]);
                let ra = a.clone() * cos.clone() - b.clone() * sin.clone();
                let rb = a * sin + b * cos;
                Tensor::stack::<4>(vec![ra, rb], 3).reshape([heads, tokens, dim])
            }
        }
    }
}

/// `t` rounded to the nearest `f16`, as llama.cpp's CPU backend rounds its f16 operands, where
/// the device has `f16`; unchanged where it has not (WebGPU without `shader-f16`, as in Chrome
/// on Linux), at the price of logits a few thousandths further from llama.cpp's.
pub fn round_through_f16<const D: usize>(t: Tensor<D>) -> Tensor<D> {
    if t.device().supports_dtype(DType::F16) {
        t.cast(FloatDType::F16).cast(FloatDType::F32)
    } else {
        t
    }
}

/// Keys and values of every past position for one layer, allocated once at full capacity and
/// written in place as tokens arrive.
#[derive(Module, Debug)]
pub struct KvCache {
    /// `[kv_heads, capacity, head_dim]`.
    keys: Tensor<3>,
    /// `[kv_heads, capacity, head_dim]`.
    values: Tensor<3>,
}

impl KvCache {
    /// A zeroed cache for `capacity` positions.
    pub fn new(kv_heads: usize, capacity: usize, head_dim: usize, device: &Device) -> KvCache {
        KvCache {
            keys: Tensor::zeros([kv_heads, capacity, head_dim], device),
            values: Tensor::zeros([kv_heads, capacity, head_dim], device),
        }
    }

    /// Positions the cache holds.
    pub fn capacity(&self) -> usize {
        self.keys.dims()[1]
    }

    /// Stores `k`, `v` at positions `start..`, returns all keys and values up to their end.
    ///
    /// Values are rounded through `f16` first: llama.cpp's default cache type, kept so that
    /// our attention sees the numbers llama.cpp's does.
    ///
    /// # Shapes
    /// - `k`, `v`: `[kv_heads, tokens, head_dim]`
    /// - outputs: `[kv_heads, start + tokens, head_dim]`
    pub fn append(&mut self, k: Tensor<3>, v: Tensor<3>, start: usize) -> (Tensor<3>, Tensor<3>) {
        let [heads, tokens, dim] = k.dims();
        let end = start + tokens;
        let k = round_through_f16(k);
        let v = round_through_f16(v);
        self.keys
            .inplace(|c| c.slice_assign([0..heads, start..end, 0..dim], k));
        self.values
            .inplace(|c| c.slice_assign([0..heads, start..end, 0..dim], v));
        (
            self.keys.clone().slice([0..heads, 0..end, 0..dim]),
            self.values.clone().slice([0..heads, 0..end, 0..dim]),
        )
    }
}

/// The attention mask for queries at `start..start + tokens` over keys `0..start + tokens`:
/// `true` where a key is hidden (in the future, or `window` or more positions in the past).
pub fn attention_mask(
    start: usize,
    tokens: usize,
    window: Option<usize>,
    device: &Device,
) -> Tensor<2, Bool> {
    let keys = start + tokens;
    let mut hidden = Vec::with_capacity(tokens * keys);
    for t in 0..tokens {
        let q = start + t;
        for k in 0..keys {
            hidden.push(k > q || window.is_some_and(|w| q - k.min(q) >= w));
        }
    }
    Tensor::from_data(TensorData::new(hidden, [tokens, keys]), device)
}

/// Grouped-query self-attention (optional biases and per-head Q/K norms).
#[derive(Module, Debug)]
pub struct Attention {
    /// Query projection.
    pub q: QLinear,
    /// Key projection.
    pub k: QLinear,
    /// Value projection.
    pub v: QLinear,
    /// Output projection.
    pub o: QLinear,
    /// RMSNorm over each query head (gemma3).
    pub q_norm: Option<RmsNorm>,
    /// RMSNorm over each key head (gemma3).
    pub k_norm: Option<RmsNorm>,
    /// Query heads.
    #[module(skip)]
    pub heads: usize,
    /// Key/value heads (`heads` is a multiple).
    #[module(skip)]
    pub kv_heads: usize,
    /// Values per head.
    #[module(skip)]
    pub head_dim: usize,
    /// Multiplier of `q·k`.
    #[module(skip)]
    pub scale: f32,
    /// Sliding window (local layers), `None` for global attention.
    #[module(skip)]
    pub window: Option<usize>,
}

impl Attention {
    /// # Shapes
    /// - `x`: `[tokens, d_model]` (normed), output the same.
    pub fn forward(
        &self,
        x: Tensor<2>,
        start: usize,
        rope: &Rope,
        cache: &mut KvCache,
    ) -> Tensor<2> {
        let [tokens, _] = x.dims();
        let (h, kvh, hd) = (self.heads, self.kv_heads, self.head_dim);
        let heads = |t: Tensor<2>, n: usize| t.reshape([tokens, n, hd]).swap_dims(0, 1);
        let mut q = heads(self.q.forward(x.clone()), h);
        let mut k = heads(self.k.forward(x.clone()), kvh);
        let v = heads(self.v.forward(x), kvh);
        if let Some(norm) = &self.q_norm {
            q = norm.forward(q);
        }
        if let Some(norm) = &self.k_norm {
            k = norm.forward(k);
        }
        let q = rope.forward(q, start);
        let k = rope.forward(k, start);
        let (keys, values) = cache.append(k, v, start);
        let total = start + tokens;
        let group = h / kvh;
        // Grouped-query attention without copying the cache per query head: query head `j`
        // reads kv head `j / group`, so the `group` query heads of a kv head (all their
        // tokens) are rows of one matrix against that kv head's keys and values.
        // llama.cpp's CPU attention (without flash attention) multiplies the f16 cache by
        // Q converted to f16, and the f16 V cache by the probabilities converted to f16;
        // rounding the same two operands keeps our logits within hundredths of its logits.
        let q = round_through_f16(q).reshape([kvh, group * tokens, hd]);
        let scores = q.matmul(keys.swap_dims(1, 2)) * self.scale;
        let mask = attention_mask(start, tokens, self.window, &scores.device());
        let mask = mask
            .unsqueeze::<4>()
            .expand([kvh, group, tokens, total])
            .reshape([kvh, group * tokens, total]);
        let scores = scores.mask_fill(mask, f32::NEG_INFINITY);
        let probs = round_through_f16(softmax(scores, 2));
        let out = probs.matmul(values).reshape([h, tokens, hd]);
        self.o
            .forward(out.swap_dims(0, 1).reshape([tokens, h * hd]))
    }
}

/// The activation of the gated MLP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// SiLU gate (SwiGLU).
    Silu,
    /// GELU gate, tanh approximation (GeGLU).
    GeluTanh,
}

/// `down(act(gate(x)) · up(x))`.
#[derive(Module, Debug)]
pub struct Mlp {
    /// Gate projection.
    pub gate: QLinear,
    /// Up projection.
    pub up: QLinear,
    /// Down projection.
    pub down: QLinear,
    /// The gate's activation.
    #[module(skip)]
    pub activation: Activation,
}

/// GELU (tanh approximation) as ggml's CPU backend computes it: from a table indexed by the
/// input rounded to `f16`, holding `f16` results; 0 at or below -10 and the input itself at
/// or above 10.
fn gelu_like_ggml(x: Tensor<2>) -> Tensor<2> {
    let y = round_through_f16(gelu_approximate(round_through_f16(x.clone())));
    let y = y.mask_where(x.clone().greater_equal_elem(10.0), x.clone());
    y.mask_fill(x.lower_equal_elem(-10.0), 0.0)
}

impl Mlp {
    /// # Shapes
    /// - `x`: `[tokens, d_model]`, output the same.
    pub fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let gate = self.gate.forward(x.clone());
        let gate = match self.activation {
            // ggml's `x / (1 + e^-x)`: burn's `silu` goes through `log1p` and rounds more
            // often, which flips 8-bit activation quants against llama.cpp's.
            Activation::Silu => gate.clone() / (gate.neg().exp() + 1.0),
            Activation::GeluTanh => gelu_like_ggml(gate),
        };
        self.down.forward(gate * self.up.forward(x))
    }
}
