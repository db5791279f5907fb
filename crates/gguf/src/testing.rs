//! Ready-made small files for tests and examples.

use crate::types::GgmlType;
use crate::writer::{GgufWriter, OwnedValue};

/// A small llama-like file: a few metadata keys and one Q8_0 tensor `token_embd.weight`
/// of 64 × 2 values.
pub fn tiny_file() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.add("general.architecture", OwnedValue::String("llama".into()))
        .add("general.name", OwnedValue::String("tiny".into()))
        .add("llama.context_length", OwnedValue::U32(128))
        .add("llama.embedding_length", OwnedValue::U32(64));
    let mut data = Vec::new();
    for b in 0..4u8 {
        data.extend(half::f16::from_f32(0.5).to_le_bytes());
        data.extend((0..32).map(|i| (i as i8 - 16 + b as i8) as u8));
    }
    w.add_tensor("token_embd.weight", GgmlType::Q8_0, &[64, 2], data);
    w.to_bytes()
}
