//! The one error type of the crate. Every variant carries where the problem is: a byte
//! offset into the file, a metadata key or a tensor name.

use crate::types::GgmlType;
use crate::value::ValueType;

/// Everything that can go wrong reading a GGUF file or its metadata.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GgufError {
    /// The first four bytes are not `GGUF`.
    #[error("not a GGUF file: the magic is {found:02x?} (expected \"GGUF\")")]
    BadMagic { found: [u8; 4] },

    /// The version field reads as a byte-swapped small number: a big-endian GGUF file.
    #[error(
        "big-endian GGUF file (version {swapped} byte-swapped): only little-endian files are supported"
    )]
    BigEndian { swapped: u32 },

    /// A version other than 2 or 3.
    #[error("unsupported GGUF version {version} (supported: 2 and 3)")]
    UnsupportedVersion { version: u32 },

    /// The bytes ended while reading something.
    #[error(
        "file truncated at byte {offset}: {needed} more byte(s) needed while reading {what}{context}"
    )]
    Truncated {
        offset: u64,
        needed: u64,
        what: &'static str,
        context: String,
    },

    /// A count or length that cannot fit in the bytes left (checked before allocating).
    #[error(
        "{what} at byte {offset} is {count}, which cannot fit in the {bytes_left} byte(s) left{context}"
    )]
    CountTooLarge {
        offset: u64,
        what: &'static str,
        count: u64,
        bytes_left: u64,
        /// The fewest bytes the count needs after its own 8 (saturating).
        min_bytes: u64,
        context: String,
    },

    /// A limit of the reader (see [`crate::Limits`]) was exceeded.
    #[error("{what} at byte {offset} is {value}, over the limit of {limit}{context}")]
    LimitExceeded {
        offset: u64,
        what: &'static str,
        value: u64,
        limit: u64,
        context: String,
    },

    /// A string is not valid UTF-8.
    #[error("invalid UTF-8 in {what} at byte {offset}{context}")]
    InvalidUtf8 {
        offset: u64,
        what: &'static str,
        context: String,
    },

    /// A metadata value type id outside 0..=12.
    #[error("unknown metadata value type {type_id} at byte {offset}{context}")]
    UnknownValueType {
        offset: u64,
        type_id: u32,
        context: String,
    },

    /// Nested arrays deeper than the reader accepts.
    #[error("metadata arrays nested deeper than {limit} at byte {offset}{context}")]
    NestingTooDeep {
        offset: u64,
        limit: u32,
        context: String,
    },

    /// A boolean that is neither 0 nor 1.
    #[error("invalid boolean {value} at byte {offset}{context}")]
    InvalidBool {
        offset: u64,
        value: u8,
        context: String,
    },

    /// The same metadata key twice.
    #[error("duplicate metadata key '{key}'")]
    DuplicateKey { key: String },

    /// `general.alignment` is zero, not a power of two, or of the wrong type.
    #[error("invalid general.alignment {value}: it must be a non-zero power of two (u32)")]
    BadAlignment { value: u64 },

    /// The same tensor name twice.
    #[error("duplicate tensor '{name}'")]
    DuplicateTensor { name: String },

    /// A tensor type id this reader does not know.
    #[error("tensor '{tensor}' has unknown ggml type {type_id}")]
    UnknownTensorType { tensor: String, type_id: u32 },

    /// A tensor whose shape is impossible: too many dimensions, sizes that overflow, a row
    /// that is not a whole number of blocks.
    #[error("tensor '{tensor}' has an invalid shape {shape:?}: {reason}")]
    BadTensorShape {
        tensor: String,
        shape: Vec<u64>,
        reason: &'static str,
    },

    /// A tensor offset that is not a multiple of the alignment.
    #[error("tensor '{tensor}' offset {offset} is not a multiple of the alignment {alignment}")]
    TensorMisaligned {
        tensor: String,
        offset: u64,
        alignment: u64,
    },

    /// A tensor that extends past the end of the data section.
    #[error(
        "tensor '{tensor}' (data bytes {offset}..{end}) extends past the end of the data section ({data_len} bytes)"
    )]
    TensorOutOfBounds {
        tensor: String,
        offset: u64,
        end: u64,
        data_len: u64,
    },

    /// Two tensors whose bytes overlap.
    #[error("tensors '{first}' and '{second}' overlap in the data section")]
    TensorsOverlap { first: String, second: String },

    /// A metadata key that is not there.
    #[error("metadata key '{key}' is missing")]
    MissingKey { key: String },

    /// A metadata key whose value has another type than the one asked for.
    #[error("metadata key '{key}' is {found}, expected {expected}")]
    WrongType {
        key: String,
        expected: &'static str,
        found: ValueType,
    },

    /// A metadata value that has the right type but an unusable value.
    #[error("metadata key '{key}' has an invalid value: {reason}")]
    BadValue { key: String, reason: String },

    /// Dequantisation is not implemented for this type.
    #[error("dequantisation of {ty} is not supported")]
    NoDequantization { ty: GgmlType },

    /// A byte buffer that is not a whole number of blocks, or an output of the wrong length.
    #[error("{ty}: {reason}")]
    BadBuffer { ty: GgmlType, reason: String },

    /// A tensor name that is not in the file.
    #[error("tensor '{name}' is not in the file")]
    MissingTensor { name: String },

    /// The parts of a split GGUF do not fit together.
    #[error("split GGUF: {reason}")]
    Split { reason: String },

    /// The streaming reader was fed more bytes after it finished, or used out of order.
    #[error("streaming GGUF: {reason}")]
    Stream { reason: String },
}

/// The crate's result type.
pub type Result<T, E = GgufError> = std::result::Result<T, E>;
