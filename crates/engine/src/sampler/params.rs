//! The sampling fields of a request, with llama.cpp's defaults (`common/common.h`,
//! `common_params_sampling`) and its sampler names (`common/sampling.cpp`).

use serde::Serialize;

/// One stage of the chain. llama.cpp has more (dry, top_n_sigma, xtc, infill, adaptive_p);
/// those are disabled by default there, and a request that names them gets a warning here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Repeat, frequency and presence penalties over the last `repeat_last_n` tokens.
    Penalties,
    /// Keep the `top_k` most likely tokens.
    TopK,
    /// Locally typical sampling (`typical_p`).
    #[serde(rename = "typ_p")]
    TypicalP,
    /// Nucleus sampling (`top_p`).
    TopP,
    /// Drop tokens below `min_p` times the most likely one's probability.
    MinP,
    /// Divide logits by the temperature; at or below 0 keep only the most likely token.
    Temperature,
}

/// What a sampler name in a request resolves to.
pub(crate) enum StageName {
    Known(Stage),
    /// A stage llama.cpp has and stampo does not implement.
    Unsupported,
    Unknown,
}

impl Stage {
    /// llama.cpp's default order: penalties, dry, top_n_sigma, top_k, typ_p, top_p, min_p,
    /// xtc, temperature — without the stages stampo does not implement (all off by default).
    pub const DEFAULT_ORDER: [Stage; 6] = [
        Stage::Penalties,
        Stage::TopK,
        Stage::TypicalP,
        Stage::TopP,
        Stage::MinP,
        Stage::Temperature,
    ];

    /// The canonical names the server accepts (`common_sampler_types_from_names` with
    /// `allow_alt_names = false`).
    pub(crate) fn from_name(name: &str) -> StageName {
        match name {
            "penalties" => StageName::Known(Stage::Penalties),
            "top_k" => StageName::Known(Stage::TopK),
            "typ_p" => StageName::Known(Stage::TypicalP),
            "top_p" => StageName::Known(Stage::TopP),
            "min_p" => StageName::Known(Stage::MinP),
            "temperature" => StageName::Known(Stage::Temperature),
            "dry" | "top_n_sigma" | "xtc" | "infill" | "adaptive_p" => StageName::Unsupported,
            _ => StageName::Unknown,
        }
    }

    /// The one-letter names of `common_sampler_types_from_chars` (`"ekypmt"` and friends).
    pub(crate) fn from_char(c: char) -> StageName {
        match c {
            'e' => StageName::Known(Stage::Penalties),
            'k' => StageName::Known(Stage::TopK),
            'y' => StageName::Known(Stage::TypicalP),
            'p' => StageName::Known(Stage::TopP),
            'm' => StageName::Known(Stage::MinP),
            't' => StageName::Known(Stage::Temperature),
            'd' | 's' | 'x' | 'i' | 'a' => StageName::Unsupported,
            _ => StageName::Unknown,
        }
    }
}

/// The sampler chain's settings. `Default` is llama.cpp's server default.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SamplingParams {
    /// `temperature`, default 0.8; at or below 0 the chain is greedy.
    pub temperature: f32,
    /// `top_k`, default 40; 0 or less keeps the whole vocabulary.
    pub top_k: i32,
    /// `top_p`, default 0.95; 1.0 disables it.
    pub top_p: f32,
    /// `min_p`, default 0.05; 0.0 disables it.
    pub min_p: f32,
    /// `typical_p`, default 1.0 (disabled).
    pub typical_p: f32,
    /// `min_keep`, default 0: the fewest tokens top-p, min-p and typical may leave.
    pub min_keep: u32,
    /// `repeat_penalty`, default 1.0 (disabled).
    pub repeat_penalty: f32,
    /// `repeat_last_n`, default 64; 0 disables penalties, -1 means the whole context.
    pub repeat_last_n: i32,
    /// `presence_penalty`, default 0.0.
    pub presence_penalty: f32,
    /// `frequency_penalty`, default 0.0.
    pub frequency_penalty: f32,
    /// `seed`; `None` (llama.cpp's -1) asks the caller for a fresh seed.
    pub seed: Option<u32>,
    /// `samplers`: the order of the stages.
    pub stages: Vec<Stage>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            typical_p: 1.0,
            min_keep: 0,
            repeat_penalty: 1.0,
            repeat_last_n: 64,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            seed: None,
            stages: Stage::DEFAULT_ORDER.to_vec(),
        }
    }
}
