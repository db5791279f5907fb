//! Bad input gives an error that names what is wrong, never silent garbage: an unsupported
//! architecture or tensor type, a missing or mis-shaped tensor, a context longer than the cache,
//! a token outside the vocabulary, a number in the metadata that would run into garbage (a
//! frequency base or norm epsilon not positive and finite, an odd head size), a size beyond
//! the file or the machine (more blocks than tensors, a KV cache past the address space).
//!
//! Each case edits one thing in a tiny, valid `llama` file built with `stampo-gguf`'s writer.
//! Both ways of loading give the same error: from the whole file, and from tensors staged on
//! the device one by one with only the header kept (a streamed download).
//!
//! Every position's logits asked of the wgpu device in one buffer larger than it holds are
//! refused by name, and come block by block from `Transformer::all_logits`.

mod common;

use stampo_gguf::writer::{GgufWriter, OwnedValue};
use stampo_gguf::{GgmlType, Gguf};
use stampo_model::{DeviceKind, LoadOptions, ModelError, StagedTensors, Transformer};

const D: u64 = 32;
const FF: u64 = 64;
const VOCAB: u64 = 40;
const HEAD_DIM: u64 = 16;
const KV_HEADS: u64 = 1;

/// What to change in the tiny file.
#[derive(Default)]
struct Edit {
    architecture: Option<&'static str>,
    drop: Option<&'static str>,
    reshape: Option<(&'static str, Vec<u64>)>,
    retype: Option<(&'static str, GgmlType)>,
    /// Another vocabulary size and context length (the embedding's rows, the metadata).
    vocab: Option<u64>,
    context: Option<u32>,
    /// Metadata keys (after `llama.`) and their values, replacing the tiny file's own.
    meta: Vec<(&'static str, OwnedValue)>,
}

fn f32_bytes(n: u64, seed: u64) -> Vec<u8> {
    (0..n)
        .flat_map(|i| (((i * 7919 + seed * 104_729) % 1000) as f32 / 1000.0 - 0.5).to_le_bytes())
        .collect()
}

fn tiny_llama(edit: &Edit) -> Vec<u8> {
    let arch = edit.architecture.unwrap_or("llama");
    let mut w = GgufWriter::new();
    w.add("general.architecture", OwnedValue::String(arch.into()));
    for (k, v) in [
        ("block_count", OwnedValue::U32(2)),
        (
            "context_length",
            OwnedValue::U32(edit.context.unwrap_or(64)),
        ),
        ("embedding_length", OwnedValue::U32(D as u32)),
        ("feed_forward_length", OwnedValue::U32(FF as u32)),
        ("attention.head_count", OwnedValue::U32(2)),
        ("attention.head_count_kv", OwnedValue::U32(KV_HEADS as u32)),
        ("attention.layer_norm_rms_epsilon", OwnedValue::F32(1e-5)),
    ] {
        if !edit.meta.iter().any(|(m, _)| *m == k) {
            w.add(&format!("{arch}.{k}"), v);
        }
    }
    for (k, v) in &edit.meta {
        w.add(&format!("{arch}.{k}"), v.clone());
    }
    let mut tensors: Vec<(String, Vec<u64>)> = vec![
        (
            "token_embd.weight".into(),
            vec![D, edit.vocab.unwrap_or(VOCAB)],
        ),
        ("output_norm.weight".into(), vec![D]),
    ];
    for i in 0..2 {
        for (n, dims) in [
            ("attn_norm.weight", vec![D]),
            ("attn_q.weight", vec![D, D]),
            ("attn_k.weight", vec![D, HEAD_DIM * KV_HEADS]),
            ("attn_v.weight", vec![D, HEAD_DIM * KV_HEADS]),
            ("attn_output.weight", vec![D, D]),
            ("ffn_norm.weight", vec![D]),
            ("ffn_gate.weight", vec![D, FF]),
            ("ffn_up.weight", vec![D, FF]),
            ("ffn_down.weight", vec![FF, D]),
        ] {
            tensors.push((format!("blk.{i}.{n}"), dims));
        }
    }
    for (seed, (name, mut dims)) in tensors.into_iter().enumerate() {
        if edit.drop == Some(name.as_str()) {
            continue;
        }
        if let Some((n, d)) = &edit.reshape
            && *n == name
        {
            dims = d.clone();
        }
        let elements: u64 = dims.iter().product();
        match &edit.retype {
            Some((n, ty)) if *n == name => {
                let bytes = ty.row_size(elements).expect("whole blocks") as usize;
                w.add_tensor(&name, *ty, &dims, vec![0; bytes]);
            }
            _ => {
                w.add_tensor(
                    &name,
                    GgmlType::F32,
                    &dims,
                    f32_bytes(elements, seed as u64),
                );
            }
        }
    }
    w.to_bytes()
}

fn load(bytes: &[u8], context: usize) -> Result<Transformer, ModelError> {
    let gguf = Gguf::parse(bytes).expect("the tiny file parses");
    let device = DeviceKind::Cpu.device().expect("cpu device");
    Transformer::load(&gguf, &device, LoadOptions { context })
}

/// As [`load`], through [`StagedTensors`]: every tensor staged from its bytes, then the model
/// built from the header alone.
fn load_staged(bytes: &[u8], context: usize) -> Result<Transformer, ModelError> {
    let gguf = Gguf::parse(bytes).expect("the tiny file parses");
    let device = DeviceKind::Cpu.device().expect("cpu device");
    let mut staged = StagedTensors::new(&device);
    for t in gguf.tensors() {
        staged.insert(t.name, t.ty, &t.dims, gguf.tensor_data(t));
    }
    let header_len = usize::try_from(gguf.data_offset()).expect("fits");
    let header = Gguf::parse_header(&bytes[..header_len]).expect("the header parses");
    Transformer::from_staged(&header, staged, LoadOptions { context })
}

fn load_error(edit: Edit) -> String {
    let file = tiny_llama(&edit);
    let whole = match load(&file, 16) {
        Ok(_) => unreachable!("the edited file loaded"),
        Err(e) => e.to_string(),
    };
    let staged = match load_staged(&file, 16) {
        Ok(_) => unreachable!("the edited file loaded from staged tensors"),
        Err(e) => e.to_string(),
    };
    assert_eq!(whole, staged, "the two loaders disagree");
    whole
}

#[test]
fn the_unedited_tiny_model_loads_and_runs() {
    let model = load(&tiny_llama(&Edit::default()), 16).expect("loads");
    let mut cache = model.new_cache();
    let logits = model.forward(&[1, 2, 3], &mut cache, true).expect("runs");
    assert_eq!(logits.dims(), [3, VOCAB as usize]);
    let values = stampo_model::to_vec(logits).expect("readback");
    assert!(values.iter().all(|v| v.is_finite()));
}

#[test]
fn staged_tensors_give_the_whole_file_model() {
    let file = tiny_llama(&Edit::default());
    let logits = |model: Transformer| {
        let mut cache = model.new_cache();
        let out = model.forward(&[1, 2, 3], &mut cache, true).expect("runs");
        stampo_model::to_vec(out).expect("readback")
    };
    let whole = logits(load(&file, 16).expect("loads"));
    let staged = logits(load_staged(&file, 16).expect("loads staged"));
    assert_eq!(whole, staged);
}

#[test]
fn unsupported_architecture_is_named() {
    let e = load_error(Edit {
        architecture: Some("mamba"),
        ..Edit::default()
    });
    assert!(e.contains("unsupported architecture 'mamba'"), "{e}");
}

#[test]
fn missing_tensor_is_named() {
    let e = load_error(Edit {
        drop: Some("blk.1.ffn_down.weight"),
        ..Edit::default()
    });
    assert!(e.contains("'blk.1.ffn_down.weight' is missing"), "{e}");
}

#[test]
fn misshaped_tensor_is_named_with_both_shapes() {
    let e = load_error(Edit {
        reshape: Some(("blk.0.attn_q.weight", vec![D, D + 32])),
        ..Edit::default()
    });
    assert!(
        e.contains("'blk.0.attn_q.weight' has shape [32, 64]"),
        "{e}"
    );
    assert!(e.contains("expected [32, 32]"), "{e}");
}

#[test]
fn unsupported_tensor_type_is_named() {
    let e = load_error(Edit {
        retype: Some(("blk.0.ffn_up.weight", GgmlType::Q5_1)),
        ..Edit::default()
    });
    assert!(e.contains("'blk.0.ffn_up.weight' has type Q5_1"), "{e}");
}

#[test]
fn a_number_that_would_run_into_garbage_is_named() {
    for (key, value, what) in [
        ("rope.freq_base", 0.0, "0 is not a positive finite number"),
        (
            "rope.freq_base",
            f32::NAN,
            "NaN is not a positive finite number",
        ),
        (
            "attention.layer_norm_rms_epsilon",
            -1e-5,
            "-0.00001 is not a positive finite number",
        ),
        (
            "attention.layer_norm_rms_epsilon",
            f32::INFINITY,
            "inf is not a positive finite number",
        ),
    ] {
        let e = load_error(Edit {
            meta: vec![(key, OwnedValue::F32(value))],
            ..Edit::default()
        });
        assert!(
            e.contains(&format!("llama.{key}")) && e.contains(what),
            "{key} = {value}: {e}"
        );
    }
    // The tiny file's heads are 16 values; a key length of 15 cannot rotate in pairs.
    let e = load_error(Edit {
        meta: vec![("attention.key_length", OwnedValue::U32(15))],
        ..Edit::default()
    });
    assert!(
        e.contains("llama.attention.key_length") && e.contains("odd"),
        "{e}"
    );
}

#[test]
fn context_longer_than_the_cache_is_refused() {
    let model = load(&tiny_llama(&Edit::default()), 8).expect("loads");
    let mut cache = model.new_cache();
    assert_eq!(cache.capacity(), 8);
    model.forward(&[1; 6], &mut cache, false).expect("fits");
    let e = model
        .forward(&[1; 3], &mut cache, false)
        .expect_err("overflows")
        .to_string();
    assert!(
        e.contains("9 positions needed, the KV cache holds 8"),
        "{e}"
    );
}

#[test]
fn cache_capacity_is_capped_at_the_context_length() {
    let model = load(&tiny_llama(&Edit::default()), 100_000).expect("loads");
    assert_eq!(model.new_cache().capacity(), 64);
}

#[test]
fn token_outside_the_vocabulary_is_refused() {
    let model = load(&tiny_llama(&Edit::default()), 16).expect("loads");
    let mut cache = model.new_cache();
    let e = model
        .forward(&[3, 40], &mut cache, false)
        .expect_err("out of range")
        .to_string();
    assert!(
        e.contains("token id 40 is outside the vocabulary of 40"),
        "{e}"
    );
}

/// 600 positions × 65,536 logits × 4 bytes = 150 MiB, more than one WebGPU buffer holds.
const LONG_PROMPT: usize = 600;

/// A tiny model with a vocabulary of 65,536 and a context of 1,024, on `device`.
fn wide_vocabulary_model(device: &stampo_model::Device) -> Transformer {
    let file = tiny_llama(&Edit {
        vocab: Some(65_536),
        context: Some(1024),
        ..Edit::default()
    });
    let gguf = Gguf::parse(&file).expect("the tiny file parses");
    Transformer::load(&gguf, device, LoadOptions { context: 1024 }).expect("loads")
}

fn long_prompt() -> Vec<u32> {
    (0..LONG_PROMPT as u32)
        .map(|i| (i * 7919) % 65_536)
        .collect()
}

/// On the wgpu device every position's logits of a prompt are one buffer, which WebGPU holds
/// only up to 128 MiB: `forward` with `all` refuses beyond that, naming the sizes, before it
/// runs anything.
#[test]
fn every_logit_of_a_long_prompt_in_one_buffer_is_refused_on_the_wgpu_device() {
    let Some(device) = common::wgpu_device() else {
        return;
    };
    let model = wide_vocabulary_model(&device);
    let mut cache = model.new_cache();
    let e = model
        .forward(&long_prompt(), &mut cache, true)
        .expect_err("150 MiB of logits in one buffer")
        .to_string();
    assert!(
        e.contains("logits of 600 tokens over a vocabulary of 65536 take 157286400 bytes"),
        "{e}"
    );
    assert_eq!(cache.position(), 0, "refused before running anything");
}

/// `all_logits` runs the head over blocks of positions (512 and 88 here) and gives what one
/// product over every position gives (the CPU holds any size), bit for bit.
#[test]
fn all_logits_in_blocks_equal_one_product_over_every_position() {
    let device = DeviceKind::Cpu.device().expect("cpu device");
    let model = wide_vocabulary_model(&device);
    let ids = long_prompt();
    let mut cache = model.new_cache();
    let blocks = model.all_logits(&ids, &mut cache).expect("in blocks");
    cache.reset();
    let whole = model.forward(&ids, &mut cache, true).expect("runs");
    let whole = stampo_model::to_vec(whole).expect("readback");
    assert_eq!(blocks.len(), LONG_PROMPT * 65_536);
    assert!(
        blocks == whole,
        "the blocks' logits differ from the whole product's"
    );
}

/// Sizes only a broken file gives end in an error naming them, not in an allocation failure
/// or an overflow that ends the process (the browser's worker with it).
#[test]
fn a_size_beyond_the_file_or_the_machine_is_named() {
    let e = load_error(Edit {
        meta: vec![("block_count", OwnedValue::U64(1 << 40))],
        ..Edit::default()
    });
    assert!(
        e.contains("llama.block_count") && e.contains("blocks, but the file holds 20 tensors"),
        "{e}"
    );
    let e = load_error(Edit {
        meta: vec![("attention.key_length", OwnedValue::U64(1 << 62))],
        ..Edit::default()
    });
    assert!(
        e.contains("llama.attention.head_count") && e.contains("overflow"),
        "{e}"
    );
    let huge_context = tiny_llama(&Edit {
        meta: vec![("context_length", OwnedValue::U64(1 << 62))],
        ..Edit::default()
    });
    let e = load(&huge_context, usize::MAX)
        .map(|_| ())
        .expect_err("a cache of 2^62 positions")
        .to_string();
    assert!(
        e.contains("llama.context_length")
            && e.contains("does not fit this machine's address space"),
        "{e}"
    );
    // The same file with an ordinary context asked for loads.
    assert_eq!(
        load(&huge_context, 16)
            .expect("loads")
            .new_cache()
            .capacity(),
        16
    );
}

/// Models loaded from corrupted files never panic and never allocate beyond the file's
/// measure: bytes of the tiny file's header (metadata and tensor table) are mutated at random,
/// and whatever still parses is loaded and run over a few tokens, giving logits or an error.
/// The tiny file is also read as each other architecture's (whose loads stop at a tensor it
/// lacks, after the configuration). `STAMPO_FUZZ_ITERS` sets the number of mutants of each
/// (default 2000).
#[test]
fn corrupted_headers_load_into_errors_not_panics() {
    let iters: usize = std::env::var("STAMPO_FUZZ_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    for architecture in ["llama", "qwen2", "gemma3"] {
        let file = tiny_llama(&Edit {
            architecture: Some(architecture),
            ..Edit::default()
        });
        let header = Gguf::parse(&file).expect("parses").data_offset() as usize;
        let (mut parsed, mut loaded) = (0, 0);
        for i in 0..iters {
            let mut mutant = file.clone();
            for _ in 0..1 + next() % 4 {
                let at = (next() % header as u64) as usize;
                mutant[at] = match next() % 4 {
                    0 => mutant[at] ^ (1 << (next() % 8)),
                    1 => 0,
                    2 => 0xFF,
                    _ => next() as u8,
                };
            }
            let outcome = std::panic::catch_unwind(|| {
                let Ok(gguf) = Gguf::parse(&mutant) else {
                    return (false, false);
                };
                let device = DeviceKind::Cpu.device().expect("cpu device");
                let Ok(model) = Transformer::load(&gguf, &device, LoadOptions { context: 16 })
                else {
                    return (true, false);
                };
                let mut cache = model.new_cache();
                if let Ok(logits) = model.forward(&[1, 2, 3], &mut cache, false) {
                    let _ = stampo_model::to_vec(logits);
                }
                (true, true)
            });
            match outcome {
                Ok((p, l)) => {
                    parsed += usize::from(p);
                    loaded += usize::from(l);
                }
                Err(_) => panic!("{architecture} mutant {i} panicked (see above)"),
            }
        }
        println!("{architecture}: {iters} mutants, {parsed} parsed, {loaded} loaded");
    }
}
