//! The stages of the chain, each following its definition in llama.cpp's
//! `src/llama-sampling.cpp` step by step — including which stages sort the candidates and
//! which keep their order, because the final draw walks the candidates in order and so the
//! order decides which token a given random number lands on.
//!
//! Arithmetic is `f32` where llama.cpp's is `float` and `f64` where it is `double`; `exp` and
//! `ln` come from the `libm` crate so that wasm and native builds agree to the bit.

use std::cmp::Ordering;
use std::collections::HashMap;

use super::rng::Mt19937;

/// One token under consideration (`llama_token_data`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub id: u32,
    pub logit: f32,
    pub p: f32,
}

/// The candidate list (`llama_token_data_array`) with its `sorted` flag.
#[derive(Debug, Clone, Default)]
pub struct Candidates {
    pub data: Vec<Candidate>,
    /// Sorted by logit, descending.
    pub sorted: bool,
}

fn by_logit_desc(a: &Candidate, b: &Candidate) -> Ordering {
    b.logit.partial_cmp(&a.logit).unwrap_or(Ordering::Equal)
}

impl Candidates {
    fn sort_desc(&mut self) {
        // Stable: equal logits keep vocabulary order. llama.cpp's partial sort is not stable,
        // so on exactly equal logits the two may order differently (documented divergence).
        self.data.sort_by(by_logit_desc);
        self.sorted = true;
    }

    /// Puts the `k` best candidates first, sorted, as llama.cpp's partial sort does (a
    /// selection, then a sort of the k: a whole-vocabulary sort costs milliseconds).
    fn partial_sort_desc(&mut self, k: usize) {
        if k == 0 {
            return;
        }
        if k < self.data.len() {
            self.data.select_nth_unstable_by(k - 1, by_logit_desc);
            self.data.truncate(k);
        }
        self.data.sort_by(by_logit_desc);
        self.sorted = true;
    }

    /// `llama_sampler_softmax_impl`.
    pub fn softmax(&mut self, do_sort: bool) {
        if self.data.is_empty() {
            return;
        }
        if do_sort && !self.sorted {
            self.sort_desc();
        }
        let max_l = if self.sorted {
            self.data[0].logit
        } else {
            self.data
                .iter()
                .fold(self.data[0].logit, |m, c| m.max(c.logit))
        };
        let mut cum_sum = 0.0f32;
        for c in &mut self.data {
            c.p = libm::expf(c.logit - max_l);
            cum_sum += c.p;
        }
        for c in &mut self.data {
            c.p /= cum_sum;
        }
    }
}

/// `llama_sampler_penalties_apply`: repeat penalty multiplies non-positive logits and divides
/// positive ones; frequency and presence subtract `count * freq + present`.
pub fn penalties(
    c: &mut Candidates,
    counts: &HashMap<u32, u32>,
    repeat: f32,
    freq: f32,
    present: f32,
) {
    if counts.is_empty() || (repeat == 1.0 && freq == 0.0 && present == 0.0) {
        return;
    }
    for cand in &mut c.data {
        let Some(&count) = counts.get(&cand.id) else {
            continue;
        };
        if cand.logit <= 0.0 {
            cand.logit *= repeat;
        } else {
            cand.logit /= repeat;
        }
        cand.logit -= count as f32 * freq + present;
    }
    c.sorted = false;
}

/// `llama_sampler_top_k_impl`: k ≤ 0 is a no-op; otherwise keep the k best, sorted.
pub fn top_k(c: &mut Candidates, k: i32) {
    if k <= 0 {
        return;
    }
    let k = (k as usize).min(c.data.len());
    if !c.sorted {
        c.partial_sort_desc(k);
    }
    c.data.truncate(k);
}

/// `llama_sampler_top_p_apply`: softmax, sort, keep the smallest prefix whose probability
/// reaches p (and at least `min_keep`).
pub fn top_p(c: &mut Candidates, p: f32, min_keep: usize) {
    if p >= 1.0 || c.data.is_empty() {
        return;
    }
    c.softmax(false);
    if !c.sorted {
        // llama.cpp sorts only the best 256 of a large list first and the rest only if
        // they do not reach p: the same result, without sorting the whole vocabulary.
        let n = c.data.len();
        let head = if n > 1024 { 256 } else { n };
        let mut sorted = c.data.clone();
        if head < n {
            sorted.select_nth_unstable_by(head - 1, by_logit_desc);
        }
        sorted[..head].sort_by(by_logit_desc);
        let mut cum = 0.0f32;
        let reached = sorted[..head].iter().enumerate().any(|(i, x)| {
            cum += x.p;
            cum >= p && i + 1 >= min_keep
        });
        if !reached {
            sorted.sort_by(by_logit_desc);
        }
        c.data = sorted;
        c.sorted = true;
    }
    let mut cum_sum = 0.0f32;
    let mut last_idx = c.data.len();
    for (i, cand) in c.data.iter().enumerate() {
        cum_sum += cand.p;
        if cum_sum >= p && i + 1 >= min_keep {
            last_idx = i + 1;
            break;
        }
    }
    c.data.truncate(last_idx);
}

/// `llama_sampler_min_p_apply`: keep tokens whose logit is at least `max + ln(p)` (that is,
/// probability at least p times the top one). Unsorted input is filtered in place, keeping
/// its order; sorted input (or a filter leaving fewer than `min_keep`) is cut after sorting.
pub fn min_p(c: &mut Candidates, p: f32, min_keep: usize) {
    if p <= 0.0 || c.data.is_empty() {
        return;
    }
    if !c.sorted {
        let max_logit = c.data.iter().fold(f32::MIN, |m, x| m.max(x.logit));
        let min_logit = max_logit + libm::logf(p);
        let kept: Vec<Candidate> = c
            .data
            .iter()
            .copied()
            .filter(|x| x.logit >= min_logit)
            .collect();
        if !kept.is_empty() && kept.len() >= min_keep {
            c.data = kept;
            return;
        }
        c.sort_desc();
    }
    let min_logit = c.data[0].logit + libm::logf(p);
    let mut i = 1;
    while i < c.data.len() {
        if c.data[i].logit < min_logit && i >= min_keep {
            break;
        }
        i += 1;
    }
    c.data.truncate(i);
}

/// `llama_sampler_typical_apply` (locally typical sampling): order tokens by how far their
/// surprise is from the entropy and keep the prefix whose probability exceeds p.
pub fn typical(c: &mut Candidates, p: f32, min_keep: usize) {
    if p >= 1.0 || c.data.is_empty() {
        return;
    }
    c.softmax(true);
    let entropy: f32 = c.data.iter().map(|x| -x.p * libm::logf(x.p)).sum();
    let shifted: Vec<f32> = c
        .data
        .iter()
        .map(|x| (-libm::logf(x.p) - entropy).abs())
        .collect();
    let mut indices: Vec<usize> = (0..c.data.len()).collect();
    indices.sort_by(|&a, &b| {
        shifted[a]
            .partial_cmp(&shifted[b])
            .unwrap_or(Ordering::Equal)
    });
    let mut cum_sum = 0.0f32;
    let mut last_idx = indices.len();
    for (i, &idx) in indices.iter().enumerate() {
        cum_sum += c.data[idx].p;
        if cum_sum > p && (min_keep == 0 || i + 1 >= min_keep) {
            last_idx = i + 1;
            break;
        }
    }
    c.data = indices[..last_idx].iter().map(|&i| c.data[i]).collect();
    c.sorted = false;
}

/// `llama_sampler_temp_impl`: divide by the temperature; at or below 0 keep the first
/// highest logit and set every other to -inf (greedy, without reordering).
pub fn temperature(c: &mut Candidates, temp: f32) {
    if c.data.is_empty() {
        return;
    }
    if temp <= 0.0 {
        let mut max_i = 0;
        let mut max_l = c.data[0].logit;
        for i in 1..c.data.len() {
            if c.data[i].logit > max_l {
                c.data[max_i].logit = f32::NEG_INFINITY;
                max_i = i;
                max_l = c.data[i].logit;
            } else {
                c.data[i].logit = f32::NEG_INFINITY;
            }
        }
        return;
    }
    for cand in &mut c.data {
        cand.logit /= temp;
    }
}

/// `llama_sampler_dist_apply`: softmax and one draw, walking the candidates in their order.
/// Returns the index of the chosen candidate; a single candidate is chosen without drawing.
pub fn dist(c: &mut Candidates, rng: &mut Mt19937) -> Option<usize> {
    match c.data.len() {
        0 => return None,
        1 => {
            c.data[0].p = 1.0;
            return Some(0);
        }
        _ => {}
    }
    let max_l = if c.sorted {
        c.data[0].logit
    } else {
        c.data.iter().fold(c.data[0].logit, |m, x| m.max(x.logit))
    };
    let mut sum_cum = 0.0f64;
    for cand in &mut c.data {
        cand.p = libm::expf(cand.logit - max_l);
        sum_cum += f64::from(cand.p);
    }
    let rnd = rng.next_canonical();
    let sum_tgt = sum_cum * rnd;
    let mut sum_run = 0.0f64;
    let mut selected = None;
    for (i, cand) in c.data.iter_mut().enumerate() {
        if selected.is_none() {
            sum_run += f64::from(cand.p);
            if sum_run >= sum_tgt {
                selected = Some(i);
            }
        }
        cand.p = (f64::from(cand.p) / sum_cum) as f32;
    }
    Some(selected.unwrap_or(c.data.len() - 1))
}
