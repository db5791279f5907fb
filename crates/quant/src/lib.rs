//! The CPU side of stampo's quantised matmul, with no tensor library in sight: weights stay
//! in their GGUF blocks and are read by kernels that know each block format.
//!
//! - [`format`]: the block formats and which activation encoding each one pairs with;
//! - [`unpack`]: a row of blocks decoded to integers and per-group scales (or to floats);
//! - [`act`]: activations encoded to 8 bits the way ggml's CPU backend encodes them;
//! - [`dot`]: the dot products — AVX2 on x86-64 (chosen at run time, with `vpdpbusd` in its
//!   AVX-VNNI or AVX512-VNNI encoding where present; never 512-bit vectors or AMX),
//!   `simd128` in wasm32 (the `simd128` module, built only there), portable loops elsewhere —
//!   fused straight from the GGUF bytes where the format allows;
//! - [`octet`]: for prefills, weight rows packed eight at a time so that one instruction
//!   multiplies eight rows (Q5_0, Q4_1, Q4_K and Q6_K on x86-64), bit for bit the row kernels' results;
//! - [`matmul`] and [`pool`]: rows spread over worker threads that park between jobs;
//! - [`attention`]: the CPU loops of attention that the browser build vectorises: the scores
//!   and the probabilities' mix over an `f16` KV cache read in place (x86-64 has its own in
//!   `stampo-model`), rounding to `f16`, the softmax's exponentials;
//! - [`sample`]: random matrices in every format, the test data every kernel is checked on.
//!
//! `stampo-model` wraps this as a burn backend extension on its CPU device.

pub mod act;
pub mod attention;
pub mod dot;
pub mod format;
pub mod matmul;
pub mod octet;
pub mod pool;
pub mod sample;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd128;
pub mod unpack;

pub use format::{ActivationFormat, QuantFormat};
