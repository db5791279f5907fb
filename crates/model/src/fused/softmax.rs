//! The softmax of a prefill's attention rows over the `f16` cache, bit for bit what the
//! matmul path computes (burn's Flex softmax of the row with its hidden keys at −∞, then each
//! probability rounded to `f16`): the maximum, `exp(x − max)` summed from the left, each
//! times `1 / sum`.
//!
//! Only the keys a row sees are visited: a hidden key adds `exp(−∞) = 0` to the sum, which
//! leaves it as it is. burn calls the C library's `expf` for each value; one call a value and
//! one dependent addition after another were a fifth of SmolLM2's prefill of 2,048 tokens. So
//! on x86-64 with AVX2 and FMA the exponentials are computed four at a time with the very
//! operations of glibc's `expf` on such a CPU (`__expf_fma`, the algorithm of Arm's
//! optimized-routines: the argument scaled by 32 / ln 2 in doubles, split into an integer
//! and a remainder, a table of 2^(i/32) and a cubic, then rounded to `f32`), and the sums of
//! four rows advance together. The vector exponential is used only where it gives
//! `f32::exp`'s bits on every value of a check run once per process (another C library may
//! round differently); elsewhere each value goes through `f32::exp`, but in wasm, where
//! `f32::exp` is the `libm` crate's and `stampo-quant` computes it four values at a time with
//! its very operations (`stampo_quant::attention::exponentials`, tested against it there).

use std::ops::Range;

use super::flex::round16_slice;

/// Each row `r` of `probs` (`total` values a row) turned, over `seen[r]`, from scores into
/// probabilities of `scale` times them, rounded to `f16`; the values outside `seen[r]` are
/// left as they are.
pub(super) fn softmax_rows(probs: &mut [f32], total: usize, seen: &[Range<usize>], scale: f32) {
    let vector = vector_exp();
    let mut sums = vec![0.0f32; seen.len()];
    for (row, seen) in probs.chunks_exact_mut(total).zip(seen) {
        exponentials(&mut row[seen.clone()], scale, vector);
    }
    // Each row's sum from the left, four rows' chains advancing together (one addition's
    // latency each step instead of four).
    let rows: Vec<&[f32]> = probs
        .chunks_exact(total)
        .zip(seen)
        .map(|(row, seen)| &row[seen.clone()])
        .collect();
    for (rows, sums) in rows.chunks(4).zip(sums.chunks_mut(4)) {
        sum_rows(rows, sums);
    }
    for ((row, seen), sum) in probs.chunks_exact_mut(total).zip(seen).zip(sums) {
        let row = &mut row[seen.clone()];
        let inv = 1.0f32 / sum;
        for x in row.iter_mut() {
            *x *= inv;
        }
        round16_slice(row);
    }
}

/// `row` scaled by `scale`, then `exp(x − max)` of each value in place.
fn exponentials(row: &mut [f32], scale: f32, vector: bool) {
    for x in row.iter_mut() {
        *x *= scale;
    }
    #[cfg(target_arch = "x86_64")]
    if vector {
        // SAFETY: `vector_exp` found AVX2 and FMA.
        unsafe { x86::exponentials(row) };
        return;
    }
    let _ = vector;
    let max = row
        .iter()
        .fold(f32::NEG_INFINITY, |m, &x| if x > m { x } else { m });
    // `f32::exp` of each, four at a time in wasm (`simd128`, the same bits).
    crate::quant::attention::exponentials(row, max);
}

/// `sums[i]` = the sum of `rows[i]` from the left, for up to four rows at once.
fn sum_rows(rows: &[&[f32]], sums: &mut [f32]) {
    let mut acc = [0.0f32; 4];
    let common = rows.iter().map(|r| r.len()).min().unwrap_or(0);
    if rows.len() == 4 {
        for i in 0..common {
            for (acc, row) in acc.iter_mut().zip(rows) {
                *acc += row[i];
            }
        }
    } else {
        // Fewer than four rows (the last group): one at a time from the start.
        for (acc, row) in acc.iter_mut().zip(rows) {
            for &x in &row[..common] {
                *acc += x;
            }
        }
    }
    for ((sum, acc), row) in sums.iter_mut().zip(acc).zip(rows) {
        *sum = row[common..].iter().fold(acc, |s, &x| s + x);
    }
}

/// Whether this process computes its exponentials four at a time: the CPU has AVX2 and FMA
/// and the vector loop gives `f32::exp`'s bits on every value checked (once per process).
fn vector_exp() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::sync::OnceLock;
        static AGREES: OnceLock<bool> = OnceLock::new();
        *AGREES.get_or_init(|| {
            std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
                // SAFETY: AVX2 and FMA are present (checked just before).
                && check_values().all(|x| unsafe { x86::exp(x) }.to_bits() == x.exp().to_bits())
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The arguments the vector exponential is checked on: the non-positive `f32`s a softmax
/// meets, from −0 past the point where `expf` underflows to zero, about 140,000 of them.
#[cfg(target_arch = "x86_64")]
fn check_values() -> impl Iterator<Item = f32> {
    // Negative `f32`s are the bit patterns from 0x8000_0000 (−0) up; 0xC2F0_0000 is −120.
    (0x8000_0000u32..=0xC2F0_0000)
        .step_by(7919)
        .map(f32::from_bits)
        .chain([
            0.0,
            -0.0,
            -103.972_08,
            -103.972_09,
            -87.336_55,
            -1e-45,
            f32::NEG_INFINITY,
        ])
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::sync::OnceLock;

    /// 32 / ln 2, 1.5 · 2^52 (adding it rounds to an integer in the low bits), and the
    /// cubic's coefficients (of `2^(r/32)`), as glibc's `__exp2f_data` holds them.
    const INV_LN2_32: u64 = 0x4047_1547_652B_82FE;
    const SHIFT: u64 = 0x4338_0000_0000_0000;
    const C0: u64 = 0x3EBC_6AF8_4B91_2394;
    const C1: u64 = 0x3F2E_BFCE_50FA_C4F3;
    const C2: u64 = 0x3F96_2E42_FF0C_52D6;
    /// Below this (`log(2^-150)`) `expf` gives +0.
    const UNDERFLOW: f32 = f32::from_bits(0xC2CF_F1B4);

    /// `2^(i/32)` for `i` in 0..32, each less `i << 47` (the integer part is added back in
    /// the exponent bits).
    fn table() -> &'static [u64; 32] {
        static TABLE: OnceLock<[u64; 32]> = OnceLock::new();
        TABLE.get_or_init(|| {
            std::array::from_fn(|i| (i as f64 / 32.0).exp2().to_bits() - ((i as u64) << 47))
        })
    }

    /// `expf(x)` of four values widened to doubles.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn exp4(xd: __m256d, table: &[u64; 32]) -> __m128 {
        let f = |bits: u64| _mm256_set1_pd(f64::from_bits(bits));
        let (inv, shift) = (f(INV_LN2_32), f(SHIFT));
        // k + r = x · 32 / ln 2, k an integer (in the low bits of `shifted`).
        let shifted = _mm256_fmadd_pd(inv, xd, shift);
        let k = _mm256_sub_pd(shifted, shift);
        let r = _mm256_fmsub_pd(inv, xd, k);
        let ki = _mm256_castpd_si256(shifted);
        let index = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
        // SAFETY: every index is in 0..32, inside `table`.
        let t = unsafe { _mm256_i64gather_epi64::<8>(table.as_ptr().cast(), index) };
        let s = _mm256_castsi256_pd(_mm256_add_epi64(t, _mm256_slli_epi64::<47>(ki)));
        let z = _mm256_fmadd_pd(r, f(C0), f(C1));
        let r2 = _mm256_mul_pd(r, r);
        let y = _mm256_fmadd_pd(r, f(C2), _mm256_set1_pd(1.0));
        let y = _mm256_fmadd_pd(z, r2, y);
        _mm256_cvtpd_ps(_mm256_mul_pd(y, s))
    }

    /// `expf` of eight values no greater than zero (or NaN, which the callers avoid).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn exp8(x: __m256, table: &[u64; 32]) -> __m256 {
        let low = exp4(_mm256_cvtps_pd(_mm256_castps256_ps128(x)), table);
        let high = exp4(_mm256_cvtps_pd(_mm256_extractf128_ps::<1>(x)), table);
        let e = _mm256_set_m128(high, low);
        // Where `expf` underflows, +0 (the table arithmetic would wrap).
        let under = _mm256_cmp_ps::<_CMP_LT_OQ>(x, _mm256_set1_ps(UNDERFLOW));
        _mm256_andnot_ps(under, e)
    }

    /// One value through the vector path (the check of [`super::vector_exp`]).
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn exp(x: f32) -> f32 {
        if x > 0.0 || x.is_nan() {
            // Outside what the vector path takes.
            return f32::NAN;
        }
        _mm256_cvtss_f32(exp8(_mm256_set1_ps(x), table()))
    }

    /// `exp(x − max)` of each value of `row` in place, `max` the row's maximum.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn exponentials(row: &mut [f32]) {
        let mut chunks = row.chunks_exact(8);
        let mut max8 = _mm256_set1_ps(f32::NEG_INFINITY);
        for chunk in &mut chunks {
            // SAFETY: eight values; unaligned load.
            let x = unsafe { _mm256_loadu_ps(chunk.as_ptr()) };
            max8 = _mm256_max_ps(x, max8);
        }
        let mut lanes = [0.0f32; 8];
        // SAFETY: eight values; unaligned store.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), max8) };
        // The maximum is the same whichever order finds it (no NaNs; of +0 and −0 either
        // may come out, and `x − max` is then the same but for the sign of a zero, whose
        // exponential is 1 either way).
        let max = lanes
            .iter()
            .chain(chunks.remainder())
            .fold(f32::NEG_INFINITY, |m, &x| if x > m { x } else { m });
        let (table, max8) = (table(), _mm256_set1_ps(max));
        let mut chunks = row.chunks_exact_mut(8);
        for chunk in &mut chunks {
            // SAFETY: eight values; unaligned load and store.
            unsafe {
                let x = _mm256_sub_ps(_mm256_loadu_ps(chunk.as_ptr()), max8);
                _mm256_storeu_ps(chunk.as_mut_ptr(), exp8(x, table));
            }
        }
        for x in chunks.into_remainder() {
            *x = (*x - max).exp();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector exponential is the C library's `expf` bit for bit on the values checked
    /// and on a finer sweep of the non-positive `f32`s. With glibc (whose `expf` has been this
    /// algorithm since 2.28) on a CPU with AVX2 and FMA the process must use it; elsewhere it
    /// may fall back to `f32::exp` itself. (Checked once over every negative `f32`, 2^31
    /// values: no difference from glibc 2.36's.)
    #[test]
    fn vector_exponential_equals_expf() {
        #[cfg(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu"))]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            assert!(vector_exp(), "the vector expf differs from glibc's");
        }
        if !vector_exp() {
            println!("SKIPPED: this process takes f32::exp value by value");
            return;
        }
        for bits in (0x8000_0000u32..=0xC2F0_0000).step_by(1021) {
            let x = f32::from_bits(bits);
            // SAFETY: `vector_exp` found AVX2 and FMA.
            #[cfg(target_arch = "x86_64")]
            assert_eq!(unsafe { x86::exp(x) }.to_bits(), x.exp().to_bits(), "{x:e}");
        }
    }

    /// Values of widely different sizes, so that sums in another order round differently.
    fn spread(n: usize, seed: usize) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let h = ((i + 1) * 2_654_435_761) ^ (seed * 40_503);
                (h % 1000) as f32 / 37.0 - 13.0
            })
            .collect()
    }

    /// The exponentials are the scalar loop's, bit for bit, before any rounding.
    #[test]
    fn exponentials_equal_the_scalar_ones() {
        for len in (0..40).chain([255, 256, 257, 1000]) {
            let row = spread(len, len);
            let mut got = row.clone();
            exponentials(&mut got, 0.3, vector_exp());
            let scaled: Vec<f32> = row.iter().map(|&x| x * 0.3).collect();
            let max = scaled.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
            for (g, x) in got.iter().zip(&scaled) {
                assert_eq!(g.to_bits(), (x - max).exp().to_bits(), "length {len}");
            }
        }
    }

    /// Each row's sum runs from the left, whatever group of rows it is summed in.
    #[test]
    fn sums_run_from_the_left() {
        for rows in 1..=4 {
            let values: Vec<Vec<f32>> = (0..rows)
                .map(|r| {
                    spread(50 + 97 * r, r)
                        .iter()
                        .map(|x| (x / 13.0).exp())
                        .collect()
                })
                .collect();
            let slices: Vec<&[f32]> = values.iter().map(Vec::as_slice).collect();
            let mut sums = vec![0.0f32; rows];
            sum_rows(&slices, &mut sums);
            for (sum, row) in sums.iter().zip(&values) {
                let want = row.iter().fold(0.0f32, |s, &x| s + x);
                assert_eq!(sum.to_bits(), want.to_bits(), "{rows} rows");
            }
        }
    }

    /// The rows' probabilities are the scalar softmax's bit for bit (scaled maximum,
    /// exponentials summed from the left, times the reciprocal, rounded to `f16`), for rows
    /// of every length around the vectors' and groups of rows around four.
    #[test]
    fn rows_equal_the_scalar_softmax() {
        let total = 300;
        for rows in [1usize, 3, 4, 5, 9] {
            // Rows of lengths far apart, as a prefill's causal rows are.
            let seen: Vec<Range<usize>> = (0..rows)
                .map(|r| (r * 3) % 11..total - (r * 37) % 150)
                .collect();
            let scores: Vec<f32> = (0..rows * total)
                .map(|i| ((i * 2_654_435_761) % 1000) as f32 / 37.0 - 13.0)
                .collect();
            let mut got = scores.clone();
            softmax_rows(&mut got, total, &seen, 0.125);
            for (r, seen) in seen.iter().enumerate() {
                let row: Vec<f32> = scores[r * total..][seen.clone()]
                    .iter()
                    .map(|&x| x * 0.125)
                    .collect();
                let max = row.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
                let e: Vec<f32> = row.iter().map(|&x| (x - max).exp()).collect();
                let inv = 1.0 / e.iter().fold(0.0f32, |s, &x| s + x);
                for (k, &e) in seen.clone().zip(&e) {
                    let want = crate::fused::flex::round16(e * inv);
                    assert_eq!(
                        got[r * total + k].to_bits(),
                        want.to_bits(),
                        "row {r} key {k}"
                    );
                }
                // Outside the row's keys nothing changed.
                for k in (0..total).filter(|k| !seen.contains(k)) {
                    assert_eq!(
                        got[r * total + k].to_bits(),
                        scores[r * total + k].to_bits()
                    );
                }
            }
        }
    }
}
