//! Weights stay quantised on the device: what the wgpu device's allocator holds once a model is
//! loaded (before any KV cache) is within 10% of the GGUF's tensor bytes, for each default model.
//! Measured 2026-11-30 on lavapipe with a 16-position context: SmolLM2 1.00004×, Qwen2.5
//! 1.00001×, Gemma 3 1.0001× (the rest is RoPE tables and buffer alignment; the weights are
//! loaded as persistent allocations, exact-fit buffers; with burn's default pages SmolLM2's
//! came to 1.39×).

mod common;

use common::{model_bytes, wgpu_device};
use stampo_gguf::Gguf;
use stampo_model::{LoadOptions, Transformer};

/// The default models, loaded one after the other onto the one wgpu device of this process
/// (burn's runtime is set up once per process), each kept alive: what each load adds to the
/// allocator is measured. One test, so no other test's buffers come and go in between.
#[test]
fn weights_take_their_gguf_bytes_on_wgpu() {
    let Some(device) = wgpu_device() else { return };
    let usage = || {
        device
            .memory_pool_usage()
            .expect("the wgpu device reports its pools")
    };
    let mut models = Vec::new();
    for file in common::DEFAULT_MODELS {
        let Some(bytes) = model_bytes(file) else {
            continue;
        };
        let gguf = Gguf::parse(&bytes).expect("model parses");
        let before = usage();
        let model =
            Transformer::load(&gguf, &device, LoadOptions { context: 16 }).expect("model loads");
        let after = usage();
        let gguf_bytes = model.gguf_tensor_bytes() as f64;
        let in_use = after.bytes_in_use.saturating_sub(before.bytes_in_use) as f64;
        let reserved = after.bytes_reserved.saturating_sub(before.bytes_reserved) as f64;
        println!(
            "{file}: {reserved} bytes reserved on the device, {in_use} in use, for {gguf_bytes} GGUF tensor bytes ({:.5}×)",
            reserved / gguf_bytes
        );
        assert!(
            in_use >= gguf_bytes,
            "{file}: the weights cannot take less than their GGUF bytes ({in_use})"
        );
        assert!(
            reserved <= 1.10 * gguf_bytes,
            "{file}: {:.3}× the GGUF's tensor bytes",
            reserved / gguf_bytes
        );
        models.push(model);
    }
}
