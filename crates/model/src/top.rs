//! The sampler's candidates chosen on the device: the `k` largest logits of a row and their
//! columns (greedy decoding's one, or llama.cpp's default `top_k` of 40), so that a GPU sends
//! back `2k` words a token rather than the vocabulary's logits (SmolLM2's are 192 KiB,
//! Gemma 3's 1 MiB), and the host scans none of them.
//!
//! burn has the reduction and a top-k, but on lavapipe `max_dim_with_indices` missed a
//! largest value in the last columns of a row of 262,144 (Gemma 3's vocabulary) and
//! `topk_with_indices` with k ≥ 33 over 49,152 values gave one value and columns of -1, most
//! likely lavapipe's doing rather than cubek-reduce's: it ends a unit's loops after 65,535
//! iterations in all, silently (bench/README.md, "The most likely tokens chosen on the
//! device"). Each k also compiles a kernel of its own there (8 s for k = 32 on lavapipe). So
//! a kernel of our own, one cube, `k` a value rather than a compile-time constant: each unit
//! keeps the `k` largest of a stride of the row in order, then `k` rounds of a tree over the
//! units' next candidates take the largest in turn. A unit's loops run the row's length over
//! 256 plus `k` iterations (the insertion is unrolled), far below lavapipe's limit for any
//! vocabulary.

use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::backend::{Backend, Cube, backend_extension};
use burn::tensor::{DType, Shape};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_dtype;
use cubecl::prelude::*;

/// Units of the one cube: WebGPU's default `maxComputeInvocationsPerWorkgroup`.
const UNITS: u32 = 256;

/// The most candidates [`TopOps::top_of_row`] chooses: each unit keeps this many.
pub const MAX_TOP: usize = crate::model::MAX_TOP;

#[backend_extension(Cube)]
pub trait TopOps: Backend {
    /// `[2k]` `u32`s: the columns of the `k` largest of `logits`' values above -inf, largest
    /// first and the lower column first among equals, each followed by its value's bits;
    /// `u32::MAX` and -inf's bits where fewer remain. `k` is at most [`MAX_TOP`].
    fn top_of_row(logits: FloatTensor<Self>, k: usize) -> IntTensor<Self>;

    /// As [`TopOps::top_of_row`], among the values whose bit is set in `allowed` (bit i of
    /// word i / 32; at least a bit a value).
    fn top_of_allowed(
        logits: FloatTensor<Self>,
        allowed: IntTensor<Self>,
        k: usize,
    ) -> IntTensor<Self>;
}

/// The last place of a unit's list.
const LAST: u32 = MAX_TOP as u32 - 1;

#[cube(launch)]
fn top_kernel(
    logits: &[f32],
    allowed: &[u32],
    out: &mut [u32],
    len: u32,
    k: u32,
    #[comptime] masked: bool,
) {
    let minus_inf = f32::reinterpret(0xFF80_0000u32);
    // This unit's candidates, largest first; columns come in increasing order, so inserting
    // after the equal values keeps the lower column first among equals.
    let mut values = Array::<f32>::new(MAX_TOP);
    let mut columns = Array::<u32>::new(MAX_TOP);
    let mut held = 0u32;
    let steps = (len + UNITS - 1 - UNIT_POS) / UNITS;
    for step in 0..steps {
        let c = UNIT_POS + step * UNITS;
        let v = logits[c as usize];
        let mut wanted = v > minus_inf;
        if masked {
            wanted = wanted && (allowed[(c / 32) as usize] >> (c % 32)) & 1 == 1;
        }
        if wanted && (held < k || v > values[(k - 1) as usize]) {
            // Insertion from the end, unrolled rather than a loop: lavapipe ends a unit's
            // loops after 65,535 iterations in all, which the scan's own steps come near.
            // The last place kept is `end` (the `k`th value is dropped when `k` are held).
            let end = if held < k { held } else { k - 1 };
            let mut placed = false;
            #[unroll]
            for r in 0..LAST {
                let i = LAST - r;
                if !placed && i <= end {
                    if values[(i - 1) as usize] < v {
                        values[i as usize] = values[(i - 1) as usize];
                        columns[i as usize] = columns[(i - 1) as usize];
                    } else {
                        values[i as usize] = v;
                        columns[i as usize] = c;
                        placed = true;
                    }
                }
            }
            if !placed {
                values[0] = v;
                columns[0] = c;
            }
            if held < k {
                held += 1;
            }
        }
    }

    // `k` rounds: every unit offers its largest not yet taken; the tree keeps the largest
    // (the lower column among equals) with its unit, which then offers its next.
    let mut best_values = Shared::<[f32]>::new_slice(UNITS as usize);
    let mut best_columns = Shared::<[u32]>::new_slice(UNITS as usize);
    let mut best_units = Shared::<[u32]>::new_slice(UNITS as usize);
    let mut taken = 0u32;
    for round in 0..k {
        let here = UNIT_POS as usize;
        let mut offer = minus_inf;
        let mut column = 0xFFFF_FFFFu32;
        if taken < held {
            offer = values[taken as usize];
            column = columns[taken as usize];
        }
        best_values[here] = offer;
        best_columns[here] = column;
        best_units[here] = UNIT_POS;
        sync_cube();
        #[unroll]
        for level in 1..9u32 {
            let stride = UNITS >> level;
            if UNIT_POS < stride {
                let there = (UNIT_POS + stride) as usize;
                let (v, c) = (best_values[there], best_columns[there]);
                if v > best_values[here] || (v == best_values[here] && c < best_columns[here]) {
                    best_values[here] = v;
                    best_columns[here] = c;
                    best_units[here] = best_units[there];
                }
            }
            sync_cube();
        }
        if UNIT_POS == 0 {
            out[(2 * round) as usize] = best_columns[0];
            out[(2 * round + 1) as usize] = u32::reinterpret(best_values[0]);
        }
        if best_units[0] == UNIT_POS && taken < held {
            taken += 1;
        }
        // Every unit has read the winner before the next round overwrites it.
        sync_cube();
    }
}

impl TopOps for Cube {
    fn top_of_row(logits: FloatTensor<Self>, k: usize) -> IntTensor<Self> {
        launch_top(logits, None, k)
    }

    fn top_of_allowed(
        logits: FloatTensor<Self>,
        allowed: IntTensor<Self>,
        k: usize,
    ) -> IntTensor<Self> {
        launch_top(logits, Some(allowed), k)
    }
}

/// [`top_kernel`] over `logits`, among the `allowed` when given.
fn launch_top(
    logits: FloatTensor<Cube>,
    allowed: Option<IntTensor<Cube>>,
    k: usize,
) -> IntTensor<Cube> {
    let logits = into_contiguous(logits);
    let n = logits.meta.shape().num_elements();
    // Without a mask the logits stand in for it (any buffer does: the kernel never reads
    // it), so that a step uploads nothing.
    let masked = allowed.is_some();
    let (allowed, words) = match allowed {
        Some(allowed) => (crate::quant::cube::u32_ids(allowed), n.div_ceil(32)),
        None => (logits.handle.clone(), 1),
    };
    let k = k.clamp(1, MAX_TOP);
    let out = empty_device_dtype(
        logits.client.clone(),
        logits.device.clone(),
        Shape::new([2 * k]),
        DType::U32,
    );
    // SAFETY: `logits` is bound with its `n` values, of which the units read columns below
    // `n`; `allowed` with the words those columns' bits are in (the caller's contract,
    // checked by `top_logits`), read only when `masked`; `out` with its `2k` words, which
    // unit 0 writes, two a round; a unit's lists hold `MAX_TOP` ≥ `k` candidates.
    unsafe {
        top_kernel::launch(
            &logits.client,
            CubeCount::Static(1, 1, 1),
            CubeDim::new_1d(UNITS),
            BufferArg::from_raw_parts(logits.handle.clone(), n),
            BufferArg::from_raw_parts(allowed, words),
            BufferArg::from_raw_parts(out.handle.clone(), 2 * k),
            n as u32,
            k as u32,
            masked,
        );
    }
    out
}
