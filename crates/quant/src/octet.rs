//! Weight rows repacked eight at a time, for products with many activation rows (a prefill).
//!
//! The row-by-row kernels ([`crate::dot`]) unpack a block of one weight row and dot it with
//! an activation row in eight lanes, then sum the lanes: per 32 products about a dozen
//! instructions. Packed here, vector `l` of a block holds values `4l…4l+3` of eight rows (row
//! `r` in bytes `4r…4r+3`), so one `vpdpbusd` with four broadcast activation quants gives each
//! of eight lanes one row's four products: 32 products an instruction or three.
//!
//! The results are the row kernels' bit for bit: vector `l`'s products are the very integers
//! the row kernel sums in its lane `l`, each goes to an accumulator of its own, scaled and
//! added in the same order, and the eight accumulators are added in the order of the row
//! kernel's horizontal sum. A prefill and the decoding steps after it thus see the same
//! numbers whichever path a product takes.
//!
//! Formats: Q5_0 (Qwen2.5's and Gemma 3's attention and gate/up matrices) and Q4_1 (all of
//! SmolLM2's), on x86-64 with AVX2 (and `vpdpbusd`, AVX-VNNI or AVX512-VNNI, where present).

use crate::act::QuantizedActs;
use crate::format::{QuantFormat, f16_at, f16_table};

/// Rows of one matrix packed eight at a time (the last eight padded with zero rows).
#[derive(Default)]
pub struct RowOctets {
    /// Blocks of 32 values per row.
    blocks: usize,
    /// `[octet][block][l]`: values `4l…4l+3` of the eight rows, as unsigned bytes (Q5_0:
    /// `w + 16`; Q4_1: the nibble).
    values: Vec<[u8; 32]>,
    /// `[octet][block]`: the eight rows' scales.
    scales: Vec<[f32; 8]>,
    /// `[octet][block]`: the eight rows' minimums (Q4_1).
    mins: Vec<[f32; 8]>,
}

impl RowOctets {
    /// An empty packing, to [`RowOctets::pack`] into.
    pub const fn new() -> Self {
        RowOctets {
            blocks: 0,
            values: Vec::new(),
            scales: Vec::new(),
            mins: Vec::new(),
        }
    }

    /// Packs `rows` (rows of `row_bytes` each in `format`), reusing this packing's buffers.
    /// Formats without an octet kernel pack nothing.
    pub fn pack(&mut self, format: QuantFormat, rows: &[u8], row_bytes: usize) {
        let block_bytes = match format {
            QuantFormat::Q5_0 => 22,
            QuantFormat::Q4_1 => 20,
            _ => usize::MAX,
        };
        let blocks = row_bytes / block_bytes;
        let octets = (rows.len() / row_bytes.max(1)).div_ceil(8);
        self.blocks = blocks;
        self.values.clear();
        self.values.resize(octets * blocks * 8, [0; 32]);
        self.scales.clear();
        self.scales.resize(octets * blocks, [0.0; 8]);
        self.mins.clear();
        self.mins.resize(octets * blocks, [0.0; 8]);
        let f16 = f16_table();
        for (i, row) in rows.chunks_exact(row_bytes.max(1)).enumerate() {
            let (octet, r) = (i / 8, i % 8);
            for (b, block) in row.chunks_exact(block_bytes).take(blocks).enumerate() {
                let at = octet * blocks + b;
                self.scales[at][r] = f16_at(f16, block, 0);
                let mut u = [0u8; 32];
                if format == QuantFormat::Q5_0 {
                    let qh = u32::from_le_bytes([block[2], block[3], block[4], block[5]]);
                    for (j, &byte) in block[6..22].iter().enumerate() {
                        u[j] = byte & 0x0F | (((qh >> j) & 1) as u8) << 4;
                        u[j + 16] = byte >> 4 | (((qh >> (j + 16)) & 1) as u8) << 4;
                    }
                } else {
                    self.mins[at][r] = f16_at(f16, block, 2);
                    for (j, &byte) in block[4..20].iter().enumerate() {
                        u[j] = byte & 0x0F;
                        u[j + 16] = byte >> 4;
                    }
                }
                for (l, four) in u.chunks_exact(4).enumerate() {
                    self.values[8 * at + l][4 * r..4 * r + 4].copy_from_slice(four);
                }
            }
        }
    }

    /// How many octets of rows are packed.
    pub fn octets(&self) -> usize {
        self.scales.len() / self.blocks.max(1)
    }
}

/// Octet `octet` of `w` times activation row `t` (encoded for `w`'s format): the eight rows'
/// results, each bit for bit the [`crate::dot::raw_dot`] of that row (padding rows give 0).
pub type OctetDot = fn(w: &RowOctets, octet: usize, acts: &QuantizedActs, t: usize) -> [f32; 8];

/// The octet kernel for `format` on this CPU, where there is one (Q5_0 and Q4_1, with AVX2,
/// and `vpdpbusd` in its AVX-VNNI or AVX512-VNNI encoding where present).
pub fn octet_dot(format: QuantFormat) -> Option<OctetDot> {
    #[cfg(target_arch = "x86_64")]
    if crate::dot::has_avx2() {
        // SAFETY: `vnni()` is the feature set detected on this CPU.
        let kernels = unsafe { x86::kernels(crate::dot::vnni()) };
        return match format {
            QuantFormat::Q5_0 => Some(kernels[0]),
            QuantFormat::Q4_1 => Some(kernels[1]),
            _ => None,
        };
    }
    let _ = format;
    None
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::RowOctets;
    use crate::act::QuantizedActs;
    use crate::dot::Vnni;
    use std::arch::x86_64::*;

    /// Four activation quants `q[4l…4l+3]` in every lane.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn four(q: &[i8], l: usize) -> __m256i {
        let bytes = [q[4 * l], q[4 * l + 1], q[4 * l + 2], q[4 * l + 3]];
        _mm256_set1_epi32(i32::from_le_bytes(bytes.map(|b| b as u8)))
    }

    /// The eight accumulators added in the order of `dot::x86::hsum` over a row kernel's
    /// lanes: `((0 + 4) + (2 + 6)) + ((1 + 5) + (3 + 7))`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn lanes_summed(acc: &[__m256; 8]) -> [f32; 8] {
        let total = _mm256_add_ps(
            _mm256_add_ps(_mm256_add_ps(acc[0], acc[4]), _mm256_add_ps(acc[2], acc[6])),
            _mm256_add_ps(_mm256_add_ps(acc[1], acc[5]), _mm256_add_ps(acc[3], acc[7])),
        );
        let mut out = [0.0f32; 8];
        // SAFETY: `out` holds 8 values; unaligned store.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), total) };
        out
    }

    /// The octet kernels, written once and built for both feature sets.
    macro_rules! octet_kernels {
        ($features:literal, $mul_sum:path) => {
            /// Q5_0: each lane starts from the activation block's offset (−16 times the sum
            /// of its four quants, see `act::Q5_0Block`), as `dot_q5_0_rows`'s lanes do.
            #[target_feature(enable = $features)]
            pub(in crate::octet) fn dot_q5_0_octet(
                w: &RowOctets,
                octet: usize,
                acts: &QuantizedActs,
                t: usize,
            ) -> [f32; 8] {
                let x = acts.row_q5_0_blocks(t);
                let d = acts.row_d(t);
                let blocks = w.blocks.min(x.len()).min(d.len() / 2);
                let first = octet * w.blocks;
                let values = &w.values[8 * first..8 * (first + blocks)];
                let scales = &w.scales[first..first + blocks];
                let mut acc = [_mm256_setzero_ps(); 8];
                for (b, ((v, dw), x)) in values.chunks_exact(8).zip(scales).zip(x).enumerate() {
                    // SAFETY: `dw` holds 8 scales; unaligned load.
                    let dw = unsafe { _mm256_loadu_ps(dw.as_ptr()) };
                    // `dw · xd` of each row, the row kernel's scale.
                    let scale = _mm256_mul_ps(dw, _mm256_set1_ps(d[2 * b]));
                    for (l, acc) in acc.iter_mut().enumerate() {
                        // SAFETY: `v[l]` holds 32 bytes; unaligned load.
                        let wl = unsafe { _mm256_loadu_si256(v[l].as_ptr().cast()) };
                        let offset = _mm256_set1_epi32(x.offsets[l]);
                        let sums = $mul_sum(offset, wl, four(&x.q, l));
                        *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale, *acc);
                    }
                }
                lanes_summed(&acc)
            }

            /// Q4_1: the nibbles against the `q8_1` activations, and each row's minimum
            /// times the block's scaled sum in a chain of its own, added to accumulator 0
            /// (and +0.0 to the others) before the sum, as `dot_q4_1_rows` does.
            #[target_feature(enable = $features)]
            pub(in crate::octet) fn dot_q4_1_octet(
                w: &RowOctets,
                octet: usize,
                acts: &QuantizedActs,
                t: usize,
            ) -> [f32; 8] {
                let (q, d, s) = (acts.row_q(t), acts.row_d(t), acts.row_sum(t));
                let blocks = w.blocks.min(q.len() / 32).min(d.len() / 2).min(s.len() / 2);
                let first = octet * w.blocks;
                let values = &w.values[8 * first..8 * (first + blocks)];
                let scales = &w.scales[first..first + blocks];
                let mins = &w.mins[first..first + blocks];
                let mut acc = [_mm256_setzero_ps(); 8];
                let mut min_acc = _mm256_setzero_ps();
                for (b, ((v, dw), mw)) in values.chunks_exact(8).zip(scales).zip(mins).enumerate() {
                    // SAFETY: `dw` and `mw` hold 8 values each; unaligned loads.
                    let (dw, mw) =
                        unsafe { (_mm256_loadu_ps(dw.as_ptr()), _mm256_loadu_ps(mw.as_ptr())) };
                    let scale = _mm256_mul_ps(dw, _mm256_set1_ps(d[2 * b]));
                    let xq = &q[32 * b..32 * b + 32];
                    for (l, acc) in acc.iter_mut().enumerate() {
                        // SAFETY: `v[l]` holds 32 bytes; unaligned load.
                        let wl = unsafe { _mm256_loadu_si256(v[l].as_ptr().cast()) };
                        let sums = $mul_sum(_mm256_setzero_si256(), wl, four(xq, l));
                        *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale, *acc);
                    }
                    min_acc = _mm256_fmadd_ps(mw, _mm256_set1_ps(s[2 * b]), min_acc);
                }
                acc[0] = _mm256_add_ps(acc[0], min_acc);
                for acc in &mut acc[1..] {
                    *acc = _mm256_add_ps(*acc, _mm256_setzero_ps());
                }
                lanes_summed(&acc)
            }
        };
    }

    /// With AVX2 and FMA.
    pub(super) mod avx2 {
        use super::*;
        octet_kernels!("avx2,fma", crate::dot::x86::mul_sum_madd);
    }

    /// With AVX-VNNI as well.
    pub(super) mod vnni {
        use super::*;
        octet_kernels!("avx2,fma,avxvnni", crate::dot::x86::mul_sum_vnni);
    }

    /// With AVX512-VNNI on 256-bit vectors as well.
    pub(super) mod vnni512 {
        use super::*;
        octet_kernels!(
            "avx2,fma,avx512vnni,avx512vl",
            crate::dot::x86::mul_sum_vnni512
        );
    }

    /// The Q5_0 and Q4_1 octet kernels built for `vnni`.
    ///
    /// # Safety
    /// [`Vnni::available`] holds for `vnni`: calling a kernel runs its instructions.
    pub(super) unsafe fn kernels(vnni: Vnni) -> [super::OctetDot; 2] {
        // SAFETY (each `unsafe`): the caller vouches for `vnni`'s features.
        match vnni {
            Vnni::None => [
                |w, o, a, t| unsafe { avx2::dot_q5_0_octet(w, o, a, t) },
                |w, o, a, t| unsafe { avx2::dot_q4_1_octet(w, o, a, t) },
            ],
            Vnni::Avx => [
                |w, o, a, t| unsafe { vnni::dot_q5_0_octet(w, o, a, t) },
                |w, o, a, t| unsafe { vnni::dot_q4_1_octet(w, o, a, t) },
            ],
            Vnni::Avx512 => [
                |w, o, a, t| unsafe { vnni512::dot_q5_0_octet(w, o, a, t) },
                |w, o, a, t| unsafe { vnni512::dot_q4_1_octet(w, o, a, t) },
            ],
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::{RowOctets, x86};
    use crate::QuantFormat;
    use crate::act::QuantizedActs;
    use crate::dot::Vnni;
    use crate::sample::{Rng, random_matrix};

    /// Each `vpdpbusd` build of the octet kernels this CPU can run gives the AVX2 build's
    /// results bit for bit (the crate's kernel tests compare the build this CPU chooses with
    /// the row kernels).
    #[test]
    fn vnni_octet_kernels_equal_the_avx2_ones_bit_for_bit() {
        let Some(builds) = Vnni::builds_to_compare() else {
            return;
        };
        let mut rng = Rng(3);
        let mut packed = RowOctets::new();
        for (k, format) in [QuantFormat::Q5_0, QuantFormat::Q4_1]
            .into_iter()
            .enumerate()
        {
            let (rows, cols) = (11, 256);
            let bytes = random_matrix(format, rows, cols, &mut rng);
            let x: Vec<f32> = (0..cols)
                .map(|i| if i % 17 == 0 { 900.0 } else { rng.float() })
                .collect();
            let acts = QuantizedActs::encode(format, &x, cols);
            packed.pack(format, &bytes, bytes.len() / rows);
            // SAFETY: every build here is available on this CPU (checked above).
            let want = unsafe { x86::kernels(Vnni::None) }[k];
            for &vnni in &builds {
                // SAFETY: as above.
                let got = unsafe { x86::kernels(vnni) }[k];
                for octet in 0..packed.octets() {
                    assert_eq!(
                        got(&packed, octet, &acts, 0).map(f32::to_bits),
                        want(&packed, octet, &acts, 0).map(f32::to_bits),
                        "{vnni:?}, {format} octet {octet}"
                    );
                }
            }
        }
    }
}
