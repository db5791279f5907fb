//! The constrained generation loop over three small traits: a [`LogitsSource`] (the model),
//! a [`Vocabulary`] (token bytes and end-of-generation tokens) and a [`TokenConstraint`]
//! (the grammar matcher: allowed-token mask, commit, can-end).
//!
//! Each step: the constraint's mask (end-of-generation allowed only where the grammar can
//! end and `ignore_eos` is off) → the sampler chain → commit the token to the sampler's
//! penalty window and the constraint → append its bytes, scan for stop strings, stream the
//! text that is settled → the model's logits for the next step.
//!
//! The loop is async ([`generate_async`]) because WebGPU reads logits back only
//! asynchronously: the device computes the next logits while the grammar computes the next
//! mask, and the loop awaits both. [`generate`] runs it to the end on the calling thread.

use std::future::Future;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;

use crate::block_on::block_on;
use crate::error::Error;
use crate::request::Request;
use crate::sampler::{Sampler, TokenProb, top_probs};
use crate::stop::{Scan, StopScanner};
use crate::timing::{Clock, MaskStats, Timings};

/// An error from a model or a matcher, kept as the source of the engine's error.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Logits a device is still computing: await them.
pub type PendingLogits = Pin<Box<dyn Future<Output = Result<Vec<f32>, BoxError>>>>;

/// The most likely tokens with their logits, which a device is still choosing: await them.
pub type PendingTop = Pin<Box<dyn Future<Output = Result<Vec<(u32, f32)>, BoxError>>>>;

/// Gives logits for the next token. The model implements this.
pub trait LogitsSource {
    /// Appends `tokens` to the sequence fed so far (the prompt first, then each sampled
    /// token) and returns the logits for the token that follows.
    fn forward(&mut self, tokens: &[u32]) -> Result<Vec<f32>, BoxError>;

    /// As [`LogitsSource::forward`], but returns once the work is queued: the caller computes
    /// the next mask while the device runs, then awaits the logits. A device that can only
    /// read back asynchronously (WebGPU) must implement this. The default computes now.
    fn submit(&mut self, tokens: &[u32]) -> PendingLogits {
        Box::pin(std::future::ready(self.forward(tokens)))
    }

    /// How many logits [`LogitsSource::forward`] returns, when known before the first pass:
    /// the loop then computes the first mask beside the prompt's pass (and, where
    /// [`LogitsSource::skips_unwanted`], asks only for the first token's allowed logits)
    /// instead of after it.
    fn vocab_size(&self) -> Option<usize> {
        None
    }

    /// Whether [`LogitsSource::forward_wanted`] and [`LogitsSource::submit_wanted`] compute
    /// only the logits asked for (the model skips the output head's other rows). The loop
    /// then hands it the grammar's mask; otherwise it overlaps the mask with
    /// [`LogitsSource::submit`].
    fn skips_unwanted(&self) -> bool {
        false
    }

    /// As [`LogitsSource::forward`] where only some logits will be read. `wanted` is called
    /// once, when the pass reaches the output head, and gives the tokens whose logits are
    /// needed as a bitmask (bit i of word i / 32), or `None` for all; the others' logits may
    /// hold anything. The default computes every logit.
    fn forward_wanted(
        &mut self,
        tokens: &[u32],
        wanted: &mut dyn FnMut() -> Option<Vec<u32>>,
    ) -> Result<Vec<f32>, BoxError> {
        let logits = self.forward(tokens);
        wanted();
        logits
    }

    /// As [`LogitsSource::forward_wanted`], but returns once the work is queued, as
    /// [`LogitsSource::submit`] does: `wanted` is still called before this returns (when the
    /// pass reaches the output head, the layers queued), and the logits are awaited. A device
    /// that can only read back asynchronously (WebGPU) must implement this. The default
    /// computes now.
    fn submit_wanted(
        &mut self,
        tokens: &[u32],
        wanted: &mut dyn FnMut() -> Option<Vec<u32>>,
    ) -> PendingLogits {
        Box::pin(std::future::ready(self.forward_wanted(tokens, wanted)))
    }

    /// As [`LogitsSource::submit_wanted`], but only the `k` wanted tokens with the largest
    /// logits come back, with their logits, largest first and the lowest id first among
    /// equals (fewer where fewer wanted tokens have a logit above -inf). A sampler whose chain
    /// starts by keeping the `k` most likely tokens reads nothing more (greedy decoding's `k`
    /// is 1), and a GPU can choose them itself and send back `2k` words rather than every
    /// logit. The loop calls it where [`LogitsSource::skips_unwanted`]; the default chooses
    /// among [`LogitsSource::submit_wanted`]'s logits.
    fn submit_top(
        &mut self,
        tokens: &[u32],
        wanted: &mut dyn FnMut() -> Option<Vec<u32>>,
        k: usize,
    ) -> PendingTop {
        top_among_logits(self, tokens, wanted, k)
    }

    /// Starts a new sequence that opens with `prompt`. Returns how many leading tokens of
    /// `prompt` the source still holds from the previous sequence (llama.cpp's
    /// `cache_prompt`), having forgotten everything after them; the loop feeds only the rest.
    /// The default holds nothing.
    fn begin(&mut self, prompt: &[u32]) -> Result<usize, BoxError> {
        let _ = prompt;
        Ok(0)
    }
}

/// The vocabulary as the loop needs it. The tokenizer implements this. `Sync`: the grammar
/// thread may read it.
pub trait Vocabulary: Sync {
    /// The bytes a token stands for in generated text (empty for control tokens).
    fn token_bytes(&self, token: u32) -> &[u8];
    /// The end-of-generation tokens (eos, eot, `<|im_end|>`…).
    fn end_of_generation(&self) -> &[u32];
    /// Tokenizes generated text (no BOS, no special tokens), for fast-forwarding bytes the
    /// grammar forces. `None` when the vocabulary cannot.
    fn tokenize(&self, _bytes: &[u8]) -> Option<Vec<u32>> {
        None
    }
}

/// Says which tokens may come next. The grammar matcher implements this.
pub trait TokenConstraint {
    /// Sets bit i of `mask` (`mask[i / 32] >> (i % 32) & 1`) for every allowed token i; the
    /// buffer arrives zeroed. End-of-generation tokens are the loop's business: their bits
    /// are overwritten from [`TokenConstraint::is_accepting`].
    fn fill_mask(&mut self, mask: &mut [u32]) -> Result<(), BoxError>;
    /// Advances past `token` (never an end-of-generation token).
    fn commit(&mut self, token: u32) -> Result<(), BoxError>;
    /// Whether the text so far is a complete document.
    fn is_accepting(&self) -> bool;
    /// The shortest bytes that complete the document from here, if the constraint knows
    /// them (used by "finish inside the budget").
    fn closing_bytes(&mut self) -> Option<Vec<u8>> {
        None
    }
    /// The fewest bytes completing the document after `bytes` (a token's), without
    /// committing them; `None` when unknown (the budget is then steered by
    /// [`TokenConstraint::closing_bytes`] alone) or when nothing completes it.
    fn closing_cost_after(&mut self, _bytes: &[u8]) -> Option<usize> {
        None
    }
    /// The mask cache's hit rate, if it keeps one.
    fn cache_hit_rate(&self) -> Option<f64> {
        None
    }
    /// The bytes every continuation must start with (for fast-forward); empty if unknown.
    fn forced_bytes(&mut self) -> Vec<u8> {
        Vec::new()
    }
    /// Whether `token` may come next, without committing it. The default knows nothing and
    /// says no, which turns fast-forward off.
    fn allows(&mut self, _token: u32) -> bool {
        false
    }
}

/// Why generation ended (llama.cpp's `stop_type`, plus cancellation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopKind {
    /// An end-of-generation token, or a grammar with nothing left to add.
    Eos,
    /// A stop string.
    Word,
    /// `n_predict` or the context size.
    Limit,
    /// The caller cancelled.
    Cancelled,
}

/// Probabilities reported for one generated token (`n_probs`).
#[derive(Debug, Clone, PartialEq)]
pub struct TokenProbs {
    pub token: u32,
    /// The token's probability under the softmax of the raw logits.
    pub p: f32,
    pub top: Vec<TokenProb>,
}

/// What the streaming callback sees after each token.
#[derive(Debug)]
pub struct Event<'a> {
    pub token: u32,
    /// Text settled by this token (may be empty while a stop string or a character is
    /// still open; the held bytes come with a later event).
    pub text: &'a str,
    pub probs: Option<&'a TokenProbs>,
}

/// The loop's settings, taken from a [`Request`] plus the context size.
#[derive(Debug, Clone)]
pub struct GenerateOptions {
    pub n_predict: Option<u32>,
    pub stop: Vec<String>,
    pub ignore_eos: bool,
    pub n_probs: u32,
    pub finish_in_budget: bool,
    /// Context size: prompt plus generated tokens never exceed it.
    pub n_ctx: usize,
    /// Compute the next mask on a second thread while the model runs (ignored in wasm,
    /// where the browser overlaps GPU work with the mask instead).
    pub overlap: bool,
    /// Append the tokens of bytes the grammar forces without sampling them, fed to the model
    /// in one batch. The last token of a forced run is left to sampling, since the model may
    /// merge it with what follows.
    pub fast_forward: bool,
}

impl GenerateOptions {
    pub fn from_request(request: &Request, n_ctx: usize) -> Self {
        Self {
            n_predict: request.n_predict,
            stop: request.stop.clone(),
            ignore_eos: request.ignore_eos,
            n_probs: request.n_probs,
            finish_in_budget: request.finish_in_budget,
            n_ctx,
            overlap: cfg!(not(target_arch = "wasm32")),
            fast_forward: request.fast_forward,
        }
    }
}

/// The result of one generation.
#[derive(Debug, Clone)]
pub struct Output {
    /// The generated text, cut before a stop string; bytes that are not UTF-8 are replaced.
    pub text: String,
    /// Every sampled token, the end-of-generation one included.
    pub tokens: Vec<u32>,
    pub stop: StopKind,
    pub stopping_word: Option<String>,
    /// Whether the context size (not `n_predict`) ended generation.
    pub truncated: bool,
    pub n_prompt: usize,
    pub probs: Vec<TokenProbs>,
    pub timings: Timings,
    /// Present when a constraint was applied.
    pub mask_stats: Option<MaskStats>,
    /// Tokens appended by fast-forward, without sampling (included in `tokens`).
    pub fast_forwarded: usize,
    /// Forward passes after the prompt's (one per sampled token, batches counting once).
    pub forward_passes: usize,
}

/// What a caller hands the loop besides the model: streaming, cancellation, the clock.
pub struct Control<'a> {
    /// Called after every token; `ControlFlow::Break` cancels.
    pub on_event: &'a mut dyn FnMut(&Event<'_>) -> ControlFlow<()>,
    /// Set from anywhere (another thread, a worker message) to cancel.
    pub cancel: Option<&'a AtomicBool>,
    pub clock: &'a dyn Clock,
}

/// Runs one generation to its end on this thread: [`generate_async`] for sources whose
/// logits come at once (everything but WebGPU, which must be awaited).
pub fn generate(
    model: &mut dyn LogitsSource,
    vocab: &dyn Vocabulary,
    constraint: Option<&mut (dyn TokenConstraint + Send)>,
    sampler: &mut Sampler,
    prompt: &[u32],
    options: &GenerateOptions,
    control: &mut Control<'_>,
) -> Result<Output, Error> {
    block_on(generate_async(
        model, vocab, constraint, sampler, prompt, options, control,
    ))
}

/// Runs one generation. `prompt` must not be empty.
///
/// The grammar's work for the next step (commit the token, compute the mask) runs while the
/// model computes the next logits, so a mask costs nothing as long as it is faster than a
/// forward pass: on a second thread with [`GenerateOptions::overlap`] (native targets), and
/// between [`LogitsSource::submit`] and the await where the device is asynchronous (WebGPU).
pub async fn generate_async(
    model: &mut dyn LogitsSource,
    vocab: &dyn Vocabulary,
    mut constraint: Option<&mut (dyn TokenConstraint + Send)>,
    sampler: &mut Sampler,
    prompt: &[u32],
    options: &GenerateOptions,
    control: &mut Control<'_>,
) -> Result<Output, Error> {
    let clock = control.clock;
    let eog = vocab.end_of_generation();
    let scanner = StopScanner::new(&options.stop);
    let budget = options.n_predict.filter(|_| options.finish_in_budget);
    let mut masking = Masking {
        mask: Vec::new(),
        times_us: Vec::new(),
        overlap: options.overlap,
        clock,
        ending: Ending {
            eog,
            ignore_eos: options.ignore_eos,
            vocab,
            left: budget.map(|n| n as usize),
        },
    };
    // Under a constraint the sampler reads only the logits of tokens the mask allows: a model
    // may skip the rest, unless `n_probs` reports the probabilities of the raw logits, which
    // take them all. A chain that keeps the k most likely first reads only those, from a
    // model that computes only what it is asked for (it implements `submit_wanted`, which
    // `submit_top` calls).
    let top = sampler
        .reads_at_most()
        .filter(|_| options.n_probs == 0 && model.skips_unwanted());
    // Without a constraint, with `ignore_eos`, a sampler reading only the most likely tokens
    // chooses among every one but end-of-generation (when the model says its vocabulary's
    // size; else it reads every logit).
    let not_eog = match (top, options.ignore_eos, model.vocab_size()) {
        (Some(_), true, Some(n)) => {
            let mut mask = vec![u32::MAX; n.div_ceil(32)];
            for &e in eog {
                set_bit(&mut mask, e as usize, false);
            }
            Some(mask)
        }
        _ => None,
    };
    let free = match (top, options.ignore_eos, &not_eog) {
        (None, ..) | (_, true, None) => Free::Logits,
        (Some(k), false, _) => Free::Top { k, among: None },
        (Some(k), true, Some(mask)) => Free::Top {
            k,
            among: Some(mask),
        },
    };
    let reads = Reads {
        only_allowed: options.n_probs == 0,
        top,
        free,
    };

    let t_start = clock.now_ms();
    // At least the prompt's last token is fed: its logits start the generation.
    let cached = model
        .begin(prompt)
        .map_err(Error::Logits)?
        .min(prompt.len().saturating_sub(1));
    let mut scores = advance(
        model,
        constraint.as_deref_mut(),
        None,
        &prompt[cached..],
        &mut masking,
        &reads,
    )
    .await?;
    let t_prompt = clock.now_ms();
    for &t in prompt {
        sampler.accept(t);
    }
    let mut n_vocab = None;
    let mut tokens = Vec::new();
    let mut out_text = TextOut::default();
    let mut fast_forwarded = 0usize;
    let mut forward_passes = 0usize;
    let mut probs = Vec::new();
    let mut stopping_word = None;
    let mut truncated = false;

    let stop = 'generation: loop {
        if control.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
            break StopKind::Cancelled;
        }
        if options
            .n_predict
            .is_some_and(|n| tokens.len() >= n as usize)
        {
            break StopKind::Limit;
        }
        if prompt.len() + tokens.len() >= options.n_ctx {
            truncated = true;
            break StopKind::Limit;
        }
        if let Scores::Logits(logits) = &scores {
            match n_vocab {
                None => n_vocab = Some(logits.len()),
                Some(expected) if expected != logits.len() => {
                    return Err(Error::LogitsLength {
                        expected,
                        got: logits.len(),
                    });
                }
                Some(_) => {}
            }
        }

        let allowed = match constraint.as_deref_mut() {
            Some(c) => {
                // The mask `advance` computed, end-of-generation and the budget settled.
                if masking.mask.iter().all(|&w| w == 0) {
                    if c.is_accepting() {
                        // Complete, and end-of-generation is off or absent: nothing to add.
                        break StopKind::Eos;
                    }
                    return Err(Error::EmptyMask { step: tokens.len() });
                }
                Some(masking.mask.as_slice())
            }
            None => {
                if options.ignore_eos
                    && let Scores::Logits(logits) = &mut scores
                {
                    // llama.cpp adds a -inf logit bias on every end-of-generation token.
                    for &e in eog {
                        if let Some(l) = logits.get_mut(e as usize) {
                            *l = f32::NEG_INFINITY;
                        }
                    }
                }
                None
            }
        };

        let empty = Error::EmptyMask { step: tokens.len() };
        let (token, report) = match &scores {
            Scores::Logits(logits) => {
                let token = sampler.sample(logits, allowed).ok_or(empty)?.token;
                let report = (options.n_probs > 0).then(|| {
                    let (top, p) = top_probs(logits, options.n_probs as usize, token);
                    TokenProbs { token, p, top }
                });
                (token, report)
            }
            // The most likely allowed tokens, which the model chose.
            Scores::Top(top) => (sampler.sample_top(top).ok_or(empty)?.token, None),
        };
        sampler.accept(token);
        tokens.push(token);

        if eog.contains(&token) {
            if let Some(r) = report {
                probs.push(r);
            }
            break StopKind::Eos;
        }
        let (text, word) = out_text.push(&scanner, vocab.token_bytes(token));
        let flow = (control.on_event)(&Event {
            token,
            text: &text,
            probs: report.as_ref(),
        });
        if let Some(r) = report {
            probs.push(r);
        }
        if let Some(w) = word {
            stopping_word = Some(w);
            break StopKind::Word;
        }
        if flow.is_break() {
            break StopKind::Cancelled;
        }
        if options
            .n_predict
            .is_some_and(|n| tokens.len() >= n as usize)
        {
            // Do not pay for logits nobody will use.
            break StopKind::Limit;
        }
        let mut feed = vec![token];
        let mut committed = false;
        if options.fast_forward
            && let Some(c) = constraint.as_deref_mut()
        {
            c.commit(token).map_err(Error::Matcher)?;
            committed = true;
            // Leave room for at least one sampled token within both limits.
            let left = options
                .n_predict
                .map_or(usize::MAX, |n| n as usize - tokens.len());
            let ctx_left = options.n_ctx.saturating_sub(prompt.len() + tokens.len());
            for t in forced_tokens(c, vocab, left.min(ctx_left).saturating_sub(1))? {
                sampler.accept(t);
                tokens.push(t);
                feed.push(t);
                fast_forwarded += 1;
                let (text, word) = out_text.push(&scanner, vocab.token_bytes(t));
                let flow = (control.on_event)(&Event {
                    token: t,
                    text: &text,
                    probs: None,
                });
                if let Some(w) = word {
                    stopping_word = Some(w);
                    break 'generation StopKind::Word;
                }
                if flow.is_break() {
                    break 'generation StopKind::Cancelled;
                }
            }
        }
        forward_passes += 1;
        masking.ending.left = budget.map(|n| (n as usize).saturating_sub(tokens.len()));
        scores = advance(
            model,
            constraint.as_deref_mut(),
            (!committed).then_some(token),
            &feed,
            &mut masking,
            &reads,
        )
        .await?;
    };

    // Whatever was held back (an unfinished stop-string prefix, a partial character) is
    // settled now that nothing follows.
    if out_text.sent < out_text.bytes.len() && stop != StopKind::Word {
        let rest = String::from_utf8_lossy(&out_text.bytes[out_text.sent..]).into_owned();
        let last = tokens.last().copied().unwrap_or(0);
        let _ = (control.on_event)(&Event {
            token: last,
            text: &rest,
            probs: None,
        });
    }
    let t_end = clock.now_ms();
    let decode_ms = t_end - t_prompt;
    let mask_stats = constraint
        .as_deref()
        .map(|c| MaskStats::from_samples(&masking.times_us, decode_ms, c.cache_hit_rate()));
    Ok(Output {
        text: String::from_utf8_lossy(&out_text.bytes).into_owned(),
        n_prompt: prompt.len(),
        timings: Timings {
            cache_n: cached,
            ..Timings::new(
                prompt.len() - cached,
                t_prompt - t_start,
                tokens.len(),
                decode_ms,
            )
        },
        tokens,
        stop,
        stopping_word,
        truncated,
        probs,
        mask_stats,
        fast_forwarded,
        forward_passes,
    })
}

/// The generated bytes and how far they have been streamed.
#[derive(Default)]
struct TextOut {
    bytes: Vec<u8>,
    sent: usize,
}

impl TextOut {
    /// Appends a token's bytes; returns the text now settled and the stop string it
    /// completed, if any (the text is then cut before it).
    fn push(&mut self, scanner: &StopScanner, piece: &[u8]) -> (String, Option<String>) {
        self.bytes.extend_from_slice(piece);
        let (settled, word) = match scanner.scan(&self.bytes, piece.len()) {
            Scan::Stop { at, word } => {
                self.bytes.truncate(at);
                (self.bytes.len(), Some(word))
            }
            Scan::Continue { safe } => (safe, None),
        };
        let text =
            String::from_utf8_lossy(&self.bytes[self.sent.min(settled)..settled]).into_owned();
        self.sent = self.sent.max(settled);
        (text, word)
    }
}

/// The tokens of the bytes the constraint forces, committed to it, at most `max`. The last
/// token of the run is not taken: the model may join its bytes with what comes next.
fn forced_tokens(
    c: &mut (dyn TokenConstraint + Send + '_),
    vocab: &dyn Vocabulary,
    max: usize,
) -> Result<Vec<u32>, Error> {
    let bytes = c.forced_bytes();
    if bytes.is_empty() || max == 0 {
        return Ok(Vec::new());
    }
    let Some(mut run) = vocab.tokenize(&bytes) else {
        return Ok(Vec::new());
    };
    run.pop();
    run.truncate(max);
    let mut taken = Vec::with_capacity(run.len());
    for t in run {
        if !c.allows(t) {
            break;
        }
        c.commit(t).map_err(Error::Matcher)?;
        taken.push(t);
    }
    Ok(taken)
}

/// The grammar's side of the steps: the mask it fills, the time each step took, and how it
/// runs beside the model.
struct Masking<'a> {
    /// Bit i of word i / 32 allows token i; empty until the model says its vocabulary size
    /// or its first logits give it.
    mask: Vec<u32>,
    times_us: Vec<f64>,
    /// Whether the grammar's step runs on a second thread (native targets).
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    overlap: bool,
    clock: &'a dyn Clock,
    ending: Ending<'a>,
}

/// What settles a mask once the grammar has filled it: whether end-of-generation is allowed,
/// and "finish inside the budget".
#[derive(Clone, Copy)]
struct Ending<'a> {
    eog: &'a [u32],
    ignore_eos: bool,
    vocab: &'a dyn Vocabulary,
    /// Tokens left before `n_predict`, when finishing inside it.
    left: Option<usize>,
}

impl Masking<'_> {
    /// Commits `token` (if any) and computes the next mask, timed.
    fn step(
        &mut self,
        c: &mut (dyn TokenConstraint + Send + '_),
        token: Option<u32>,
    ) -> Result<(), Error> {
        let us = grammar_step(c, token, &mut self.mask, self.clock, &self.ending)?;
        self.times_us.push(us);
        Ok(())
    }
}

/// What the loop samples from: the logits, or the most likely allowed tokens the model chose
/// with their logits.
enum Scores {
    Logits(Vec<f32>),
    Top(Vec<(u32, f32)>),
}

/// What the loop reads of the model's logits.
struct Reads<'a> {
    /// Only those of the tokens a constraint allows (no `n_probs`).
    only_allowed: bool,
    /// Only the most likely of those, this many ([`LogitsSource::submit_top`]).
    top: Option<usize>,
    /// Without a constraint.
    free: Free<'a>,
}

/// What the loop reads of an unconstrained step's logits.
enum Free<'a> {
    /// All of them.
    Logits,
    /// The `k` most likely among the tokens `among` allows (every one when `None`).
    Top { k: usize, among: Option<&'a [u32]> },
}

type PendingScores = Pin<Box<dyn Future<Output = Result<Scores, BoxError>>>>;

/// [`LogitsSource::submit_top`] with `top`, else [`LogitsSource::submit_wanted`].
fn submit_scores(
    model: &mut dyn LogitsSource,
    feed: &[u32],
    top: Option<usize>,
    wanted: &mut dyn FnMut() -> Option<Vec<u32>>,
) -> PendingScores {
    match top {
        Some(k) => {
            let top = model.submit_top(feed, wanted, k);
            Box::pin(async move { top.await.map(Scores::Top) })
        }
        None => {
            let logits = model.submit_wanted(feed, wanted);
            Box::pin(async move { logits.await.map(Scores::Logits) })
        }
    }
}

/// One step of work after a token is chosen (or, with `token: None`, after the prompt): the
/// model's logits for `feed`, and the constraint's commit of `token` plus its next mask,
/// side by side on two threads when `overlap` is on, else between the model's submit and
/// the await of its logits. Where `reads` allows, only the logits of the tokens the mask
/// allows are computed, or only the most likely of them (see [`advance_wanted`]).
async fn advance<'c>(
    model: &mut dyn LogitsSource,
    constraint: Option<&mut (dyn TokenConstraint + Send + 'c)>,
    token: Option<u32>,
    feed: &[u32],
    masking: &mut Masking<'_>,
    reads: &Reads<'_>,
) -> Result<Scores, Error> {
    let Some(c) = constraint else {
        let pending = match reads.free {
            Free::Top { k, among } => {
                submit_scores(model, feed, Some(k), &mut || among.map(<[u32]>::to_vec))
            }
            Free::Logits => {
                let logits = model.submit(feed);
                Box::pin(async move { logits.await.map(Scores::Logits) })
            }
        };
        return pending.await.map_err(Error::Logits);
    };
    // The mask's size is the model's logits', which a model may tell before its first pass;
    // otherwise the mask is sized after the first forward (no overlap for the prompt's step).
    if masking.mask.is_empty() {
        match model.vocab_size() {
            Some(n) => masking.mask.resize(n.div_ceil(32), 0),
            None => {
                let logits = model.submit(feed).await.map_err(Error::Logits)?;
                masking.mask.resize(logits.len().div_ceil(32), 0);
                masking.step(c, token)?;
                return Ok(Scores::Logits(logits));
            }
        }
    }
    // `top` implies a model that skips the unwanted.
    if reads.only_allowed && model.skips_unwanted() {
        return advance_wanted(model, c, token, feed, masking, reads.top).await;
    }
    #[cfg(not(target_arch = "wasm32"))]
    if masking.overlap {
        let (mask, clock, ending) = (&mut masking.mask, masking.clock, &masking.ending);
        let (logits, grammar) = std::thread::scope(|s| {
            let worker = s.spawn(|| grammar_step(c, token, mask, clock, ending));
            let logits = model.forward(feed);
            (logits, worker.join())
        });
        let us = grammar.map_err(|_| Error::Matcher("the grammar thread panicked".into()))??;
        masking.times_us.push(us);
        return logits.map(Scores::Logits).map_err(Error::Logits);
    }
    let pending = model.submit(feed);
    masking.step(c, token)?;
    pending.await.map(Scores::Logits).map_err(Error::Logits)
}

/// [`advance`] for a model that computes only the logits asked for: the grammar's step runs
/// beside the model's layers (on a second thread with `overlap`, else when the pass reaches
/// the output head), and its mask says which of the head's rows the model computes, and,
/// with `top`, among which tokens it chooses the most likely. Under a JSON Schema most
/// steps allow a few dozen tokens, and the head is up to two thirds of a step's multiply-adds
/// (Gemma 3). A GPU runs the layers while the mask is computed, then the head's allowed rows
/// (see [`LogitsSource::submit_wanted`]).
async fn advance_wanted<'c>(
    model: &mut dyn LogitsSource,
    c: &mut (dyn TokenConstraint + Send + 'c),
    token: Option<u32>,
    feed: &[u32],
    masking: &mut Masking<'_>,
    top: Option<usize>,
) -> Result<Scores, Error> {
    #[cfg(not(target_arch = "wasm32"))]
    if masking.overlap {
        // The worker owns the mask while it computes it, and hands it back when joined.
        let (mut own, clock) = (std::mem::take(&mut masking.mask), masking.clock);
        let ending = masking.ending;
        let (pending, grammar) = std::thread::scope(|s| {
            let mut worker = Some(s.spawn(move || {
                let us = grammar_step(c, token, &mut own, clock, &ending);
                (own, us)
            }));
            let mut joined = None;
            let pending = submit_scores(model, feed, top, &mut || {
                joined = worker.take()?.join().ok();
                match &joined {
                    Some((own, Ok(_))) => Some(own.clone()),
                    _ => None,
                }
            });
            // A model that failed before its head never asked.
            if let Some(worker) = worker.take() {
                joined = worker.join().ok();
            }
            (pending, joined)
        });
        let (own, us) =
            grammar.ok_or_else(|| Error::Matcher("the grammar thread panicked".into()))?;
        masking.mask = own;
        masking.times_us.push(us?);
        return pending.await.map_err(Error::Logits);
    }
    let mut stepped = None;
    let pending = submit_scores(model, feed, top, &mut || {
        let step = masking.step(c, token);
        let wanted = step.is_ok().then(|| masking.mask.clone());
        stepped = Some(step);
        wanted
    });
    stepped.unwrap_or_else(|| masking.step(c, token))?;
    pending.await.map_err(Error::Logits)
}

/// Commits `token` (if any), computes the next mask and settles it (`ending`); returns the
/// time taken in µs.
fn grammar_step<'c>(
    c: &mut (dyn TokenConstraint + Send + 'c),
    token: Option<u32>,
    mask: &mut [u32],
    clock: &dyn Clock,
    ending: &Ending<'_>,
) -> Result<f64, Error> {
    let t0 = clock.now_ms();
    if let Some(t) = token {
        c.commit(t).map_err(Error::Matcher)?;
    }
    mask.fill(0);
    c.fill_mask(mask).map_err(Error::Matcher)?;
    let can_end = c.is_accepting() && !ending.ignore_eos;
    for &e in ending.eog {
        set_bit(mask, e as usize, can_end);
    }
    if let Some(left) = ending.left {
        steer_to_ending(c, ending.vocab, mask, left, ending.eog, can_end);
    }
    Ok((clock.now_ms() - t0) * 1e3)
}

/// [`LogitsSource::submit_top`]'s default: the `k` most likely wanted tokens among
/// [`LogitsSource::submit_wanted`]'s logits.
pub(crate) fn top_among_logits<S: LogitsSource + ?Sized>(
    source: &mut S,
    tokens: &[u32],
    wanted: &mut dyn FnMut() -> Option<Vec<u32>>,
    k: usize,
) -> PendingTop {
    let mut mask = None;
    let pending = source.submit_wanted(tokens, &mut remembering(wanted, &mut mask));
    Box::pin(async move { Ok(stampo_model::host_top(&pending.await?, mask.as_deref(), k)) })
}

/// `wanted`, keeping a copy of the mask it gives in `kept`: for choosing among a whole row's
/// logits, which the mask's tokens only may win.
pub(crate) fn remembering<'a>(
    wanted: &'a mut dyn FnMut() -> Option<Vec<u32>>,
    kept: &'a mut Option<Vec<u32>>,
) -> impl FnMut() -> Option<Vec<u32>> + 'a {
    move || {
        let mask = wanted();
        kept.clone_from(&mask);
        mask
    }
}

/// The indices of the bits set in `mask` (bit i is `mask[i / 32] >> (i % 32) & 1`).
pub(crate) fn mask_bits(mask: &[u32]) -> impl Iterator<Item = usize> + '_ {
    mask.iter().enumerate().flat_map(|(w, &word)| {
        let mut bits = word;
        std::iter::from_fn(move || {
            (bits != 0).then(|| {
                let i = w * 32 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                i
            })
        })
    })
}

fn set_bit(mask: &mut [u32], i: usize, on: bool) {
    if let Some(w) = mask.get_mut(i / 32) {
        if on {
            *w |= 1 << (i % 32);
        } else {
            *w &= !(1 << (i % 32));
        }
    }
}

/// How far ahead of the steering (in tokens) "finish inside the budget" starts checking that
/// each token leaves a document that still closes in time. A single token lengthening the
/// shortest ending by more than this can still spend the budget: the check costs a walk of
/// every allowed token's bytes per step, so it does not run for the whole generation.
const BUDGET_WINDOW: usize = 128;

/// "Finish inside the budget": once the tokens left are no more than the shortest ending's
/// bytes plus one (for end-of-generation), allow only tokens that spell a prefix of that
/// ending. Every byte being a token (byte-level vocabularies), the ending then always fits;
/// the ending only gets shorter as its prefixes are committed. In the [`BUDGET_WINDOW`]
/// before that, tokens after which the ending would no longer fit are removed.
fn steer_to_ending(
    c: &mut dyn TokenConstraint,
    vocab: &dyn Vocabulary,
    mask: &mut [u32],
    remaining: usize,
    eog: &[u32],
    can_end: bool,
) {
    let Some(ending) = c.closing_bytes() else {
        return;
    };
    if remaining > ending.len() + 1 + BUDGET_WINDOW {
        return;
    }
    if remaining > ending.len() + 1 {
        // Not yet steering, but one token may lengthen the ending by many bytes (`,{`
        // opening another array item with required members): keep only the tokens after
        // which the ending still fits, at one byte per token plus the end of generation.
        keep_closable(c, vocab, mask, remaining - 2, eog);
        return;
    }
    if ending.is_empty() && can_end {
        // Complete: end now.
        mask.fill(0);
        for &e in eog {
            set_bit(mask, e as usize, true);
        }
        return;
    }
    let mut steered = vec![0u32; mask.len()];
    let mut any = false;
    for i in mask_bits(mask) {
        let piece = vocab.token_bytes(i as u32);
        if !piece.is_empty() && ending.starts_with(piece) {
            set_bit(&mut steered, i, true);
            any = true;
        }
    }
    // If no allowed token spells a prefix of the ending, keep the grammar's own mask.
    if any {
        mask.copy_from_slice(&steered);
    }
}

/// Clears from `mask` every token after which the document needs more than `budget` bytes
/// to close. End-of-generation tokens are left as they are; a constraint that cannot tell
/// the cost leaves the mask unchanged, and so does a step where no token would be left.
fn keep_closable(
    c: &mut dyn TokenConstraint,
    vocab: &dyn Vocabulary,
    mask: &mut [u32],
    budget: usize,
    eog: &[u32],
) {
    if c.closing_cost_after(&[]).is_none() {
        return;
    }
    let mut kept = mask.to_vec();
    let mut any = false;
    for i in mask_bits(mask).filter(|&i| !eog.contains(&(i as u32))) {
        match c.closing_cost_after(vocab.token_bytes(i as u32)) {
            Some(cost) if cost <= budget => any = true,
            _ => set_bit(&mut kept, i, false),
        }
    }
    if any {
        mask.copy_from_slice(&kept);
    }
}
