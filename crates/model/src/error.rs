//! The crate's one error type; every variant names what is wrong: a tensor, a key, a shape.

use crate::quant::QuantFormat;

/// Everything that can go wrong building or running a model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The GGUF file could not be read, or a metadata key is missing or mistyped.
    #[error(transparent)]
    Gguf(#[from] stampo_gguf::GgufError),

    /// `general.architecture` names a model family this crate does not implement.
    #[error("unsupported architecture '{0}' (supported: llama, qwen2, gemma3)")]
    UnsupportedArchitecture(String),

    /// A tensor the architecture needs is not in the file.
    #[error("tensor '{0}' is missing from the GGUF file")]
    MissingTensor(String),

    /// A tensor's element type has no quantised matmul.
    #[error(
        "tensor '{name}' has type {ty}, which has no matmul here (supported: F32, F16, Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K)"
    )]
    UnsupportedTensorType {
        /// The tensor.
        name: String,
        /// Its ggml type name.
        ty: String,
    },

    /// A tensor's shape differs from the one the metadata implies.
    #[error("tensor '{name}' has shape {found:?} (ggml order), expected {expected:?}")]
    TensorShape {
        /// The tensor.
        name: String,
        /// Its dimensions, innermost first.
        found: Vec<u64>,
        /// The dimensions the metadata implies, innermost first.
        expected: Vec<u64>,
    },

    /// A quantised tensor's bytes do not match its format and shape.
    #[error("tensor '{name}' holds {bytes} bytes, which is not {format} data of shape {shape:?}")]
    TensorBytes {
        /// The tensor.
        name: String,
        /// The block format.
        format: QuantFormat,
        /// `[rows, cols]`.
        shape: [usize; 2],
        /// The bytes found.
        bytes: usize,
    },

    /// Memory cannot hold a tensor (the wasm module's 4 GiB, or the machine's).
    #[error("tensor '{name}' needs {bytes} bytes, more than memory can hold")]
    OutOfMemory {
        /// The tensor.
        name: String,
        /// Its bytes.
        bytes: usize,
    },

    /// Metadata holds a value the model cannot use.
    #[error("metadata key '{key}': {reason}")]
    BadMetadata {
        /// The full key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },

    /// More tokens than the KV cache holds.
    #[error("context overflow: {needed} positions needed, the KV cache holds {capacity}")]
    ContextOverflow {
        /// Positions the call needs.
        needed: usize,
        /// The cache's capacity.
        capacity: usize,
    },

    /// A token id outside the vocabulary.
    #[error("token id {id} is outside the vocabulary of {vocab} tokens")]
    TokenOutOfRange {
        /// The id.
        id: u32,
        /// The vocabulary size.
        vocab: usize,
    },

    /// A number of candidates to choose outside what the device can.
    #[error("{k} candidates asked for: choose between 1 and {max}")]
    TopOutOfRange {
        /// The candidates asked for.
        k: usize,
        /// The most a device chooses.
        max: usize,
    },

    /// A mask of allowed tokens with fewer bits than there are logits.
    #[error("a mask of {words} words holds fewer bits than the {logits} logits it selects from")]
    MaskTooShort {
        /// The mask's 32-bit words.
        words: usize,
        /// The logits.
        logits: usize,
    },

    /// Every token's logits asked of a GPU device in one buffer larger than it holds.
    #[error(
        "every position's logits of {tokens} tokens over a vocabulary of {vocab} take {bytes} bytes, more than one device buffer holds ({limit}): ask for them in blocks (Transformer::all_logits)"
    )]
    OutputTooLarge {
        /// Tokens of the call.
        tokens: usize,
        /// The vocabulary size.
        vocab: usize,
        /// The bytes the logits would take.
        bytes: usize,
        /// The most one buffer holds.
        limit: usize,
    },

    /// A forward pass with no tokens.
    #[error("no tokens to run")]
    EmptyInput,

    /// The requested device is not compiled in or could not be created.
    #[error("device {0} is not available")]
    DeviceUnavailable(String),

    /// The device stopped working: WebGPU's device was lost (the browser's GPU process
    /// restarted, the driver reset) or a kernel faulted. Every later operation on it fails;
    /// the model must be loaded again.
    #[error("the device was lost ({reason}): load the model again")]
    DeviceLost {
        /// The backend's message.
        reason: String,
    },

    /// Reading results back from the device failed.
    #[error("reading {what} back from the device failed: {reason}")]
    Readback {
        /// What was being read.
        what: &'static str,
        /// The backend's message.
        reason: String,
    },
}

/// The crate's result type.
pub type Result<T, E = ModelError> = std::result::Result<T, E>;
