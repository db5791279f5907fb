//! Weights that stay in their GGUF block format, and the matmul that reads them.
//!
//! [`QuantOps`] is a burn backend extension (`#[backend_extension]`): model code calls it on
//! any device through [`QLinear`] / [`QEmbedding`]; each backend implements it natively — on
//! the Flex CPU device with the kernels of `stampo-quant` (re-exported here: [`dot`],
//! parallel over rows on a parking [`pool`]). The block bytes live on the device as a `u32` int tensor (the file's bytes,
//! zero-padded to a multiple of four), so device memory for weights is the GGUF's tensor bytes.

#[cfg(feature = "wgpu")]
pub(crate) mod cube;
mod flex;

pub use stampo_quant::{act, attention, dot, format, matmul, pool, unpack};

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

    /// `x · [A; B; C]ᵀ (+ biases)`: three matrices of one width, each of its own format and
    /// row count (`layouts`), stacked row-wise (a layer's Q, K and V projections in one
    /// launch): `[tokens, Σ rows]`. A matrix of no rows is absent, and its blocks are not read
    /// (pass another's). `bias` holds the matrices' biases end to end (`[Σ rows]`, as
    /// [`QLinear::stacked_bias`] makes it): matrix `i`'s rows of it are added to its products
    /// where `biased[i]`, else not read; with no `biased`, `bias` is not read at all (pass any,
    /// `x` say: burn's backend extensions take tensors, not options of them). One buffer, not
    /// three, keeps the WebGPU kernel within 8 storage buffers.
    fn quant_matmul_stacked(
        x: FloatTensor<Self>,
        a: IntTensor<Self>,
        b: IntTensor<Self>,
        c: IntTensor<Self>,
        layouts: [QuantLayout; 3],
        bias: FloatTensor<Self>,
        biased: [bool; 3],
    ) -> FloatTensor<Self>;

    /// `x · W[ids]ᵀ`, the products with rows `ids` only: `[tokens, ids]`, each value the one
    /// [`QuantOps::quant_matmul`] gives in that row (the output head's logits of the tokens a
    /// grammar allows). Ids must be rows of `W`.
    fn quant_matmul_rows(
        x: FloatTensor<Self>,
        blocks: IntTensor<Self>,
        ids: IntTensor<Self>,
        layout: QuantLayout,
    ) -> FloatTensor<Self>;

    /// Rows `ids` of `W`, dequantised: `[ids, cols]` (an embedding lookup).
    fn quant_rows(
        blocks: IntTensor<Self>,
        ids: IntTensor<Self>,
        layout: QuantLayout,
    ) -> FloatTensor<Self>;
}

/// A gated MLP's products on the wgpu device, where each launch costs the host more than a
/// small product's arithmetic; the CPU keeps its stacked product and its own gate.
#[cfg(feature = "wgpu")]
#[backend_extension(Cube)]
pub trait QuantGatedOps: Backend {
    /// `act(x · Gᵀ) · (x · Uᵀ)`, the activation SiLU or (when `gelu`) ggml's tanh GELU: a
    /// gated MLP's gate and up products (one width and row count, each of its own format,
    /// `layouts`) and its gate in one launch, `[tokens, rows]`: the values of
    /// [`QuantOps::quant_matmul_stacked`] followed by [`crate::fused::gated`].
    fn quant_matmul_gated(
        x: FloatTensor<Self>,
        gate: IntTensor<Self>,
        up: IntTensor<Self>,
        layouts: [QuantLayout; 2],
        gelu: bool,
    ) -> FloatTensor<Self>;
}

/// Words filled in memory order from a file's bytes, as a device tensor. The words are read
/// as little-endian (a no-op on wasm32 and x86-64); on the CPU device the vector becomes the
/// tensor's storage without a copy.
fn words_tensor(mut words: Vec<u32>, device: &Device) -> Tensor<1, Int> {
    for w in &mut words {
        *w = u32::from_le(*w);
    }
    let len = words.len();
    Tensor::from_data(TensorData::new(words, [len]), (device, DType::U32))
}

/// A quantised matrix's bytes, written as they arrive straight into the `u32` buffers its
/// device parts are made from (ranges of whole rows, at most `max_part_bytes` each): no other
/// copy of the matrix is made, which matters in a browser, whose wasm memory never shrinks.
pub struct BlockBuffers {
    name: String,
    layout: QuantLayout,
    part_rows: usize,
    /// Bytes in each part but the last.
    part_bytes: usize,
    parts: Vec<Vec<u32>>,
    total: usize,
    written: usize,
}

impl BlockBuffers {
    /// Buffers for matrix `name` of `bytes` bytes in `layout`. An error if `bytes` is not
    /// `layout`'s size, or if memory cannot hold it.
    pub fn new(
        name: &str,
        layout: QuantLayout,
        bytes: usize,
        max_part_bytes: usize,
    ) -> Result<Self, ModelError> {
        let wrong_size = || ModelError::TensorBytes {
            name: name.to_string(),
            format: layout.format,
            shape: [layout.rows, layout.cols],
            bytes,
        };
        let row_bytes = layout
            .format
            .row_bytes(layout.cols)
            .ok_or_else(wrong_size)?;
        if layout.rows == 0 || row_bytes == 0 || row_bytes.checked_mul(layout.rows) != Some(bytes) {
            return Err(wrong_size());
        }
        let part_rows = (max_part_bytes / row_bytes).clamp(1, layout.rows);
        let part_bytes = part_rows * row_bytes;
        let mut parts = Vec::new();
        let mut left = bytes;
        while left > 0 {
            let len = left.min(part_bytes);
            let mut words = Vec::new();
            // The size is the file's claim: ask, rather than abort when memory cannot grow.
            words
                .try_reserve_exact(len.div_ceil(4))
                .map_err(|_| ModelError::OutOfMemory {
                    name: name.to_string(),
                    bytes,
                })?;
            words.resize(len.div_ceil(4), 0);
            parts.push(words);
            left -= len;
        }
        Ok(Self {
            name: name.to_string(),
            layout,
            part_rows,
            part_bytes,
            parts,
            total: bytes,
            written: 0,
        })
    }

    /// Appends the next `bytes` of the matrix; an error past its end.
    pub fn write(&mut self, mut bytes: &[u8]) -> Result<(), ModelError> {
        if bytes.len() > self.total - self.written {
            return Err(self.wrong_size(self.written + bytes.len()));
        }
        while !bytes.is_empty() {
            let (part, at) = (
                self.written / self.part_bytes,
                self.written % self.part_bytes,
            );
            let view = bytemuck::cast_slice_mut::<u32, u8>(&mut self.parts[part]);
            let n = bytes.len().min(self.part_bytes - at).min(view.len() - at);
            view[at..at + n].copy_from_slice(&bytes[..n]);
            self.written += n;
            bytes = &bytes[n..];
        }
        Ok(())
    }

    /// The matrix on `device`, with `bias`; an error if bytes are missing.
    pub fn into_linear(
        self,
        bias: Option<Tensor<1>>,
        device: &Device,
    ) -> Result<QLinear, ModelError> {
        if self.written != self.total {
            return Err(self.wrong_size(self.written));
        }
        Ok(QLinear {
            parts: self
                .parts
                .into_iter()
                .map(|words| words_tensor(words, device))
                .collect(),
            bias: bias.map(Param::from_tensor),
            layout: self.layout,
            part_rows: self.part_rows,
        })
    }

    fn wrong_size(&self, bytes: usize) -> ModelError {
        ModelError::TensorBytes {
            name: self.name.clone(),
            format: self.layout.format,
            shape: [self.layout.rows, self.layout.cols],
            bytes,
        }
    }
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
        let mut blocks = BlockBuffers::new(name, layout, bytes.len(), max_part_bytes)?;
        blocks.write(bytes)?;
        blocks.into_linear(bias, device)
    }

    /// Output features.
    pub fn rows(&self) -> usize {
        self.layout.rows
    }

    /// The first row of part `p` and that part's layout.
    pub(crate) fn part(&self, p: usize) -> (usize, QuantLayout) {
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
        #[cfg(feature = "wgpu")]
        if self.fills_one_output(&x.device()) {
            use cube::QuantPartOps;
            let mut out = Tensor::<2>::empty([x.dims()[0], self.layout.rows], &x.device());
            for (p, blocks) in self.parts.iter().enumerate() {
                let (first, layout) = self.part(p);
                out = Tensor::from_dispatch(<Dispatch as QuantPartOps>::quant_matmul_into(
                    x.clone().into_dispatch(),
                    blocks.clone().into_dispatch(),
                    layout,
                    out.into_dispatch(),
                    first,
                ));
            }
            return self.with_bias(out);
        }
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
        self.with_bias(y)
    }

    /// `y` plus the bias, when there is one.
    fn with_bias(&self, y: Tensor<2>) -> Tensor<2> {
        match &self.bias {
            Some(b) => y + b.val().unsqueeze::<2>(),
            None => y,
        }
    }

    /// Whether the parts' products (or rows) fill one output in place (see `cube::Columns`): on
    /// the wgpu device, when there are several. The CPU joins them by copying, which compiles
    /// nothing.
    #[cfg(feature = "wgpu")]
    fn fills_one_output(&self, device: &Device) -> bool {
        self.parts.len() > 1 && !crate::device::is_cpu(device)
    }

    /// The products with rows `ids` only (columns `ids` of [`QLinear::forward`], the same
    /// values): the output head's logits of the tokens a grammar allows. Ids past the last
    /// row read the last row (the model checks them against the vocabulary first).
    ///
    /// # Shapes
    /// - `x`: `[tokens, cols]`
    /// - output: `[tokens, ids]`
    pub fn forward_rows(&self, x: Tensor<2>, ids: &[u32]) -> Tensor<2> {
        let device = x.device();
        if ids.is_empty() {
            return Tensor::zeros([x.dims()[0], 0], &device);
        }
        let last = self.layout.rows.saturating_sub(1) as u32;
        let ids: Vec<u32> = ids.iter().map(|&id| id.min(last)).collect();
        // Each part's ids, in their order, then where each id's column lands.
        let mut order: Vec<usize> = Vec::with_capacity(ids.len());
        let mut outputs: Vec<Tensor<2>> = Vec::new();
        #[cfg(feature = "wgpu")]
        let mut filled = self
            .fills_one_output(&device)
            .then(|| Tensor::<2>::empty([x.dims()[0], ids.len()], &device));
        for (p, blocks) in self.parts.iter().enumerate() {
            let (first, layout) = self.part(p);
            let end = first + layout.rows;
            let here: Vec<usize> = (0..ids.len())
                .filter(|&j| (first..end).contains(&(ids[j] as usize)))
                .collect();
            if here.is_empty() {
                continue;
            }
            let local: Vec<u32> = here.iter().map(|&j| ids[j] - first as u32).collect();
            let local = Tensor::<1, Int>::from_data(
                TensorData::new(local, [here.len()]),
                (&device, DType::U32),
            );
            #[cfg(feature = "wgpu")]
            if let Some(out) = filled.take() {
                use cube::QuantPartOps;
                filled = Some(Tensor::from_dispatch(
                    <Dispatch as QuantPartOps>::quant_matmul_rows_into(
                        x.clone().into_dispatch(),
                        blocks.clone().into_dispatch(),
                        local.into_dispatch(),
                        layout,
                        out.into_dispatch(),
                        order.len(),
                    ),
                ));
                order.extend(here);
                continue;
            }
            outputs.push(Tensor::<2>::from_dispatch(
                <Dispatch as QuantOps>::quant_matmul_rows(
                    x.clone().into_dispatch(),
                    blocks.clone().into_dispatch(),
                    local.into_dispatch(),
                    layout,
                ),
            ));
            order.extend(here);
        }
        #[cfg(feature = "wgpu")]
        if let Some(out) = filled {
            outputs.push(out);
        }
        let y = match outputs.len() {
            1 => outputs.swap_remove(0),
            _ => Tensor::cat(outputs, 1),
        };
        // Ids in increasing order (a mask's) come out in place; others are put back.
        let y = if order.iter().enumerate().all(|(c, &j)| c == j) {
            y
        } else {
            let mut column = vec![0u32; ids.len()];
            for (c, &j) in order.iter().enumerate() {
                column[j] = c as u32;
            }
            let column = Tensor::<1, Int>::from_data(
                TensorData::new(column, [ids.len()]),
                (&device, DType::U32),
            );
            y.select(1, column)
        };
        match &self.bias {
            Some(b) => {
                let ids = Tensor::<1, Int>::from_data(
                    TensorData::new(ids.clone(), [ids.len()]),
                    (&device, DType::U32),
                );
                y + b.val().select(0, ids).unsqueeze::<2>()
            }
            None => y,
        }
    }

    /// The biases of `layers` end to end (zeros for a layer without one), as
    /// [`QLinear::forward_joined`] adds them; `None` when no layer has a bias. Made once, when
    /// the layers are loaded, so that a step does not join them again.
    pub fn stacked_bias(layers: &[&QLinear]) -> Option<Tensor<1>> {
        let device = layers.iter().find_map(|l| l.bias.as_ref())?.val().device();
        let parts = layers
            .iter()
            .map(|l| match &l.bias {
                Some(b) => b.val(),
                None => Tensor::zeros([l.layout.rows], &device),
            })
            .collect();
        Some(Tensor::cat(parts, 0))
    }

    /// `layers.map(|l| l.forward(x))`, from one launch (biases included) when the layers can
    /// be stacked: at most three, of one width, each in one part (a layer's Q, K and V; its
    /// gate and up projections), of any formats. Otherwise each layer runs on its own. `bias`
    /// is [`QLinear::stacked_bias`] of the layers (joined here when not given).
    pub fn forward_stacked<const N: usize>(
        layers: [&QLinear; N],
        bias: Option<&Tensor<1>>,
        x: Tensor<2>,
    ) -> [Tensor<2>; N] {
        if !QLinear::stackable(&layers) {
            return layers.map(|l| l.forward(x.clone()));
        }
        let y = QLinear::forward_joined(layers, bias, x);
        let mut at = 0;
        layers.map(|l| {
            let part = y.clone().narrow(1, at, l.layout.rows);
            at += l.layout.rows;
            part
        })
    }

    /// Whether [`QLinear::forward_joined`] computes `layers` in one launch.
    fn stackable(layers: &[&QLinear]) -> bool {
        let cols = layers[0].layout.cols;
        (1..=3).contains(&layers.len())
            && layers
                .iter()
                .all(|l| l.parts.len() == 1 && l.layout.cols == cols)
    }

    /// The outputs of `layers` side by side (`[tokens, Σ rows]`): [`QLinear::forward_stacked`]
    /// before its split, so that a kernel can take a layer's Q, K and V as one buffer.
    pub fn forward_joined<const N: usize>(
        layers: [&QLinear; N],
        bias: Option<&Tensor<1>>,
        x: Tensor<2>,
    ) -> Tensor<2> {
        if !QLinear::stackable(&layers) {
            return Tensor::cat(layers.map(|l| l.forward(x.clone())).to_vec(), 1);
        }
        // Absent matrices repeat the last one's blocks with no rows: they are not read.
        let blocks: [Tensor<1, Int>; 3] =
            std::array::from_fn(|i| layers[i.min(N - 1)].parts[0].clone());
        let layouts: [QuantLayout; 3] = std::array::from_fn(|i| match layers.get(i) {
            Some(l) => l.layout,
            None => QuantLayout {
                rows: 0,
                ..layers[N - 1].layout
            },
        });
        let biased: [bool; 3] =
            std::array::from_fn(|i| layers.get(i).is_some_and(|l| l.bias.is_some()));
        let joined;
        let bias = match bias {
            Some(bias) => Some(bias),
            None => {
                joined = QLinear::stacked_bias(&layers);
                joined.as_ref()
            }
        };
        let bias = bias.map_or_else(|| x.clone().into_dispatch(), |b| b.clone().into_dispatch());
        let [a, b, c] = blocks;
        Tensor::<2>::from_dispatch(<Dispatch as QuantOps>::quant_matmul_stacked(
            x.into_dispatch(),
            a.into_dispatch(),
            b.into_dispatch(),
            c.into_dispatch(),
            layouts,
            bias,
            biased,
        ))
    }

    /// `act(gate(x)) · up(x)` in one launch ([`QuantGatedOps::quant_matmul_gated`]), when both
    /// layers are one part each of one shape and without a bias; `None` otherwise.
    #[cfg(feature = "wgpu")]
    pub fn forward_gated(
        gate: &QLinear,
        up: &QLinear,
        x: Tensor<2>,
        gelu: bool,
    ) -> Option<Tensor<2>> {
        let fits = |l: &QLinear| {
            l.parts.len() == 1
                && l.bias.is_none()
                && (l.layout.rows, l.layout.cols) == (gate.layout.rows, gate.layout.cols)
        };
        if !(fits(gate) && fits(up)) {
            return None;
        }
        Some(Tensor::<2>::from_dispatch(
            <Dispatch as QuantGatedOps>::quant_matmul_gated(
                x.into_dispatch(),
                gate.parts[0].clone().into_dispatch(),
                up.parts[0].clone().into_dispatch(),
                [gate.layout, up.layout],
                gelu,
            ),
        ))
    }

    /// Rows `ids` of the weight, dequantised (for an embedding table). Ids past the last row
    /// read the last row; the model checks them against the vocabulary first.
    ///
    /// # Shapes
    /// - output: `[ids, cols]`
    pub fn rows_of(&self, ids: &[u32]) -> Tensor<2> {
        let device = self.parts[0].device();
        #[cfg(feature = "wgpu")]
        if self.fills_one_output(&device) {
            // Each part writes its ids' rows into one output (see `cube::Columns`).
            use cube::QuantPartOps;
            let all = Tensor::<1, Int>::from_data(
                TensorData::new(ids.to_vec(), [ids.len()]),
                (&device, DType::U32),
            );
            let mut out = Tensor::<2>::empty([ids.len(), self.layout.cols], &device);
            for (p, blocks) in self.parts.iter().enumerate() {
                let (first, layout) = self.part(p);
                out = Tensor::from_dispatch(<Dispatch as QuantPartOps>::quant_rows_into(
                    blocks.clone().into_dispatch(),
                    all.clone().into_dispatch(),
                    layout,
                    out.into_dispatch(),
                    first,
                    p + 1 == self.parts.len(),
                ));
            }
            return out;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn int_values(t: &Tensor<1, Int>) -> Vec<u32> {
        t.to_data()
            .convert::<u32>()
            .try_to_vec::<u32>()
            .expect("u32 data")
    }

    #[test]
    fn bytes_written_in_pieces_fill_the_parts_a_whole_write_makes() {
        let device = crate::DeviceKind::Cpu.device().expect("cpu device");
        // 5 rows of 64 Q8_0 values (68 bytes a row), parts of 2 rows: 136 + 136 + 68 bytes.
        let layout = QuantLayout {
            format: QuantFormat::Q8_0,
            rows: 5,
            cols: 64,
        };
        let bytes: Vec<u8> = (0..340u32).map(|i| (i * 37 % 251) as u8).collect();
        let whole =
            QLinear::from_bytes_in_parts("w", &bytes, None, layout, &device, 140).expect("whole");
        let mut pieces = BlockBuffers::new("w", layout, bytes.len(), 140).expect("buffers");
        for piece in bytes.chunks(7) {
            pieces.write(piece).expect("fits");
        }
        let pieces = pieces.into_linear(None, &device).expect("complete");
        assert_eq!(whole.parts.len(), 3);
        assert_eq!(whole.part_rows, 2);
        for (p, (a, b)) in whole.parts.iter().zip(&pieces.parts).enumerate() {
            assert_eq!(int_values(a), int_values(b), "part {p}");
        }
        // The words are the file's bytes read little-endian.
        let first = int_values(&whole.parts[0]);
        assert_eq!(
            first[0],
            u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
        );
        assert_eq!(int_values(&whole.parts[2]).len(), 17);
    }

    #[test]
    fn too_many_or_too_few_bytes_name_the_tensor() {
        let device = crate::DeviceKind::Cpu.device().expect("cpu device");
        let layout = QuantLayout {
            format: QuantFormat::Q8_0,
            rows: 2,
            cols: 32,
        };
        let mut over = BlockBuffers::new("blk.0.w", layout, 68, MAX_PART_BYTES).expect("buffers");
        over.write(&[0; 60]).expect("fits");
        let e = over.write(&[0; 9]).expect_err("past the end").to_string();
        assert!(e.contains("'blk.0.w' holds 69 bytes"), "{e}");
        let mut short = BlockBuffers::new("blk.0.w", layout, 68, MAX_PART_BYTES).expect("buffers");
        short.write(&[0; 60]).expect("fits");
        let e = short
            .into_linear(None, &device)
            .expect_err("short")
            .to_string();
        assert!(e.contains("'blk.0.w' holds 60 bytes"), "{e}");
        let e = BlockBuffers::new("blk.0.w", layout, 67, MAX_PART_BYTES)
            .err()
            .expect("wrong size")
            .to_string();
        assert!(e.contains("holds 67 bytes"), "{e}");
    }
}
