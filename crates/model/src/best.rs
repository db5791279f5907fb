//! Greedy decoding's choice on the device: the largest logit of a row and its column, so that
//! a GPU sends back two words a token rather than the vocabulary's logits (SmolLM2's are
//! 192 KiB, Gemma 3's 1 MiB), and the host scans none of them.
//!
//! burn has the reduction (`max_dim_with_indices`), but cubek-reduce 0.3.1's kernel, on
//! lavapipe, missed a largest value in the last columns of a row of 262,144 (Gemma 3's
//! vocabulary: a row with one 1.0 at column 262,141 and zeros elsewhere gave column 0), and
//! its top-k gave one value and columns of -1 for k ≥ 33 over 49,152: so a kernel of our own,
//! one cube, each unit scanning a stride of the row, then a tree over the units.

use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::backend::{Backend, Cube, backend_extension};
use burn::tensor::{DType, Shape};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_dtype;
use cubecl::prelude::*;

/// Units of the one cube: WebGPU's default `maxComputeInvocationsPerWorkgroup`.
const UNITS: u32 = 256;

#[backend_extension(Cube)]
pub trait BestOps: Backend {
    /// `[2]` `u32`s: the column of the largest of `logits`' values above -inf whose bit is set
    /// in `allowed` (bit i of word i / 32; every value when not `masked`), the lowest column
    /// among equals, then that value's bits; `u32::MAX` and -inf's bits when there is none.
    /// `allowed` holds at least a bit a value when `masked`.
    fn best_of_row(
        logits: FloatTensor<Self>,
        allowed: IntTensor<Self>,
        masked: bool,
    ) -> IntTensor<Self>;
}

#[cube(launch)]
fn best_kernel(
    logits: &[f32],
    allowed: &[u32],
    out: &mut [u32],
    len: u32,
    #[comptime] masked: bool,
) {
    let minus_inf = f32::reinterpret(0xFF80_0000u32);
    let mut best = minus_inf;
    let mut column = 0xFFFF_FFFFu32;
    // Columns in increasing order: a strict `>` keeps the lowest among equals.
    let steps = (len + UNITS - 1 - UNIT_POS) / UNITS;
    for step in 0..steps {
        let c = UNIT_POS + step * UNITS;
        let v = logits[c as usize];
        let mut wanted = true;
        if masked {
            wanted = (allowed[(c / 32) as usize] >> (c % 32)) & 1 == 1;
        }
        if wanted && v > best {
            best = v;
            column = c;
        }
    }
    let mut values = Shared::<[f32]>::new_slice(UNITS as usize);
    let mut columns = Shared::<[u32]>::new_slice(UNITS as usize);
    values[UNIT_POS as usize] = best;
    columns[UNIT_POS as usize] = column;
    sync_cube();
    #[unroll]
    for level in 1..9u32 {
        let stride = UNITS >> level;
        if UNIT_POS < stride {
            let (here, there) = (UNIT_POS as usize, (UNIT_POS + stride) as usize);
            let (v, c) = (values[there], columns[there]);
            if v > values[here] || (v == values[here] && c < columns[here]) {
                values[here] = v;
                columns[here] = c;
            }
        }
        sync_cube();
    }
    if UNIT_POS == 0 {
        out[0] = columns[0];
        out[1] = u32::reinterpret(values[0]);
    }
}

impl BestOps for Cube {
    fn best_of_row(
        logits: FloatTensor<Self>,
        allowed: IntTensor<Self>,
        masked: bool,
    ) -> IntTensor<Self> {
        let logits = into_contiguous(logits);
        let allowed = crate::quant::cube::u32_ids(allowed);
        let n = logits.meta.shape().num_elements();
        let words = if masked { n.div_ceil(32) } else { 1 };
        let out = empty_device_dtype(
            logits.client.clone(),
            logits.device.clone(),
            Shape::new([2]),
            DType::U32,
        );
        // SAFETY: `logits` is bound with its `n` values, of which the units read columns below
        // `n`; `allowed` with the words those columns' bits are in (the caller's contract,
        // checked by `best_logit`), read only when `masked`; `out` with its two words, which
        // unit 0 writes.
        unsafe {
            best_kernel::launch(
                &logits.client,
                CubeCount::Static(1, 1, 1),
                CubeDim::new_1d(UNITS),
                BufferArg::from_raw_parts(logits.handle.clone(), n),
                BufferArg::from_raw_parts(allowed, words),
                BufferArg::from_raw_parts(out.handle.clone(), 2),
                n as u32,
                masked,
            );
        }
        out
    }
}
