//! On the wgpu device [`ModelSource::warm_up`] compiles every kernel a request launches, so
//! that no request waits for one (a pipeline compile in Chrome or a driver takes tens to
//! hundreds of milliseconds). CubeCL's own compilation log says which kernels it compiles.
//! `live_model.rs` asks that of requests on lavapipe; this file asks it of a long context,
//! whose decoding steps past 256 keys split each query's keys across cubes (three kernels
//! of their own), on each default model.
//!
//! A prompt of 270 tokens takes lavapipe minutes, so the device here is wgpu's noop backend
//! (`device::noop_wgpu_device`): CubeCL compiles each kernel as for a GPU, for an adapter with
//! WebGPU's default limits and no optional features (as Chrome on Linux grants), but nothing
//! runs. Its logits are not a model's, so the steps are fed fixed tokens through the calls
//! the generation loop makes ([`LogitsSource`]) rather than through requests.

// Test helpers fail the test by panicking, as assertions do.
#![allow(clippy::panic)]

mod common;

use common::compile_log::{assert_none_since, log_compilations, logged};
use stampo_engine::generate::LogitsSource;
use stampo_engine::{LoadedModel, ModelSource, block_on};

/// A decoding step as the loop makes it: under `mask` (a bitmask of the vocabulary, or none)
/// the `k` most likely tokens chosen on the device. What it reads back is whatever the noop
/// backend's buffers held, not always a valid choice, so it is not looked at; whether the
/// pass ran is (the tokens the source holds at the end).
fn step(source: &mut ModelSource, token: u32, mask: Option<&[u32]>, k: usize) {
    let mask = mask.map(<[u32]>::to_vec);
    let _ = block_on(source.submit_top(&[token], &mut || mask.clone(), k));
}

#[test]
fn past_256_keys_a_decoding_step_compiles_nothing_after_the_warm_up() {
    let log = log_compilations();
    let device = stampo_model::device::noop_wgpu_device().expect("wgpu's noop device");
    for file in stampo_test_data::DEFAULT_MODELS {
        let Some(bytes) = stampo_test_data::model_bytes(file) else {
            continue;
        };
        let mut model = LoadedModel::load(&bytes, &device, 512).expect("the model loads");
        let source = &mut model.source;
        block_on(source.warm_up()).expect("warm-up");
        let warmed = logged(&log);
        assert!(
            warmed.contains("attention_split_stats"),
            "the warm-up of a 512-position context compiles the split attention:\n{warmed}"
        );

        let vocab = source.vocab_size().expect("a vocabulary size");
        let words = vocab.div_ceil(32);
        let mut sparse = vec![0u32; words];
        sparse[0] = 0b1011;
        let dense = vec![u32::MAX; words];
        let prompt: Vec<u32> = (0..270).map(|i| 100 + i % 50).collect();
        source.begin(&prompt).expect("an empty cache");
        let _ = block_on(source.submit_top(&prompt, &mut || None, 1));
        // Greedy, under a grammar's sparse and dense masks, llama.cpp's default chain (40),
        // and every logit read back (`n_probs`).
        step(source, 7, None, 1);
        step(source, 8, Some(&sparse), 1);
        step(source, 9, Some(&dense), 40);
        let _ = block_on(source.submit(&[10]));
        let fed: Vec<u32> = prompt.iter().copied().chain(7..=10).collect();
        assert_eq!(
            source.begin(&fed).expect("held"),
            fed.len(),
            "every pass ran"
        );
        let what = format!("{file}: steps past 256 keys");
        assert_none_since(&log, &warmed, &what);
    }
    let _ = std::fs::remove_file(&log);
}
