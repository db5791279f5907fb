//! ggml's quantised block formats, one `#[repr(C)]` struct each, laid out byte for byte as
//! in `ggml-common.h`, and the scalar dequantisation of each: the reference that every
//! SIMD and GPU kernel is tested against.
//!
//! Each struct has a compile-time assertion of its size. The fields are plain integers
//! and `half::f16`, all `Pod`, so a slice of blocks can be viewed directly from tensor
//! bytes with [`blocks_from_bytes`] when the bytes are aligned (tensor data in a GGUF file
//! is aligned to 32 bytes), and read one block at a time otherwise.
//!
//! The arithmetic follows ggml's `dequantize_row_*` operation by operation (products
//! evaluated in the same order, no fused multiply-add), so the results are bit-exact
//! with ggml and with the `gguf` Python package's `gguf.quants.dequantize`.

use bytemuck::{Pod, Zeroable};
use half::f16;

use crate::types::{GgmlType, QK_K};

/// Converts an `f16` to `f32` exactly, keeping a NaN's payload as it is (as numpy's
/// software conversion does; `half`'s software path sets the quiet bit instead).
#[inline]
pub fn f16_to_f32(h: f16) -> f32 {
    let h = h.to_bits() as u32;
    let sign = (h & 0x8000) << 16;
    let exp = (h >> 10) & 0x1F;
    let man = h & 0x3FF;
    let bits = match exp {
        0 if man == 0 => sign,
        0 => {
            // Subnormal: normalise the mantissa.
            let shift = man.leading_zeros() - 21;
            let man = (man << shift) & 0x3FF;
            sign | ((127 - 15 + 1 - shift) << 23) | (man << 13)
        }
        0x1F => sign | 0x7F80_0000 | (man << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// Converts a `bf16` (given as its bits) to `f32`: the bits shifted into the high half.
#[inline]
pub fn bf16_bits_to_f32(b: u16) -> f32 {
    f32::from_bits((b as u32) << 16)
}

/// A quantised block: `ELEMS` values in `size_of::<Self>()` bytes.
pub trait Block: Pod {
    /// The ggml type stored in blocks of this kind.
    const TYPE: GgmlType;
    /// Values per block.
    const ELEMS: usize = Self::TYPE.block_size();
    /// Writes the block's `ELEMS` values to `out[..ELEMS]`.
    ///
    /// # Panics
    /// If `out` is shorter than `ELEMS`.
    fn dequantize(&self, out: &mut [f32]);
}

macro_rules! assert_block_size {
    ($t:ty, $ty:expr) => {
        const _: () = assert!(std::mem::size_of::<$t>() == $ty.type_size());
    };
}

/// Q4_0: 32 values, `x = d * (q - 8)` with 4-bit `q`.
///
/// `qs[j]` holds value `j` in its low nibble and value `j + 16` in its high nibble.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ4_0 {
    /// Scale.
    pub d: f16,
    /// Nibbles: low = values 0..16, high = values 16..32.
    pub qs: [u8; 16],
}
assert_block_size!(BlockQ4_0, GgmlType::Q4_0);

impl Block for BlockQ4_0 {
    const TYPE: GgmlType = GgmlType::Q4_0;
    fn dequantize(&self, y: &mut [f32]) {
        let d = f16_to_f32(self.d);
        for j in 0..16 {
            let x0 = (self.qs[j] & 0x0F) as i32 - 8;
            let x1 = (self.qs[j] >> 4) as i32 - 8;
            y[j] = x0 as f32 * d;
            y[j + 16] = x1 as f32 * d;
        }
    }
}

/// Q4_1: 32 values, `x = d * q + m` with 4-bit `q`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ4_1 {
    /// Scale.
    pub d: f16,
    /// Minimum (offset).
    pub m: f16,
    /// Nibbles: low = values 0..16, high = values 16..32.
    pub qs: [u8; 16],
}
assert_block_size!(BlockQ4_1, GgmlType::Q4_1);

impl Block for BlockQ4_1 {
    const TYPE: GgmlType = GgmlType::Q4_1;
    fn dequantize(&self, y: &mut [f32]) {
        let d = f16_to_f32(self.d);
        let m = f16_to_f32(self.m);
        for j in 0..16 {
            let x0 = (self.qs[j] & 0x0F) as f32;
            let x1 = (self.qs[j] >> 4) as f32;
            y[j] = x0 * d + m;
            y[j + 16] = x1 * d + m;
        }
    }
}

/// Q5_0: 32 values, `x = d * (q - 16)` with 5-bit `q`: low 4 bits in `qs` (as Q4_0), the
/// fifth bit of value `i` in bit `i` of the little-endian `u32` `qh`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ5_0 {
    /// Scale.
    pub d: f16,
    /// Fifth bits, little-endian `u32`.
    pub qh: [u8; 4],
    /// Low nibbles.
    pub qs: [u8; 16],
}
assert_block_size!(BlockQ5_0, GgmlType::Q5_0);

impl Block for BlockQ5_0 {
    const TYPE: GgmlType = GgmlType::Q5_0;
    fn dequantize(&self, y: &mut [f32]) {
        let d = f16_to_f32(self.d);
        let qh = u32::from_le_bytes(self.qh);
        for j in 0..16 {
            let xh0 = ((qh >> j) << 4) & 0x10;
            let xh1 = (qh >> (j + 12)) & 0x10;
            let x0 = ((self.qs[j] as u32 & 0x0F) | xh0) as i32 - 16;
            let x1 = ((self.qs[j] as u32 >> 4) | xh1) as i32 - 16;
            y[j] = x0 as f32 * d;
            y[j + 16] = x1 as f32 * d;
        }
    }
}

/// Q5_1: 32 values, `x = d * q + m` with 5-bit `q` (bits as in Q5_0).
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ5_1 {
    /// Scale.
    pub d: f16,
    /// Minimum.
    pub m: f16,
    /// Fifth bits, little-endian `u32`.
    pub qh: [u8; 4],
    /// Low nibbles.
    pub qs: [u8; 16],
}
assert_block_size!(BlockQ5_1, GgmlType::Q5_1);

impl Block for BlockQ5_1 {
    const TYPE: GgmlType = GgmlType::Q5_1;
    fn dequantize(&self, y: &mut [f32]) {
        let d = f16_to_f32(self.d);
        let m = f16_to_f32(self.m);
        let qh = u32::from_le_bytes(self.qh);
        for j in 0..16 {
            let xh0 = ((qh >> j) << 4) & 0x10;
            let xh1 = (qh >> (j + 12)) & 0x10;
            let x0 = (self.qs[j] as u32 & 0x0F) | xh0;
            let x1 = (self.qs[j] as u32 >> 4) | xh1;
            y[j] = x0 as f32 * d + m;
            y[j + 16] = x1 as f32 * d + m;
        }
    }
}

/// Q8_0: 32 values, `x = d * q` with `q: i8`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ8_0 {
    /// Scale.
    pub d: f16,
    /// Values.
    pub qs: [i8; 32],
}
assert_block_size!(BlockQ8_0, GgmlType::Q8_0);

impl Block for BlockQ8_0 {
    const TYPE: GgmlType = GgmlType::Q8_0;
    fn dequantize(&self, y: &mut [f32]) {
        let d = f16_to_f32(self.d);
        for (y, &q) in y[..32].iter_mut().zip(&self.qs) {
            *y = q as f32 * d;
        }
    }
}

/// Q8_1: 32 values, `x = d * q`, with `s = d * sum(q)` precomputed (an activation format
/// for dot products; not stored in model files).
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ8_1 {
    /// Scale.
    pub d: f16,
    /// `d * sum(qs)`.
    pub s: f16,
    /// Values.
    pub qs: [i8; 32],
}
assert_block_size!(BlockQ8_1, GgmlType::Q8_1);

/// Q2_K: 256 values in 16 groups of 16; `x = d * (sc & 15) * q - dmin * (sc >> 4)` with
/// 2-bit `q`.
///
/// `qs` is two halves of 32 bytes; in half `h`, bits `2k..2k+2` of byte `l` hold value
/// `128h + 32k + l`. Group `g` (16 values) uses `scales[g]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ2K {
    /// Per-group scale (low nibble) and minimum (high nibble).
    pub scales: [u8; QK_K / 16],
    /// 2-bit values.
    pub qs: [u8; QK_K / 4],
    /// Super-block scale of the scales.
    pub d: f16,
    /// Super-block scale of the minimums.
    pub dmin: f16,
}
assert_block_size!(BlockQ2K, GgmlType::Q2_K);

impl Block for BlockQ2K {
    const TYPE: GgmlType = GgmlType::Q2_K;
    fn dequantize(&self, y: &mut [f32]) {
        let d = f16_to_f32(self.d);
        let min = f16_to_f32(self.dmin);
        let mut out = 0;
        let mut is = 0;
        for half in 0..2 {
            let q = &self.qs[32 * half..32 * half + 32];
            for shift in [0, 2, 4, 6] {
                for part in 0..2 {
                    let sc = self.scales[is];
                    is += 1;
                    let dl = d * (sc & 0xF) as f32;
                    let ml = min * (sc >> 4) as f32;
                    for l in 0..16 {
                        y[out] = dl * ((q[16 * part + l] >> shift) & 3) as f32 - ml;
                        out += 1;
                    }
                }
            }
        }
    }
}

/// Q3_K: 256 values in 16 groups of 16; `x = d * (s - 32) * q` with signed 6-bit group
/// scales `s` and 3-bit `q` in -4..4: the low 2 bits in `qs` (laid out as Q2_K), the
/// third bit in `hmask` (bit `j` of byte `l` for value `32j + l`), and a *clear* third
/// bit subtracts 4.
///
/// The 16 scales are packed in 12 bytes: the low 4 bits of scale `s` are the low nibble
/// of `scales[s]` for `s < 8` and the high nibble of `scales[s - 8]` otherwise; the high
/// 2 bits are bits `2(s / 4)..` of `scales[8 + s % 4]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ3K {
    /// Third bits.
    pub hmask: [u8; QK_K / 8],
    /// Low 2 bits.
    pub qs: [u8; QK_K / 4],
    /// Packed 6-bit group scales.
    pub scales: [u8; 12],
    /// Super-block scale.
    pub d: f16,
}
assert_block_size!(BlockQ3K, GgmlType::Q3_K);

impl BlockQ3K {
    /// The 16 signed group scales (before subtracting 32: values 0..64).
    pub fn unpacked_scales(&self) -> [u8; 16] {
        let mut out = [0u8; 16];
        for (s, o) in out.iter_mut().enumerate() {
            let low = if s < 8 {
                self.scales[s] & 0xF
            } else {
                self.scales[s - 8] >> 4
            };
            let high = (self.scales[8 + s % 4] >> (2 * (s / 4))) & 3;
            *o = low | (high << 4);
        }
        out
    }
}

impl Block for BlockQ3K {
    const TYPE: GgmlType = GgmlType::Q3_K;
    fn dequantize(&self, y: &mut [f32]) {
        let d_all = f16_to_f32(self.d);
        let scales = self.unpacked_scales();
        let mut out = 0;
        let mut is = 0;
        let mut m = 1u8;
        for half in 0..2 {
            let q = &self.qs[32 * half..32 * half + 32];
            for shift in [0, 2, 4, 6] {
                for part in 0..2 {
                    let dl = d_all * (scales[is] as i32 - 32) as f32;
                    is += 1;
                    let range = 16 * part..16 * part + 16;
                    for (&q, &h) in q[range.clone()].iter().zip(&self.hmask[range]) {
                        let low = ((q >> shift) & 3) as i32;
                        let sub = if h & m != 0 { 0 } else { 4 };
                        y[out] = dl * (low - sub) as f32;
                        out += 1;
                    }
                }
                m <<= 1;
            }
        }
    }
}

/// The 6-bit scale and minimum of group `j` (0..8) of a Q4_K or Q5_K block
/// (`get_scale_min_k4` in ggml).
pub fn scale_min_k4(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// Q4_K: 256 values in 8 groups of 32; `x = d * sc * q - dmin * m` with 6-bit `sc`, `m`
/// per group (see [`scale_min_k4`]) and 4-bit `q`.
///
/// `qs` is four chunks of 32 bytes; chunk `c` holds group `2c` in its low nibbles and
/// group `2c + 1` in its high nibbles.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ4K {
    /// Super-block scale of the scales.
    pub d: f16,
    /// Super-block scale of the minimums.
    pub dmin: f16,
    /// Packed 6-bit scales and minimums.
    pub scales: [u8; 12],
    /// 4-bit values.
    pub qs: [u8; QK_K / 2],
}
assert_block_size!(BlockQ4K, GgmlType::Q4_K);

impl Block for BlockQ4K {
    const TYPE: GgmlType = GgmlType::Q4_K;
    fn dequantize(&self, y: &mut [f32]) {
        let d = f16_to_f32(self.d);
        let min = f16_to_f32(self.dmin);
        for c in 0..4 {
            let (sc, m) = scale_min_k4(2 * c, &self.scales);
            let (d1, m1) = (d * sc as f32, min * m as f32);
            let (sc, m) = scale_min_k4(2 * c + 1, &self.scales);
            let (d2, m2) = (d * sc as f32, min * m as f32);
            let q = &self.qs[32 * c..32 * c + 32];
            let y = &mut y[64 * c..64 * c + 64];
            for l in 0..32 {
                y[l] = d1 * (q[l] & 0xF) as f32 - m1;
                y[l + 32] = d2 * (q[l] >> 4) as f32 - m2;
            }
        }
    }
}

/// Q5_K: as Q4_K with a fifth bit per value: bit `2c` of `qh[l]` for value `64c + l`
/// and bit `2c + 1` for value `64c + 32 + l`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ5K {
    /// Super-block scale of the scales.
    pub d: f16,
    /// Super-block scale of the minimums.
    pub dmin: f16,
    /// Packed 6-bit scales and minimums.
    pub scales: [u8; 12],
    /// Fifth bits.
    pub qh: [u8; QK_K / 8],
    /// Low 4 bits.
    pub qs: [u8; QK_K / 2],
}
assert_block_size!(BlockQ5K, GgmlType::Q5_K);

impl Block for BlockQ5K {
    const TYPE: GgmlType = GgmlType::Q5_K;
    fn dequantize(&self, y: &mut [f32]) {
        let d = f16_to_f32(self.d);
        let min = f16_to_f32(self.dmin);
        for c in 0..4 {
            let (sc, m) = scale_min_k4(2 * c, &self.scales);
            let (d1, m1) = (d * sc as f32, min * m as f32);
            let (sc, m) = scale_min_k4(2 * c + 1, &self.scales);
            let (d2, m2) = (d * sc as f32, min * m as f32);
            let (u1, u2) = (1u8 << (2 * c), 2u8 << (2 * c));
            let ql = &self.qs[32 * c..32 * c + 32];
            let y = &mut y[64 * c..64 * c + 64];
            for l in 0..32 {
                let h1 = if self.qh[l] & u1 != 0 { 16 } else { 0 };
                let h2 = if self.qh[l] & u2 != 0 { 16 } else { 0 };
                y[l] = d1 * ((ql[l] & 0xF) + h1) as f32 - m1;
                y[l + 32] = d2 * ((ql[l] >> 4) + h2) as f32 - m2;
            }
        }
    }
}

/// Q6_K: 256 values in 16 groups of 16; `x = d * sc * (q - 32)` with `sc: i8` and 6-bit
/// `q`: low 4 bits in `ql`, high 2 bits in `qh`.
///
/// In each half `h` (128 values), for `l` in 0..32: values `l`, `l+32`, `l+64`, `l+96`
/// take the low nibble of `ql[64h+l]`, the low nibble of `ql[64h+l+32]`, the high nibble
/// of `ql[64h+l]`, the high nibble of `ql[64h+l+32]`, and bits 0-1, 2-3, 4-5, 6-7 of
/// `qh[32h+l]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ6K {
    /// Low 4 bits.
    pub ql: [u8; QK_K / 2],
    /// High 2 bits.
    pub qh: [u8; QK_K / 4],
    /// Group scales.
    pub scales: [i8; QK_K / 16],
    /// Super-block scale.
    pub d: f16,
}
assert_block_size!(BlockQ6K, GgmlType::Q6_K);

impl Block for BlockQ6K {
    const TYPE: GgmlType = GgmlType::Q6_K;
    fn dequantize(&self, y: &mut [f32]) {
        let d = f16_to_f32(self.d);
        for h in 0..2 {
            let ql = &self.ql[64 * h..64 * h + 64];
            let qh = &self.qh[32 * h..32 * h + 32];
            let sc = &self.scales[8 * h..8 * h + 8];
            let y = &mut y[128 * h..128 * h + 128];
            for l in 0..32 {
                let is = l / 16;
                let q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i32 - 32;
                let q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
                let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
                let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
                y[l] = d * sc[is] as f32 * q1 as f32;
                y[l + 32] = d * sc[is + 2] as f32 * q2 as f32;
                y[l + 64] = d * sc[is + 4] as f32 * q3 as f32;
                y[l + 96] = d * sc[is + 6] as f32 * q4 as f32;
            }
        }
    }
}

/// Q8_K: 256 values, `x = d * q`, with per-16 sums `bsums` (an activation format for
/// K-quant dot products).
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ8K {
    /// Scale (a full `f32`).
    pub d: f32,
    /// Values.
    pub qs: [i8; QK_K],
    /// Sum of each group of 16 values.
    pub bsums: [i16; QK_K / 16],
}
assert_block_size!(BlockQ8K, GgmlType::Q8_K);

impl Block for BlockQ8K {
    const TYPE: GgmlType = GgmlType::Q8_K;
    fn dequantize(&self, y: &mut [f32]) {
        for (y, &q) in y[..QK_K].iter_mut().zip(&self.qs) {
            *y = self.d * q as f32;
        }
    }
}

/// The non-linear 4-bit code book of IQ4_NL and IQ4_XS (`kvalues_iq4nl`).
pub const KVALUES_IQ4NL: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// IQ4_NL: 32 values, `x = d * KVALUES_IQ4NL[q]` with 4-bit `q` (nibbles as Q4_0).
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockIq4Nl {
    /// Scale.
    pub d: f16,
    /// Code-book indices: low = values 0..16, high = values 16..32.
    pub qs: [u8; 16],
}
assert_block_size!(BlockIq4Nl, GgmlType::IQ4_NL);

impl Block for BlockIq4Nl {
    const TYPE: GgmlType = GgmlType::IQ4_NL;
    fn dequantize(&self, y: &mut [f32]) {
        let d = f16_to_f32(self.d);
        for j in 0..16 {
            y[j] = d * KVALUES_IQ4NL[(self.qs[j] & 0xF) as usize] as f32;
            y[j + 16] = d * KVALUES_IQ4NL[(self.qs[j] >> 4) as usize] as f32;
        }
    }
}

/// IQ4_XS: 256 values in 8 groups of 32; `x = d * (ls - 32) * KVALUES_IQ4NL[q]` with a
/// 6-bit group scale `ls`: low 4 bits in nibble `g % 2` of `scales_l[g / 2]`, high 2 bits
/// in bits `2g..2g+2` of `scales_h`. Each group's 16 bytes of `qs` are laid out as IQ4_NL.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockIq4Xs {
    /// Super-block scale.
    pub d: f16,
    /// High 2 bits of the 8 group scales.
    pub scales_h: u16,
    /// Low 4 bits of the 8 group scales.
    pub scales_l: [u8; QK_K / 64],
    /// Code-book indices.
    pub qs: [u8; QK_K / 2],
}
assert_block_size!(BlockIq4Xs, GgmlType::IQ4_XS);

impl Block for BlockIq4Xs {
    const TYPE: GgmlType = GgmlType::IQ4_XS;
    fn dequantize(&self, y: &mut [f32]) {
        let d = f16_to_f32(self.d);
        let scales_h = u16::from_le(self.scales_h);
        for ib in 0..QK_K / 32 {
            let ls = ((self.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) as i32
                | ((((scales_h >> (2 * ib)) & 3) as i32) << 4);
            let dl = d * (ls - 32) as f32;
            let qs = &self.qs[16 * ib..16 * ib + 16];
            let y = &mut y[32 * ib..32 * ib + 32];
            for j in 0..16 {
                y[j] = dl * KVALUES_IQ4NL[(qs[j] & 0xF) as usize] as f32;
                y[j + 16] = dl * KVALUES_IQ4NL[(qs[j] >> 4) as usize] as f32;
            }
        }
    }
}

/// Views `bytes` as blocks without copying, if they are a whole number of blocks and
/// suitably aligned; `None` otherwise (then read blocks one at a time with
/// `bytemuck::pod_read_unaligned`).
pub fn blocks_from_bytes<B: Block>(bytes: &[u8]) -> Option<&[B]> {
    bytemuck::try_cast_slice(bytes).ok()
}

#[cfg(target_endian = "big")]
compile_error!(
    "stampo-gguf reads little-endian block structs in place: big-endian targets are not supported"
);
