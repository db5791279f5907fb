//! Clocks, llama.cpp-style `timings`, and the grammar mask's statistics.
//!
//! `std::time::Instant` panics on `wasm32-unknown-unknown`, so time comes from a [`Clock`]
//! the caller supplies: [`StdClock`] natively, `performance.now()` in the browser.

use serde::Serialize;

/// Milliseconds from an arbitrary origin. `Sync` because the grammar thread reads it too.
pub trait Clock: Sync {
    fn now_ms(&self) -> f64;
}

/// The native clock.
#[cfg(not(target_arch = "wasm32"))]
pub struct StdClock(std::time::Instant);

#[cfg(not(target_arch = "wasm32"))]
impl Default for StdClock {
    fn default() -> Self {
        Self(std::time::Instant::now())
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl Clock for StdClock {
    fn now_ms(&self) -> f64 {
        self.0.elapsed().as_secs_f64() * 1e3
    }
}

/// The `timings` object of llama.cpp's server responses (`result_timings::to_json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Timings {
    pub cache_n: usize,
    pub prompt_n: usize,
    pub prompt_ms: f64,
    pub prompt_per_token_ms: f64,
    pub prompt_per_second: f64,
    pub predicted_n: usize,
    pub predicted_ms: f64,
    pub predicted_per_token_ms: f64,
    pub predicted_per_second: f64,
}

impl Timings {
    pub fn new(prompt_n: usize, prompt_ms: f64, predicted_n: usize, predicted_ms: f64) -> Self {
        let per = |ms: f64, n: usize| if n == 0 { 0.0 } else { ms / n as f64 };
        let rate = |ms: f64, n: usize| if ms <= 0.0 { 0.0 } else { 1e3 * n as f64 / ms };
        Self {
            cache_n: 0,
            prompt_n,
            prompt_ms,
            prompt_per_token_ms: per(prompt_ms, prompt_n),
            prompt_per_second: rate(prompt_ms, prompt_n),
            predicted_n,
            predicted_ms,
            predicted_per_token_ms: per(predicted_ms, predicted_n),
            predicted_per_second: rate(predicted_ms, predicted_n),
        }
    }
}

/// What computing the grammar masks cost during one generation.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MaskStats {
    /// Grammar steps timed: commit the last token and compute the next mask (one per
    /// sampled token under a constraint, plus the first mask).
    pub steps: usize,
    pub mean_us: f64,
    /// 99th percentile (nearest rank).
    pub p99_us: f64,
    pub max_us: f64,
    pub total_ms: f64,
    /// Mask time over the whole decode time (masks + forward passes + sampling).
    pub share_of_decode: f64,
    /// The matcher's mask cache hit rate, when it reports one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_hit_rate: Option<f64>,
}

impl MaskStats {
    pub fn from_samples(samples_us: &[f64], decode_ms: f64, cache_hit_rate: Option<f64>) -> Self {
        if samples_us.is_empty() {
            return Self {
                cache_hit_rate,
                ..Self::default()
            };
        }
        let mut sorted = samples_us.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let total_us: f64 = sorted.iter().sum();
        // Nearest rank: the smallest value with at least 99% of samples at or below it.
        let rank = ((0.99 * n as f64).ceil() as usize).clamp(1, n);
        Self {
            steps: n,
            mean_us: total_us / n as f64,
            p99_us: sorted[rank - 1],
            max_us: sorted[n - 1],
            total_ms: total_us / 1e3,
            share_of_decode: if decode_ms > 0.0 {
                total_us / 1e3 / decode_ms
            } else {
                0.0
            },
            cache_hit_rate,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p99_is_the_nearest_rank() {
        let samples: Vec<f64> = (1..=200).map(f64::from).collect();
        let s = MaskStats::from_samples(&samples, 100.0, None);
        assert_eq!(s.steps, 200);
        assert_eq!(s.p99_us, 198.0);
        assert_eq!(s.mean_us, 100.5);
        assert!((s.share_of_decode - 0.201).abs() < 1e-12);
    }

    #[test]
    fn timings_rates() {
        let t = Timings::new(10, 20.0, 5, 50.0);
        assert_eq!((t.prompt_per_token_ms, t.prompt_per_second), (2.0, 500.0));
        assert_eq!(
            (t.predicted_per_token_ms, t.predicted_per_second),
            (10.0, 100.0)
        );
    }
}
