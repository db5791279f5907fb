//! Weight rows repacked eight at a time, for products with many activation rows (a prefill).
//!
//! The row-by-row kernels ([`crate::dot`]) unpack a block of one weight row and dot it with
//! an activation row in eight lanes, then sum the lanes: per 32 products about a dozen
//! instructions. Packed here, vector `l` of a block holds values `4l…4l+3` of eight rows (row
//! `r` in bytes `4r…4r+3`), so one `vpdpbusd` with four broadcast activation quants gives each
//! of eight lanes one row's four products: 32 products an instruction or three.
//!
//! The results are the row kernels' bit for bit. For Q5_0 and Q4_1, whose row kernels scale
//! each lane's sum: vector `l`'s products are the very integers the row kernel sums in its
//! lane `l`, each goes to an accumulator of its own, scaled and added in the same order, and
//! the eight accumulators are added in the order of the row kernel's horizontal sum. For
//! Q4_K and Q6_K, whose row kernels scale each block's exact integer: the same integers,
//! summed in another order (exactly), then scaled by the same operations. A prefill and the
//! decoding steps after it thus see the same numbers whichever path a product takes.
//!
//! The K-quants' units carry integer scales (per 32 values in Q4_K, per 16 in Q6_K) that
//! differ from row to row, so each unit's sums are multiplied by a vector of the eight rows'
//! scales (`vpmulld`) before they join the block's integer: 8 or 16 multiplications per
//! block beside 64 `vpdpbusd`.
//!
//! Formats: Q5_0 (Qwen2.5's and Gemma 3's attention and gate/up matrices), Q4_1 (all of
//! SmolLM2's), Q4_K and Q6_K (Qwen2.5's and Gemma 3's down projections, Gemma 3's attention
//! output), on x86-64 with AVX2 (and `vpdpbusd`, AVX-VNNI or AVX512-VNNI, where present).

use crate::act::QuantizedActs;
use crate::format::{QuantFormat, f16_at, f16_table};
use crate::unpack::scale_min_k4;

/// Rows of one matrix packed eight at a time (the last eight padded with zero rows).
///
/// Values go in units of 32 (a Q5_0 or Q4_1 block; an eighth of a Q4_K or Q6_K block), in
/// the order of the activations they multiply.
#[derive(Default)]
pub struct RowOctets {
    /// Blocks per row (of 32 values, or of 256 for Q4_K and Q6_K).
    blocks: usize,
    /// Units of 32 values per row.
    units: usize,
    /// `[octet][unit][l]`: values `4l…4l+3` of the unit in the eight rows, as unsigned bytes
    /// (Q5_0: `w + 16`; Q4_1 and Q4_K: the nibble; Q6_K: `w + 32`).
    values: Vec<[u8; 32]>,
    /// `[octet][block]`: the eight rows' scales (`d`).
    scales: Vec<[f32; 8]>,
    /// `[octet][block]`: the eight rows' minimums (Q4_1: `m`; Q4_K: `dmin`).
    mins: Vec<[f32; 8]>,
    /// `[octet][unit][half]`: the eight rows' integer scales (Q4_K: the unit's 6-bit scale,
    /// one per unit; Q6_K: the 8-bit scales of the unit's two halves of 16 values).
    unit_scales: Vec<[i32; 8]>,
    /// `[octet][unit]`: the eight rows' 6-bit minimums (Q4_K).
    unit_mins: Vec<[i32; 8]>,
}

impl RowOctets {
    /// An empty packing, to [`RowOctets::pack`] into.
    pub const fn new() -> Self {
        RowOctets {
            blocks: 0,
            units: 0,
            values: Vec::new(),
            scales: Vec::new(),
            mins: Vec::new(),
            unit_scales: Vec::new(),
            unit_mins: Vec::new(),
        }
    }

    /// Packs `rows` (rows of `row_bytes` each in `format`), reusing this packing's buffers.
    /// Formats without an octet kernel pack nothing.
    pub fn pack(&mut self, format: QuantFormat, rows: &[u8], row_bytes: usize) {
        // The values go through AVX2 where the CPU has it: one at a time, packing took as
        // long as a 16-token prefill's Q5_0 products and half a 64-token one's.
        #[cfg(target_arch = "x86_64")]
        let vector = crate::dot::has_avx2();
        #[cfg(not(target_arch = "x86_64"))]
        let vector = false;
        self.pack_with(format, rows, row_bytes, vector);
    }

    /// [`RowOctets::pack`], with the values transposed in AVX2 vectors or one at a time.
    fn pack_with(&mut self, format: QuantFormat, rows: &[u8], row_bytes: usize, vector: bool) {
        let Some((block_bytes, block_units, unit_scales)) = layout(format) else {
            // Nothing to pack: no octets.
            (self.blocks, self.units) = (0, 0);
            self.scales.clear();
            return;
        };
        let blocks = row_bytes / block_bytes;
        let units = blocks * block_units;
        let octets = (rows.len() / row_bytes.max(1)).div_ceil(8);
        self.blocks = blocks;
        self.units = units;
        fill(&mut self.values, octets * units * 8, [0; 32]);
        fill(&mut self.scales, octets * blocks, [0.0; 8]);
        fill(&mut self.mins, octets * blocks, [0.0; 8]);
        let (sc_len, min_len) = match format {
            QuantFormat::Q4K => (octets * units, octets * units),
            _ => (octets * units * unit_scales, 0),
        };
        fill(&mut self.unit_scales, sc_len, [0; 8]);
        fill(&mut self.unit_mins, min_len, [0; 8]);
        let f16 = f16_table();
        // The scales and minimums, row by row.
        for (i, row) in rows.chunks_exact(row_bytes.max(1)).enumerate() {
            let (octet, r) = (i / 8, i % 8);
            for (b, block) in row.chunks_exact(block_bytes).take(blocks).enumerate() {
                let at = octet * blocks + b;
                let unit0 = octet * units + b * block_units;
                match format {
                    QuantFormat::Q5_0 => self.scales[at][r] = f16_at(f16, block, 0),
                    QuantFormat::Q4_1 => {
                        self.scales[at][r] = f16_at(f16, block, 0);
                        self.mins[at][r] = f16_at(f16, block, 2);
                    }
                    QuantFormat::Q4K => {
                        self.scales[at][r] = f16_at(f16, block, 0);
                        self.mins[at][r] = f16_at(f16, block, 2);
                        for k in 0..8 {
                            let (sc, m) = scale_min_k4(k, &block[4..16]);
                            self.unit_scales[unit0 + k][r] = i32::from(sc);
                            self.unit_mins[unit0 + k][r] = i32::from(m);
                        }
                    }
                    QuantFormat::Q6K => {
                        self.scales[at][r] = f16_at(f16, block, 208);
                        // Unit `4h + k` of half `h` has scales `8h + 2k` and `8h + 2k + 1`.
                        for n in 0..8 {
                            let (h, k) = (n / 4, n % 4);
                            for g in 0..2 {
                                let sc = block[192 + 8 * h + 2 * k + g] as i8;
                                self.unit_scales[2 * (unit0 + n) + g][r] = i32::from(sc);
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        #[cfg(target_arch = "x86_64")]
        if vector {
            // SAFETY: the CPU has AVX2 (the callers' check).
            unsafe { x86::pack_values(format, rows, row_bytes, &mut self.values) };
            return;
        }
        let _ = vector;
        // The values one at a time, unit by unit.
        let mut unit = [0u8; 32];
        for (i, row) in rows.chunks_exact(row_bytes.max(1)).enumerate() {
            let (octet, r) = (i / 8, i % 8);
            for (b, block) in row.chunks_exact(block_bytes).take(blocks).enumerate() {
                for k in 0..block_units {
                    unit_values(format, block, k, &mut unit);
                    let at = 8 * (octet * units + b * block_units + k);
                    for (l, four) in unit.chunks_exact(4).enumerate() {
                        self.values[at + l][4 * r..4 * r + 4].copy_from_slice(four);
                    }
                }
            }
        }
    }

    /// How many octets of rows are packed.
    pub fn octets(&self) -> usize {
        self.scales.len() / self.blocks.max(1)
    }
}

/// A block's bytes, its units of 32 values and its integer scales a unit, for the formats
/// with octet kernels.
#[inline]
fn layout(format: QuantFormat) -> Option<(usize, usize, usize)> {
    match format {
        QuantFormat::Q5_0 => Some((22, 1, 0)),
        QuantFormat::Q4_1 => Some((20, 1, 0)),
        QuantFormat::Q4K => Some((144, 8, 1)),
        QuantFormat::Q6K => Some((210, 8, 2)),
        _ => None,
    }
}

/// The 32 values of unit `k` of a block in `format`, as unsigned bytes (Q5_0: `w + 16`; Q4_1
/// and Q4_K: the nibble; Q6_K: `w + 32`).
fn unit_values(format: QuantFormat, block: &[u8], k: usize, out: &mut [u8; 32]) {
    match format {
        QuantFormat::Q5_0 => {
            let qh = u32::from_le_bytes([block[2], block[3], block[4], block[5]]);
            for (j, &byte) in block[6..22].iter().enumerate() {
                out[j] = byte & 0x0F | (((qh >> j) & 1) as u8) << 4;
                out[j + 16] = byte >> 4 | (((qh >> (j + 16)) & 1) as u8) << 4;
            }
        }
        QuantFormat::Q4_1 => {
            for (j, &byte) in block[4..20].iter().enumerate() {
                out[j] = byte & 0x0F;
                out[j + 16] = byte >> 4;
            }
        }
        // Unit `2c` is the low nibbles of bytes `16 + 32c…`, unit `2c + 1` their high ones.
        QuantFormat::Q4K => {
            let q = &block[16 + 32 * (k / 2)..48 + 32 * (k / 2)];
            for (v, &byte) in out.iter_mut().zip(q) {
                *v = if k.is_multiple_of(2) {
                    byte & 0x0F
                } else {
                    byte >> 4
                };
            }
        }
        // Unit `4h + k` of half `h`: nibbles of `ql` (low ones for k < 2) with bit pair `k`
        // of `qh`.
        QuantFormat::Q6K => {
            let (h, k) = (k / 4, k % 4);
            let ql = &block[64 * h + 32 * (k % 2)..64 * h + 32 * (k % 2) + 32];
            let qh = &block[128 + 32 * h..160 + 32 * h];
            for (l, v) in out.iter_mut().enumerate() {
                let nibble = if k < 2 { ql[l] & 0x0F } else { ql[l] >> 4 };
                *v = nibble | ((qh[l] >> (2 * k)) & 3) << 4;
            }
        }
        _ => {}
    }
}

/// `v` cleared and refilled with `len` copies of `zero`, its allocation kept.
fn fill<T: Copy>(v: &mut Vec<T>, len: usize, zero: T) {
    v.clear();
    v.resize(len, zero);
}

/// Octet `octet` of `w` times activation rows `t0..t0 + out.len()` (encoded for `w`'s
/// format): each activation row's eight results, each bit for bit the
/// [`crate::dot::raw_dot`] of that weight row (padding rows give 0).
pub type OctetDot =
    fn(w: &RowOctets, octet: usize, acts: &QuantizedActs, t0: usize, out: &mut [[f32; 8]]);

/// The octet kernel for `format` on this CPU, where there is one (Q5_0, Q4_1, Q4_K and Q6_K,
/// with AVX2, and `vpdpbusd` in its AVX-VNNI or AVX512-VNNI encoding where present).
pub fn octet_dot(format: QuantFormat) -> Option<OctetDot> {
    #[cfg(target_arch = "x86_64")]
    if crate::dot::has_avx2() {
        // SAFETY: `vnni()` is the feature set detected on this CPU.
        let kernels = unsafe { x86::kernels(crate::dot::vnni()) };
        return match format {
            QuantFormat::Q5_0 => Some(kernels[0]),
            QuantFormat::Q4_1 => Some(kernels[1]),
            QuantFormat::Q4K => Some(kernels[2]),
            QuantFormat::Q6K => Some(kernels[3]),
            _ => None,
        };
    }
    let _ = format;
    None
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::RowOctets;
    use crate::QuantFormat;
    use crate::act::{Q5_0Block, QuantizedActs};
    use crate::dot::Vnni;
    use crate::dot::x86::{q4_1_values, q5_0_values};
    use std::arch::x86_64::*;

    /// The values of `rows` (Q5_0, Q4_1, Q4_K or Q6_K) into `values` as [`RowOctets::pack`]
    /// lays them out: each row's unit unpacked into a vector (Q5_0's and Q4_1's as the row
    /// kernels unpack them), then eight rows' groups of four values transposed (vector `l` of
    /// a unit takes group `l` of each row). Rows past the last leave zeros.
    #[target_feature(enable = "avx2")]
    pub(super) fn pack_values(
        format: QuantFormat,
        rows: &[u8],
        row_bytes: usize,
        values: &mut [[u8; 32]],
    ) {
        let Some((block_bytes, block_units, _)) = super::layout(format) else {
            return;
        };
        let blocks = row_bytes / block_bytes;
        let row_count = rows.len() / row_bytes.max(1);
        for octet in 0..row_count.div_ceil(8) {
            let count = (row_count - 8 * octet).min(8);
            for b in 0..blocks {
                for k in 0..block_units {
                    let mut v = [_mm256_setzero_si256(); 8];
                    for (r, v) in v.iter_mut().enumerate().take(count) {
                        let at = (8 * octet + r) * row_bytes + b * block_bytes;
                        *v = unit_vector(format, &rows[at..at + block_bytes], k);
                    }
                    let unit = (octet * blocks + b) * block_units + k;
                    for (out, v) in values[8 * unit..8 * unit + 8].iter_mut().zip(transposed(v)) {
                        // SAFETY: `out` holds 32 bytes; unaligned store.
                        unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), v) };
                    }
                }
            }
        }
    }

    /// The vector of [`super::unit_values`].
    #[inline]
    #[target_feature(enable = "avx2")]
    fn unit_vector(format: QuantFormat, block: &[u8], k: usize) -> __m256i {
        let low = _mm256_set1_epi8(0x0F);
        // SAFETY (each load): the slice holds the 32 bytes; unaligned loads.
        let load = |bytes: &[u8]| unsafe { _mm256_loadu_si256(bytes[..32].as_ptr().cast()) };
        match format {
            QuantFormat::Q5_0 => q5_0_values(block),
            QuantFormat::Q4_1 => q4_1_values(block),
            QuantFormat::Q4K => {
                let q = load(&block[16 + 32 * (k / 2)..]);
                if k.is_multiple_of(2) {
                    _mm256_and_si256(q, low)
                } else {
                    _mm256_and_si256(_mm256_srli_epi16::<4>(q), low)
                }
            }
            QuantFormat::Q6K => {
                let (h, k) = (k / 4, k % 4);
                let ql = load(&block[64 * h + 32 * (k % 2)..]);
                let qh = load(&block[128 + 32 * h..]);
                let nibbles = if k < 2 {
                    _mm256_and_si256(ql, low)
                } else {
                    _mm256_and_si256(_mm256_srli_epi16::<4>(ql), low)
                };
                // Bit pair `k` of each `qh` byte, moved to bits 4 and 5 (16-bit shifts: the
                // mask drops what crosses from the neighbouring byte).
                let pair = match k {
                    0 => _mm256_slli_epi16::<4>(qh),
                    1 => _mm256_slli_epi16::<2>(qh),
                    2 => qh,
                    _ => _mm256_srli_epi16::<2>(qh),
                };
                _mm256_or_si256(nibbles, _mm256_and_si256(pair, _mm256_set1_epi8(0x30)))
            }
            _ => _mm256_setzero_si256(),
        }
    }

    /// Eight vectors of eight `u32`s transposed: lane `r` of vector `l` is lane `l` of `v[r]`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn transposed(v: [__m256i; 8]) -> [__m256i; 8] {
        // Pairs of rows interleaved, then quads, then the 128-bit halves swapped across.
        let t: [__m256i; 8] = [
            _mm256_unpacklo_epi32(v[0], v[1]),
            _mm256_unpackhi_epi32(v[0], v[1]),
            _mm256_unpacklo_epi32(v[2], v[3]),
            _mm256_unpackhi_epi32(v[2], v[3]),
            _mm256_unpacklo_epi32(v[4], v[5]),
            _mm256_unpackhi_epi32(v[4], v[5]),
            _mm256_unpacklo_epi32(v[6], v[7]),
            _mm256_unpackhi_epi32(v[6], v[7]),
        ];
        let q: [__m256i; 8] = [
            _mm256_unpacklo_epi64(t[0], t[2]),
            _mm256_unpackhi_epi64(t[0], t[2]),
            _mm256_unpacklo_epi64(t[1], t[3]),
            _mm256_unpackhi_epi64(t[1], t[3]),
            _mm256_unpacklo_epi64(t[4], t[6]),
            _mm256_unpackhi_epi64(t[4], t[6]),
            _mm256_unpacklo_epi64(t[5], t[7]),
            _mm256_unpackhi_epi64(t[5], t[7]),
        ];
        [
            _mm256_permute2x128_si256::<0x20>(q[0], q[4]),
            _mm256_permute2x128_si256::<0x20>(q[1], q[5]),
            _mm256_permute2x128_si256::<0x20>(q[2], q[6]),
            _mm256_permute2x128_si256::<0x20>(q[3], q[7]),
            _mm256_permute2x128_si256::<0x31>(q[0], q[4]),
            _mm256_permute2x128_si256::<0x31>(q[1], q[5]),
            _mm256_permute2x128_si256::<0x31>(q[2], q[6]),
            _mm256_permute2x128_si256::<0x31>(q[3], q[7]),
        ]
    }

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

    /// `acts.$row(t0 + k)` for each of a pass's `N` activation rows. A plain loop: a closure
    /// called from `array::from_fn` inside a `target_feature` kernel is not inlined.
    macro_rules! rows_of {
        ($acts:ident . $row:ident, $t0:expr) => {{
            let mut rows = [&[][..]; N];
            for (k, row) in rows.iter_mut().enumerate() {
                *row = $acts.$row($t0 + k);
            }
            rows
        }};
    }

    /// The octet kernels, written once and built for each feature set. Each takes `N`
    /// activation rows from `t0` at once and gives each row's results as the one-row pass
    /// would: the rows share the loads of the packed weights, as many as the registers
    /// hold accumulators for (see [`PASS_ROWS`]).
    macro_rules! octet_kernels {
        ($features:literal, $mul_sum:path) => {
            /// Q5_0: each lane starts from the activation block's offset (−16 times the sum
            /// of its four quants, see `act::Q5_0Block`), as `dot_q5_0_rows`'s lanes do.
            #[target_feature(enable = $features)]
            pub(in crate::octet) fn dot_q5_0_octet<const N: usize>(
                w: &RowOctets,
                octet: usize,
                acts: &QuantizedActs,
                t0: usize,
            ) -> [[f32; 8]; N] {
                let x: [&[Q5_0Block]; N] = rows_of!(acts.row_q5_0_blocks, t0);
                let d: [&[f32]; N] = rows_of!(acts.row_d, t0);
                let mut blocks = w.blocks;
                for k in 0..N {
                    blocks = blocks.min(x[k].len()).min(d[k].len() / 2);
                }
                let first = octet * w.blocks;
                let values = &w.values[8 * first..8 * (first + blocks)];
                let scales = &w.scales[first..first + blocks];
                let mut acc = [[_mm256_setzero_ps(); 8]; N];
                for (b, (v, dw)) in values.chunks_exact(8).zip(scales).enumerate() {
                    // SAFETY: `dw` holds 8 scales; unaligned load.
                    let dw = unsafe { _mm256_loadu_ps(dw.as_ptr()) };
                    // `dw · xd` of each row, the row kernel's scale.
                    let mut scale = [dw; N];
                    for k in 0..N {
                        scale[k] = _mm256_mul_ps(dw, _mm256_set1_ps(d[k][2 * b]));
                    }
                    for l in 0..8 {
                        // SAFETY: `v[l]` holds 32 bytes; unaligned load.
                        let wl = unsafe { _mm256_loadu_si256(v[l].as_ptr().cast()) };
                        for k in 0..N {
                            let x = &x[k][b];
                            let offset = _mm256_set1_epi32(x.offsets[l]);
                            let sums = _mm256_cvtepi32_ps($mul_sum(offset, wl, four(&x.q, l)));
                            acc[k][l] = _mm256_fmadd_ps(sums, scale[k], acc[k][l]);
                        }
                    }
                }
                let mut out = [[0.0; 8]; N];
                for k in 0..N {
                    out[k] = lanes_summed(&acc[k]);
                }
                out
            }

            /// Q4_1: the nibbles against the `q8_1` activations, and each row's minimum
            /// times the block's scaled sum in a chain of its own, added to accumulator 0
            /// (and +0.0 to the others) before the sum, as `dot_q4_1_rows` does.
            #[target_feature(enable = $features)]
            pub(in crate::octet) fn dot_q4_1_octet<const N: usize>(
                w: &RowOctets,
                octet: usize,
                acts: &QuantizedActs,
                t0: usize,
            ) -> [[f32; 8]; N] {
                let q: [&[i8]; N] = rows_of!(acts.row_q, t0);
                let d: [&[f32]; N] = rows_of!(acts.row_d, t0);
                let s: [&[f32]; N] = rows_of!(acts.row_sum, t0);
                let mut blocks = w.blocks;
                for k in 0..N {
                    blocks = blocks
                        .min(q[k].len() / 32)
                        .min(d[k].len() / 2)
                        .min(s[k].len() / 2);
                }
                let first = octet * w.blocks;
                let values = &w.values[8 * first..8 * (first + blocks)];
                let scales = &w.scales[first..first + blocks];
                let mins = &w.mins[first..first + blocks];
                let mut acc = [[_mm256_setzero_ps(); 8]; N];
                let mut min_acc = [_mm256_setzero_ps(); N];
                for (b, ((v, dw), mw)) in values.chunks_exact(8).zip(scales).zip(mins).enumerate() {
                    // SAFETY: `dw` and `mw` hold 8 values each; unaligned loads.
                    let (dw, mw) =
                        unsafe { (_mm256_loadu_ps(dw.as_ptr()), _mm256_loadu_ps(mw.as_ptr())) };
                    let mut scale = [dw; N];
                    for k in 0..N {
                        scale[k] = _mm256_mul_ps(dw, _mm256_set1_ps(d[k][2 * b]));
                        min_acc[k] = _mm256_fmadd_ps(mw, _mm256_set1_ps(s[k][2 * b]), min_acc[k]);
                    }
                    for l in 0..8 {
                        // SAFETY: `v[l]` holds 32 bytes; unaligned load.
                        let wl = unsafe { _mm256_loadu_si256(v[l].as_ptr().cast()) };
                        for k in 0..N {
                            let xq = &q[k][32 * b..32 * b + 32];
                            let sums = $mul_sum(_mm256_setzero_si256(), wl, four(xq, l));
                            acc[k][l] =
                                _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale[k], acc[k][l]);
                        }
                    }
                }
                let mut out = [[0.0; 8]; N];
                for k in 0..N {
                    acc[k][0] = _mm256_add_ps(acc[k][0], min_acc[k]);
                    for l in 1..8 {
                        acc[k][l] = _mm256_add_ps(acc[k][l], _mm256_setzero_ps());
                    }
                    out[k] = lanes_summed(&acc[k]);
                }
                out
            }

            /// Q4_K: per unit of 32 values, the eight rows' exact integer products (eight
            /// `vpdpbusd` into one accumulator), times each row's 6-bit scale; the mins
            /// times the activations' sums beside; both scaled once per block, as
            /// `dot_q4_k_rows` does.
            #[target_feature(enable = $features)]
            pub(in crate::octet) fn dot_q4_k_octet<const N: usize>(
                w: &RowOctets,
                octet: usize,
                acts: &QuantizedActs,
                t0: usize,
            ) -> [[f32; 8]; N] {
                let q: [&[i8]; N] = rows_of!(acts.row_q, t0);
                let d: [&[f32]; N] = rows_of!(acts.row_d, t0);
                let xsum: [&[i32]; N] = rows_of!(acts.row_isum, t0);
                let mut blocks = w.blocks;
                for k in 0..N {
                    blocks = blocks
                        .min(q[k].len() / 256)
                        .min(d[k].len() / 16)
                        .min(xsum[k].len() / 16);
                }
                let units = &w.values[8 * octet * w.units..8 * (octet * w.units + 8 * blocks)];
                let unit_scales = &w.unit_scales[octet * w.units..octet * w.units + 8 * blocks];
                let unit_mins = &w.unit_mins[octet * w.units..octet * w.units + 8 * blocks];
                let first = octet * w.blocks;
                let (scales, mins) = (&w.scales[first..first + blocks], &w.mins[first..]);
                let mut total = [_mm256_setzero_ps(); N];
                for (b, dw) in scales.iter().enumerate() {
                    let mut sumi = [_mm256_setzero_si256(); N];
                    let mut summ = [_mm256_setzero_si256(); N];
                    for u in 0..8 {
                        let unit = 8 * b + u;
                        let v = &units[8 * unit..8 * unit + 8];
                        let mut sums = [_mm256_setzero_si256(); N];
                        for (l, v) in v.iter().enumerate() {
                            // SAFETY: `v` holds 32 bytes; unaligned load.
                            let wl = unsafe { _mm256_loadu_si256(v.as_ptr().cast()) };
                            for k in 0..N {
                                let x = &q[k][32 * unit..32 * unit + 32];
                                sums[k] = $mul_sum(sums[k], wl, four(x, l));
                            }
                        }
                        // SAFETY: each holds 8 values; unaligned loads.
                        let (sc, m) = unsafe {
                            (
                                _mm256_loadu_si256(unit_scales[unit].as_ptr().cast()),
                                _mm256_loadu_si256(unit_mins[unit].as_ptr().cast()),
                            )
                        };
                        for k in 0..N {
                            sumi[k] = _mm256_add_epi32(sumi[k], _mm256_mullo_epi32(sums[k], sc));
                            let xs = _mm256_set1_epi32(xsum[k][2 * unit] + xsum[k][2 * unit + 1]);
                            summ[k] = _mm256_add_epi32(summ[k], _mm256_mullo_epi32(m, xs));
                        }
                    }
                    // SAFETY: each holds 8 values; unaligned loads.
                    let (dw, mw) = unsafe {
                        (
                            _mm256_loadu_ps(dw.as_ptr()),
                            _mm256_loadu_ps(mins[b].as_ptr()),
                        )
                    };
                    for k in 0..N {
                        let xd = _mm256_set1_ps(d[k][16 * b]);
                        let (dd, dm) = (_mm256_mul_ps(dw, xd), _mm256_mul_ps(mw, xd));
                        let block = _mm256_sub_ps(
                            _mm256_mul_ps(dd, _mm256_cvtepi32_ps(sumi[k])),
                            _mm256_mul_ps(dm, _mm256_cvtepi32_ps(summ[k])),
                        );
                        total[k] = _mm256_add_ps(total[k], block);
                    }
                }
                let mut out = [[0.0; 8]; N];
                for k in 0..N {
                    out[k] = stored(total[k]);
                }
                out
            }

            /// Q6_K: per half of a unit (16 values), the eight rows' exact integer products
            /// of `w + 32` (four `vpdpbusd` from −32 times the activations' sum, leaving
            /// `Σ w·x`), times each row's scale; scaled once per block, as `dot_q6_k_rows`.
            #[target_feature(enable = $features)]
            pub(in crate::octet) fn dot_q6_k_octet<const N: usize>(
                w: &RowOctets,
                octet: usize,
                acts: &QuantizedActs,
                t0: usize,
            ) -> [[f32; 8]; N] {
                let q: [&[i8]; N] = rows_of!(acts.row_q, t0);
                let d: [&[f32]; N] = rows_of!(acts.row_d, t0);
                let xsum: [&[i32]; N] = rows_of!(acts.row_isum, t0);
                let mut blocks = w.blocks;
                for k in 0..N {
                    blocks = blocks
                        .min(q[k].len() / 256)
                        .min(d[k].len() / 16)
                        .min(xsum[k].len() / 16);
                }
                let units = &w.values[8 * octet * w.units..8 * (octet * w.units + 8 * blocks)];
                let unit_scales =
                    &w.unit_scales[2 * octet * w.units..2 * (octet * w.units + 8 * blocks)];
                let first = octet * w.blocks;
                let mut total = [_mm256_setzero_ps(); N];
                for (b, dw) in w.scales[first..first + blocks].iter().enumerate() {
                    let mut sumi = [_mm256_setzero_si256(); N];
                    for u in 0..8 {
                        let unit = 8 * b + u;
                        let v = &units[8 * unit..8 * unit + 8];
                        for half in 0..2 {
                            let g = 2 * unit + half;
                            let mut sums = [_mm256_setzero_si256(); N];
                            for k in 0..N {
                                sums[k] = _mm256_set1_epi32(-32 * xsum[k][g]);
                            }
                            for l in 4 * half..4 * half + 4 {
                                // SAFETY: `v[l]` holds 32 bytes; unaligned load.
                                let wl = unsafe { _mm256_loadu_si256(v[l].as_ptr().cast()) };
                                for k in 0..N {
                                    let x = &q[k][32 * unit..32 * unit + 32];
                                    sums[k] = $mul_sum(sums[k], wl, four(x, l));
                                }
                            }
                            // SAFETY: 8 values; unaligned load.
                            let sc = unsafe { _mm256_loadu_si256(unit_scales[g].as_ptr().cast()) };
                            for k in 0..N {
                                sumi[k] =
                                    _mm256_add_epi32(sumi[k], _mm256_mullo_epi32(sums[k], sc));
                            }
                        }
                    }
                    // SAFETY: 8 values; unaligned load.
                    let dw = unsafe { _mm256_loadu_ps(dw.as_ptr()) };
                    for k in 0..N {
                        let scale = _mm256_mul_ps(dw, _mm256_set1_ps(d[k][16 * b]));
                        total[k] = _mm256_add_ps(
                            total[k],
                            _mm256_mul_ps(scale, _mm256_cvtepi32_ps(sumi[k])),
                        );
                    }
                }
                let mut out = [[0.0; 8]; N];
                for k in 0..N {
                    out[k] = stored(total[k]);
                }
                out
            }
        };
    }

    /// The eight lanes of `v`.
    #[inline]
    #[target_feature(enable = "avx")]
    fn stored(v: __m256) -> [f32; 8] {
        let mut out = [0.0f32; 8];
        // SAFETY: `out` holds 8 values; unaligned store.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), v) };
        out
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

    /// `out`'s activation rows from `t0` through `many`, `N` at a time, and the rest through
    /// `one`.
    fn in_passes<const N: usize>(
        out: &mut [[f32; 8]],
        t0: usize,
        many: impl Fn(usize) -> [[f32; 8]; N],
        one: impl Fn(usize) -> [[f32; 8]; 1],
    ) {
        let mut passes = out.chunks_exact_mut(N);
        let mut t = t0;
        for pass in &mut passes {
            pass.copy_from_slice(&many(t));
            t += N;
        }
        for row in passes.into_remainder() {
            *row = one(t)[0];
            t += 1;
        }
    }

    /// Activation rows a pass of the Q5_0, Q4_1, Q4_K and Q6_K kernels takes where the
    /// kernels have AVX512VL's 32 vector registers (`crates/quant/examples/prefill_matmul.rs`
    /// on a Zen 4, against one row a pass: Q5_0 47 → 56 GMAC/s, Q4_1 47 → 55, Q4_K
    /// 60 → 85, Q6_K 61 → 80).
    const PASS_ROWS: [usize; 4] = [3, 3, 4, 3];

    /// The same with 16 registers (AVX2, and AVX-VNNI's VEX encoding): two rows' eight lane
    /// accumulators of Q5_0 and Q4_1 spill (measured 43 → 39 and 48 → 37 GMAC/s with the
    /// AVX2 build on that Zen 4); the K-quants' integer sums fit (54 → 59, 53 → 55).
    const PASS_ROWS_16: [usize; 4] = [1, 1, 2, 2];

    /// The Q5_0, Q4_1, Q4_K and Q6_K octet kernels built for `vnni`.
    ///
    /// # Safety
    /// [`Vnni::available`] holds for `vnni`: calling a kernel runs its instructions.
    pub(super) unsafe fn kernels(vnni: Vnni) -> [super::OctetDot; 4] {
        // A kernel of module `$m` run over the activation rows `$n` at a time, then one.
        macro_rules! passes {
            ($m:ident, $kernel:ident, $n:expr) => {
                // SAFETY (each `unsafe`): the caller vouches for `vnni`'s features.
                |w, o, a, t0, out| {
                    in_passes(
                        out,
                        t0,
                        |t| unsafe { $m::$kernel::<{ $n }>(w, o, a, t) },
                        |t| unsafe { $m::$kernel::<1>(w, o, a, t) },
                    )
                }
            };
        }
        macro_rules! of {
            ($m:ident, $n:expr) => {
                [
                    passes!($m, dot_q5_0_octet, $n[0]),
                    passes!($m, dot_q4_1_octet, $n[1]),
                    passes!($m, dot_q4_k_octet, $n[2]),
                    passes!($m, dot_q6_k_octet, $n[3]),
                ]
            };
        }
        match vnni {
            Vnni::None => of!(avx2, PASS_ROWS_16),
            Vnni::Avx => of!(vnni, PASS_ROWS_16),
            Vnni::Avx512 => of!(vnni512, PASS_ROWS),
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

    /// The AVX2 packing lays out the bytes the value-by-value one does, for row counts that
    /// leave the last octet partly padding.
    #[test]
    fn vector_packing_equals_the_scalar_one() {
        if !crate::dot::has_avx2() {
            println!("SKIPPED: this CPU has no AVX2");
            return;
        }
        let mut rng = Rng(17);
        let formats = [
            QuantFormat::Q5_0,
            QuantFormat::Q4_1,
            QuantFormat::Q4K,
            QuantFormat::Q6K,
        ];
        for format in formats {
            for rows in [1, 8, 13, 24] {
                let bytes = random_matrix(format, rows, 512, &mut rng);
                let (mut scalar, mut vector) = (RowOctets::new(), RowOctets::new());
                scalar.pack_with(format, &bytes, bytes.len() / rows, false);
                vector.pack_with(format, &bytes, bytes.len() / rows, true);
                assert_eq!(scalar.values, vector.values, "{format}, {rows} rows");
                let bits = |v: &[[f32; 8]]| -> Vec<u32> {
                    v.iter().flatten().map(|x| x.to_bits()).collect()
                };
                assert_eq!(bits(&scalar.scales), bits(&vector.scales));
                assert_eq!(bits(&scalar.mins), bits(&vector.mins));
                assert_eq!(scalar.unit_scales, vector.unit_scales);
                assert_eq!(scalar.unit_mins, vector.unit_mins);
            }
        }
    }

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
        let formats = [
            QuantFormat::Q5_0,
            QuantFormat::Q4_1,
            QuantFormat::Q4K,
            QuantFormat::Q6K,
        ];
        for (k, format) in formats.into_iter().enumerate() {
            let (rows, cols, tokens) = (11, 512, 9);
            let bytes = random_matrix(format, rows, cols, &mut rng);
            // Each activation row on a scale of its own.
            let x: Vec<f32> = (0..tokens * cols)
                .map(|i| {
                    let row_scale = 1.0 + 0.37 * (i / cols) as f32;
                    row_scale * if i % 17 == 0 { 900.0 } else { rng.float() }
                })
                .collect();
            let acts = QuantizedActs::encode(format, &x, cols);
            packed.pack(format, &bytes, bytes.len() / rows);
            // SAFETY: every build here is available on this CPU (checked above).
            let want = unsafe { x86::kernels(Vnni::None) }[k];
            for &vnni in &builds {
                // SAFETY: as above.
                let got = unsafe { x86::kernels(vnni) }[k];
                for octet in 0..packed.octets() {
                    let (mut a, mut b) = (vec![[0.0; 8]; tokens], vec![[0.0; 8]; tokens]);
                    got(&packed, octet, &acts, 0, &mut a);
                    want(&packed, octet, &acts, 0, &mut b);
                    let bits = |v: &[[f32; 8]]| -> Vec<u32> {
                        v.iter().flatten().map(|x| x.to_bits()).collect()
                    };
                    assert_eq!(bits(&a), bits(&b), "{vnni:?}, {format} octet {octet}");
                }
            }
        }
    }
}
