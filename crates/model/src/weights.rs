//! Taking tensors out of a GGUF file onto a device, checking each name, type and shape.

use burn::tensor::{Device, Tensor, TensorData};
use stampo_gguf::{Gguf, TensorInfo, dequantize_to_vec};

use crate::error::{ModelError, Result};
use crate::quant::{QLinear, QuantFormat, QuantLayout};

/// Reads tensors from `gguf` onto `device`.
pub struct Weights<'g, 'a> {
    gguf: &'g Gguf<'a>,
    device: Device,
    bytes: usize,
}

impl<'g, 'a> Weights<'g, 'a> {
    /// A reader of `gguf`'s tensors for `device`.
    pub fn new(gguf: &'g Gguf<'a>, device: &Device) -> Self {
        Weights {
            gguf,
            device: device.clone(),
            bytes: 0,
        }
    }

    /// The GGUF tensor bytes taken so far (each tensor counted once).
    pub fn gguf_bytes(&self) -> usize {
        self.bytes
    }

    /// Whether the file has tensor `name`.
    pub fn has(&self, name: &str) -> bool {
        self.gguf.tensor(name).is_some()
    }

    fn info(&self, name: &str, expected: &[u64]) -> Result<&'g TensorInfo<'a>> {
        let info = self
            .gguf
            .tensor(name)
            .ok_or_else(|| ModelError::MissingTensor(name.to_string()))?;
        if info.dims != expected {
            return Err(ModelError::TensorShape {
                name: name.to_string(),
                found: info.dims.clone(),
                expected: expected.to_vec(),
            });
        }
        Ok(info)
    }

    /// A matrix of `rows` outputs by `cols` inputs (ggml dims `[cols, rows]`), kept in its
    /// block format, with the bias `bias_name` (`[rows]`) when given.
    pub fn linear(
        &mut self,
        name: &str,
        rows: usize,
        cols: usize,
        bias_name: Option<&str>,
    ) -> Result<QLinear> {
        let info = self.info(name, &[cols as u64, rows as u64])?;
        let format = QuantFormat::from_ggml_id(info.ty.id()).ok_or_else(|| {
            ModelError::UnsupportedTensorType {
                name: name.to_string(),
                ty: info.ty.name().to_string(),
            }
        })?;
        let bytes = self.gguf.tensor_data(info);
        self.bytes += bytes.len();
        let bias = match bias_name {
            Some(b) => Some(self.vector(b, rows)?),
            None => None,
        };
        QLinear::from_bytes(
            name,
            bytes,
            bias,
            QuantLayout { format, rows, cols },
            &self.device,
        )
    }

    /// A vector of `len` values (norm scales, biases), as `f32`.
    pub fn vector(&mut self, name: &str, len: usize) -> Result<Tensor<1>> {
        let info = self.info(name, &[len as u64])?;
        let bytes = self.gguf.tensor_data(info);
        self.bytes += bytes.len();
        let values = dequantize_to_vec(info.ty, bytes)?;
        Ok(Tensor::from_data(
            TensorData::new(values, [len]),
            &self.device,
        ))
    }
}
