//! The operations of a layer between its matrix products, one kernel each, on every device.
//!
//! Written with burn's tensor operations, one decoding step of SmolLM2 launched 2,171 kernels,
//! 72 per layer: nine for an RMSNorm, ten for each rotary embedding, eleven around attention.
//! On a GPU each launch costs the host 10 to 30 µs whatever its size (measured on an H200 with
//! `examples/kernel_bandwidth.rs`), so decoding was bound by launches rather than by the
//! weights' bytes; on the CPU each operation allocated and walked its tensors again. These do
//! the same arithmetic in one pass each. A decoding step's layer now launches 8 kernels on the
//! GPU (9 for gemma3): a residual add is done by the next norm, gemma3's output norms by the
//! add after them, its query and key norms together, the rotation of the queries and keys by
//! the cache write, each linear layer's bias and stacking by the matrix product
//! (`quant::QuantOps::quant_matmul_stacked`), and the MLP's gate by its gate and up products
//! (`quant::QuantGatedOps`).
//!
//! Both devices round as llama.cpp's CPU backend does: the KV cache, attention's queries and
//! probabilities, and GELU's inputs and results are `f16` values (rounded from their bits on
//! the wgpu device, so with or without `shader-f16`). RMSNorm sums in `f64` on the CPU, in `f32`
//! on the wgpu device (WebGPU has no `f64`).

#[cfg(feature = "wgpu")]
mod cube;
#[cfg(feature = "wgpu")]
pub(crate) use cube::{THREADS, activate, empty_like, grid_of, writable};
#[cfg(feature = "wgpu")]
mod cube_attention;
mod flex;
mod flex_cache;
mod softmax;

pub use flex_cache::{
    TILE as KEY_TILE, attention_applies as f16_attention_applies, f16_cache_applies,
};

use burn::backend::tensor::FloatTensor;
#[cfg(feature = "wgpu")]
use burn::backend::tensor::IntTensor;
use burn::backend::{Backend, backend_extension};
#[cfg(feature = "wgpu")]
use burn::tensor::Int;
use burn::tensor::Tensor;

/// The fused layer operations, implemented natively by each backend.
#[backend_extension(Flex, Cube: cfg(feature = "wgpu"))]
pub trait FusedOps: Backend {
    /// RMSNorm of each row of `x` (`[rows, dim]`), times `weight` (`[dim]`).
    fn fused_rms_norm(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        eps: f32,
    ) -> FloatTensor<Self>;

    /// `x + h` (a residual add), and its RMSNorm times `weight`.
    fn fused_add_rms_norm(
        x: FloatTensor<Self>,
        h: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        eps: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// RMSNorms of the rows of `q` and of `k` (each `[..., dim]`, one `dim`), times `q_weight`
    /// and `k_weight` (`[dim]`): a layer's per-head query and key norms in one pass.
    fn fused_rms_norm_pair(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        q_weight: FloatTensor<Self>,
        k_weight: FloatTensor<Self>,
        eps: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// `x + rms_norm(h) · h_weight` (a branch's output norm, then the residual add), and that
    /// sum's RMSNorm times `weight`, in one pass: the sum and its norm.
    fn fused_norm_add_rms_norm(
        x: FloatTensor<Self>,
        h: FloatTensor<Self>,
        h_weight: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        eps: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// Rotary embedding of the queries `q` and keys `k` (`[tokens, heads, head_dim]`, each its
    /// own head count) at positions `start..`, from the table `rotations` (`[positions,
    /// head_dim / 2, 2]`: cosine, sine); pairs `(i, i + d/2)` when `neox`, else `(2i, 2i + 1)`.
    fn fused_rope(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        rotations: FloatTensor<Self>,
        start: usize,
        neox: bool,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// The caches `keys`, `values` (`[kv_heads, capacity, head_dim]`) with `k`, `v`
    /// (`[tokens, kv_heads, head_dim]`) written at positions `start..`, rounded to `f16`; in
    /// place when nothing else holds a cache.
    fn fused_cache_write(
        keys: FloatTensor<Self>,
        values: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        start: usize,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// `act(gate) · up`, SiLU or (when `gelu`) ggml's tanh GELU.
    fn fused_gated(gate: FloatTensor<Self>, up: FloatTensor<Self>, gelu: bool)
    -> FloatTensor<Self>;
}

/// See [`FusedOps::fused_rms_norm`] (over the last dimension of any shape).
pub fn rms_norm<const D: usize>(x: Tensor<D>, weight: Tensor<1>, eps: f32) -> Tensor<D> {
    Tensor::from_dispatch(<burn::backend::Dispatch as FusedOps>::fused_rms_norm(
        x.into_dispatch(),
        weight.into_dispatch(),
        eps,
    ))
}

/// See [`FusedOps::fused_add_rms_norm`].
pub fn add_rms_norm(
    x: Tensor<2>,
    h: Tensor<2>,
    weight: Tensor<1>,
    eps: f32,
) -> (Tensor<2>, Tensor<2>) {
    let (sum, normed) = <burn::backend::Dispatch as FusedOps>::fused_add_rms_norm(
        x.into_dispatch(),
        h.into_dispatch(),
        weight.into_dispatch(),
        eps,
    );
    (Tensor::from_dispatch(sum), Tensor::from_dispatch(normed))
}

/// See [`FusedOps::fused_rms_norm_pair`] (over the last dimension of any shape).
pub fn rms_norm_pair<const D: usize>(
    q: Tensor<D>,
    k: Tensor<D>,
    q_weight: Tensor<1>,
    k_weight: Tensor<1>,
    eps: f32,
) -> (Tensor<D>, Tensor<D>) {
    let (q, k) = <burn::backend::Dispatch as FusedOps>::fused_rms_norm_pair(
        q.into_dispatch(),
        k.into_dispatch(),
        q_weight.into_dispatch(),
        k_weight.into_dispatch(),
        eps,
    );
    (Tensor::from_dispatch(q), Tensor::from_dispatch(k))
}

/// See [`FusedOps::fused_norm_add_rms_norm`].
pub fn norm_add_rms_norm(
    x: Tensor<2>,
    h: Tensor<2>,
    h_weight: Tensor<1>,
    weight: Tensor<1>,
    eps: f32,
) -> (Tensor<2>, Tensor<2>) {
    let (sum, normed) = <burn::backend::Dispatch as FusedOps>::fused_norm_add_rms_norm(
        x.into_dispatch(),
        h.into_dispatch(),
        h_weight.into_dispatch(),
        weight.into_dispatch(),
        eps,
    );
    (Tensor::from_dispatch(sum), Tensor::from_dispatch(normed))
}

/// See [`FusedOps::fused_rope`].
pub fn rope(
    q: Tensor<3>,
    k: Tensor<3>,
    rotations: Tensor<3>,
    start: usize,
    neox: bool,
) -> (Tensor<3>, Tensor<3>) {
    let (q, k) = <burn::backend::Dispatch as FusedOps>::fused_rope(
        q.into_dispatch(),
        k.into_dispatch(),
        rotations.into_dispatch(),
        start,
        neox,
    );
    (Tensor::from_dispatch(q), Tensor::from_dispatch(k))
}

/// See [`FusedOps::fused_cache_write`].
pub fn cache_write(
    keys: Tensor<3>,
    values: Tensor<3>,
    k: Tensor<3>,
    v: Tensor<3>,
    start: usize,
) -> (Tensor<3>, Tensor<3>) {
    let (keys, values) = <burn::backend::Dispatch as FusedOps>::fused_cache_write(
        keys.into_dispatch(),
        values.into_dispatch(),
        k.into_dispatch(),
        v.into_dispatch(),
        start,
    );
    (Tensor::from_dispatch(keys), Tensor::from_dispatch(values))
}

/// See [`FusedAttention::fused_attention`].
#[cfg(feature = "wgpu")]
pub fn attention(
    q: Tensor<3>,
    keys: Tensor<3>,
    values: Tensor<3>,
    splits: usize,
    position: &Tensor<1, Int>,
    window: usize,
    scale: f32,
) -> Tensor<2> {
    Tensor::from_dispatch(
        <burn::backend::Dispatch as FusedAttention>::fused_attention(
            q.into_dispatch(),
            keys.into_dispatch(),
            values.into_dispatch(),
            splits,
            position.clone().into_dispatch(),
            window,
            scale,
        ),
    )
}

/// Attention as one kernel, on the wgpu device only: on the CPU, burn's matrix products
/// keep the summation order whose agreement with llama.cpp the fidelity tests measured (a
/// loop summing in another order moved two teacher-forced steps past llama.cpp's own count).
#[cfg(feature = "wgpu")]
#[backend_extension(Cube)]
pub trait FusedAttention: Backend {
    /// Causal grouped-query attention of `q` (`[tokens, heads, head_dim]`, positions
    /// `start..`) over the cached `keys` and `values` (`[kv_heads, capacity, head_dim]`),
    /// keys older than `window` positions hidden when `window > 0`: `[tokens, heads · head_dim]`.
    /// The kernels read `start` from `position` (`[1]`, `u32`, holding `start`), so that the
    /// launches stay the same from one decoding step to the next; the host chooses them:
    /// `splits` 0 for one cube per query head, else (one token only) that many cubes per head,
    /// each over 256 of the visible keys, which `splits` must cover ([`attention_splits`],
    /// which changes as the keys cross a multiple of 256). Several tokens take one cube per
    /// query head whatever `splits` says.
    fn fused_attention(
        q: FloatTensor<Self>,
        keys: FloatTensor<Self>,
        values: FloatTensor<Self>,
        splits: usize,
        position: IntTensor<Self>,
        window: usize,
        scale: f32,
    ) -> FloatTensor<Self>;

    /// A layer's stacked projections `qkv` (`[tokens, (heads + 2·kv_heads) · head_dim]`:
    /// queries, keys, values) made ready for attention in one launch: when `eps` is given each
    /// query head RMS-normed by `q_weight` and each key head by `k_weight` (`[head_dim]`;
    /// otherwise not read), as [`FusedOps::fused_rms_norm_pair`]; then
    /// [`FusedOps::fused_rope`] of both from `rotations`, and [`FusedOps::fused_cache_write`]
    /// of the keys and values into `keys`, `values` (`[kv_heads, capacity, head_dim]`). The
    /// tokens' first position is read from `position` (`[1]`, `u32`). Returns `qkv` with its
    /// queries rotated (in place where nothing else holds it), and the caches.
    #[allow(clippy::too_many_arguments)]
    fn fused_qkv_cache_write(
        qkv: FloatTensor<Self>,
        keys: FloatTensor<Self>,
        values: FloatTensor<Self>,
        rotations: FloatTensor<Self>,
        q_weight: FloatTensor<Self>,
        k_weight: FloatTensor<Self>,
        eps: Option<f32>,
        position: IntTensor<Self>,
        neox: bool,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>);
}

/// How [`FusedAttention::fused_attention`] splits one decoding query's keys: 0 for one cube
/// per head (up to 256 keys, or several tokens), else the number of splits of 256 keys.
#[cfg(feature = "wgpu")]
pub fn attention_splits(tokens: usize, start: usize, window: usize) -> usize {
    cube_attention::splits(tokens, start, window)
}

/// The QK norms of [`qkv_cache_write`], as (query weight, key weight, `eps`).
#[cfg(feature = "wgpu")]
pub type QkNorms = (Tensor<1>, Tensor<1>, f32);

/// See [`FusedAttention::fused_qkv_cache_write`]; `norms` as `(q_weight, k_weight, eps)`.
#[cfg(feature = "wgpu")]
pub fn qkv_cache_write(
    qkv: Tensor<2>,
    keys: Tensor<3>,
    values: Tensor<3>,
    rotations: Tensor<3>,
    norms: Option<QkNorms>,
    position: &Tensor<1, Int>,
    neox: bool,
) -> (Tensor<2>, Tensor<3>, Tensor<3>) {
    // Unread without norms: any tensor will do.
    let (q_weight, k_weight, eps) = match norms {
        Some((q, k, eps)) => (q.into_dispatch(), k.into_dispatch(), Some(eps)),
        None => (
            rotations.clone().into_dispatch(),
            rotations.clone().into_dispatch(),
            None,
        ),
    };
    let (qkv, keys, values) = <burn::backend::Dispatch as FusedAttention>::fused_qkv_cache_write(
        qkv.into_dispatch(),
        keys.into_dispatch(),
        values.into_dispatch(),
        rotations.into_dispatch(),
        q_weight,
        k_weight,
        eps,
        position.clone().into_dispatch(),
        neox,
    );
    (
        Tensor::from_dispatch(qkv),
        Tensor::from_dispatch(keys),
        Tensor::from_dispatch(values),
    )
}

/// See [`FusedOps::fused_gated`].
pub fn gated(gate: Tensor<2>, up: Tensor<2>, gelu: bool) -> Tensor<2> {
    Tensor::from_dispatch(<burn::backend::Dispatch as FusedOps>::fused_gated(
        gate.into_dispatch(),
        up.into_dispatch(),
        gelu,
    ))
}

/// The CPU's KV cache in `f16`, the type llama.cpp's CPU backend keeps it in, and a decoding
/// step's attention read straight from it: on the Flex device only, where the CPU has the
/// instructions the loops are written with ([`f16_cache_applies`]); elsewhere the cache stays
/// `f32` (the values are the same `f16` values either way).
///
/// Layout: `values` is `[kv_heads, capacity, head_dim]`; `keys` is `[kv_heads, capacity / 16 ·
/// head_dim, 16]`, tiles of 16 positions each stored dimension by dimension, so that one
/// vector load gives one dimension of 16 keys. The capacity is a multiple of 16.
#[backend_extension(Flex)]
pub trait F16CacheOps: Backend {
    /// The caches with `k`, `v` (`[tokens, kv_heads, head_dim]`) written at positions
    /// `start..`, rounded to `f16`; in place when nothing else holds a cache.
    fn f16_cache_write(
        keys: FloatTensor<Self>,
        values: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        start: usize,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// The first `total` positions as `f32`: keys and values `[kv_heads, total, head_dim]`
    /// each, the layout burn's matrix products read.
    fn f16_cache_read(
        keys: FloatTensor<Self>,
        values: FloatTensor<Self>,
        total: usize,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// Causal grouped-query attention of `q` (`[tokens, heads, head_dim]`, positions
    /// `start..`) over the caches, keys older than `window` positions hidden when
    /// `window > 0`: `[tokens, heads · head_dim]`, bit for bit what burn's products give in
    /// one product per kv head over [`F16CacheOps::f16_cache_read`]'s tensors, where
    /// [`f16_attention_applies`] says so. Meant for a decoding step (or a few tokens at once):
    /// a prefill's products are burn's.
    fn f16_attention(
        q: FloatTensor<Self>,
        keys: FloatTensor<Self>,
        values: FloatTensor<Self>,
        start: usize,
        window: usize,
        scale: f32,
    ) -> FloatTensor<Self>;
}

/// See [`F16CacheOps::f16_cache_write`].
pub fn f16_cache_write(
    keys: Tensor<3>,
    values: Tensor<3>,
    k: Tensor<3>,
    v: Tensor<3>,
    start: usize,
) -> (Tensor<3>, Tensor<3>) {
    let (keys, values) = <burn::backend::Dispatch as F16CacheOps>::f16_cache_write(
        keys.into_dispatch(),
        values.into_dispatch(),
        k.into_dispatch(),
        v.into_dispatch(),
        start,
    );
    (Tensor::from_dispatch(keys), Tensor::from_dispatch(values))
}

/// See [`F16CacheOps::f16_cache_read`].
pub fn f16_cache_read(keys: Tensor<3>, values: Tensor<3>, total: usize) -> (Tensor<3>, Tensor<3>) {
    let (keys, values) = <burn::backend::Dispatch as F16CacheOps>::f16_cache_read(
        keys.into_dispatch(),
        values.into_dispatch(),
        total,
    );
    (Tensor::from_dispatch(keys), Tensor::from_dispatch(values))
}

/// See [`F16CacheOps::f16_attention`].
pub fn f16_attention(
    q: Tensor<3>,
    keys: Tensor<3>,
    values: Tensor<3>,
    start: usize,
    window: usize,
    scale: f32,
) -> Tensor<2> {
    Tensor::from_dispatch(<burn::backend::Dispatch as F16CacheOps>::f16_attention(
        q.into_dispatch(),
        keys.into_dispatch(),
        values.into_dispatch(),
        start,
        window,
        scale,
    ))
}
