//! Fidelity to llama.cpp on the same GGUF files (fixtures from `tests/fixtures/model/generate.py`,
//! made with llama.cpp's default CPU settings), measured against how far llama.cpp agrees with
//! itself (`tests/fixtures/model/self_agreement.py`: the same program and GGUF without repacked
//! weights, with flash attention, and with the defaults on another CPU, which change only
//! roundings and the order sums are taken in).
//!
//! For each of 20 prompts the 32 greedy tokens are walked with teacher forcing: at every step
//! both are fed llama.cpp's tokens so far and our greedy choice is compared with its. Where
//! every step agrees, free-running greedy decoding gives the identical sequence. The test asks:
//! - every step where we choose another token is a near-tie (llama.cpp's logits put our token
//!   within `TIE_MARGIN` of its own) or a step where llama.cpp's own variants part too;
//! - there are no more such steps than the variant furthest from the fixture has (on wgpu,
//!   which multiplies unrounded `f32` activations, `WGPU_STEP_FACTOR` times as many);
//! - the 20 largest logits at the first generated position are no further from the fixture's
//!   than the furthest variant's (on wgpu, within `WGPU_LOGIT_TOLERANCE`);
//!
//! And the perplexity of `tests/fixtures/model/perplexity.txt`, as llama.cpp's `perplexity`
//! computes it in chunks of 512 tokens, is within 1% of llama.cpp's (`perplexity.py`). The
//! fixtures' 134-token text is too short for that: llama.cpp's own variants spread up to 1.2%
//! on it; on the 2,100 tokens (1,020 scored) of `perplexity.txt` up to 0.6%.

mod common;

use common::{argmax, fixture, model_bytes, perplexity_reference, self_agreement, wgpu_device};
use stampo_gguf::Gguf;
use stampo_model::{DeviceKind, LoadOptions, Transformer, to_vec};

/// Largest allowed |ours − llama.cpp| on a top-20 logit on the wgpu device, which multiplies in
/// `f32` where llama.cpp's CPU backend (and ours) rounds activations to 8 bits first, and keeps
/// `f32` where they round to `f16`: its logits are nearer the unrounded model's, so further from
/// llama.cpp's (measured: up to 0.84 on SmolLM2, 1.34 on Gemma 3). On the CPU the bound is the
/// furthest llama.cpp variant's (`SelfAgreement::widest_top20`).
const WGPU_LOGIT_TOLERANCE: f32 = 1.5;

/// The most llama.cpp's logit for our token may trail its own choice where we choose another:
/// the fixture's `NEAR_TIE`. llama.cpp's own variants part from the fixture at gaps up to 0.30
/// (SmolLM2), 0.18 (Qwen2.5), and 0.45 and 12 times over 0.5 (Gemma 3).
const TIE_MARGIN: f32 = 0.5;

/// On wgpu, how many times llama.cpp's own count of disagreeing steps we may have.
const WGPU_STEP_FACTOR: usize = 2;

/// Largest allowed relative perplexity difference (the 1%).
const PERPLEXITY_TOLERANCE: f64 = 0.01;

/// One step where our greedy choice differs from llama.cpp's, both fed the same tokens before.
struct Disagreement {
    prompt: usize,
    step: usize,
    ours: u32,
    theirs: u32,
    /// How far llama.cpp's logits put our token below its own; `None` when ours is not among
    /// the fixture's near tokens, i.e. trails by more than `generate.py`'s `NEAR_TIE`.
    gap: Option<f32>,
}

/// How the fixture's greedy tokens are fed to the model.
#[derive(Clone, Copy, PartialEq)]
enum Walk {
    /// As generation runs: prefill the prompt, then one decode step per token.
    Decode,
    /// The prompt and the fixture's tokens in one forward pass with every position's logits:
    /// the same function of the same text, in a fraction of the time on lavapipe, through the
    /// prefill kernels only.
    Batched,
}

/// Our logits before each of the fixture's greedy tokens of `prompt`, llama.cpp's tokens fed.
fn teacher_forced_logits(
    model: &Transformer,
    cache: &mut stampo_model::Cache,
    prompt: &common::FixturePrompt,
    walk: Walk,
) -> Vec<Vec<f32>> {
    cache.reset();
    let vocab = model.vocab_size();
    let steps = prompt.greedy.len();
    match walk {
        Walk::Decode => {
            let mut rows = Vec::with_capacity(steps);
            let mut logits = model.forward(&prompt.ids, cache, false).expect("prefill");
            for &theirs in &prompt.greedy {
                rows.push(to_vec(logits).expect("readback"));
                if rows.len() == steps {
                    break;
                }
                logits = model.forward(&[theirs], cache, false).expect("decode");
            }
            rows
        }
        Walk::Batched => {
            let mut text = prompt.ids.clone();
            text.extend_from_slice(&prompt.greedy[..steps - 1]);
            let all = model.all_logits(&text, cache).expect("forward");
            let first = prompt.ids.len() - 1;
            (first..first + steps)
                .map(|pos| all[pos * vocab..(pos + 1) * vocab].to_vec())
                .collect()
        }
    }
}

/// Checks the first `prompts` fixture prompts of model `file` on `device` (see the module doc).
fn check_fidelity(file: &str, device: DeviceKind, walk: Walk, prompts: usize) {
    let Some(bytes) = model_bytes(file) else {
        return;
    };
    let Some(fx) = fixture(file) else { return };
    let Some(yardstick) = self_agreement(file) else {
        return;
    };
    assert_eq!(fx.model, file);
    let gguf = Gguf::parse(&bytes).expect("model parses");
    let on_wgpu = device == DeviceKind::Wgpu;
    let device = if on_wgpu {
        let Some(device) = wgpu_device() else { return };
        device
    } else {
        device.device().expect("cpu device")
    };
    let model =
        Transformer::load(&gguf, &device, LoadOptions { context: 512 }).expect("model loads");
    let mut cache = model.new_cache();
    let (mut max_abs, mut max_rel) = (0.0f32, 0.0f32);
    let mut worst = 0;
    let mut disagreements = Vec::new();
    let mut identical = 0;
    let prompts = &fx.prompts[..prompts.min(fx.prompts.len())];
    for (p, prompt) in prompts.iter().enumerate() {
        let rows = teacher_forced_logits(&model, &mut cache, prompt, walk);
        for &(id, want) in &prompt.top {
            let got = rows[0][id as usize];
            if (got - want).abs() > max_abs {
                worst = p;
            }
            max_abs = max_abs.max((got - want).abs());
            max_rel = max_rel.max((got - want).abs() / want.abs().max(1e-6));
        }
        // Teacher forcing: at every step we were fed llama.cpp's tokens so far, so each step
        // compares the two on the same text. Where every step agrees, free-running greedy
        // decoding is identical (by induction on the steps); where one does not, free-running
        // decoding would part there and compare different texts after it.
        let before = disagreements.len();
        for (step, (&theirs, logits)) in prompt.greedy.iter().zip(&rows).enumerate() {
            let ours = argmax(logits);
            if ours != theirs {
                let gap = prompt.near.get(step).and_then(|near| {
                    let best = near.first()?.1;
                    near.iter()
                        .find(|(id, _)| *id == ours)
                        .map(|(_, l)| best - l)
                });
                disagreements.push(Disagreement {
                    prompt: p,
                    step,
                    ours,
                    theirs,
                    gap,
                });
            }
        }
        if disagreements.len() == before {
            identical += 1;
        }
    }
    let steps: usize = prompts.iter().map(|p| p.greedy.len()).sum();
    // llama.cpp's own counts over the same prompts.
    let (theirs_disagreeing, furthest) = yardstick.most_disagreeing(prompts.len());
    let (widest_top20, widest) = yardstick.widest_top20();
    println!(
        "{file}: {identical} of {} prompts identical for 32 tokens; {} of {steps} teacher-forced steps disagree (llama.cpp's variant {furthest}: {theirs_disagreeing}); top-20 logits max abs error {max_abs:.4} (llama.cpp's variant {widest}: {widest_top20:.4}), max rel error {max_rel:.5} (largest on prompt {worst})",
        prompts.len(),
        disagreements.len(),
    );
    for (name, v) in yardstick.variants() {
        println!(
            "  llama.cpp {name}: {} steps disagree, top-20 within {:.4}",
            v.disagreements
                .iter()
                .filter(|d| d.prompt < prompts.len())
                .count(),
            v.top20_max_abs,
        );
    }
    for d in &disagreements {
        println!(
            "  prompt {} step {}: ours {}, llama.cpp {}, llama.cpp's gap {}",
            d.prompt,
            d.step,
            d.ours,
            d.theirs,
            d.gap
                .map_or("> NEAR_TIE".to_string(), |g| format!("{g:.3}"))
        );
    }
    let beyond: Vec<_> = disagreements
        .iter()
        .filter(|d| d.gap.is_none_or(|g| g > TIE_MARGIN))
        // Where llama.cpp's own variants choose differently, its fixture's choice is not one
        // the model makes firmly (Gemma 3's prompt 19, step 16: the build without repacked
        // weights ends the text there).
        .filter(|d| !yardstick.parts_at(d.prompt, d.step))
        .map(|d| format!("prompt {} step {}", d.prompt, d.step))
        .collect();
    assert!(
        beyond.is_empty(),
        "greedy tokens differ from llama.cpp by more than a near-tie ({TIE_MARGIN}), where every llama.cpp variant agrees with it, at {}",
        beyond.join(", ")
    );
    let allowed = if on_wgpu {
        WGPU_STEP_FACTOR * theirs_disagreeing
    } else {
        theirs_disagreeing
    };
    assert!(
        disagreements.len() <= allowed,
        "{} teacher-forced steps disagree with llama.cpp; llama.cpp's variant {furthest} disagrees on {theirs_disagreeing} (allowed {allowed})",
        disagreements.len(),
    );
    let tolerance = if on_wgpu {
        WGPU_LOGIT_TOLERANCE
    } else {
        widest_top20
    };
    assert!(
        max_abs <= tolerance,
        "top-20 logits differ by up to {max_abs} (tolerance {tolerance})"
    );
}

/// Checks that model `file`'s perplexity of `perplexity.txt` on `device` is within
/// `PERPLEXITY_TOLERANCE` of llama.cpp's: the fixture's chunks, each from an empty cache, the
/// second half of each scored, as llama.cpp's `perplexity` does.
fn check_perplexity(file: &str, device: DeviceKind) {
    let Some(bytes) = model_bytes(file) else {
        return;
    };
    let Some((reference, features)) = perplexity_reference(file) else {
        return;
    };
    let gguf = Gguf::parse(&bytes).expect("model parses");
    let device = if device == DeviceKind::Wgpu {
        let Some(device) = wgpu_device() else { return };
        device
    } else {
        device.device().expect("cpu device")
    };
    let ctx = reference.chunks[0].len();
    let model =
        Transformer::load(&gguf, &device, LoadOptions { context: ctx }).expect("model loads");
    let mut cache = model.new_cache();
    let (mut nll, mut count) = (0.0f64, 0usize);
    for chunk in &reference.chunks {
        cache.reset();
        for lp in model
            .chunk_log_probs(chunk, &mut cache)
            .expect("perplexity forward")
        {
            nll -= lp;
            count += 1;
        }
    }
    let ppl = (nll / count as f64).exp();
    let rel = (ppl - reference.ppl).abs() / reference.ppl;
    println!(
        "{file}: perplexity {ppl:.4} vs llama.cpp {:.4} ({:+.2}%, {count} tokens scored in {} chunks of {ctx})",
        reference.ppl,
        100.0 * (ppl / reference.ppl - 1.0),
        reference.chunks.len()
    );
    for (name, theirs) in &reference.variants {
        println!(
            "  llama.cpp {name}, {features}: {theirs:.4} ({:+.2}%)",
            100.0 * (theirs / reference.ppl - 1.0)
        );
    }
    assert!(
        rel <= PERPLEXITY_TOLERANCE,
        "perplexity {ppl:.4} vs llama.cpp {:.4}: {:.2}% apart (tolerance {:.0}%)",
        reference.ppl,
        100.0 * rel,
        100.0 * PERPLEXITY_TOLERANCE
    );
}

// The CPU walks all 20 prompts as generation runs, in CI. Measured 2026-12-04 (teacher-forced
// steps where we choose another token than the fixture, of 640; in brackets the most of any
// llama.cpp variant): SmolLM2 20 (23), Qwen2.5 6 (7), Gemma 3 20 (30); every gap at most
// 0.384 but Gemma 3's prompt 19 step 20, where llama.cpp's flash attention without repacked
// weights on AVX-512 chooses our token too. Top-20 logits within 0.419, 0.314 and 0.754 (the
// widest variant: 0.669, 0.360, 1.170). Free-running, 7, 14 and 7 of 20 prompts identical for
// 32 tokens (llama.cpp's variants: 4–20, 13–17, 6–11).
#[test]
fn smollm2_cpu() {
    check_fidelity(
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        DeviceKind::Cpu,
        Walk::Decode,
        20,
    );
}

#[test]
fn qwen2_cpu() {
    check_fidelity(
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        DeviceKind::Cpu,
        Walk::Decode,
        20,
    );
}

#[test]
fn gemma3_cpu() {
    check_fidelity(
        "gemma-3-270m-q4_k_m.gguf",
        DeviceKind::Cpu,
        Walk::Decode,
        20,
    );
}

// Measured 2026-12-06 against llama.cpp's 21.9188, 36.6102 and 22.9250 (its variants: 0 to
// +0.62%, 0 to +0.35%, −0.58% to 0): the CPU (in CI) +0.15%, +0.56%, −0.67%; wgpu (lavapipe,
// by hand: 12, 29 and 36 minutes) +0.05%, −0.05%, −0.76%.
#[test]
fn smollm2_cpu_perplexity() {
    check_perplexity("SmolLM2-135M-Instruct.Q4_1.gguf", DeviceKind::Cpu);
}

#[test]
fn qwen2_cpu_perplexity() {
    check_perplexity("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", DeviceKind::Cpu);
}

#[test]
fn gemma3_cpu_perplexity() {
    check_perplexity("gemma-3-270m-q4_k_m.gguf", DeviceKind::Cpu);
}

#[test]
#[ignore = "12 minutes on lavapipe"]
fn smollm2_wgpu_perplexity() {
    check_perplexity("SmolLM2-135M-Instruct.Q4_1.gguf", DeviceKind::Wgpu);
}

#[test]
#[ignore = "29 minutes on lavapipe"]
fn qwen2_wgpu_perplexity() {
    check_perplexity("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", DeviceKind::Wgpu);
}

#[test]
#[ignore = "36 minutes on lavapipe"]
fn gemma3_wgpu_perplexity() {
    check_perplexity("gemma-3-270m-q4_k_m.gguf", DeviceKind::Wgpu);
}

// On lavapipe a 135M model prefills about 3 tokens a second, so CI walks the first
// `WGPU_CI_PROMPTS` prompts in one batched pass each; the `*_wgpu_all` tests walk all 20
// (run with `cargo test -p stampo-model --test fidelity wgpu_all -- --ignored --nocapture`).
const WGPU_CI_PROMPTS: usize = 2;

#[test]
fn smollm2_wgpu() {
    check_fidelity(
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        DeviceKind::Wgpu,
        Walk::Batched,
        WGPU_CI_PROMPTS,
    );
}

#[test]
fn qwen2_wgpu() {
    check_fidelity(
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        DeviceKind::Wgpu,
        Walk::Batched,
        WGPU_CI_PROMPTS,
    );
}

#[test]
fn gemma3_wgpu() {
    check_fidelity(
        "gemma-3-270m-q4_k_m.gguf",
        DeviceKind::Wgpu,
        Walk::Batched,
        WGPU_CI_PROMPTS,
    );
}

/// The wgpu device's decoding path (one token a step, each step's outputs read from the
/// middle of the stacked Q/K/V product) on the same prompts: the batched walks above go
/// through the prefill kernels only.
#[test]
fn smollm2_wgpu_decode() {
    check_fidelity(
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        DeviceKind::Wgpu,
        Walk::Decode,
        WGPU_CI_PROMPTS,
    );
}

#[test]
#[ignore = "12 to 26 minutes a model on lavapipe; CI runs the first prompts (smollm2_wgpu …)"]
fn smollm2_wgpu_all() {
    check_fidelity(
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        DeviceKind::Wgpu,
        Walk::Batched,
        20,
    );
}

#[test]
#[ignore = "12 to 26 minutes a model on lavapipe; CI runs the first prompts (qwen2_wgpu …)"]
fn qwen2_wgpu_all() {
    check_fidelity(
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        DeviceKind::Wgpu,
        Walk::Batched,
        20,
    );
}

/// Passes, measured 2026-12-06 (lavapipe, 9 minutes on an idle machine): 21 of 640 steps
/// disagree, all near-ties or where llama.cpp's variants part; top-20 within 1.33; 8 of 20
/// prompts identical for 32 tokens. (It used to check the perplexity of the
/// fixtures' 134-token text too, and failed there: 1.08% from llama.cpp's, the CPU 0.65%, where
/// llama.cpp's own variants spread up to 0.53% for Gemma 3 and 1.23% for Qwen2.5; on
/// `perplexity.txt`, `gemma3_wgpu_perplexity`, it is within 0.76%.)
#[test]
#[ignore = "12 to 26 minutes a model on lavapipe; CI runs the first prompts (gemma3_wgpu …)"]
fn gemma3_wgpu_all() {
    check_fidelity(
        "gemma-3-270m-q4_k_m.gguf",
        DeviceKind::Wgpu,
        Walk::Batched,
        20,
    );
}

/// The token greedy decoding picks after `ids` on the CPU, or `None` when the model is absent.
fn next_token(file: &str, ids: &[u32]) -> Option<u32> {
    let bytes = model_bytes(file)?;
    let gguf = Gguf::parse(&bytes).expect("model parses");
    let device = DeviceKind::Cpu.device().expect("cpu device");
    let model =
        Transformer::load(&gguf, &device, LoadOptions { context: 64 }).expect("model loads");
    let mut cache = model.new_cache();
    let logits = to_vec(model.forward(ids, &mut cache, false).expect("prefill")).expect("readback");
    Some(argmax(&logits))
}

/// Independent of the fixtures: SmolLM2 completes "The capital of France is" with " Paris".
/// The ids are the file's own vocabulary entries (`tokenizer.ggml.tokens`): 504 "The",
/// 3575 "Ġcapital", 282 "Ġof", 4649 "ĠFrance", 314 "Ġis"; 7042 is "ĠParis".
#[test]
fn smollm2_knows_the_capital_of_france() {
    let Some(next) = next_token(
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        &[504, 3575, 282, 4649, 314],
    ) else {
        return;
    };
    assert_eq!(next, 7042);
}

/// Independent of the fixtures: Qwen2.5-Coder (qwen2: Q/K/V biases, NeoX RoPE, Q5_0/Q4_K/Q6_K/Q8_0
/// weights) completes "The capital of France is" with " Paris". Ids from the file's vocabulary:
/// 785 "The", 6722 "Ġcapital", 315 "Ġof", 9625 "ĠFrance", 374 "Ġis"; 12095 is "ĠParis".
#[test]
fn qwen2_knows_the_capital_of_france() {
    let Some(next) = next_token(
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        &[785, 6722, 315, 9625, 374],
    ) else {
        return;
    };
    assert_eq!(next, 12095);
}
