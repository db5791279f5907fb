//! Loading the default model while its file streams in ([`StreamingLoad`]) gives the model the
//! whole-file loader gives: the same logits to the last bit, on the CPU and (where there is
//! one) the wgpu device, whatever the piece size. A file cut short, or one that is not GGUF,
//! is an error that says so.

// Test helpers fail the test by panicking, as assertions do.
#![allow(clippy::panic)]

mod common;

use stampo_engine::{LoadedModel, StreamingLoad};
use stampo_model::{Device, DeviceKind, to_vec};

const PROMPT: [u32; 5] = [1, 504, 3458, 282, 4649];

fn first_logits(model: &LoadedModel) -> Vec<f32> {
    let transformer = model.source.model();
    let mut cache = transformer.new_cache();
    let logits = transformer
        .forward(&PROMPT, &mut cache, false)
        .expect("forward");
    to_vec(logits).expect("readback")
}

/// Streams `file` in pieces of `piece` bytes; checks progress only grows and ends at the
/// tensors' total.
fn streamed(file: &[u8], piece: usize, device: &Device) -> LoadedModel {
    let mut load = StreamingLoad::new(device);
    let mut last = (0, 0);
    for chunk in file.chunks(piece) {
        load.push(chunk, &mut |done, total| {
            assert!(
                done >= last.0 && done <= total,
                "{done}/{total} after {last:?}"
            );
            last = (done, total);
        })
        .expect("a piece of a good file is taken");
    }
    assert_eq!(load.bytes_received(), file.len() as u64);
    assert!(last.1 > 0 && last.0 == last.1, "progress ended at {last:?}");
    load.finish(256).expect("the streamed file loads")
}

/// The default model's bytes, or `None` (a skip) where it has not been fetched.
fn smollm2_file() -> Option<Vec<u8>> {
    let path = common::smollm2_path()?;
    Some(std::fs::read(&path).expect("the model file reads"))
}

#[test]
fn streamed_model_equals_the_whole_file_model_on_cpu() {
    let Some(file) = smollm2_file() else {
        return;
    };
    let device = DeviceKind::Cpu.device().expect("cpu device");
    let whole = LoadedModel::load(&file, &device, 256).expect("loads");
    let want = first_logits(&whole);
    // 64 KiB is what a browser's fetch hands over; 1 MiB + 3 splits the header and most
    // tensors at odd places.
    for piece in [65_536, (1 << 20) + 3] {
        let model = streamed(&file, piece, &device);
        assert_eq!(model.name, whole.name, "piece {piece}");
        assert_eq!(
            model.grammar_vocab.len(),
            whole.grammar_vocab.len(),
            "piece {piece}"
        );
        assert_eq!(first_logits(&model), want, "piece {piece}");
    }
}

#[test]
fn streamed_model_equals_the_whole_file_model_on_wgpu() {
    let Some(file) = smollm2_file() else {
        return;
    };
    let Some(device) = common::wgpu_device() else {
        return;
    };
    let whole = first_logits(&LoadedModel::load(&file, &device, 256).expect("loads"));
    let model = streamed(&file, 65_536, &device);
    assert_eq!(first_logits(&model), whole);
}

#[test]
fn a_file_cut_short_names_the_tensor_it_stopped_in() {
    let Some(file) = smollm2_file() else {
        return;
    };
    let device = DeviceKind::Cpu.device().expect("cpu device");
    let mut load = StreamingLoad::new(&device);
    let cut = &file[..file.len() - 1000];
    for chunk in cut.chunks(1 << 20) {
        load.push(chunk, &mut |_, _| {}).expect("taken");
    }
    let e = load
        .finish(256)
        .err()
        .expect("a short file is refused")
        .to_string();
    assert!(e.contains("truncated") || e.contains("tensor data"), "{e}");
    assert!(e.contains("tensor '"), "{e}");
}

#[test]
fn a_file_that_is_not_gguf_fails_at_its_first_bytes() {
    let device = DeviceKind::Cpu.device().expect("cpu device");
    let mut load = StreamingLoad::new(&device);
    let e = load
        .push(b"<!DOCTYPE html><html>not a model</html>", &mut |_, _| {})
        .expect_err("refused")
        .to_string();
    assert!(e.to_lowercase().contains("magic"), "{e}");
}
