//! Weights that stay in their GGUF block format, and the matmul that reads them.
//!
//! [`QuantOps`] is a burn backend extension (`#[backend_extension]`): model code calls it on
//! any device through [`QLinear`] / [`QEmbedding`]; each backend implements it natively — on
//! the Flex CPU device with the kernels of `stampo-quant` (re-exported here: [`dot`],
//! parallel over rows on a parking [`pool`]). The block bytes live on the device as a `u32` int tensor (the file's bytes,
//! zero-padded to a multiple of four), so device memory for weights is the GGUF's tensor bytes.

#[cfg(feature = "wgpu")]
mod cube;
mod flex;

pub use stampo_quant::{act, dot, format, matmul, pool, unpack};

use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::backend::{Backend, Dispatch, backend_extension};
use burn::module::{Module, Param};
use burn::tensor::{Bool, DType, Device, Int, Tensor, TensorData};

pub use format::{ActivationFormat, QuantFormat};

use crate::error::ModelError;

/// Shape and format of a quantised matrix: `rows` outputs of `cols` inputs each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuantLayout {
    /// The ggml block format.
    pub format: QuantFormat,
    /// Output features (one GGUF row each).
    pub rows: usize,
    /// Input features (values per row).
    pub cols: usize,
}

/// Operations on block-quantised weights, implemented natively by each backend.
#[backend_extension(Flex, Cube: cfg(feature = "wgpu"))]
pub trait QuantOps: Backend {
    /// `x · Wᵀ` for `x` of shape `[tokens, cols]`: `[tokens, rows]`.
    fn quant_matmul(
        x: FloatTensor<Self>,
        blocks: IntTensor<Self>,
        layout: QuantLayout,
    ) -> FloatTensor<Self>;

    /// Rows `ids` of `W`, dequantised: `[ids, cols]` (an embedding lookup).
    fn quant_rows(
        blocks: IntTensor<Self>,
        ids: IntTensor<Self>,
        layout: QuantLayout,
    ) -> FloatTensor<Self>;
}

/// A GGUF tensor's bytes as a device tensor of `u32` words (padded with zeros).
pub fn blocks_tensor(bytes: &[u8], device: &Device) -> Tensor<1, Int> {
    let mut words = vec![0u32; bytes.len().div_ceil(4)];
    for (w, chunk) in words.iter_mut().zip(bytes.chunks(4)) {
        let mut b = [0u8; 4];
        b[..chunk.len()].copy_from_slice(chunk);
        *w = u32::from_le_bytes(b);
    }
    let len = words.len();
    Tensor::from_data(TensorData::new(words, [len]), (device, DType::U32))
}

/// The most bytes of blocks one device buffer holds: WebGPU's guaranteed
/// `maxStorageBufferBindingSize` (128 MiB). A larger matrix (Gemma 3's 262k-row embedding,
/// 170 MiB) is kept as several ranges of whole rows.
pub const MAX_PART_BYTES: usize = 128 << 20;

/// A linear layer whose weight stays quantised: `y = x · Wᵀ (+ b)`.
#[derive(Module, Debug)]
pub struct QLinear {
    /// The weight's GGUF blocks, in ranges of `part_rows` rows (the last may hold fewer).
    pub parts: Vec<Tensor<1, Int>>,
    /// Optional bias, `[rows]`.
    pub bias: Option<Param<Tensor<1>>>,
    /// Format and shape of the whole weight.
    #[module(skip)]
    pub layout: QuantLayout,
    /// Rows in each part but the last.
    #[module(skip)]
    pub part_rows: usize,
}

impl QLinear {
    /// Puts a weight's GGUF bytes (and its bias) on `device`, checking the byte count.
    pub fn from_bytes(
        name: &str,
        bytes: &[u8],
        bias: Option<Tensor<1>>,
        layout: QuantLayout,
        device: &Device,
    ) -> Result<QLinear, ModelError> {
        QLinear::from_bytes_in_parts(name, bytes, bias, layout, device, MAX_PART_BYTES)
    }

    /// As [`QLinear::from_bytes`], with parts of at most `max_part_bytes` (at least one row).
    pub fn from_bytes_in_parts(
        name: &str,
        bytes: &[u8],
        bias: Option<Tensor<1>>,
        layout: QuantLayout,
        device: &Device,
        max_part_bytes: usize,
    ) -> Result<QLinear, ModelError> {
        let wrong_size = || ModelError::TensorBytes {
            name: name.to_string(),
            format: layout.format,
            shape: [layout.rows, layout.cols],
            bytes: bytes.len(),
        };
        let row_bytes = layout
            .format
            .row_bytes(layout.cols)
            .ok_or_else(wrong_size)?;
        if layout.rows == 0 || row_bytes == 0 || row_bytes * layout.rows != bytes.len() {
            return Err(wrong_size());
        }
        let part_rows = (max_part_bytes / row_bytes).clamp(1, layout.rows);
        let parts = bytes
            .chunks(part_rows * row_bytes)
            .map(|part| blocks_tensor(part, device))
            .collect();
        Ok(QLinear {
            parts,
            bias: bias.map(Param::from_tensor),
            layout,
            part_rows,
        })
    }

    /// Output features.
    pub fn rows(&self) -> usize {
        self.layout.rows
    }

    /// The first row of part `p` and that part's layout.
    fn part(&self, p: usize) -> (usize, QuantLayout) {
        let first = p * self.part_rows;
        let rows = self.part_rows.min(self.layout.rows - first);
        (
            first,
            QuantLayout {
                rows,
                ..self.layout
            },
        )
    }

    /// # Shapes
    /// - `x`: `[tokens, cols]`
    /// - output: `[tokens, rows]`
    pub fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let mut outputs: Vec<Tensor<2>> = self
            .parts
            .iter()
            .enumerate()
            .map(|(p, blocks)| {
                let out = <Dispatch as QuantOps>::quant_matmul(
                    x.clone().into_dispatch(),
                    blocks.clone().into_dispatch(),
                    self.part(p).1,
                );
                Tensor::<2>::from_dispatch(out)
            })
            .collect();
        let y = match outputs.len() {
            1 => outputs.swap_remove(0),
            _ => Tensor::cat(outputs, 1),
        };
        match &self.bias {
            Some(b) => y + b.val().unsqueeze::<2>(),
            None => y,
        }
    }

    /// Rows `ids` of the weight, dequantised (for an embedding table). Ids past the last row
    /// read the last row; the model checks them against the vocabulary first.
    ///
    /// # Shapes
    /// - output: `[ids, cols]`
    pub fn rows_of(&self, ids: &[u32]) -> Tensor<2> {
        let device = self.parts[0].device();
        let mut out: Option<Tensor<2>> = None;
        for (p, blocks) in self.parts.iter().enumerate() {
            let (first, layout) = self.part(p);
            let end = first + layout.rows;
            let here = |id: u32| {
                (first..end).contains(&(id as usize))
                    || (p + 1 == self.parts.len() && id as usize >= end)
            };
            if !ids.iter().any(|&id| here(id)) {
                continue;
            }
            let local: Vec<u32> = ids
                .iter()
                .map(|&id| (id as usize).saturating_sub(first).min(layout.rows - 1) as u32)
                .collect();
            let local = Tensor::<1, Int>::from_data(
                TensorData::new(local, [ids.len()]),
                (&device, DType::U32),
            );
            let rows = Tensor::<2>::from_dispatch(<Dispatch as QuantOps>::quant_rows(
                blocks.clone().into_dispatch(),
                local.into_dispatch(),
                layout,
            ));
            out = Some(match out {
                None => rows,
                Some(so_far) => {
                    let mask: Vec<bool> = ids.iter().map(|&id| here(id)).collect();
                    let mask =
                        Tensor::<1, Bool>::from_data(TensorData::new(mask, [ids.len()]), &device);
                    so_far.mask_where(
                        mask.unsqueeze_dim::<2>(1)
                            .expand([ids.len(), self.layout.cols]),
                        rows,
                    )
                }
            });
        }
        out.unwrap_or_else(|| Tensor::zeros([ids.len(), self.layout.cols], &device))
    }

    /// Bytes the weight occupies on the device.
    pub fn device_bytes(&self) -> usize {
        self.parts.iter().map(|b| b.dims()[0] * 4).sum::<usize>()
            + self.bias.as_ref().map_or(0, |b| b.dims()[0] * 4)
    }
}
