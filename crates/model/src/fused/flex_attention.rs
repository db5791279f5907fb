//! [`FusedAttention`] on the Flex CPU backend: attention read straight from the KV cache.
//!
//! burn's CPU products (the `gemm` crate) copy both caches into packed panels at every
//! decoding step, and that copy was about 40% of attention's time. These loops read the cache
//! where it is and keep gemm's arithmetic, so the results are bit for bit those of
//! `q·Kᵀ`, burn's softmax and `P·V` as burn computes them (tested in `layers.rs`):
//! - each score is one chain of fused multiply-adds over the head's values, in order, from
//!   zero: gemm's microkernel accumulates so when `q·Kᵀ` is large enough for it (more than
//!   256 scores and at least two query rows; smaller products take other kernels);
//! - each output value is a chain over the keys, restarted every [`depth_chunk`] keys, the
//!   chains added in order, as gemm cuts a long sum into panels.
//!
//! Queries and probabilities are rounded to `f16` first, as on the matmul path.

use std::ops::Range;
use std::sync::Arc;

use burn::backend::Flex;
use burn::backend::flex::FlexTensor;
use burn::backend::ops::ActivationOps;
use burn::backend::tensor::FloatTensor;

use super::FusedAttention;
use super::flex::{round16, slice, tensor, values as contiguous};
use crate::quant::pool::Pool;

impl FusedAttention for Flex {
    fn fused_attention(
        q: FloatTensor<Self>,
        keys: FloatTensor<Self>,
        values: FloatTensor<Self>,
        start: usize,
        window: usize,
        scale: f32,
    ) -> FloatTensor<Self> {
        let job = Job::new(q, keys, values, start, window, scale);
        let (tokens, heads, dim) = (job.tokens, job.heads, job.dim);
        let pool = Pool::global();
        let units = job.units(pool.threads());
        let parts = if pool.threads() >= 2 && units.len() >= 2 {
            let units = units.clone();
            let job = job.clone();
            pool.map(units.len(), Arc::new(move |i| job.run(&units[i])))
        } else {
            units.iter().map(|unit| job.run(unit)).collect()
        };
        // Each unit's rows are (query head, token) pairs, heads outer.
        let mut out = vec![0.0f32; tokens * heads * dim];
        for (unit, part) in units.iter().zip(&parts) {
            for (r, row) in part.chunks_exact(dim).enumerate() {
                let head = unit.kv_head * job.group + unit.heads.start + r / tokens;
                let at = ((r % tokens) * heads + head) * dim;
                out[at..at + dim].copy_from_slice(row);
            }
        }
        tensor(out, vec![tokens, heads * dim])
    }
}

/// One attention call's operands, shared by the threads that take its units.
#[derive(Clone)]
struct Job {
    /// `[tokens, heads, dim]`, contiguous.
    q: FlexTensor,
    /// `[kv_heads, capacity, dim]`, contiguous.
    keys: FlexTensor,
    /// `[kv_heads, capacity, dim]`, contiguous.
    values: FlexTensor,
    tokens: usize,
    heads: usize,
    dim: usize,
    kv_heads: usize,
    group: usize,
    capacity: usize,
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

impl Job {
    fn new(
        q: FlexTensor,
        keys: FlexTensor,
        values: FlexTensor,
        start: usize,
        window: usize,
        scale: f32,
    ) -> Job {
        let (q, shape) = contiguous(&q);
        let (keys, cache) = contiguous(&keys);
        let (values, _) = contiguous(&values);
        let (tokens, heads, dim) = (shape[0], shape[1], shape[2]);
        let (kv_heads, capacity) = (cache[0], cache[1]);
        Job {
            q,
            keys,
            values,
            tokens,
            heads,
            dim,
            kv_heads,
            group: heads / kv_heads.max(1),
            capacity,
            start,
            window,
            scale,
        }
    }

    /// The work cut for `threads` threads: a kv head each (its keys read once for its whole
    /// group) where there are enough kv heads, else each group's query heads in `threads`
    /// parts (Gemma 3 has one kv head).
    fn units(&self, threads: usize) -> Vec<Unit> {
        let parts = match threads {
            0 | 1 => 1,
            _ if self.kv_heads >= threads => 1,
            _ => threads.min(self.group),
        };
        let per = self.group.div_ceil(parts.max(1)).max(1);
        (0..self.kv_heads)
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
        let (tokens, dim) = (self.tokens, self.dim);
        let total = self.start + tokens;
        let q = slice(&self.q);
        let rows = unit.heads.len() * tokens;
        let mut queries = Vec::with_capacity(rows * dim);
        for g in unit.heads.clone() {
            let head = unit.kv_head * self.group + g;
            for t in 0..tokens {
                let at = (t * self.heads + head) * dim;
                queries.extend(q[at..at + dim].iter().map(|&x| round16(x)));
            }
        }
        let cache =
            unit.kv_head * self.capacity * dim..(unit.kv_head * self.capacity + total) * dim;
        let keys = &slice(&self.keys)[cache.clone()];
        let values = &slice(&self.values)[cache];

        let mut scores = vec![0.0f32; rows * total];
        kernels::scores(&queries, keys, dim, &mut scores);
        for (r, row) in scores.chunks_exact_mut(total).enumerate() {
            let position = self.start + r % tokens;
            for (k, s) in row.iter_mut().enumerate() {
                let hidden = k > position || (self.window > 0 && position - k >= self.window);
                *s = if hidden {
                    f32::NEG_INFINITY
                } else {
                    *s * self.scale
                };
            }
        }
        let probs = Flex::softmax(tensor(scores, vec![1, rows, total]), 2);
        let (probs, _) = contiguous(&probs);
        let probs: Vec<f32> = slice(&probs).iter().map(|&p| round16(p)).collect();

        let mut out = vec![0.0f32; rows * dim];
        let chunk = depth_chunk(total, dim, rows);
        kernels::mix(&probs, values, dim, chunk, &mut out);
        out
    }
}

/// The keys gemm sums in one chain when it multiplies `rows` probability rows by `dim`
/// value columns over `keys` keys (gemm 0.19, `gemm_basic_generic`): up to 512 for
/// products of at most 64 × 64, the last chain shorter; else `keys` cut into equal chains no
/// longer than the depth its `kernel_params` derives from the L1 cache for the microkernel
/// it runs with AVX2 and FMA (16 × 6 `f32`s). That depth differs between CPUs (512 with a
/// 32 KiB 8-way L1, 1,024 with a 48 KiB 12-way one), so it is asked of gemm, not assumed.
fn depth_chunk(keys: usize, dim: usize, rows: usize) -> usize {
    const SMALL_DEPTH: usize = 512;
    const GEMM_FMA_MR: usize = 16;
    const GEMM_FMA_NR: usize = 6;
    if keys == 0 {
        return 1;
    }
    if dim <= 64 && rows <= 64 {
        keys.min(SMALL_DEPTH)
    } else {
        let params = gemm_common::cache::kernel_params(
            rows,
            dim,
            keys,
            GEMM_FMA_MR,
            GEMM_FMA_NR,
            size_of::<f32>(),
        );
        params.kc.max(1)
    }
}

/// Whether [`FusedAttention`] on the Flex device gives the matmul path's results for these
/// sizes (see the module's note) and runs its vector loops here.
pub fn flex_attention_applies(rows: usize, keys: usize, dim: usize) -> bool {
    rows >= 2 && rows * keys > 256 && kernels::vectorised(dim)
}

mod kernels {
    /// Whether the vector loops run for heads of `dim` values (else the portable ones do).
    pub(super) fn vectorised(dim: usize) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            crate::quant::dot::has_avx2() && dim.is_multiple_of(16)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = dim;
            false
        }
    }

    /// `out[r][k] = Σ_d q[r][d] · keys[k][d]` for rows `q` (`[rows, dim]`) and `keys`
    /// (`[n, dim]`) into `out` (`[rows, n]`): each a chain of fused multiply-adds over `d` in
    /// order, from zero.
    pub(super) fn scores(q: &[f32], keys: &[f32], dim: usize, out: &mut [f32]) {
        let n = keys.len() / dim.max(1);
        #[cfg(target_arch = "x86_64")]
        if vectorised(dim) {
            // SAFETY: AVX2 and FMA are present (`vectorised`).
            let done = unsafe { super::x86::scores(q, keys, dim, out) };
            return scores_portable(q, keys, dim, out, done..n);
        }
        scores_portable(q, keys, dim, out, 0..n);
    }

    /// [`scores`] for the keys `range`, one value at a time.
    fn scores_portable(
        q: &[f32],
        keys: &[f32],
        dim: usize,
        out: &mut [f32],
        range: std::ops::Range<usize>,
    ) {
        let n = keys.len() / dim.max(1);
        for (row, out) in q.chunks_exact(dim).zip(out.chunks_exact_mut(n)) {
            for k in range.clone() {
                let key = &keys[k * dim..(k + 1) * dim];
                out[k] = row
                    .iter()
                    .zip(key)
                    .fold(0.0f32, |acc, (&a, &b)| a.mul_add(b, acc));
            }
        }
    }

    /// `out[r][d] = Σ_k p[r][k] · values[k][d]` for rows `p` (`[rows, n]`) and `values`
    /// (`[n, dim]`) into `out` (`[rows, dim]`): chains of fused multiply-adds over `k` in
    /// order, from zero, restarted every `chunk` keys, the chains added in order.
    pub(super) fn mix(p: &[f32], values: &[f32], dim: usize, chunk: usize, out: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if vectorised(dim) {
            // SAFETY: AVX2 and FMA are present (`vectorised`), `dim` a multiple of 16.
            return unsafe { super::x86::mix(p, values, dim, chunk, out) };
        }
        let n = values.len() / dim.max(1);
        for (row, out) in p.chunks_exact(n.max(1)).zip(out.chunks_exact_mut(dim)) {
            for (d, out) in out.iter_mut().enumerate() {
                for (c, keys) in (0..n).step_by(chunk.max(1)).enumerate() {
                    let chain = (keys..(keys + chunk).min(n))
                        .fold(0.0f32, |acc, k| row[k].mul_add(values[k * dim + d], acc));
                    *out = if c == 0 { chain } else { *out + chain };
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// [`super::kernels::scores`] for the keys in whole blocks of 16; returns how many keys
    /// it did.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn scores(q: &[f32], keys: &[f32], dim: usize, out: &mut [f32]) -> usize {
        let n = keys.len() / dim;
        let rows = q.len() / dim;
        let mut r0 = 0;
        while r0 < rows {
            let take = (rows - r0).min(4);
            let (q, out) = (&q[r0 * dim..], &mut out[r0 * n..]);
            match take {
                1 => scores_rows::<1>(q, keys, dim, n, out),
                2 => scores_rows::<2>(q, keys, dim, n, out),
                3 => scores_rows::<3>(q, keys, dim, n, out),
                _ => scores_rows::<4>(q, keys, dim, n, out),
            }
            r0 += take;
        }
        n / 16 * 16
    }

    /// `R` rows of scores over the first `n / 16 · 16` keys. Sixteen keys at a time: their
    /// values are transposed eight dimensions at a time, so that each lane is one key's chain.
    #[target_feature(enable = "avx2,fma")]
    fn scores_rows<const R: usize>(q: &[f32], keys: &[f32], dim: usize, n: usize, out: &mut [f32]) {
        for k0 in (0..n / 16 * 16).step_by(16) {
            let mut acc = [[_mm256_setzero_ps(); 2]; R];
            for d0 in (0..dim).step_by(8) {
                let block = |first: usize| {
                    transpose(std::array::from_fn(|i| {
                        let at = (first + i) * dim + d0;
                        load8(&keys[at..at + 8])
                    }))
                };
                // One block of eight keys after the other: sixteen registers hold a block
                // and the accumulators.
                for half in 0..2 {
                    let t = block(k0 + 8 * half);
                    for (i, t) in t.iter().enumerate() {
                        for (r, acc) in acc.iter_mut().enumerate() {
                            let x = _mm256_set1_ps(q[r * dim + d0 + i]);
                            acc[half] = _mm256_fmadd_ps(x, *t, acc[half]);
                        }
                    }
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                let at = r * n + k0;
                store8(&mut out[at..at + 8], acc[0]);
                store8(&mut out[at + 8..at + 16], acc[1]);
            }
        }
    }

    /// [`super::kernels::mix`], `dim` a multiple of 16.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn mix(p: &[f32], values: &[f32], dim: usize, chunk: usize, out: &mut [f32]) {
        let n = values.len() / dim;
        let rows = out.len() / dim;
        let mut r0 = 0;
        while r0 < rows {
            let take = (rows - r0).min(4);
            let (p, out) = (&p[r0 * n..], &mut out[r0 * dim..]);
            match take {
                1 => mix_rows::<1>(p, values, dim, n, chunk, out),
                2 => mix_rows::<2>(p, values, dim, n, chunk, out),
                3 => mix_rows::<3>(p, values, dim, n, chunk, out),
                _ => mix_rows::<4>(p, values, dim, n, chunk, out),
            }
            r0 += take;
        }
    }

    /// `R` rows of [`mix`], sixteen output values at a time.
    #[target_feature(enable = "avx2,fma")]
    fn mix_rows<const R: usize>(
        p: &[f32],
        values: &[f32],
        dim: usize,
        n: usize,
        chunk: usize,
        out: &mut [f32],
    ) {
        for d0 in (0..dim).step_by(16) {
            for (c, k0) in (0..n).step_by(chunk.max(1)).enumerate() {
                let mut acc = [[_mm256_setzero_ps(); 2]; R];
                for k in k0..(k0 + chunk).min(n) {
                    let at = k * dim + d0;
                    let (v0, v1) = (load8(&values[at..at + 8]), load8(&values[at + 8..at + 16]));
                    for (r, acc) in acc.iter_mut().enumerate() {
                        let x = _mm256_set1_ps(p[r * n + k]);
                        acc[0] = _mm256_fmadd_ps(x, v0, acc[0]);
                        acc[1] = _mm256_fmadd_ps(x, v1, acc[1]);
                    }
                }
                for (r, acc) in acc.iter().enumerate() {
                    for (h, &chain) in acc.iter().enumerate() {
                        let at = r * dim + d0 + 8 * h;
                        let sum = match c {
                            0 => chain,
                            _ => _mm256_add_ps(load8(&out[at..at + 8]), chain),
                        };
                        store8(&mut out[at..at + 8], sum);
                    }
                }
            }
        }
    }

    #[target_feature(enable = "avx2")]
    fn load8(v: &[f32]) -> __m256 {
        let v: &[f32; 8] = v.try_into().expect("eight values");
        // SAFETY: eight readable values.
        unsafe { _mm256_loadu_ps(v.as_ptr()) }
    }

    #[target_feature(enable = "avx2")]
    fn store8(v: &mut [f32], x: __m256) {
        let v: &mut [f32; 8] = v.try_into().expect("eight values");
        // SAFETY: eight writable values.
        unsafe { _mm256_storeu_ps(v.as_mut_ptr(), x) }
    }

    /// The 8 × 8 transpose: lane `j` of result `i` is lane `i` of row `j`.
    #[target_feature(enable = "avx2")]
    fn transpose(r: [__m256; 8]) -> [__m256; 8] {
        let t0 = _mm256_unpacklo_ps(r[0], r[1]);
        let t1 = _mm256_unpackhi_ps(r[0], r[1]);
        let t2 = _mm256_unpacklo_ps(r[2], r[3]);
        let t3 = _mm256_unpackhi_ps(r[2], r[3]);
        let t4 = _mm256_unpacklo_ps(r[4], r[5]);
        let t5 = _mm256_unpackhi_ps(r[4], r[5]);
        let t6 = _mm256_unpacklo_ps(r[6], r[7]);
        let t7 = _mm256_unpackhi_ps(r[6], r[7]);
        let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
        let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
        let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
        let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
        let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
        let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
        let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
        let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
        [
            _mm256_permute2f128_ps::<0x20>(s0, s4),
            _mm256_permute2f128_ps::<0x20>(s1, s5),
            _mm256_permute2f128_ps::<0x20>(s2, s6),
            _mm256_permute2f128_ps::<0x20>(s3, s7),
            _mm256_permute2f128_ps::<0x31>(s0, s4),
            _mm256_permute2f128_ps::<0x31>(s1, s5),
            _mm256_permute2f128_ps::<0x31>(s2, s6),
            _mm256_permute2f128_ps::<0x31>(s3, s7),
        ]
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn transpose_swaps_rows_and_lanes() {
            if !crate::quant::dot::has_avx2() {
                return;
            }
            let rows: Vec<[f32; 8]> = (0..8)
                .map(|j| std::array::from_fn(|i| (10 * j + i) as f32))
                .collect();
            // SAFETY: AVX2 is present.
            let got = unsafe {
                transpose(std::array::from_fn(|j| load8(&rows[j]))).map(|v| {
                    let mut out = [0.0f32; 8];
                    store8(&mut out, v);
                    out
                })
            };
            for (i, col) in got.iter().enumerate() {
                for (j, &v) in col.iter().enumerate() {
                    assert_eq!(v, rows[j][i], "result {i}, lane {j}");
                }
            }
        }
    }
}
