//! The quantised matmul on the CPU: `y[t, n] = Σ_k x[t, k] · W[n, k]` with `W` in GGUF blocks.
//!
//! Activations are encoded once (see [`crate::act`]); the weight rows are cut into pieces the
//! threads take in turn ([`Pool::map`]); each row is read once (decoded into a scratch buffer
//! where no fused kernel exists) and dotted with every activation row, so a batched prefill
//! reads each weight row once.

use std::sync::Arc;

use crate::act::QuantizedActs;
use crate::dot::{IntRows, TOKENS, dot_f32, dot_int, raw_dot, raw_dot_tokens};
use crate::format::QuantFormat;
use crate::octet::{RowOctets, octet_dot};
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

    /// The bytes of rows `range`, contiguous.
    fn rows(&self, range: std::ops::Range<usize>) -> &[u8] {
        let rb = self.row_bytes();
        &(*self.bytes).as_ref()[self.offset + range.start * rb..self.offset + range.end * rb]
    }
}

/// `x` (`tokens × cols`, row-major) times the transpose of `w`: `tokens × rows`, row-major.
pub fn quant_matmul(w: &QuantMatrix, x: &[f32], tokens: usize, pool: &Pool) -> Vec<f32> {
    quant_matmul_stacked(std::slice::from_ref(w), x, tokens, pool)
}

/// `x` times the transpose of the matrices `ws` stacked row-wise (one format and width, as a
/// layer's Q, K and V projections): `tokens × Σ rows`, row-major, each matrix's outputs after
/// the previous one's. The activations are encoded once, and the threads are woken once for
/// all the matrices: on two shared cores waking them costs as much as a small product.
pub fn quant_matmul_stacked(ws: &[QuantMatrix], x: &[f32], tokens: usize, pool: &Pool) -> Vec<f32> {
    let Some(first) = ws.first() else {
        return Vec::new();
    };
    let acts = QuantizedActs::encode(first.format, x, first.cols);
    let per = piece_rows(first.cols);
    let mut pieces = Vec::new();
    let mut column = 0;
    for (matrix, w) in ws.iter().enumerate() {
        for i in 0..w.rows.div_ceil(per) {
            let rows = i * per..((i + 1) * per).min(w.rows);
            pieces.push(Piece {
                matrix,
                column: column + rows.start,
                rows,
            });
        }
        column += w.rows;
    }
    run_pieces(ws.to_vec(), acts, tokens, column, pieces, pool)
}

/// `x` times the transpose of rows `ids` of `w` only: `tokens × ids.len()`, row-major, column
/// `j` row `ids[j]`'s products, each the value [`quant_matmul`] gives there, bit for bit (the
/// output head's logits of the tokens a grammar allows, the rest never computed). Ids past
/// `w`'s rows give 0.
pub fn quant_matmul_rows(
    w: &QuantMatrix,
    x: &[f32],
    tokens: usize,
    ids: &[u32],
    pool: &Pool,
) -> Vec<f32> {
    let acts = QuantizedActs::encode(w.format, x, w.cols);
    // Runs of consecutive rows (a mask's ids come sorted, and allowed tokens cluster: digits,
    // a word's forms), each cut to pieces as in the full product.
    let per = piece_rows(w.cols);
    let mut pieces: Vec<Piece> = Vec::new();
    for (j, &id) in ids.iter().enumerate() {
        let id = id as usize;
        if id >= w.rows {
            continue;
        }
        match pieces.last_mut() {
            Some(p) if p.rows.end == id && p.column + p.rows.len() == j && p.rows.len() < per => {
                p.rows.end += 1;
            }
            _ => pieces.push(Piece {
                matrix: 0,
                rows: id..id + 1,
                column: j,
            }),
        }
    }
    run_pieces(vec![w.clone()], acts, tokens, ids.len(), pieces, pool)
}

/// Rows a piece of a product holds: about 32K weights, small enough that a worker waking
/// late still finds some, large enough that taking one costs nothing beside computing it; a
/// multiple of eight (see `RowOctets`).
fn piece_rows(cols: usize) -> usize {
    (32_768 / cols.max(1)).clamp(8, 1 << 20).next_multiple_of(8)
}

/// Rows `rows` of matrix `matrix` of a product, their outputs from column `column` on.
struct Piece {
    matrix: usize,
    rows: std::ops::Range<usize>,
    column: usize,
}

/// The `pieces` of a product of `ws` with `acts`, taken in turn by the caller and the workers
/// (woken once for them all): `tokens × width` values, row-major.
fn run_pieces(
    ws: Vec<QuantMatrix>,
    acts: QuantizedActs,
    tokens: usize,
    width: usize,
    pieces: Vec<Piece>,
    pool: &Pool,
) -> Vec<f32> {
    let mut out = vec![0.0f32; tokens * width];
    let sink = Arc::new(Output {
        ptr: out.as_mut_ptr(),
        len: out.len(),
        width,
    });
    let (acts, pieces) = (Arc::new(acts), Arc::new(pieces));
    pool.map(
        pieces.len(),
        Arc::new(move |i| {
            let p = &pieces[i];
            rows_times_acts(
                &ws[p.matrix],
                &acts,
                tokens,
                p.rows.clone(),
                &sink,
                p.column,
            );
        }),
    );
    // `Pool::map` has returned: every piece is written, and none writes any more.
    out
}

/// A product's output, `tokens × width` values, written by the pieces at once: each writes
/// its own columns of every token's row. They used to return their values for the calling
/// thread to copy into place, which on two threads left it a copy and the page faults of
/// every piece's buffer (freed on another thread than it was allocated on) to do alone.
struct Output {
    ptr: *mut f32,
    len: usize,
    width: usize,
}

// SAFETY: the pieces write disjoint values (`Output::set_run`), and the buffer outlives them all:
// `run_pieces` reads it only after `Pool::map` returns, which is after the last
// piece.
unsafe impl Send for Output {}
unsafe impl Sync for Output {}

impl Output {
    /// Writes the value of token `t`, column `column`.
    fn set(&self, t: usize, column: usize, value: f32) {
        self.set_run(t, column, std::slice::from_ref(&value));
    }

    /// Writes the values of token `t` from column `column` on, checked once for the run.
    fn set_run(&self, t: usize, column: usize, values: &[f32]) {
        let at = t * self.width + column;
        assert!(
            column + values.len() <= self.width && at + values.len() <= self.len,
            "output values {at}.. of {}",
            self.len
        );
        // SAFETY: the run is inside the buffer and inside row `t` (checked above); the
        // buffer is alive (see the `Send` impl), only the piece that owns these columns
        // writes them, and `values` is another allocation.
        unsafe {
            std::ptr::copy_nonoverlapping(values.as_ptr(), self.ptr.add(at), values.len());
        }
    }
}

/// From how many activation rows a product repacks its weight rows eight at a time, where
/// the format has an octet kernel (`crate::octet`): with the packing in AVX2 vectors, eight
/// rows take the two ways about as long (`prefill_matmul` on a Zen 4, Qwen2.5's shapes: Q5_0
/// 33 GMAC/s either way, Q4_K 26 → 40) and twelve are faster repacked (Q5_0 34 → 42).
const OCTET_TOKENS: usize = 8;

/// About how many bytes of encoded activations an octet kernel runs over before the next
/// octet (two bytes a value bounds every encoding: Q5_0's blocks carry their offsets).
const ACT_CHUNK_BYTES: usize = 256 << 10;

/// Rows `range` of `w` against every activation row, written to columns `first..` of `out`.
fn rows_times_acts(
    w: &QuantMatrix,
    acts: &QuantizedActs,
    tokens: usize,
    range: std::ops::Range<usize>,
    out: &Output,
    first: usize,
) {
    let len = range.len();
    let mut row = UnpackedRow::default();
    // One look-up of the storage per piece, not per row (it is behind a `dyn`).
    let rb = w.row_bytes();
    let rows = w.rows(range);
    if tokens >= OCTET_TOKENS
        && let Some(dot) = octet_dot(w.format)
    {
        thread_local! {
            // Each thread's packing, its buffers kept from one piece to the next.
            static PACKED: std::cell::RefCell<RowOctets> =
                const { std::cell::RefCell::new(RowOctets::new()) };
        }
        PACKED.with_borrow_mut(|packed| {
            packed.pack(w.format, rows, rb);
            // Activation rows in chunks that stay in the L2 cache (a whole long prompt's are
            // several megabytes), octets inside: an octet's packed rows stay in the L1 cache
            // while the chunk's rows pass over them.
            let chunk = (ACT_CHUNK_BYTES / (2 * w.cols).max(1))
                .max(12)
                .next_multiple_of(12);
            let mut sums = vec![[0.0f32; 8]; chunk.min(tokens)];
            for t0 in (0..tokens).step_by(chunk) {
                let sums = &mut sums[..chunk.min(tokens - t0)];
                for octet in 0..packed.octets() {
                    dot(packed, octet, acts, t0, sums);
                    let rows = (len - 8 * octet).min(8);
                    for (t, sums) in sums.iter().enumerate() {
                        out.set_run(t0 + t, first + 8 * octet, &sums[..rows]);
                    }
                }
            }
        });
        return;
    }
    if let Some(dot) = raw_dot(w.format) {
        let mut t = 0;
        if let Some(dot_tokens) = raw_dot_tokens(w.format) {
            // Token groups outside, rows inside: the piece's weights stay in the L1 cache
            // while each group of activation rows passes over them.
            let mut tile = vec![[0.0f32; TOKENS]; len];
            while t + TOKENS <= tokens {
                dot_tokens(rows, rb, acts, t, &mut tile);
                for (i, sums) in tile.iter().enumerate() {
                    for (k, &v) in sums.iter().enumerate() {
                        out.set(t + k, first + i, v);
                    }
                }
                t += TOKENS;
            }
        }
        for (i, bytes) in rows.chunks_exact(rb.max(1)).enumerate() {
            for t in t..tokens {
                out.set(t, first + i, dot(bytes, acts, t));
            }
        }
        return;
    }
    for (i, bytes) in rows.chunks_exact(rb.max(1)).enumerate() {
        unpack_row(w.format, bytes, w.cols, &mut row);
        for t in 0..tokens {
            let value = match w.format {
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
            out.set(t, first + i, value);
        }
    }
}
