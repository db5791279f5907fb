//! A small GGUF writer, for tests and fixtures across the workspace: build a file with the
//! metadata and tensors a test needs instead of shipping one.
//!
//! ```
//! use stampo_gguf::writer::{GgufWriter, OwnedValue};
//! use stampo_gguf::{GgmlType, Gguf};
//! let mut w = GgufWriter::new();
//! w.add("general.architecture", OwnedValue::String("llama".into()));
//! w.add_tensor("t", GgmlType::F32, &[2], 1.0f32.to_le_bytes().iter().chain(&2.0f32.to_le_bytes()).copied().collect());
//! let bytes = w.to_bytes();
//! let gguf = Gguf::parse(&bytes).unwrap();
//! assert_eq!(gguf.tensors().len(), 1);
//! ```

use crate::types::GgmlType;
use crate::value::ValueType;

/// An owned metadata value to write.
#[derive(Debug, Clone, PartialEq)]
pub enum OwnedValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    /// Raw string bytes (possibly not UTF-8).
    Bytes(Vec<u8>),
    /// An array: its element type and elements (all of that type).
    Array(ValueType, Vec<OwnedValue>),
    U64(u64),
    I64(i64),
    F64(f64),
}

impl OwnedValue {
    /// The type tag written for this value.
    pub fn value_type(&self) -> ValueType {
        match self {
            OwnedValue::U8(_) => ValueType::U8,
            OwnedValue::I8(_) => ValueType::I8,
            OwnedValue::U16(_) => ValueType::U16,
            OwnedValue::I16(_) => ValueType::I16,
            OwnedValue::U32(_) => ValueType::U32,
            OwnedValue::I32(_) => ValueType::I32,
            OwnedValue::F32(_) => ValueType::F32,
            OwnedValue::Bool(_) => ValueType::Bool,
            OwnedValue::String(_) | OwnedValue::Bytes(_) => ValueType::String,
            OwnedValue::Array(..) => ValueType::Array,
            OwnedValue::U64(_) => ValueType::U64,
            OwnedValue::I64(_) => ValueType::I64,
            OwnedValue::F64(_) => ValueType::F64,
        }
    }

    /// An array of strings.
    pub fn strings<S: Into<String>>(items: impl IntoIterator<Item = S>) -> Self {
        OwnedValue::Array(
            ValueType::String,
            items
                .into_iter()
                .map(|s| OwnedValue::String(s.into()))
                .collect(),
        )
    }
    /// An array of `f32`.
    pub fn f32s(items: impl IntoIterator<Item = f32>) -> Self {
        OwnedValue::Array(
            ValueType::F32,
            items.into_iter().map(OwnedValue::F32).collect(),
        )
    }
    /// An array of `i32`.
    pub fn i32s(items: impl IntoIterator<Item = i32>) -> Self {
        OwnedValue::Array(
            ValueType::I32,
            items.into_iter().map(OwnedValue::I32).collect(),
        )
    }

    fn write_payload(&self, out: &mut Vec<u8>) {
        match self {
            OwnedValue::U8(v) => out.push(*v),
            OwnedValue::I8(v) => out.push(*v as u8),
            OwnedValue::U16(v) => out.extend(v.to_le_bytes()),
            OwnedValue::I16(v) => out.extend(v.to_le_bytes()),
            OwnedValue::U32(v) => out.extend(v.to_le_bytes()),
            OwnedValue::I32(v) => out.extend(v.to_le_bytes()),
            OwnedValue::F32(v) => out.extend(v.to_le_bytes()),
            OwnedValue::Bool(v) => out.push(u8::from(*v)),
            OwnedValue::String(s) => write_str(out, s.as_bytes()),
            OwnedValue::Bytes(s) => write_str(out, s),
            OwnedValue::Array(ty, items) => {
                out.extend((*ty as u32).to_le_bytes());
                out.extend((items.len() as u64).to_le_bytes());
                for item in items {
                    item.write_payload(out);
                }
            }
            OwnedValue::U64(v) => out.extend(v.to_le_bytes()),
            OwnedValue::I64(v) => out.extend(v.to_le_bytes()),
            OwnedValue::F64(v) => out.extend(v.to_le_bytes()),
        }
    }
}

fn write_str(out: &mut Vec<u8>, s: &[u8]) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend_from_slice(s);
}

/// Builds a GGUF v3 file in memory.
#[derive(Debug, Clone, Default)]
pub struct GgufWriter {
    metadata: Vec<(String, OwnedValue)>,
    tensors: Vec<(String, GgmlType, Vec<u64>, Vec<u8>)>,
    alignment: Option<u32>,
}

impl GgufWriter {
    /// An empty file.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a metadata pair (`general.alignment` as a `u32` also sets the alignment).
    pub fn add(&mut self, key: &str, value: OwnedValue) -> &mut Self {
        if key == "general.alignment"
            && let OwnedValue::U32(a) = value
        {
            self.alignment = Some(a);
        }
        self.metadata.push((key.to_string(), value));
        self
    }

    /// Adds a tensor with dimensions innermost first (ggml's `ne`) and its raw bytes.
    pub fn add_tensor(
        &mut self,
        name: &str,
        ty: GgmlType,
        dims: &[u64],
        data: Vec<u8>,
    ) -> &mut Self {
        self.tensors
            .push((name.to_string(), ty, dims.to_vec(), data));
        self
    }

    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let align = u64::from(self.alignment.unwrap_or(32)).max(1);
        let mut out = Vec::new();
        out.extend(b"GGUF");
        out.extend(3u32.to_le_bytes());
        out.extend((self.tensors.len() as u64).to_le_bytes());
        out.extend((self.metadata.len() as u64).to_le_bytes());
        for (key, value) in &self.metadata {
            write_str(&mut out, key.as_bytes());
            out.extend((value.value_type() as u32).to_le_bytes());
            value.write_payload(&mut out);
        }
        let mut offset = 0u64;
        let mut offsets = Vec::new();
        for (name, ty, dims, data) in &self.tensors {
            write_str(&mut out, name.as_bytes());
            out.extend((dims.len() as u32).to_le_bytes());
            for d in dims {
                out.extend(d.to_le_bytes());
            }
            out.extend(ty.id().to_le_bytes());
            out.extend(offset.to_le_bytes());
            offsets.push(offset);
            offset = (offset + data.len() as u64).div_ceil(align) * align;
        }
        let pad = |out: &mut Vec<u8>| {
            let len = out.len() as u64;
            out.resize((len.div_ceil(align) * align) as usize, 0);
        };
        pad(&mut out);
        let data_start = out.len();
        for ((_, _, _, data), off) in self.tensors.iter().zip(offsets) {
            out.resize(data_start + off as usize, 0);
            out.extend_from_slice(data);
        }
        if !self.tensors.is_empty() {
            pad(&mut out);
        }
        out
    }
}
