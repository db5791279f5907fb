//! Bit-exact agreement with the `gguf` Python package's `gguf.quants.dequantize`
//! (fixtures made by `tests/fixtures/gguf/make_fixtures.py`): seeded random blocks of every
//! type it dequantises, and every tensor of the three default models when present.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::PathBuf;

use sha2::{Digest, Sha256};
use stampo_gguf::{GgmlType, Gguf, dequantize, dequantize_to_vec};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/gguf")
}

#[test]
fn random_blocks_match_gguf_py() {
    let bytes = std::fs::read(fixtures().join("random_blocks.gguf")).unwrap();
    let g = Gguf::parse(&bytes).unwrap();
    let mut checked = Vec::new();
    for t in g.tensors().iter().filter(|t| t.name.starts_with("q.")) {
        let ty_name = &t.name[2..];
        let ty: GgmlType = ty_name.parse().unwrap();
        assert_eq!(t.ty, ty);
        let ours = dequantize_to_vec(t.ty, g.tensor_data(t)).unwrap();
        let want_t = g.require_tensor(&format!("f32.{ty_name}")).unwrap();
        let want = dequantize_to_vec(GgmlType::F32, g.tensor_data(want_t)).unwrap();
        assert_eq!(ours.len(), want.len(), "{ty_name}");
        for (i, (a, b)) in ours.iter().zip(&want).enumerate() {
            assert_eq!(
                a.to_bits(),
                b.to_bits(),
                "{ty_name} value {i}: ours {a}, gguf-py {b}"
            );
        }
        checked.push(ty_name.to_string());
    }
    assert_eq!(checked.len(), 14, "{checked:?}");
}

fn check_model(name: &str) {
    let fx: serde_json::Value = serde_json::from_slice(
        &std::fs::read(fixtures().join(format!("{name}.tensors.json"))).unwrap(),
    )
    .unwrap();
    let Some(bytes) = stampo_test_data::model_bytes(fx["model"].as_str().unwrap()) else {
        return;
    };
    let g = Gguf::parse(&bytes).unwrap();
    let want = fx["tensors"].as_object().unwrap();
    assert_eq!(g.tensors().len(), want.len(), "{name}: tensor count");
    let mut buf = Vec::new();
    for t in g.tensors() {
        let w = &want[t.name];
        assert_eq!(
            t.ty.name(),
            w["type"].as_str().unwrap(),
            "{name} {}",
            t.name
        );
        let dims: Vec<u64> = w["dims"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap())
            .collect();
        assert_eq!(t.dims, dims, "{name} {}", t.name);
        // Row by row, so the largest tensor never needs its whole f32 copy at once.
        let data = g.tensor_data(t);
        let row_bytes = t.ty.row_size(t.dims[0]).unwrap() as usize;
        let rows_per_chunk = (1 << 20) / row_bytes.max(1) + 1;
        let mut hasher = Sha256::new();
        let mut first = Vec::new();
        for chunk in data.chunks(row_bytes * rows_per_chunk) {
            buf.resize(stampo_gguf::elements_in(t.ty, chunk).unwrap(), 0.0);
            dequantize(t.ty, chunk, &mut buf).unwrap();
            if first.len() < 8 {
                first.extend(buf.iter().take(8 - first.len()).copied());
            }
            for v in &buf {
                hasher.update(v.to_le_bytes());
            }
        }
        let want_first: Vec<f32> = w["first"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        assert_eq!(first, want_first, "{name} {}: first values", t.name);
        let digest: String = hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            digest,
            w["sha256"].as_str().unwrap(),
            "{name} {}: checksum of the dequantised values",
            t.name
        );
    }
}

#[test]
fn smollm2_tensors_match_gguf_py() {
    check_model("smollm2");
}

#[test]
fn qwen25_tensors_match_gguf_py() {
    check_model("qwen2.5");
}

#[test]
fn gemma3_tensors_match_gguf_py() {
    check_model("gemma3");
}
