//! The generation loop driven by a scripted fake model (a test double: it favours one token
//! per step) and small byte-level grammars, checked for validity, stops, cancellation,
//! budgets and statistics.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use stampo_engine::constraint::{self, GrammarConstraint};
use stampo_engine::generate::{
    BoxError, Control, GenerateOptions, LogitsSource, StopKind, Vocabulary, generate,
};
use stampo_engine::timing::StdClock;
use stampo_engine::{Constraint, Error, Output, Sampler, SamplingParams, TokenConstraint};
use stampo_grammar::vocab::Vocabulary as GrammarVocabulary;

const MAYBE: u32 = 258;
const STOP: u32 = 259;
const EOS: u32 = 260;

fn pieces() -> Vec<Vec<u8>> {
    let mut p: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for w in ["yes", "no", "maybe", "STOP"] {
        p.push(w.as_bytes().to_vec());
    }
    p.push(Vec::new()); // EOS: a control token with no text
    p
}

struct Vocab {
    pieces: Vec<Vec<u8>>,
    eog: Vec<u32>,
}

impl Vocabulary for Vocab {
    fn token_bytes(&self, token: u32) -> &[u8] {
        self.pieces.get(token as usize).map_or(&[], Vec::as_slice)
    }
    fn end_of_generation(&self) -> &[u32] {
        &self.eog
    }
}

fn vocab() -> Vocab {
    Vocab {
        pieces: pieces(),
        eog: vec![EOS],
    }
}

/// Favours `script[step]` (logit 10), then EOS once the script is over; everything else 0.
struct ScriptedModel {
    script: Vec<u32>,
    step: usize,
    fed: Vec<u32>,
}

impl ScriptedModel {
    fn new(script: &[u32]) -> Self {
        Self {
            script: script.to_vec(),
            step: 0,
            fed: Vec::new(),
        }
    }
    fn text(s: &str) -> Self {
        Self::new(&s.bytes().map(u32::from).collect::<Vec<_>>())
    }
}

impl LogitsSource for ScriptedModel {
    fn forward(&mut self, tokens: &[u32]) -> Result<Vec<f32>, BoxError> {
        self.fed.extend_from_slice(tokens);
        let mut logits = vec![0.0f32; EOS as usize + 1];
        let favoured = self.script.get(self.step).copied().unwrap_or(EOS);
        logits[favoured as usize] = 10.0;
        // A runner-up, so that masks have something to fall back to.
        logits[b'z' as usize] = 5.0;
        self.step += 1;
        Ok(logits)
    }
}

fn options(n_predict: Option<u32>) -> GenerateOptions {
    GenerateOptions {
        n_predict,
        stop: Vec::new(),
        ignore_eos: false,
        n_probs: 0,
        finish_in_budget: false,
        n_ctx: 4096,
        overlap: false,
        fast_forward: false,
    }
}

fn greedy() -> Sampler {
    Sampler::new(
        SamplingParams {
            temperature: 0.0,
            ..SamplingParams::default()
        },
        0,
        4096,
    )
}

fn run(
    model: &mut dyn LogitsSource,
    constraint: Option<&mut (dyn TokenConstraint + Send)>,
    sampler: &mut Sampler,
    opts: &GenerateOptions,
) -> (Result<Output, Error>, String) {
    let clock = StdClock::default();
    let mut streamed = String::new();
    let mut on_event = |e: &stampo_engine::Event<'_>| {
        streamed.push_str(e.text);
        ControlFlow::Continue(())
    };
    let mut control = Control {
        on_event: &mut on_event,
        cancel: None,
        clock: &clock,
    };
    let out = generate(
        model,
        &vocab(),
        constraint,
        sampler,
        &[1, 2, 3],
        opts,
        &mut control,
    );
    (out, streamed)
}

fn grammar_vocab(pieces: Vec<Vec<u8>>) -> Arc<GrammarVocabulary> {
    let special = vec![false; pieces.len()];
    Arc::new(GrammarVocabulary::new(pieces, special, vec![EOS]))
}

/// A real grammar from the grammar crate, over the test vocabulary.
fn gbnf(text: &str) -> GrammarConstraint {
    gbnf_over(text, pieces())
}

fn gbnf_over(text: &str, pieces: Vec<Vec<u8>>) -> GrammarConstraint {
    let compiled = constraint::compile(&Constraint::Gbnf(text.into()), false)
        .expect("grammar compiles")
        .expect("a grammar");
    GrammarConstraint::new(&compiled, grammar_vocab(pieces)).expect("matcher")
}

const YES_NO: &str = r#"root ::= "yes" | "no""#;
const DIGITS: &str = r#"root ::= "[" [0-9]* "]""#;

#[test]
fn unconstrained_greedy_follows_the_model_and_ends_at_eos() {
    let mut model = ScriptedModel::text("ciao");
    let (out, streamed) = run(&mut model, None, &mut greedy(), &options(None));
    let out = out.unwrap();
    assert_eq!(out.text, "ciao");
    assert_eq!(streamed, "ciao");
    assert_eq!(out.stop, StopKind::Eos);
    assert_eq!(out.tokens.last(), Some(&EOS));
    assert_eq!(out.n_prompt, 3);
    assert_eq!(&model.fed[..3], &[1, 2, 3], "the prompt is fed first");
    assert!(out.mask_stats.is_none());
}

#[test]
fn the_grammar_overrides_the_model_at_every_temperature() {
    // The model wants "maybe"; the grammar allows only "yes" or "no".
    for seed in 0..40 {
        let mut model = ScriptedModel::new(&[MAYBE]);
        let mut c = gbnf(YES_NO);
        let params = SamplingParams {
            temperature: 1.5,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            seed: Some(seed),
            ..SamplingParams::default()
        };
        let mut sampler = Sampler::new(params, 0, 4096);
        let (out, _) = run(&mut model, Some(&mut c), &mut sampler, &options(Some(20)));
        let out = out.unwrap();
        assert!(
            out.text == "yes" || out.text == "no",
            "seed {seed}: {:?}",
            out.text
        );
        assert_eq!(
            out.stop,
            StopKind::Eos,
            "end-of-generation comes once the grammar is complete"
        );
    }
}

#[test]
fn greedy_under_a_grammar_takes_the_best_allowed_token() {
    // The model's second choice is 'z' (logit 5) everywhere; "no" and "yes" tie at 0, and
    // the lower id wins a tie, as in llama.cpp's greedy scan.
    let mut model = ScriptedModel::new(&[MAYBE]);
    let mut c = gbnf(YES_NO);
    let (out, _) = run(&mut model, Some(&mut c), &mut greedy(), &options(Some(20)));
    let out = out.unwrap();
    assert_eq!(out.text, "no");
    let stats = out.mask_stats.expect("stats under a constraint");
    assert_eq!(stats.steps, out.tokens.len(), "one mask per sampled token");
    assert!(stats.max_us >= stats.p99_us && stats.total_ms > 0.0);
}

#[test]
fn end_of_generation_only_where_the_grammar_can_end() {
    // The model wants to stop at once; the grammar needs a closed list.
    let mut model = ScriptedModel::new(&[]);
    let mut c = gbnf(DIGITS);
    let (out, _) = run(&mut model, Some(&mut c), &mut greedy(), &options(Some(10)));
    let out = out.unwrap();
    assert!(out.text.starts_with('['), "{:?}", out.text);
    assert!(!out.tokens[..out.tokens.len() - 1].contains(&EOS));
}

#[test]
fn ignore_eos_runs_to_the_limit() {
    let mut model = ScriptedModel::text("ab");
    let mut opts = options(Some(6));
    opts.ignore_eos = true;
    let (out, _) = run(&mut model, None, &mut greedy(), &opts);
    let out = out.unwrap();
    assert_eq!(out.stop, StopKind::Limit);
    assert_eq!(out.tokens.len(), 6);
    assert!(!out.tokens.contains(&EOS));
    assert!(!out.truncated);
}

#[test]
fn stop_strings_end_generation_and_never_reach_the_stream() {
    let mut model = ScriptedModel::new(&[
        b'a' as u32,
        b'b' as u32,
        b'S' as u32,
        b'T' as u32,
        STOP,
        b'x' as u32,
    ]);
    let mut opts = options(None);
    opts.stop = vec!["STSTOP".into(), "TOPS".into()];
    // "abST" + "STOP": "STSTOP" completes at the fifth token.
    let (out, streamed) = run(&mut model, None, &mut greedy(), &opts);
    let out = out.unwrap();
    assert_eq!(out.stop, StopKind::Word);
    assert_eq!(out.stopping_word.as_deref(), Some("STSTOP"));
    assert_eq!(out.text, "ab");
    assert_eq!(streamed, "ab");
}

#[test]
fn a_held_prefix_that_never_completes_is_sent_at_the_end() {
    let mut model = ScriptedModel::text("abS");
    let mut opts = options(None);
    opts.stop = vec!["STOP".into()];
    let (out, streamed) = run(&mut model, None, &mut greedy(), &opts);
    assert_eq!(out.unwrap().text, "abS");
    assert_eq!(streamed, "abS");
}

#[test]
fn cancellation_from_the_callback_and_from_a_flag() {
    let clock = StdClock::default();
    let mut model = ScriptedModel::text("abcdefgh");
    let mut seen = 0;
    let mut on_event = |_: &stampo_engine::Event<'_>| {
        seen += 1;
        if seen == 3 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    };
    let mut control = Control {
        on_event: &mut on_event,
        cancel: None,
        clock: &clock,
    };
    let out = generate(
        &mut model,
        &vocab(),
        None,
        &mut greedy(),
        &[1],
        &options(None),
        &mut control,
    )
    .unwrap();
    assert_eq!(out.stop, StopKind::Cancelled);
    assert_eq!(out.text, "abc");

    let flag = AtomicBool::new(false);
    let mut model = ScriptedModel::text("abcdefgh");
    let mut n = 0;
    let mut on_event = |_: &stampo_engine::Event<'_>| {
        n += 1;
        if n == 2 {
            flag.store(true, Ordering::Relaxed);
        }
        ControlFlow::Continue(())
    };
    let mut control = Control {
        on_event: &mut on_event,
        cancel: Some(&flag),
        clock: &clock,
    };
    let out = generate(
        &mut model,
        &vocab(),
        None,
        &mut greedy(),
        &[1],
        &options(None),
        &mut control,
    )
    .unwrap();
    assert_eq!((out.stop, out.text.as_str()), (StopKind::Cancelled, "ab"));
}

/// A greedy run of `script` under `grammar` with `finish_in_budget` and `n_predict` tokens.
fn run_finishing_in_budget(script: &[u32], grammar: &str, n_predict: u32) -> Output {
    let mut model = ScriptedModel::new(script);
    let mut c = gbnf(grammar);
    let mut opts = options(Some(n_predict));
    opts.finish_in_budget = true;
    let (out, _) = run(&mut model, Some(&mut c), &mut greedy(), &opts);
    out.expect("the run succeeds")
}

#[test]
fn finish_inside_the_budget_closes_the_document() {
    // The model would write digits forever.
    let digits: Vec<u32> = std::iter::once(b'[' as u32)
        .chain(std::iter::repeat_n(b'7' as u32, 50))
        .collect();
    for n_predict in [3u32, 4, 8, 12] {
        let mut model = ScriptedModel::new(&digits);
        let mut c = gbnf(DIGITS);
        let (out, _) = run(
            &mut model,
            Some(&mut c),
            &mut greedy(),
            &options(Some(n_predict)),
        );
        let out = out.unwrap();
        assert_eq!(
            out.stop,
            StopKind::Limit,
            "without the option the document is cut"
        );
        assert!(!out.text.ends_with(']'));

        let out = run_finishing_in_budget(&digits, DIGITS, n_predict);
        assert!(out.tokens.len() <= n_predict as usize);
        assert!(
            out.text.ends_with(']'),
            "n_predict {n_predict}: {:?}",
            out.text
        );
        assert_eq!(out.stop, StopKind::Eos, "n_predict {n_predict}");
        assert_eq!(
            out.text.len(),
            n_predict as usize - 1,
            "the budget is used, then closed"
        );
    }
}

#[test]
fn finish_inside_the_budget_holds_when_one_token_lengthens_the_ending() {
    // After `,` the shortest ending is `x]`; one more token, `{`, makes it 42 bytes long.
    let grammar = r#"root ::= "[" item ("," item)* "]"
item ::= "x" | "{" "a"{40} "}""#;
    let item = format!(",{{{}}}", "a".repeat(40));
    let script: Vec<u32> = format!("[x{}", item.repeat(6))
        .bytes()
        .map(u32::from)
        .collect();
    for n_predict in 4u32..120 {
        let out = run_finishing_in_budget(&script, grammar, n_predict);
        assert!(out.tokens.len() <= n_predict as usize);
        assert!(
            out.text.ends_with(']') && out.stop == StopKind::Eos,
            "n_predict {n_predict}: {:?} ({:?})",
            out.text,
            out.stop
        );
    }
}

#[test]
fn a_grammar_the_vocabulary_cannot_spell_is_an_error() {
    let mut pieces = pieces();
    pieces[b'q' as usize].clear();
    let mut model = ScriptedModel::new(&[]);
    let mut c = gbnf_over(r#"root ::= "q""#, pieces);
    let (out, _) = run(&mut model, Some(&mut c), &mut greedy(), &options(Some(5)));
    assert!(matches!(out, Err(Error::EmptyMask { step: 0 })), "{out:?}");
}

#[test]
fn n_probs_reports_the_top_tokens() {
    let mut model = ScriptedModel::text("ok");
    let mut opts = options(None);
    opts.n_probs = 3;
    let (out, _) = run(&mut model, None, &mut greedy(), &opts);
    let out = out.unwrap();
    assert_eq!(out.probs.len(), out.tokens.len());
    let first = &out.probs[0];
    assert_eq!(first.token, b'o' as u32);
    assert_eq!(first.top.len(), 3);
    assert_eq!(first.top[0].token, b'o' as u32);
    assert_eq!(first.top[1].token, b'z' as u32);
    assert!(first.top.windows(2).all(|w| w[0].p >= w[1].p));
    // Softmax of {10, 5, 0 × 259}: p(o) = e^10 / (e^10 + e^5 + 259).
    let expected = (10f64.exp() / (10f64.exp() + 5f64.exp() + 259.0)) as f32;
    assert!(
        (first.p - expected).abs() < 1e-5,
        "{} vs {expected}",
        first.p
    );
}

#[test]
fn the_context_size_truncates() {
    let mut model = ScriptedModel::text("abcdefgh");
    let mut opts = options(None);
    opts.n_ctx = 5; // 3 prompt tokens + 2
    let (out, _) = run(&mut model, None, &mut greedy(), &opts);
    let out = out.unwrap();
    assert_eq!(
        (out.stop, out.truncated, out.text.as_str()),
        (StopKind::Limit, true, "ab")
    );
}

#[test]
fn overlapping_the_grammar_with_the_model_changes_nothing_but_time() {
    let digits: Vec<u32> = std::iter::once(b'[' as u32)
        .chain(std::iter::repeat_n(b'3' as u32, 20))
        .collect();
    let mut results = Vec::new();
    for overlap in [false, true] {
        let mut model = ScriptedModel::new(&digits);
        let mut c = gbnf(DIGITS);
        let mut opts = options(Some(9));
        opts.overlap = overlap;
        opts.finish_in_budget = true;
        let params = SamplingParams {
            seed: Some(5),
            ..SamplingParams::default()
        };
        let (out, streamed) = run(
            &mut model,
            Some(&mut c),
            &mut Sampler::new(params, 0, 4096),
            &opts,
        );
        let out = out.unwrap();
        assert_eq!(
            out.mask_stats.as_ref().map(|m| m.steps),
            Some(out.tokens.len())
        );
        results.push((out.text, out.tokens, out.stop, streamed));
    }
    assert_eq!(results[0], results[1]);
}

/// A device that reads logits back asynchronously (as WebGPU does): `submit` queues the
/// scripted logits, which arrive only after one `Pending` poll, woken from another thread.
/// Every submit, mask and arrival is logged, to see what runs while the "device" works.
struct AsyncDevice {
    inner: ScriptedModel,
    log: Arc<std::sync::Mutex<Vec<&'static str>>>,
    /// Whether it tells its vocabulary's size before the first pass.
    tells_size: bool,
    /// Whether it computes only the logits asked for (as the model's output head does on
    /// every device): every other logit is a huge value, so a loop that read one would pick
    /// it.
    sparse: bool,
}

impl AsyncDevice {
    fn arriving(&self, logits: Result<Vec<f32>, BoxError>) -> stampo_engine::PendingLogits {
        let mut logits = Some(logits);
        let log = Arc::clone(&self.log);
        let mut waited = false;
        Box::pin(std::future::poll_fn(move |cx| {
            if !waited {
                waited = true;
                let waker = cx.waker().clone();
                std::thread::spawn(move || waker.wake());
                return std::task::Poll::Pending;
            }
            note(&log, "logits");
            std::task::Poll::Ready(logits.take().expect("polled after completion"))
        }))
    }
}

impl LogitsSource for AsyncDevice {
    fn vocab_size(&self) -> Option<usize> {
        self.tells_size.then_some(EOS as usize + 1)
    }

    fn forward(&mut self, _tokens: &[u32]) -> Result<Vec<f32>, BoxError> {
        Err("this device reads back only asynchronously".into())
    }

    fn submit(&mut self, tokens: &[u32]) -> stampo_engine::PendingLogits {
        note(&self.log, "submit");
        let logits = self.inner.forward(tokens);
        self.arriving(logits)
    }

    fn skips_unwanted(&self) -> bool {
        self.sparse
    }

    fn forward_wanted(
        &mut self,
        _tokens: &[u32],
        _wanted: &mut dyn FnMut() -> Option<Vec<u32>>,
    ) -> Result<Vec<f32>, BoxError> {
        Err("this device reads back only asynchronously".into())
    }

    fn submit_wanted(
        &mut self,
        tokens: &[u32],
        wanted: &mut dyn FnMut() -> Option<Vec<u32>>,
    ) -> stampo_engine::PendingLogits {
        note(&self.log, "layers");
        let logits = self.inner.forward(tokens).map(|mut logits| {
            if let Some(mask) = wanted() {
                note(&self.log, "head");
                for (i, l) in logits.iter_mut().enumerate() {
                    if mask[i / 32] >> (i % 32) & 1 == 0 {
                        *l = 1e30;
                    }
                }
            }
            logits
        });
        self.arriving(logits)
    }
}

fn note(log: &std::sync::Mutex<Vec<&'static str>>, what: &'static str) {
    log.lock().expect("the log's lock").push(what);
}

/// Logs each mask it computes into the same log as [`AsyncDevice`].
struct LoggedConstraint {
    inner: GrammarConstraint,
    log: Arc<std::sync::Mutex<Vec<&'static str>>>,
}

impl TokenConstraint for LoggedConstraint {
    fn fill_mask(&mut self, mask: &mut [u32]) -> Result<(), BoxError> {
        note(&self.log, "mask");
        self.inner.fill_mask(mask)
    }
    fn commit(&mut self, token: u32) -> Result<(), BoxError> {
        self.inner.commit(token)
    }
    fn is_accepting(&self) -> bool {
        self.inner.is_accepting()
    }
}

type Log = Arc<std::sync::Mutex<Vec<&'static str>>>;

/// An [`AsyncDevice`] scripted to prefer the bytes of `script`, and the digits grammar, both
/// writing into the returned log.
fn logged_device(
    script: &[u8],
    tells_size: bool,
    sparse: bool,
) -> (AsyncDevice, LoggedConstraint, Log) {
    let log: Log = Arc::default();
    let script: Vec<u32> = script.iter().map(|&b| u32::from(b)).collect();
    let model = AsyncDevice {
        inner: ScriptedModel::new(&script),
        log: Arc::clone(&log),
        tells_size,
        sparse,
    };
    let constraint = LoggedConstraint {
        inner: gbnf(DIGITS),
        log: Arc::clone(&log),
    };
    (model, constraint, log)
}

#[test]
fn an_asynchronous_device_is_awaited_and_the_mask_is_computed_while_it_works() {
    for tells_size in [false, true] {
        let (mut model, mut constraint, log) = logged_device(b"[42]", tells_size, false);
        // `run` goes through `generate`, which drives `generate_async` with `block_on`: the
        // device's pending polls are real waits here.
        let (out, _) = run(
            &mut model,
            Some(&mut constraint),
            &mut greedy(),
            &options(None),
        );
        let out = out.unwrap();
        assert_eq!(out.text, "[42]");
        assert_eq!(out.stop, StopKind::Eos);
        let log = log.lock().unwrap().clone();
        // Every step computes its mask between the submit and the logits' arrival; a device
        // that does not tell its vocabulary's size first has the prompt's step size the mask
        // from its logits.
        let first = if tells_size {
            0
        } else {
            assert_eq!(&log[..4], ["submit", "logits", "mask", "submit"]);
            3
        };
        for step in log[first..].chunks(3) {
            assert_eq!(step, ["submit", "mask", "logits"], "{log:?}");
        }
    }
}

#[test]
fn an_asynchronous_device_computing_only_the_allowed_logits_runs_its_layers_during_the_mask() {
    for (overlap, tells_size) in [(false, false), (true, false), (false, true), (true, true)] {
        let (mut model, mut constraint, log) = logged_device(b"[4x]", tells_size, true);
        let mut opts = options(None);
        opts.overlap = overlap;
        let (out, _) = run(&mut model, Some(&mut constraint), &mut greedy(), &opts);
        let out = out.unwrap();
        let case = format!("overlap {overlap}, size told {tells_size}");
        // The scripted 'x' is not a digit: the mask steers to another digit or ']', which a
        // loop reading a skipped logit (1e30) would not give.
        assert!(
            out.text.starts_with("[4") && out.text.ends_with(']'),
            "{case}: {}",
            out.text
        );
        assert_eq!(out.stop, StopKind::Eos, "{case}");
        let log = log.lock().unwrap().clone();
        let first = if tells_size {
            0
        } else {
            assert_eq!(&log[..3], ["submit", "logits", "mask"], "{case}");
            3
        };
        // Every step queues its layers, computes the mask (on the grammar's thread with
        // overlap, where it may start first), queues the head's allowed rows, then awaits.
        for step in log[first..].chunks(4) {
            let mut step = step.to_vec();
            if overlap && step[..2] == ["mask", "layers"] {
                step.swap(0, 1);
            }
            assert_eq!(
                step,
                ["layers", "mask", "head", "logits"],
                "{case}: {log:?}"
            );
        }
        assert_eq!((log.len() - first) % 4, 0, "{case}: {log:?}");
    }
}

/// A model that computes only the logits the loop asks for, as the CPU model's output head
/// does: every other logit is a huge value, so a loop that read one would pick it. Records
/// the masks it was handed.
struct SparseModel {
    inner: ScriptedModel,
    wanted: Vec<Vec<u32>>,
    /// Whether it tells its vocabulary's size before the first pass.
    tells_size: bool,
}

impl LogitsSource for SparseModel {
    fn forward(&mut self, tokens: &[u32]) -> Result<Vec<f32>, BoxError> {
        self.inner.forward(tokens)
    }

    fn vocab_size(&self) -> Option<usize> {
        self.tells_size.then_some(EOS as usize + 1)
    }

    fn skips_unwanted(&self) -> bool {
        true
    }

    fn forward_wanted(
        &mut self,
        tokens: &[u32],
        wanted: &mut dyn FnMut() -> Option<Vec<u32>>,
    ) -> Result<Vec<f32>, BoxError> {
        let mut logits = self.inner.forward(tokens)?;
        if let Some(mask) = wanted() {
            for (i, l) in logits.iter_mut().enumerate() {
                if mask[i / 32] >> (i % 32) & 1 == 0 {
                    *l = 1e30;
                }
            }
            self.wanted.push(mask);
        }
        Ok(logits)
    }
}

#[test]
fn a_model_that_computes_only_the_allowed_logits_gives_the_same_output() {
    let script: Vec<u32> = b"[4x7]".iter().map(|&b| u32::from(b)).collect();
    let mut plain = ScriptedModel::new(&script);
    let (want, _) = run(
        &mut plain,
        Some(&mut gbnf(DIGITS)),
        &mut greedy(),
        &options(None),
    );
    let want = want.unwrap();
    assert!(
        want.text.starts_with("[4") && want.text.ends_with(']'),
        "{}",
        want.text
    );
    for (overlap, tells_size) in [(false, false), (true, false), (false, true), (true, true)] {
        let mut model = SparseModel {
            inner: ScriptedModel::new(&script),
            wanted: Vec::new(),
            tells_size,
        };
        let mut opts = options(None);
        opts.overlap = overlap;
        let (out, streamed) = run(&mut model, Some(&mut gbnf(DIGITS)), &mut greedy(), &opts);
        let out = out.unwrap();
        assert_eq!(
            (&out.text, &out.tokens, out.stop),
            (&want.text, &want.tokens, want.stop)
        );
        assert_eq!(streamed, want.text);
        // Every step after the prompt's (and the prompt's too where the model tells its
        // vocabulary's size first) was handed the grammar's mask, end-of-generation where the
        // grammar may end: first "["; after "[", digits and "]"; after "]", only EOS.
        let case = format!("overlap {overlap}, size told {tells_size}");
        let skipped = usize::from(!tells_size);
        assert_eq!(model.wanted.len(), out.tokens.len() - skipped, "{case}");
        let allowed = |mask: &[u32]| -> Vec<u32> {
            (0..=EOS)
                .filter(|&i| mask[i as usize / 32] >> (i % 32) & 1 == 1)
                .collect()
        };
        let digits_and_close: Vec<u32> = (b'0'..=b'9').chain([b']']).map(u32::from).collect();
        if tells_size {
            assert_eq!(allowed(&model.wanted[0]), vec![u32::from(b'[')], "{case}");
        }
        assert_eq!(
            allowed(&model.wanted[1 - skipped]),
            digits_and_close,
            "{case}"
        );
        assert_eq!(allowed(model.wanted.last().unwrap()), vec![EOS], "{case}");
    }
    // Reporting `n_probs` takes every raw logit: the model is not asked to skip any.
    let mut model = SparseModel {
        inner: ScriptedModel::new(&script),
        wanted: Vec::new(),
        tells_size: true,
    };
    let mut opts = options(None);
    opts.n_probs = 2;
    let (out, _) = run(&mut model, Some(&mut gbnf(DIGITS)), &mut greedy(), &opts);
    assert_eq!(out.unwrap().text, want.text);
    assert!(model.wanted.is_empty());
}

/// A model that chooses the most likely tokens itself (as the wgpu device does), logging the
/// mask it was asked to choose within; its logits, when asked for them, are [`ScriptedModel`]'s.
struct ChoosingModel {
    inner: SparseModel,
    /// The mask each `submit_top` was handed (`None`: every token).
    chose_within: Vec<Option<Vec<u32>>>,
    /// How many each chose.
    chose: Vec<usize>,
}

impl LogitsSource for ChoosingModel {
    fn forward(&mut self, tokens: &[u32]) -> Result<Vec<f32>, BoxError> {
        self.inner.forward(tokens)
    }

    fn vocab_size(&self) -> Option<usize> {
        self.inner.vocab_size()
    }

    fn skips_unwanted(&self) -> bool {
        true
    }

    fn forward_wanted(
        &mut self,
        tokens: &[u32],
        wanted: &mut dyn FnMut() -> Option<Vec<u32>>,
    ) -> Result<Vec<f32>, BoxError> {
        self.inner.forward_wanted(tokens, wanted)
    }

    fn submit_top(
        &mut self,
        tokens: &[u32],
        wanted: &mut dyn FnMut() -> Option<Vec<u32>>,
        k: usize,
    ) -> stampo_engine::PendingTop {
        let logits = self.inner.inner.forward(tokens);
        let mask = wanted();
        let top = logits.map(|logits| {
            let mut top: Vec<(u32, f32)> = (0..logits.len())
                .filter(|&i| mask.as_ref().is_none_or(|m| m[i / 32] >> (i % 32) & 1 == 1))
                .map(|i| (i as u32, logits[i]))
                .collect();
            top.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            top.truncate(k);
            top
        });
        self.chose_within.push(mask);
        self.chose.push(k);
        Box::pin(std::future::ready(top))
    }
}

fn choosing(script: &[u8], tells_size: bool) -> ChoosingModel {
    let script: Vec<u32> = script.iter().map(|&b| u32::from(b)).collect();
    ChoosingModel {
        inner: SparseModel {
            inner: ScriptedModel::new(&script),
            wanted: Vec::new(),
            tells_size,
        },
        chose_within: Vec::new(),
        chose: Vec::new(),
    }
}

#[test]
fn a_sampler_reading_the_most_likely_tokens_lets_the_model_choose_them_within_the_mask() {
    let script = b"[4x7]";
    let (want, _) = run(
        &mut ScriptedModel::new(&script.map(u32::from)),
        Some(&mut gbnf(DIGITS)),
        &mut greedy(),
        &options(None),
    );
    let want = want.unwrap();
    for overlap in [false, true] {
        let mut model = choosing(script, true);
        let mut opts = options(None);
        opts.overlap = overlap;
        let (out, streamed) = run(&mut model, Some(&mut gbnf(DIGITS)), &mut greedy(), &opts);
        let out = out.unwrap();
        assert_eq!((&out.text, &out.tokens), (&want.text, &want.tokens));
        assert_eq!(streamed, want.text);
        // Every step chose one token within the grammar's mask, end-of-generation only once
        // complete.
        assert_eq!(model.chose, vec![1; out.tokens.len()]);
        let eos_allowed: Vec<bool> = model
            .chose_within
            .iter()
            .map(|m| m.as_ref().expect("a mask")[EOS as usize / 32] >> (EOS % 32) & 1 == 1)
            .collect();
        let mut complete = vec![false; out.tokens.len()];
        *complete.last_mut().unwrap() = true;
        assert_eq!(eos_allowed, complete, "overlap {overlap}");
    }

    // Without a constraint: every token, or all but end-of-generation with `ignore_eos`.
    let mut model = choosing(b"hi", true);
    let (out, _) = run(&mut model, None, &mut greedy(), &options(None));
    assert_eq!(out.unwrap().text, "hi");
    assert!(model.chose_within.iter().all(Option::is_none));
    let mut model = choosing(b"hi", true);
    let mut opts = options(Some(4));
    opts.ignore_eos = true;
    let (out, _) = run(&mut model, None, &mut greedy(), &opts);
    // After the script the runner-up, 'z', rather than EOS.
    assert_eq!(out.unwrap().text, "hizz");
    for mask in &model.chose_within {
        let mask = mask.as_ref().expect("a mask");
        assert_eq!(mask[EOS as usize / 32] >> (EOS % 32) & 1, 0);
        assert_eq!(mask[0] & 1, 1);
    }

    // llama.cpp's default chain keeps the 40 most likely tokens first: the model chooses those.
    let mut hot = Sampler::new(SamplingParams::default(), 7, 4096);
    let mut model = choosing(script, true);
    let (out, _) = run(
        &mut model,
        Some(&mut gbnf(DIGITS)),
        &mut hot,
        &options(None),
    );
    let text = out.unwrap().text;
    assert!(text.starts_with('[') && text.ends_with(']'), "{text}");
    assert!(!model.chose.is_empty() && model.chose.iter().all(|&k| k == 40));

    // A chain that reads every logit (`top_k` 0), `n_probs`, and a model that cannot tell
    // its vocabulary's size under `ignore_eos`: the logits, as before.
    let mut whole = Sampler::new(
        SamplingParams {
            top_k: 0,
            ..SamplingParams::default()
        },
        7,
        4096,
    );
    let mut model = choosing(script, true);
    let _ = run(
        &mut model,
        Some(&mut gbnf(DIGITS)),
        &mut whole,
        &options(None),
    );
    assert!(model.chose_within.is_empty());
    let mut model = choosing(script, true);
    let mut opts = options(None);
    opts.n_probs = 2;
    let (out, _) = run(&mut model, Some(&mut gbnf(DIGITS)), &mut greedy(), &opts);
    assert_eq!(out.unwrap().text, want.text);
    assert!(model.chose_within.is_empty());
    let mut model = choosing(b"hi", false);
    let mut opts = options(Some(3));
    opts.ignore_eos = true;
    let (out, _) = run(&mut model, None, &mut greedy(), &opts);
    assert_eq!(out.unwrap().text, "hiz");
    assert!(model.chose_within.is_empty());
}
