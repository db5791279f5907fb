//! Encoding activation rows the way llama.cpp's CPU backend does before a quantised dot.
//!
//! Integer formats give `q` (signed bytes), and per 16 values the scale `d` and the scaled sum
//! `d * Σq` (used by formats whose weights carry an offset). Rounding is to nearest-even, as in
//! ggml's x86 `quantize_row_q8_0`/`q8_1` and `nearest_int`.

use crate::format::{ActivationFormat, round_f16};
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
    /// Float formats: the (possibly half-rounded) values, `rows × cols`.
    pub values: Vec<f32>,
}

impl QuantizedActs {
    /// Encodes `x` (`rows × cols`, row-major) for `format`.
    ///
    /// `cols` must be a multiple of the weight format's block length (checked by the caller).
    pub fn encode(format: ActivationFormat, x: &[f32], cols: usize) -> Self {
        let mut out = QuantizedActs {
            format: Some(format),
            cols,
            ..QuantizedActs::default()
        };
        match format {
            ActivationFormat::F32 => out.values = x.to_vec(),
            ActivationFormat::F16 => out.values = x.iter().map(|&v| round_f16(v)).collect(),
            ActivationFormat::Q8_0 => out.encode_blocks(x, 32, q8_0_block),
            ActivationFormat::Q8_1 => {
                out.encode_blocks(x, 32, q8_0_block);
                out.q8_1_sums(x);
            }
            ActivationFormat::Q8K => out.encode_blocks(x, 256, q8_k_block),
        }
        out
    }

    fn encode_blocks(&mut self, x: &[f32], block: usize, quantize: fn(&[f32], &mut [i8]) -> f32) {
        self.q = vec![0; x.len()];
        self.d = vec![0.0; x.len() / GROUP];
        self.sum = vec![0.0; x.len() / GROUP];
        self.isum = vec![0; x.len() / GROUP];
        for (b, (xs, qs)) in x
            .chunks_exact(block)
            .zip(self.q.chunks_exact_mut(block))
            .enumerate()
        {
            let d = quantize(xs, qs);
            let groups = block / GROUP;
            for g in 0..groups {
                let sum: i32 = qs[g * GROUP..(g + 1) * GROUP]
                    .iter()
                    .map(|&v| i32::from(v))
                    .sum();
                self.d[b * groups + g] = d;
                self.sum[b * groups + g] = d * sum as f32;
                self.isum[b * groups + g] = sum;
            }
        }
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

    /// Quants of row `r`.
    pub fn row_q(&self, r: usize) -> &[i8] {
        &self.q[r * self.cols..(r + 1) * self.cols]
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

    /// Float values of row `r`.
    pub fn row_values(&self, r: usize) -> &[f32] {
        &self.values[r * self.cols..(r + 1) * self.cols]
    }
}

/// `encode(x, q)`, compiled for AVX2 where the CPU has it: the baseline x86-64 target has no
/// vector rounding instruction, so there each quant is a call to `rintf` (a few percent of a
/// decode step). `encode` must be `#[inline(always)]`, so that it is compiled into the AVX2 copy.
#[inline(always)]
fn with_vector_rounding(encode: impl Fn(&[f32], &mut [i8]) -> f32, x: &[f32], q: &mut [i8]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if crate::dot::has_avx2() {
        // SAFETY: AVX2 and FMA were detected on this CPU at run time.
        return unsafe { in_avx2(encode, x, q) };
    }
    encode(x, q)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn in_avx2(encode: impl Fn(&[f32], &mut [i8]) -> f32, x: &[f32], q: &mut [i8]) -> f32 {
    encode(x, q)
}

/// ggml's `quantize_row_q8_0` as its x86 kernels compute it: scale `amax / 127` stored as
/// `f16`, quants `round(x · 127 / amax)` (not `x / scale`: the two round differently now and
/// then, and one flipped quant moves a logit by a tenth). Returns the stored scale.
fn q8_0_block(x: &[f32], q: &mut [i8]) -> f32 {
    with_vector_rounding(q8_0_block_body, x, q)
}

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
fn q8_k_block(x: &[f32], q: &mut [i8]) -> f32 {
    with_vector_rounding(q8_k_block_body, x, q)
}

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
