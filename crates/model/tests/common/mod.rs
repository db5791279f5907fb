//! Helpers shared by the model tests: finding models and fixtures, the device list.

// Test helpers fail the test by panicking, as assertions do.
#![allow(dead_code, clippy::panic)]

use std::path::PathBuf;

use serde::Deserialize;

pub mod miniature;
pub mod wgpu;
#[allow(unused_imports)]
pub use wgpu::wgpu_device;

#[allow(unused_imports)]
pub use stampo_test_data::{DEFAULT_MODELS, model_bytes, models_dir, required};

/// One prompt of a llama.cpp fixture.
#[derive(Debug, Deserialize)]
pub struct FixturePrompt {
    pub text: String,
    pub ids: Vec<u32>,
    pub greedy: Vec<u32>,
    /// `[token id, logit]` of the 20 largest logits at the first generated position.
    pub top: Vec<(u32, f32)>,
    /// At each greedy step, `[token id, logit]` of every token within `generate.py`'s
    /// `NEAR_TIE` of the chosen one, largest first (empty in fixtures made before it).
    #[serde(default)]
    pub near: Vec<Vec<(u32, f32)>>,
}

/// A fixture written by `tests/fixtures/model/generate.py`.
#[derive(Debug, Deserialize)]
pub struct Fixture {
    pub model: String,
    pub prompts: Vec<FixturePrompt>,
}

/// The fixture of model file `file` (`<stem>.json` beside `generate.py`), or `None` (after
/// printing `SKIPPED`) when it has not been generated and `STAMPO_REQUIRE_FIXTURES` is not `1`.
pub fn fixture(file: &str) -> Option<Fixture> {
    let stem = file.trim_end_matches(".gguf");
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/model")
        .join(format!("{stem}.json"));
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(
            serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("fixture {}: {e}", path.display())),
        ),
        Err(e) => {
            if required() {
                panic!(
                    "fixture {} missing ({e}) and STAMPO_REQUIRE_FIXTURES=1",
                    path.display()
                );
            }
            println!(
                "SKIPPED: fixture {} not found (run tests/fixtures/model/generate.py)",
                path.display()
            );
            None
        }
    }
}

/// llama.cpp's perplexity of `perplexity.txt` for one model (`perplexity.py`): the text in
/// chunks of `ctx` tokens as llama.cpp's `perplexity` cuts them, and its perplexity under each
/// of its variants on the machine that made the fixture.
#[derive(Debug, Deserialize)]
pub struct PerplexityReference {
    pub chunks: Vec<Vec<u32>>,
    /// The default variant's: the reference.
    pub ppl: f64,
    pub variants: std::collections::BTreeMap<String, f64>,
}

#[derive(Debug, Deserialize)]
struct PerplexityFixture {
    ctx: usize,
    cpu_features: Vec<String>,
    models: std::collections::BTreeMap<String, PerplexityReference>,
}

/// The perplexity reference of model `file` and the CPU features it was made with, with the
/// same skip-or-fail rule as `fixture`.
pub fn perplexity_reference(file: &str) -> Option<(PerplexityReference, String)> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/model/perplexity.json");
    let fixture: Option<PerplexityFixture> = std::fs::read_to_string(&path).ok().map(|text| {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    });
    let found = fixture.and_then(|mut f| {
        let features = f.cpu_features.join(" ");
        let reference = f.models.remove(file)?;
        assert!(
            reference.chunks.iter().all(|c| c.len() == f.ctx),
            "{}: {file}'s chunks are not all {} tokens",
            path.display(),
            f.ctx
        );
        Some((reference, features))
    });
    if found.is_none() {
        if required() {
            panic!(
                "no perplexity reference for {file} in {} and STAMPO_REQUIRE_FIXTURES=1",
                path.display()
            );
        }
        println!(
            "SKIPPED: no perplexity reference for {file} in {} (run tests/fixtures/model/perplexity.py)",
            path.display()
        );
    }
    found
}

/// Index of the largest value (the first of equals, as numpy's `argmax`).
pub fn argmax(v: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best as u32
}

/// How far llama.cpp agrees with itself on one model (`self_agreement.py`): the fixture's
/// greedy walk teacher-forced through other settings of llama.cpp on the same GGUF (without
/// repacked weights, with flash attention, the defaults on another CPU), each compared with
/// the fixture.
#[derive(Debug, Deserialize)]
pub struct SelfAgreement {
    /// One run of the variants per CPU instruction set it was made on.
    pub runs: Vec<SelfAgreementRun>,
}

/// The variants as run on one CPU.
#[derive(Debug, Deserialize)]
pub struct SelfAgreementRun {
    pub cpu: String,
    /// The x86 vector extensions that chose llama.cpp's kernels.
    pub cpu_features: Vec<String>,
    pub variants: std::collections::BTreeMap<String, Variant>,
}

/// One setting of llama.cpp against the fixture.
#[derive(Debug, Deserialize)]
pub struct Variant {
    /// Largest |variant − fixture| on the first position's 20 largest logits.
    pub top20_max_abs: f32,
    pub disagreements: Vec<SelfDisagreement>,
}

/// A step where the variant chooses another token than the fixture.
#[derive(Debug, Deserialize)]
pub struct SelfDisagreement {
    pub prompt: usize,
    pub step: usize,
}

impl SelfAgreement {
    /// Every variant with a name saying what it is and where it ran ("flash_attn, avx2").
    pub fn variants(&self) -> impl Iterator<Item = (String, &Variant)> {
        self.runs.iter().flat_map(|run| {
            let features = run.cpu_features.join(" ");
            run.variants
                .iter()
                .map(move |(name, v)| (format!("{name}, {features}"), v))
        })
    }

    /// Whether some variant of llama.cpp chooses another token than the fixture at this step:
    /// there the fixture's choice is not one llama.cpp makes whatever its settings.
    pub fn parts_at(&self, prompt: usize, step: usize) -> bool {
        self.variants().any(|(_, v)| {
            v.disagreements
                .iter()
                .any(|d| (d.prompt, d.step) == (prompt, step))
        })
    }

    /// The most steps of the first `prompts` prompts on which one variant disagrees with the
    /// fixture, with that variant's name.
    pub fn most_disagreeing(&self, prompts: usize) -> (usize, String) {
        self.variants()
            .map(|(name, v)| {
                let n = v
                    .disagreements
                    .iter()
                    .filter(|d| d.prompt < prompts)
                    .count();
                (n, name)
            })
            .max()
            .unwrap_or((0, "none".into()))
    }

    /// The largest top-20 logit difference of a variant from the fixture, with its name.
    pub fn widest_top20(&self) -> (f32, String) {
        self.variants()
            .map(|(name, v)| (v.top20_max_abs, name))
            .fold((0.0, "none".into()), |a, b| if b.0 > a.0 { b } else { a })
    }
}

/// The self-agreement record of model `file`, with the same skip-or-fail rule as `fixture`.
pub fn self_agreement(file: &str) -> Option<SelfAgreement> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/model/llama-self-agreement.json");
    let records: Option<std::collections::BTreeMap<String, SelfAgreement>> =
        std::fs::read_to_string(&path).ok().map(|text| {
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        });
    match records.and_then(|mut r| r.remove(file)) {
        Some(record) => Some(record),
        None => {
            assert!(
                !required(),
                "no record of {file} in {} and STAMPO_REQUIRE_FIXTURES=1",
                path.display()
            );
            println!(
                "SKIPPED: {file} has no record in {} (run tests/fixtures/model/self_agreement.py)",
                path.display()
            );
            None
        }
    }
}
