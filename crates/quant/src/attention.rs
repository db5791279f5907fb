//! The CPU loops of attention that the browser build vectorises (`simd128` in wasm32;
//! portable loops elsewhere, and as the check of the vector ones):
//! - the scores and the probabilities' mix over an `f16` KV cache read in place, for the CPUs
//!   that have no kernels of their own in `stampo-model` (x86-64 has AVX2 ones there);
//! - values rounded to `f16` (the cache's values, and the queries and probabilities, which
//!   llama.cpp's CPU backend rounds so);
//! - the softmax's exponentials, `f32::exp`'s values bit for bit.
//!
//! Over a context of 867 tokens, SmolLM2 in Chromium on one thread (the `f32` cache and burn's
//! products before) decoded at 28–31 tokens/s and prefilled at 58–62; with the cache read in
//! place 36–40 and 78–81 (bench/README.md).
//!
//! Layout (`stampo-model`'s cache): a kv head's keys are tiles of [`TILE`] positions, each
//! stored dimension by dimension (key `k`'s value `d` at `(k / 16 · dim + d) · 16 + k % 16`),
//! so that one tile row gives one dimension of 16 keys; its values are `[positions, dim]`.
//!
//! Each output is a chain of multiplies and adds in a fixed order, from zero, unfused (wasm
//! has no fused multiply-add), so the vector loops give the portable ones' results bit for
//! bit: each vector lane is one chain.

use core::ops::Range;

use half::f16;

/// Positions per key tile.
pub const TILE: usize = 16;

/// Query rows a block of [`scores_block`] or [`mix_block`] takes.
pub const MAX_ROWS: usize = 4;

/// `out[r][k] = Σ_d q[r][d] · key_k[d]` for the `rows` query rows of `q` (`[rows, dim]`,
/// `rows` ≤ [`MAX_ROWS`]) and the keys of tiles `tiles`, into `out` (`[rows, n]`; keys at `n`
/// and past are not written): each a chain over `d` in order.
///
/// # Panics
/// If a slice is shorter than the shapes say (the caller's bug, not the user's data).
pub fn scores_block(
    q: &[f32],
    rows: usize,
    keys: &[f16],
    dim: usize,
    n: usize,
    tiles: Range<usize>,
    out: &mut [f32],
) {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return crate::simd128::f16_scores_block(q, rows, keys, dim, n, tiles, out);
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    scores_block_portable(q, rows, keys, dim, n, tiles, out)
}

/// [`scores_block`]'s portable loop.
pub fn scores_block_portable(
    q: &[f32],
    rows: usize,
    keys: &[f16],
    dim: usize,
    n: usize,
    tiles: Range<usize>,
    out: &mut [f32],
) {
    for tile in tiles {
        let base = tile * dim * TILE;
        for j in 0..TILE {
            let k = tile * TILE + j;
            if k >= n {
                break;
            }
            for r in 0..rows.min(MAX_ROWS) {
                let row = &q[r * dim..(r + 1) * dim];
                out[r * n + k] = row.iter().enumerate().fold(0.0f32, |acc, (d, &x)| {
                    acc + x * keys[base + d * TILE + j].to_f32()
                });
            }
        }
    }
}

/// `out[r][d] = Σ_k p[r][k] · values[k][d]` over the keys `keys` for the `rows` rows of `p`
/// (`[rows, n]`, `rows` ≤ [`MAX_ROWS`]) and `values` (`[n, dim]`, `dim` a multiple of
/// [`TILE`]), into `out` (`[rows, dim]`): each a chain over the keys in order, added to
/// `out`'s value when `add` (a later chain of the same sum), else written.
///
/// # Panics
/// If a slice is shorter than the shapes say (the caller's bug, not the user's data).
#[allow(clippy::too_many_arguments)]
pub fn mix_block(
    p: &[f32],
    rows: usize,
    values: &[f16],
    dim: usize,
    n: usize,
    keys: Range<usize>,
    add: bool,
    out: &mut [f32],
) {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return crate::simd128::f16_mix_block(p, rows, values, dim, n, keys, add, out);
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    mix_block_portable(p, rows, values, dim, n, keys, add, out)
}

/// [`mix_block`]'s portable loop.
#[allow(clippy::too_many_arguments)]
pub fn mix_block_portable(
    p: &[f32],
    rows: usize,
    values: &[f16],
    dim: usize,
    n: usize,
    keys: Range<usize>,
    add: bool,
    out: &mut [f32],
) {
    let keys = keys.start..keys.end.min(n);
    for r in 0..rows.min(MAX_ROWS) {
        for d in 0..dim {
            let chain = keys.clone().fold(0.0f32, |acc, k| {
                acc + p[r * n + k] * values[k * dim + d].to_f32()
            });
            let o = &mut out[r * dim + d];
            *o = if add { *o + chain } else { chain };
        }
    }
}

/// Each value rounded to the nearest `f16` (ties to even) and widened back: what storing it in
/// the cache keeps, and how attention rounds its queries and probabilities as llama.cpp's
/// CPU backend does. `simd128` in wasm (where converting one value at a time was 7% of
/// decoding over a long context); elsewhere `half`'s conversions (F16C where the CPU has it).
pub fn round_to_f16(values: &mut [f32]) {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return crate::simd128::round_to_f16(values);
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    round_to_f16_portable(values)
}

/// [`round_to_f16`] through `half`'s slice conversions.
pub fn round_to_f16_portable(values: &mut [f32]) {
    use half::slice::HalfFloatSliceExt;
    let mut halves = [f16::ZERO; 256];
    for chunk in values.chunks_mut(256) {
        let halves = &mut halves[..chunk.len()];
        halves.convert_from_f32_slice(chunk);
        halves.convert_to_f32_slice(chunk);
    }
}

/// `exp(x − max)` of each value of `row` in place, `max` no less than any of them: `f32::exp`'s
/// values bit for bit. In wasm `f32::exp` is the `libm` crate's `expf` (FreeBSD's), which the
/// `simd128` loop computes four values at a time with the same operations; one call a value
/// was 6% of decoding over a long context.
pub fn exponentials(row: &mut [f32], max: f32) {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return crate::simd128::exponentials(row, max);
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    exponentials_portable(row, max)
}

/// [`exponentials`] one value at a time.
pub fn exponentials_portable(row: &mut [f32], max: f32) {
    for x in row.iter_mut() {
        *x = (*x - max).exp();
    }
}
