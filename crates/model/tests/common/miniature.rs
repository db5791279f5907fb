//! A *miniature* model: SmolLM2-135M's structure (a `llama` of 30 layers, grouped query
//! attention, tied embeddings, every matrix in Q4_1) at tiny widths, so that a decoding step
//! launches the same kernels as SmolLM2's, each with almost nothing to compute. The weights are
//! arbitrary but finite; the output is not text. Shared by the `miniature` example and the
//! tests (included by path).

use stampo_gguf::GgmlType;
use stampo_gguf::writer::{GgufWriter, OwnedValue};

const LAYERS: u32 = 30;
const HEADS: u64 = 3;
const KV_HEADS: u64 = 1;
const HEAD_DIM: u64 = 32;
const D: u64 = HEADS * HEAD_DIM;
const FF: u64 = 256;
const VOCAB: u64 = 512;

/// `elements` values in Q4_1 blocks of 32: scale 1/64, offset −1/8, nibbles from a counter.
fn q4_1(elements: u64, seed: u64) -> Vec<u8> {
    let scale = half::f16::from_f32(1.0 / 64.0).to_le_bytes();
    let offset = half::f16::from_f32(-0.125).to_le_bytes();
    (0..elements / 32)
        .flat_map(|b| {
            let mut block = Vec::with_capacity(20);
            block.extend(scale);
            block.extend(offset);
            block.extend((0..16u64).map(|i| ((b * 131 + i * 17 + seed * 7) % 256) as u8));
            block
        })
        .collect()
}

/// The miniature's GGUF bytes (context length 2,048).
pub fn miniature_gguf() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.add("general.architecture", OwnedValue::String("llama".into()));
    for (k, v) in [
        ("block_count", LAYERS),
        ("context_length", 2048),
        ("embedding_length", D as u32),
        ("feed_forward_length", FF as u32),
        ("attention.head_count", HEADS as u32),
        ("attention.head_count_kv", KV_HEADS as u32),
    ] {
        w.add(&format!("llama.{k}"), OwnedValue::U32(v));
    }
    w.add(
        "llama.attention.layer_norm_rms_epsilon",
        OwnedValue::F32(1e-5),
    );
    w.add("llama.rope.freq_base", OwnedValue::F32(100_000.0));
    let norm: Vec<u8> = (0..D).flat_map(|_| 1.0f32.to_le_bytes()).collect();
    w.add_tensor(
        "token_embd.weight",
        GgmlType::Q4_1,
        &[D, VOCAB],
        q4_1(D * VOCAB, 0),
    );
    w.add_tensor("output_norm.weight", GgmlType::F32, &[D], norm.clone());
    for i in 0..LAYERS {
        let seed = u64::from(i) * 10;
        for (n, dims) in [
            ("attn_q.weight", [D, D]),
            ("attn_k.weight", [D, HEAD_DIM * KV_HEADS]),
            ("attn_v.weight", [D, HEAD_DIM * KV_HEADS]),
            ("attn_output.weight", [D, D]),
            ("ffn_gate.weight", [D, FF]),
            ("ffn_up.weight", [D, FF]),
            ("ffn_down.weight", [FF, D]),
        ] {
            let name = format!("blk.{i}.{n}");
            w.add_tensor(&name, GgmlType::Q4_1, &dims, q4_1(dims[0] * dims[1], seed));
        }
        for n in ["attn_norm.weight", "ffn_norm.weight"] {
            w.add_tensor(&format!("blk.{i}.{n}"), GgmlType::F32, &[D], norm.clone());
        }
    }
    w.to_bytes()
}
