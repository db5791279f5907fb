//! Weights that stay in their GGUF block format, and the matmul that reads them.
//!
//! [`QuantOps`] is a burn backend extension (`#[backend_extension]`): model code calls it on
//! any device through [`QLinear`] / [`QEmbedding`]; each backend implements it natively — on
//! the Flex CPU device with the kernels of `stampo-quant` (re-exported here: [`dot`],
//! parallel over rows on a parking [`pool`]). The block bytes live on the device as a `u32` int tensor (the file's bytes,
//! zero-padded to a multiple of four), so device memory for weights is the GGUF's tensor bytes.

mod flex;

pub use stampo_quant::{act, dot, format, matmul, pool, unpack};

use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::backend::{Backend, Dispatch, backend_extension};
use burn::module::{Module, Param};
use burn::tensor::{DType, Device, Int, Tensor, TensorData};

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
#[backend_extension(Flex)]
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

/// A linear layer whose weight stays quantised: `y = x · Wᵀ (+ b)`.
#[derive(Module, Debug)]
pub struct QLinear {
    /// The weight's GGUF blocks.
    pub blocks: Tensor<1, Int>,
    /// Optional bias, `[rows]`.
    pub bias: Option<Param<Tensor<1>>>,
    /// Format and shape of the weight.
    #[module(skip)]
    pub layout: QuantLayout,
}

impl QLinear {
    /// Wraps a weight (and bias) already on the device, checking the byte count.
    pub fn new(
        name: &str,
        blocks: Tensor<1, Int>,
        bias: Option<Tensor<1>>,
        layout: QuantLayout,
    ) -> Result<QLinear, ModelError> {
        let expected = layout
            .format
            .row_bytes(layout.cols)
            .map(|b| b * layout.rows);
        let words = blocks.dims()[0];
        if expected.map(|b| b.div_ceil(4)) != Some(words) {
            return Err(ModelError::TensorBytes {
                name: name.to_string(),
                format: layout.format,
                shape: [layout.rows, layout.cols],
                bytes: words * 4,
            });
        }
        Ok(QLinear {
            blocks,
            bias: bias.map(Param::from_tensor),
            layout,
        })
    }

    /// Output features.
    pub fn rows(&self) -> usize {
        self.layout.rows
    }

    /// # Shapes
    /// - `x`: `[tokens, cols]`
    /// - output: `[tokens, rows]`
    pub fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let out = <Dispatch as QuantOps>::quant_matmul(
            x.into_dispatch(),
            self.blocks.clone().into_dispatch(),
            self.layout,
        );
        let y = Tensor::<2>::from_dispatch(out);
        match &self.bias {
            Some(b) => y + b.val().unsqueeze::<2>(),
            None => y,
        }
    }

    /// Rows `ids` of the weight, dequantised (for an embedding table).
    ///
    /// # Shapes
    /// - `ids`: `[tokens]`
    /// - output: `[tokens, cols]`
    pub fn rows_of(&self, ids: Tensor<1, Int>) -> Tensor<2> {
        let out = <Dispatch as QuantOps>::quant_rows(
            self.blocks.clone().into_dispatch(),
            ids.into_dispatch(),
            self.layout,
        );
        Tensor::<2>::from_dispatch(out)
    }

    /// Bytes the weight occupies on the device.
    pub fn device_bytes(&self) -> usize {
        self.blocks.dims()[0] * 4 + self.bias.as_ref().map_or(0, |b| b.dims()[0] * 4)
    }
}
