//! Encoding activation rows the way llama.cpp's CPU backend does before a quantised dot.
//!
//! Integer formats give `q` (signed bytes), and per 16 values the scale `d` and the scaled sum
//! `d * Σq` (used by formats whose weights carry an offset). Rounding is to nearest-even, as in
//! ggml's x86 `quantize_row_q8_0`/`q8_1` and `nearest_int`.

use crate::format::{ActivationFormat, QuantFormat, round_f16};
use crate::unpack::GROUP;

/// Activation rows (`rows × cols`) in the encoding a weight format asks for.
#[derive(Debug, Default, Clone)]
pub struct QuantizedActs {
    /// The encoding.
    pub format: Option<ActivationFormat>,
    /// Values per row.
    pub cols: usize,
    /// Integer formats: the quants, `rows × cols`.
    pub q: Vec<i8>,
    /// Integer formats: the scale of each group of 16, `rows × cols / 16`.
    pub d: Vec<f32>,
    /// Integer formats: `d * Σq` of each group of 16, `rows × cols / 16`.
    pub sum: Vec<f32>,
    /// Integer formats: `Σq` of each group of 16, `rows × cols / 16` (ggml's `bsums`): the
    /// K-quant kernels weight them by a sub-block's min or offset instead of summing the
    /// activations again for every weight row.
    pub isum: Vec<i32>,
    /// Q5_0 weights on x86-64 only: each block of 32 quants again, beside its offset lanes
    /// (see [`Q5_0Block`]), `rows × cols / 32`.
    pub q5_0_blocks: Vec<Q5_0Block>,
    /// Q8_0, Q4_1, Q5_0, Q4_K and Q6_K weights in the browser build only: the quants again,
    /// widened to 16 bits, `rows × cols`. The `simd128` kernels multiply 16-bit lanes
    /// (`i32x4.dot_i16x8_s`): widened once per product rather than once for every weight
    /// row, the activations cost each block's dot two loads instead of a load and two
    /// extends (see [`crate::simd128`] for what that measured).
    pub wide: Vec<i16>,
    /// Float formats: the (possibly half-rounded) values, `rows × cols`.
    pub values: Vec<f32>,
}

impl QuantizedActs {
    /// Encodes `x` (`rows × cols`, row-major) for a product with `weights`.
    ///
    /// `cols` must be a multiple of the weight format's block length (checked by the caller).
    pub fn encode(weights: QuantFormat, x: &[f32], cols: usize) -> Self {
        let format = weights.activation();
        let mut out = QuantizedActs {
            format: Some(format),
            cols,
            ..QuantizedActs::default()
        };
        match format {
            ActivationFormat::F32 => out.values = x.to_vec(),
            ActivationFormat::F16 => out.values = x.iter().map(|&v| round_f16(v)).collect(),
            ActivationFormat::Q8_0 => out.encode_blocks(x, Block::Q8_0),
            ActivationFormat::Q8_1 => {
                out.encode_blocks(x, Block::Q8_0);
                out.q8_1_sums(x);
            }
            ActivationFormat::Q8K => out.encode_blocks(x, Block::Q8K),
        }
        // Only the x86-64 kernels read them; the browser's are spared the copy.
        if weights == QuantFormat::Q5_0 && cfg!(target_arch = "x86_64") {
            out.q5_0_blocks = out.q.chunks_exact(32).map(Q5_0Block::new).collect();
        }
        // Only the `simd128` kernels of these formats read them (the others read bytes).
        let reads_wide = matches!(
            weights,
            QuantFormat::Q8_0
                | QuantFormat::Q4_1
                | QuantFormat::Q5_0
                | QuantFormat::Q4K
                | QuantFormat::Q6K
        );
        if reads_wide && cfg!(all(target_arch = "wasm32", target_feature = "simd128")) {
            out.wide = out.q.iter().map(|&v| i16::from(v)).collect();
        }
        out
    }

    fn encode_blocks(&mut self, x: &[f32], kind: Block) {
        self.q = vec![0; x.len()];
        self.d = vec![0.0; x.len() / GROUP];
        self.sum = vec![0.0; x.len() / GROUP];
        self.isum = vec![0; x.len() / GROUP];
        let groups = Groups {
            d: &mut self.d,
            sum: &mut self.sum,
            isum: &mut self.isum,
        };
        #[cfg(target_arch = "x86_64")]
        if crate::dot::has_avx2() {
            // SAFETY: AVX2 and FMA were detected on this CPU at run time.
            return unsafe { encode_avx2(x, kind, &mut self.q, groups) };
        }
        encode(x, kind, &mut self.q, groups);
    }

    /// ggml's `q8_1` keeps one sum per block of 32: `f16(d · Σq)` with the scale before its
    /// rounding to `f16`. The whole sum goes to the block's first group of 16 (the weight
    /// formats paired with `q8_1` have one offset per block, so the dot is unchanged).
    fn q8_1_sums(&mut self, x: &[f32]) {
        for (b, xs) in x.chunks_exact(32).enumerate() {
            let amax = xs.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            let sum: i32 = self.q[b * 32..(b + 1) * 32]
                .iter()
                .map(|&v| i32::from(v))
                .sum();
            self.sum[2 * b] = round_f16(d * sum as f32);
            self.sum[2 * b + 1] = 0.0;
        }
    }

    /// Rows `t0..t0 + N`: their quants and group scales, and how many whole blocks of
    /// `values` every one of them and the weight row `row` (`block_bytes` a block) hold: the
    /// bound a kernel over several activation rows loops to.
    #[inline]
    pub fn rows_and_blocks<const N: usize>(
        &self,
        t0: usize,
        row: &[u8],
        block_bytes: usize,
        values: usize,
    ) -> ([&[i8]; N], [&[f32]; N], usize) {
        let q: [&[i8]; N] = std::array::from_fn(|k| self.row_q(t0 + k));
        self.with_blocks(q, t0, row, block_bytes, values)
    }

    /// [`QuantizedActs::rows_and_blocks`] with the widened quants ([`QuantizedActs::wide`]).
    #[inline]
    pub fn wide_rows_and_blocks<const N: usize>(
        &self,
        t0: usize,
        row: &[u8],
        block_bytes: usize,
        values: usize,
    ) -> ([&[i16]; N], [&[f32]; N], usize) {
        let q: [&[i16]; N] = std::array::from_fn(|k| self.row_wide(t0 + k));
        self.with_blocks(q, t0, row, block_bytes, values)
    }

    #[inline]
    fn with_blocks<'a, T, const N: usize>(
        &'a self,
        q: [&'a [T]; N],
        t0: usize,
        row: &[u8],
        block_bytes: usize,
        values: usize,
    ) -> ([&'a [T]; N], [&'a [f32]; N], usize) {
        let d: [&[f32]; N] = std::array::from_fn(|k| self.row_d(t0 + k));
        let blocks = (0..N).fold(row.len() / block_bytes.max(1), |b, k| {
            b.min(q[k].len() / values.max(1))
                .min(d[k].len() / (values / GROUP).max(1))
        });
        (q, d, blocks)
    }

    /// Quants of row `r`.
    pub fn row_q(&self, r: usize) -> &[i8] {
        &self.q[r * self.cols..(r + 1) * self.cols]
    }

    /// Widened quants of row `r` (see [`QuantizedActs::wide`]; empty outside the browser
    /// build).
    pub fn row_wide(&self, r: usize) -> &[i16] {
        self.wide
            .get(r * self.cols..(r + 1) * self.cols)
            .unwrap_or(&[])
    }

    /// Group scales of row `r`.
    pub fn row_d(&self, r: usize) -> &[f32] {
        let g = self.cols / GROUP;
        &self.d[r * g..(r + 1) * g]
    }

    /// Scaled group sums of row `r`.
    pub fn row_sum(&self, r: usize) -> &[f32] {
        let g = self.cols / GROUP;
        &self.sum[r * g..(r + 1) * g]
    }

    /// Integer group sums of row `r`.
    pub fn row_isum(&self, r: usize) -> &[i32] {
        let g = self.cols / GROUP;
        &self.isum[r * g..(r + 1) * g]
    }

    /// Q5_0 blocks of row `r` (see [`QuantizedActs::q5_0_blocks`]).
    pub fn row_q5_0_blocks(&self, r: usize) -> &[Q5_0Block] {
        let g = self.cols / 32;
        self.q5_0_blocks.get(r * g..(r + 1) * g).unwrap_or(&[])
    }

    /// Float values of row `r`.
    pub fn row_values(&self, r: usize) -> &[f32] {
        &self.values[r * self.cols..(r + 1) * self.cols]
    }
}

/// A block of 32 activation quants as the Q5_0 kernels read it.
///
/// They read each weight as its unsigned 5-bit value `w + 16`; starting each lane of four
/// products from `offsets` (−16 times the sum of those four quants) leaves it the signed dot
/// `Σ w·x`, so no sign has to be carried over to every activation row for every weight row.
/// The quants sit beside their offsets so that a kernel over four activation rows follows
/// four pointers, not eight: with eight, and the scales' four, the compiler ran out of
/// registers and shuffled them at every block (measured: Qwen2.5's prefill 6% slower).
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct Q5_0Block {
    /// The block's quants.
    pub q: [i8; 32],
    /// −16 times the sum of each four consecutive quants.
    pub offsets: [i32; 8],
}

impl Q5_0Block {
    fn new(q: &[i8]) -> Self {
        let mut block = Q5_0Block {
            q: [0; 32],
            offsets: [0; 8],
        };
        block.q.copy_from_slice(&q[..32]);
        for (offset, four) in block.offsets.iter_mut().zip(q.chunks_exact(4)) {
            *offset = -16 * four.iter().map(|&v| i32::from(v)).sum::<i32>();
        }
        block
    }
}

/// The block encodings.
#[derive(Debug, Clone, Copy)]
enum Block {
    /// 32 values a block.
    Q8_0,
    /// 256 values a block.
    Q8K,
}

impl Block {
    fn len(self) -> usize {
        match self {
            Block::Q8_0 => 32,
            Block::Q8K => 256,
        }
    }
}

/// The per-group buffers of [`QuantizedActs`].
struct Groups<'a> {
    d: &'a mut [f32],
    sum: &'a mut [f32],
    isum: &'a mut [i32],
}

impl Groups<'_> {
    /// Group `g`'s scale `d` and the sum of its quants.
    fn set(&mut self, g: usize, d: f32, sum: i32) {
        self.d[g] = d;
        self.sum[g] = d * sum as f32;
        self.isum[g] = sum;
    }
}

/// Every block of `x` encoded as `kind` into `q`, with each group's scale and
/// sums. `#[inline(always)]`, so that [`encode_avx2`] compiles it with AVX2: the baseline
/// x86-64 target has no vector rounding instruction, so there each quant is a call to `rintf`;
/// and one call for all the blocks rather than one per block (the encoding of a prefill's
/// activations was 8% of the calling thread's time, mostly calls and scalar group sums).
#[inline(always)]
fn encode(x: &[f32], kind: Block, q: &mut [i8], mut out: Groups) {
    let block = kind.len();
    let groups = block / GROUP;
    for (b, (xs, qs)) in x
        .chunks_exact(block)
        .zip(q.chunks_exact_mut(block))
        .enumerate()
    {
        let d = match kind {
            Block::Q8_0 => q8_0_block_body(xs, qs),
            Block::Q8K => q8_k_block_body(xs, qs),
        };
        for g in 0..groups {
            let sum: i32 = qs[g * GROUP..(g + 1) * GROUP]
                .iter()
                .map(|&v| i32::from(v))
                .sum();
            out.set(b * groups + g, d, sum);
        }
    }
}

/// [`encode`] with AVX2; `Q8_0` blocks with [`x86::q8_0_block`], which computes what
/// [`q8_0_block_body`] does eight values at a time (the compiler had left that loop scalar).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn encode_avx2(x: &[f32], kind: Block, q: &mut [i8], mut out: Groups) {
    if !matches!(kind, Block::Q8_0) {
        return encode(x, kind, q, out);
    }
    for (b, (xs, qs)) in x.chunks_exact(32).zip(q.chunks_exact_mut(32)).enumerate() {
        let (d, sums) = x86::q8_0_block(xs, qs);
        for (g, sum) in sums.into_iter().enumerate() {
            out.set(2 * b + g, d, sum);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use crate::format::round_f16;

    /// [`super::q8_0_block_body`] of 32 values (`x` and `q` hold at least 32), and the sums of
    /// the two groups of 16 quants. The same results for finite values: the maximum and the
    /// integer sums are exact in any order, and each quant is the same product rounded the
    /// same way (`x` must hold no NaN: the scalar code maps one to 0, this one to −128).
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn q8_0_block(x: &[f32], q: &mut [i8]) -> (f32, [i32; 2]) {
        let (x, q) = (&x[..32], &mut q[..32]);
        // SAFETY: `x` holds 32 values; loads are unaligned.
        let v: [__m256; 4] =
            std::array::from_fn(|i| unsafe { _mm256_loadu_ps(x.as_ptr().add(8 * i)) });
        let abs = |v: __m256| _mm256_andnot_ps(_mm256_set1_ps(-0.0), v);
        let m = _mm256_max_ps(
            _mm256_max_ps(abs(v[0]), abs(v[1])),
            _mm256_max_ps(abs(v[2]), abs(v[3])),
        );
        let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
        let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        let amax = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
        let d = amax / 127.0;
        let id = _mm256_set1_ps(if amax != 0.0 { 127.0 / amax } else { 0.0 });
        let c: [__m256i; 4] = std::array::from_fn(|i| {
            let r = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
                _mm256_mul_ps(v[i], id),
            );
            _mm256_cvtps_epi32(r)
        });
        let hsum = |v: __m256i| {
            let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
            let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
            _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s)))
        };
        let sums = [
            hsum(_mm256_add_epi32(c[0], c[1])),
            hsum(_mm256_add_epi32(c[2], c[3])),
        ];
        // Narrowed with saturation (the quants are within ±127), the lanes put back in order.
        let bytes = _mm256_packs_epi16(
            _mm256_packs_epi32(c[0], c[1]),
            _mm256_packs_epi32(c[2], c[3]),
        );
        let bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        // SAFETY: `q` holds 32 bytes; the store is unaligned.
        unsafe { _mm256_storeu_si256(q.as_mut_ptr().cast(), bytes) };
        (round_f16(d), sums)
    }
}

/// ggml's `quantize_row_q8_0` as its x86 kernels compute it: scale `amax / 127` stored as
/// `f16`, quants `round(x · 127 / amax)` (not `x / scale`: the two round differently now and
/// then, and one flipped quant moves a logit by a tenth). Returns the stored scale.
#[inline(always)]
fn q8_0_block_body(x: &[f32], q: &mut [i8]) -> f32 {
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    for (dst, &v) in q.iter_mut().zip(x) {
        *dst = (v * id).round_ties_even() as i8;
    }
    round_f16(d)
}

/// ggml's `quantize_row_q8_K`: the signed value of largest magnitude maps to -127.
#[inline(always)]
fn q8_k_block_body(x: &[f32], q: &mut [i8]) -> f32 {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax == 0.0 {
        q.fill(0);
        return 0.0;
    }
    let iscale = -127.0 / max;
    for (dst, &v) in q.iter_mut().zip(x) {
        *dst = ((iscale * v).round_ties_even() as i32).min(127) as i8;
    }
    1.0 / iscale
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::Rng;

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_avx2_q8_0_encoding_is_the_scalar_one() {
        if !crate::dot::has_avx2() {
            return;
        }
        let mut rng = Rng(7);
        for scale in [0.0f32, 1e-30, 0.01, 1.0, 3.0, 1e6] {
            for _ in 0..50 {
                let mut x: Vec<f32> = (0..32).map(|_| scale * rng.float()).collect();
                // Ties: a value at the maximum, and halves.
                x[5] = 2.5 * scale;
                x[9] = -1.5 * scale;
                let (mut want, mut got) = ([0i8; 32], [0i8; 32]);
                let d = q8_0_block_body(&x, &mut want);
                // SAFETY: AVX2 and FMA were detected above.
                let (got_d, sums) = unsafe { x86::q8_0_block(&x, &mut got) };
                assert_eq!(want, got, "scale {scale}");
                assert_eq!(d.to_bits(), got_d.to_bits());
                let sum = |g: usize| {
                    want[16 * g..16 * (g + 1)]
                        .iter()
                        .map(|&q| i32::from(q))
                        .sum()
                };
                assert_eq!(sums, [sum(0), sum(1)]);
            }
        }
    }
}
