//! [`FusedAttention`] on burn's CubeCL backend: one cube per (query head, token), or for a
//! decoding query with a long context, its keys split across cubes.

use burn::backend::Cube;
use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::tensor::Shape;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

use super::FusedAttention;
use super::cube::{
    THREADS, cube_reduce, empty_like, grid_of, len, qkv_cache_write_kernel, round_f16, writable,
};

/// Scores a cube of [`attention_kernel`] keeps between its passes: 8 KiB of the 16 KiB of
/// shared memory WebGPU guarantees.
const KEPT_SCORES: u32 = 2048;

/// How many iterations of the attention kernels' inner loops each turn writes out, so that
/// their loads are issued together rather than one latency after another. Not the whole
/// loops: CubeCL's optimiser takes time that grows faster than the code it is given. With
/// every loop written out, the first decoding step past 256 keys (the first to launch the
/// split kernels) stalled while they compiled: 0.21–0.29 s for SmolLM2 and Qwen2.5, 1.7–1.9 s
/// for Gemma 3 (head_dim 256), natively on the project's 2-core machine; 17–26 ms with these.
const IN_FLIGHT: u32 = 4;

/// `q · k` of the query row in `q_row` and the key at `key` (an offset into `keys`): one
/// chain of products in order, [`IN_FLIGHT`] a turn.
#[cube]
fn score(q_row: &Shared<[f32]>, keys: &[f32], key: u32, #[comptime] dim: u32) -> f32 {
    let mut dot = 0.0f32;
    let whole = comptime!(dim - dim % IN_FLIGHT);
    for turn in 0..comptime!(whole / IN_FLIGHT) {
        #[unroll]
        for i in 0..IN_FLIGHT {
            let d = turn * IN_FLIGHT + i;
            dot += q_row[d as usize] * keys[(key + d) as usize];
        }
    }
    for d in whole..dim {
        dot += q_row[d as usize] * keys[(key + d) as usize];
    }
    dot
}

/// `acc[r] += p_e · values[row_e + unit + r · THREADS]` for the keys `e` below `here` of a
/// chunk whose probabilities are in `probs` and whose first key's values start at `row`:
/// each unit's columns of the weighted values, keys in order, [`IN_FLIGHT`] a turn.
#[cube]
fn add_weighted_values(
    acc: &mut Array<f32>,
    probs: &Shared<[f32]>,
    values: &[f32],
    row: u32,
    here: u32,
    #[comptime] dim: u32,
) {
    let per_unit = comptime!(dim.div_ceil(THREADS));
    for turn in 0..comptime!(THREADS / IN_FLIGHT) {
        #[unroll]
        for i in 0..IN_FLIGHT {
            let e = turn * IN_FLIGHT + i;
            if e < here {
                let weight = probs[e as usize];
                let at = row + e * dim;
                #[unroll]
                for r in 0..per_unit {
                    let d = UNIT_POS + r * THREADS;
                    if d < dim {
                        acc[r as usize] += weight * values[(at + d) as usize];
                    }
                }
            }
        }
    }
}

/// One cube per (query head, token): the scores of the visible keys, their softmax (three
/// passes over the keys: maximum, sum, then the weighted values, so each probability is
/// exactly `e^(s - max) / sum` and can be rounded to `f16` as llama.cpp's are). Up to
/// [`KEPT_SCORES`] keys, the first pass keeps its scores in shared memory for the other two;
/// past that, they compute them again. A token's queries are `q_stride` values after the
/// previous token's: a prefill reads them in place from the Q/K/V product's rows.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn attention_kernel(
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    out: &mut [f32],
    q_stride: u32,
    heads: u32,
    kv_heads: u32,
    capacity: u32,
    position: &[u32],
    window: u32,
    scale: f32,
    #[comptime] dim: u32,
) {
    let head = CUBE_POS_X;
    let token = CUBE_POS_Y;
    let kv_head = head / (heads / kv_heads);
    let query_at = position[0] + token;
    let end = query_at + 1;
    let first = if window > 0 && end > window {
        end - window
    } else {
        0u32
    };
    let count = end - first;
    let q_at = token * q_stride + head * dim;
    let out_at = (token * heads + head) * dim;
    let cache_at = kv_head * capacity * dim;

    let mut q_row = Shared::<[f32]>::new_slice(dim as usize);
    let q_steps = (dim + THREADS - 1 - UNIT_POS) / THREADS;
    for step in 0..q_steps {
        let d = UNIT_POS + step * THREADS;
        q_row[d as usize] = round_f16(q[(q_at + d) as usize]);
    }
    sync_cube();

    // Key `first + n` is scored by unit `n % THREADS` in every pass, so a unit reads back
    // only the scores it kept itself.
    let mut kept = Shared::<[f32]>::new_slice(KEPT_SCORES as usize);
    let keep = count <= KEPT_SCORES;
    let steps = (count + THREADS - 1 - UNIT_POS) / THREADS;
    // Below every score (a negative literal would be a compile-time constant here).
    let mut local_max = 0.0f32;
    local_max -= 3.0e38f32;
    for step in 0..steps {
        let n = UNIT_POS + step * THREADS;
        let s = score(&q_row, keys, cache_at + (first + n) * dim, dim) * scale;
        if keep {
            kept[n as usize] = s;
        }
        if s > local_max {
            local_max = s;
        }
    }
    let max = cube_reduce(local_max, true);
    let mut local_sum = 0.0f32;
    for step in 0..steps {
        let n = UNIT_POS + step * THREADS;
        let s = if keep {
            kept[n as usize]
        } else {
            score(&q_row, keys, cache_at + (first + n) * dim, dim) * scale
        };
        let e = (s - max).exp();
        if keep {
            kept[n as usize] = e;
        }
        local_sum += e;
    }
    let sum = cube_reduce(local_sum, false);

    // The weighted values, a chunk of `THREADS` keys at a time: each unit computes one
    // probability into shared memory, then adds its columns of every key in the chunk.
    let per_unit = comptime!(dim.div_ceil(THREADS));
    let mut acc = Array::<f32>::new(per_unit as usize);
    #[unroll]
    for r in 0..per_unit {
        acc[r as usize] = 0.0;
    }
    let mut probs = Shared::<[f32]>::new_slice(THREADS as usize);
    let chunks = count.div_ceil(THREADS);
    for chunk in 0..chunks {
        let base = first + chunk * THREADS;
        let key = base + UNIT_POS;
        let mut p = 0.0f32;
        if key < end {
            let e = if keep {
                kept[(key - first) as usize]
            } else {
                (score(&q_row, keys, cache_at + key * dim, dim) * scale - max).exp()
            };
            p = round_f16(e / sum);
        }
        probs[UNIT_POS as usize] = p;
        sync_cube();
        let here = min(THREADS, end - base);
        add_weighted_values(&mut acc, &probs, values, cache_at + base * dim, here, dim);
        sync_cube();
    }
    #[unroll]
    for r in 0..per_unit {
        let d = UNIT_POS + r * THREADS;
        if d < dim {
            out[(out_at + d) as usize] = acc[r as usize];
        }
    }
}

/// Keys per cube when one query's attention is split across cubes (decoding with a long
/// context, where one cube per head would leave the GPU nearly idle): four per unit.
const SPLIT_KEYS: u32 = 256;

/// The keys `lo..hi` of split `CUBE_POS_Y` of one decoding query (head `CUBE_POS_X`).
#[cube]
fn split_range(start: u32, window: u32) -> (u32, u32) {
    let end = start + 1;
    let first = if window > 0 && end > window {
        end - window
    } else {
        0u32
    };
    let lo = first + CUBE_POS_Y * SPLIT_KEYS;
    (lo, min(end, lo + SPLIT_KEYS))
}

/// Loads the query row of head `head` (one token), rounded to `f16`, into `q_row`.
#[cube]
fn load_query(q: &[f32], q_row: &mut Shared<[f32]>, head: u32, #[comptime] dim: u32) {
    let steps = (dim + THREADS - 1 - UNIT_POS) / THREADS;
    for step in 0..steps {
        let d = UNIT_POS + step * THREADS;
        q_row[d as usize] = round_f16(q[(head * dim + d) as usize]);
    }
    sync_cube();
}

/// Split attention, first kernel: each split's maximum score and its sum of `e^(s - max)`.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn attention_split_stats(
    q: &[f32],
    keys: &[f32],
    maxima: &mut [f32],
    sums: &mut [f32],
    heads: u32,
    kv_heads: u32,
    capacity: u32,
    position: &[u32],
    window: u32,
    scale: f32,
    #[comptime] dim: u32,
) {
    let head = CUBE_POS_X;
    let cache_at = (head / (heads / kv_heads)) * capacity * dim;
    let (lo, hi) = split_range(position[0], window);
    let mut q_row = Shared::<[f32]>::new_slice(dim as usize);
    load_query(q, &mut q_row, head, dim);
    let per_unit = comptime!(SPLIT_KEYS / THREADS);
    let mut kept = Array::<f32>::new(per_unit as usize);
    let mut local_max = 0.0f32;
    local_max -= 3.0e38f32;
    #[unroll]
    for r in 0..per_unit {
        let key = lo + UNIT_POS + r * THREADS;
        let mut s = local_max;
        if key < hi {
            s = score(&q_row, keys, cache_at + key * dim, dim) * scale;
        }
        kept[r as usize] = s;
        if s > local_max {
            local_max = s;
        }
    }
    let max = cube_reduce(local_max, true);
    let mut local_sum = 0.0f32;
    #[unroll]
    for r in 0..per_unit {
        if lo + UNIT_POS + r * THREADS < hi {
            local_sum += (kept[r as usize] - max).exp();
        }
    }
    let sum = cube_reduce(local_sum, false);
    if UNIT_POS == 0 {
        let at = (head * CUBE_COUNT_Y + CUBE_POS_Y) as usize;
        maxima[at] = max;
        sums[at] = sum;
    }
}

/// Split attention, second kernel: the softmax's maximum and sum over all splits, then this
/// split's probabilities (rounded to `f16`) times its values, into `partial`
/// (`[heads, splits, dim]`).
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn attention_split_values(
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    maxima: &[f32],
    sums: &[f32],
    partial: &mut [f32],
    heads: u32,
    kv_heads: u32,
    capacity: u32,
    position: &[u32],
    window: u32,
    scale: f32,
    #[comptime] dim: u32,
) {
    let head = CUBE_POS_X;
    let splits = CUBE_COUNT_Y;
    let cache_at = (head / (heads / kv_heads)) * capacity * dim;
    let (lo, hi) = split_range(position[0], window);
    let mut q_row = Shared::<[f32]>::new_slice(dim as usize);
    load_query(q, &mut q_row, head, dim);
    let mut max = 0.0f32;
    max -= 3.0e38f32;
    for i in 0..splits {
        let m = maxima[(head * splits + i) as usize];
        if m > max {
            max = m;
        }
    }
    let mut sum = 0.0f32;
    for i in 0..splits {
        let at = (head * splits + i) as usize;
        sum += sums[at] * (maxima[at] - max).exp();
    }
    let per_unit = comptime!(dim.div_ceil(THREADS));
    let mut acc = Array::<f32>::new(per_unit as usize);
    #[unroll]
    for r in 0..per_unit {
        acc[r as usize] = 0.0;
    }
    let mut probs = Shared::<[f32]>::new_slice(THREADS as usize);
    // Not written out: each turn waits at two barriers anyway.
    let chunks = comptime!(SPLIT_KEYS / THREADS);
    for chunk in 0..chunks {
        let base = lo + chunk * THREADS;
        let key = base + UNIT_POS;
        let mut p = 0.0f32;
        if key < hi {
            let s = score(&q_row, keys, cache_at + key * dim, dim) * scale;
            p = round_f16((s - max).exp() / sum);
        }
        probs[UNIT_POS as usize] = p;
        sync_cube();
        let here = min(THREADS, hi - min(hi, base));
        add_weighted_values(&mut acc, &probs, values, cache_at + base * dim, here, dim);
        sync_cube();
    }
    #[unroll]
    for r in 0..per_unit {
        let d = UNIT_POS + r * THREADS;
        if d < dim {
            partial[((head * splits + CUBE_POS_Y) * dim + d) as usize] = acc[r as usize];
        }
    }
}

/// Split attention, last kernel: `out[head, d] = Σ_split partial[head, split, d]`.
#[cube(launch)]
fn attention_split_sum(partial: &[f32], out: &mut [f32], splits: u32, dim: u32, len: u32) {
    let at = ABSOLUTE_POS as u32;
    if at < len {
        let head = at / dim;
        let d = at % dim;
        let mut total = 0.0f32;
        for i in 0..splits {
            total += partial[((head * splits + i) * dim + d) as usize];
        }
        out[at as usize] = total;
    }
}

impl FusedAttention for Cube {
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
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        let qkv = writable(qkv);
        let [rotations, q_weight, k_weight] = [rotations, q_weight, k_weight].map(into_contiguous);
        let position = into_contiguous(position);
        let (keys, values) = (writable(keys), writable(values));
        let cache = keys.meta.shape().clone();
        let (kv_heads, capacity, dim) = (cache[0], cache[1], cache[2]);
        let shape = qkv.meta.shape().clone();
        let (tokens, width) = (shape[0], shape[1]);
        let per_token = width / dim.max(1);
        let heads = per_token.saturating_sub(2 * kv_heads);
        let rows = tokens * per_token;
        // SAFETY: every buffer is bound with its tensor's length; cube `row` below `rows`
        // reads and writes its head's `dim` values of `qkv` (`rows · dim` ≤ its length), reads
        // `dim` weights (the heads' width, as the loader checked) where normed and the
        // rotations of position `start + token`, and stores below the caches' lengths: the
        // model checked `start + tokens ≤ capacity` for the `start` that `position` holds, and
        // the tables hold every position the cache can.
        unsafe {
            qkv_cache_write_kernel::launch(
                &qkv.client,
                grid_of(rows as u32),
                CubeDim::new_1d(THREADS),
                BufferArg::from_raw_parts(qkv.handle.clone(), len(&qkv)),
                BufferArg::from_raw_parts(rotations.handle.clone(), len(&rotations)),
                BufferArg::from_raw_parts(q_weight.handle.clone(), len(&q_weight)),
                BufferArg::from_raw_parts(k_weight.handle.clone(), len(&k_weight)),
                BufferArg::from_raw_parts(keys.handle.clone(), len(&keys)),
                BufferArg::from_raw_parts(values.handle.clone(), len(&values)),
                BufferArg::from_raw_parts(position.handle.clone(), 1),
                heads as u32,
                kv_heads as u32,
                dim as u32,
                capacity as u32,
                rows as u32,
                eps.unwrap_or(0.0),
                eps.is_some(),
                neox,
            );
        }
        (qkv, keys, values)
    }

    fn fused_attention(
        q: FloatTensor<Self>,
        keys: FloatTensor<Self>,
        values: FloatTensor<Self>,
        splits: usize,
        position: IntTensor<Self>,
        window: usize,
        scale: f32,
    ) -> FloatTensor<Self> {
        let position = into_contiguous(position);
        let keys = into_contiguous(keys);
        let values = into_contiguous(values);
        let shape = q.meta.shape().clone();
        let (tokens, heads, dim) = (shape[0], shape[1], shape[2]);
        let cache = keys.meta.shape().clone();
        let (kv_heads, capacity) = (cache[0], cache[1]);
        let out = empty_like(&q, Shape::new([tokens, heads * dim]));
        if splits > 0 && tokens == 1 {
            let q = into_contiguous(q);
            split_attention(&q, &keys, &values, &out, &position, window, scale, splits);
            return out;
        }
        // Each token's heads side by side, tokens `q_stride` apart (the Q columns of a
        // prefill's Q/K/V rows) are read where they are rather than copied first.
        let strides = q.meta.strides();
        let (rows, stride) = (
            tokens > 1 && strides[2] == 1 && strides[1] == dim,
            strides[0],
        );
        let (q, q_stride) = if rows {
            (q, stride)
        } else {
            (into_contiguous(q), heads * dim)
        };
        let q_len = tokens.saturating_sub(1) * q_stride + heads * dim;
        // SAFETY: cube (head, token) reads its query row (`token · q_stride + head · dim`,
        // `dim` values, within the `q_len` values bound from the view's first), and keys and
        // values of positions below `start + token + 1 ≤ capacity` (checked by the model), of
        // kv head `head / (heads / kv_heads) < kv_heads`.
        unsafe {
            attention_kernel::launch(
                &q.client,
                CubeCount::Static(heads as u32, tokens as u32, 1),
                CubeDim::new_1d(THREADS),
                BufferArg::from_raw_parts(q.handle.clone(), q_len),
                BufferArg::from_raw_parts(keys.handle.clone(), len(&keys)),
                BufferArg::from_raw_parts(values.handle.clone(), len(&values)),
                BufferArg::from_raw_parts(out.handle.clone(), len(&out)),
                q_stride as u32,
                heads as u32,
                kv_heads as u32,
                capacity as u32,
                BufferArg::from_raw_parts(position.handle.clone(), 1),
                window as u32,
                scale,
                dim as u32,
            );
        }
        out
    }
}

/// See [`super::attention_splits`]: a decoding query over more than [`SPLIT_KEYS`] visible
/// keys is split.
pub(super) fn splits(tokens: usize, start: usize, window: usize) -> usize {
    let count = if window > 0 {
        window.min(start + 1)
    } else {
        start + 1
    };
    if tokens == 1 && count > SPLIT_KEYS as usize {
        count.div_ceil(SPLIT_KEYS as usize)
    } else {
        0
    }
}

/// One decoding query's attention split across cubes of [`SPLIT_KEYS`] keys (flash-decoding):
/// statistics per split, then each split's share of the output, then their sum; three
/// launches instead of one, with `splits` times the cubes.
#[allow(clippy::too_many_arguments)]
fn split_attention(
    q: &CubeTensor,
    keys: &CubeTensor,
    values: &CubeTensor,
    out: &CubeTensor,
    position: &CubeTensor,
    window: usize,
    scale: f32,
    splits: usize,
) {
    let shape = q.meta.shape().clone();
    let (heads, dim) = (shape[1], shape[2]);
    let cache = keys.meta.shape().clone();
    let (kv_heads, capacity) = (cache[0], cache[1]);
    let maxima = empty_like(q, Shape::new([heads * splits]));
    let sums = empty_like(q, Shape::new([heads * splits]));
    let partial = empty_like(q, Shape::new([heads, splits, dim]));
    let grid = CubeCount::Static(heads as u32, splits as u32, 1);
    // SAFETY: cube (head, split) reads the query row of `head`, keys and values of its split's
    // positions (below `start + 1 ≤ capacity` for the `start` that `position` holds, checked
    // by the model) of kv head
    // `head / (heads / kv_heads)`, and writes its own entries of `maxima`, `sums` and
    // `partial`; the sum reads `heads × splits × dim` partial values.
    unsafe {
        attention_split_stats::launch(
            &q.client,
            grid.clone(),
            CubeDim::new_1d(THREADS),
            BufferArg::from_raw_parts(q.handle.clone(), len(q)),
            BufferArg::from_raw_parts(keys.handle.clone(), len(keys)),
            BufferArg::from_raw_parts(maxima.handle.clone(), len(&maxima)),
            BufferArg::from_raw_parts(sums.handle.clone(), len(&sums)),
            heads as u32,
            kv_heads as u32,
            capacity as u32,
            BufferArg::from_raw_parts(position.handle.clone(), 1),
            window as u32,
            scale,
            dim as u32,
        );
        attention_split_values::launch(
            &q.client,
            grid,
            CubeDim::new_1d(THREADS),
            BufferArg::from_raw_parts(q.handle.clone(), len(q)),
            BufferArg::from_raw_parts(keys.handle.clone(), len(keys)),
            BufferArg::from_raw_parts(values.handle.clone(), len(values)),
            BufferArg::from_raw_parts(maxima.handle.clone(), len(&maxima)),
            BufferArg::from_raw_parts(sums.handle.clone(), len(&sums)),
            BufferArg::from_raw_parts(partial.handle.clone(), len(&partial)),
            heads as u32,
            kv_heads as u32,
            capacity as u32,
            BufferArg::from_raw_parts(position.handle.clone(), 1),
            window as u32,
            scale,
            dim as u32,
        );
        let total = (heads * dim) as u32;
        attention_split_sum::launch(
            &q.client,
            grid_of(total.div_ceil(THREADS)),
            CubeDim::new_1d(THREADS),
            BufferArg::from_raw_parts(partial.handle.clone(), len(&partial)),
            BufferArg::from_raw_parts(out.handle.clone(), len(out)),
            splits as u32,
            dim as u32,
            total,
        );
    }
}
