//! The sampler chain: the grammar mask first, then llama.cpp's stages in the request's order
//! (by default penalties, top-k, typical, top-p, min-p, temperature), then a seeded draw.
//!
//! The mask is a bitmask over the vocabulary (`mask[i / 32] >> (i % 32) & 1` says token i is
//! allowed). Disallowed tokens are left out of the candidate list before the chain runs;
//! llama.cpp sets their logits to -inf instead, which gives them probability 0 in every stage,
//! so the two agree on every draw (they differ only inside `typical_p`, where llama.cpp's
//! -inf logits make the entropy NaN). llama.cpp's server samples unconstrained first and
//! re-samples with the grammar only when the first token is rejected; at temperature 0 both
//! give the best allowed token, at higher temperatures that two-draw scheme consumes the
//! random stream differently, so seeded draws match llama.cpp's only when no rejection occurs.

mod params;
pub mod rng;
pub mod stages;

use std::collections::{HashMap, VecDeque};

pub(crate) use params::StageName;
pub use params::{SamplingParams, Stage};
use rng::Mt19937;
use stages::{Candidate, Candidates};

/// Whether token `id` is allowed by `mask`.
#[inline]
pub fn mask_allows(mask: &[u32], id: usize) -> bool {
    mask.get(id / 32).is_some_and(|w| (w >> (id % 32)) & 1 == 1)
}

/// A drawn token with its probability after the chain (what the draw saw).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampled {
    pub token: u32,
    pub p: f32,
}

/// The chain with its state: the random generator and the penalty window.
#[derive(Clone)]
pub struct Sampler {
    params: SamplingParams,
    rng: Mt19937,
    window: VecDeque<u32>,
    window_len: usize,
    counts: HashMap<u32, u32>,
    candidates: Candidates,
}

impl Sampler {
    /// `seed` is used when the params carry none (the caller's fresh seed); `n_ctx` is the
    /// penalty window when `repeat_last_n` is -1.
    pub fn new(params: SamplingParams, fallback_seed: u32, n_ctx: usize) -> Self {
        let seed = params.seed.unwrap_or(fallback_seed);
        let window_len = match params.repeat_last_n {
            -1 => n_ctx,
            n => usize::try_from(n).unwrap_or(0),
        };
        Self {
            params,
            rng: Mt19937::new(seed),
            window: VecDeque::with_capacity(window_len.min(4096)),
            window_len,
            counts: HashMap::new(),
            candidates: Candidates::default(),
        }
    }

    pub fn params(&self) -> &SamplingParams {
        &self.params
    }

    /// Records a token in the penalty window: every prompt token and every generated one,
    /// as llama.cpp's server does (`common_sampler_accept`).
    pub fn accept(&mut self, token: u32) {
        if self.window_len == 0 {
            return;
        }
        if self.window.len() >= self.window_len
            && let Some(old) = self.window.pop_front()
            && let Some(n) = self.counts.get_mut(&old)
        {
            *n -= 1;
            if *n == 0 {
                self.counts.remove(&old);
            }
        }
        self.window.push_back(token);
        *self.counts.entry(token).or_insert(0) += 1;
    }

    /// How many of the most likely allowed tokens the chain reads, when fewer than all:
    /// `Some(1)` when it always draws the most likely (a temperature at or below 0, or a
    /// `top_k` of 1, after stages that keep that token: `top_k`, `top_p`, `min_p`, a
    /// temperature above 0), `Some(k)` when it starts by keeping the `k` most likely (`top_k`
    /// first among the stages that change anything, or after a temperature above 0, which
    /// keeps the order). [`Sampler::sample_top`] over those then draws what
    /// [`Sampler::sample`] over every logit would, and a device can choose them and hand back
    /// `k` logits rather than the vocabulary's. `None` when the chain reads every logit:
    /// active penalties (they reorder), `typical_p` (it may drop the most likely token, and
    /// its entropy is the whole distribution's), `top_p` or `min_p` before `top_k` (they read
    /// the whole distribution) in a chain that is not greedy.
    pub fn reads_at_most(&self) -> Option<usize> {
        let p = &self.params;
        let penalties = self.window_len > 0
            && (p.repeat_penalty != 1.0 || p.frequency_penalty != 0.0 || p.presence_penalty != 0.0);
        // Greedy, even where a top-k comes first: every stage before keeps the most likely.
        for stage in &p.stages {
            match stage {
                Stage::Penalties if penalties => break,
                Stage::TypicalP if p.typical_p < 1.0 => break,
                Stage::TopK if p.top_k == 1 => return Some(1),
                Stage::Temperature if p.temperature <= 0.0 => return Some(1),
                _ => {}
            }
        }
        // Whether a stage so far reads more than the most likely tokens' logits.
        let mut whole = false;
        for stage in &p.stages {
            match stage {
                Stage::Penalties if penalties => return None,
                Stage::TypicalP if p.typical_p < 1.0 => return None,
                Stage::TopK if p.top_k > 0 && !whole => return usize::try_from(p.top_k).ok(),
                Stage::TopP if p.top_p < 1.0 => whole = true,
                Stage::MinP if p.min_p > 0.0 => whole = true,
                _ => {}
            }
        }
        None
    }

    /// Runs the chain on `top`: the most likely allowed tokens with their logits, largest
    /// first (the lower id first among equals), as many as [`Sampler::reads_at_most`] says
    /// or all there are. `None` when `top` is empty.
    pub fn sample_top(&mut self, top: &[(u32, f32)]) -> Option<Sampled> {
        let c = &mut self.candidates;
        c.data.clear();
        c.data.extend(
            top.iter()
                .map(|&(id, logit)| Candidate { id, logit, p: 0.0 }),
        );
        c.sorted = true;
        self.run_chain()
    }

    /// Runs the chain on `logits` restricted to `mask` (all tokens when `None`). `None` when
    /// no token is allowed.
    pub fn sample(&mut self, logits: &[f32], mask: Option<&[u32]>) -> Option<Sampled> {
        let c = &mut self.candidates;
        c.data.clear();
        c.sorted = false;
        match mask {
            None => c
                .data
                .extend(logits.iter().enumerate().map(|(i, &logit)| Candidate {
                    id: i as u32,
                    logit,
                    p: 0.0,
                })),
            Some(mask) => {
                for i in crate::generate::mask_bits(mask) {
                    if let Some(&logit) = logits.get(i) {
                        c.data.push(Candidate {
                            id: i as u32,
                            logit,
                            p: 0.0,
                        });
                    }
                }
            }
        }
        self.run_chain()
    }

    /// The stages in the request's order over the candidates, then the draw.
    fn run_chain(&mut self) -> Option<Sampled> {
        let c = &mut self.candidates;
        let p = &self.params;
        let min_keep = p.min_keep as usize;
        for stage in &p.stages {
            match stage {
                Stage::Penalties => stages::penalties(
                    c,
                    &self.counts,
                    p.repeat_penalty,
                    p.frequency_penalty,
                    p.presence_penalty,
                ),
                Stage::TopK => stages::top_k(c, p.top_k),
                Stage::TypicalP => stages::typical(c, p.typical_p, min_keep),
                Stage::TopP => stages::top_p(c, p.top_p, min_keep),
                Stage::MinP => stages::min_p(c, p.min_p, min_keep),
                Stage::Temperature => stages::temperature(c, p.temperature),
            }
        }
        let i = stages::dist(c, &mut self.rng)?;
        let chosen = c.data[i];
        Some(Sampled {
            token: chosen.id,
            p: chosen.p,
        })
    }
}

/// One alternative in an `n_probs` report.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenProb {
    pub token: u32,
    pub p: f32,
}

/// The `n` most likely tokens under the softmax of the raw logits, before any sampler or the
/// grammar (llama.cpp's server reports these unless `post_sampling_probs` is set), and the
/// probability of `chosen` in that same distribution.
pub fn top_probs(logits: &[f32], n: usize, chosen: u32) -> (Vec<TokenProb>, f32) {
    if logits.is_empty() {
        return (Vec::new(), 0.0);
    }
    let max_l = logits.iter().fold(f32::MIN, |m, &x| m.max(x));
    let mut sum = 0.0f32;
    for &l in logits {
        sum += libm::expf(l - max_l);
    }
    let prob = |l: f32| libm::expf(l - max_l) / sum;
    let mut order: Vec<u32> = (0..logits.len() as u32).collect();
    let n = n.min(order.len());
    let by_logit = |a: &u32, b: &u32| {
        logits[*b as usize]
            .partial_cmp(&logits[*a as usize])
            .unwrap_or(std::cmp::Ordering::Equal)
    };
    if n > 0 && n < order.len() {
        order.select_nth_unstable_by(n - 1, by_logit);
    }
    order.truncate(n);
    order.sort_by(by_logit);
    let top = order
        .into_iter()
        .map(|t| TokenProb {
            token: t,
            p: prob(logits[t as usize]),
        })
        .collect();
    let chosen_p = logits.get(chosen as usize).map_or(0.0, |&l| prob(l));
    (top, chosen_p)
}
