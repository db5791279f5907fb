//! Decoding weight rows into signed bytes with a scale and an offset per 16 values.
//!
//! Every quantised format is brought to one shape, `value = scale[g] * q + offset[g]` for
//! the 16 values of group `g`, so one SIMD dot product serves all of them. The decoding
//! follows ggml's `dequantize_row_*` operation for operation, so [`dequantize_row`] gives
//! bit-identical values to ggml and is the scalar reference the kernels are tested against.

use crate::format::{QuantFormat, read_f16};

/// Values that share one scale and one offset in an [`UnpackedRow`].
pub const GROUP: usize = 16;

/// One weight row decoded to signed bytes (quantised formats) or `f32` (float formats).
#[derive(Debug, Default, Clone)]
pub struct UnpackedRow {
    /// The quants, one per value (quantised formats only).
    pub q: Vec<i8>,
    /// Per group of [`GROUP`] values: the multiplier of `q`.
    pub scale: Vec<f32>,
    /// Per group of [`GROUP`] values: the constant added after scaling.
    pub offset: Vec<f32>,
    /// The decoded values (float formats only).
    pub values: Vec<f32>,
}

impl UnpackedRow {
    fn reset_quant(&mut self, cols: usize) {
        self.q.resize(cols, 0);
        self.scale.resize(cols / GROUP, 0.0);
        self.offset.resize(cols / GROUP, 0.0);
    }
}

/// Decodes one row (`cols` values in `bytes`, a whole number of blocks) into `out`.
///
/// `bytes.len()` must equal `format.row_bytes(cols)`; callers check shapes once, up front.
pub fn unpack_row(format: QuantFormat, bytes: &[u8], cols: usize, out: &mut UnpackedRow) {
    match format {
        QuantFormat::F32 => {
            out.values.clear();
            out.values.extend(
                bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            );
        }
        QuantFormat::F16 => {
            out.values.clear();
            out.values.extend((0..cols).map(|i| read_f16(bytes, 2 * i)));
        }
        _ => {
            out.reset_quant(cols);
            let bb = format.block_bytes();
            let bl = format.block_len();
            for (b, block) in bytes.chunks_exact(bb).enumerate() {
                let q = &mut out.q[b * bl..(b + 1) * bl];
                let g0 = b * bl / GROUP;
                let scale = &mut out.scale[g0..g0 + bl / GROUP];
                let offset = &mut out.offset[g0..g0 + bl / GROUP];
                match format {
                    QuantFormat::Q4_0 => unpack_q4_0(block, q, scale, offset),
                    QuantFormat::Q4_1 => unpack_q4_1(block, q, scale, offset),
                    QuantFormat::Q5_0 => unpack_q5_0(block, q, scale, offset),
                    QuantFormat::Q8_0 => unpack_q8_0(block, q, scale, offset),
                    QuantFormat::Q4K => unpack_q4_k(block, q, scale, offset),
                    QuantFormat::Q5K => unpack_q5_k(block, q, scale, offset),
                    QuantFormat::Q6K => unpack_q6_k(block, q, scale, offset),
                    QuantFormat::F32 | QuantFormat::F16 => unreachable!("handled above"),
                }
            }
        }
    }
}

/// Dequantises one row to `f32`, bit-identical to ggml's `dequantize_row_*`.
pub fn dequantize_row(format: QuantFormat, bytes: &[u8], cols: usize, out: &mut Vec<f32>) {
    let mut row = UnpackedRow::default();
    unpack_row(format, bytes, cols, &mut row);
    out.clear();
    match format {
        QuantFormat::F32 | QuantFormat::F16 => out.extend_from_slice(&row.values),
        // ggml adds the min only for formats that have one (adding +0.0 would turn -0.0 to +0.0).
        QuantFormat::Q4_1 | QuantFormat::Q4K | QuantFormat::Q5K => out.extend(
            row.q
                .iter()
                .enumerate()
                .map(|(i, &q)| row.scale[i / GROUP] * f32::from(q) + row.offset[i / GROUP]),
        ),
        _ => out.extend(
            row.q
                .iter()
                .enumerate()
                .map(|(i, &q)| row.scale[i / GROUP] * f32::from(q)),
        ),
    }
}

fn unpack_q4_0(block: &[u8], q: &mut [i8], scale: &mut [f32], offset: &mut [f32]) {
    let d = read_f16(block, 0);
    for (j, &byte) in block[2..18].iter().enumerate() {
        q[j] = (byte & 0x0F) as i8 - 8;
        q[j + 16] = (byte >> 4) as i8 - 8;
    }
    scale.fill(d);
    offset.fill(0.0);
}

fn unpack_q4_1(block: &[u8], q: &mut [i8], scale: &mut [f32], offset: &mut [f32]) {
    let d = read_f16(block, 0);
    let m = read_f16(block, 2);
    for (j, &byte) in block[4..20].iter().enumerate() {
        q[j] = (byte & 0x0F) as i8;
        q[j + 16] = (byte >> 4) as i8;
    }
    scale.fill(d);
    offset.fill(m);
}

fn unpack_q5_0(block: &[u8], q: &mut [i8], scale: &mut [f32], offset: &mut [f32]) {
    let d = read_f16(block, 0);
    let qh = u32::from_le_bytes([block[2], block[3], block[4], block[5]]);
    for (j, &byte) in block[6..22].iter().enumerate() {
        let h0 = (((qh >> j) << 4) & 0x10) as u8;
        let h1 = ((qh >> (j + 12)) & 0x10) as u8;
        q[j] = ((byte & 0x0F) | h0) as i8 - 16;
        q[j + 16] = ((byte >> 4) | h1) as i8 - 16;
    }
    scale.fill(d);
    offset.fill(0.0);
}

fn unpack_q8_0(block: &[u8], q: &mut [i8], scale: &mut [f32], offset: &mut [f32]) {
    let d = read_f16(block, 0);
    for (dst, &byte) in q.iter_mut().zip(&block[2..34]) {
        *dst = byte as i8;
    }
    scale.fill(d);
    offset.fill(0.0);
}

/// The 6-bit scale and min of sub-block `j` from the 12 packed bytes of a Q4_K/Q5_K block.
#[inline]
pub(crate) fn scale_min_k4(j: usize, packed: &[u8]) -> (u8, u8) {
    if j < 4 {
        (packed[j] & 63, packed[j + 4] & 63)
    } else {
        (
            (packed[j + 4] & 0x0F) | ((packed[j - 4] >> 6) << 4),
            (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4),
        )
    }
}

/// Scales and offsets of the eight 32-value sub-blocks of a Q4_K/Q5_K block, per 16 values.
fn k4_scales(block: &[u8], scale: &mut [f32], offset: &mut [f32]) {
    let d = read_f16(block, 0);
    let dmin = read_f16(block, 2);
    let packed = &block[4..16];
    for sub in 0..8 {
        let (sc, m) = scale_min_k4(sub, packed);
        let (s, o) = (d * f32::from(sc), -(dmin * f32::from(m)));
        scale[2 * sub..2 * sub + 2].fill(s);
        offset[2 * sub..2 * sub + 2].fill(o);
    }
}

fn unpack_q4_k(block: &[u8], q: &mut [i8], scale: &mut [f32], offset: &mut [f32]) {
    k4_scales(block, scale, offset);
    let qs = &block[16..144];
    for chunk in 0..4 {
        for l in 0..32 {
            let byte = qs[32 * chunk + l];
            q[64 * chunk + l] = (byte & 0x0F) as i8;
            q[64 * chunk + 32 + l] = (byte >> 4) as i8;
        }
    }
}

fn unpack_q5_k(block: &[u8], q: &mut [i8], scale: &mut [f32], offset: &mut [f32]) {
    k4_scales(block, scale, offset);
    let qh = &block[16..48];
    let qs = &block[48..176];
    for chunk in 0..4 {
        let (u1, u2) = (1u8 << (2 * chunk), 2u8 << (2 * chunk));
        for l in 0..32 {
            let byte = qs[32 * chunk + l];
            let hi1 = if qh[l] & u1 != 0 { 16 } else { 0 };
            let hi2 = if qh[l] & u2 != 0 { 16 } else { 0 };
            q[64 * chunk + l] = ((byte & 0x0F) + hi1) as i8;
            q[64 * chunk + 32 + l] = ((byte >> 4) + hi2) as i8;
        }
    }
}

fn unpack_q6_k(block: &[u8], q: &mut [i8], scale: &mut [f32], offset: &mut [f32]) {
    let d = read_f16(block, 208);
    for half in 0..2 {
        let ql = &block[64 * half..64 * half + 64];
        let qh = &block[128 + 32 * half..128 + 32 * half + 32];
        let sc = &block[192 + 8 * half..192 + 8 * half + 8];
        let y = &mut q[128 * half..128 * half + 128];
        for l in 0..32 {
            let h = qh[l];
            y[l] = ((ql[l] & 0x0F) | ((h & 3) << 4)) as i8 - 32;
            y[l + 32] = ((ql[l + 32] & 0x0F) | (((h >> 2) & 3) << 4)) as i8 - 32;
            y[l + 64] = ((ql[l] >> 4) | (((h >> 4) & 3) << 4)) as i8 - 32;
            y[l + 96] = ((ql[l + 32] >> 4) | (((h >> 6) & 3) << 4)) as i8 - 32;
        }
        for g in 0..8 {
            scale[8 * half + g] = d * f32::from(sc[g] as i8);
        }
    }
    offset.fill(0.0);
}
