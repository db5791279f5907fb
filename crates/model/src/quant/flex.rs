//! [`QuantOps`] on the Flex CPU backend: the SIMD kernels over the tensor's own storage.

use std::sync::Arc;

use burn::backend::Flex;
use burn::backend::flex::FlexTensor;
use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::tensor::{Bytes, TensorData};

use super::matmul::{QuantMatrix, quant_matmul_rows, quant_matmul_stacked};
use super::pool::Pool;
use super::unpack::dequantize_row;
use super::{QuantLayout, QuantOps};

/// The storage of a Flex tensor, shared with the worker threads without copying.
struct FlexBytes(Arc<Bytes>);

impl AsRef<[u8]> for FlexBytes {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

fn matrix(blocks: &FlexTensor, layout: QuantLayout) -> QuantMatrix {
    QuantMatrix {
        bytes: Arc::new(FlexBytes(blocks.data_arc())),
        offset: blocks.layout().start_offset() * 4,
        format: layout.format,
        rows: layout.rows,
        cols: layout.cols,
    }
}

impl QuantOps for Flex {
    fn quant_matmul(
        x: FloatTensor<Self>,
        blocks: IntTensor<Self>,
        layout: QuantLayout,
    ) -> FloatTensor<Self> {
        // One matrix is a stack of one: the others have no rows and are not read.
        let stack = [blocks.clone(), blocks.clone(), blocks];
        let [a, b, c] = stack;
        let none = QuantLayout { rows: 0, ..layout };
        let unread = x.clone();
        Self::quant_matmul_stacked(x, a, b, c, [layout, none, none], unread, [false; 3])
    }

    fn quant_matmul_stacked(
        x: FloatTensor<Self>,
        a: IntTensor<Self>,
        b: IntTensor<Self>,
        c: IntTensor<Self>,
        layouts: [QuantLayout; 3],
        bias: FloatTensor<Self>,
        biased: [bool; 3],
    ) -> FloatTensor<Self> {
        let tokens = x.layout().shape()[0];
        let cols = layouts[0].cols;
        let x = x.to_contiguous();
        let values: &[f32] = x.storage::<f32>();
        let start = x.layout().start_offset();
        let values = &values[start..start + tokens * cols];
        let present: Vec<(QuantMatrix, bool)> = [a, b, c]
            .iter()
            .zip(layouts)
            .zip(biased)
            .filter(|((_, layout), _)| layout.rows > 0)
            .map(|((blocks, layout), biased)| (matrix(blocks, layout), biased))
            .collect();
        let total: usize = layouts.iter().map(|l| l.rows).sum();
        // Matrices whose activations are encoded alike share one pass of the pool (a layer's
        // Q5_0 queries beside its Q8_0 values); otherwise each has its own, side by side.
        let encoding = present.first().map(|(m, _)| m.format.activation());
        let mut out = if present
            .iter()
            .all(|(m, _)| Some(m.format.activation()) == encoding)
        {
            let matrices: Vec<QuantMatrix> = present.iter().map(|(m, _)| m.clone()).collect();
            quant_matmul_stacked(&matrices, values, tokens, Pool::global())
        } else {
            let mut out = vec![0.0f32; tokens * total];
            let mut column = 0;
            for (m, _) in &present {
                let part =
                    quant_matmul_stacked(std::slice::from_ref(m), values, tokens, Pool::global());
                for (row, from) in out.chunks_exact_mut(total).zip(part.chunks_exact(m.rows)) {
                    row[column..column + m.rows].copy_from_slice(from);
                }
                column += m.rows;
            }
            out
        };
        let bias = bias.to_contiguous();
        let start = bias.layout().start_offset();
        let mut column = 0;
        for &(ref m, biased) in &present {
            // Biases short of Σ rows (not `QLinear::stacked_bias`'s) are not read.
            let at = start + column;
            if let (true, Some(bias)) = (biased, bias.storage::<f32>().get(at..at + m.rows)) {
                for row in out.chunks_exact_mut(total) {
                    for (y, b) in row[column..column + m.rows].iter_mut().zip(bias) {
                        *y += b;
                    }
                }
            }
            column += m.rows;
        }
        FlexTensor::from_data(TensorData::new(out, [tokens, total]))
    }

    fn quant_matmul_rows(
        x: FloatTensor<Self>,
        blocks: IntTensor<Self>,
        ids: IntTensor<Self>,
        layout: QuantLayout,
    ) -> FloatTensor<Self> {
        let tokens = x.layout().shape()[0];
        let x = x.to_contiguous();
        let start = x.layout().start_offset();
        let values = &x.storage::<f32>()[start..start + tokens * layout.cols];
        let ids: Vec<u32> = ids
            .into_data()
            .convert::<i64>()
            .iter::<i64>()
            .map(|id| id.clamp(0, i64::from(u32::MAX)) as u32)
            .collect();
        let w = matrix(&blocks, layout);
        let out = quant_matmul_rows(&w, values, tokens, &ids, Pool::global());
        FlexTensor::from_data(TensorData::new(out, [tokens, ids.len()]))
    }

    fn quant_rows(
        blocks: IntTensor<Self>,
        ids: IntTensor<Self>,
        layout: QuantLayout,
    ) -> FloatTensor<Self> {
        let w = matrix(&blocks, layout);
        let ids: Vec<i64> = ids
            .into_data()
            .convert::<i64>()
            .try_into_vec()
            .unwrap_or_default();
        let row_bytes = layout.format.row_bytes(layout.cols).unwrap_or(0);
        let all = (*w.bytes).as_ref();
        let mut out = Vec::with_capacity(ids.len() * layout.cols);
        let mut row = Vec::new();
        for &id in &ids {
            // Ids are checked against the vocabulary by the model before they get here.
            let id = (id.max(0) as usize).min(layout.rows.saturating_sub(1));
            let start = w.offset + id * row_bytes;
            dequantize_row(
                layout.format,
                &all[start..start + row_bytes],
                layout.cols,
                &mut row,
            );
            out.extend_from_slice(&row);
        }
        FlexTensor::from_data(TensorData::new(out, [ids.len(), layout.cols]))
    }
}
