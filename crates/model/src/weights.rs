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
    /// All of the file's tensor bytes, for `progress`.
    total: usize,
    progress: &'g mut (dyn FnMut(usize, usize) + Send),
}

impl<'g, 'a> Weights<'g, 'a> {
    /// A reader of `gguf`'s tensors for `device`, calling `progress(bytes_taken, total)`
    /// after each tensor.
    pub fn new(
        gguf: &'g Gguf<'a>,
        device: &Device,
        progress: &'g mut (dyn FnMut(usize, usize) + Send),
    ) -> Self {
        let total = gguf
            .tensors()
            .iter()
            .map(|t| gguf.tensor_data(t).len())
            .sum();
        Weights {
            gguf,
            device: device.clone(),
            bytes: 0,
            total,
            progress,
        }
    }

    fn taken(&mut self, bytes: usize) {
        self.bytes += bytes;
        (self.progress)(self.bytes, self.total);
    }

    /// Reports the load complete (tensors the model does not use included).
    pub fn finish(&mut self) {
        (self.progress)(self.total, self.total);
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
        let bias = match bias_name {
            Some(b) => Some(self.vector(b, rows)?),
            None => None,
        };
        let linear = QLinear::from_bytes(
            name,
            bytes,
            bias,
            QuantLayout { format, rows, cols },
            &self.device,
        )?;
        self.taken(bytes.len());
        Ok(linear)
    }

    /// A vector of `len` values (norm scales, biases), as `f32`.
    pub fn vector(&mut self, name: &str, len: usize) -> Result<Tensor<1>> {
        let info = self.info(name, &[len as u64])?;
        let bytes = self.gguf.tensor_data(info);
        let values = dequantize_to_vec(info.ty, bytes)?;
        let vector = Tensor::from_data(TensorData::new(values, [len]), &self.device);
        self.taken(bytes.len());
        Ok(vector)
    }
}
