//! Decoding steps recorded once and replayed on the wgpu device (`step_graph`): a replayed
//! step gives the logits of the same step launched kernel by kernel, bit for bit, at every
//! position, across a change of the attention's splits (which records again), and only for the
//! model and cache it was recorded with. Skipped without a wgpu adapter (lavapipe in CI).

mod common;

use common::{miniature::miniature_gguf, model_bytes, wgpu_device};
use stampo_gguf::Gguf;
use stampo_model::{Cache, Device, LoadOptions, Transformer, to_vec};

fn load(bytes: &[u8], device: &Device, context: usize) -> Transformer {
    let gguf = Gguf::parse(bytes).expect("GGUF parses");
    Transformer::load(&gguf, device, LoadOptions { context }).expect("model loads")
}

/// The last token's logits, as bits: equal means the same values, NaNs included (a GPU run
/// of `bench/model/gpu.sh` feeds this test skeleton models, whose logits are not a model's).
fn logits(model: &Transformer, tokens: &[u32], cache: &mut Cache) -> Vec<u32> {
    let row = to_vec(model.forward(tokens, cache, false).expect("forward")).expect("read back");
    row.into_iter().map(f32::to_bits).collect()
}

fn argmax(bits: &[u32]) -> u32 {
    let mut best = 0;
    for (i, &v) in bits.iter().enumerate() {
        if f32::from_bits(v) > f32::from_bits(bits[best]) {
            best = i;
        }
    }
    best as u32
}

/// Prefills `prompt` into a replaying cache and a launching one, then decodes `steps` tokens
/// (the vocabulary's last, which lies in the last part of a table held in parts, as Gemma 3's
/// is, then the replaying cache's greedy choices, fed to both), asserting each step's logits
/// equal; returns the replaying cache.
fn decode_both(model: &Transformer, prompt: &[u32], steps: usize, what: &str) -> Cache {
    let mut replayed = model.new_cache();
    let mut launched = model.new_cache();
    replayed.set_step_graphs(true);
    launched.set_step_graphs(false);
    let mut a = logits(model, prompt, &mut replayed);
    let b = logits(model, prompt, &mut launched);
    assert_eq!(a, b, "{what}: the prompt's logits");
    for step in 0..steps {
        let next = match step {
            0 => model.vocab_size() as u32 - 1,
            _ => argmax(&a),
        };
        a = logits(model, &[next], &mut replayed);
        let b = logits(model, &[next], &mut launched);
        assert!(
            a == b,
            "{what}: step {step} (position {}) differs between replay and launches",
            prompt.len() + step
        );
    }
    assert_eq!(
        launched.replayed_steps(),
        0,
        "{what}: replay was turned off"
    );
    assert_eq!(launched.step_graphs(), Some("off"), "{what}");
    assert_eq!(replayed.step_graphs(), Some("recorded"), "{what}");
    replayed
}

#[test]
fn replayed_steps_of_each_model_give_the_launched_logits() {
    let Some(device) = wgpu_device() else { return };
    for file in common::DEFAULT_MODELS {
        let Some(bytes) = model_bytes(file) else {
            continue;
        };
        let model = load(&bytes, &device, 64);
        let cache = decode_both(&model, &[1, 504, 3458, 282], 4, file);
        // The first step records (its warm-up run computes it); the other three replay.
        assert_eq!(cache.replayed_steps(), 3, "{file}");
    }
}

#[test]
fn a_change_of_attention_splits_records_again() {
    let Some(device) = wgpu_device() else { return };
    let model = load(&miniature_gguf(), &device, 512);
    // Keys 251..=262 a step: one cube a head up to 256 keys, two splits of 256 after.
    let prompt: Vec<u32> = (0..250).map(|i| (i * 37 % 500) as u32).collect();
    let cache = decode_both(&model, &prompt, 12, "miniature");
    // Steps at 251 and 257 keys record; the ten others replay.
    assert_eq!(cache.replayed_steps(), 10);
}

#[test]
fn a_cache_replays_only_for_the_model_it_recorded_with() {
    let Some(device) = wgpu_device() else { return };
    let bytes = miniature_gguf();
    let first = load(&bytes, &device, 64);
    let second = load(&bytes, &device, 64);
    let mut cache = first.new_cache();
    cache.set_step_graphs(true);
    let prompt = [3, 1, 4];
    let mut reference = second.new_cache();
    reference.set_step_graphs(false);
    logits(&first, &prompt, &mut cache);
    logits(&second, &prompt, &mut reference);
    logits(&first, &[5], &mut cache);
    logits(&first, &[9], &mut cache);
    assert_eq!(cache.replayed_steps(), 1);
    logits(&second, &[5], &mut reference);
    logits(&second, &[9], &mut reference);
    // The same weights, another load: the step records anew for `second`, then replays.
    let a = logits(&second, &[2], &mut cache);
    assert_eq!(
        cache.replayed_steps(),
        1,
        "replayed another model's recording"
    );
    let b = logits(&second, &[2], &mut reference);
    assert_eq!(a, b);
    drop(first);
    let a = logits(&second, &[6], &mut cache);
    assert_eq!(cache.replayed_steps(), 2);
    assert_eq!(a, logits(&second, &[6], &mut reference));
}
