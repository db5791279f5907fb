//! The sampler chain checked against the definitions in llama.cpp's `src/llama-sampling.cpp`
//! (each test says which), on small hand-made logits.

use stampo_engine::sampler::mask_allows;
use stampo_engine::sampler::rng::Mt19937;
use stampo_engine::sampler::stages::{self, Candidate, Candidates};
use stampo_engine::{Sampler, SamplingParams, Stage};

fn params(stages: &[Stage]) -> SamplingParams {
    SamplingParams {
        temperature: 1.0,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        seed: Some(7),
        stages: stages.to_vec(),
        ..SamplingParams::default()
    }
}

fn candidates(logits: &[f32]) -> Candidates {
    Candidates {
        data: logits
            .iter()
            .enumerate()
            .map(|(i, &logit)| Candidate {
                id: i as u32,
                logit,
                p: 0.0,
            })
            .collect(),
        sorted: false,
    }
}

fn ids(c: &Candidates) -> Vec<u32> {
    c.data.iter().map(|x| x.id).collect()
}

#[test]
fn temperature_zero_is_greedy_and_ties_go_to_the_lower_id() {
    // llama_sampler_temp_impl keeps the first strictly-greater maximum.
    let logits = [1.0, 3.0, 0.5, 3.0];
    for seed in 0..20 {
        let mut s = Sampler::new(
            SamplingParams {
                temperature: 0.0,
                seed: Some(seed),
                ..SamplingParams::default()
            },
            0,
            64,
        );
        assert_eq!(s.sample(&logits, None).map(|x| x.token), Some(1));
    }
}

#[test]
fn the_same_seed_draws_the_same_tokens() {
    let logits: Vec<f32> = (0..50).map(|i| (i as f32 * 0.37).sin()).collect();
    let draw = |seed| {
        let mut s = Sampler::new(
            SamplingParams {
                seed: Some(seed),
                top_k: 0,
                ..params(&Stage::DEFAULT_ORDER)
            },
            0,
            64,
        );
        (0..40)
            .map(|_| s.sample(&logits, None).map(|x| x.token))
            .collect::<Vec<_>>()
    };
    assert_eq!(draw(3), draw(3));
    assert_ne!(draw(3), draw(4));
}

#[test]
fn a_seed_of_none_uses_the_callers_seed() {
    let logits = [0.0f32; 16];
    let mut a = Sampler::new(
        SamplingParams {
            seed: None,
            ..params(&[])
        },
        99,
        64,
    );
    let mut b = Sampler::new(
        SamplingParams {
            seed: Some(99),
            ..params(&[])
        },
        0,
        64,
    );
    for _ in 0..10 {
        assert_eq!(a.sample(&logits, None), b.sample(&logits, None));
    }
}

#[test]
fn the_draw_walks_the_candidates_with_one_canonical_double() {
    // llama_sampler_dist_apply: target = sum * rnd, first i whose running sum reaches it.
    // Two equal logits: token 0 iff rnd * 2 <= 1.
    for seed in 0..30u32 {
        let mut rng = Mt19937::new(seed);
        let rnd = rng.next_canonical();
        let mut s = Sampler::new(
            SamplingParams {
                seed: Some(seed),
                ..params(&[])
            },
            0,
            64,
        );
        let got = s.sample(&[0.0, 0.0], None).map(|x| x.token);
        assert_eq!(
            got,
            Some(if 2.0 * rnd <= 1.0 { 0 } else { 1 }),
            "seed {seed}"
        );
    }
}

#[test]
fn draws_follow_the_softmax() {
    let probs = [0.1f64, 0.2, 0.3, 0.4];
    let logits: Vec<f32> = probs.iter().map(|p| p.ln() as f32).collect();
    let mut s = Sampler::new(params(&[Stage::Temperature]), 0, 64);
    let n = 40_000;
    let mut counts = [0usize; 4];
    for _ in 0..n {
        let t = s.sample(&logits, None).map(|x| x.token).unwrap_or(9);
        counts[t as usize] += 1;
    }
    for (c, p) in counts.iter().zip(probs) {
        // Four standard deviations of a binomial proportion at n = 40000 is under 0.01.
        assert!((*c as f64 / n as f64 - p).abs() < 0.01, "{counts:?}");
    }
}

#[test]
fn the_mask_leaves_out_disallowed_tokens() {
    let logits = [5.0, 4.0, 3.0, 2.0, 1.0, 0.0];
    let mask = [0b10_1010u32]; // tokens 1, 3, 5
    let mut s = Sampler::new(params(&Stage::DEFAULT_ORDER), 0, 64);
    for _ in 0..200 {
        let t = s.sample(&logits, Some(&mask)).map(|x| x.token);
        assert!(matches!(t, Some(1 | 3 | 5)), "{t:?}");
    }
    let mut greedy = Sampler::new(
        SamplingParams {
            temperature: 0.0,
            ..params(&Stage::DEFAULT_ORDER)
        },
        0,
        64,
    );
    assert_eq!(
        greedy.sample(&logits, Some(&mask)).map(|x| x.token),
        Some(1)
    );
    assert_eq!(
        greedy.sample(&logits, Some(&[0])),
        None,
        "an empty mask draws nothing"
    );
}

#[test]
fn top_k_sorts_and_keeps_k() {
    let mut c = candidates(&[0.1, 0.9, 0.5, 0.7]);
    stages::top_k(&mut c, 2);
    assert_eq!(ids(&c), [1, 3]);
    assert!(c.sorted);
    let mut c = candidates(&[0.1, 0.9]);
    stages::top_k(&mut c, 0);
    assert_eq!(
        (ids(&c), c.sorted),
        (vec![0, 1], false),
        "k <= 0 is a no-op"
    );
}

#[test]
fn top_p_keeps_the_smallest_prefix_reaching_p() {
    // Probabilities 0.4, 0.3, 0.2, 0.1: cumulative 0.4, 0.7, 0.9 → p = 0.65 keeps two.
    let logits: Vec<f32> = [0.1f32, 0.4, 0.2, 0.3].iter().map(|p| p.ln()).collect();
    let mut c = candidates(&logits);
    stages::top_p(&mut c, 0.65, 0);
    assert_eq!(ids(&c), [1, 3]);
    let mut c = candidates(&logits);
    stages::top_p(&mut c, 0.65, 3);
    assert_eq!(ids(&c), [1, 3, 2], "min_keep wins over p");
}

#[test]
fn min_p_filters_unsorted_candidates_in_place() {
    // Keep p >= 0.5 * p_max, i.e. logit >= max + ln 0.5; the order is kept when unsorted.
    let logits: Vec<f32> = [0.3f32, 0.1, 0.4, 0.2].iter().map(|p| p.ln()).collect();
    let mut c = candidates(&logits);
    stages::min_p(&mut c, 0.5, 0);
    assert_eq!((ids(&c), c.sorted), (vec![0, 2, 3], false));
    // Sorted input is cut after the sort instead.
    let mut c = candidates(&logits);
    stages::top_k(&mut c, 4);
    stages::min_p(&mut c, 0.5, 0);
    assert_eq!(ids(&c), [2, 0, 3]);
}

#[test]
fn typical_keeps_tokens_near_the_entropy() {
    // p = (0.5, 0.25, 0.25): entropy H = 1.5 ln 2; surprises ln 2 and 2 ln 2 are both
    // 0.5 ln 2 away from H, so the order is by distance then position, and p = 0.6 needs
    // two tokens (0.5 alone is not > 0.6).
    let logits: Vec<f32> = [0.5f32, 0.25, 0.25].iter().map(|p| p.ln()).collect();
    let mut c = candidates(&logits);
    stages::typical(&mut c, 0.6, 0);
    assert_eq!(c.data.len(), 2);
    assert!(!c.sorted);
}

#[test]
fn penalties_follow_llama_cpp() {
    // Repeat penalty divides positive logits and multiplies non-positive ones; frequency and
    // presence subtract count * f + p.
    let p = SamplingParams {
        repeat_penalty: 2.0,
        frequency_penalty: 0.5,
        presence_penalty: 0.25,
        repeat_last_n: 3,
        temperature: 0.0,
        stages: vec![Stage::Penalties, Stage::Temperature],
        ..SamplingParams::default()
    };
    let mut s = Sampler::new(p, 0, 64);
    for t in [9, 0, 0, 1] {
        s.accept(t); // the window keeps the last 3: 0, 0, 1 (token 9 slid out)
    }
    // Token 0: 4.0 / 2 - (2 * 0.5 + 0.25) = 0.75. Token 1: -1.0 * 2 - 0.75 = -2.75.
    // Token 2: untouched 1.0 → greedy picks token 2.
    assert_eq!(s.sample(&[4.0, -1.0, 1.0], None).map(|x| x.token), Some(2));
    // Without token 2, token 0 (0.75) beats token 1 (-2.75).
    assert_eq!(s.sample(&[4.0, -1.0, 0.5], None).map(|x| x.token), Some(0));
    let mut c = candidates(&[4.0, -1.0, 1.0, 3.0]);
    let counts = [(0u32, 2u32), (1, 1)].into_iter().collect();
    stages::penalties(&mut c, &counts, 2.0, 0.5, 0.25);
    let logits: Vec<f32> = c.data.iter().map(|x| x.logit).collect();
    assert_eq!(logits, [0.75, -2.75, 1.0, 3.0]);
}

#[test]
fn repeat_last_n_minus_one_is_the_context() {
    let p = SamplingParams {
        repeat_penalty: 100.0,
        repeat_last_n: -1,
        temperature: 0.0,
        ..SamplingParams::default()
    };
    let mut s = Sampler::new(p, 0, 1000);
    s.accept(0);
    for _ in 0..500 {
        s.accept(1);
    }
    // Token 0 is still in the 1000-token window: 10 / 100 < 5.
    assert_eq!(s.sample(&[10.0, 2.0, 5.0], None).map(|x| x.token), Some(2));
}

/// xorshift64*, for the chains and logits below.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize]
    }
}

/// The `k` most likely allowed tokens, largest first (what a device's top-k reads back).
fn top_allowed(logits: &[f32], mask: Option<&[u32]>, k: usize) -> Vec<(u32, f32)> {
    let mut all: Vec<(u32, f32)> = logits
        .iter()
        .enumerate()
        .filter(|&(i, _)| mask.is_none_or(|m| mask_allows(m, i)))
        .map(|(i, &l)| (i as u32, l))
        .collect();
    all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    all.truncate(k);
    all
}

/// Wherever `reads_at_most` says `k`, the chain over the `k` most likely allowed tokens draws
/// what it draws over every logit: random chains (stages in random orders, each active or
/// not), random logits, masks and penalty windows, several steps from one seed.
#[test]
fn the_chain_over_the_tokens_it_reads_draws_what_it_draws_over_all() {
    let mut rng = Rng(0x5eed);
    let (mut one, mut more, mut all) = (0, 0, 0);
    for case in 0..3000 {
        let mut stages: Vec<Stage> = Stage::DEFAULT_ORDER
            .iter()
            .copied()
            .filter(|_| rng.below(4) != 0)
            .collect();
        for i in (1..stages.len()).rev() {
            stages.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let params = SamplingParams {
            temperature: rng.pick(&[0.0, -1.0, 0.7, 1.0, 1.5]),
            top_k: rng.pick(&[0, 1, 3, 8, 40]),
            top_p: rng.pick(&[1.0, 0.95, 0.5]),
            min_p: rng.pick(&[0.0, 0.05, 0.3]),
            typical_p: rng.pick(&[1.0, 1.0, 0.5]),
            min_keep: rng.pick(&[0, 2]),
            repeat_penalty: rng.pick(&[1.0, 1.5]),
            repeat_last_n: rng.pick(&[0, 64]),
            presence_penalty: rng.pick(&[0.0, 0.0, 2.0]),
            frequency_penalty: 0.0,
            seed: Some(case),
            stages,
        };
        let vocab = 200;
        let mut sampler = Sampler::new(params, 0, 4096);
        for _ in 0..10 {
            sampler.accept(rng.below(vocab) as u32);
        }
        let Some(k) = sampler.reads_at_most() else {
            all += 1;
            continue;
        };
        if k == 1 {
            one += 1;
        } else {
            more += 1;
        }
        for step in 0..4 {
            // Distinct logits: on equal ones the chain's sorts decide.
            let logits: Vec<f32> = (0..vocab)
                .map(|i| (rng.below(1 << 20) as f32 / 65536.0) + i as f32 * 1e-6)
                .collect();
            let mask: Option<Vec<u32>> = (rng.below(2) == 0).then(|| {
                (0..vocab.div_ceil(32))
                    .map(|_| rng.next() as u32 & rng.next() as u32)
                    .collect()
            });
            let mut over_top = sampler.clone();
            let want = sampler.sample(&logits, mask.as_deref());
            let got = over_top.sample_top(&top_allowed(&logits, mask.as_deref(), k));
            assert_eq!(
                got.map(|s| s.token),
                want.map(|s| s.token),
                "case {case} step {step}: {:?} reads {k}",
                sampler.params()
            );
            if let Some(s) = want {
                sampler.accept(s.token);
            }
        }
    }
    // Every kind of chain came up often.
    assert!(one > 300 && more > 300 && all > 300, "{one} {more} {all}");
}

#[test]
fn chains_say_how_many_tokens_they_read() {
    let reads = |stages: &[Stage], f: &dyn Fn(&mut SamplingParams)| {
        let mut p = params(stages);
        p.top_k = 5;
        f(&mut p);
        Sampler::new(p, 0, 64).reads_at_most()
    };
    use Stage::*;
    // llama.cpp's default chain reads the 40 most likely tokens; greedy reads one.
    let default = SamplingParams::default();
    assert_eq!(
        Sampler::new(default.clone(), 0, 64).reads_at_most(),
        Some(40)
    );
    let zero = SamplingParams {
        temperature: 0.0,
        ..default
    };
    assert_eq!(Sampler::new(zero, 0, 64).reads_at_most(), Some(1));
    // Penalties reorder; typical sampling, and a nucleus or min-p before top-k, read the
    // whole distribution.
    assert_eq!(reads(&[Penalties, TopK], &|p| p.repeat_penalty = 1.5), None);
    assert_eq!(reads(&[TypicalP, TopK], &|p| p.typical_p = 0.5), None);
    assert_eq!(reads(&[TopP, TopK], &|p| p.top_p = 0.5), None);
    assert_eq!(reads(&[MinP, TopK], &|p| p.min_p = 0.3), None);
    // ... unless greedy follows, or top-k keeps one: they keep the most likely token.
    let greedy_after = |p: &mut SamplingParams| {
        p.top_p = 0.5;
        p.temperature = 0.0;
    };
    assert_eq!(reads(&[TopP, TopK, Temperature], &greedy_after), Some(1));
    let one = |p: &mut SamplingParams| {
        p.min_p = 0.3;
        p.top_k = 1;
    };
    assert_eq!(reads(&[MinP, TopK], &one), Some(1));
    // A temperature above 0 keeps the order; penalties over no window do nothing.
    assert_eq!(reads(&[Temperature, TopK], &|_| {}), Some(5));
    let no_window = |p: &mut SamplingParams| {
        p.repeat_penalty = 1.5;
        p.repeat_last_n = 0;
    };
    assert_eq!(reads(&[Penalties, TopK], &no_window), Some(5));
    // Nothing cuts: every logit.
    assert_eq!(reads(&[TopP, MinP, Temperature], &|p| p.top_k = 0), None);
}
