//! [`FusedOps`] on burn's CubeCL backend: one kernel per operation, and the helpers the
//! attention kernels (`cube_attention.rs`) share.

use burn::backend::Cube;
use burn::backend::tensor::FloatTensor;
use burn::tensor::{DType, Shape};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_dtype;
use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

use super::FusedOps;

/// Units per cube. 64 fits every WebGPU device, and the reduction trees below are unrolled
/// for it (2⁶).
pub(crate) const THREADS: u32 = 64;

/// The most cubes a grid dimension may hold (WebGPU's `maxComputeWorkgroupsPerDimension`).
pub(super) const MAX_CUBES: u32 = 65_535;

/// `x` rounded to the nearest `f16` (ties to even) and widened back, from its bits: the same
/// value a cast through `f16` gives, on devices without `shader-f16` too.
#[cube]
pub(super) fn round_f16(x: f32) -> f32 {
    let bits = u32::reinterpret(x);
    let sign = bits & 0x8000_0000;
    let magnitude = bits & 0x7FFF_FFFF;
    let mut result = bits;
    if magnitude >= 0x7F80_0000 {
        // Infinity or NaN: unchanged.
    } else if magnitude >= 0x477F_F000 {
        // 65 520 and above round past f16's largest finite value, 65 504.
        result = sign | 0x7F80_0000;
    } else if magnitude >= 0x3880_0000 {
        // A normal f16: keep 10 of the 23 fraction bits, rounding ties to even.
        let rounded = magnitude + 0x0FFF + ((magnitude >> 13) & 1);
        result = sign | (rounded & 0xFFFF_E000);
    } else {
        // Below 2⁻¹⁴: f16's subnormals are multiples of 2⁻²⁴.
        let units = (f32::reinterpret(magnitude) * 16_777_216.0f32).round();
        result = sign | u32::reinterpret(units * 5.960_464_5e-8f32);
    }
    f32::reinterpret(result)
}

/// Sum (`max == false`) or maximum of `value` over the cube's units; every unit gets it.
#[cube]
pub(super) fn cube_reduce(value: f32, #[comptime] max: bool) -> f32 {
    let mut partial = Shared::<[f32]>::new_slice(THREADS as usize);
    partial[UNIT_POS as usize] = value;
    sync_cube();
    #[unroll]
    for level in 1..7u32 {
        let stride = THREADS >> level;
        if UNIT_POS < stride {
            let a = partial[UNIT_POS as usize];
            let b = partial[(UNIT_POS + stride) as usize];
            partial[UNIT_POS as usize] = if comptime!(max) {
                if b > a { b } else { a }
            } else {
                a + b
            };
        }
        sync_cube();
    }
    let total = partial[0];
    sync_cube();
    total
}

/// `1 / sqrt(ms + eps)` of the row of `dim` values from `base`, which the cube's units share
/// (called by all of them: the reduction's barriers need uniform control flow; a row that is
/// not `live`, past the last, reads nothing).
#[cube]
fn inverse_rms(x: &[f32], base: u32, dim: u32, eps: f32, live: bool) -> f32 {
    let steps = (dim + THREADS - 1 - UNIT_POS) / THREADS;
    let mut sum = 0.0f32;
    if live {
        for step in 0..steps {
            let v = x[(base + UNIT_POS + step * THREADS) as usize];
            sum += v * v;
        }
    }
    let total = cube_reduce(sum, false);
    1.0f32 / (total / f32::cast_from(dim) + eps).sqrt()
}

/// One cube per row of `q`, then per row of `k` (one width): each row's RMSNorm times its
/// tensor's weight, as [`rms_norm_kernel`] computes it.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn rms_norm_pair_kernel(
    q: &[f32],
    k: &[f32],
    q_weight: &[f32],
    k_weight: &[f32],
    q_out: &mut [f32],
    k_out: &mut [f32],
    q_rows: u32,
    k_rows: u32,
    dim: u32,
    eps: f32,
) {
    let row = CUBE_POS_X + CUBE_POS_Y * CUBE_COUNT_X;
    let steps = (dim + THREADS - 1 - UNIT_POS) / THREADS;
    let is_q = row < q_rows;
    let live = row < q_rows + k_rows;
    let base = if is_q {
        row * dim
    } else {
        (row - q_rows) * dim
    };
    // The reduction's barriers stay outside the branches (WebGPU asks for uniform control
    // flow there).
    let mut sum = 0.0f32;
    if is_q {
        for step in 0..steps {
            let v = q[(base + UNIT_POS + step * THREADS) as usize];
            sum += v * v;
        }
    } else if live {
        for step in 0..steps {
            let v = k[(base + UNIT_POS + step * THREADS) as usize];
            sum += v * v;
        }
    }
    let total = cube_reduce(sum, false);
    let inv = 1.0f32 / (total / f32::cast_from(dim) + eps).sqrt();
    if is_q {
        for step in 0..steps {
            let i = UNIT_POS + step * THREADS;
            q_out[(base + i) as usize] = q[(base + i) as usize] * inv * q_weight[i as usize];
        }
    } else if live {
        for step in 0..steps {
            let i = UNIT_POS + step * THREADS;
            k_out[(base + i) as usize] = k[(base + i) as usize] * inv * k_weight[i as usize];
        }
    }
}

/// One cube per row: `sum = x + h`, and `sum / sqrt(ms(sum) + eps) · w`; when `norm_h`, `h` is
/// first normed (`h / sqrt(ms(h) + eps) · h_weight`, with the arithmetic of
/// [`rms_norm_kernel`]; otherwise `h_weight` is not read).
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn add_rms_norm_kernel(
    x: &[f32],
    h: &[f32],
    h_weight: &[f32],
    weight: &[f32],
    sum_out: &mut [f32],
    out: &mut [f32],
    rows: u32,
    dim: u32,
    eps: f32,
    #[comptime] norm_h: bool,
) {
    let row = CUBE_POS_X + CUBE_POS_Y * CUBE_COUNT_X;
    let base = row * dim;
    let live = row < rows;
    let steps = (dim + THREADS - 1 - UNIT_POS) / THREADS;
    let mut inv_h = 1.0f32;
    if comptime!(norm_h) {
        inv_h = inverse_rms(h, base, dim, eps, live);
    }
    let mut squares = 0.0f32;
    if live {
        for step in 0..steps {
            let i = UNIT_POS + step * THREADS;
            let at = (base + i) as usize;
            let v = if comptime!(norm_h) {
                x[at] + h[at] * inv_h * h_weight[i as usize]
            } else {
                x[at] + h[at]
            };
            sum_out[at] = v;
            squares += v * v;
        }
    }
    let total = cube_reduce(squares, false);
    if live {
        let inv = 1.0f32 / (total / f32::cast_from(dim) + eps).sqrt();
        for step in 0..steps {
            let i = UNIT_POS + step * THREADS;
            let at = (base + i) as usize;
            out[at] = sum_out[at] * inv * weight[i as usize];
        }
    }
}

/// One cube per row: the mean square, then `x / sqrt(ms + eps) · w`.
#[cube(launch)]
fn rms_norm_kernel(x: &[f32], weight: &[f32], out: &mut [f32], rows: u32, dim: u32, eps: f32) {
    let row = CUBE_POS_X + CUBE_POS_Y * CUBE_COUNT_X;
    let base = row * dim;
    let steps = (dim + THREADS - 1 - UNIT_POS) / THREADS;
    let mut sum = 0.0f32;
    if row < rows {
        for step in 0..steps {
            let v = x[(base + UNIT_POS + step * THREADS) as usize];
            sum += v * v;
        }
    }
    let total = cube_reduce(sum, false);
    if row < rows {
        let inv = 1.0f32 / (total / f32::cast_from(dim) + eps).sqrt();
        for step in 0..steps {
            let i = UNIT_POS + step * THREADS;
            out[(base + i) as usize] = x[(base + i) as usize] * inv * weight[i as usize];
        }
    }
}

/// Pair `at` of `[tokens, heads, dim]` rotated from `x` into `out`.
#[cube]
#[allow(clippy::too_many_arguments)]
fn rotate_pair(
    x: &[f32],
    out: &mut [f32],
    rotations: &[f32],
    at: u32,
    heads: u32,
    dim: u32,
    start: u32,
    #[comptime] neox: bool,
) {
    let half = dim / 2;
    let i = at % half;
    let head = at / half;
    let token = head / heads;
    let base = head * dim;
    let (ia, ib) = if comptime!(neox) {
        (base + i, base + i + half)
    } else {
        (base + 2 * i, base + 2 * i + 1)
    };
    let turn = ((start + token) * half + i) * 2;
    let c = rotations[turn as usize];
    let s = rotations[(turn + 1) as usize];
    let a = x[ia as usize];
    let b = x[ib as usize];
    out[ia as usize] = a * c - b * s;
    out[ib as usize] = a * s + b * c;
}

/// Where value `at` of `[tokens, kv_heads, dim]` goes in a cache `[kv_heads, capacity, dim]`
/// whose positions from `start` the tokens take.
#[cube]
fn cache_index(at: u32, kv_heads: u32, capacity: u32, dim: u32, start: u32) -> usize {
    let d = at % dim;
    let head = (at / dim) % kv_heads;
    let token = at / (dim * kv_heads);
    (cache_row(head, start + token, capacity, dim) + d) as usize
}

/// Where kv head `head`'s row for `position` starts in a cache `[kv_heads, capacity, dim]`.
#[cube]
fn cache_row(head: u32, position: u32, capacity: u32, dim: u32) -> u32 {
    (head * capacity + position) * dim
}

/// One unit per rotated pair of the queries, then of the keys.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn rope_kernel(
    q: &[f32],
    k: &[f32],
    rotations: &[f32],
    q_out: &mut [f32],
    k_out: &mut [f32],
    q_pairs: u32,
    k_pairs: u32,
    q_heads: u32,
    k_heads: u32,
    dim: u32,
    start: u32,
    #[comptime] neox: bool,
) {
    let at = ABSOLUTE_POS as u32;
    if at < q_pairs {
        rotate_pair(q, q_out, rotations, at, q_heads, dim, start, neox);
    } else if at < q_pairs + k_pairs {
        rotate_pair(k, k_out, rotations, at - q_pairs, k_heads, dim, start, neox);
    }
}

/// One unit per value of `k` and `v` (`[tokens, kv_heads, dim]`), stored in the caches
/// (`[kv_heads, capacity, dim]`) at position `start + token`.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn cache_write_kernel(
    k: &[f32],
    v: &[f32],
    keys: &mut [f32],
    values: &mut [f32],
    count: u32,
    kv_heads: u32,
    capacity: u32,
    dim: u32,
    start: u32,
) {
    let at = ABSOLUTE_POS as u32;
    if at < count {
        let to = cache_index(at, kv_heads, capacity, dim, start);
        keys[to] = round_f16(k[at as usize]);
        values[to] = round_f16(v[at as usize]);
    }
}

/// A layer's queries, keys and values made ready for attention in one launch, one cube per
/// head of a token's projections `qkv` (`[tokens, (heads + 2·kv_heads) · dim]`: the query
/// heads, the key heads, the value heads, as the stacked product leaves them). A query or key
/// head is RMS-normed by its weight where `normed` (Gemma 3's QK norm, with the arithmetic of
/// [`rms_norm_pair_kernel`]), then rotated ([`rope_kernel`]'s arithmetic); the queries go
/// back into `qkv`, the keys and the values into the caches (`[kv_heads, capacity, dim]`) at
/// position `position[0] + token`, rounded to `f16` ([`cache_write_kernel`]). The position is
/// read from a buffer rather than passed as a value, so that a recorded decoding step replays
/// at any position (`crate::step_graph`). Seven storage buffers and the launch's info:
/// WebGPU guarantees eight (`tests/webgpu_limits.rs`).
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(super) fn qkv_cache_write_kernel(
    qkv: &mut [f32],
    rotations: &[f32],
    q_weight: &[f32],
    k_weight: &[f32],
    keys: &mut [f32],
    values: &mut [f32],
    position: &[u32],
    heads: u32,
    kv_heads: u32,
    dim: u32,
    capacity: u32,
    rows: u32,
    eps: f32,
    #[comptime] normed: bool,
    #[comptime] neox: bool,
) {
    let row = CUBE_POS_X + CUBE_POS_Y * CUBE_COUNT_X;
    let live = row < rows;
    let per_token = heads + 2 * kv_heads;
    let (token, head) = (row / per_token, row % per_token);
    let is_q = head < heads;
    let is_v = head >= heads + kv_heads;
    let base = row * dim;
    let start = position[0];
    // Every unit reads its values for the norm before the reduction's barrier, and stores
    // only after it: the queries are rotated in place.
    let mut inv = 1.0f32;
    if comptime!(normed) {
        inv = inverse_rms(&*qkv, base, dim, eps, live && !is_v);
    }
    if live && is_v {
        let steps = (dim + THREADS - 1 - UNIT_POS) / THREADS;
        let at = cache_row(head - heads - kv_heads, start + token, capacity, dim);
        for step in 0..steps {
            let d = UNIT_POS + step * THREADS;
            values[(at + d) as usize] = round_f16(qkv[(base + d) as usize]);
        }
    } else if live {
        let half = dim / 2;
        let steps = (half + THREADS - 1 - UNIT_POS) / THREADS;
        for step in 0..steps {
            let i = UNIT_POS + step * THREADS;
            let (ia, ib) = if comptime!(neox) {
                (i, i + half)
            } else {
                (2 * i, 2 * i + 1)
            };
            let mut a = qkv[(base + ia) as usize];
            let mut b = qkv[(base + ib) as usize];
            if comptime!(normed) {
                if is_q {
                    a = a * inv * q_weight[ia as usize];
                    b = b * inv * q_weight[ib as usize];
                } else {
                    a = a * inv * k_weight[ia as usize];
                    b = b * inv * k_weight[ib as usize];
                }
            }
            let turn = ((start + token) * half + i) * 2;
            let (c, s) = (rotations[turn as usize], rotations[(turn + 1) as usize]);
            let (ra, rb) = (a * c - b * s, a * s + b * c);
            if is_q {
                qkv[(base + ia) as usize] = ra;
                qkv[(base + ib) as usize] = rb;
            } else {
                let at = cache_row(head - heads, start + token, capacity, dim);
                keys[(at + ia) as usize] = round_f16(ra);
                keys[(at + ib) as usize] = round_f16(rb);
            }
        }
    }
}

/// SiLU as ggml computes it (`g / (1 + e^-g)`), or GELU (tanh, arranged as on the CPU) on the
/// input rounded to `f16`, the result rounded to `f16` (ggml's table), the identity from 10 up
/// and 0 from -10 down.
#[cube]
pub(crate) fn activate(g: f32, #[comptime] gelu: bool) -> f32 {
    if comptime!(gelu) {
        if g >= 10.0f32 {
            g
        } else if g <= -10.0f32 {
            0.0f32
        } else {
            let x = round_f16(g);
            let inner = (x + x * x * x * 0.044_715f32) * 0.797_884_6f32;
            round_f16(x * (inner.tanh() + 1.0f32) * 0.5f32)
        }
    } else {
        g / ((-g).exp() + 1.0f32)
    }
}

/// One unit per value: [`activate`] of `gate`, times `up`.
#[cube(launch)]
fn gated_kernel(gate: &[f32], up: &[f32], out: &mut [f32], len: u32, #[comptime] gelu: bool) {
    let at = ABSOLUTE_POS as u32;
    if at < len {
        out[at as usize] = activate(gate[at as usize], gelu) * up[at as usize];
    }
}

/// `cache` (or another tensor a kernel writes part of) to be written: in place when this is
/// the only handle on it and it lies in memory order (the cache between steps); otherwise a
/// copy, so no other tensor sees the write.
///
/// Not burn's `is_contiguous_buffer`, which also asks the buffer to be exactly the tensor's
/// bytes: buffers come in units of the device's alignment (256 bytes under WebGPU's default
/// limits), so a cache of another size (the miniature's, 32 values a head at an odd capacity)
/// was copied at every step there, a launch and an allocation a layer. A binding starts at the
/// tensor's first value, and the kernels index below its length: the padding is never reached.
pub(crate) fn writable(cache: CubeTensor) -> CubeTensor {
    if cache.can_mut() && cache.is_contiguous() {
        cache
    } else {
        into_contiguous(cache).copy()
    }
}

/// A grid of `cubes` cubes that fits WebGPU's per-dimension limit.
pub(crate) fn grid_of(cubes: u32) -> CubeCount {
    let across = cubes.clamp(1, MAX_CUBES);
    CubeCount::Static(across, cubes.div_ceil(across), 1)
}

/// An uninitialised `f32` tensor of `shape` beside `like`.
pub(crate) fn empty_like(like: &CubeTensor, shape: Shape) -> CubeTensor {
    empty_device_dtype(like.client.clone(), like.device.clone(), shape, DType::F32)
}

pub(super) fn len(t: &CubeTensor) -> usize {
    t.meta.shape().num_elements()
}

/// `x + h` (`h` normed by `h_weight` first when given) and the sum's RMSNorm times `weight`:
/// [`add_rms_norm_kernel`].
fn add_rms_norm(
    x: CubeTensor,
    h: CubeTensor,
    h_weight: Option<CubeTensor>,
    weight: CubeTensor,
    eps: f32,
) -> (CubeTensor, CubeTensor) {
    let [x, h, weight] = [x, h, weight].map(into_contiguous);
    let norm_h = h_weight.is_some();
    // Without an output norm the kernel does not read `h_weight`: `weight` stands in.
    let h_weight = h_weight.map_or_else(|| weight.clone(), into_contiguous);
    let shape = x.meta.shape().clone();
    let dim = shape[shape.len() - 1];
    let rows = len(&x) / dim.max(1);
    let sum = empty_like(&x, shape.clone());
    let out = empty_like(&x, shape);
    // SAFETY: every buffer is bound with its tensor's length; the kernel reads and writes rows
    // `0..rows` of `dim` values (`h` and `sum` have `x`'s shape) and `dim` weights.
    unsafe {
        add_rms_norm_kernel::launch(
            &x.client,
            grid_of(rows as u32),
            CubeDim::new_1d(THREADS),
            BufferArg::from_raw_parts(x.handle.clone(), len(&x)),
            BufferArg::from_raw_parts(h.handle.clone(), len(&h)),
            BufferArg::from_raw_parts(h_weight.handle.clone(), len(&h_weight)),
            BufferArg::from_raw_parts(weight.handle.clone(), len(&weight)),
            BufferArg::from_raw_parts(sum.handle.clone(), len(&sum)),
            BufferArg::from_raw_parts(out.handle.clone(), len(&out)),
            rows as u32,
            dim as u32,
            eps,
            norm_h,
        );
    }
    (sum, out)
}

impl FusedOps for Cube {
    fn fused_rms_norm(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        eps: f32,
    ) -> FloatTensor<Self> {
        let x = into_contiguous(x);
        let weight = into_contiguous(weight);
        let shape = x.meta.shape().clone();
        let dim = shape[shape.len() - 1];
        let rows = len(&x) / dim.max(1);
        let out = empty_like(&x, shape);
        // SAFETY: every buffer is bound with its tensor's length; the kernel reads rows
        // `0..rows` of `dim` values and `dim` weights.
        unsafe {
            rms_norm_kernel::launch(
                &x.client,
                grid_of(rows as u32),
                CubeDim::new_1d(THREADS),
                BufferArg::from_raw_parts(x.handle.clone(), len(&x)),
                BufferArg::from_raw_parts(weight.handle.clone(), len(&weight)),
                BufferArg::from_raw_parts(out.handle.clone(), len(&out)),
                rows as u32,
                dim as u32,
                eps,
            );
        }
        out
    }

    fn fused_add_rms_norm(
        x: FloatTensor<Self>,
        h: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        eps: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        add_rms_norm(x, h, None, weight, eps)
    }

    fn fused_rms_norm_pair(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        q_weight: FloatTensor<Self>,
        k_weight: FloatTensor<Self>,
        eps: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let [q, k, q_weight, k_weight] = [q, k, q_weight, k_weight].map(into_contiguous);
        let (q_shape, k_shape) = (q.meta.shape().clone(), k.meta.shape().clone());
        let dim = q_shape[q_shape.len() - 1];
        let (q_rows, k_rows) = (len(&q) / dim.max(1), len(&k) / dim.max(1));
        let q_out = empty_like(&q, q_shape);
        let k_out = empty_like(&k, k_shape);
        // SAFETY: every buffer is bound with its tensor's length; the kernel reads rows
        // `0..q_rows` of `q` and `0..k_rows` of `k`, `dim` values each, and `dim` weights.
        unsafe {
            rms_norm_pair_kernel::launch(
                &q.client,
                grid_of((q_rows + k_rows) as u32),
                CubeDim::new_1d(THREADS),
                BufferArg::from_raw_parts(q.handle.clone(), len(&q)),
                BufferArg::from_raw_parts(k.handle.clone(), len(&k)),
                BufferArg::from_raw_parts(q_weight.handle.clone(), len(&q_weight)),
                BufferArg::from_raw_parts(k_weight.handle.clone(), len(&k_weight)),
                BufferArg::from_raw_parts(q_out.handle.clone(), len(&q_out)),
                BufferArg::from_raw_parts(k_out.handle.clone(), len(&k_out)),
                q_rows as u32,
                k_rows as u32,
                dim as u32,
                eps,
            );
        }
        (q_out, k_out)
    }

    fn fused_norm_add_rms_norm(
        x: FloatTensor<Self>,
        h: FloatTensor<Self>,
        h_weight: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        eps: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        add_rms_norm(x, h, Some(h_weight), weight, eps)
    }

    fn fused_rope(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        rotations: FloatTensor<Self>,
        start: usize,
        neox: bool,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let q = into_contiguous(q);
        let k = into_contiguous(k);
        let rotations = into_contiguous(rotations);
        let (q_shape, k_shape) = (q.meta.shape().clone(), k.meta.shape().clone());
        let (q_heads, k_heads, dim) = (q_shape[1], k_shape[1], q_shape[2]);
        let (q_pairs, k_pairs) = (len(&q) / 2, len(&k) / 2);
        let q_out = empty_like(&q, q_shape);
        let k_out = empty_like(&k, k_shape);
        // SAFETY: one unit per pair below `q_pairs + k_pairs`; the tables hold every position
        // the cache can, which the model checked `start + tokens` against.
        unsafe {
            rope_kernel::launch(
                &q.client,
                grid_of(((q_pairs + k_pairs) as u32).div_ceil(THREADS)),
                CubeDim::new_1d(THREADS),
                BufferArg::from_raw_parts(q.handle.clone(), len(&q)),
                BufferArg::from_raw_parts(k.handle.clone(), len(&k)),
                BufferArg::from_raw_parts(rotations.handle.clone(), len(&rotations)),
                BufferArg::from_raw_parts(q_out.handle.clone(), len(&q_out)),
                BufferArg::from_raw_parts(k_out.handle.clone(), len(&k_out)),
                q_pairs as u32,
                k_pairs as u32,
                q_heads as u32,
                k_heads as u32,
                dim as u32,
                start as u32,
                neox,
            );
        }
        (q_out, k_out)
    }

    fn fused_cache_write(
        keys: FloatTensor<Self>,
        values: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        start: usize,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let k = into_contiguous(k);
        let v = into_contiguous(v);
        let (keys, values) = (writable(keys), writable(values));
        let shape = keys.meta.shape().clone();
        let (kv_heads, capacity, dim) = (shape[0], shape[1], shape[2]);
        let count = len(&k);
        // SAFETY: one unit per value of `k` (and `v`, the same shape); the model checked
        // `start + tokens ≤ capacity`.
        unsafe {
            cache_write_kernel::launch(
                &keys.client,
                grid_of((count as u32).div_ceil(THREADS)),
                CubeDim::new_1d(THREADS),
                BufferArg::from_raw_parts(k.handle.clone(), count),
                BufferArg::from_raw_parts(v.handle.clone(), count),
                BufferArg::from_raw_parts(keys.handle.clone(), len(&keys)),
                BufferArg::from_raw_parts(values.handle.clone(), len(&values)),
                count as u32,
                kv_heads as u32,
                capacity as u32,
                dim as u32,
                start as u32,
            );
        }
        (keys, values)
    }

    fn fused_gated(
        gate: FloatTensor<Self>,
        up: FloatTensor<Self>,
        gelu: bool,
    ) -> FloatTensor<Self> {
        let gate = into_contiguous(gate);
        let up = into_contiguous(up);
        let n = len(&gate);
        let out = empty_like(&gate, gate.meta.shape().clone());
        // SAFETY: one unit per value below `n`, the length of all three.
        unsafe {
            gated_kernel::launch(
                &gate.client,
                grid_of((n as u32).div_ceil(THREADS)),
                CubeDim::new_1d(THREADS),
                BufferArg::from_raw_parts(gate.handle.clone(), n),
                BufferArg::from_raw_parts(up.handle.clone(), n),
                BufferArg::from_raw_parts(out.handle.clone(), n),
                n as u32,
                gelu,
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The memory a tensor's handle points at (taken without keeping a second handle on it).
    fn memory_of(t: &CubeTensor) -> impl PartialEq + std::fmt::Debug + use<> {
        t.handle.clone().binding().claim_key()
    }

    /// A cache in a buffer longer than its values, as WebGPU's 256-byte units give the
    /// miniature's (1 head, an odd capacity, 32 values: 1,408 bytes in 1,536). It was copied at
    /// every write; it is written where it lies.
    #[test]
    fn an_unshared_cache_is_written_in_place_in_a_longer_buffer() {
        let device = match crate::DeviceKind::Wgpu.device() {
            Ok(device) => device,
            Err(e) => {
                assert!(
                    std::env::var("STAMPO_REQUIRE_WGPU").as_deref() != Ok("1"),
                    "STAMPO_REQUIRE_WGPU=1 but {e}"
                );
                println!("SKIPPED the wgpu device: {e}");
                return;
            }
        };
        let burn::backend::DispatchDevice::Cube(cube) = device.as_dispatch() else {
            unreachable!("the wgpu device is a CubeCL one")
        };
        let client = cube.client();
        let buffer = client.empty(1536);
        let cache = CubeTensor::new_contiguous(
            client,
            cube.clone(),
            Shape::new([1, 11, 32]),
            buffer,
            DType::F32,
        );
        let before = memory_of(&cache);
        let written = writable(cache);
        assert_eq!(memory_of(&written), before, "copied");

        // A second handle on it: the write must not show through that one.
        let shared = written.clone();
        let copy = writable(written);
        assert_ne!(memory_of(&copy), memory_of(&shared));
    }
}
