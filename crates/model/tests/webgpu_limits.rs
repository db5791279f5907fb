//! The three default models on a wgpu device granting only WebGPU's default limits
//! (`device::minimal_webgpu_device`: 8 storage buffers a shader stage, 128 MiB a binding),
//! the least a browser's device may grant: every kernel of a prefill and of a
//! recorded and replayed decoding step must fit them, and the greedy choices agree with
//! llama.cpp's fixture. Natively the adapter would grant more (lavapipe: 32 storage buffers),
//! so the other tests cannot see a kernel that binds one buffer too many.
//!
//! A binary of its own: burn's wgpu runtime is set up once per process.

mod common;

use common::{DEFAULT_MODELS, argmax, fixture, model_bytes};
use stampo_gguf::Gguf;
use stampo_model::{LoadOptions, Transformer, device::minimal_webgpu_device, to_vec};

/// Decoding steps walked after the prompt: the first records, the others replay.
const STEPS: usize = 4;

/// Whether llama.cpp's fixture allows `ours` at greedy step `step` of `prompt`: its own
/// choice, or a token its logits put within `generate.py`'s near-tie of it.
fn allowed(prompt: &common::FixturePrompt, step: usize, ours: u32) -> bool {
    ours == prompt.greedy[step]
        || prompt
            .near
            .get(step)
            .is_some_and(|near| near.iter().any(|&(id, _)| id == ours))
}

#[test]
fn default_models_run_within_webgpu_default_limits() {
    let Some(device) = common::wgpu::or_skip(minimal_webgpu_device()) else {
        return;
    };
    for file in DEFAULT_MODELS {
        let (Some(bytes), Some(fixture)) = (model_bytes(file), fixture(file)) else {
            continue;
        };
        let prompt = &fixture.prompts[0];
        let gguf = Gguf::parse(&bytes).expect("model parses");
        let context = prompt.ids.len() + STEPS + 1;
        let model = Transformer::load(&gguf, &device, LoadOptions { context }).expect("loads");
        let mut cache = model.new_cache();
        cache.set_step_graphs(true);
        let mut fed = prompt.ids.as_slice();
        for step in 0..=STEPS {
            let logits = model.forward(fed, &mut cache, false).expect("forward");
            let logits = to_vec(logits).expect("read back");
            assert!(logits.iter().all(|v| v.is_finite()), "{file}: step {step}");
            let ours = argmax(&logits);
            assert!(
                allowed(prompt, step, ours),
                "{file}: greedy step {step} chose {ours}, llama.cpp {} (not a near-tie)",
                prompt.greedy[step]
            );
            fed = std::slice::from_ref(&prompt.greedy[step]);
        }
        assert_eq!(cache.step_graphs(), Some("recorded"), "{file}");
        assert_eq!(cache.replayed_steps(), STEPS as u64 - 1, "{file}");
        println!("{file}: prefill and {STEPS} decoding steps within WebGPU's default limits");
    }
}
