//! stampo's GGUF reader: a zero-copy view of a GGUF v2/v3 file over `&[u8]`, ggml's
//! quantised block formats and their scalar dequantisation.
//!
//! Key types: [`Gguf`] (the parsed file), [`Metadata`] (typed getters whose errors name
//! the key), [`TensorInfo`] (the tensor table), [`GgmlType`] (block size and bytes per
//! block), the `#[repr(C)]` block structs in [`blocks`] (the scalar reference for kernels),
//! and [`GgufError`] (every error names a byte offset, key or tensor).
//!
//! # Usage
//! 1. Get the file's bytes (a `Vec<u8>`, a memory map, a browser `ArrayBuffer`).
//! 2. [`Gguf::parse`] them: the header, metadata and tensor table are validated, every
//!    count checked against the bytes left before anything is allocated.
//! 3. Read metadata: `gguf.metadata().arch_require::<u32>("context_length")` reads
//!    `llama.context_length` in a llama file.
//! 4. Find a tensor with [`Gguf::tensor`] and view its bytes with [`Gguf::tensor_data`];
//!    dequantise them with [`dequantize`] or view them as blocks with
//!    [`blocks::blocks_from_bytes`].
//!
//! ```
//! # fn main() -> Result<(), stampo_gguf::GgufError> {
//! # let bytes = stampo_gguf::testing::tiny_file();
//! use stampo_gguf::{Gguf, dequantize_to_vec};
//! let gguf = Gguf::parse(&bytes)?;
//! let ctx: u32 = gguf.metadata().arch_require("context_length")?;
//! let t = gguf.require_tensor("token_embd.weight")?;
//! let values = dequantize_to_vec(t.ty, gguf.tensor_data(t))?;
//! assert_eq!(values.len() as u64, t.elements());
//! # let _ = ctx; Ok(()) }
//! ```
//!
//! For files that arrive in pieces see [`stream`]; for split files (`-00001-of-0000N`)
//! see [`split`].

pub mod blocks;
mod cursor;
mod dequant;
mod error;
mod file;
mod metadata;
pub mod split;
pub mod stream;
pub mod testing;
mod types;
mod value;
pub mod writer;

pub use dequant::{dequantize, dequantize_blocks, dequantize_to_vec, elements_in};
pub use error::{GgufError, Result};
pub use file::{DEFAULT_ALIGNMENT, GGUF_MAGIC, Gguf, Header, Limits, MAX_DIMS, TensorInfo};
pub use metadata::{FromValue, Metadata};
pub use types::{GgmlType, QK_K};
pub use value::{Array, ArrayIter, GgufStr, Value, ValueType};
