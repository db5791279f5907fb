//! The dot product of one decoded weight row with one encoded activation row.
//!
//! Integer formats: `Σ_g scale[g]·d[g]·(q_w·q_x)_g + offset[g]·sum[g]` over groups of 16.
//! On x86-64 an AVX2+FMA kernel is chosen at run time (detected once), with `vpdpbusd` in its
//! AVX-VNNI or AVX512-VNNI encoding where the CPU has one (AVX-512's wider registers and AMX
//! are never used); on wasm32 built with `simd128` (as stampo's wasm is), `simd128` kernels; elsewhere
//! the portable loops below, which are also the reference the others are tested against.

use crate::act::QuantizedActs;
use crate::format::{QuantFormat, f16_at, f16_table, read_f16};
use crate::unpack::{GROUP, scale_min_k4};

/// A decoded weight row and an encoded activation row, both of `cols` values.
pub struct IntRows<'a> {
    /// Weight quants.
    pub wq: &'a [i8],
    /// Weight scale per group.
    pub wscale: &'a [f32],
    /// Weight offset per group.
    pub woffset: &'a [f32],
    /// Activation quants.
    pub xq: &'a [i8],
    /// Activation scale per group.
    pub xd: &'a [f32],
    /// Activation `d·Σq` per group.
    pub xsum: &'a [f32],
}

/// The integer-format dot product, on the fastest kernel this CPU offers.
#[inline]
pub fn dot_int(rows: &IntRows<'_>) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: AVX2 and FMA were detected on this CPU at run time.
        return unsafe { x86::dot_int_avx2(rows) };
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return crate::simd128::dot_int(rows);
    #[allow(unreachable_code)]
    dot_int_portable(rows)
}

/// The float-format dot product, on the fastest kernel this CPU offers.
#[inline]
pub fn dot_f32(w: &[f32], x: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: AVX2 and FMA were detected on this CPU at run time.
        return unsafe { x86::dot_f32_avx2(w, x) };
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return crate::simd128::dot_f32(w, x);
    #[allow(unreachable_code)]
    dot_f32_portable(w, x)
}

/// The portable integer kernel; also the reference the SIMD kernels are tested against.
pub fn dot_int_portable(rows: &IntRows<'_>) -> f32 {
    let mut acc = 0.0f32;
    let groups = rows.wq.len() / GROUP;
    for g in 0..groups {
        let w = &rows.wq[g * GROUP..(g + 1) * GROUP];
        let x = &rows.xq[g * GROUP..(g + 1) * GROUP];
        let isum: i32 = w
            .iter()
            .zip(x)
            .map(|(&a, &b)| i32::from(a) * i32::from(b))
            .sum();
        acc += rows.wscale[g] * rows.xd[g] * isum as f32;
    }
    acc + rows
        .woffset
        .iter()
        .zip(rows.xsum)
        .map(|(o, s)| o * s)
        .sum::<f32>()
}

/// The portable float kernel (eight partial sums, which LLVM vectorises).
pub fn dot_f32_portable(w: &[f32], x: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (wc, xc) = (w.chunks_exact(8), x.chunks_exact(8));
    let tail: f32 = wc
        .remainder()
        .iter()
        .zip(xc.remainder())
        .map(|(a, b)| a * b)
        .sum();
    for (a, b) in wc.zip(xc) {
        for i in 0..8 {
            acc[i] += a[i] * b[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// A fused kernel: `row · x` for activation row `t`, straight from the GGUF bytes.
pub type RawDot = fn(row: &[u8], acts: &QuantizedActs, t: usize) -> f32;

/// The fused kernel for `format` on this CPU (AVX2 or AVX-VNNI on x86-64, `simd128` in wasm,
/// portable loops elsewhere): no decoded copy of the row, which in a decode step costs more
/// than the dot itself. Chosen once per piece of a product, not per row. `None` where the
/// caller must decode the row first.
pub fn raw_dot(format: QuantFormat) -> Option<RawDot> {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY (every `unsafe` below): AVX2 and FMA were detected on this CPU at run time,
        // and `byte_dot` picks the module whose `vpdpbusd` (if any) was detected too.
        if let Some(kernel) = unsafe { x86::byte_dot(vnni()).raw_dot(format) } {
            return Some(kernel);
        }
        return match format {
            QuantFormat::Q4K => Some(|r, a, t| unsafe { x86::dot_q4_k_rows::<1>(r, a, t)[0] }),
            QuantFormat::Q6K => Some(|r, a, t| unsafe { x86::dot_q6_k_rows::<1>(r, a, t)[0] }),
            _ => None,
        };
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        use crate::simd128;
        return match format {
            QuantFormat::Q8_0 => Some(|r, a, t| simd128::dot_q8_0(r, a.row_wide(t), a.row_d(t))),
            QuantFormat::Q4_1 => {
                Some(|r, a, t| simd128::dot_q4_1(r, a.row_wide(t), a.row_d(t), a.row_sum(t)))
            }
            QuantFormat::Q5_0 => Some(|r, a, t| simd128::dot_q5_0(r, a.row_wide(t), a.row_d(t))),
            QuantFormat::Q4K => {
                Some(|r, a, t| simd128::dot_q4_k(r, a.row_wide(t), a.row_d(t), a.row_isum(t)))
            }
            QuantFormat::Q6K => Some(|r, a, t| simd128::dot_q6_k::<1>(r, a, t)[0]),
            _ => portable_raw_dot(format),
        };
    }
    #[allow(unreachable_code)]
    portable_raw_dot(format)
}

/// The portable fused kernels (LLVM vectorises their loops).
fn portable_raw_dot(format: QuantFormat) -> Option<RawDot> {
    match format {
        QuantFormat::Q8_0 => Some(|r, a, t| dot_q8_0_portable(r, a.row_q(t), a.row_d(t))),
        QuantFormat::Q4_1 => {
            Some(|r, a, t| dot_q4_1_portable(r, a.row_q(t), a.row_d(t), a.row_sum(t)))
        }
        QuantFormat::Q5_0 => Some(|r, a, t| dot_q5_0_portable(r, a.row_q(t), a.row_d(t))),
        QuantFormat::Q4K => Some(|r, a, t| dot_q4_k_portable(r, a.row_q(t), a.row_d(t))),
        QuantFormat::Q6K => Some(|r, a, t| dot_q6_k_portable(r, a.row_q(t), a.row_d(t))),
        _ => None,
    }
}

/// Activation rows a [`RawDotTokens`] kernel takes at once.
pub const TOKENS: usize = 4;

/// A fused kernel for [`TOKENS`] activation rows from `t0` at once (a prefill), over every
/// weight row of `rows` (`row_bytes` each): `out[i][k]` is row `i` times activation row
/// `t0 + k`, for as many rows as `out` holds. Each block of a weight row is loaded and unpacked
/// once for all the activation rows.
///
/// One call covers a whole piece of rows rather than one row, so the single-row kernel is
/// inlined into the loop: its set-up and horizontal sums (a tenth of a 640-wide Q5_0 row's
/// time, as a call per row) overlap the next row's loads. One thread, 128-token prefill,
/// alternating builds: Gemma 3 185–190 → 199–201 tokens/s, Qwen2.5 57–63 → 63–65, SmolLM2
/// 180 → 188–190. Eight activation rows at once instead of four: Qwen2.5 +5%, SmolLM2 −10%.
pub type RawDotTokens =
    fn(rows: &[u8], row_bytes: usize, acts: &QuantizedActs, t0: usize, out: &mut [[f32; TOKENS]]);

/// The multi-row fused kernel for `format` on this CPU, where there is one (AVX2 or AVX-VNNI
/// on x86-64: Q8_0, Q4_1, Q5_0, Q4_K, Q6_K; `simd128` in wasm: all of these but Q8_0); each
/// of its results is bit for bit the [`raw_dot`] of the same weight row and activation row.
pub fn raw_dot_tokens(format: QuantFormat) -> Option<RawDotTokens> {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY (every `unsafe` below): AVX2 and FMA were detected on this CPU at run time,
        // and `byte_dot` picks the module whose `vpdpbusd` (if any) was detected too.
        if let Some(kernel) = unsafe { x86::byte_dot(vnni()).raw_dot_tokens(format) } {
            return Some(kernel);
        }
        return match format {
            QuantFormat::Q4K => Some(|r, n, a, t, o| unsafe { x86::dot_q4_k_tile(r, n, a, t, o) }),
            QuantFormat::Q6K => Some(|r, n, a, t, o| unsafe { x86::dot_q6_k_tile(r, n, a, t, o) }),
            _ => None,
        };
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        use crate::simd128;
        return match format {
            QuantFormat::Q4_1 => Some(|r, n, a, t, o| tile(r, n, a, t, o, simd128::dot_q4_1_rows)),
            QuantFormat::Q5_0 => Some(|r, n, a, t, o| tile(r, n, a, t, o, simd128::dot_q5_0_rows)),
            QuantFormat::Q4K => Some(|r, n, a, t, o| tile(r, n, a, t, o, simd128::dot_q4_k_rows)),
            QuantFormat::Q6K => Some(|r, n, a, t, o| tile(r, n, a, t, o, simd128::dot_q6_k)),
            _ => None,
        };
    }
    #[allow(unreachable_code)]
    {
        let _ = format;
        None
    }
}

/// A multi-row `kernel` over every weight row of a piece (see [`RawDotTokens`]).
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[inline(always)]
fn tile(
    rows: &[u8],
    row_bytes: usize,
    acts: &QuantizedActs,
    t0: usize,
    out: &mut [[f32; TOKENS]],
    kernel: fn(&[u8], &QuantizedActs, usize) -> [f32; TOKENS],
) {
    for (row, o) in rows.chunks_exact(row_bytes.max(1)).zip(out.iter_mut()) {
        *o = kernel(row, acts, t0);
    }
}

/// `row · x` for activation row `t` with the fused kernel of `format` ([`raw_dot`]).
pub fn dot_raw(format: QuantFormat, row: &[u8], acts: &QuantizedActs, t: usize) -> Option<f32> {
    raw_dot(format).map(|dot| dot(row, acts, t))
}

/// Q8_0 blocks against 8-bit activations, in loops LLVM vectorises (`simd128` in wasm).
pub fn dot_q8_0_portable(row: &[u8], xq: &[i8], xd: &[f32]) -> f32 {
    let f16 = f16_table();
    let mut total = 0.0f32;
    for ((block, x), d) in row
        .chunks_exact(34)
        .zip(xq.chunks_exact(32))
        .zip(xd.chunks_exact(2))
    {
        let isum: i32 = block[2..]
            .iter()
            .zip(x)
            .map(|(&w, &x)| i32::from(w as i8) * i32::from(x))
            .sum();
        let scale = f16_at(f16, block, 0);
        total += scale * d[0] * isum as f32;
    }
    total
}

/// Q4_1 blocks against 8-bit activations with their scaled sums, in loops LLVM vectorises.
pub fn dot_q4_1_portable(row: &[u8], xq: &[i8], xd: &[f32], xsum: &[f32]) -> f32 {
    let f16 = f16_table();
    let mut total = 0.0f32;
    for (((block, x), d), s) in row
        .chunks_exact(20)
        .zip(xq.chunks_exact(32))
        .zip(xd.chunks_exact(2))
        .zip(xsum.chunks_exact(2))
    {
        let (lo, hi) = x.split_at(16);
        let isum: i32 = block[4..]
            .iter()
            .zip(lo.iter().zip(hi))
            .map(|(&b, (&l, &h))| {
                i32::from(b & 0x0F) * i32::from(l) + i32::from(b >> 4) * i32::from(h)
            })
            .sum();
        let scale = f16_at(f16, block, 0);
        let min = f16_at(f16, block, 2);
        total += scale * d[0] * isum as f32 + min * (s[0] + s[1]);
    }
    total
}

/// Q5_0 blocks (`f16` scale, four bytes of fifth bits, 16 bytes of nibbles: values
/// `(nibble | bit << 4) - 16`) against 8-bit activations.
pub fn dot_q5_0_portable(row: &[u8], xq: &[i8], xd: &[f32]) -> f32 {
    let mut total = 0.0f32;
    for ((block, x), d) in row
        .chunks_exact(22)
        .zip(xq.chunks_exact(32))
        .zip(xd.chunks_exact(2))
    {
        let qh = u32::from_le_bytes([block[2], block[3], block[4], block[5]]);
        let (lo, hi) = x.split_at(16);
        let isum: i32 = block[6..22]
            .iter()
            .zip(lo.iter().zip(hi))
            .enumerate()
            .map(|(j, (&b, (&l, &h)))| {
                let v0 = i32::from(b & 0x0F) | ((qh >> j & 1) << 4) as i32;
                let v1 = i32::from(b >> 4) | ((qh >> (j + 16) & 1) << 4) as i32;
                (v0 - 16) * i32::from(l) + (v1 - 16) * i32::from(h)
            })
            .sum();
        total += read_f16(block, 0) * d[0] * isum as f32;
    }
    total
}

/// Q4_K super-blocks (256 values: `f16` scale and min, twelve bytes of 6-bit sub-block
/// scales and mins, 128 bytes of nibbles) against Q8_K activations, as ggml's
/// `ggml_vec_dot_q4_K_q8_K` computes it: the block's products and activation sums added up
/// exactly in integers, weighted by the 6-bit scales and mins, then scaled once per block.
pub fn dot_q4_k_portable(row: &[u8], xq: &[i8], xd: &[f32]) -> f32 {
    let mut total = 0.0f32;
    for ((block, x), xd) in row
        .chunks_exact(144)
        .zip(xq.chunks_exact(256))
        .zip(xd.chunks_exact(256 / GROUP))
    {
        let packed = &block[4..16];
        let (mut sumi, mut summ) = (0i32, 0i32);
        for (chunk, (q, x)) in block[16..144]
            .chunks_exact(32)
            .zip(x.chunks_exact(64))
            .enumerate()
        {
            let (lo_x, hi_x) = x.split_at(32);
            let (mut lo, mut hi) = (0i32, 0i32);
            for ((&b, &l), &h) in q.iter().zip(lo_x).zip(hi_x) {
                lo += i32::from(b & 0x0F) * i32::from(l);
                hi += i32::from(b >> 4) * i32::from(h);
            }
            let sum = |x: &[i8]| x.iter().map(|&v| i32::from(v)).sum::<i32>();
            let (sc_lo, m_lo) = scale_min_k4(2 * chunk, packed);
            let (sc_hi, m_hi) = scale_min_k4(2 * chunk + 1, packed);
            sumi += i32::from(sc_lo) * lo + i32::from(sc_hi) * hi;
            summ += i32::from(m_lo) * sum(lo_x) + i32::from(m_hi) * sum(hi_x);
        }
        let d = read_f16(block, 0) * xd[0];
        let dmin = read_f16(block, 2) * xd[0];
        total += d * sumi as f32 - dmin * summ as f32;
    }
    total
}

/// Q6_K super-blocks (256 values: 128 bytes of low nibbles, 64 of high bit pairs, sixteen
/// signed 8-bit scales, an `f16` scale) against Q8_K activations, as ggml's
/// `ggml_vec_dot_q6_K_q8_K`: exact integer sums per block, scaled once.
pub fn dot_q6_k_portable(row: &[u8], xq: &[i8], xd: &[f32]) -> f32 {
    let mut total = 0.0f32;
    for ((block, x), xd) in row
        .chunks_exact(210)
        .zip(xq.chunks_exact(256))
        .zip(xd.chunks_exact(256 / GROUP))
    {
        let mut sumi = 0i32;
        for half in 0..2 {
            let ql = &block[64 * half..64 * half + 64];
            let qh = &block[128 + 32 * half..128 + 32 * half + 32];
            let sc = &block[192 + 8 * half..192 + 8 * half + 8];
            let x = &x[128 * half..128 * half + 128];
            // Value `32 k + l` of the half, k = 0..4, from its nibble and its bit pair.
            let value = |k: usize, l: usize| -> i32 {
                let nibble = if k < 2 {
                    ql[32 * k + l] & 0x0F
                } else {
                    ql[32 * (k - 2) + l] >> 4
                };
                let high = (qh[l] >> (2 * k)) & 3;
                i32::from(nibble | high << 4) - 32
            };
            for k in 0..4 {
                for g in 0..2 {
                    let isum: i32 = (16 * g..16 * g + 16)
                        .map(|l| value(k, l) * i32::from(x[32 * k + l]))
                        .sum();
                    sumi += i32::from(sc[2 * k + g] as i8) * isum;
                }
            }
        }
        total += read_f16(block, 208) * xd[0] * sumi as f32;
    }
    total
}

#[cfg(target_arch = "x86_64")]
pub(crate) fn has_avx2() -> bool {
    use std::sync::OnceLock;
    static AVX2: OnceLock<bool> = OnceLock::new();
    *AVX2.get_or_init(|| {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    })
}

/// Which `vpdpbusd` (four products of unsigned and signed bytes summed into each `i32` lane)
/// this CPU has on 256-bit vectors, besides AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Vnni {
    /// None: `maddubs` then `madd`.
    None,
    /// AVX-VNNI's VEX form (Intel since Alder Lake).
    Avx,
    /// AVX512-VNNI's EVEX form on `ymm` registers (with AVX512VL): AMD since Zen 4, Intel's
    /// servers since Ice Lake, many of which lack AVX-VNNI. The instruction and its integers
    /// are the same; only the encoding differs.
    Avx512,
}

#[cfg(target_arch = "x86_64")]
impl Vnni {
    /// Whether this CPU has AVX2, FMA and `self`.
    pub(crate) fn available(self) -> bool {
        use std::arch::is_x86_feature_detected as has;
        has_avx2()
            && match self {
                Vnni::None => true,
                Vnni::Avx => has!("avxvnni"),
                Vnni::Avx512 => has!("avx512vnni") && has!("avx512vl"),
            }
    }

    /// The builds with `vpdpbusd` this CPU can run, the preferred first.
    pub(crate) fn with_vpdpbusd() -> impl Iterator<Item = Vnni> {
        [Vnni::Avx, Vnni::Avx512]
            .into_iter()
            .filter(|v| v.available())
    }

    /// For the tests comparing each build with `vpdpbusd` against the AVX2 one: those this CPU
    /// can run, or `None` (having said why the test skips) when there are none.
    #[cfg(test)]
    pub(crate) fn builds_to_compare() -> Option<Vec<Vnni>> {
        if !Vnni::None.available() {
            println!("SKIPPED: this CPU has no AVX2");
            return None;
        }
        let builds: Vec<Vnni> = Vnni::with_vpdpbusd().collect();
        if builds.is_empty() {
            println!("SKIPPED: this CPU has neither AVX-VNNI nor AVX512-VNNI");
            return None;
        }
        Some(builds)
    }
}

/// This CPU's [`Vnni`], detected once. Never AMX: this VM advertises it and faults on it.
#[cfg(target_arch = "x86_64")]
pub(crate) fn vnni() -> Vnni {
    use std::sync::OnceLock;
    static VNNI: OnceLock<Vnni> = OnceLock::new();
    *VNNI.get_or_init(|| Vnni::with_vpdpbusd().next().unwrap_or(Vnni::None))
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::{GROUP, IntRows};
    use crate::act::{Q5_0Block, QuantizedActs};
    use crate::format::{QuantFormat, f16_at, f16_table};
    use std::arch::x86_64::*;

    /// Sums the eight lanes of `v`.
    #[target_feature(enable = "avx2,fma")]
    fn hsum(v: __m256) -> f32 {
        let lo = _mm256_castps256_ps128(v);
        let hi = _mm256_extractf128_ps::<1>(v);
        let s = _mm_add_ps(lo, hi);
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_movehdup_ps(s));
        _mm_cvtss_f32(s)
    }

    /// Sums the eight `i32` lanes of `v` (exactly: the callers' sums are far from overflow).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn hsum_i32(v: __m256i) -> i32 {
        let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
        let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01>(s));
        _mm_cvtsi128_si32(s)
    }

    /// 32 values (two groups) per step: `|w|·sign(x, w)` with `maddubs`, pairs summed with
    /// `madd` into eight `i32` lanes (lanes 0–3 the first group, 4–7 the second), scaled by
    /// `scale·d` of each group and accumulated with FMA. Groups left over (an odd count) and the
    /// offsets go through scalar code.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn dot_int_avx2(rows: &IntRows<'_>) -> f32 {
        let n = rows.wq.len();
        let pairs = n / (2 * GROUP);
        let ones = _mm256_set1_epi16(1);
        let mut acc = _mm256_setzero_ps();
        for p in 0..pairs {
            let at = p * 2 * GROUP;
            // SAFETY: `at + 32 <= n` and both slices hold `n` bytes; loads are unaligned.
            let (w, x) = unsafe {
                (
                    _mm256_loadu_si256(rows.wq.as_ptr().add(at).cast()),
                    _mm256_loadu_si256(rows.xq.as_ptr().add(at).cast()),
                )
            };
            let prod = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
            let sums = _mm256_cvtepi32_ps(_mm256_madd_epi16(prod, ones));
            let g = 2 * p;
            let s0 = rows.wscale[g] * rows.xd[g];
            let s1 = rows.wscale[g + 1] * rows.xd[g + 1];
            let scale = _mm256_set_m128(_mm_set1_ps(s1), _mm_set1_ps(s0));
            acc = _mm256_fmadd_ps(sums, scale, acc);
        }
        let mut total = hsum(acc);
        for g in 2 * pairs..n / GROUP {
            let w = &rows.wq[g * GROUP..(g + 1) * GROUP];
            let x = &rows.xq[g * GROUP..(g + 1) * GROUP];
            let isum: i32 = w
                .iter()
                .zip(x)
                .map(|(&a, &b)| i32::from(a) * i32::from(b))
                .sum();
            total += rows.wscale[g] * rows.xd[g] * isum as f32;
        }
        total + offsets_avx2(rows.woffset, rows.xsum)
    }

    /// `acc` plus four adjacent products of unsigned bytes `a` with signed bytes `b`, summed
    /// into each `i32` lane: `maddubs` then `madd` (an `acc` of zero costs nothing: the add
    /// is folded away). `maddubs` saturates its `i16` pair sums, which the callers' operands
    /// never reach: `a` is a nibble, a 5-bit value or a magnitude of at most 128 and `b` an
    /// activation rounded to −127…127, so a pair is at most 2·128·127 = 32,512 in size.
    #[target_feature(enable = "avx2")]
    pub(crate) fn mul_sum_madd(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        _mm256_add_epi32(
            acc,
            _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1)),
        )
    }

    /// The same sums in one AVX-VNNI instruction (`vpdpbusd`), as ggml uses where the CPU has
    /// it; the integers are identical, so the results are bit for bit those of `avx2`.
    #[target_feature(enable = "avx2,avxvnni")]
    pub(crate) fn mul_sum_vnni(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        _mm256_dpbusd_avx_epi32(acc, a, b)
    }

    /// The same instruction in its AVX512-VNNI encoding (`ymm` registers, AVX512VL), as ggml
    /// uses where the CPU has that and not AVX-VNNI.
    #[target_feature(enable = "avx2,avx512vnni,avx512vl")]
    pub(crate) fn mul_sum_vnni512(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        _mm256_dpbusd_epi32(acc, a, b)
    }

    /// The 32 values of a Q4_1 block (`f16` scale and min, then 16 bytes of nibbles: values
    /// 0–15 low, 16–31 high) as bytes 0–15.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn q4_1_values(block: &[u8]) -> __m256i {
        let low = _mm_set1_epi8(0x0F);
        // SAFETY: a block is 20 bytes, so 16 from 4 are inside it; the load is unaligned.
        let packed = unsafe { _mm_loadu_si128(block[4..20].as_ptr().cast()) };
        let lo = _mm_and_si128(packed, low);
        let hi = _mm_and_si128(_mm_srli_epi16::<4>(packed), low);
        _mm256_set_m128i(hi, lo)
    }

    /// The 32 values of a Q5_0 block (`f16` scale, 4 bytes of fifth bits, 16 bytes of
    /// nibbles) as unsigned bytes `w + 16`: the fifth bits spread to bytes (`0x10` where
    /// set) and or'ed into the nibbles.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn q5_0_values(block: &[u8]) -> __m256i {
        let low = _mm_set1_epi8(0x0F);
        // Byte j of the spread picks byte j / 8 of the bits; or'ing all bits but j % 8 and
        // comparing with all-ones tests bit j.
        let pick = _mm256_set_epi64x(
            0x0303_0303_0303_0303,
            0x0202_0202_0202_0202,
            0x0101_0101_0101_0101,
            0,
        );
        let others = _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe);
        let all = _mm256_set1_epi64x(-1);
        let fifth = _mm256_set1_epi8(0x10);
        let qh = u32::from_le_bytes([block[2], block[3], block[4], block[5]]);
        // SAFETY: a block is 22 bytes, so 16 from 6 are inside it; the load is unaligned.
        let packed = unsafe { _mm_loadu_si128(block[6..22].as_ptr().cast()) };
        let nibbles = _mm256_set_m128i(
            _mm_and_si128(_mm_srli_epi16::<4>(packed), low),
            _mm_and_si128(packed, low),
        );
        let spread = _mm256_shuffle_epi8(_mm256_set1_epi32(qh as i32), pick);
        let set = _mm256_cmpeq_epi8(_mm256_or_si256(spread, others), all);
        _mm256_or_si256(nibbles, _mm256_and_si256(set, fifth))
    }

    /// How far ahead of the block being read the kernels ask for weights, in bytes.
    ///
    /// A decode streams every weight once from memory; the hardware prefetchers alone left one
    /// core at 5.8 GB/s on Q4_1 where a plain `f32` sum streams 9 (`kernel_bandwidth cpu`,
    /// one thread). Asking for the bytes 2 KiB ahead brought Q4_1 to 8.4–9.2 GB/s (640 bytes:
    /// 7.2, 1 KiB: 7.9, 4–8 KiB: no better and noisier).
    const PREFETCH: usize = 2048;

    /// Prefetches the cache lines `PREFETCH` bytes past those of `block`. Past the end of
    /// the weights this asks for bytes nobody reads, which a prefetch may do: it never faults.
    #[inline]
    #[target_feature(enable = "sse")]
    fn prefetch_ahead(block: &[u8]) {
        for at in (0..block.len()).step_by(64) {
            _mm_prefetch::<_MM_HINT_T0>(block.as_ptr().wrapping_add(PREFETCH + at).cast());
        }
    }

    /// `$tile`: the multi-token kernel `$kernel` over every weight row of a piece (see
    /// [`super::RawDotTokens`]), built with the kernel's features so that it is inlined.
    macro_rules! over_rows {
        ($tile:ident, $features:literal, $kernel:ident) => {
            #[target_feature(enable = $features)]
            pub(in crate::dot) fn $tile(
                rows: &[u8],
                row_bytes: usize,
                acts: &QuantizedActs,
                t0: usize,
                out: &mut [[f32; crate::dot::TOKENS]],
            ) {
                for (row, o) in rows.chunks_exact(row_bytes.max(1)).zip(out.iter_mut()) {
                    *o = $kernel::<{ crate::dot::TOKENS }>(row, acts, t0);
                }
            }
        };
    }

    /// The fused kernels whose inner step is [`mul_sum_madd`] (or its VNNI form), written once
    /// and built for both feature sets.
    ///
    /// Each takes `N` activation rows from `t0` at once (one in a decode, [`super::TOKENS`] in a
    /// prefill): a block is loaded and unpacked once for all of them, and each row's result is
    /// computed in the same order whatever `N`.
    macro_rules! byte_dot_kernels {
        ($features:literal, $mul_sum:ident) => {
            /// Q8_0 blocks (`f16` scale, 32 signed bytes) against 8-bit activations.
            #[inline]
            #[target_feature(enable = $features)]
            pub(in crate::dot) fn dot_q8_0_rows<const N: usize>(
                row: &[u8],
                acts: &QuantizedActs,
                t0: usize,
            ) -> [f32; N] {
                let (q, d, blocks) = acts.rows_and_blocks::<N>(t0, row, 34, 32);
                let f16 = f16_table();
                let mut acc = [_mm256_setzero_ps(); N];
                for (b, block) in row[..blocks * 34].chunks_exact(34).enumerate() {
                    prefetch_ahead(block);
                    // SAFETY: `block[2..]` holds 32 bytes; loads are unaligned.
                    let w = unsafe { _mm256_loadu_si256(block.as_ptr().add(2).cast()) };
                    let magnitude = _mm256_sign_epi8(w, w);
                    let dw = f16_at(f16, block, 0);
                    for k in 0..N {
                        // SAFETY: `b < blocks`, so `q[k]` holds 32 bytes from `32 b`.
                        let x = unsafe { _mm256_loadu_si256(q[k].as_ptr().add(32 * b).cast()) };
                        // SAFETY: `b < blocks`, so `d[k]` holds `2 b + 1`.
                        let xd = unsafe { *d[k].get_unchecked(2 * b) };
                        let sums = _mm256_cvtepi32_ps($mul_sum(
                            _mm256_setzero_si256(),
                            magnitude,
                            _mm256_sign_epi8(x, w),
                        ));
                        acc[k] = _mm256_fmadd_ps(sums, _mm256_set1_ps(dw * xd), acc[k]);
                    }
                }
                std::array::from_fn(|k| hsum(acc[k]))
            }

            /// Q4_1 blocks (`f16` scale and min, 16 bytes of nibbles: values 0–15 low, 16–31
            /// high) against 8-bit activations with their scaled sums (`q8_1`).
            #[inline]
            #[target_feature(enable = $features)]
            pub(in crate::dot) fn dot_q4_1_rows<const N: usize>(
                row: &[u8],
                acts: &QuantizedActs,
                t0: usize,
            ) -> [f32; N] {
                let (q, d, blocks) = acts.rows_and_blocks::<N>(t0, row, 20, 32);
                let s: [&[f32]; N] = std::array::from_fn(|k| acts.row_sum(t0 + k));
                let blocks = (0..N).fold(blocks, |b, k| b.min(s[k].len() / 2));
                let f16 = f16_table();
                let mut acc = [_mm256_setzero_ps(); N];
                let mut mins = [0.0f32; N];
                for (b, block) in row[..blocks * 20].chunks_exact(20).enumerate() {
                    prefetch_ahead(block);
                    let w = q4_1_values(block);
                    let (dw, mw) = (f16_at(f16, block, 0), f16_at(f16, block, 2));
                    for k in 0..N {
                        // SAFETY: `b < blocks`, so `q[k]` holds 32 bytes from `32 b`, and
                        // `d[k]` and `s[k]` hold `2 b + 1`. A `q8_1` block's sum is all in its
                        // first group (the second holds +0.0, so adding it changes no bit).
                        let (x, xd, sum) = unsafe {
                            (
                                _mm256_loadu_si256(q[k].as_ptr().add(32 * b).cast()),
                                *d[k].get_unchecked(2 * b),
                                *s[k].get_unchecked(2 * b),
                            )
                        };
                        let sums = _mm256_cvtepi32_ps($mul_sum(_mm256_setzero_si256(), w, x));
                        acc[k] = _mm256_fmadd_ps(sums, _mm256_set1_ps(dw * xd), acc[k]);
                        mins[k] = mw.mul_add(sum, mins[k]);
                    }
                }
                // The mins' total joins lane 0 before the horizontal sum: the order the
                // fidelity fixtures were measured with (Q4_1 subtracts large, nearly equal
                // terms, and with the total added after the sum SmolLM2's perplexity moves
                // by 1%).
                std::array::from_fn(|k| {
                    let total = _mm256_zextps128_ps256(_mm_set_ss(mins[k]));
                    hsum(_mm256_add_ps(acc[k], total))
                })
            }

            /// Q5_0 blocks against 8-bit activations. Each weight is read as its unsigned 5-bit
            /// value `w + 16`: the fifth bits spread to bytes (`0x10` where set) and or'ed into
            /// the nibbles; each lane of four products then starts from the activation block's
            /// offsets (see [`Q5_0Block`]), which leaves it the signed dot `Σ w·x`, the integer
            /// ggml's kernel forms with `sign`.
            #[inline]
            #[target_feature(enable = $features)]
            pub(in crate::dot) fn dot_q5_0_rows<const N: usize>(
                row: &[u8],
                acts: &QuantizedActs,
                t0: usize,
            ) -> [f32; N] {
                let (_, d, blocks) = acts.rows_and_blocks::<N>(t0, row, 22, 32);
                let x: [&[Q5_0Block]; N] = std::array::from_fn(|k| acts.row_q5_0_blocks(t0 + k));
                let blocks = (0..N).fold(blocks, |b, k| b.min(x[k].len()));
                let f16 = f16_table();
                let mut acc = [_mm256_setzero_ps(); N];
                for (b, block) in row[..blocks * 22].chunks_exact(22).enumerate() {
                    prefetch_ahead(block);
                    let w = q5_0_values(block);
                    let dw = f16_at(f16, block, 0);
                    for k in 0..N {
                        // SAFETY: `b < blocks`, so `x[k]` holds block `b` (its 32 quants and
                        // 8 lanes are unaligned loads) and `d[k]` holds `2 b + 1`.
                        let (q, offsets, xd) = unsafe {
                            let at = x[k].as_ptr().add(b);
                            (
                                _mm256_loadu_si256((&raw const (*at).q).cast()),
                                _mm256_loadu_si256((&raw const (*at).offsets).cast()),
                                *d[k].get_unchecked(2 * b),
                            )
                        };
                        let sums = _mm256_cvtepi32_ps($mul_sum(offsets, w, q));
                        acc[k] = _mm256_fmadd_ps(sums, _mm256_set1_ps(dw * xd), acc[k]);
                    }
                }
                std::array::from_fn(|k| hsum(acc[k]))
            }

            over_rows!(dot_q8_0_tile, $features, dot_q8_0_rows);
            over_rows!(dot_q4_1_tile, $features, dot_q4_1_rows);
            over_rows!(dot_q5_0_tile, $features, dot_q5_0_rows);

            /// This module's kernels as [`super::ByteDot`] picks them.
            pub(in crate::dot) const KERNELS: super::ByteDot = super::ByteDot {
                // SAFETY (each `unsafe`): `ByteDot`'s methods are unsafe, callable only
                // where this module's features were detected.
                raw: [
                    |r, a, t| unsafe { dot_q8_0_rows::<1>(r, a, t)[0] },
                    |r, a, t| unsafe { dot_q4_1_rows::<1>(r, a, t)[0] },
                    |r, a, t| unsafe { dot_q5_0_rows::<1>(r, a, t)[0] },
                ],
                tokens: [
                    |r, n, a, t, o| unsafe { dot_q8_0_tile(r, n, a, t, o) },
                    |r, n, a, t, o| unsafe { dot_q4_1_tile(r, n, a, t, o) },
                    |r, n, a, t, o| unsafe { dot_q5_0_tile(r, n, a, t, o) },
                ],
            };
        };
    }

    /// The byte-dot kernels (Q8_0, Q4_1, Q5_0) of one feature set, in that order.
    pub(crate) struct ByteDot {
        raw: [super::RawDot; 3],
        tokens: [super::RawDotTokens; 3],
    }

    impl ByteDot {
        fn index(format: QuantFormat) -> Option<usize> {
            match format {
                QuantFormat::Q8_0 => Some(0),
                QuantFormat::Q4_1 => Some(1),
                QuantFormat::Q5_0 => Some(2),
                _ => None,
            }
        }

        /// The single-row kernel for `format`, if it is a byte-dot format.
        ///
        /// # Safety
        /// The CPU has the features of the module these kernels come from.
        pub(crate) unsafe fn raw_dot(&self, format: QuantFormat) -> Option<super::RawDot> {
            Self::index(format).map(|i| self.raw[i])
        }

        /// The multi-row kernel for `format`, if it is a byte-dot format.
        ///
        /// # Safety
        /// The CPU has the features of the module these kernels come from.
        pub(crate) unsafe fn raw_dot_tokens(
            &self,
            format: QuantFormat,
        ) -> Option<super::RawDotTokens> {
            Self::index(format).map(|i| self.tokens[i])
        }
    }

    /// The byte-dot kernels built for `vnni`.
    pub(crate) fn byte_dot(vnni: super::Vnni) -> &'static ByteDot {
        match vnni {
            super::Vnni::None => &avx2::KERNELS,
            super::Vnni::Avx => &vnni::KERNELS,
            super::Vnni::Avx512 => &vnni512::KERNELS,
        }
    }

    /// With AVX2 and FMA.
    pub(super) mod avx2 {
        use super::*;
        byte_dot_kernels!("avx2,fma", mul_sum_madd);
    }

    /// With AVX-VNNI as well.
    pub(super) mod vnni {
        use super::*;
        byte_dot_kernels!("avx2,fma,avxvnni", mul_sum_vnni);
    }

    /// With AVX512-VNNI on 256-bit vectors as well.
    pub(super) mod vnni512 {
        use super::*;
        byte_dot_kernels!("avx2,fma,avx512vnni,avx512vl", mul_sum_vnni512);
    }

    over_rows!(dot_q4_k_tile, "avx2,fma", dot_q4_k_rows);
    over_rows!(dot_q6_k_tile, "avx2,fma", dot_q6_k_rows);

    /// Q4_K against Q8_K, bit for bit as [`super::dot_q4_k_portable`] computes it: per
    /// 32-value chunk, `maddubs` of the nibbles with the activations, weighted by the chunk's
    /// 6-bit scale (`madd`), in `i32` lanes, and the activations' sums weighted by the chunk's
    /// min; both exact integers for the block, then scaled once per block. (ggml's AVX2
    /// kernel instead scales each lane's sum and adds the lanes at the end; its kernel over
    /// repacked rows, which llama.cpp runs by default, scales whole-block integers as here,
    /// which also lets the octet kernels of [`crate::octet`] give the same results.)
    ///
    /// `N` activation rows from `t0` at once (one in a decode, [`super::TOKENS`] in a prefill): each
    /// block's scales and nibbles are unpacked once for all of them, and each row's result is
    /// computed in the same order whatever `N`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn dot_q4_k_rows<const N: usize>(
        row: &[u8],
        acts: &QuantizedActs,
        t0: usize,
    ) -> [f32; N] {
        let (xq, xd, blocks) = acts.rows_and_blocks::<N>(t0, row, 144, 256);
        let xsum: [&[i32]; N] = std::array::from_fn(|k| acts.row_isum(t0 + k));
        let blocks = (0..N).fold(blocks, |b, k| b.min(xsum[k].len() / 16));
        let low = _mm256_set1_epi8(0x0F);
        let f16 = f16_table();
        let mut total = [0.0f32; N];
        for b in 0..blocks {
            let block = &row[144 * b..144 * b + 144];
            prefetch_ahead(block);
            let packed = &block[4..16];
            let mut sumi = [_mm256_setzero_si256(); N];
            let mut summ = [0i32; N];
            for chunk in 0..4 {
                let (sc_lo, m_lo) = super::scale_min_k4(2 * chunk, packed);
                let (sc_hi, m_hi) = super::scale_min_k4(2 * chunk + 1, packed);
                // SAFETY: the block holds 128 nibble bytes from 16; unaligned load.
                let q = unsafe { _mm256_loadu_si256(block.as_ptr().add(16 + 32 * chunk).cast()) };
                let lo = _mm256_and_si256(q, low);
                let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), low);
                let (sc_lo_v, sc_hi_v) = (
                    _mm256_set1_epi16(i16::from(sc_lo)),
                    _mm256_set1_epi16(i16::from(sc_hi)),
                );
                let g = 16 * b + 4 * chunk;
                for k in 0..N {
                    // SAFETY: `xq[k]` holds 256 values from `256 b` (`b < blocks`).
                    let (xl, xh) = unsafe {
                        let x = xq[k].as_ptr().add(256 * b + 64 * chunk);
                        (
                            _mm256_loadu_si256(x.cast()),
                            _mm256_loadu_si256(x.add(32).cast()),
                        )
                    };
                    let p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, xl), sc_lo_v);
                    let p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, xh), sc_hi_v);
                    sumi[k] = _mm256_add_epi32(sumi[k], _mm256_add_epi32(p_lo, p_hi));
                    let s = xsum[k];
                    summ[k] += i32::from(m_lo) * (s[g] + s[g + 1])
                        + i32::from(m_hi) * (s[g + 2] + s[g + 3]);
                }
            }
            let (dw, mw) = (f16_at(f16, block, 0), f16_at(f16, block, 2));
            for k in 0..N {
                let d = dw * xd[k][16 * b];
                let dmin = mw * xd[k][16 * b];
                total[k] += d * hsum_i32(sumi[k]) as f32 - dmin * summ[k] as f32;
            }
        }
        total
    }

    /// Q6_K against Q8_K, bit for bit as [`super::dot_q6_k_portable`] computes it: the 6-bit
    /// values (0–63) rebuilt from nibbles and bit pairs, `maddubs` with the activations minus
    /// `maddubs` of 32 with them (the `- 32`), weighted by the 16-value scales, in `i32` lanes
    /// added into the block's exact integer, scaled once per block (see `dot_q4_k_rows`).
    ///
    /// `N` activation rows from `t0` at once (one in a decode, [`super::TOKENS`] in a prefill): each
    /// block's six-bit values are assembled once for all of them, and each row's result is
    /// computed in the same order whatever `N`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn dot_q6_k_rows<const N: usize>(
        row: &[u8],
        acts: &QuantizedActs,
        t0: usize,
    ) -> [f32; N] {
        let (xq, xd, blocks) = acts.rows_and_blocks::<N>(t0, row, 210, 256);
        let low4 = _mm256_set1_epi8(0x0F);
        let low2 = _mm256_set1_epi8(0x03);
        let m32 = _mm256_set1_epi8(32);
        let f16 = f16_table();
        let mut total = [0.0f32; N];
        for b in 0..blocks {
            let block = &row[210 * b..210 * b + 210];
            prefetch_ahead(block);
            let mut sumi = [_mm256_setzero_si256(); N];
            for half in 0..2 {
                let sc = &block[192 + 8 * half..192 + 8 * half + 8];
                // SAFETY: the block holds ql (128 bytes) and qh (64) at these offsets;
                // unaligned loads.
                let (ql0, ql1, qh) = unsafe {
                    let p = block.as_ptr();
                    (
                        _mm256_loadu_si256(p.add(64 * half).cast()),
                        _mm256_loadu_si256(p.add(64 * half + 32).cast()),
                        _mm256_loadu_si256(p.add(128 + 32 * half).cast()),
                    )
                };
                let h0 = _mm256_slli_epi16::<4>(_mm256_and_si256(qh, low2));
                let h1 = _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<2>(qh), low2));
                let h2 = _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<4>(qh), low2));
                let h3 = _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<6>(qh), low2));
                let values = [
                    _mm256_or_si256(_mm256_and_si256(ql0, low4), h0),
                    _mm256_or_si256(_mm256_and_si256(ql1, low4), h1),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(ql0), low4), h2),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(ql1), low4), h3),
                ];
                for (j, q) in values.into_iter().enumerate() {
                    let scales = _mm256_set_m128i(
                        _mm_set1_epi16(i16::from(sc[2 * j + 1] as i8)),
                        _mm_set1_epi16(i16::from(sc[2 * j] as i8)),
                    );
                    for k in 0..N {
                        // SAFETY: `xq[k]` holds 256 values from `256 b` (`b < blocks`).
                        let x = unsafe {
                            _mm256_loadu_si256(
                                xq[k].as_ptr().add(256 * b + 128 * half + 32 * j).cast(),
                            )
                        };
                        let p = _mm256_sub_epi16(
                            _mm256_maddubs_epi16(q, x),
                            _mm256_maddubs_epi16(m32, x),
                        );
                        sumi[k] = _mm256_add_epi32(sumi[k], _mm256_madd_epi16(p, scales));
                    }
                }
            }
            let dw = f16_at(f16, block, 208);
            for k in 0..N {
                total[k] += dw * xd[k][16 * b] * hsum_i32(sumi[k]) as f32;
            }
        }
        total
    }

    #[target_feature(enable = "avx2,fma")]
    fn offsets_avx2(o: &[f32], s: &[f32]) -> f32 {
        dot_f32_avx2(o, s)
    }

    /// Float dot product: two FMA accumulators of eight lanes.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn dot_f32_avx2(w: &[f32], x: &[f32]) -> f32 {
        let n = w.len().min(x.len());
        let mut acc0 = _mm256_setzero_ps();
        let mut acc1 = _mm256_setzero_ps();
        let mut i = 0;
        while i + 16 <= n {
            // SAFETY: `i + 16 <= n` and both slices hold at least `n` floats.
            unsafe {
                let a0 = _mm256_loadu_ps(w.as_ptr().add(i));
                let b0 = _mm256_loadu_ps(x.as_ptr().add(i));
                let a1 = _mm256_loadu_ps(w.as_ptr().add(i + 8));
                let b1 = _mm256_loadu_ps(x.as_ptr().add(i + 8));
                acc0 = _mm256_fmadd_ps(a0, b0, acc0);
                acc1 = _mm256_fmadd_ps(a1, b1, acc1);
            }
            i += 16;
        }
        let mut total = hsum(_mm256_add_ps(acc0, acc1));
        while i < n {
            total += w[i] * x[i];
            i += 1;
        }
        total
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::{TOKENS, Vnni, x86};
    use crate::QuantFormat;
    use crate::act::QuantizedActs;
    use crate::sample::{Rng, random_matrix};

    /// Each `vpdpbusd` build of the byte-dot kernels this CPU can run gives the AVX2 build's
    /// results bit for bit, one activation row and `TOKENS` at once, with extreme activations
    /// (a row with one large value rounds the others to ±127 and 0).
    #[test]
    fn vnni_kernels_equal_the_avx2_ones_bit_for_bit() {
        let Some(builds) = Vnni::builds_to_compare() else {
            return;
        };
        let mut rng = Rng(11);
        for cols in [32usize, 256, 768] {
            for scale in [1.0f32, 1000.0] {
                let x: Vec<f32> = (0..TOKENS * cols)
                    .map(|i| {
                        if i % 17 == 0 {
                            scale
                        } else {
                            rng.float() - 0.5
                        }
                    })
                    .collect();
                for format in [QuantFormat::Q8_0, QuantFormat::Q4_1, QuantFormat::Q5_0] {
                    let rows = 3;
                    let bytes = random_matrix(format, rows, cols, &mut rng);
                    let row_bytes = bytes.len() / rows;
                    let acts = &QuantizedActs::encode(format, &x, cols);
                    let run = |vnni: Vnni| {
                        let kernels = x86::byte_dot(vnni);
                        // SAFETY: `vnni` is available on this CPU (checked above).
                        let (raw, tokens) = unsafe {
                            (
                                kernels.raw_dot(format).expect("a byte-dot format"),
                                kernels.raw_dot_tokens(format).expect("a byte-dot format"),
                            )
                        };
                        let single: Vec<u32> = bytes
                            .chunks_exact(row_bytes)
                            .flat_map(|row| (0..TOKENS).map(move |t| raw(row, acts, t)))
                            .map(f32::to_bits)
                            .collect();
                        let mut out = vec![[0.0f32; TOKENS]; rows];
                        tokens(&bytes, row_bytes, acts, 0, &mut out);
                        let multi: Vec<u32> = out.concat().into_iter().map(f32::to_bits).collect();
                        (single, multi)
                    };
                    let want = run(Vnni::None);
                    for &vnni in &builds {
                        assert_eq!(run(vnni), want, "{vnni:?}, {format}, {cols} columns");
                    }
                }
            }
        }
    }
}
