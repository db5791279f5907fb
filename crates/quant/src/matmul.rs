//! The quantised matmul on the CPU: `y[t, n] = Σ_k x[t, k] · W[n, k]` with `W` in GGUF blocks.
//!
//! Activations are encoded once (see [`crate::act`]); the weight rows are cut into pieces the
//! threads take in turn ([`Pool::map`]); each row is read once (decoded into a scratch buffer
//! where no fused kernel exists) and dotted with every activation row, so a batched prefill
//! reads each weight row once.

use std::sync::Arc;

use crate::act::QuantizedActs;
use crate::dot::{IntRows, dot_f32, dot_int, dot_raw};
use crate::format::QuantFormat;
use crate::pool::Pool;
use crate::unpack::{UnpackedRow, unpack_row};

/// Weight bytes shared with the worker threads (the backend's tensor storage).
pub type SharedBytes = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// A quantised weight matrix: `rows` output features of `cols` inputs, rows contiguous.
#[derive(Clone)]
pub struct QuantMatrix {
    /// The storage holding the blocks.
    pub bytes: SharedBytes,
    /// Where the first row starts in `bytes`.
    pub offset: usize,
    /// The block format.
    pub format: QuantFormat,
    /// Output features.
    pub rows: usize,
    /// Input features (values per row).
    pub cols: usize,
}

impl QuantMatrix {
    fn row_bytes(&self) -> usize {
        self.format.row_bytes(self.cols).unwrap_or(0)
    }

    fn row(&self, n: usize) -> &[u8] {
        let rb = self.row_bytes();
        let start = self.offset + n * rb;
        &(*self.bytes).as_ref()[start..start + rb]
    }
}

/// `x` (`tokens × cols`, row-major) times the transpose of `w`: `tokens × rows`, row-major.
pub fn quant_matmul(w: &QuantMatrix, x: &[f32], tokens: usize, pool: &Pool) -> Vec<f32> {
    let acts = Arc::new(QuantizedActs::encode(w.format.activation(), x, w.cols));
    // Pieces of about 32K weights: small enough that a worker waking late still finds some,
    // large enough that taking one costs nothing beside computing it.
    let per = (32_768 / w.cols.max(1)).clamp(8, w.rows.max(8));
    let pieces = w.rows.div_ceil(per);
    let parts = {
        let (w, acts) = (w.clone(), Arc::clone(&acts));
        pool.map(
            pieces,
            Arc::new(move |i| {
                let range = (i * per).min(w.rows)..((i + 1) * per).min(w.rows);
                rows_times_acts(&w, &acts, tokens, range)
            }),
        )
    };
    let mut out = vec![0.0f32; tokens * w.rows];
    let mut start = 0;
    for part in parts {
        let len = part.len() / tokens.max(1);
        for t in 0..tokens {
            out[t * w.rows + start..t * w.rows + start + len]
                .copy_from_slice(&part[t * len..(t + 1) * len]);
        }
        start += len;
    }
    out
}

/// Rows `range` of `w` against every activation row: `tokens × range.len()`, row-major.
fn rows_times_acts(
    w: &QuantMatrix,
    acts: &QuantizedActs,
    tokens: usize,
    range: std::ops::Range<usize>,
) -> Vec<f32> {
    let len = range.len();
    let mut out = vec![0.0f32; tokens * len];
    let mut row = UnpackedRow::default();
    for (i, n) in range.enumerate() {
        let bytes = w.row(n);
        if tokens > 0
            && let Some(first) = dot_raw(w.format, bytes, acts, 0)
        {
            out[i] = first;
            for t in 1..tokens {
                out[t * len + i] = dot_raw(w.format, bytes, acts, t).unwrap_or(0.0);
            }
            continue;
        }
        unpack_row(w.format, bytes, w.cols, &mut row);
        for t in 0..tokens {
            out[t * len + i] = match w.format {
                QuantFormat::F32 | QuantFormat::F16 => dot_f32(&row.values, acts.row_values(t)),
                _ => dot_int(&IntRows {
                    wq: &row.q,
                    wscale: &row.scale,
                    woffset: &row.offset,
                    xq: acts.row_q(t),
                    xd: acts.row_d(t),
                    xsum: acts.row_sum(t),
                }),
            };
        }
    }
    out
}
