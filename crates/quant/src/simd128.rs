//! The `simd128` kernels of the browser build. Products of 8-bit values are widened to 16
//! bits and summed in pairs into 32-bit lanes (`i32x4.dot_i16x8_s`), which cannot overflow
//! for 16 products of values within ±128. Q8_0 and Q4_1 scale each block's lanes in `f32`;
//! Q5_0, Q4_K and Q6_K sum each block to the exact integer the portable loops of
//! [`crate::dot`] form and scale it the same way, so their results are those loops' bit for
//! bit.
//!
//! The single-row kernels (a decode, whose weights stream from memory) load the bytes of
//! several blocks (Q4_K and Q6_K: of the whole super-block) before working on any of them.
//! wasm has no prefetch instruction, and V8 keeps the loop's order: one that loads a block
//! and then works on it left memory idle in between. Under Node, one thread, weights far
//! larger than the L2 cache, GMAC/s went from 2.5 to 4.1 (Q5_0), 3.6 to 5.1 (Q8_0), 3.5 to
//! 4.9 (Q4_1), 3.7 to 7.0 (Q4_K) and 5.0 to 5.2 (Q6_K); over weights already in the cache
//! Q8_0 and Q4_1 got slower (10.5 to 8.1, 8.9 to 6.3), which a decode never sees.
//!
//! The kernels read the activations already widened to 16 bits ([`QuantizedActs::wide`],
//! made once per product), all but Q4_K's over four rows, and the single-row kernels of
//! Q8_0, Q4_1 and Q5_0 walk raw pointers: V8 kept every bounds check of the indexed loops
//! (read off `node --print-wasm-code-function-index`). Under Node, one thread, weights of
//! 48 MB, best of three runs alternating with the build before: single-row GMAC/s went
//! from 4.4 to 5.7 (Q5_0), 5.3 to 8.3 (Q8_0), 5.0 to 6.3 (Q4_1), 4.7 to 7.1 (Q4_K) and
//! 4.0 to 4.3 (Q6_K); over 64 rows Q4_1 from 9.2 to 9.9, Q5_0 and Q6_K unchanged within the
//! noise. Q4_K's four-row kernel measured slower on widened activations and keeps bytes.
//!
//! Q4_1, Q5_0, Q4_K and Q6_K also have kernels over four activation rows (a prefill), each
//! row's result the single-row kernel's bit for bit. Those of Q4_1, Q5_0 and Q4_K follow
//! each row with a pointer: indexing each row's slices, V8 ran them no faster than one row
//! at a time (Q6_K's unpacking is enough work that its indexed form pays).

use crate::act::QuantizedActs;
use crate::dot::IntRows;
use crate::format::{f16_at, f16_table};
use crate::unpack::{GROUP, scale_min_k4};
use core::arch::wasm32::*;

fn hsum(v: v128) -> f32 {
    f32x4_extract_lane::<0>(v)
        + f32x4_extract_lane::<1>(v)
        + f32x4_extract_lane::<2>(v)
        + f32x4_extract_lane::<3>(v)
}

/// Loads 16 bytes.
///
/// # Safety
/// `s` must hold at least 16 bytes.
unsafe fn load16<T>(s: &[T]) -> v128 {
    debug_assert!(std::mem::size_of_val(s) >= 16);
    // SAFETY: the caller guarantees 16 readable bytes; v128 loads need no alignment.
    unsafe { v128_load(s.as_ptr().cast()) }
}

/// `Σ a[i]·b[i]` over 16 signed bytes each, in four `i32` lanes.
fn dot_i8x16(a: v128, b: v128) -> v128 {
    i32x4_add(
        i32x4_dot_i16x8(i16x8_extend_low_i8x16(a), i16x8_extend_low_i8x16(b)),
        i32x4_dot_i16x8(i16x8_extend_high_i8x16(a), i16x8_extend_high_i8x16(b)),
    )
}

/// The `f16` at `p` through `table` ([`f16_at`] without its bounds check).
///
/// # Safety
/// `p` must point to two readable bytes.
#[inline(always)]
unsafe fn f16_at_ptr(table: &[f32; 1 << 16], p: *const u8) -> f32 {
    // SAFETY: the caller guarantees two bytes; the load needs no alignment.
    table[usize::from(u16::from_le(unsafe { p.cast::<u16>().read_unaligned() }))]
}

/// Loads 16 widened activation quants ([`QuantizedActs::wide`]): values 0–7, then 8–15.
///
/// # Safety
/// `x` must point to 16 readable values.
#[inline(always)]
unsafe fn load_wide(x: *const i16) -> [v128; 2] {
    // SAFETY: the caller guarantees 16 values; v128 loads need no alignment.
    unsafe { [v128_load(x.cast()), v128_load(x.add(8).cast())] }
}

/// [`load_wide`] of `x[at..at + 16]`.
#[inline(always)]
fn wide_at(x: &[i16], at: usize) -> [v128; 2] {
    let x = &x[at..at + 16];
    // SAFETY: `x` holds 16 values.
    unsafe { load_wide(x.as_ptr()) }
}

/// `Σ a[i]·x[i]` over 16 signed bytes `a` and 16 widened quants `x`, in four `i32` lanes.
#[inline(always)]
fn dot_wide(a: v128, x: [v128; 2]) -> v128 {
    dot_widened_wide(widen(a), x)
}

/// `Σ a[i]·x[i]` over 16 values both already widened, in four `i32` lanes.
#[inline(always)]
fn dot_widened_wide(a: [v128; 2], x: [v128; 2]) -> v128 {
    i32x4_add(i32x4_dot_i16x8(a[0], x[0]), i32x4_dot_i16x8(a[1], x[1]))
}

pub(crate) fn dot_int(rows: &IntRows<'_>) -> f32 {
    let groups = rows.wq.len() / GROUP;
    let mut acc = f32x4_splat(0.0);
    for g in 0..groups {
        let at = g * GROUP;
        // SAFETY: both slices hold `groups * GROUP` values, so 16 from `at`.
        let (w, x) = unsafe { (load16(&rows.wq[at..]), load16(&rows.xq[at..])) };
        let sums = f32x4_convert_i32x4(dot_i8x16(w, x));
        let scale = f32x4_splat(rows.wscale[g] * rows.xd[g]);
        acc = f32x4_add(acc, f32x4_mul(sums, scale));
    }
    hsum(acc) + dot_f32(rows.woffset, rows.xsum)
}

/// Blocks of 32 values a single-row kernel loads before working on any of them.
const AHEAD: usize = 4;

/// Calls `work(b, load(b))` for blocks `0..blocks` in order, the loads of [`AHEAD`] blocks
/// done before any of them is worked on (see the module's notes). `load` should only load:
/// work done between the loads delays the later ones.
#[inline(always)]
fn blocks_ahead<T>(blocks: usize, load: impl Fn(usize) -> T, mut work: impl FnMut(usize, T)) {
    let mut b = 0;
    while b + AHEAD <= blocks {
        let loaded: [T; AHEAD] = std::array::from_fn(|k| load(b + k));
        for (k, v) in loaded.into_iter().enumerate() {
            work(b + k, v);
        }
        b += AHEAD;
    }
    for b in b..blocks {
        work(b, load(b));
    }
}

pub(crate) fn dot_q8_0(row: &[u8], xq: &[i16], xd: &[f32]) -> f32 {
    let f16 = f16_table();
    let blocks = (row.len() / 34).min(xq.len() / 32).min(xd.len() / 2);
    let (w, x, xd) = (row.as_ptr(), xq.as_ptr(), xd.as_ptr());
    // SAFETY (both closures): called for `b < blocks` only, and each slice holds `blocks`
    // blocks: 34 bytes of `row`, 32 quants of `xq` and two scales of `xd` each.
    let load = |b: usize| unsafe {
        let block = w.add(34 * b);
        [
            v128_load(block.add(2).cast()),
            v128_load(block.add(18).cast()),
        ]
    };
    let mut acc = f32x4_splat(0.0);
    blocks_ahead(blocks, load, |b, [w0, w1]| unsafe {
        let sums = i32x4_add(
            dot_wide(w0, load_wide(x.add(32 * b))),
            dot_wide(w1, load_wide(x.add(32 * b + 16))),
        );
        let scale = f16_at_ptr(f16, w.add(34 * b)) * *xd.add(2 * b);
        acc = f32x4_add(
            acc,
            f32x4_mul(f32x4_convert_i32x4(sums), f32x4_splat(scale)),
        );
    });
    hsum(acc)
}

pub(crate) fn dot_q4_1(row: &[u8], xq: &[i16], xd: &[f32], xsum: &[f32]) -> f32 {
    let f16 = f16_table();
    let low = u8x16_splat(0x0F);
    let blocks = (row.len() / 20)
        .min(xq.len() / 32)
        .min(xd.len() / 2)
        .min(xsum.len() / 2);
    let (w, x, xd, xsum) = (row.as_ptr(), xq.as_ptr(), xd.as_ptr(), xsum.as_ptr());
    // SAFETY (both closures): called for `b < blocks` only, and each slice holds `blocks`
    // blocks: 20 bytes of `row`, 32 quants of `xq`, two scales and sums of `xd` and `xsum`.
    let load = |b: usize| unsafe { v128_load(w.add(20 * b + 4).cast()) };
    let mut acc = f32x4_splat(0.0);
    let mut mins = 0.0f32;
    blocks_ahead(blocks, load, |b, packed| unsafe {
        // Nibbles 0–15 are the same as signed or unsigned bytes.
        let lo = v128_and(packed, low);
        let hi = u8x16_shr(packed, 4);
        let sums = i32x4_add(
            dot_wide(lo, load_wide(x.add(32 * b))),
            dot_wide(hi, load_wide(x.add(32 * b + 16))),
        );
        let block = w.add(20 * b);
        let dw = f16_at_ptr(f16, block);
        let mw = f16_at_ptr(f16, block.add(2));
        acc = f32x4_add(
            acc,
            f32x4_mul(f32x4_convert_i32x4(sums), f32x4_splat(dw * *xd.add(2 * b))),
        );
        mins += mw * (*xsum.add(2 * b) + *xsum.add(2 * b + 1));
    });
    hsum(acc) + mins
}

/// The four `i32` lanes of `v` added (exactly: the callers' sums fit).
fn hsum_i32(v: v128) -> i32 {
    i32x4_extract_lane::<0>(v)
        + i32x4_extract_lane::<1>(v)
        + i32x4_extract_lane::<2>(v)
        + i32x4_extract_lane::<3>(v)
}

/// [`dot_q4_1`] for `N` activation rows from `t0` (a prefill): each block's nibbles are
/// widened once for all of them, and each row's result is [`dot_q4_1`]'s bit for bit. The
/// rows are followed by pointers, as in [`dot_q5_0_rows`].
pub(crate) fn dot_q4_1_rows<const N: usize>(
    row: &[u8],
    acts: &QuantizedActs,
    t0: usize,
) -> [f32; N] {
    let (q, d, blocks) = acts.wide_rows_and_blocks::<N>(t0, row, 20, 32);
    let sums: [&[f32]; N] = std::array::from_fn(|k| acts.row_sum(t0 + k));
    let blocks = (0..N).fold(blocks, |b, k| b.min(sums[k].len() / 2));
    let f16 = f16_table();
    let low = u8x16_splat(0x0F);
    let mut x: [*const i16; N] = std::array::from_fn(|k| q[k].as_ptr());
    let mut xd: [*const f32; N] = std::array::from_fn(|k| d[k].as_ptr());
    let mut xs: [*const f32; N] = std::array::from_fn(|k| sums[k].as_ptr());
    let mut acc = [f32x4_splat(0.0); N];
    let mut mins = [0.0f32; N];
    for block in row[..20 * blocks].chunks_exact(20) {
        // SAFETY: `block[4..]` holds 16 bytes.
        let packed = unsafe { load16(&block[4..]) };
        let (lo, hi) = (widen(v128_and(packed, low)), widen(u8x16_shr(packed, 4)));
        let (dw, mw) = (f16_at(f16, block, 0), f16_at(f16, block, 2));
        for k in 0..N {
            // SAFETY: fewer than `blocks` blocks were passed, so row `k` holds 32 more quants
            // from `x[k]` and two more scales and sums from `xd[k]` and `xs[k]`.
            let (sums, scale, s0, s1) = unsafe {
                let (x0, x1) = (load_wide(x[k]), load_wide(x[k].add(16)));
                let found = (
                    i32x4_add(dot_widened_wide(lo, x0), dot_widened_wide(hi, x1)),
                    *xd[k],
                    *xs[k],
                    *xs[k].add(1),
                );
                x[k] = x[k].add(32);
                xd[k] = xd[k].add(2);
                xs[k] = xs[k].add(2);
                found
            };
            acc[k] = f32x4_add(
                acc[k],
                f32x4_mul(f32x4_convert_i32x4(sums), f32x4_splat(dw * scale)),
            );
            mins[k] += mw * (s0 + s1);
        }
    }
    std::array::from_fn(|k| hsum(acc[k]) + mins[k])
}

/// [`crate::dot::dot_q5_0_portable`] with the block's products in `i32` lanes: the same exact
/// integer a block, scaled the same way, so the same result bit for bit. [`AHEAD`] blocks'
/// lanes are summed together, lane `k` block `k`'s integer.
pub(crate) fn dot_q5_0(row: &[u8], xq: &[i16], xd: &[f32]) -> f32 {
    let f16 = f16_table();
    let blocks = (row.len() / 22).min(xq.len() / 32).min(xd.len() / 2);
    let (w, x, xd) = (row.as_ptr(), xq.as_ptr(), xd.as_ptr());
    // SAFETY (the three closures): called for `b < blocks` only, and each slice holds
    // `blocks` blocks: 22 bytes of `row`, 32 quants of `xq` and two scales of `xd` each.
    let load = |b: usize| unsafe { q5_0_load_at(w.add(22 * b)) };
    let lanes = |b: usize, bits: Q5_0Bits| unsafe {
        let [w_lo, w_hi] = q5_0_values(bits);
        i32x4_add(
            dot_wide(w_lo, load_wide(x.add(32 * b))),
            dot_wide(w_hi, load_wide(x.add(32 * b + 16))),
        )
    };
    let scale = |b: usize| unsafe { f16_at_ptr(f16, w.add(22 * b)) * *xd.add(2 * b) };
    let mut total = 0.0f32;
    let mut b = 0;
    while b + AHEAD <= blocks {
        let loaded: [_; AHEAD] = std::array::from_fn(|k| load(b + k));
        let sums = sum_lanes_of_four(std::array::from_fn(|k| lanes(b + k, loaded[k])));
        let scales = f32x4(scale(b), scale(b + 1), scale(b + 2), scale(b + 3));
        // Each block's `scale * isum` rounded once, added in block order: as the portable loop.
        let products = f32x4_mul(scales, f32x4_convert_i32x4(sums));
        total += f32x4_extract_lane::<0>(products);
        total += f32x4_extract_lane::<1>(products);
        total += f32x4_extract_lane::<2>(products);
        total += f32x4_extract_lane::<3>(products);
        b += AHEAD;
    }
    for b in b..blocks {
        total += scale(b) * hsum_i32(lanes(b, load(b))) as f32;
    }
    total
}

/// Lane `k`: the four lanes of `v[k]` added (exact integers, so in any order).
fn sum_lanes_of_four(v: [v128; 4]) -> v128 {
    let pairs = |a: v128, b: v128| {
        i32x4_add(
            i32x4_shuffle::<0, 4, 1, 5>(a, b),
            i32x4_shuffle::<2, 6, 3, 7>(a, b),
        )
    };
    let (ab, cd) = (pairs(v[0], v[1]), pairs(v[2], v[3]));
    i32x4_add(
        i32x4_shuffle::<0, 1, 4, 5>(ab, cd),
        i32x4_shuffle::<2, 3, 6, 7>(ab, cd),
    )
}

/// A Q5_0 block's fifth bits (`qh`) and 16 bytes of nibbles, as loaded.
#[derive(Clone, Copy)]
struct Q5_0Bits {
    qh: u32,
    packed: v128,
}

/// Loads the Q5_0 block at `block`.
///
/// # Safety
/// `block` must point to 22 readable bytes.
#[inline(always)]
unsafe fn q5_0_load_at(block: *const u8) -> Q5_0Bits {
    // SAFETY: the caller guarantees the block's 22 bytes; neither load needs alignment.
    unsafe {
        Q5_0Bits {
            qh: block.add(2).cast::<u32>().read_unaligned().to_le(),
            packed: v128_load(block.add(6).cast()),
        }
    }
}

/// Loads a Q5_0 block (22 bytes).
#[inline(always)]
fn q5_0_load(block: &[u8]) -> Q5_0Bits {
    let block = &block[..22];
    // SAFETY: `block` holds the block's 22 bytes.
    unsafe { q5_0_load_at(block.as_ptr()) }
}

/// The 32 signed values (`nibble | fifth bit << 4`, minus 16) of a Q5_0 block: values 0–15,
/// then 16–31.
#[inline(always)]
fn q5_0_values(Q5_0Bits { qh, packed }: Q5_0Bits) -> [v128; 2] {
    let low = u8x16_splat(0x0F);
    let bit = u8x16(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128);
    let minus_16 = i8x16_splat(-16);
    let qh = u32x4_splat(qh);
    // -16 where value j's fifth bit is clear, 0 where it is set: byte j / 8 of `qh` picked,
    // bit j % 8 tested. A nibble plus that is the value.
    let offset = |pick: v128| {
        let set = u8x16_eq(v128_and(i8x16_swizzle(qh, pick), bit), bit);
        v128_andnot(minus_16, set)
    };
    let pick_lo = u8x16(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    let pick_hi = u8x16(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    [
        i8x16_add(v128_and(packed, low), offset(pick_lo)),
        i8x16_add(u8x16_shr(packed, 4), offset(pick_hi)),
    ]
}

/// [`dot_q5_0`] for `N` activation rows from `t0` (a prefill): each block's values are
/// unpacked and widened once for all of them, and each row's result is [`dot_q5_0`]'s bit for
/// bit. The rows are followed by pointers: indexing them, V8 ran this no faster than one row
/// at a time.
pub(crate) fn dot_q5_0_rows<const N: usize>(
    row: &[u8],
    acts: &QuantizedActs,
    t0: usize,
) -> [f32; N] {
    let (q, d, blocks) = acts.wide_rows_and_blocks::<N>(t0, row, 22, 32);
    let f16 = f16_table();
    let mut x: [*const i16; N] = std::array::from_fn(|k| q[k].as_ptr());
    let mut xd: [*const f32; N] = std::array::from_fn(|k| d[k].as_ptr());
    let mut total = [0.0f32; N];
    for block in row[..22 * blocks].chunks_exact(22) {
        let [w_lo, w_hi] = q5_0_values(q5_0_load(block)).map(widen);
        let dw = f16_at(f16, block, 0);
        for k in 0..N {
            // SAFETY: fewer than `blocks` blocks were passed, so row `k`'s quants hold 32 more
            // from `x[k]` and its scales two more from `xd[k]` (`rows_and_blocks`).
            let (isum, scale) = unsafe {
                let (x0, x1) = (load_wide(x[k]), load_wide(x[k].add(16)));
                let found = (
                    hsum_i32(i32x4_add(
                        dot_widened_wide(w_lo, x0),
                        dot_widened_wide(w_hi, x1),
                    )),
                    *xd[k],
                );
                x[k] = x[k].add(32);
                xd[k] = xd[k].add(2);
                found
            };
            total[k] += dw * scale * isum as f32;
        }
    }
    total
}

/// [`crate::dot::dot_q4_k_portable`] with the products in `i32` lanes, each chunk's weighted by
/// its 6-bit scales there, and the mins against the activations' group sums (`isum`):
/// the same exact integers a block, so the same result bit for bit.
pub(crate) fn dot_q4_k(row: &[u8], xq: &[i16], xd: &[f32], isum: &[i32]) -> f32 {
    let f16 = f16_table();
    let low = u8x16_splat(0x0F);
    let mut total = 0.0f32;
    for (((block, x), xd), s) in row
        .chunks_exact(144)
        .zip(xq.chunks_exact(256))
        .zip(xd.chunks_exact(256 / GROUP))
        .zip(isum.chunks_exact(256 / GROUP))
    {
        let packed = &block[4..16];
        let mut sumi = i32x4_splat(0);
        let mut summ = 0i32;
        // SAFETY: the block's 128 bytes of nibbles are at 16..144.
        let nib: [v128; 8] = std::array::from_fn(|i| unsafe { load16(&block[16 + 16 * i..]) });
        for chunk in 0..4 {
            let (sc_lo, m_lo) = scale_min_k4(2 * chunk, packed);
            let (sc_hi, m_hi) = scale_min_k4(2 * chunk + 1, packed);
            let (q0, q1) = (nib[2 * chunk], nib[2 * chunk + 1]);
            let x = |i: usize| wide_at(x, 64 * chunk + 16 * i);
            let lo = i32x4_add(
                dot_wide(v128_and(q0, low), x(0)),
                dot_wide(v128_and(q1, low), x(1)),
            );
            let hi = i32x4_add(
                dot_wide(u8x16_shr(q0, 4), x(2)),
                dot_wide(u8x16_shr(q1, 4), x(3)),
            );
            sumi = i32x4_add(
                sumi,
                i32x4_add(
                    i32x4_mul(lo, i32x4_splat(i32::from(sc_lo))),
                    i32x4_mul(hi, i32x4_splat(i32::from(sc_hi))),
                ),
            );
            let g = 4 * chunk;
            summ += i32::from(m_lo) * (s[g] + s[g + 1]) + i32::from(m_hi) * (s[g + 2] + s[g + 3]);
        }
        let d = f16_at(f16, block, 0) * xd[0];
        let dmin = f16_at(f16, block, 2) * xd[0];
        total += d * hsum_i32(sumi) as f32 - dmin * summ as f32;
    }
    total
}

/// [`dot_q4_k`] for `N` activation rows from `t0` (a prefill): each chunk's nibbles are
/// widened once for all of them, and each row's result is [`dot_q4_k`]'s bit for bit. The
/// rows are followed by pointers, as in [`dot_q5_0_rows`].
pub(crate) fn dot_q4_k_rows<const N: usize>(
    row: &[u8],
    acts: &QuantizedActs,
    t0: usize,
) -> [f32; N] {
    let (q, d, blocks) = acts.rows_and_blocks::<N>(t0, row, 144, 256);
    let isum: [&[i32]; N] = std::array::from_fn(|k| acts.row_isum(t0 + k));
    let blocks = (0..N).fold(blocks, |b, k| b.min(isum[k].len() / 16));
    let f16 = f16_table();
    let low = u8x16_splat(0x0F);
    let mut x: [*const i8; N] = std::array::from_fn(|k| q[k].as_ptr());
    let mut xd: [*const f32; N] = std::array::from_fn(|k| d[k].as_ptr());
    let mut xs: [*const i32; N] = std::array::from_fn(|k| isum[k].as_ptr());
    let mut total = [0.0f32; N];
    for block in row[..144 * blocks].chunks_exact(144) {
        let packed = &block[4..16];
        let mut sumi = [i32x4_splat(0); N];
        let mut summ = [0i32; N];
        for chunk in 0..4 {
            let (sc_lo, m_lo) = scale_min_k4(2 * chunk, packed);
            let (sc_hi, m_hi) = scale_min_k4(2 * chunk + 1, packed);
            let (sc_lo, sc_hi) = (i32x4_splat(i32::from(sc_lo)), i32x4_splat(i32::from(sc_hi)));
            let (m_lo, m_hi) = (i32::from(m_lo), i32::from(m_hi));
            let nibbles = &block[16 + 32 * chunk..48 + 32 * chunk];
            // SAFETY: `nibbles` holds 32 bytes.
            let (q0, q1) = unsafe { (load16(nibbles), load16(&nibbles[16..])) };
            let w = [
                widen(v128_and(q0, low)),
                widen(v128_and(q1, low)),
                widen(u8x16_shr(q0, 4)),
                widen(u8x16_shr(q1, 4)),
            ];
            for k in 0..N {
                // SAFETY: fewer than `blocks` blocks were passed, so row `k` holds this
                // block's 256 quants from `x[k]` and its 16 group sums from `xs[k]`.
                let (lo, hi, s) = unsafe {
                    let at = x[k].add(64 * chunk);
                    let load = |i: usize| v128_load(at.add(16 * i).cast());
                    let s = std::slice::from_raw_parts(xs[k].add(4 * chunk), 4);
                    (
                        i32x4_add(dot_widened(w[0], load(0)), dot_widened(w[1], load(1))),
                        i32x4_add(dot_widened(w[2], load(2)), dot_widened(w[3], load(3))),
                        s,
                    )
                };
                sumi[k] = i32x4_add(
                    sumi[k],
                    i32x4_add(i32x4_mul(lo, sc_lo), i32x4_mul(hi, sc_hi)),
                );
                summ[k] += m_lo * (s[0] + s[1]) + m_hi * (s[2] + s[3]);
            }
        }
        let (dw, mw) = (f16_at(f16, block, 0), f16_at(f16, block, 2));
        for k in 0..N {
            // SAFETY: as above, `xd[k]` holds this block's 16 group scales.
            let scale = unsafe { *xd[k] };
            let (d, dmin) = (dw * scale, mw * scale);
            total[k] += d * hsum_i32(sumi[k]) as f32 - dmin * summ[k] as f32;
            // SAFETY: one past this block is at most the end of each row's slices.
            unsafe {
                x[k] = x[k].add(256);
                xd[k] = xd[k].add(16);
                xs[k] = xs[k].add(16);
            }
        }
    }
    total
}

/// `Σ a[i]·b[i]` over 16 signed bytes, `a` already widened, in four `i32` lanes.
fn dot_widened(a: [v128; 2], b: v128) -> v128 {
    i32x4_add(
        i32x4_dot_i16x8(a[0], i16x8_extend_low_i8x16(b)),
        i32x4_dot_i16x8(a[1], i16x8_extend_high_i8x16(b)),
    )
}

/// 16 signed bytes widened to 16 bits: low half, high half.
fn widen(a: v128) -> [v128; 2] {
    [i16x8_extend_low_i8x16(a), i16x8_extend_high_i8x16(a)]
}

/// Q6_K super-blocks, as [`crate::dot::dot_q6_k_portable`]: each group of 16 products
/// weighted by its scale in the `i32` lanes.
pub(crate) fn dot_q6_k<const N: usize>(row: &[u8], acts: &QuantizedActs, t0: usize) -> [f32; N] {
    let (q, d, blocks) = acts.wide_rows_and_blocks::<N>(t0, row, 210, 256);
    let f16 = f16_table();
    let (low, two) = (u8x16_splat(0x0F), u8x16_splat(0x03));
    let thirty_two = i8x16_splat(32);
    let mut total = [0.0f32; N];
    for (b, block) in row[..blocks * 210].chunks_exact(210).enumerate() {
        let mut sumi = [i32x4_splat(0); N];
        // SAFETY: the block's 192 bytes of quants are at 0..192.
        let bits: [v128; 12] = std::array::from_fn(|i| unsafe { load16(&block[16 * i..]) });
        for half in 0..2 {
            let sc = &block[192 + 8 * half..200 + 8 * half];
            for g in 0..2 {
                let (l0, l1, h) = (
                    bits[4 * half + g],
                    bits[4 * half + 2 + g],
                    bits[8 + 2 * half + g],
                );
                // Values `32 j + 16 g …` of the half: nibbles of `l0`, `l1`, then their high
                // halves, with bit pair `j` of `h`, minus 32.
                let nibbles = [
                    v128_and(l0, low),
                    v128_and(l1, low),
                    u8x16_shr(l0, 4),
                    u8x16_shr(l1, 4),
                ];
                let w: [[v128; 2]; 4] = std::array::from_fn(|j| {
                    let pair = v128_and(u8x16_shr(h, 2 * j as u32), two);
                    widen(i8x16_sub(
                        v128_or(nibbles[j], i8x16_shl(pair, 4)),
                        thirty_two,
                    ))
                });
                let scales: [v128; 4] =
                    std::array::from_fn(|j| i32x4_splat(i32::from(sc[2 * j + g] as i8)));
                for k in 0..N {
                    let x = &q[k][256 * b + 128 * half..256 * b + 128 * half + 128];
                    for j in 0..4 {
                        let xs = wide_at(x, 32 * j + 16 * g);
                        sumi[k] =
                            i32x4_add(sumi[k], i32x4_mul(dot_widened_wide(w[j], xs), scales[j]));
                    }
                }
            }
        }
        let dw = f16_at(f16, block, 208);
        for k in 0..N {
            total[k] += dw * d[k][16 * b] * hsum_i32(sumi[k]) as f32;
        }
    }
    total
}

/// Four accumulators of four lanes.
pub(crate) fn dot_f32(w: &[f32], x: &[f32]) -> f32 {
    let n = w.len().min(x.len());
    let mut acc = [f32x4_splat(0.0); 4];
    let mut i = 0;
    while i + 16 <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            let at = i + 4 * k;
            // SAFETY: `at + 4 <= n` floats are in both slices.
            let (a_w, a_x) = unsafe { (load16(&w[at..at + 4]), load16(&x[at..at + 4])) };
            *a = f32x4_add(*a, f32x4_mul(a_w, a_x));
        }
        i += 16;
    }
    let mut total = hsum(f32x4_add(
        f32x4_add(acc[0], acc[1]),
        f32x4_add(acc[2], acc[3]),
    ));
    while i < n {
        total += w[i] * x[i];
        i += 1;
    }
    total
}

/// Four `f16`s held in the high 16 bits of `u32` lanes, widened to `f32`: an arithmetic
/// shift puts the sign in place and the magnitude's bits at an `f32`'s, scaling by 2^112
/// makes the exponent right (exact for normal and subnormal halves alike), and what comes
/// out at 2^16 or more (from the halves' infinities and NaNs) gets the `f32` exponent.
#[inline(always)]
fn halves_to_f32(high: v128) -> v128 {
    let placed = v128_and(i32x4_shr(high, 3), u32x4_splat(0x8FFF_E000));
    let scaled = f32x4_mul(placed, f32x4_splat(f32::from_bits(0x7780_0000)));
    let special = f32x4_ge(f32x4_abs(scaled), f32x4_splat(65_536.0));
    v128_or(scaled, v128_and(special, u32x4_splat(0x7F80_0000)))
}

/// Sixteen `f16`s from `p`, widened: values 0–3, 4–7, 8–11, 12–15.
///
/// # Safety
/// `p` must point to 16 readable `f16`s.
#[inline(always)]
unsafe fn load_halves16(p: *const half::f16) -> [v128; 4] {
    // SAFETY: the caller guarantees 16 values (32 bytes); v128 loads need no alignment.
    let (a, b) = unsafe { (v128_load(p.cast()), v128_load(p.add(8).cast())) };
    let zero = u32x4_splat(0);
    // Each half into the high 16 bits of its own 32-bit lane.
    let low = |v| i8x16_shuffle::<16, 17, 0, 1, 16, 17, 2, 3, 16, 17, 4, 5, 16, 17, 6, 7>(v, zero);
    let high =
        |v| i8x16_shuffle::<16, 17, 8, 9, 16, 17, 10, 11, 16, 17, 12, 13, 16, 17, 14, 15>(v, zero);
    [
        halves_to_f32(low(a)),
        halves_to_f32(high(a)),
        halves_to_f32(low(b)),
        halves_to_f32(high(b)),
    ]
}

/// [`crate::attention::round_to_f16`]: four values at a time as `round_f16` of the wgpu
/// kernels rounds one (ties to even, from the bits), the rest one by one.
pub(crate) fn round_to_f16(values: &mut [f32]) {
    let mut chunks = values.chunks_exact_mut(4);
    for chunk in &mut chunks {
        let at = chunk.as_mut_ptr().cast::<v128>();
        // SAFETY: the chunk holds four values; loads and stores need no alignment.
        unsafe { v128_store(at, round4_to_f16(v128_load(at))) };
    }
    for x in chunks.into_remainder() {
        *x = half::f16::from_f32(*x).to_f32();
    }
}

/// Four `f32`s rounded to the nearest `f16` (ties to even) and widened back.
#[inline(always)]
fn round4_to_f16(x: v128) -> v128 {
    let sign = v128_and(x, u32x4_splat(0x8000_0000));
    let magnitude = v128_and(x, u32x4_splat(0x7FFF_FFFF));
    // A normal half: keep 10 of the 23 fraction bits, rounding ties to even.
    let odd = v128_and(u32x4_shr(magnitude, 13), u32x4_splat(1));
    let normal = v128_and(
        i32x4_add(i32x4_add(magnitude, u32x4_splat(0x0FFF)), odd),
        u32x4_splat(0xFFFF_E000),
    );
    // Below 2^-14: the multiples of 2^-24, the nearest (ties to even) by `nearest`.
    let units = f32x4_nearest(f32x4_mul(magnitude, f32x4_splat(16_777_216.0)));
    let subnormal = f32x4_mul(units, f32x4_splat(5.960_464_5e-8));
    let rounded = v128_bitselect(
        normal,
        subnormal,
        u32x4_ge(magnitude, u32x4_splat(0x3880_0000)),
    );
    // 65,520 and above round past the largest half (infinity); infinities and NaNs stay.
    let over = u32x4_ge(magnitude, u32x4_splat(0x477F_F000));
    let rounded = v128_bitselect(u32x4_splat(0x7F80_0000), rounded, over);
    let special = u32x4_ge(magnitude, u32x4_splat(0x7F80_0000));
    v128_or(sign, v128_bitselect(magnitude, rounded, special))
}

/// [`crate::attention::scores_block`].
pub(crate) fn f16_scores_block(
    q: &[f32],
    rows: usize,
    keys: &[half::f16],
    dim: usize,
    n: usize,
    tiles: core::ops::Range<usize>,
    out: &mut [f32],
) {
    match rows {
        0 => {}
        1 => f16_scores_rows::<1>(q, keys, dim, n, tiles, out),
        2 => f16_scores_rows::<2>(q, keys, dim, n, tiles, out),
        3 => f16_scores_rows::<3>(q, keys, dim, n, tiles, out),
        _ => f16_scores_rows::<4>(q, keys, dim, n, tiles, out),
    }
}

/// `R` rows of [`f16_scores_block`]: sixteen keys (a tile) at a time, four to a vector.
fn f16_scores_rows<const R: usize>(
    q: &[f32],
    keys: &[half::f16],
    dim: usize,
    n: usize,
    tiles: core::ops::Range<usize>,
    out: &mut [f32],
) {
    use crate::attention::TILE;
    let q = &q[..R * dim];
    for tile in tiles {
        let tile_keys = &keys[tile * dim * TILE..(tile + 1) * dim * TILE];
        let mut acc = [[f32x4_splat(0.0); 4]; R];
        for d in 0..dim {
            // SAFETY: `tile_keys` holds `dim · 16` values, so 16 from `d · 16`.
            let k = unsafe { load_halves16(tile_keys.as_ptr().add(d * TILE)) };
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = f32x4_splat(q[r * dim + d]);
                for (acc, k) in acc.iter_mut().zip(k) {
                    *acc = f32x4_add(*acc, f32x4_mul(x, k));
                }
            }
        }
        let first = tile * TILE;
        let valid = (n - first.min(n)).min(TILE);
        for (r, acc) in acc.iter().enumerate() {
            let mut lanes = [0.0f32; TILE];
            for (i, v) in acc.iter().enumerate() {
                // SAFETY: `lanes` holds 16 values, so 4 from `4i`; stores need no alignment.
                unsafe { v128_store(lanes.as_mut_ptr().add(4 * i).cast(), *v) };
            }
            let at = r * n + first;
            out[at..at + valid].copy_from_slice(&lanes[..valid]);
        }
    }
}

/// [`crate::attention::mix_block`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn f16_mix_block(
    p: &[f32],
    rows: usize,
    values: &[half::f16],
    dim: usize,
    n: usize,
    keys: core::ops::Range<usize>,
    add: bool,
    out: &mut [f32],
) {
    match rows {
        0 => {}
        1 => f16_mix_rows::<1>(p, values, dim, n, keys, add, out),
        2 => f16_mix_rows::<2>(p, values, dim, n, keys, add, out),
        3 => f16_mix_rows::<3>(p, values, dim, n, keys, add, out),
        _ => f16_mix_rows::<4>(p, values, dim, n, keys, add, out),
    }
}

/// `R` rows of [`f16_mix_block`], sixteen output values at a time.
fn f16_mix_rows<const R: usize>(
    p: &[f32],
    values: &[half::f16],
    dim: usize,
    n: usize,
    keys: core::ops::Range<usize>,
    add: bool,
    out: &mut [f32],
) {
    use crate::attention::TILE;
    let p = &p[..R * n];
    let values = &values[..n * dim];
    let keys = keys.start..keys.end.min(n);
    for d0 in (0..dim).step_by(TILE) {
        let mut acc = [[f32x4_splat(0.0); 4]; R];
        for k in keys.clone() {
            let at = k * dim + d0;
            assert!(at + TILE <= values.len(), "a value row past the cache");
            // SAFETY: checked just before: 16 values from `at`.
            let v = unsafe { load_halves16(values.as_ptr().add(at)) };
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = f32x4_splat(p[r * n + k]);
                for (acc, v) in acc.iter_mut().zip(v) {
                    *acc = f32x4_add(*acc, f32x4_mul(x, v));
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            let o = &mut out[r * dim + d0..r * dim + d0 + TILE];
            for (i, v) in acc.iter().enumerate() {
                let at = o[4 * i..4 * i + 4].as_mut_ptr();
                // SAFETY: `o` holds 16 values, so 4 from `4i`; loads and stores need no
                // alignment.
                unsafe {
                    let sum = if add {
                        f32x4_add(v128_load(at.cast()), *v)
                    } else {
                        *v
                    };
                    v128_store(at.cast(), sum);
                }
            }
        }
    }
}

/// [`crate::attention::exponentials`]: four values at a time where all four are no greater
/// than zero (a softmax's are; others, and the rest, one by one through `f32::exp`).
pub(crate) fn exponentials(row: &mut [f32], max: f32) {
    let max4 = f32x4_splat(max);
    let mut chunks = row.chunks_exact_mut(4);
    for chunk in &mut chunks {
        let at = chunk.as_mut_ptr().cast::<v128>();
        // SAFETY: the chunk holds four values; loads and stores need no alignment.
        let x = f32x4_sub(unsafe { v128_load(at) }, max4);
        // `x ≤ 0` is false for NaNs too.
        if i32x4_all_true(f32x4_le(x, f32x4_splat(0.0))) {
            // SAFETY: as above.
            unsafe { v128_store(at, expf4_nonpositive(x)) };
        } else {
            for v in chunk.iter_mut() {
                *v = (*v - max).exp();
            }
        }
    }
    for v in chunks.into_remainder() {
        *v = (*v - max).exp();
    }
}

/// `expf` of four values no greater than zero, with the operations of the `libm` crate's
/// `expf` (FreeBSD's `e_expf.c`), which is `f32::exp` in wasm: its reduction by `k · ln 2`
/// (`k` from `x / ln 2 − 0.5` truncated, −1 or 0 by the size of `x`), its rational
/// approximation, and its `scalbnf` (by 2^-102 first where `k` is below −126); +0 below
/// −103.97, `1 + x` for the tiniest.
#[inline(always)]
fn expf4_nonpositive(x: v128) -> v128 {
    const LN2_HI: f32 = 6.931_457_5e-1;
    const LN2_LO: f32 = 1.428_606_8e-6;
    const INV_LN2: f32 = 1.442_695_1;
    const P1: f32 = 1.666_662_5e-1;
    const P2: f32 = -2.766_733_3e-3;
    let hx = v128_and(x, u32x4_splat(0x7FFF_FFFF));
    let large = u32x4_gt(hx, u32x4_splat(0x3F85_1592));
    let medium = u32x4_gt(hx, u32x4_splat(0x3EB1_7218));
    let k_large = i32x4_trunc_sat_f32x4(f32x4_add(
        f32x4_mul(f32x4_splat(INV_LN2), x),
        f32x4_splat(-0.5),
    ));
    let k = v128_bitselect(k_large, v128_and(medium, i32x4_splat(-1)), large);
    let kf = f32x4_convert_i32x4(k);
    let hi = f32x4_sub(x, f32x4_mul(kf, f32x4_splat(LN2_HI)));
    let lo = f32x4_mul(kf, f32x4_splat(LN2_LO));
    let r = f32x4_sub(hi, lo);
    let rr = f32x4_mul(r, r);
    let c = f32x4_sub(
        r,
        f32x4_mul(
            rr,
            f32x4_add(f32x4_splat(P1), f32x4_mul(rr, f32x4_splat(P2))),
        ),
    );
    let q = f32x4_div(f32x4_mul(r, c), f32x4_sub(f32x4_splat(2.0), c));
    let y = f32x4_add(f32x4_splat(1.0), f32x4_add(f32x4_sub(q, lo), hi));
    // scalbnf(y, k): below 2^-126 first by 2^-102, then the rest.
    let deep = i32x4_lt(k, i32x4_splat(-126));
    let y = v128_bitselect(
        f32x4_mul(y, f32x4_splat(f32::from_bits(0x0C80_0000))),
        y,
        deep,
    );
    let n = v128_bitselect(i32x4_add(k, i32x4_splat(102)), k, deep);
    let scaled = f32x4_mul(y, i32x4_shl(i32x4_add(n, i32x4_splat(127)), 23));
    // The tiniest arguments, and those where `expf` gives +0.
    let tiny = u32x4_le(hx, u32x4_splat(0x3900_0000));
    let result = v128_bitselect(f32x4_add(f32x4_splat(1.0), x), scaled, tiny);
    let under = u32x4_ge(hx, u32x4_splat(0x42CF_F1B5));
    v128_andnot(result, under)
}
