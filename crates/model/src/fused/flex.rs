//! [`FusedOps`] on the Flex CPU backend: loops over the tensors' storage, with the rounding
//! of llama.cpp's CPU backend (ggml): RMSNorm's mean square summed in `f64`, an `f16` KV
//! cache, GELU from `f16` inputs to `f16` results.

use std::ops::Range;
use std::sync::{Arc, OnceLock};

use burn::backend::Flex;
use burn::backend::flex::FlexTensor;
use burn::backend::tensor::FloatTensor;
use burn::tensor::TensorData;
use half::f16;

use super::FusedOps;
use crate::quant::pool::Pool;

pub(super) fn round16(x: f32) -> f32 {
    f16::from_f32(x).to_f32()
}

/// Each of `values` rounded as [`round16`] rounds it, in vectors where the CPU converts them
/// (F16C; `simd128` in wasm): a prefill's attention rounds every probability, and one value
/// at a time that was 4% of Qwen2.5's 512-token prefill.
pub(super) fn round16_slice(values: &mut [f32]) {
    crate::quant::attention::round_to_f16(values);
}

/// The tensor's values in row-major order, and its shape.
pub(super) fn values(t: &FlexTensor) -> (FlexTensor, Vec<usize>) {
    let t = t.to_contiguous();
    let shape = t.layout().shape().to_vec();
    (t, shape)
}

/// The contiguous values of a tensor made by [`values`].
pub(super) fn slice(t: &FlexTensor) -> &[f32] {
    let start = t.layout().start_offset();
    let len: usize = t.layout().shape().iter().product();
    &t.storage::<f32>()[start..start + len]
}

pub(super) fn tensor(values: Vec<f32>, shape: Vec<usize>) -> FlexTensor {
    FlexTensor::from_data(TensorData::new(values, shape))
}

/// `cache` contiguous from the start of its storage, so that writing it changes it in place
/// when nothing else holds it (a copy otherwise).
pub(super) fn writable(cache: FlexTensor) -> FlexTensor {
    if !cache.is_contiguous() || cache.layout().start_offset() != 0 {
        cache.to_contiguous()
    } else {
        cache
    }
}

/// The tanh GELU ggml's `f16` table holds, in the arrangement of burn's `gelu_approximate`:
/// on Gemma 3 it disagreed with llama.cpp on 20 teacher-forced steps of 640, ggml's own
/// arrangement of the same formula (`0.5·x·(1 + tanh(c·x·(1 + a·x²)))`) on 24.
fn gelu_tanh(x: f32) -> f32 {
    const COEF_A: f32 = 0.044_715;
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    let inner = (x + x * x * x * COEF_A) * SQRT_2_OVER_PI;
    (x * (inner.tanh() + 1.0)) * 0.5
}

/// [`gelu_tanh`] of every `f16`, rounded to `f16`, indexed by the input's bits: GELU takes
/// `f16` inputs, so a table gives the same results as the formula at a look-up each, where
/// the formula's `tanh` (libm, scalar) was 9% of Gemma 3's prefill, on one thread.
fn gelu_table() -> &'static [f32; 1 << 16] {
    static TABLE: OnceLock<Box<[f32; 1 << 16]>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = Box::new([0.0f32; 1 << 16]);
        for (bits, v) in table.iter_mut().enumerate() {
            *v = round16(gelu_tanh(f16::from_bits(bits as u16).to_f32()));
        }
        table
    })
}

/// RMSNorm of each row of `x` (rows of `w.len()` values), times `w`.
fn rms_norm_rows(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    let dim = w.len().max(1);
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(dim) {
        // As ggml: f32 squares summed in f64, the mean rounded to f32.
        let sum: f64 = row.iter().map(|&v| f64::from(v * v)).sum();
        let mean = (sum / dim as f64) as f32;
        let scale = 1.0 / (mean + eps).sqrt();
        out.extend(row.iter().zip(w).map(|(&v, &w)| v * scale * w));
    }
    out
}

/// `x` (`[tokens, heads, dim]`) rotated for positions `start..` by `rotations` (cosine, sine
/// pairs, `dim / 2` a position).
fn rotate(x: &FlexTensor, rotations: &[f32], start: usize, neox: bool) -> FlexTensor {
    let (x, shape) = values(x);
    let (heads, dim) = (shape[1], shape[2]);
    let half = dim / 2;
    let mut out = slice(&x).to_vec();
    for (n, head) in out.chunks_mut(dim).enumerate() {
        let position = start + n / heads;
        let turns = &rotations[position * dim..(position + 1) * dim];
        for (i, turn) in turns.chunks_exact(2).enumerate() {
            let (c, s) = (turn[0], turn[1]);
            let (ia, ib) = if neox {
                (i, i + half)
            } else {
                (2 * i, 2 * i + 1)
            };
            let (a, b) = (head[ia], head[ib]);
            head[ia] = a * c - b * s;
            head[ib] = a * s + b * c;
        }
    }
    tensor(out, shape)
}

/// `cache` (`[kv_heads, capacity, dim]`) with `new` (`[tokens, kv_heads, dim]`) written at
/// positions `start..`, rounded to `f16`: in place when the cache is not shared (between
/// steps), else into a copy.
fn write_cache(cache: FlexTensor, new: &FlexTensor, start: usize) -> FlexTensor {
    let mut cache = writable(cache);
    let shape = cache.layout().shape().to_vec();
    let (kv_heads, capacity, dim) = (shape[0], shape[1], shape[2]);
    let (new, _) = values(new);
    let storage = cache.storage_mut::<f32>();
    for (n, values) in slice(&new).chunks(dim).enumerate() {
        let (token, head) = (n / kv_heads, n % kv_heads);
        let at = (head * capacity + start + token) * dim;
        for (c, &v) in storage[at..at + dim].iter_mut().zip(values) {
            *c = round16(v);
        }
    }
    cache
}

impl FusedOps for Flex {
    fn fused_rms_norm(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        eps: f32,
    ) -> FloatTensor<Self> {
        let (x, shape) = values(&x);
        let (w, _) = values(&weight);
        tensor(rms_norm_rows(slice(&x), slice(&w), eps), shape)
    }

    fn fused_add_rms_norm(
        x: FloatTensor<Self>,
        h: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        eps: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (x, shape) = values(&x);
        let (h, _) = values(&h);
        let (w, _) = values(&weight);
        let sum: Vec<f32> = slice(&x)
            .iter()
            .zip(slice(&h))
            .map(|(a, b)| a + b)
            .collect();
        let normed = rms_norm_rows(&sum, slice(&w), eps);
        (tensor(sum, shape.clone()), tensor(normed, shape))
    }

    fn fused_rms_norm_pair(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        q_weight: FloatTensor<Self>,
        k_weight: FloatTensor<Self>,
        eps: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        // One launch matters on a GPU only: here the two norms, as they were.
        (
            Self::fused_rms_norm(q, q_weight, eps),
            Self::fused_rms_norm(k, k_weight, eps),
        )
    }

    fn fused_norm_add_rms_norm(
        x: FloatTensor<Self>,
        h: FloatTensor<Self>,
        h_weight: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        eps: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let h = Self::fused_rms_norm(h, h_weight, eps);
        Self::fused_add_rms_norm(x, h, weight, eps)
    }

    fn fused_rope(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        rotations: FloatTensor<Self>,
        start: usize,
        neox: bool,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (rotations, _) = values(&rotations);
        let rotations = slice(&rotations);
        (
            rotate(&q, rotations, start, neox),
            rotate(&k, rotations, start, neox),
        )
    }

    fn fused_cache_write(
        keys: FloatTensor<Self>,
        values: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        start: usize,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        (write_cache(keys, &k, start), write_cache(values, &v, start))
    }

    fn fused_gated(
        gate: FloatTensor<Self>,
        up: FloatTensor<Self>,
        gelu: bool,
    ) -> FloatTensor<Self> {
        // The gate and up projections come as two column ranges of one product: their rows
        // are read where they are, not copied out first.
        if let (Some(g), Some(u)) = (RowView::of(&gate), RowView::of(&up))
            && (g.rows, g.cols) == (u.rows, u.cols)
        {
            let (rows, cols) = (g.rows, g.cols);
            let pool = Pool::global();
            let Some(runs) = pool.runs(rows, MIN_GATED_RUN) else {
                return tensor(gated_rows(&g, &u, 0..rows, gelu), vec![rows, cols]);
            };
            // A prefill's rows, in runs on the matmul pool: SiLU's `exp` was a twentieth of
            // the calling thread's time in a two-thread prefill, with the other thread idle
            // (SmolLM2, 256 tokens, two threads, five alternating runs: median 318 → 333
            // tokens/s, ranges 308–323 and 294–338).
            let parts = pool.map(
                runs.len(),
                Arc::new(move |i| {
                    match (RowView::of(&gate), RowView::of(&up)) {
                        (Some(g), Some(u)) => gated_rows(&g, &u, runs[i].clone(), gelu),
                        // The same tensors as above: not reached.
                        _ => Vec::new(),
                    }
                }),
            );
            return tensor(parts.concat(), vec![rows, cols]);
        }
        let (gate, shape) = values(&gate);
        let (up, _) = values(&up);
        let act = activation(gelu);
        let out = slice(&gate)
            .iter()
            .zip(slice(&up))
            .map(|(&g, &u)| act(g) * u)
            .collect();
        tensor(out, shape)
    }
}

/// Rows below which the gated activation is not split across threads.
const MIN_GATED_RUN: usize = 16;

/// The gate's activation: SiLU, or (when `gelu`) GELU from [`gelu_table`].
fn activation(gelu: bool) -> impl Fn(f32) -> f32 {
    let table = gelu.then(gelu_table);
    move |g: f32| match table {
        // ggml's `x / (1 + e^-x)`.
        None => g / (1.0 + (-g).exp()),
        Some(_) if g <= -10.0 => 0.0,
        Some(_) if g >= 10.0 => g,
        Some(table) => table[usize::from(f16::from_f32(g).to_bits())],
    }
}

/// `act(gate) · up` of rows `run`.
fn gated_rows(gate: &RowView, up: &RowView, run: Range<usize>, gelu: bool) -> Vec<f32> {
    let act = activation(gelu);
    let mut out = Vec::with_capacity(run.len() * gate.cols);
    for r in run {
        out.extend(gate.row(r).iter().zip(up.row(r)).map(|(&g, &u)| act(g) * u));
    }
    out
}

/// A 2-D tensor whose rows are each contiguous in its storage (a column range of a wider
/// tensor, as `narrow` leaves one).
struct RowView<'a> {
    storage: &'a [f32],
    start: usize,
    stride: usize,
    rows: usize,
    cols: usize,
}

impl<'a> RowView<'a> {
    fn of(t: &'a FlexTensor) -> Option<Self> {
        let layout = t.layout();
        let (&[rows, cols], &[stride, 1]) = (layout.shape().as_slice(), layout.strides()) else {
            return None;
        };
        let stride = usize::try_from(stride).ok()?;
        let storage = t.storage::<f32>();
        let start = layout.start_offset();
        // Every row inside the storage, or the view is not used.
        let end = match rows {
            0 => start,
            _ => start + (rows - 1) * stride + cols,
        };
        (stride >= cols && end <= storage.len()).then_some(RowView {
            storage,
            start,
            stride,
            rows,
            cols,
        })
    }

    fn row(&self, r: usize) -> &'a [f32] {
        let at = self.start + r * self.stride;
        &self.storage[at..at + self.cols]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector rounding is the scalar one's, bit for bit: ties, values between `f16`s,
    /// subnormals, overflow to infinity, zeros of both signs; lengths around the vectors'.
    #[test]
    fn slice_rounding_equals_value_rounding() {
        let mut values: Vec<f32> = (0..4000u32)
            .map(|i| {
                let bits = i.wrapping_mul(2_654_435_761) >> 1;
                // Exponents from the subnormal `f16`s to past `f16::MAX`.
                let exponent = 100 + (bits % 60);
                f32::from_bits(exponent << 23 | (bits & 0x7f_ffff) | (i & 1) << 31)
            })
            .collect();
        values.extend([0.0, -0.0, 1.0 + 1.0 / 2048.0, 65_520.0, 65_504.0, 1e-8, 0.5]);
        for len in [0, 1, 7, 8, 9, 15, 17, values.len()] {
            let mut got = values[..len].to_vec();
            round16_slice(&mut got);
            for (g, v) in got.iter().zip(&values) {
                assert_eq!(g.to_bits(), round16(*v).to_bits(), "{v:e}");
            }
        }
    }

    #[test]
    fn gated_reads_column_ranges_in_place() {
        // A stacked gate-and-up product: `rows` tokens, 2 × 5 columns; 40 rows are split
        // across the pool's threads where there are two.
        for rows in [3usize, 40] {
            let value = |i: usize| ((i % 30) as f32 - 14.5) * 0.7;
            let both = tensor((0..rows * 10).map(value).collect(), vec![rows, 10]);
            let (gate, up) = (both.narrow(1, 0, 5), both.narrow(1, 5, 5));
            assert!(RowView::of(&gate).is_some() && !gate.layout().is_contiguous());
            for gelu in [false, true] {
                let got = Flex::fused_gated(gate.clone(), up.clone(), gelu);
                assert_eq!(got.layout().shape().to_vec(), vec![rows, 5]);
                let got = slice(&got);
                assert_eq!(got.len(), rows * 5);
                for (i, &v) in got.iter().enumerate() {
                    let (g, u) = (value(i / 5 * 10 + i % 5), value(i / 5 * 10 + i % 5 + 5));
                    let a = match gelu {
                        false => g / (1.0 + (-g).exp()),
                        true if g.abs() >= 10.0 => g.max(0.0),
                        true => round16(gelu_tanh(round16(g))),
                    };
                    assert_eq!(
                        v.to_bits(),
                        (a * u).to_bits(),
                        "rows {rows}, gelu {gelu}, {i}"
                    );
                }
            }
        }
    }

    #[test]
    fn gelu_table_holds_the_formula_for_every_f16() {
        let table = gelu_table();
        for bits in 0..=u16::MAX {
            let x = f16::from_bits(bits).to_f32();
            let want = round16(gelu_tanh(x));
            let got = table[usize::from(bits)];
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "{x}: {got} != {want}"
            );
        }
    }
}
