//! The building blocks every architecture shares, written once: RMSNorm, rotary embeddings,
//! grouped-query attention over a preallocated KV cache, and the gated MLP.

use burn::module::{Module, Param};
use burn::tensor::activation::softmax;
use burn::tensor::{Bool, DType, Device, FloatDType, Int, Tensor, TensorData};

use crate::fused;
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
        fused::rms_norm(x, self.weight.val(), self.eps as f32)
    }

    /// The residual add `x + h_norm(h)` and this norm of it, in one pass (one `eps`).
    ///
    /// # Shapes
    /// - `x`, `h`: `[tokens, dim]`; outputs the same.
    pub fn norm_add_forward(
        &self,
        x: Tensor<2>,
        h: Tensor<2>,
        h_norm: &RmsNorm,
    ) -> (Tensor<2>, Tensor<2>) {
        fused::norm_add_rms_norm(
            x,
            h,
            h_norm.weight.val(),
            self.weight.val(),
            self.eps as f32,
        )
    }

    /// The residual add `x + h` and its norm, in one pass.
    ///
    /// # Shapes
    /// - `x`, `h`: `[tokens, dim]`; outputs the same.
    pub fn add_forward(&self, x: Tensor<2>, h: Tensor<2>) -> (Tensor<2>, Tensor<2>) {
        fused::add_rms_norm(x, h, self.weight.val(), self.eps as f32)
    }
}

/// RMSNorms over each query head and each key head (gemma3's QK norm): both or neither.
#[derive(Module, Debug)]
pub struct QkNorm {
    /// Over each query head, `[head_dim]`.
    pub q: RmsNorm,
    /// Over each key head, `[head_dim]`; the same `eps`.
    pub k: RmsNorm,
}

impl QkNorm {
    /// Both norms, in one pass.
    ///
    /// # Shapes
    /// - `q`, `k`: `[tokens, heads, head_dim]` (each its own head count), outputs the same.
    pub fn forward(&self, q: Tensor<3>, k: Tensor<3>) -> (Tensor<3>, Tensor<3>) {
        fused::rms_norm_pair(
            q,
            k,
            self.q.weight.val(),
            self.k.weight.val(),
            self.q.eps as f32,
        )
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

/// Rotary position embedding: the rotations for every position the cache can hold.
#[derive(Module, Debug)]
pub struct Rope {
    /// `[positions, head_dim / 2, 2]`: each rotation's cosine, then its sine. One table rather
    /// than two keeps the fused kernel that reads it within WebGPU's 8 storage buffers.
    rotations: Tensor<3>,
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
        let mut rotations = Vec::with_capacity(positions * half * 2);
        for p in 0..positions {
            let mut theta = p as f32 * scale;
            for _ in 0..half {
                rotations.extend([theta.cos(), theta.sin()]);
                theta *= theta_scale;
            }
        }
        Rope {
            rotations: Tensor::from_data(TensorData::new(rotations, [positions, half, 2]), device),
            style,
        }
    }

    /// Rotates the queries and keys for positions `start..start + tokens`.
    ///
    /// # Shapes
    /// - `q`, `k`: `[tokens, heads, head_dim]` (each its own head count), outputs the same.
    pub fn forward(&self, q: Tensor<3>, k: Tensor<3>, start: usize) -> (Tensor<3>, Tensor<3>) {
        fused::rope(
            q,
            k,
            self.rotations.clone(),
            start,
            self.style == RopeStyle::Neox,
        )
    }
}

/// `t` rounded to the nearest `f16`, as llama.cpp's CPU backend rounds its f16 operands, where
/// the device has `f16`; unchanged where it has not.
fn round_through_f16<const D: usize>(t: Tensor<D>) -> Tensor<D> {
    if t.device().supports_dtype(DType::F16) {
        t.cast(FloatDType::F16).cast(FloatDType::F32)
    } else {
        t
    }
}

/// The attention mask for queries at `start..start + tokens` over keys `0..start + tokens`:
/// `true` where a key is hidden (in the future, or `window` or more positions in the past).
fn attention_mask(
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

/// A `[1]` `u32` tensor holding `start`: where the wgpu kernels read the tokens' first
/// position from (see [`Attention::forward`]).
pub fn position_tensor(start: usize, device: &Device) -> Tensor<1, Int> {
    let start = u32::try_from(start).unwrap_or(u32::MAX);
    Tensor::from_data(TensorData::new(vec![start], [1]), (device, DType::U32))
}

/// Whether `device` is the wgpu device, whose kernels fuse more than the CPU's loops: there
/// attention runs as one kernel ([`fused::attention`]) rather than as burn's matrix products
/// ([`Attention::with_matmuls`]), the rotation with the cache write, and the MLP's gate with
/// its products. Without the `wgpu` feature there are no such kernels (and no caller).
#[cfg(feature = "wgpu")]
fn on_wgpu(device: &Device) -> bool {
    matches!(device.as_dispatch(), burn::backend::DispatchDevice::Cube(_))
}

/// Keys and values of every past position for one layer, allocated once at full capacity and
/// written in place as tokens arrive.
///
/// On the CPU (where it has the loops for it, [`fused::f16_cache_applies`]) the cache holds
/// `f16`s in the layout of [`fused::F16CacheOps`]; elsewhere `f32`s (the same `f16` values),
/// `[kv_heads, capacity, head_dim]` each.
#[derive(Module, Debug)]
pub struct KvCache {
    keys: Tensor<3>,
    values: Tensor<3>,
    /// Positions the cache holds.
    #[module(skip)]
    capacity: usize,
    /// Whether the cache is in `f16` ([`fused::F16CacheOps`]).
    #[module(skip)]
    half: bool,
}

impl KvCache {
    /// A zeroed cache for `capacity` positions.
    pub fn new(kv_heads: usize, capacity: usize, head_dim: usize, device: &Device) -> KvCache {
        if fused::f16_cache_applies(head_dim, device) {
            // Whole tiles of keys: positions past `capacity` are never read as keys.
            let positions = capacity.div_ceil(fused::KEY_TILE) * fused::KEY_TILE;
            let tiles = positions / fused::KEY_TILE;
            let zeros = |dims: [usize; 3]| Tensor::<3>::zeros(dims, device).cast(FloatDType::F16);
            return KvCache {
                keys: zeros([kv_heads, tiles * head_dim, fused::KEY_TILE]),
                values: zeros([kv_heads, positions, head_dim]),
                capacity,
                half: true,
            };
        }
        KvCache::f32(kv_heads, capacity, head_dim, device)
    }

    /// A zeroed `f32` cache, `[kv_heads, capacity, head_dim]` each.
    fn f32(kv_heads: usize, capacity: usize, head_dim: usize, device: &Device) -> KvCache {
        KvCache {
            keys: Tensor::zeros([kv_heads, capacity, head_dim], device),
            values: Tensor::zeros([kv_heads, capacity, head_dim], device),
            capacity,
            half: false,
        }
    }

    /// Positions the cache holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Stores `k`, `v` at positions `start..`, rounded to `f16` (llama.cpp's default cache
    /// type, kept so that attention sees the numbers llama.cpp's does); returns the caches.
    ///
    /// # Shapes
    /// - `k`, `v`: `[tokens, kv_heads, head_dim]`
    pub fn append(&mut self, k: Tensor<3>, v: Tensor<3>, start: usize) -> (Tensor<3>, Tensor<3>) {
        // Moved out, so the kernels find the caches unshared and write them in place.
        let keys = std::mem::replace(&mut self.keys, Tensor::empty([0, 0, 0], &k.device()));
        let values = std::mem::replace(&mut self.values, Tensor::empty([0, 0, 0], &k.device()));
        let (keys, values) = if self.half {
            fused::f16_cache_write(keys, values, k, v, start)
        } else {
            fused::cache_write(keys, values, k, v, start)
        };
        self.keys = keys.clone();
        self.values = values.clone();
        (keys, values)
    }

    /// A layer's projections side by side (`qkv`, `[tokens, (heads + 2·kv_heads) · head_dim]`)
    /// QK-normed where `norms` are given, rotated by `rope`, and the keys and values stored
    /// as [`KvCache::append`] does, in one launch ([`fused::qkv_cache_write`]; the wgpu device,
    /// whose cache is `f32`): `qkv` with its queries rotated, and the caches.
    #[cfg(feature = "wgpu")]
    fn append_projected(
        &mut self,
        rope: &Rope,
        qkv: Tensor<2>,
        norms: Option<fused::QkNorms>,
        position: &Tensor<1, Int>,
    ) -> (Tensor<2>, Tensor<3>, Tensor<3>) {
        // Moved out, so the kernel finds the caches unshared and writes them in place.
        let keys = std::mem::replace(&mut self.keys, Tensor::empty([0, 0, 0], &qkv.device()));
        let values = std::mem::replace(&mut self.values, Tensor::empty([0, 0, 0], &qkv.device()));
        let (qkv, keys, values) = fused::qkv_cache_write(
            qkv,
            keys,
            values,
            rope.rotations.clone(),
            norms,
            position,
            rope.style == RopeStyle::Neox,
        );
        self.keys = keys.clone();
        self.values = values.clone();
        (qkv, keys, values)
    }
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
    /// The Q, K and V biases end to end (qwen2), for their product in one launch
    /// ([`QLinear::stacked_bias`]); `None` without biases.
    pub qkv_bias: Option<Tensor<1>>,
    /// Norms over each query and key head (gemma3).
    pub qk_norm: Option<QkNorm>,
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
    /// Attention of `x`'s tokens at positions `start..`. On the wgpu device the kernels read
    /// `start` from `position` (`[1]`, `u32`, holding `start`) where given, so that a recorded
    /// step replays at another position; without it they get a buffer of their own.
    ///
    /// # Shapes
    /// - `x`: `[tokens, d_model]` (normed), output the same.
    pub fn forward(
        &self,
        x: Tensor<2>,
        start: usize,
        position: Option<&Tensor<1, Int>>,
        rope: &Rope,
        cache: &mut KvCache,
    ) -> Tensor<2> {
        #[cfg(feature = "wgpu")]
        if on_wgpu(&x.device()) {
            return self.forward_on_wgpu(x, start, position, rope, cache);
        }
        let _ = position;
        let [tokens, _] = x.dims();
        let (h, kvh, hd) = (self.heads, self.kv_heads, self.head_dim);
        // Heads stay in the projections' layout, `[tokens, heads, head_dim]`.
        let layers = [&self.q, &self.k, &self.v];
        let [q, k, v] = QLinear::forward_stacked(layers, self.qkv_bias.as_ref(), x);
        let mut q = q.reshape([tokens, h, hd]);
        let mut k = k.reshape([tokens, kvh, hd]);
        let v = v.reshape([tokens, kvh, hd]);
        if let Some(norm) = &self.qk_norm {
            (q, k) = norm.forward(q, k);
        }
        let (q, k) = rope.forward(q, k, start);
        let (keys, values) = cache.append(k, v, start);
        let cpu = self.on_cpu();
        if cache.half {
            return self.o.forward(cpu.over_f16_cache(q, keys, values, start));
        }
        self.o.forward(cpu.with_matmuls(q, keys, values, start))
    }

    /// [`Attention::forward`] on the wgpu device: the projections side by side, their QK
    /// norms, rotations and cache writes in one launch ([`KvCache::append_projected`]), the
    /// attention in one or three.
    #[cfg(feature = "wgpu")]
    fn forward_on_wgpu(
        &self,
        x: Tensor<2>,
        start: usize,
        position: Option<&Tensor<1, Int>>,
        rope: &Rope,
        cache: &mut KvCache,
    ) -> Tensor<2> {
        let [tokens, _] = x.dims();
        let own;
        let position = match position {
            Some(position) => position,
            None => {
                own = position_tensor(start, &x.device());
                &own
            }
        };
        let layers = [&self.q, &self.k, &self.v];
        let qkv = QLinear::forward_joined(layers, self.qkv_bias.as_ref(), x);
        let norms =
            (self.qk_norm.as_ref()).map(|n| (n.q.weight.val(), n.k.weight.val(), n.q.eps as f32));
        let (qkv, keys, values) = cache.append_projected(rope, qkv, norms, position);
        let (h, hd) = (self.heads, self.head_dim);
        let q = qkv.narrow(1, 0, h * hd).reshape([tokens, h, hd]);
        let window = self.window.unwrap_or(0);
        let splits = fused::attention_splits(tokens, start, window);
        self.o.forward(fused::attention(
            q, keys, values, splits, position, window, self.scale,
        ))
    }

    /// Launches this layer's attention split across cubes once, for one query over a cache of
    /// one position: on the wgpu device the kernels of a decoding step past 256 keys, which
    /// compile at their first launch.
    #[cfg(feature = "wgpu")]
    pub(crate) fn launch_split(&self, device: &Device) {
        let (h, kv, hd) = (self.heads, self.kv_heads, self.head_dim);
        let q = Tensor::<3>::zeros([1, h, hd], device);
        let keys = Tensor::<3>::zeros([kv, 1, hd], device);
        let values = Tensor::<3>::zeros([kv, 1, hd], device);
        let position = position_tensor(0, device);
        let window = self.window.unwrap_or(0);
        drop(fused::attention(
            q, keys, values, 1, &position, window, self.scale,
        ));
    }

    /// The settings the CPU's attention loops need.
    fn on_cpu(&self) -> MatmulAttention {
        MatmulAttention {
            kv_heads: self.kv_heads,
            scale: self.scale,
            window: self.window,
        }
    }
}

/// Query tokens below which a prefill's attention is not split across threads.
const MIN_RUN: usize = 16;

/// Keys below which a decoding step's attention is not split across threads.
const MIN_KEYS: usize = 64;

/// The settings of the CPU's attention, to be sent to the pool's threads.
#[derive(Debug, Clone, Copy)]
struct MatmulAttention {
    kv_heads: usize,
    scale: f32,
    window: Option<usize>,
}

impl MatmulAttention {
    /// Attention of `q` (`[tokens, heads, head_dim]`) over an `f16` cache on the CPU:
    /// `[tokens, heads · head_dim]`, bit for bit what [`MatmulAttention::with_matmuls`]
    /// gives over the same values in `f32`. The same products in the same runs of query
    /// tokens, each read from the cache in place ([`fused::F16CacheOps::f16_attention`],
    /// which spreads a run's kv heads over the threads and skips the keys a query cannot
    /// see), where gemm would run them through its microkernel; else the cache is read back
    /// as `f32` for burn's products.
    fn over_f16_cache(
        self,
        q: Tensor<3>,
        keys: Tensor<3>,
        values: Tensor<3>,
        start: usize,
    ) -> Tensor<2> {
        let [tokens, heads, _] = q.dims();
        let group = heads / self.kv_heads.max(1);
        let window = self.window.unwrap_or(0);
        let runs = crate::quant::pool::Pool::global()
            .runs(tokens, MIN_RUN)
            .unwrap_or_else(|| std::iter::once(0..tokens).collect());
        let in_place = runs
            .iter()
            .all(|run| fused::f16_attention_applies(group * run.len(), start + run.end));
        if !in_place {
            let (keys, values) = fused::f16_cache_read(keys, values, start + tokens);
            return self.with_matmuls(q, keys, values, start);
        }
        let parts: Vec<Tensor<2>> = runs
            .into_iter()
            .map(|run| {
                let q = q.clone().narrow(0, run.start, run.len());
                let at = start + run.start;
                fused::f16_attention(q, keys.clone(), values.clone(), at, window, self.scale)
            })
            .collect();
        Tensor::cat(parts, 0)
    }

    /// Attention of `q` (`[tokens, heads, head_dim]`) over the caches as burn's matrix
    /// products and softmax, on the CPU: `[tokens, heads · head_dim]`.
    ///
    /// A prefill's query tokens are cut into runs that the matmul pool's threads take in
    /// turn: each run is the same products over the keys it can see (the hidden later keys
    /// only ever added zeros), so the rows are bit for bit those of one product over all
    /// tokens, and burn's CPU products run on one thread. On two threads, attention was a
    /// fifth of the calling thread's time in a 128-token SmolLM2 prefill, with the other
    /// thread idle.
    fn with_matmuls(
        self,
        q: Tensor<3>,
        keys: Tensor<3>,
        values: Tensor<3>,
        start: usize,
    ) -> Tensor<2> {
        let [tokens, _, _] = q.dims();
        let pool = crate::quant::pool::Pool::global();
        let runs = pool.runs(tokens, MIN_RUN);
        let kvh = self.kv_heads;
        if pool.threads() >= 2 && runs.is_none() && kvh >= 2 && start + tokens >= MIN_KEYS {
            // A decoding step: each kv head (and its query heads) on its own, in turn on the
            // pool's threads; each the same products a batch of kv heads computes one by one.
            // SmolLM2 (three kv heads), two threads, decoding at ~1,000 positions: 52–56 →
            // 63–68 tokens/s; at 64–256 positions 1–2% faster.
            let group = q.dims()[1] / kvh;
            let one = MatmulAttention {
                kv_heads: 1,
                ..self
            };
            let parts = pool.map(
                kvh,
                std::sync::Arc::new(move |j| {
                    one.forward(
                        q.clone().narrow(1, j * group, group),
                        keys.clone().narrow(0, j, 1),
                        values.clone().narrow(0, j, 1),
                        start,
                    )
                }),
            );
            return Tensor::cat(parts, 1);
        }
        let Some(runs) = runs else {
            return self.forward(q, keys, values, start);
        };
        let parts = pool.map(
            runs.len(),
            std::sync::Arc::new(move |i| {
                let run = &runs[i];
                self.forward(
                    q.clone().narrow(0, run.start, run.len()),
                    keys.clone(),
                    values.clone(),
                    start + run.start,
                )
            }),
        );
        Tensor::cat(parts, 0)
    }

    /// `q` (`[tokens, heads, head_dim]`, positions `start..`) over the cached keys and
    /// values they can see: `[tokens, heads · head_dim]`.
    fn forward(self, q: Tensor<3>, keys: Tensor<3>, values: Tensor<3>, start: usize) -> Tensor<2> {
        let [tokens, h, hd] = q.dims();
        let kvh = self.kv_heads;
        let total = start + tokens;
        let keys = keys.slice([0..kvh, 0..total, 0..hd]);
        let values = values.slice([0..kvh, 0..total, 0..hd]);
        let group = h / kvh;
        // Grouped-query attention without copying the cache per query head: query head `j`
        // reads kv head `j / group`, so the `group` query heads of a kv head (all their
        // tokens) are rows of one matrix against that kv head's keys and values.
        // llama.cpp's CPU attention (without flash attention) multiplies the f16 cache by
        // Q converted to f16, and the f16 V cache by the probabilities converted to f16;
        // rounding the same two operands keeps our logits within hundredths of its logits.
        let q = round_through_f16(q.swap_dims(0, 1)).reshape([kvh, group * tokens, hd]);
        let scores = q.matmul(keys.swap_dims(1, 2)) * self.scale;
        let mask = attention_mask(start, tokens, self.window, &scores.device());
        let mask = mask
            .unsqueeze::<4>()
            .expand([kvh, group, tokens, total])
            .reshape([kvh, group * tokens, total]);
        let scores = scores.mask_fill(mask, f32::NEG_INFINITY);
        let probs = round_through_f16(softmax(scores, 2));
        let out = probs.matmul(values).reshape([h, tokens, hd]);
        out.swap_dims(0, 1).reshape([tokens, h * hd])
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

impl Mlp {
    /// # Shapes
    /// - `x`: `[tokens, d_model]`, output the same.
    pub fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let gelu = self.activation == Activation::GeluTanh;
        #[cfg(feature = "wgpu")]
        if on_wgpu(&x.device())
            && let Some(gated) = QLinear::forward_gated(&self.gate, &self.up, x.clone(), gelu)
        {
            return self.down.forward(gated);
        }
        let [gate, up] = QLinear::forward_stacked([&self.gate, &self.up], None, x);
        self.down.forward(fused::gated(gate, up, gelu))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic values in −1…1.
    fn tensor3(dims: [usize; 3], seed: u32, device: &Device) -> Tensor<3> {
        let n = dims.iter().product::<usize>();
        let values: Vec<f32> = (0..n as u32)
            .map(|i| {
                let x = (i ^ seed).wrapping_mul(2_654_435_761) >> 8;
                x as f32 / (1 << 23) as f32 - 1.0
            })
            .collect();
        Tensor::from_data(TensorData::new(values, dims), device)
    }

    #[test]
    fn attention_over_runs_of_tokens_equals_one_product_bit_for_bit() {
        let device = Device::flex();
        let (tokens, heads, kv_heads, dim, start, capacity) = (37, 6, 2, 16, 5, 64);
        let q = tensor3([tokens, heads, dim], 1, &device);
        let keys = tensor3([kv_heads, capacity, dim], 2, &device);
        let values = tensor3([kv_heads, capacity, dim], 3, &device);
        for window in [None, Some(9)] {
            let heads = MatmulAttention {
                kv_heads,
                scale: 0.25,
                window,
            };
            let whole = heads.forward(q.clone(), keys.clone(), values.clone(), start);
            let runs: Vec<Tensor<2>> = [0..10, 10..30, 30..37]
                .into_iter()
                .map(|r| {
                    let q = q.clone().narrow(0, r.start, r.len());
                    heads.forward(q, keys.clone(), values.clone(), start + r.start)
                })
                .collect();
            let split = Tensor::cat(runs, 0);
            // One kv head (and its three query heads) at a time.
            let one = MatmulAttention {
                kv_heads: 1,
                ..heads
            };
            let by_head = |q: &Tensor<3>, at: usize| {
                let parts: Vec<Tensor<2>> = (0..kv_heads)
                    .map(|j| {
                        let q = q.clone().narrow(1, 3 * j, 3);
                        let (k, v) = (keys.clone().narrow(0, j, 1), values.clone().narrow(0, j, 1));
                        one.forward(q, k, v, at)
                    })
                    .collect();
                Tensor::cat(parts, 1)
            };
            let data = |t: Tensor<2>| t.into_data().try_to_vec::<f32>().expect("f32");
            let (whole, split, heads_one_by_one) =
                (data(whole), data(split), data(by_head(&q, start)));
            assert_eq!(whole.len(), tokens * 6 * dim);
            for (i, ((a, b), c)) in whole.iter().zip(&split).zip(&heads_one_by_one).enumerate() {
                assert_eq!(a.to_bits(), b.to_bits(), "window {window:?}, value {i}");
                assert_eq!(
                    a.to_bits(),
                    c.to_bits(),
                    "window {window:?}, value {i} by head"
                );
            }
            // A decoding step (one query token) by kv head.
            let last = q.clone().narrow(0, tokens - 1, 1);
            let at = start + tokens - 1;
            let whole = data(heads.forward(last.clone(), keys.clone(), values.clone(), at));
            let heads_one_by_one = data(by_head(&last, at));
            assert_eq!(whole.len(), 6 * dim);
            for (i, (a, b)) in whole.iter().zip(&heads_one_by_one).enumerate() {
                assert_eq!(
                    a.to_bits(),
                    b.to_bits(),
                    "window {window:?}, step value {i}"
                );
            }
        }
    }

    #[test]
    fn f16_cache_attention_equals_the_f32_products_bit_for_bit() {
        let device = Device::flex();
        // (query heads, kv heads, head dim, window): SmolLM2's, Qwen2.5's and Gemma 3's
        // shapes (Gemma 3's local layers with a short window).
        for (heads, kv_heads, dim, window) in [
            (9, 3, 64, None),
            (14, 2, 64, None),
            (4, 1, 256, None),
            (4, 1, 256, Some(40)),
        ] {
            if !fused::f16_cache_applies(dim, &device) {
                eprintln!("SKIPPED: no f16 cache on this CPU (AVX2, FMA and F16C needed)");
                return;
            }
            let capacity = 1_100;
            let mut half = KvCache::new(kv_heads, capacity, dim, &device);
            let mut full = KvCache::f32(kv_heads, capacity, dim, &device);
            assert!(half.half && !full.half);
            // Every position written at once; each step reads those up to its own.
            let k = tensor3([capacity, kv_heads, dim], 4, &device);
            let v = tensor3([capacity, kv_heads, dim], 5, &device);
            let (keys_h, values_h) = half.append(k.clone(), v.clone(), 0);
            let (keys_f, values_f) = full.append(k, v, 0);
            let data = |t: Tensor<3>| t.into_data().try_to_vec::<f32>().expect("f32");
            let data2 = |t: Tensor<2>| t.into_data().try_to_vec::<f32>().expect("f32");
            let attention = MatmulAttention {
                kv_heads,
                scale: 0.125,
                window,
            };
            let mut in_place_steps = 0;
            let group = heads / kv_heads;
            // Decoding steps at positions around gemm's thresholds (256 scores, depths of
            // 512 and 1,024 keys), a few tokens at once, and prefills (cut into runs of
            // tokens where the pool has two threads).
            let steps = [
                3usize, 15, 16, 63, 64, 85, 300, 511, 512, 600, 1_023, 1_024, 1_099,
            ]
            .map(|start| (start, 1))
            .into_iter()
            .chain([(0, 5), (40, 3), (509, 7), (1_000, 31)])
            .chain([(0, 100), (0, 512), (300, 64), (990, 110)]);
            for (start, tokens) in steps {
                let total = start + tokens;
                let (k_read, v_read) =
                    fused::f16_cache_read(keys_h.clone(), values_h.clone(), total);
                let slice = |t: &Tensor<3>| t.clone().slice([0..kv_heads, 0..total, 0..dim]);
                for (read, want) in [(k_read, slice(&keys_f)), (v_read, slice(&values_f))] {
                    let (read, want) = (data(read), data(want));
                    assert!(
                        read.iter()
                            .zip(&want)
                            .all(|(a, b)| a.to_bits() == b.to_bits())
                    );
                }
                let q = tensor3([tokens, heads, dim], (start + tokens) as u32 + 6, &device);
                let want =
                    attention.with_matmuls(q.clone(), keys_f.clone(), values_f.clone(), start);
                let got =
                    attention.over_f16_cache(q.clone(), keys_h.clone(), values_h.clone(), start);
                let at =
                    format!("{heads}/{kv_heads}×{dim}, window {window:?}, {tokens} at {start}");
                let (got, want) = (data2(got), data2(want));
                assert_eq!(got.len(), want.len());
                for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(a.to_bits(), b.to_bits(), "{at}, value {i}");
                }
                // Where gemm takes another kernel, the cache was read back instead.
                let step_in_place = tokens == 1 && fused::f16_attention_applies(group, total);
                in_place_steps += usize::from(step_in_place);
            }
            assert!(
                in_place_steps >= 8,
                "the in-place loops ran on {in_place_steps} steps"
            );
        }
    }
}
