//! [`QuantOps`] on burn's CubeCL backend (the wgpu device: WebGPU in the browser, Vulkan
//! natively): kernels that read the GGUF blocks in place, one specialisation per format.
//!
//! The blocks are a `u32` buffer holding the file's bytes, so a kernel reads bytes by shifting
//! words: blocks of 18, 22, 34 or 210 bytes do not start on a word boundary. Everything is
//! computed in `f32` (no `shader-f16`, which Chrome on Linux lacks); the `f16` scales are decoded
//! from their bits.

use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::backend::{Backend, Cube, backend_extension};
use burn::tensor::{DType, Shape};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

use super::{QuantFormat, QuantGatedOps, QuantLayout, QuantOps};
use crate::fused::{activate, empty_like, writable};

/// Threads that share one output value: each sums every `THREADS`-th input, then the cube adds
/// the partial sums. 64 fits every WebGPU device (the guaranteed minimum is 256).
const THREADS: u32 = 64;

/// Tokens one cube of the matmul multiplies by the same decoded weights, when there are that
/// many (a prefill); a single token (decoding) gets a kernel of its own with a tile of one.
const TOKEN_TILE: u32 = crate::model::PREFILL_TILE as u32;

/// The most cubes a grid dimension may hold (WebGPU's `maxComputeWorkgroupsPerDimension`).
const MAX_CUBES: u32 = 65_535;

/// Byte `at` of the block buffer.
#[cube]
fn byte(blocks: &[u32], at: u32) -> u32 {
    (blocks[(at / 4) as usize] >> ((at % 4) * 8)) & 0xFF
}

/// The four bytes from byte `at` (any alignment) as one little-endian word: one load when `at`
/// is a multiple of four, two otherwise.
#[cube]
fn word_at(blocks: &[u32], at: u32) -> u32 {
    let first = blocks[(at / 4) as usize];
    let shift = (at % 4) * 8;
    if shift == 0 {
        first
    } else {
        // The next word exists: the bytes at..at + 4 are in the buffer.
        (first >> shift) | (blocks[(at / 4 + 1) as usize] << (32 - shift))
    }
}

/// Byte `i` (0..8) of eight bytes held as two words.
#[cube]
fn byte_of(low: u32, high: u32, i: u32) -> u32 {
    let word = if i < 4 { low } else { high };
    (word >> ((i % 4) * 8)) & 0xFF
}

/// The little-endian `u16` at byte `at`, which is even: every half of a GGUF block sits at an
/// even offset in a block of an even size, so it never straddles two words (one load).
#[cube]
fn half_bits(blocks: &[u32], at: u32) -> u32 {
    (blocks[(at / 4) as usize] >> ((at % 4) * 8)) & 0xFFFF
}

/// The IEEE half at byte `at`, widened to `f32` from its bits.
#[cube]
fn half(blocks: &[u32], at: u32) -> f32 {
    let h = half_bits(blocks, at);
    let sign = (h >> 15) & 1;
    let exponent = (h >> 10) & 0x1F;
    let mantissa = h & 0x3FF;
    if exponent == 0 {
        // Zero or subnormal: mantissa · 2⁻²⁴.
        let magnitude = f32::cast_from(mantissa) * 5.960_464_5e-8;
        if sign == 1 { -magnitude } else { magnitude }
    } else if exponent == 31 {
        f32::reinterpret((sign << 31) | 0x7F80_0000 | (mantissa << 13))
    } else {
        f32::reinterpret((sign << 31) | ((exponent + 112) << 23) | (mantissa << 13))
    }
}

/// The signed byte at `at`.
#[cube]
fn signed_byte(blocks: &[u32], at: u32) -> f32 {
    let b = byte(blocks, at);
    let mut value = f32::cast_from(b);
    if b >= 128 {
        value -= 256.0;
    }
    value
}

/// The 6-bit scale and min of sub-block `j` (0..8) of a Q4_K/Q5_K block whose 12 packed bytes
/// start at `at` (ggml's `get_scale_min_k4`).
#[cube]
fn scale_min_k4(blocks: &[u32], at: u32, j: u32) -> (f32, f32) {
    let (scale, min) = if j < 4 {
        (byte(blocks, at + j) & 63, byte(blocks, at + j + 4) & 63)
    } else {
        let packed = byte(blocks, at + j + 4);
        (
            (packed & 0xF) | ((byte(blocks, at + j - 4) >> 6) << 4),
            (packed >> 4) | ((byte(blocks, at + j) >> 6) << 4),
        )
    };
    (f32::cast_from(scale), f32::cast_from(min))
}

/// Values `8k..8k + 8` of the row whose blocks start at byte `row`, into `w`.
///
/// Eight consecutive values of any block format share one scale and offset, so they are decoded
/// once as `a·q + b`; values past `cols` (plain formats only) are 0.
#[cube]
fn dequant8(
    blocks: &[u32],
    row: u32,
    k: u32,
    cols: u32,
    w: &mut Array<f32>,
    #[comptime] format: QuantFormat,
) {
    match format {
        QuantFormat::F32 | QuantFormat::F16 => {
            // Plain values; `cols` need not be a multiple of 8 here.
            #[unroll]
            for i in 0..8u32 {
                let col = k * 8 + i;
                w[i as usize] = if col >= cols {
                    0.0f32
                } else if comptime!(format == QuantFormat::F32) {
                    f32::reinterpret(blocks[((row / 4) + col) as usize])
                } else {
                    half(blocks, row + col * 2)
                };
            }
        }
        QuantFormat::Q4_0 | QuantFormat::Q4_1 | QuantFormat::Q5_0 | QuantFormat::Q8_0 => {
            let block_bytes = comptime!(format.block_bytes() as u32);
            let block = row + (k / 4) * block_bytes;
            // Which 8 of the block's 32: nibble formats keep values 0..16 in the low nibbles
            // of their 16 bytes and 16..32 in the high ones; Q8_0 has a byte each.
            let first = (k % 4) * 8;
            let shift = (first / 16) * 4;
            let quants = match format {
                QuantFormat::Q4_0 => block + 2 + first % 16,
                QuantFormat::Q4_1 => block + 4 + first % 16,
                QuantFormat::Q5_0 => block + 6 + first % 16,
                _ => block + 2 + first,
            };
            let low = word_at(blocks, quants);
            let high = word_at(blocks, quants + 4);
            // Q5_0's fifth bits: one word at byte 2, bit v for value v.
            let fifth = match format {
                QuantFormat::Q5_0 => word_at(blocks, block + 2) >> first,
                _ => 0u32,
            };
            let d = half(blocks, block);
            let offset = match format {
                QuantFormat::Q4_0 => d * -8.0f32,
                QuantFormat::Q4_1 => half(blocks, block + 2),
                QuantFormat::Q5_0 => d * -16.0f32,
                _ => 0.0f32,
            };
            #[unroll]
            for i in 0..8u32 {
                let b = byte_of(low, high, i);
                let q = match format {
                    QuantFormat::Q5_0 => {
                        f32::cast_from(((b >> shift) & 0xF) | (((fifth >> i) & 1) << 4))
                    }
                    QuantFormat::Q8_0 => {
                        let mut signed = f32::cast_from(b);
                        if b >= 128 {
                            signed -= 256.0;
                        }
                        signed
                    }
                    _ => f32::cast_from((b >> shift) & 0xF),
                };
                w[i as usize] = d * q + offset;
            }
        }
        QuantFormat::Q4K | QuantFormat::Q5K => {
            let block_bytes = comptime!(format.block_bytes() as u32);
            let block = row + (k / 32) * block_bytes;
            // Sub-block j (0..8) of 32 values; sub-blocks 2m and 2m+1 share 32 bytes, low
            // nibbles then high nibbles.
            let j = (k % 32) / 4;
            let first = (k % 4) * 8;
            let shift = (j % 2) * 4;
            let quants = match format {
                QuantFormat::Q4K => block + 16 + (j / 2) * 32 + first,
                _ => block + 48 + (j / 2) * 32 + first,
            };
            let low = word_at(blocks, quants);
            let high = word_at(blocks, quants + 4);
            // Q5_K's fifth bits: bit j of the 32 bytes at 16, one byte per value position.
            let fifth_low = match format {
                QuantFormat::Q5K => word_at(blocks, block + 16 + first),
                _ => 0u32,
            };
            let fifth_high = match format {
                QuantFormat::Q5K => word_at(blocks, block + 20 + first),
                _ => 0u32,
            };
            let (scale, min) = scale_min_k4(blocks, block + 4, j);
            let a = half(blocks, block) * scale;
            let offset = -(half(blocks, block + 2) * min);
            #[unroll]
            for i in 0..8u32 {
                let mut q = (byte_of(low, high, i) >> shift) & 0xF;
                if comptime!(format == QuantFormat::Q5K) {
                    q |= ((byte_of(fifth_low, fifth_high, i) >> j) & 1) << 4;
                }
                w[i as usize] = a * f32::cast_from(q) + offset;
            }
        }
        QuantFormat::Q6K => {
            let block = row + (k / 32) * 210;
            let v = (k % 32) * 8;
            // Two halves of 128 values; in each, four quarters of 32 share the same 32 `l`.
            let n = v / 128;
            let quarter = (v % 128) / 32;
            let l = v % 32;
            let low_at = block + n * 64 + (quarter % 2) * 32 + l;
            let low_shift = (quarter / 2) * 4;
            let high_at = block + 128 + n * 32 + l;
            let (low0, low1) = (word_at(blocks, low_at), word_at(blocks, low_at + 4));
            let (high0, high1) = (word_at(blocks, high_at), word_at(blocks, high_at + 4));
            let scale = signed_byte(blocks, block + 192 + n * 8 + l / 16 + quarter * 2);
            let a = half(blocks, block + 208) * scale;
            #[unroll]
            for i in 0..8u32 {
                let low = (byte_of(low0, low1, i) >> low_shift) & 0xF;
                let high = (byte_of(high0, high1, i) >> (quarter * 2)) & 3;
                w[i as usize] = a * (f32::cast_from(low | (high << 4)) - 32.0);
            }
        }
    }
}

/// Adds row `start`'s products with up to `tile` tokens from `first` (`count` of them) into
/// `sums`: this unit's share, every `THREADS`-th group of eight columns. The activations are
/// read `N` at a time (4 where the row's width allows it: a quarter of the loads), and added
/// one by one in column order all the same.
#[cube]
#[allow(clippy::too_many_arguments)]
fn accumulate<N: Size>(
    blocks: &[u32],
    x: &[Vector<f32, N>],
    start: u32,
    cols: u32,
    first: u32,
    count: u32,
    sums: &mut Array<f32>,
    #[comptime] tile: u32,
    #[comptime] width: u32,
    #[comptime] format: QuantFormat,
) {
    let chunks = cols.div_ceil(8);
    let steps = (chunks + THREADS - 1 - UNIT_POS) / THREADS;
    let mut w = Array::<f32>::new(8usize);
    for step in 0..steps {
        let k = UNIT_POS + step * THREADS;
        dequant8(blocks, start, k, cols, &mut w, format);
        #[unroll]
        for t in 0..tile {
            if t < count {
                // `cols` is a multiple of the width, so no vector straddles two tokens.
                let at = ((first + t) * cols + k * 8) / width;
                let mut dot = 0.0f32;
                #[unroll]
                for v in 0..comptime!(8 / width) {
                    // Past `cols` (plain formats) the weight is 0 but x may not exist; a
                    // vector that starts inside the row ends inside it (`cols` is a multiple
                    // of the width).
                    if k * 8 + v * width < cols {
                        let xs = x[(at + v) as usize];
                        #[unroll]
                        for j in 0..width {
                            dot += w[(v * width + j) as usize] * xs.extract(j as usize);
                        }
                    }
                }
                sums[t as usize] += dot;
            }
        }
    }
}

/// Sums each of `groups` groups of `THREADS` partial sums into the group's first: a halving
/// tree, unrolled (`THREADS` is 2⁶), the same additions in the same order for every product
/// kernel, so that a value is the same whichever kernel forms it.
#[cube]
fn sum_partials(partial: &mut Shared<[f32]>, #[comptime] groups: u32) {
    #[unroll]
    for level in 1..7u32 {
        let stride = THREADS >> level;
        if UNIT_POS < stride {
            #[unroll]
            for g in 0..groups {
                let here = (g * THREADS + UNIT_POS) as usize;
                let sum = partial[here] + partial[here + stride as usize];
                partial[here] = sum;
            }
        }
        sync_cube();
    }
}

/// `out[token, column + row] = Σ_col W[row, col] · x[token, col] (+ bias[row])` for one row
/// and a tile of up to `tile` tokens per cube, where `W` is the matrices `a`, `b`, `c` stacked
/// (`rows_a`, `rows_b`, `rows_c` rows of one width, each of its own format; a layer's Q, K and
/// V in one launch), each with its rows of `bias` (the biases end to end) when its flag says
/// so: six storage buffers and the launch's info, within WebGPU's eight. Each eight weights are
/// decoded once for the whole tile, so a prefill reads the matrix once per tile rather than
/// once per token; decoding one token gets `tile = 1`. Rows run over cube positions x and y
/// (a grid dimension holds at most 65,535 cubes), tiles over z. `out` is `out_width` values a
/// token, of which this product fills those from `out_column` (a matrix held in parts fills
/// one output part by part).
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn quant_matmul_kernel<N: Size>(
    a: &[u32],
    b: &[u32],
    c: &[u32],
    bias: &[f32],
    x: &[Vector<f32, N>],
    out: &mut [f32],
    rows_a: u32,
    rows_b: u32,
    rows_c: u32,
    cols: u32,
    row_bytes_a: u32,
    row_bytes_b: u32,
    row_bytes_c: u32,
    tokens: u32,
    first_tile: u32,
    out_width: u32,
    out_column: u32,
    #[comptime] tile: u32,
    #[comptime] width: u32,
    #[comptime] formats: [QuantFormat; 3],
    #[comptime] biased: [bool; 3],
) {
    let rows = rows_a + rows_b + rows_c;
    let row = CUBE_POS_X + CUBE_POS_Y * CUBE_COUNT_X;
    let first = (first_tile + CUBE_POS_Z) * tile;
    let count = min(tile, tokens - first);
    let mut partial = Shared::<[f32]>::new_slice((THREADS * tile) as usize);
    let mut sums = Array::<f32>::new(tile as usize);
    #[unroll]
    for t in 0..tile {
        sums[t as usize] = 0.0;
    }
    // The row is the same for the whole cube, so the branch is uniform.
    if row < rows_a {
        accumulate(
            a,
            x,
            row * row_bytes_a,
            cols,
            first,
            count,
            &mut sums,
            tile,
            width,
            comptime!(formats[0]),
        );
    } else if row < rows_a + rows_b {
        let local = row - rows_a;
        accumulate(
            b,
            x,
            local * row_bytes_b,
            cols,
            first,
            count,
            &mut sums,
            tile,
            width,
            comptime!(formats[1]),
        );
    } else if row < rows {
        let local = row - rows_a - rows_b;
        accumulate(
            c,
            x,
            local * row_bytes_c,
            cols,
            first,
            count,
            &mut sums,
            tile,
            width,
            comptime!(formats[2]),
        );
    }
    #[unroll]
    for t in 0..tile {
        partial[(t * THREADS + UNIT_POS) as usize] = sums[t as usize];
    }
    sync_cube();
    sum_partials(&mut partial, tile);
    if UNIT_POS < count && row < rows {
        let mut y = partial[(UNIT_POS * THREADS) as usize];
        // The bias after the whole sum, as a separate add would do it; the biases lie end
        // to end, as the rows do.
        if row < rows_a {
            if comptime!(biased[0]) {
                y += bias[row as usize];
            }
        } else if row < rows_a + rows_b {
            if comptime!(biased[1]) {
                y += bias[row as usize];
            }
        } else if comptime!(biased[2]) {
            y += bias[row as usize];
        }
        out[((first + UNIT_POS) * out_width + out_column + row) as usize] = y;
    }
}

/// `out[token, row] = act(G[row] · x[token]) · (U[row] · x[token])` for one row and a tile of
/// tokens per cube: [`quant_matmul_kernel`]'s sums of both rows (the same partial sums and the
/// same tree), then the activation of the fused gate ([`activate`]), so that the values are
/// those of the stacked product followed by the gate.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn quant_gated_kernel<N: Size>(
    gate: &[u32],
    up: &[u32],
    x: &[Vector<f32, N>],
    out: &mut [f32],
    rows: u32,
    cols: u32,
    row_bytes_gate: u32,
    row_bytes_up: u32,
    tokens: u32,
    first_tile: u32,
    #[comptime] tile: u32,
    #[comptime] width: u32,
    #[comptime] formats: [QuantFormat; 2],
    #[comptime] gelu: bool,
) {
    let row = CUBE_POS_X + CUBE_POS_Y * CUBE_COUNT_X;
    let first = (first_tile + CUBE_POS_Z) * tile;
    let count = min(tile, tokens - first);
    // The gate's sums in the first `tile` groups of `THREADS`, the up's in the next.
    let mut partial = Shared::<[f32]>::new_slice((2 * THREADS * tile) as usize);
    let mut g = Array::<f32>::new(tile as usize);
    let mut u = Array::<f32>::new(tile as usize);
    #[unroll]
    for t in 0..tile {
        g[t as usize] = 0.0;
        u[t as usize] = 0.0;
    }
    // The row is the same for the whole cube, so the branch is uniform.
    if row < rows {
        let (gate_format, up_format) = comptime!((formats[0], formats[1]));
        accumulate(
            gate,
            x,
            row * row_bytes_gate,
            cols,
            first,
            count,
            &mut g,
            tile,
            width,
            gate_format,
        );
        accumulate(
            up,
            x,
            row * row_bytes_up,
            cols,
            first,
            count,
            &mut u,
            tile,
            width,
            up_format,
        );
    }
    #[unroll]
    for t in 0..tile {
        partial[(t * THREADS + UNIT_POS) as usize] = g[t as usize];
        partial[((tile + t) * THREADS + UNIT_POS) as usize] = u[t as usize];
    }
    sync_cube();
    sum_partials(&mut partial, comptime!(2 * tile));
    if UNIT_POS < count && row < rows {
        let g = partial[(UNIT_POS * THREADS) as usize];
        let u = partial[((tile + UNIT_POS) * THREADS) as usize];
        out[((first + UNIT_POS) * rows + row) as usize] = activate(g, gelu) * u;
    }
}

/// `out[token, column + i] = Σ_col W[ids[i], col] · x[token, col]` for one id and a tile of up
/// to `tile` tokens per cube: [`quant_matmul_kernel`]'s sums of the id's row (the same partial
/// sums and the same tree), so that each value is the whole product's in that row. The output
/// head under a grammar: the logits of the allowed tokens only. Ids run over cube positions x
/// and y, tiles over z; `out` is laid out as [`quant_matmul_kernel`]'s.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn quant_matmul_rows_kernel<N: Size>(
    blocks: &[u32],
    ids: &[u32],
    x: &[Vector<f32, N>],
    out: &mut [f32],
    count: u32,
    rows: u32,
    cols: u32,
    row_bytes: u32,
    tokens: u32,
    first_tile: u32,
    out_width: u32,
    out_column: u32,
    #[comptime] tile: u32,
    #[comptime] width: u32,
    #[comptime] format: QuantFormat,
) {
    let i = CUBE_POS_X + CUBE_POS_Y * CUBE_COUNT_X;
    let first = (first_tile + CUBE_POS_Z) * tile;
    let here = min(tile, tokens - first);
    let mut partial = Shared::<[f32]>::new_slice((THREADS * tile) as usize);
    let mut sums = Array::<f32>::new(tile as usize);
    #[unroll]
    for t in 0..tile {
        sums[t as usize] = 0.0;
    }
    // The id is the same for the whole cube, so the branch is uniform.
    if i < count {
        // Ids are checked against the vocabulary by the model; a stray one reads the last row.
        let row = min(ids[i as usize], rows - 1);
        accumulate(
            blocks,
            x,
            row * row_bytes,
            cols,
            first,
            here,
            &mut sums,
            tile,
            width,
            format,
        );
    }
    #[unroll]
    for t in 0..tile {
        partial[(t * THREADS + UNIT_POS) as usize] = sums[t as usize];
    }
    sync_cube();
    sum_partials(&mut partial, tile);
    if UNIT_POS < here && i < count {
        let at = (first + UNIT_POS) * out_width + out_column + i;
        out[at as usize] = partial[(UNIT_POS * THREADS) as usize];
    }
}

/// Values `8k..8k + 8` (those below `cols`) of the row whose blocks start at byte `row_at`,
/// stored at `out[base + column]`.
#[cube]
fn store_row_chunk(
    blocks: &[u32],
    row_at: u32,
    k: u32,
    cols: u32,
    out: &mut [f32],
    base: u32,
    #[comptime] format: QuantFormat,
) {
    let mut w = Array::<f32>::new(8usize);
    dequant8(blocks, row_at, k, cols, &mut w, format);
    #[unroll]
    for v in 0..8u32 {
        let col = k * 8 + v;
        if col < cols {
            out[(base + col) as usize] = w[v as usize];
        }
    }
}

/// Eight values per unit, decoded as the matmul decodes them: `out[i, 8k..8k + 8] =
/// W[ids[i], 8k..8k + 8]`, where `W` is rows `first..first + rows` of a table held in parts:
/// only the rows of ids in this part are written (or past it, for the last part), so that the
/// parts, launched in turn on one `out`, give every id's row (as [`quant_owned_row_kernel`]
/// does for one).
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn quant_rows_kernel(
    blocks: &[u32],
    ids: &[u32],
    out: &mut [f32],
    first: u32,
    rows: u32,
    cols: u32,
    row_bytes: u32,
    total_chunks: u32,
    last: u32,
    #[comptime] format: QuantFormat,
) {
    let at = ABSOLUTE_POS as u32;
    if at < total_chunks {
        let chunks = cols.div_ceil(8);
        let i = at / chunks;
        let k = at % chunks;
        let id = ids[i as usize];
        if id >= first && (id - first < rows || last == 1) {
            // Ids are checked against the vocabulary by the model; a stray one reads the
            // last row.
            let row = min(id - first, rows - 1);
            store_row_chunk(blocks, row * row_bytes, k, cols, out, i * cols, format);
        }
    }
}

/// The buffer of `ids` as `u32`s: in place when they are (`QLinear::rows_of` and
/// `QLinear::forward_rows` write them so, with no trip through the host); another int type
/// (i32, i64) is read back and rewritten.
pub(crate) fn u32_ids(ids: CubeTensor) -> cubecl::server::Handle {
    let ids = into_contiguous(ids);
    if ids.dtype == DType::U32 {
        return ids.handle;
    }
    let client = ids.client.clone();
    let values: Vec<u32> = burn_cubecl::ops::into_data_sync(ids)
        .convert::<i64>()
        .try_into_vec::<i64>()
        .unwrap_or_default()
        .into_iter()
        .map(|id| id.clamp(0, i64::from(u32::MAX)) as u32)
        .collect();
    client.create_from_slice(u32::as_bytes(&values))
}

/// The bytes of one row (the layer checked the shape when it was built).
fn row_bytes(layout: QuantLayout) -> u32 {
    layout.format.row_bytes(layout.cols).unwrap_or(0) as u32
}

/// Where a product's launches go: one cube per row of the output, over the grid's x then y
/// (a grid dimension holds at most 65,535 cubes), and tiles of tokens over z, as many launches
/// as z needs.
struct ProductGrid {
    across: u32,
    down: u32,
    /// The tokens a cube multiplies: [`TOKEN_TILE`] for a prefill, 1 for a decoding step.
    tile: u32,
    tiles: usize,
    /// How many activations a product reads at a time: 4 (one `vec4` load) where a row holds
    /// whole vectors, as every block format's rows do; else 1 (plain rows of any width).
    width: u32,
}

impl ProductGrid {
    fn new(rows: usize, tokens: usize, cols: usize) -> ProductGrid {
        let across = (rows as u32).clamp(1, MAX_CUBES);
        let tile = if tokens >= TOKEN_TILE as usize {
            TOKEN_TILE
        } else {
            1
        };
        ProductGrid {
            across,
            down: (rows as u32).div_ceil(across),
            tile,
            tiles: tokens.div_ceil(tile as usize),
            width: if cols.is_multiple_of(4) { 4 } else { 1 },
        }
    }

    /// Each launch's cubes and its first tile.
    fn launches(&self) -> impl Iterator<Item = (CubeCount, u32)> + '_ {
        (0..self.tiles).step_by(MAX_CUBES as usize).map(|first| {
            let count = (self.tiles - first).min(MAX_CUBES as usize);
            let cubes = CubeCount::Static(self.across, self.down, count as u32);
            (cubes, first as u32)
        })
    }
}

/// Products written into columns of a wider output (see [`Columns`]), on the wgpu device only:
/// the CPU joins parts by copying, which costs it no compiling.
#[backend_extension(Cube)]
pub trait QuantPartOps: Backend {
    /// [`QuantOps::quant_matmul`] written into columns `first..first + rows` of `out`
    /// (`[tokens, width]`), which it returns.
    fn quant_matmul_into(
        x: FloatTensor<Self>,
        blocks: IntTensor<Self>,
        layout: QuantLayout,
        out: FloatTensor<Self>,
        first: usize,
    ) -> FloatTensor<Self>;

    /// [`QuantOps::quant_matmul_rows`] written into columns `first..first + ids` of `out`
    /// (`[tokens, width]`), which it returns.
    fn quant_matmul_rows_into(
        x: FloatTensor<Self>,
        blocks: IntTensor<Self>,
        ids: IntTensor<Self>,
        layout: QuantLayout,
        out: FloatTensor<Self>,
        first: usize,
    ) -> FloatTensor<Self>;

    /// [`QuantOps::quant_rows`] of a table's part `blocks` (its rows `first..first + rows`),
    /// for `ids` of the whole table: the rows of the ids in this part (and past it, clamped
    /// to its last row, when `last`) written into `out` (`[ids, cols]`), which it returns;
    /// the others left as they are.
    fn quant_rows_into(
        blocks: IntTensor<Self>,
        ids: IntTensor<Self>,
        layout: QuantLayout,
        out: FloatTensor<Self>,
        first: usize,
        last: bool,
    ) -> FloatTensor<Self>;
}

impl QuantPartOps for Cube {
    fn quant_matmul_into(
        x: FloatTensor<Self>,
        blocks: IntTensor<Self>,
        layout: QuantLayout,
        out: FloatTensor<Self>,
        first: usize,
    ) -> FloatTensor<Self> {
        let blocks = [blocks.clone(), blocks.clone(), blocks];
        let none = QuantLayout { rows: 0, ..layout };
        let into = Some(Columns { out, first });
        matmul_stacked(x, blocks, [layout, none, none], None, [false; 3], into)
    }

    fn quant_matmul_rows_into(
        x: FloatTensor<Self>,
        blocks: IntTensor<Self>,
        ids: IntTensor<Self>,
        layout: QuantLayout,
        out: FloatTensor<Self>,
        first: usize,
    ) -> FloatTensor<Self> {
        matmul_rows(x, blocks, ids, layout, Some(Columns { out, first }))
    }

    fn quant_rows_into(
        blocks: IntTensor<Self>,
        ids: IntTensor<Self>,
        layout: QuantLayout,
        out: FloatTensor<Self>,
        first: usize,
        last: bool,
    ) -> FloatTensor<Self> {
        rows_into(blocks, ids, layout, out, first, last)
    }
}

/// Columns of an output wider than one product: `out` (`[tokens, width]`), from `first` on. A
/// matrix held in parts (each within a binding's size: Gemma 3's output head is two) fills
/// one output part by part, rather than each part its own and a join copying them: burn's
/// join is a kernel whose variants follow the parts' widths, so under a grammar, whose masks
/// allow a different number of tokens in each part every step, new ones kept compiling
/// during requests.
struct Columns {
    out: CubeTensor,
    first: usize,
}

/// The output of a product of `rows` rows over `tokens` tokens beside `x`, its width and the
/// first column the product fills: a new one, or `into`'s (written in place when no other
/// tensor holds it, as [`writable`] decides).
fn output(
    x: &CubeTensor,
    tokens: usize,
    rows: usize,
    into: Option<Columns>,
) -> (CubeTensor, usize, usize) {
    match into {
        None => (empty_like(x, Shape::new([tokens, rows])), rows, 0),
        Some(Columns { out, first }) => {
            let out = writable(out);
            let [held, width] = [0, 1].map(|d| out.meta.shape()[d]);
            // The callers' contract (`QLinear`'s parts): a product past the output's last
            // column or token would write outside it.
            assert!(
                held == tokens && first + rows <= width,
                "columns {first}..{} of {tokens} tokens into an output of {held} × {width}",
                first + rows
            );
            (out, width, first)
        }
    }
}

/// `x` times rows `ids` of the matrix: `[tokens, ids]`, or written into `into`'s columns.
fn matmul_rows(
    x: CubeTensor,
    blocks: CubeTensor,
    ids: CubeTensor,
    layout: QuantLayout,
    into: Option<Columns>,
) -> CubeTensor {
    let x = into_contiguous(x);
    let blocks = into_contiguous(blocks);
    let count = ids.meta.shape()[0];
    let ids = u32_ids(ids);
    let (tokens, cols) = (x.meta.shape()[0], layout.cols);
    let (out, out_width, out_column) = output(&x, tokens, count, into);
    if count == 0 || tokens == 0 {
        return out;
    }
    let grid = ProductGrid::new(count, tokens, cols);
    for (cubes, first) in grid.launches() {
        // SAFETY: as in `matmul_stacked`: each buffer is bound with its length (the ids with
        // `count`, x with `tokens × cols` values, out with `tokens × out_width`, of which the
        // kernel writes columns `out_column..out_column + count`, within the width); the
        // kernel clamps every id to the matrix's rows.
        unsafe {
            quant_matmul_rows_kernel::launch(
                &out.client,
                cubes,
                CubeDim::new_1d(THREADS),
                grid.width as usize,
                BufferArg::from_raw_parts(blocks.handle.clone(), blocks.meta.shape()[0]),
                BufferArg::from_raw_parts(ids.clone(), count),
                BufferArg::from_raw_parts(x.handle.clone(), tokens * cols / grid.width as usize),
                BufferArg::from_raw_parts(out.handle.clone(), tokens * out_width),
                count as u32,
                layout.rows as u32,
                cols as u32,
                row_bytes(layout),
                tokens as u32,
                first,
                out_width as u32,
                out_column as u32,
                grid.tile,
                grid.width,
                layout.format,
            );
        }
    }
    out
}

/// `x · [A; B; C]ᵀ (+ biases)` for up to three matrices of one width, each of its own format
/// (`layouts`; a matrix with no rows is not read): `[tokens, Σ rows]`, or written into `into`'s
/// columns. `bias` is the biases end to end, each added where `biased` says.
fn matmul_stacked(
    x: CubeTensor,
    blocks: [CubeTensor; 3],
    layouts: [QuantLayout; 3],
    bias: Option<CubeTensor>,
    biased: [bool; 3],
    into: Option<Columns>,
) -> CubeTensor {
    let x = into_contiguous(x);
    let blocks = blocks.map(into_contiguous);
    // SAFETY (of each `BufferArg` below): it is bound with the length of the tensor it comes
    // from, and the kernel indexes below those lengths (see the launch).
    let cols = layouts[0].cols;
    let tokens = x.meta.shape()[0];
    let total: usize = layouts.iter().map(|l| l.rows).sum();
    let (out, out_width, out_column) = output(&x, tokens, total, into);
    let grid = ProductGrid::new(total, tokens, cols);
    let x_len = tokens * cols;
    let out_len = tokens * out_width;
    let formats = layouts.map(|l| l.format);
    // Biases short of Σ rows (not `QLinear::stacked_bias`'s) are not read.
    let bias = bias
        .map(into_contiguous)
        .filter(|b| b.meta.shape().num_elements() == total);
    let biased = [0, 1, 2].map(|i| bias.is_some() && biased[i] && layouts[i].rows > 0);
    // An absent bias is bound to `x` (any buffer does: the kernel never reads it).
    let bias_arg = || match &bias {
        Some(b) if biased.contains(&true) => unsafe {
            BufferArg::from_raw_parts(b.handle.clone(), total)
        },
        _ => unsafe { BufferArg::from_raw_parts(x.handle.clone(), x_len) },
    };
    for (cubes, first) in grid.launches() {
        // SAFETY: each buffer is bound with the length of the tensor it comes from, and the
        // kernel indexes below those lengths (rows × row_bytes ≤ words × 4 is checked when
        // each layer is built; tokens × cols = x's length; the biases hold Σ rows, checked
        // above, and are read only where given; a matrix with no rows is not read).
        unsafe {
            quant_matmul_kernel::launch(
                &out.client,
                cubes,
                CubeDim::new_1d(THREADS),
                grid.width as usize,
                BufferArg::from_raw_parts(blocks[0].handle.clone(), blocks[0].meta.shape()[0]),
                BufferArg::from_raw_parts(blocks[1].handle.clone(), blocks[1].meta.shape()[0]),
                BufferArg::from_raw_parts(blocks[2].handle.clone(), blocks[2].meta.shape()[0]),
                bias_arg(),
                BufferArg::from_raw_parts(x.handle.clone(), x_len / grid.width as usize),
                BufferArg::from_raw_parts(out.handle.clone(), out_len),
                layouts[0].rows as u32,
                layouts[1].rows as u32,
                layouts[2].rows as u32,
                cols as u32,
                row_bytes(layouts[0]),
                row_bytes(layouts[1]),
                row_bytes(layouts[2]),
                tokens as u32,
                first,
                out_width as u32,
                out_column as u32,
                grid.tile,
                grid.width,
                formats,
                biased,
            );
        }
    }
    out
}

impl QuantGatedOps for Cube {
    fn quant_matmul_gated(
        x: FloatTensor<Self>,
        gate: IntTensor<Self>,
        up: IntTensor<Self>,
        layouts: [QuantLayout; 2],
        gelu: bool,
    ) -> FloatTensor<Self> {
        let x = into_contiguous(x);
        let (gate, up) = (into_contiguous(gate), into_contiguous(up));
        let [gate_layout, up_layout] = layouts;
        let (rows, cols) = (gate_layout.rows, gate_layout.cols);
        let tokens = x.meta.shape()[0];
        let out = empty_like(&x, Shape::new([tokens, rows]));
        let grid = ProductGrid::new(rows, tokens, cols);
        for (cubes, first) in grid.launches() {
            // SAFETY: as in `matmul_stacked`: each buffer is bound with its tensor's length;
            // both matrices have `rows` rows of `cols` values (checked by `forward_gated` and
            // when each layer was built), x has `tokens × cols` values.
            unsafe {
                quant_gated_kernel::launch(
                    &out.client,
                    cubes,
                    CubeDim::new_1d(THREADS),
                    grid.width as usize,
                    BufferArg::from_raw_parts(gate.handle.clone(), gate.meta.shape()[0]),
                    BufferArg::from_raw_parts(up.handle.clone(), up.meta.shape()[0]),
                    BufferArg::from_raw_parts(
                        x.handle.clone(),
                        tokens * cols / grid.width as usize,
                    ),
                    BufferArg::from_raw_parts(out.handle.clone(), tokens * rows),
                    rows as u32,
                    cols as u32,
                    row_bytes(gate_layout),
                    row_bytes(up_layout),
                    tokens as u32,
                    first,
                    grid.tile,
                    grid.width,
                    [gate_layout.format, up_layout.format],
                    gelu,
                );
            }
        }
        out
    }
}

impl QuantOps for Cube {
    fn quant_matmul(
        x: FloatTensor<Self>,
        blocks: IntTensor<Self>,
        layout: QuantLayout,
    ) -> FloatTensor<Self> {
        let blocks = [blocks.clone(), blocks.clone(), blocks];
        let none = QuantLayout { rows: 0, ..layout };
        matmul_stacked(x, blocks, [layout, none, none], None, [false; 3], None)
    }

    fn quant_matmul_stacked(
        x: FloatTensor<Self>,
        a: IntTensor<Self>,
        b: IntTensor<Self>,
        c: IntTensor<Self>,
        layouts: [QuantLayout; 3],
        bias: FloatTensor<Self>,
        biased: [bool; 3],
    ) -> FloatTensor<Self> {
        matmul_stacked(x, [a, b, c], layouts, Some(bias), biased, None)
    }

    fn quant_matmul_rows(
        x: FloatTensor<Self>,
        blocks: IntTensor<Self>,
        ids: IntTensor<Self>,
        layout: QuantLayout,
    ) -> FloatTensor<Self> {
        matmul_rows(x, blocks, ids, layout, None)
    }

    fn quant_rows(
        blocks: IntTensor<Self>,
        ids: IntTensor<Self>,
        layout: QuantLayout,
    ) -> FloatTensor<Self> {
        let count = ids.meta.shape()[0];
        let out = empty_like(&blocks, Shape::new([count, layout.cols]));
        rows_into(blocks, ids, layout, out, 0, true)
    }
}

/// [`quant_rows_kernel`]: the rows of `ids` that fall in the part `blocks` (rows `first..` of
/// the table; and past it when `last`) written into `out` (`[ids, cols]`), which it returns.
fn rows_into(
    blocks: CubeTensor,
    ids: CubeTensor,
    layout: QuantLayout,
    out: CubeTensor,
    first: usize,
    last: bool,
) -> CubeTensor {
    let blocks = into_contiguous(blocks);
    let client = blocks.client.clone();
    let count = ids.meta.shape()[0];
    let ids_handle = u32_ids(ids);
    let out = writable(out);
    assert_eq!(
        out.meta.shape().num_elements(),
        count * layout.cols,
        "rows of {count} ids into an output of another size"
    );
    let row_bytes = row_bytes(layout);
    let total = count * layout.cols;
    let total_chunks = count * layout.cols.div_ceil(8);
    let cube_dim = CubeDim::new_1d(THREADS);
    let cubes = (total_chunks as u32).div_ceil(THREADS);
    let across = cubes.clamp(1, MAX_CUBES);
    let words = blocks.meta.shape()[0];
    // SAFETY: each buffer is bound with its length (`out` with the ids' rows, checked
    // above); the kernel clamps every id to the part's rows.
    unsafe {
        quant_rows_kernel::launch(
            &client,
            CubeCount::Static(across, cubes.div_ceil(across), 1),
            cube_dim,
            BufferArg::from_raw_parts(blocks.handle.clone(), words),
            BufferArg::from_raw_parts(ids_handle, count),
            BufferArg::from_raw_parts(out.handle.clone(), total),
            first as u32,
            layout.rows as u32,
            layout.cols as u32,
            row_bytes,
            total_chunks as u32,
            u32::from(last),
            layout.format,
        );
    }
    out
}

/// One row of a part of an embedding table (rows `first..first + rows` of the whole), for the
/// token id at `ids[at]`: written into `out` when the id falls in this part (or past it, for
/// the last part, clamped to its last row as [`quant_rows_kernel`] clamps), left alone when
/// it does not. The parts of a table, launched in turn on one `out`, give the row of any id:
/// the lookup of a recorded decoding step (`crate::step_graph`), whose id changes from one
/// replay to the next without the host choosing the part.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn quant_owned_row_kernel(
    blocks: &[u32],
    ids: &[u32],
    out: &mut [f32],
    at: u32,
    first: u32,
    rows: u32,
    cols: u32,
    row_bytes: u32,
    last: u32,
    #[comptime] format: QuantFormat,
) {
    let k = ABSOLUTE_POS as u32;
    let id = ids[at as usize];
    if k < cols.div_ceil(8) && id >= first && (id - first < rows || last == 1) {
        let row = min(id - first, rows - 1);
        store_row_chunk(blocks, row * row_bytes, k, cols, out, 0, format);
    }
}

/// [`quant_owned_row_kernel`] of one part (`blocks`, rows `first..first + layout.rows`) into
/// `out` (`[1, layout.cols]`), for the id at `ids[at]`.
pub(crate) fn owned_row_into(
    blocks: CubeTensor,
    ids: CubeTensor,
    out: &CubeTensor,
    at: usize,
    first: usize,
    layout: QuantLayout,
    last: bool,
) {
    let blocks = into_contiguous(blocks);
    let ids = into_contiguous(ids);
    let words = blocks.meta.shape()[0];
    let chunks = layout.cols.div_ceil(8) as u32;
    // SAFETY: `blocks` is bound with its words, `ids` with its values (`at` is below them,
    // the caller's step buffer), `out` with one row; the kernel reads the part's rows only (the
    // id clamped to them) and writes below `cols`.
    unsafe {
        quant_owned_row_kernel::launch(
            &blocks.client,
            CubeCount::Static(chunks.div_ceil(THREADS).max(1), 1, 1),
            CubeDim::new_1d(THREADS),
            BufferArg::from_raw_parts(blocks.handle.clone(), words),
            BufferArg::from_raw_parts(ids.handle.clone(), ids.meta.shape().num_elements()),
            BufferArg::from_raw_parts(out.handle.clone(), layout.cols),
            at as u32,
            first as u32,
            layout.rows as u32,
            layout.cols as u32,
            row_bytes(layout),
            u32::from(last),
            layout.format,
        );
    }
}
