//! [`F16CacheOps`] on the Flex CPU backend: the KV cache in `f16`, and attention read from
//! it in place (decoding steps, and prefills in the matmul path's runs of tokens).
//!
//! A decoding step reads every cached key and value once. Kept in `f32` (the `f16` values
//! widened), they were a fifth of SmolLM2's bytes per step at 512 positions, and burn's
//! products (the `gemm` crate) copied both into packed panels at every step on top of that.
//! Here the cache holds the `f16` values themselves and the loops below read it in place,
//! keeping gemm's arithmetic over the same numbers, so that results are bit for bit those of
//! `q·Kᵀ`, burn's softmax and `P·V` over [`F16CacheOps::f16_cache_read`]'s `f32` tensors
//! (tested in `layers.rs`):
//! - each score is one chain of fused multiply-adds over the head's values, in order, from
//!   zero: gemm's microkernel when `q·Kᵀ` has at least two query rows and more than 256
//!   scores (smaller products take other kernels, see [`attention_applies`]), its depth never
//!   shorter than a head of up to 512 values;
//! - each output value is a chain over the keys, restarted every [`mix_depth`] keys, the
//!   chains added in order, as gemm cuts a long sum.
//!
//! In wasm (`simd128`) the loops are `stampo-quant`'s ([`crate::quant::attention`]), whose
//! chains are unfused (wasm has no fused multiply-add): there the results are not gemm's bit
//! for bit, and the loops run for every step ([`attention_applies`]).
//!
//! Keys are stored in tiles of 16 positions, dimension by dimension ([`F16CacheOps`]), so
//! that one load gives one dimension of 16 keys: each lane is one key's chain, with no
//! transposing (an earlier version over the `f32` cache in burn's layout spent more on
//! shuffles than gemm did on packing, and was reverted).

use std::ops::Range;
use std::sync::Arc;

use burn::backend::Flex;
use burn::backend::flex::FlexTensor;
use burn::backend::tensor::FloatTensor;
use burn::tensor::Device;
use half::f16;

use super::F16CacheOps;
use super::flex::{round16_slice, slice, tensor, values as contiguous, writable};
use super::softmax::softmax_rows;
use crate::quant::pool::Pool;

/// Positions per key tile.
pub const TILE: usize = crate::quant::attention::TILE;

/// Whether a cache of heads of `head_dim` values on `device` is kept in `f16`: on the Flex
/// device where this CPU runs the vector loops (x86-64 with AVX2, FMA and F16C; wasm32 with
/// `simd128`, the browser's CPU path) and heads are whole vectors. Elsewhere the cache stays
/// `f32`.
pub fn f16_cache_applies(head_dim: usize, device: &Device) -> bool {
    crate::device::is_cpu(device)
        && head_dim > 0
        && head_dim.is_multiple_of(TILE)
        && kernels::available()
}

/// Whether [`F16CacheOps::f16_attention`] is the one to run for a step with `rows` query rows
/// per kv head (query heads per kv head times tokens) over `keys` keys. Natively where it
/// gives the matmul path's results: gemm runs `q·Kᵀ` through its microkernel only from two
/// query rows and more than 256 scores (a single row takes its matrix-vector loop, a small
/// product its horizontal kernel, each summing in another order); below that the caller
/// multiplies [`F16CacheOps::f16_cache_read`]'s tensors. In wasm always: its loops are not
/// gemm's bit for bit anyway (unfused), and reading the cache out for the products cost a
/// short context's decoding 6%.
pub fn attention_applies(rows: usize, keys: usize) -> bool {
    cfg!(all(target_arch = "wasm32", target_feature = "simd128"))
        || (rows >= 2 && rows * keys > 256)
}

/// The keys gemm sums in one chain when it multiplies `rows` probability rows by `dim` value
/// columns over `keys` keys (gemm 0.19, `gemm_basic_generic`): at most 512 for products of
/// at most 64 × 64, else the depth its `kernel_params` derives from the L1 cache for the
/// microkernel it runs with AVX2 and FMA (16 × 6 `f32`s): 512 with a 32 KiB 8-way L1, 1,024
/// with a 48 KiB 12-way one, so it is asked of gemm, not assumed.
fn mix_depth(rows: usize, dim: usize, keys: usize) -> usize {
    const SMALL_DEPTH: usize = 512;
    const GEMM_FMA_MR: usize = 16;
    const GEMM_FMA_NR: usize = 6;
    let depth = if rows <= 64 && dim <= 64 {
        keys.min(SMALL_DEPTH)
    } else {
        gemm_common::cache::kernel_params(
            rows,
            dim,
            keys,
            GEMM_FMA_MR,
            GEMM_FMA_NR,
            size_of::<f32>(),
        )
        .kc
    };
    depth.max(1)
}

/// The cache's sizes, read off the values tensor (`[kv_heads, capacity, head_dim]`).
#[derive(Debug, Clone, Copy)]
struct Shape {
    kv_heads: usize,
    capacity: usize,
    dim: usize,
}

impl Shape {
    fn of(values: &FlexTensor) -> Shape {
        let shape = values.layout().shape();
        Shape {
            kv_heads: shape[0],
            capacity: shape[1],
            dim: shape[2],
        }
    }

    /// Where key `position` of kv head `head`, dimension 0, lies in the key tiles; dimension
    /// `d` lies `d · TILE` further.
    fn key_at(self, head: usize, position: usize) -> usize {
        let tiles = self.capacity / TILE;
        ((head * tiles + position / TILE) * self.dim) * TILE + position % TILE
    }

    /// The key tiles of kv head `head`.
    fn head_keys(self, head: usize) -> Range<usize> {
        let len = self.capacity * self.dim;
        head * len..(head + 1) * len
    }

    /// The values of kv head `head`, positions `0..total`.
    fn head_values(self, head: usize, total: usize) -> Range<usize> {
        let at = head * self.capacity * self.dim;
        at..at + total * self.dim
    }
}

/// The tensor's `f16` storage, made contiguous (the caches always are).
fn halves(t: &FlexTensor) -> &[f16] {
    let start = t.layout().start_offset();
    &t.storage::<f16>()[start..]
}

impl F16CacheOps for Flex {
    fn f16_cache_write(
        keys: FloatTensor<Self>,
        values: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        start: usize,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (mut keys, mut values) = (writable(keys), writable(values));
        let shape = Shape::of(&values);
        let (k, _) = contiguous(&k);
        let (v, _) = contiguous(&v);
        let dim = shape.dim.max(1);
        let stored = keys.storage_mut::<f16>();
        for (n, new) in slice(&k).chunks_exact(dim).enumerate() {
            let (token, head) = (n / shape.kv_heads, n % shape.kv_heads);
            let at = shape.key_at(head, start + token);
            for (d, &x) in new.iter().enumerate() {
                stored[at + d * TILE] = f16::from_f32(x);
            }
        }
        let stored = values.storage_mut::<f16>();
        for (n, new) in slice(&v).chunks_exact(dim).enumerate() {
            let (token, head) = (n / shape.kv_heads, n % shape.kv_heads);
            let at = (head * shape.capacity + start + token) * dim;
            for (c, &x) in stored[at..at + dim].iter_mut().zip(new) {
                *c = f16::from_f32(x);
            }
        }
        (keys, values)
    }

    fn f16_cache_read(
        keys: FloatTensor<Self>,
        values: FloatTensor<Self>,
        total: usize,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let shape = Shape::of(&values);
        let (keys, stored) = (halves(&keys), halves(&values));
        let dim = shape.dim;
        let mut k = Vec::with_capacity(shape.kv_heads * total * dim);
        let mut v = Vec::with_capacity(shape.kv_heads * total * dim);
        for head in 0..shape.kv_heads {
            for position in 0..total {
                let at = shape.key_at(head, position);
                k.extend((0..dim).map(|d| keys[at + d * TILE].to_f32()));
            }
            v.extend(
                stored[shape.head_values(head, total)]
                    .iter()
                    .map(|x| x.to_f32()),
            );
        }
        let dims = vec![shape.kv_heads, total, dim];
        (tensor(k, dims.clone()), tensor(v, dims))
    }

    fn f16_attention(
        q: FloatTensor<Self>,
        keys: FloatTensor<Self>,
        values: FloatTensor<Self>,
        start: usize,
        window: usize,
        scale: f32,
    ) -> FloatTensor<Self> {
        let step = Arc::new(Step::new(q, keys, values, start, window, scale));
        let pool = Pool::global();
        let units = step.units(pool.threads());
        let parts = if pool.threads() >= 2 && units.len() >= 2 {
            let (job, units) = (Arc::clone(&step), units.clone());
            pool.map(units.len(), Arc::new(move |i| job.run(&units[i])))
        } else {
            units.iter().map(|unit| step.run(unit)).collect()
        };
        // Each unit's rows are (query head, token) pairs, heads outer.
        let (tokens, heads, dim) = (step.tokens, step.heads, step.shape.dim);
        let mut out = vec![0.0f32; tokens * heads * dim];
        for (unit, part) in units.iter().zip(&parts) {
            for (r, row) in part.chunks_exact(dim).enumerate() {
                let head = unit.kv_head * step.group + unit.heads.start + r / tokens;
                let at = ((r % tokens) * heads + head) * dim;
                out[at..at + dim].copy_from_slice(row);
            }
        }
        tensor(out, vec![tokens, heads * dim])
    }
}

/// One step's operands, shared by the threads that take its units.
struct Step {
    /// `[tokens, heads, dim]`, contiguous.
    q: FlexTensor,
    keys: FlexTensor,
    values: FlexTensor,
    shape: Shape,
    tokens: usize,
    heads: usize,
    group: usize,
    start: usize,
    window: usize,
    scale: f32,
}

/// The query heads `heads` (counted within their group) of kv head `kv_head`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Unit {
    kv_head: usize,
    heads: Range<usize>,
}

impl Step {
    fn new(
        q: FlexTensor,
        keys: FlexTensor,
        values: FlexTensor,
        start: usize,
        window: usize,
        scale: f32,
    ) -> Step {
        let (q, dims) = contiguous(&q);
        let shape = Shape::of(&values);
        let (tokens, heads) = (dims[0], dims[1]);
        Step {
            q,
            keys,
            values,
            shape,
            tokens,
            heads,
            group: heads / shape.kv_heads.max(1),
            start,
            window,
            scale,
        }
    }

    /// The work cut for `threads` threads: a kv head each (its keys and values read once for
    /// its whole group) where the kv heads share out evenly, or in a decoding step where
    /// there are enough of them (reading a long cache once a head matters more there than
    /// the balance); else each group's query heads in parts: `threads` of them where there
    /// are fewer kv heads (Gemma 3 has one), one a query head where the kv heads share out
    /// unevenly (SmolLM2's three on two threads were 2 + 1 heads' work).
    fn units(&self, threads: usize) -> Vec<Unit> {
        let kv_heads = self.shape.kv_heads;
        let parts = match threads {
            0 | 1 => 1,
            _ if kv_heads.is_multiple_of(threads) => 1,
            _ if kv_heads >= threads && self.tokens == 1 => 1,
            _ if kv_heads >= threads => self.group,
            _ => threads.min(self.group),
        };
        let per = self.group.div_ceil(parts.max(1)).max(1);
        (0..self.shape.kv_heads)
            .flat_map(|kv_head| {
                (0..self.group).step_by(per).map(move |g| Unit {
                    kv_head,
                    heads: g..(g + per).min(self.group),
                })
            })
            .collect()
    }

    /// The unit's output rows, `[heads, tokens, dim]`.
    fn run(&self, unit: &Unit) -> Vec<f32> {
        let (shape, dim, tokens) = (self.shape, self.shape.dim, self.tokens);
        let total = self.start + tokens;
        let rows = unit.heads.len() * tokens;
        let q = slice(&self.q);
        let mut queries = Vec::with_capacity(rows * dim);
        for g in unit.heads.clone() {
            let head = unit.kv_head * self.group + g;
            for t in 0..tokens {
                let at = (t * self.heads + head) * dim;
                queries.extend_from_slice(&q[at..at + dim]);
            }
        }
        round16_slice(&mut queries);
        let keys = &halves(&self.keys)[shape.head_keys(unit.kv_head)];
        let values = &halves(&self.values)[shape.head_values(unit.kv_head, total)];

        // The keys each row sees: later ones (and with a window, older ones) are hidden, so
        // neither loop reads them.
        let seen: Vec<Range<usize>> = (0..rows)
            .map(|r| {
                let end = self.start + r % tokens + 1;
                match self.window {
                    0 => 0..end,
                    window => end.saturating_sub(window)..end,
                }
            })
            .collect();
        // Scores, then in place the probabilities of the keys each row sees, and zero for
        // the others (the vector loops compute and read whole tiles of keys).
        let mut probs = vec![0.0f32; rows * total];
        kernels::scores(&queries, keys, dim, &seen, &mut probs);
        for (row, seen) in probs.chunks_exact_mut(total).zip(&seen) {
            row[..seen.start].fill(0.0);
            row[seen.end..].fill(0.0);
        }
        softmax_rows(&mut probs, total, &seen, self.scale);

        let mut out = vec![0.0f32; rows * dim];
        // The matmul path multiplies the whole group's rows at once: its depth is the group's.
        let depth = mix_depth(self.group * tokens, dim, total);
        kernels::mix(&probs, values, dim, depth, &seen, &mut out);
        out
    }
}

/// The two loops, vectorised on x86-64, portable elsewhere (and as the vector ones' check).
///
/// Each row `r` reads only the keys it sees, `seen[r]`: the others are hidden (masked to
/// −∞ before softmax, so their probabilities are exactly zero). Leaving them out changes no
/// bit of a result: a chain from zero that adds `0 · v` (`±0`) is unchanged (it never holds
/// −0), and so is a sum that adds a chain of zeros.
mod kernels {
    use std::ops::Range;

    use half::f16;

    use super::TILE;

    /// Whether the vector loops run here.
    pub(super) fn available() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            use std::sync::OnceLock;
            static AVAILABLE: OnceLock<bool> = OnceLock::new();
            *AVAILABLE.get_or_init(|| {
                is_x86_feature_detected!("avx2")
                    && is_x86_feature_detected!("fma")
                    && is_x86_feature_detected!("f16c")
            })
        }
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        return true;
        #[cfg(not(any(
            target_arch = "x86_64",
            all(target_arch = "wasm32", target_feature = "simd128")
        )))]
        false
    }

    /// `out[r][k] = Σ_d q[r][d] · key_k[d]` for the rows of `q` (`[rows, dim]`) and the keys
    /// `seen[r]` of one kv head's tiles, into `out` (`[rows, n]`): each a chain of fused
    /// multiply-adds over `d` in order, from zero. Other scores are left as they are or
    /// computed (they are masked afterwards).
    pub(super) fn scores(
        q: &[f32],
        keys: &[f16],
        dim: usize,
        seen: &[Range<usize>],
        out: &mut [f32],
    ) {
        #[cfg(target_arch = "x86_64")]
        if available() {
            // SAFETY: AVX2, FMA and F16C are present (`available`).
            return unsafe { super::x86::scores(q, keys, dim, seen, out) };
        }
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        return scores_simd128(q, keys, dim, seen, out);
        #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
        scores_portable(q, keys, dim, seen, out);
    }

    /// [`scores`] in wasm: `stampo-quant`'s `simd128` loop over blocks of rows, each over the
    /// whole tiles of the keys its rows see. Its chains are unfused (wasm has no fused
    /// multiply-add), so here a score is not gemm's bit for bit (nor is wasm's gemm x86's).
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    fn scores_simd128(q: &[f32], keys: &[f16], dim: usize, seen: &[Range<usize>], out: &mut [f32]) {
        let n = out.len() / seen.len().max(1);
        // The tiles read must lie in the cache (the last may hold stale positions past `n`).
        let cached = keys.len() / (dim * TILE).max(1);
        for (r0, rows, seen) in blocks(seen, n) {
            let tiles = seen.start / TILE..seen.end.div_ceil(TILE).min(cached);
            let (q, out) = (&q[r0 * dim..], &mut out[r0 * n..]);
            crate::quant::attention::scores_block(q, rows, keys, dim, n, tiles, out);
        }
    }

    /// The rows cut four at a time, each block with the keys any of its rows sees (below `n`).
    pub(super) fn blocks(
        seen: &[Range<usize>],
        n: usize,
    ) -> impl Iterator<Item = (usize, usize, Range<usize>)> + '_ {
        (0..seen.len()).step_by(4).map(move |r0| {
            let rows = &seen[r0..(r0 + 4).min(seen.len())];
            let end = rows.iter().map(|r| r.end).max().unwrap_or(0).min(n);
            let first = rows.iter().map(|r| r.start).min().unwrap_or(0).min(end);
            (r0, rows.len(), first..end)
        })
    }

    // In wasm the `simd128` loop always runs; the portable one is the tests' reference.
    #[cfg_attr(
        all(target_arch = "wasm32", target_feature = "simd128"),
        allow(dead_code)
    )]
    pub(super) fn scores_portable(
        q: &[f32],
        keys: &[f16],
        dim: usize,
        seen: &[Range<usize>],
        out: &mut [f32],
    ) {
        let n = out.len() / seen.len().max(1);
        let rows = q.chunks_exact(dim).zip(out.chunks_exact_mut(n)).zip(seen);
        for ((row, out), seen) in rows {
            let seen = seen.start.min(n)..seen.end.min(n);
            for (k, out) in seen.clone().zip(&mut out[seen]) {
                let at = (k / TILE * dim) * TILE + k % TILE;
                *out = row.iter().enumerate().fold(0.0f32, |acc, (d, &x)| {
                    x.mul_add(keys[at + d * TILE].to_f32(), acc)
                });
            }
        }
    }

    /// `out[r][d] = Σ_k p[r][k] · values[k][d]` for rows `p` (`[rows, n]`) and `values`
    /// (`[n, dim]`) into `out` (`[rows, dim]`): chains of fused multiply-adds over `k` in
    /// order, from zero, restarted every `depth` keys, the chains added in order; the keys
    /// outside `seen[r]` left out (their probabilities are zero).
    pub(super) fn mix(
        p: &[f32],
        values: &[f16],
        dim: usize,
        depth: usize,
        seen: &[Range<usize>],
        out: &mut [f32],
    ) {
        #[cfg(target_arch = "x86_64")]
        if available() && dim.is_multiple_of(TILE) {
            // SAFETY: AVX2, FMA and F16C are present (`available`), `dim` a multiple of 16.
            return unsafe { super::x86::mix(p, values, dim, depth, seen, out) };
        }
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        if dim.is_multiple_of(TILE) {
            return mix_simd128(p, values, dim, depth, seen, out);
        }
        mix_portable(p, values, dim, depth, seen, out);
    }

    /// [`mix`] in wasm, `dim` a multiple of 16: `stampo-quant`'s `simd128` loop over blocks of
    /// rows and gemm's chains of keys, unfused as [`scores_simd128`]'s.
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    fn mix_simd128(
        p: &[f32],
        values: &[f16],
        dim: usize,
        depth: usize,
        seen: &[Range<usize>],
        out: &mut [f32],
    ) {
        let n = values.len() / dim;
        for (r0, rows, seen) in blocks(seen, n) {
            let (p, out) = (&p[r0 * n..], &mut out[r0 * dim..]);
            for (c, keys) in chains(seen, depth).enumerate() {
                crate::quant::attention::mix_block(p, rows, values, dim, n, keys, c > 0, out);
            }
        }
    }

    pub(super) fn mix_portable(
        p: &[f32],
        values: &[f16],
        dim: usize,
        depth: usize,
        seen: &[Range<usize>],
        out: &mut [f32],
    ) {
        let n = values.len() / dim.max(1);
        let rows = p
            .chunks_exact(n.max(1))
            .zip(out.chunks_exact_mut(dim))
            .zip(seen);
        for ((row, out), seen) in rows {
            for (d, out) in out.iter_mut().enumerate() {
                let mut written = false;
                for keys in chains(seen.start..seen.end.min(n), depth) {
                    let chain = keys.fold(0.0f32, |acc, k| {
                        row[k].mul_add(values[k * dim + d].to_f32(), acc)
                    });
                    *out = if written { *out + chain } else { chain };
                    written = true;
                }
            }
        }
    }

    /// The keys of `seen` cut where gemm restarts its chains (every `depth` keys from 0).
    pub(super) fn chains(seen: Range<usize>, depth: usize) -> impl Iterator<Item = Range<usize>> {
        let depth = depth.max(1);
        (seen.start / depth * depth..seen.end)
            .step_by(depth)
            .map(move |first| first.max(seen.start)..(first + depth).min(seen.end))
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::ops::Range;

    use half::f16;

    use super::TILE;
    use super::kernels::{blocks, chains};

    /// Eight `f16`s from `at`, widened.
    ///
    /// # Safety
    /// `v[at..at + 8]` is in bounds.
    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn load8(v: &[f16], at: usize) -> __m256 {
        debug_assert!(at + 8 <= v.len());
        // SAFETY: eight readable `f16`s (the caller's bound); loads are unaligned.
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(v.as_ptr().add(at).cast())) }
    }

    /// [`super::kernels::scores`], a block of rows over whole tiles.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn scores(
        q: &[f32],
        keys: &[f16],
        dim: usize,
        seen: &[Range<usize>],
        out: &mut [f32],
    ) {
        let n = out.len() / seen.len().max(1);
        // The tiles read must lie in the cache (the last may hold stale positions past `n`).
        let cached = keys.len() / (dim * TILE).max(1);
        for (r0, rows, seen) in blocks(seen, n) {
            let tiles = seen.start / TILE..seen.end.div_ceil(TILE).min(cached);
            let (q, out) = (&q[r0 * dim..], &mut out[r0 * n..]);
            match rows {
                1 => scores_rows::<1>(q, keys, dim, n, tiles, out),
                2 => scores_rows::<2>(q, keys, dim, n, tiles, out),
                3 => scores_rows::<3>(q, keys, dim, n, tiles, out),
                _ => scores_rows::<4>(q, keys, dim, n, tiles, out),
            }
        }
    }

    /// `R` rows of scores over the tiles `tiles` (16 keys each).
    #[target_feature(enable = "avx2,fma,f16c")]
    fn scores_rows<const R: usize>(
        q: &[f32],
        keys: &[f16],
        dim: usize,
        n: usize,
        tiles: Range<usize>,
        out: &mut [f32],
    ) {
        let q = &q[..R * dim];
        for tile in tiles {
            let base = tile * dim * TILE;
            let tile_keys = &keys[base..base + dim * TILE];
            let mut acc = [[_mm256_setzero_ps(); 2]; R];
            for d in 0..dim {
                // SAFETY: `tile_keys` holds `dim · 16` values.
                let (lo, hi) =
                    unsafe { (load8(tile_keys, d * TILE), load8(tile_keys, d * TILE + 8)) };
                for (r, acc) in acc.iter_mut().enumerate() {
                    let x = _mm256_set1_ps(q[r * dim + d]);
                    acc[0] = _mm256_fmadd_ps(x, lo, acc[0]);
                    acc[1] = _mm256_fmadd_ps(x, hi, acc[1]);
                }
            }
            let first = tile * TILE;
            let valid = (n - first.min(n)).min(TILE);
            for (r, acc) in acc.iter().enumerate() {
                let mut lanes = [0.0f32; TILE];
                // SAFETY: `lanes` holds 16 values; stores are unaligned.
                unsafe {
                    _mm256_storeu_ps(lanes.as_mut_ptr(), acc[0]);
                    _mm256_storeu_ps(lanes.as_mut_ptr().add(8), acc[1]);
                }
                let at = r * n + first;
                out[at..at + valid].copy_from_slice(&lanes[..valid]);
            }
        }
    }

    /// [`super::kernels::mix`], `dim` a multiple of 16.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn mix(
        p: &[f32],
        values: &[f16],
        dim: usize,
        depth: usize,
        seen: &[Range<usize>],
        out: &mut [f32],
    ) {
        let n = values.len() / dim;
        for (r0, rows, seen) in blocks(seen, n) {
            let (p, out) = (&p[r0 * n..], &mut out[r0 * dim..]);
            match rows {
                1 => mix_rows::<1>(p, values, dim, n, depth, seen, out),
                2 => mix_rows::<2>(p, values, dim, n, depth, seen, out),
                3 => mix_rows::<3>(p, values, dim, n, depth, seen, out),
                _ => mix_rows::<4>(p, values, dim, n, depth, seen, out),
            }
        }
    }

    /// `R` rows of [`mix`] over the keys `seen`, sixteen output values at a time.
    #[target_feature(enable = "avx2,fma,f16c")]
    fn mix_rows<const R: usize>(
        p: &[f32],
        values: &[f16],
        dim: usize,
        n: usize,
        depth: usize,
        seen: Range<usize>,
        out: &mut [f32],
    ) {
        let p = &p[..R * n];
        let values = &values[..n * dim];
        for d0 in (0..dim).step_by(TILE) {
            for (c, keys) in chains(seen.clone(), depth).enumerate() {
                let mut acc = [[_mm256_setzero_ps(); 2]; R];
                for k in keys {
                    let at = k * dim + d0;
                    // SAFETY: `k < n` and `d0 + 16 <= dim`, so both lie in `values`.
                    let (lo, hi) = unsafe { (load8(values, at), load8(values, at + 8)) };
                    for (r, acc) in acc.iter_mut().enumerate() {
                        let x = _mm256_set1_ps(p[r * n + k]);
                        acc[0] = _mm256_fmadd_ps(x, lo, acc[0]);
                        acc[1] = _mm256_fmadd_ps(x, hi, acc[1]);
                    }
                }
                for (r, acc) in acc.iter().enumerate() {
                    let at = r * dim + d0;
                    let o = &mut out[at..at + TILE];
                    // SAFETY: `o` holds 16 values; loads and stores are unaligned.
                    unsafe {
                        let (lo, hi) = match c {
                            0 => (acc[0], acc[1]),
                            _ => (
                                _mm256_add_ps(_mm256_loadu_ps(o.as_ptr()), acc[0]),
                                _mm256_add_ps(_mm256_loadu_ps(o.as_ptr().add(8)), acc[1]),
                            ),
                        };
                        _mm256_storeu_ps(o.as_mut_ptr(), lo);
                        _mm256_storeu_ps(o.as_mut_ptr().add(8), hi);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fused::flex::round16;

    /// Deterministic `f16` values in −2…2 and `f32` ones in −1…1.
    fn halves_from(n: usize, seed: u32) -> Vec<f16> {
        (0..n as u32)
            .map(|i| {
                let x = (i ^ seed).wrapping_mul(2_654_435_761) >> 8;
                f16::from_f32(x as f32 / (1 << 22) as f32 - 2.0)
            })
            .collect()
    }

    fn floats(n: usize, seed: u32) -> Vec<f32> {
        (0..n as u32)
            .map(|i| {
                let x = (i ^ seed).wrapping_mul(2_654_435_761) >> 8;
                round16(x as f32 / (1 << 23) as f32 - 1.0)
            })
            .collect()
    }

    #[test]
    fn vector_loops_equal_the_portable_ones_bit_for_bit() {
        if !kernels::available() {
            eprintln!("SKIPPED: this CPU lacks AVX2, FMA or F16C; the portable loops only");
            return;
        }
        // (rows, head dim, keys, depth, tokens, window): rows are (query head, token) pairs.
        for (rows, dim, n, depth, tokens, window) in [
            (3usize, 64usize, 601usize, 512usize, 1usize, usize::MAX),
            (7, 64, 40, 512, 1, usize::MAX),
            (4, 256, 1100, 1024, 1, usize::MAX),
            (4, 256, 1100, 1024, 1, 512),
            (1, 16, 17, 5, 1, 3),
            (3 * 37, 64, 600, 512, 37, usize::MAX),
            (2 * 9, 256, 1030, 300, 9, 700),
            (2 * 9, 64, 1030, 512, 9, 20),
        ] {
            // Each row sees the keys up to its own token's, the last `window` of them.
            let seen: Vec<Range<usize>> = (0..rows)
                .map(|r| {
                    let end = n - tokens + 1 + r % tokens;
                    end.saturating_sub(window)..end
                })
                .collect();
            let tiles = n.div_ceil(TILE);
            let keys = halves_from(tiles * TILE * dim, 7);
            let q = floats(rows * dim, 3);
            let (mut got, mut want) = (vec![0.0; rows * n], vec![0.0; rows * n]);
            kernels::scores(&q, &keys, dim, &seen, &mut got);
            kernels::scores_portable(&q, &keys, dim, &seen, &mut want);
            for (r, (got, want)) in got.chunks(n).zip(want.chunks(n)).enumerate() {
                for k in seen[r].clone() {
                    let (a, b) = (got[k], want[k]);
                    let at = format!("scores {rows}×{dim}×{n}, row {r} key {k}");
                    assert_eq!(a.to_bits(), b.to_bits(), "{at}");
                }
            }
            // Probabilities are zero past the keys a row sees, as softmax leaves hidden keys.
            let values = halves_from(n * dim, 11);
            let mut p = floats(rows * n, 5);
            for (r, row) in p.chunks_mut(n).enumerate() {
                row[..seen[r].start].fill(0.0);
                row[seen[r].end..].fill(0.0);
            }
            let mix = |seen: &[Range<usize>], vector: bool| {
                let mut out = vec![0.0f32; rows * dim];
                match vector {
                    true => kernels::mix(&p, &values, dim, depth, seen, &mut out),
                    false => kernels::mix_portable(&p, &values, dim, depth, seen, &mut out),
                }
                out
            };
            // Every key, as gemm sums them: skipping the zero terms changes no bit.
            let all = mix(&vec![0..n; rows], false);
            for (name, got) in [
                ("vector", mix(&seen, true)),
                ("portable", mix(&seen, false)),
            ] {
                for (i, (a, b)) in got.iter().zip(&all).enumerate() {
                    let at = format!("{name} mix {rows}×{dim}×{n}, value {i}");
                    assert_eq!(a.to_bits(), b.to_bits(), "{at}");
                }
            }
        }
    }
}
