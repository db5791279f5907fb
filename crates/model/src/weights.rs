//! Taking tensors out of a GGUF file onto a device, checking each name, type and shape.
//!
//! Two ways in: from a whole file in memory ([`Weights::new`]), or from [`StagedTensors`],
//! put on the device one by one while a download streams in, so the file is never held
//! whole (a browser's wasm memory never shrinks, so a whole copy would stay for good).

use std::collections::HashMap;

use burn::module::Param;
use burn::tensor::{Device, Tensor, TensorData};
use stampo_gguf::{GgmlType, Gguf, TensorInfo, dequantize_to_vec};

use crate::error::{ModelError, Result};
use crate::quant::{BlockBuffers, MAX_PART_BYTES, QLinear, QuantFormat, QuantLayout};

/// A tensor already on the device, waiting for the model to take it.
enum Staged {
    /// A matrix in its block format (without bias: biases are vectors of their own).
    Linear(QLinear),
    /// A vector, as `f32` (boxed: a burn tensor handle is large beside the others).
    Vector(Box<Tensor<1>>),
    /// Its bytes could not be put on the device; the error is raised if the model asks for it.
    Refused(ModelError),
}

/// Tensors put on a device as their bytes arrive, by name, for [`crate::Transformer::from_staged`].
///
/// A one-dimensional tensor becomes an `f32` vector; a matrix stays in its block format, as
/// the whole-file loader makes them. Names, shapes and types are checked when the model takes
/// them, against the file's header.
pub struct StagedTensors {
    device: Device,
    tensors: HashMap<String, (Staged, usize)>,
    bytes: usize,
}

impl StagedTensors {
    /// An empty set for `device`.
    pub fn new(device: &Device) -> Self {
        StagedTensors {
            device: device.clone(),
            tensors: HashMap::new(),
            bytes: 0,
        }
    }

    /// The device the tensors are on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The GGUF tensor bytes put on the device so far.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Puts tensor `name` (ggml type `ty`, dims innermost first) on the device from its
    /// `bytes`, which the caller may drop as soon as this returns.
    pub fn insert(&mut self, name: &str, ty: GgmlType, dims: &[u64], bytes: &[u8]) {
        let mut tensor = Receiving::new(name, ty, dims, bytes.len());
        tensor.write(bytes);
        self.complete(tensor);
    }

    /// Puts a tensor whose bytes have all been written onto the device.
    pub fn complete(&mut self, tensor: Receiving) {
        let Receiving {
            name, into, size, ..
        } = tensor;
        let staged = match into {
            Into::Blocks(blocks) => {
                // Exact-fit device buffers, as the whole-file loader makes.
                let device = &self.device;
                let made = device.memory_persistent_allocations(blocks, |blocks| {
                    blocks.into_linear(None, device)
                });
                made.map_or_else(Staged::Refused, Staged::Linear)
            }
            Into::Vector(ty, bytes) => match dequantize_to_vec(ty, &bytes) {
                Ok(values) => {
                    let len = values.len();
                    let data = TensorData::new(values, [len]);
                    Staged::Vector(Box::new(Tensor::from_data(data, &self.device)))
                }
                Err(e) => Staged::Refused(e.into()),
            },
            Into::Refused(e) => Staged::Refused(e),
        };
        self.bytes += size;
        self.tensors.insert(name, (staged, size));
    }

    fn take(&mut self, name: &str) -> Result<(Staged, usize)> {
        self.tensors
            .remove(name)
            .ok_or_else(|| ModelError::MissingTensor(name.to_string()))
    }
}

/// A tensor whose bytes are arriving: a matrix is written straight into the buffers its
/// device tensors are made from, a vector gathered to be decoded to `f32`. Hand it to
/// [`StagedTensors::complete`] once [`Receiving::write`] has had all its bytes.
pub struct Receiving {
    name: String,
    size: usize,
    into: Into,
}

enum Into {
    Blocks(BlockBuffers),
    Vector(GgmlType, Vec<u8>),
    /// The tensor cannot be staged; its bytes are skipped and the error kept.
    Refused(ModelError),
}

impl Receiving {
    /// Tensor `name` (ggml type `ty`, dims innermost first) of `size` bytes.
    pub fn new(name: &str, ty: GgmlType, dims: &[u64], size: usize) -> Self {
        let into = match *dims {
            [_] => {
                let mut bytes = Vec::new();
                match bytes.try_reserve_exact(size) {
                    Ok(()) => Into::Vector(ty, bytes),
                    Err(_) => Into::Refused(ModelError::OutOfMemory {
                        name: name.to_string(),
                        bytes: size,
                    }),
                }
            }
            [cols, rows] => match QuantFormat::from_ggml_id(ty.id()) {
                Some(format) => {
                    let layout = QuantLayout {
                        format,
                        rows: rows as usize,
                        cols: cols as usize,
                    };
                    BlockBuffers::new(name, layout, size, MAX_PART_BYTES)
                        .map_or_else(Into::Refused, Into::Blocks)
                }
                None => Into::Refused(ModelError::UnsupportedTensorType {
                    name: name.to_string(),
                    ty: ty.name().to_string(),
                }),
            },
            _ => Into::Refused(ModelError::TensorShape {
                name: name.to_string(),
                found: dims.to_vec(),
                expected: Vec::new(),
            }),
        };
        Self {
            name: name.to_string(),
            size,
            into,
        }
    }

    /// Appends the tensor's next bytes.
    pub fn write(&mut self, bytes: &[u8]) {
        match &mut self.into {
            Into::Blocks(blocks) => {
                if let Err(e) = blocks.write(bytes) {
                    self.into = Into::Refused(e);
                }
            }
            Into::Vector(_, gathered) => gathered.extend_from_slice(bytes),
            Into::Refused(_) => {}
        }
    }
}

/// Reads tensors from `gguf` (or, for a streamed file, from its header and the staged
/// tensors) onto `device`.
pub struct Weights<'g, 'a> {
    gguf: &'g Gguf<'a>,
    staged: Option<&'g mut StagedTensors>,
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
        let total = gguf.tensors().iter().map(|t| t.size as usize).sum();
        Weights {
            gguf,
            staged: None,
            device: device.clone(),
            bytes: 0,
            total,
            progress,
        }
    }

    /// A reader of a streamed file: the header `gguf` (no tensor data) and the tensors
    /// already on the device.
    pub fn staged(
        gguf: &'g Gguf<'a>,
        staged: &'g mut StagedTensors,
        progress: &'g mut (dyn FnMut(usize, usize) + Send),
    ) -> Self {
        let mut weights = Weights::new(gguf, &staged.device.clone(), progress);
        weights.staged = Some(staged);
        weights
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

    /// Tensor `name`'s dims (innermost first), from the file's table.
    pub fn dims(&self, name: &str) -> Option<&'g [u64]> {
        self.gguf.tensor(name).map(|t| t.dims.as_slice())
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
        let bias = match bias_name {
            Some(b) => Some(self.vector(b, rows)?),
            None => None,
        };
        let (linear, size) = match self.staged.as_deref_mut() {
            Some(staged) => match staged.take(name)? {
                (Staged::Linear(mut linear), size) => {
                    linear.bias = bias.map(Param::from_tensor);
                    (linear, size)
                }
                (Staged::Refused(e), _) => return Err(e),
                (Staged::Vector(_), _) => return Err(self.shape_error(name, &[cols, rows])),
            },
            None => {
                let bytes = self.gguf.tensor_data(info);
                let layout = QuantLayout { format, rows, cols };
                let linear = QLinear::from_bytes(name, bytes, bias, layout, &self.device)?;
                (linear, bytes.len())
            }
        };
        self.taken(size);
        Ok(linear)
    }

    /// A vector of `len` values (norm scales, biases), as `f32`.
    pub fn vector(&mut self, name: &str, len: usize) -> Result<Tensor<1>> {
        let info = self.info(name, &[len as u64])?;
        let (vector, size) = match self.staged.as_deref_mut() {
            Some(staged) => match staged.take(name)? {
                (Staged::Vector(vector), size) => (*vector, size),
                (Staged::Refused(e), _) => return Err(e),
                (Staged::Linear(_), _) => return Err(self.shape_error(name, &[len])),
            },
            None => {
                let bytes = self.gguf.tensor_data(info);
                let values = dequantize_to_vec(info.ty, bytes)?;
                let vector = Tensor::from_data(TensorData::new(values, [len]), &self.device);
                (vector, bytes.len())
            }
        };
        self.taken(size);
        Ok(vector)
    }

    /// A staged tensor of the other kind than asked for (its header shape was checked, so
    /// this only happens when the staging and the header disagree).
    fn shape_error(&self, name: &str, expected: &[usize]) -> ModelError {
        ModelError::TensorShape {
            name: name.to_string(),
            found: self
                .gguf
                .tensor(name)
                .map(|t| t.dims.clone())
                .unwrap_or_default(),
            expected: expected.iter().map(|&d| d as u64).collect(),
        }
    }
}
