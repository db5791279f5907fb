//! Weights stay quantised on the device: what the wgpu device's allocator holds once a model is
//! loaded (before any KV cache) is within 10% of the GGUF's tensor bytes, for each default model.
//! Measured 2026-11-30 on lavapipe with a 16-position context: SmolLM2 1.00004×, Qwen2.5
//! 1.00001×, Gemma 3 1.0001× (the rest is RoPE tables and buffer alignment; the weights are
//! loaded as persistent allocations, exact-fit buffers; with burn's default pages SmolLM2's
//! came to 1.39×).

mod common;

use common::model_bytes;
use stampo_gguf::Gguf;
use stampo_model::{DeviceKind, LoadOptions, Transformer};

fn check(file: &str) {
    let Some(bytes) = model_bytes(file) else {
        return;
    };
    let device = match DeviceKind::Wgpu.device() {
        Ok(device) => device,
        Err(e) => {
            assert!(
                std::env::var("STAMPO_REQUIRE_WGPU").as_deref() != Ok("1"),
                "STAMPO_REQUIRE_WGPU=1 but {e}"
            );
            println!("SKIPPED the wgpu device: {e}");
            return;
        }
    };
    let gguf = Gguf::parse(&bytes).expect("model parses");
    let model =
        Transformer::load(&gguf, &device, LoadOptions { context: 16 }).expect("model loads");
    let usage = device
        .memory_pool_usage()
        .expect("the wgpu device reports its pools");
    let gguf_bytes = model.gguf_tensor_bytes() as f64;
    let ratio = usage.bytes_reserved as f64 / gguf_bytes;
    println!(
        "{file}: {} bytes reserved on the device, {} in use, for {gguf_bytes} GGUF tensor bytes ({ratio:.4}×)",
        usage.bytes_reserved, usage.bytes_in_use
    );
    assert!(
        usage.bytes_in_use as f64 >= gguf_bytes,
        "the weights cannot take less than their GGUF bytes"
    );
    assert!(ratio <= 1.10, "{ratio:.3}× the GGUF's tensor bytes");
}

#[test]
fn smollm2_weights_on_wgpu() {
    check("SmolLM2-135M-Instruct.Q4_1.gguf");
}

#[test]
fn qwen2_weights_on_wgpu() {
    check("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
}

#[test]
fn gemma3_weights_on_wgpu() {
    check("gemma-3-270m-q4_k_m.gguf");
}
