//! stampo's forward pass: llama, qwen2 and gemma3 GGUF models on burn, with the weights kept in
//! their GGUF block formats on the device.
//!
//! Key types: [`Transformer`] (the model, built from a GGUF by [`Transformer::load`]),
//! [`Cache`] (one sequence's KV cache, allocated once), [`DeviceKind`] (the device, chosen at
//! run time), [`quant::QuantOps`] (the quantised matmul, a burn backend extension) and
//! [`ModelError`].
//!
//! # Usage
//! 1. Parse the file: `let gguf = stampo_gguf::Gguf::parse(&bytes)?;`
//! 2. Load it: `let model = Transformer::load(&gguf, &DeviceKind::Cpu.device()?, LoadOptions::default())?;`
//! 3. Make a cache: `let mut cache = model.new_cache();`
//! 4. Prefill the prompt with `model.forward(&prompt_ids, &mut cache, false)?`, then feed each
//!    chosen token back one at a time; read logits with [`to_vec`] (or [`to_vec_async`] on WebGPU).

pub mod config;
pub mod device;
pub mod error;
pub mod fused;
pub mod gemma3;
pub mod layers;
pub mod llama;
pub mod model;
pub mod quant;
pub mod qwen2;
#[cfg(feature = "wgpu")]
mod step_graph;
#[cfg(feature = "wgpu")]
mod top;
pub mod weights;

/// The device handle [`DeviceKind::device`] gives (burn's, re-exported so callers need not
/// depend on burn).
pub use burn::tensor::{Device, Int, Tensor};
pub use config::{LoadOptions, ModelConfig};
pub use device::DeviceKind;
pub use error::{ModelError, Result};
pub use model::{
    Cache, MAX_TOP, PREFILL_TILE, Transformer, flush, host_top, read_top, read_top_async, to_vec,
    to_vec_async, top_logits,
};
pub use weights::{Receiving, StagedTensors};
