//! A model file made ready for requests: the transformer as the loop's [`LogitsSource`], its
//! tokenizer and chat template, and the vocabulary the grammar engine masks. The native CLI
//! and the browser runtime both load models through [`LoadedModel`].

use std::sync::Arc;

use stampo_gguf::Gguf;
use stampo_grammar::vocab::Vocabulary as GrammarVocabulary;
use stampo_model::{
    Cache, LoadOptions, MAX_TOP, PREFILL_TILE, Transformer, read_top_async, to_vec, to_vec_async,
    top_logits,
};
use stampo_tokenizer::{ChatTemplate, Tokenizer};

use crate::error::Error;
use crate::generate::{
    BoxError, LogitsSource, PendingLogits, PendingTop, mask_bits, remembering, top_among_logits,
};
use crate::session::Session;
use crate::text::TokenizerText;

/// One sequence of a [`Transformer`] in one preallocated KV cache. The tokens it holds are
/// remembered, so a request that repeats the previous prompt's start (the same system
/// prompt, say) skips that prefix, as llama.cpp's `cache_prompt` does.
pub struct ModelSource {
    model: Transformer,
    cache: Cache,
    held: Vec<u32>,
}

impl ModelSource {
    pub fn new(model: Transformer) -> Self {
        let cache = model.new_cache();
        Self {
            model,
            cache,
            held: Vec::new(),
        }
    }

    pub fn model(&self) -> &Transformer {
        &self.model
    }

    /// Where replaying decoding steps on the wgpu device stands ([`Cache::step_graphs`]):
    /// after [`ModelSource::warm_up`], `"recorded"` says a step was recorded and later ones
    /// replay; `None` on the CPU.
    pub fn step_graphs(&self) -> Option<&'static str> {
        self.cache.step_graphs()
    }

    /// Positions the KV cache holds: the largest prompt plus generation.
    pub fn context_size(&self) -> usize {
        self.cache.capacity()
    }

    /// Runs what a request runs through the model and forgets it, so that the first request
    /// does not pay for what a device does once: on the wgpu device (WebGPU in the browser),
    /// compiling each kernel's pipeline on first use. After a warm-up of one token, the
    /// host's side of that alone (the noop backend) was 89–260 ms of the first prompt and
    /// 40–42 ms of the first step under a dense mask; on lavapipe Gemma 3's first prompt
    /// waited 4.2 s more than its second (bench/README.md, "Every kernel compiled before the
    /// first request"). On the CPU, where nothing compiles, one token. The KV cache is left
    /// empty.
    pub async fn warm_up(&mut self) -> Result<(), BoxError> {
        self.begin(&[])?;
        let result = self.warm_up_passes().await;
        self.begin(&[])?;
        result
    }

    /// [`ModelSource::warm_up`]'s passes, each as far as the cache holds it: a prompt of
    /// [`PREFILL_TILE`] tokens (a prefill's products, in tiles of tokens); a step whose mask
    /// allows one token (the first decoding step, recorded for replay, and the head's rows
    /// of the allowed tokens); one whose mask allows all (the whole head, the most likely
    /// among the allowed); one without a mask (the most likely of the row); then, in a cache
    /// of more than 256 positions, the attention of a step past 256 keys
    /// ([`Transformer::compile_split_attention`]).
    async fn warm_up_passes(&mut self) -> Result<(), BoxError> {
        if stampo_model::device::is_cpu(&self.model.device()) {
            return self.submit_top(&[0], &mut || None, 1).await.map(drop);
        }
        let words = self.model.vocab_size().div_ceil(32);
        let mut one = vec![0u32; words];
        one[0] = 1;
        let all = vec![u32::MAX; words];
        let capacity = self.cache.capacity();
        if capacity > PREFILL_TILE + 2 {
            self.submit_top(&[0; PREFILL_TILE], &mut || None, 1).await?;
        }
        for mask in [Some(one), Some(all), None] {
            if self.cache.position() < capacity {
                self.submit_top(&[0], &mut || mask.clone(), 1).await?;
            }
        }
        Ok(self.model.compile_split_attention(&self.cache)?)
    }

    /// Queues the forward pass of `tokens`; the logits stay on the device.
    fn queue(&mut self, tokens: &[u32]) -> Result<stampo_model::Tensor<2>, BoxError> {
        let hidden = self.queue_hidden(tokens)?;
        Ok(self.model.logits(hidden))
    }

    /// Queues the forward pass of `tokens` up to the output head: the last token's hidden
    /// state.
    fn queue_hidden(&mut self, tokens: &[u32]) -> Result<stampo_model::Tensor<2>, BoxError> {
        let result = self.model.forward_hidden(tokens, &mut self.cache, false);
        // Whatever happened, what the cache holds is what its position says.
        if result.is_ok() {
            self.held.extend_from_slice(tokens);
        }
        self.held.truncate(self.cache.position());
        Ok(result?)
    }

    /// Queues the forward pass of `tokens` and the output head's rows of the tokens `wanted`
    /// gives (called once the layers are queued, and handed to a GPU, so that they run while
    /// it computes the mask), or all of them: the logits on the device, and the ids they are
    /// of when not all.
    fn queue_wanted(
        &mut self,
        tokens: &[u32],
        wanted: &mut dyn FnMut() -> Option<Vec<u32>>,
    ) -> Result<(stampo_model::Tensor<2>, Option<Vec<u32>>), BoxError> {
        let hidden = self.queue_hidden(tokens)?;
        stampo_model::flush(&hidden.device())?;
        let vocab = self.model.vocab_size();
        let ids: Option<Vec<u32>> = wanted().map(|mask| {
            mask_bits(&mask)
                .take_while(|&i| i < vocab)
                .map(|i| i as u32)
                .collect()
        });
        Ok(match ids {
            // No token wanted (a finished grammar under `ignore_eos`; the loop stops without
            // reading them): the whole head, rather than a product of no rows and buffers of
            // no bytes (lavapipe took those; Chromium's WebGPU was not tried).
            Some(ids)
                if !ids.is_empty() && (ids.len() as f64) <= SPARSE_HEAD_SHARE * vocab as f64 =>
            {
                (self.model.logits_of(hidden, &ids)?, Some(ids))
            }
            _ => (self.model.logits(hidden), None),
        })
    }

    /// Queues the forward pass of `tokens`, the output head's rows `wanted` gives (as
    /// [`ModelSource::queue_wanted`]) and the choice of the `k` most likely of them: on the
    /// device, their columns and logits ([`top_logits`]), and the ids the columns are of when
    /// not every token's.
    fn queue_top(
        &mut self,
        tokens: &[u32],
        wanted: &mut dyn FnMut() -> Option<Vec<u32>>,
        k: usize,
    ) -> Result<(stampo_model::Tensor<1, stampo_model::Int>, Option<Vec<u32>>), BoxError> {
        let mut mask = None;
        let (logits, ids) = self.queue_wanted(tokens, &mut remembering(wanted, &mut mask))?;
        // The logits of chosen rows are all wanted; a whole head's, those the mask allows.
        let allowed = if ids.is_some() { None } else { mask };
        Ok((top_logits(logits, allowed.as_deref(), k)?, ids))
    }
}

/// A vocabulary's logits from `values`, those of `ids` (or of every token, without ids).
fn spread(values: Vec<f32>, ids: Option<Vec<u32>>, vocab: usize) -> Vec<f32> {
    let Some(ids) = ids else { return values };
    // Never read: the loop samples among the wanted tokens only.
    let mut logits = vec![f32::NEG_INFINITY; vocab];
    for (&id, value) in ids.iter().zip(values) {
        logits[id as usize] = value;
    }
    logits
}

/// The share of the vocabulary up to which only the wanted rows of the output head are
/// computed: past it the whole product costs about the same and fills every logit.
const SPARSE_HEAD_SHARE: f64 = 0.75;

impl LogitsSource for ModelSource {
    fn forward(&mut self, tokens: &[u32]) -> Result<Vec<f32>, BoxError> {
        Ok(to_vec(self.queue(tokens)?)?)
    }

    fn submit(&mut self, tokens: &[u32]) -> PendingLogits {
        // A GPU device buffers kernels until enough accumulate or a read asks for them:
        // flush, so the last layers run while the caller computes the mask rather than after.
        let queued = self.queue(tokens).and_then(|logits| {
            stampo_model::flush(&logits.device())?;
            Ok(logits)
        });
        Box::pin(async move { Ok(to_vec_async(queued?).await?) })
    }

    fn vocab_size(&self) -> Option<usize> {
        Some(self.model.vocab_size())
    }

    fn skips_unwanted(&self) -> bool {
        true
    }

    fn forward_wanted(
        &mut self,
        tokens: &[u32],
        wanted: &mut dyn FnMut() -> Option<Vec<u32>>,
    ) -> Result<Vec<f32>, BoxError> {
        let (logits, ids) = self.queue_wanted(tokens, wanted)?;
        Ok(spread(to_vec(logits)?, ids, self.model.vocab_size()))
    }

    fn submit_wanted(
        &mut self,
        tokens: &[u32],
        wanted: &mut dyn FnMut() -> Option<Vec<u32>>,
    ) -> PendingLogits {
        let vocab = self.model.vocab_size();
        let queued = self.queue_wanted(tokens, wanted).and_then(|(logits, ids)| {
            stampo_model::flush(&logits.device())?;
            Ok((logits, ids))
        });
        Box::pin(async move {
            let (logits, ids) = queued?;
            Ok(spread(to_vec_async(logits).await?, ids, vocab))
        })
    }

    fn submit_top(
        &mut self,
        tokens: &[u32],
        wanted: &mut dyn FnMut() -> Option<Vec<u32>>,
        k: usize,
    ) -> PendingTop {
        if !(1..=MAX_TOP).contains(&k) {
            // More than a device chooses: among the logits read back.
            return top_among_logits(self, tokens, wanted, k);
        }
        let queued = self.queue_top(tokens, wanted, k).and_then(|(top, ids)| {
            stampo_model::flush(&top.device())?;
            Ok((top, ids))
        });
        Box::pin(async move {
            let (top, ids) = queued?;
            let top = read_top_async(top).await?;
            let Some(ids) = ids else { return Ok(top) };
            top.into_iter()
                .map(|(column, logit)| match ids.get(column as usize) {
                    Some(&id) => Ok((id, logit)),
                    None => Err(format!(
                        "column {column} of {} chosen logits among the most likely",
                        ids.len()
                    )
                    .into()),
                })
                .collect()
        })
    }

    fn begin(&mut self, prompt: &[u32]) -> Result<usize, BoxError> {
        let common = self
            .held
            .iter()
            .zip(prompt)
            .take_while(|(a, b)| a == b)
            .count();
        self.held.truncate(common);
        self.cache.truncate(common);
        Ok(common)
    }
}

/// Everything a request needs from one model file.
pub struct LoadedModel {
    pub text: TokenizerText,
    pub grammar_vocab: Arc<GrammarVocabulary>,
    pub source: ModelSource,
    /// `general.name`, else the architecture: the `model` field of responses.
    pub name: String,
}

impl LoadedModel {
    /// Parses `bytes` (a whole GGUF file) and loads the model onto `device` with a KV cache of
    /// `context` positions (capped at the model's trained context).
    pub fn load(
        bytes: &[u8],
        device: &stampo_model::Device,
        context: usize,
    ) -> Result<Self, Error> {
        Self::load_reporting(bytes, device, context, &mut |_, _| {})
    }

    /// As [`LoadedModel::load`], calling `progress(bytes_done, bytes_total)` as the weights
    /// go onto the device.
    pub fn load_reporting(
        bytes: &[u8],
        device: &stampo_model::Device,
        context: usize,
        progress: &mut (dyn FnMut(usize, usize) + Send),
    ) -> Result<Self, Error> {
        let gguf = Gguf::parse(bytes).map_err(|e| Error::Gguf(e.to_string()))?;
        Self::from_gguf(&gguf, device, context, progress)
    }

    /// As [`LoadedModel::load_reporting`], from a parsed file.
    pub fn from_gguf(
        gguf: &Gguf<'_>,
        device: &stampo_model::Device,
        context: usize,
        progress: &mut (dyn FnMut(usize, usize) + Send),
    ) -> Result<Self, Error> {
        let model = Transformer::load_reporting(gguf, device, LoadOptions { context }, progress)
            .map_err(|e| Error::Load(e.to_string()))?;
        Self::assemble(gguf, model)
    }

    /// Joins a loaded `model` with the tokenizer, chat template and name in `gguf`'s metadata
    /// (a whole file, or only its header).
    pub fn assemble(gguf: &Gguf<'_>, model: Transformer) -> Result<Self, Error> {
        let tokenizer = Tokenizer::from_gguf(gguf).map_err(|e| Error::Load(e.to_string()))?;
        let text = match ChatTemplate::from_gguf(gguf, &tokenizer) {
            Ok(template) => TokenizerText::with_template(tokenizer, template),
            // A model without a usable template still serves `/completion` prompts; chat
            // requests then get `NoChatTemplate`.
            Err(_) => TokenizerText::new(tokenizer),
        };
        let meta = gguf.metadata();
        let name = meta
            .get_str("general.name")
            .or_else(|_| meta.get_str("general.architecture"))
            .unwrap_or("model")
            .to_string();
        Ok(Self {
            grammar_vocab: Arc::new(text.grammar_vocabulary()),
            text,
            source: ModelSource::new(model),
            name,
        })
    }

    /// A session over this model: run requests with [`Session::run`].
    pub fn session(&mut self, strict: bool) -> Session<'_> {
        let n_ctx = self.source.context_size();
        Session {
            model: &mut self.source,
            encoder: &self.text,
            vocab: &self.text,
            grammar_vocab: Arc::clone(&self.grammar_vocab),
            n_ctx,
            strict,
        }
    }
}
