//! A model loaded while its file arrives (a download, a file read in pieces): each tensor goes
//! onto the device as soon as its bytes are in, and only the header is kept, so the file is
//! never held whole. A matrix's bytes are written straight into the buffers its device tensors
//! are made from: on the CPU those buffers are the weights (no other copy is ever made), on
//! WebGPU they are uploaded and freed, one tensor at a time.
//!
//! ```no_run
//! # fn chunks() -> Vec<Vec<u8>> { Vec::new() }
//! # let device = stampo_model::DeviceKind::Cpu.device().unwrap();
//! let mut load = stampo_engine::StreamingLoad::new(&device);
//! for chunk in chunks() {
//!     load.push(&chunk, &mut |done, total| eprintln!("{done}/{total} bytes on the device"))?;
//! }
//! let model = load.finish(4096)?;
//! # Ok::<(), stampo_engine::Error>(())
//! ```

use stampo_gguf::stream::{Event, StreamingGguf};
use stampo_gguf::{GgmlType, GgufError};
use stampo_model::{LoadOptions, Receiving, StagedTensors, Transformer};

use crate::error::Error;
use crate::model_source::LoadedModel;

/// What the loader keeps of a tensor table entry (the header's own entries borrow from a
/// buffer the reader owns).
struct TensorEntry {
    name: String,
    ty: GgmlType,
    dims: Vec<u64>,
    size: usize,
}

/// The incremental loader: [`StreamingLoad::push`] each piece of the file in order, then
/// [`StreamingLoad::finish`].
pub struct StreamingLoad {
    reader: StreamingGguf,
    staged: StagedTensors,
    tensors: Vec<TensorEntry>,
    /// All tensors' bytes, known once the header is in.
    total: usize,
    /// The tensor being received, written straight into its device buffers' memory.
    receiving: Option<Receiving>,
}

impl StreamingLoad {
    /// A loader that puts tensors on `device`.
    pub fn new(device: &stampo_model::Device) -> Self {
        Self {
            reader: StreamingGguf::new(),
            staged: StagedTensors::new(device),
            tensors: Vec::new(),
            total: 0,
            receiving: None,
        }
    }

    /// The file's bytes received so far.
    pub fn bytes_received(&self) -> u64 {
        self.reader.bytes_received()
    }

    /// Takes the next piece of the file. `progress(on_device, total)` is called, in tensor
    /// bytes, once with 0 when the header has been parsed, then after each tensor goes onto
    /// the device. A file that is not GGUF fails at its first bytes; a malformed header as
    /// soon as it is complete.
    pub fn push(
        &mut self,
        chunk: &[u8],
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<(), Error> {
        let Self {
            reader,
            staged,
            tensors,
            total,
            receiving,
        } = self;
        reader
            .push(chunk, &mut |event| {
                match event {
                    Event::Header(gguf) => {
                        *tensors = gguf
                            .tensors()
                            .iter()
                            .map(|t| TensorEntry {
                                name: t.name.to_string(),
                                ty: t.ty,
                                dims: t.dims.clone(),
                                size: t.size as usize,
                            })
                            .collect();
                        *total = tensors.iter().map(|t| t.size).sum();
                        progress(0, *total);
                    }
                    Event::TensorData {
                        index,
                        offset,
                        bytes,
                    } => {
                        if offset == 0 {
                            let entry = tensor(tensors, index)?;
                            *receiving = Some(Receiving::new(
                                &entry.name,
                                entry.ty,
                                &entry.dims,
                                entry.size,
                            ));
                        }
                        if let Some(tensor) = receiving {
                            tensor.write(bytes);
                        }
                    }
                    Event::TensorDone { index } => {
                        let entry = tensor(tensors, index)?;
                        // An empty tensor has no data event.
                        let done = receiving.take().unwrap_or_else(|| {
                            Receiving::new(&entry.name, entry.ty, &entry.dims, entry.size)
                        });
                        staged.complete(done);
                        progress(staged.bytes(), *total);
                    }
                }
                Ok(())
            })
            .map_err(|e| Error::Gguf(e.to_string()))
    }

    /// Ends the file and builds the model with a KV cache of `context` positions: an error if
    /// the file stopped short (naming the tensor), or if its tensors do not make a model.
    pub fn finish(self, context: usize) -> Result<LoadedModel, Error> {
        let Self { reader, staged, .. } = self;
        let header = reader.finish().map_err(|e| Error::Gguf(e.to_string()))?;
        let model = Transformer::from_staged(&header, staged, LoadOptions { context })
            .map_err(|e| Error::Load(e.to_string()))?;
        LoadedModel::assemble(&header, model)
    }
}

fn tensor(tensors: &[TensorEntry], index: usize) -> Result<&TensorEntry, GgufError> {
    tensors.get(index).ok_or_else(|| GgufError::Stream {
        reason: format!("tensor data for entry {index}, past the table's end"),
    })
}
