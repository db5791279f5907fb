//! The decoder every supported architecture is an instance of, its loader and its forward pass.
//!
//! The architecture modules ([`crate::llama`], [`crate::qwen2`], [`crate::gemma3`]) only read
//! their metadata into a [`ModelConfig`]; this module builds the blocks from it.

use burn::module::Module;
use burn::tensor::{Device, ExecutionError, Int, Tensor, TensorData};
use stampo_gguf::Gguf;

use crate::config::{ArchMetadata, LoadOptions, ModelConfig};
use crate::error::{ModelError, Result};
use crate::layers::{Attention, KvCache, Mlp, QkNorm, RmsNorm, Rope};
use crate::quant::{MAX_PART_BYTES, QLinear};
use crate::weights::{StagedTensors, Weights};
use crate::{gemma3, llama, qwen2};

/// One transformer block: pre-norm attention and MLP with residual adds (and, for gemma3,
/// norms of each branch's output before the add).
#[derive(Module, Debug)]
pub struct Block {
    attn_norm: RmsNorm,
    attn: Attention,
    attn_post_norm: Option<RmsNorm>,
    ffn_norm: RmsNorm,
    mlp: Mlp,
    ffn_post_norm: Option<RmsNorm>,
}

/// The residual stream between blocks: `x` and the last block's output `h` (to be normed by
/// `h_norm` first, gemma3's output norms), whose sum is formed by the next norm: one pass for
/// the output norm, the add and the next norm (one launch on a GPU).
struct Residual<'a> {
    x: Tensor<2>,
    h: Option<(Tensor<2>, Option<&'a RmsNorm>)>,
}

impl<'a> Residual<'a> {
    /// `x + h` (`h` normed first by its norm) and the sum's norm by `norm`.
    fn add_norm(self, norm: &RmsNorm) -> (Tensor<2>, Tensor<2>) {
        match self.h {
            Some((h, Some(h_norm))) => norm.norm_add_forward(self.x, h, h_norm),
            Some((h, None)) => norm.add_forward(self.x, h),
            None => {
                let normed = norm.forward(self.x.clone());
                (self.x, normed)
            }
        }
    }

    /// The last `n` of `tokens` rows.
    fn last_rows(self, n: usize) -> Residual<'a> {
        let tokens = self.x.dims()[0];
        Residual {
            x: self.x.narrow(0, tokens - n, n),
            h: self.h.map(|(h, norm)| (h.narrow(0, tokens - n, n), norm)),
        }
    }
}

impl Block {
    fn forward(
        &self,
        residual: Residual<'_>,
        start: usize,
        position: Option<&Tensor<1, Int>>,
        rope: &Rope,
        cache: &mut KvCache,
    ) -> Residual<'_> {
        let (x, normed) = residual.add_norm(&self.attn_norm);
        let h = self.attn.forward(normed, start, position, rope, cache);
        let (x, normed) = Residual {
            x,
            h: Some((h, self.attn_post_norm.as_ref())),
        }
        .add_norm(&self.ffn_norm);
        let h = self.mlp.forward(normed);
        Residual {
            x,
            h: Some((h, self.ffn_post_norm.as_ref())),
        }
    }
}

/// A decoder-only transformer with quantised weights.
#[derive(Module, Debug)]
pub struct Transformer {
    embedding: QLinear,
    blocks: Vec<Block>,
    norm: RmsNorm,
    /// `None` when the output projection is the embedding table (tied).
    output: Option<QLinear>,
    rope: Rope,
    rope_local: Option<Rope>,
    #[module(skip)]
    config: ModelConfig,
    #[module(skip)]
    capacity: usize,
    #[module(skip)]
    gguf_bytes: usize,
    /// Which load this is (clones share it, and their weights): a recorded decoding step
    /// replays only for the model it was recorded with.
    #[module(skip)]
    id: u64,
}

/// The per-sequence state: one KV cache per layer and the next position.
#[derive(Debug)]
pub struct Cache {
    layers: Vec<KvCache>,
    position: usize,
    /// On the wgpu device: the step buffer its kernels read and the recorded decoding step.
    #[cfg(feature = "wgpu")]
    step: Option<crate::step_graph::StepState>,
}

impl Cache {
    /// Positions already processed.
    pub fn position(&self) -> usize {
        self.position
    }

    /// Positions the cache holds.
    pub fn capacity(&self) -> usize {
        self.layers.first().map_or(0, KvCache::capacity)
    }

    /// Forgets the sequence (the memory stays allocated).
    pub fn reset(&mut self) {
        self.position = 0;
    }

    /// Keeps the first `len` positions and forgets the rest (a shared prompt prefix is kept
    /// while a new sequence replaces what followed it).
    pub fn truncate(&mut self, len: usize) {
        self.position = self.position.min(len);
    }

    /// Whether decoding steps on the wgpu device are recorded once and replayed (the
    /// default, unless `STAMPO_WGPU_GRAPHS=0`): the same kernels on the same buffers, the
    /// layers' launches at about a fifteenth of their host work. Nothing changes on the CPU.
    pub fn set_step_graphs(&mut self, on: bool) {
        #[cfg(feature = "wgpu")]
        if let Some(step) = &mut self.step {
            step.set_enabled(on);
        }
        let _ = on;
    }

    /// Where replaying decoding steps stands on the wgpu device: `"recorded"` (a step's
    /// recording is held), `"on"` (nothing recorded yet), `"off"` (turned off, or CubeCL
    /// refused a capture); `None` on the CPU.
    pub fn step_graphs(&self) -> Option<&'static str> {
        #[cfg(feature = "wgpu")]
        if let Some(step) = &self.step {
            return Some(step.state());
        }
        None
    }

    /// Decoding steps so far that replayed an earlier step's recording (0 on the CPU; a step
    /// that records is not counted, though its result comes from a replay too).
    pub fn replayed_steps(&self) -> u64 {
        #[cfg(feature = "wgpu")]
        if let Some(step) = &self.step {
            return step.replays;
        }
        0
    }
}

impl Transformer {
    /// Loads the model in `gguf` onto `device`.
    pub fn load(gguf: &Gguf<'_>, device: &Device, options: LoadOptions) -> Result<Transformer> {
        Self::load_reporting(gguf, device, options, &mut |_, _| {})
    }

    /// As [`Transformer::load`], calling `progress(bytes_done, bytes_total)` after each tensor
    /// is taken onto the device (the GGUF's tensor bytes: a page shows an "upload" phase).
    pub fn load_reporting(
        gguf: &Gguf<'_>,
        device: &Device,
        options: LoadOptions,
        progress: &mut (dyn FnMut(usize, usize) + Send),
    ) -> Result<Transformer> {
        let (config, capacity) = Self::configure(gguf, options)?;
        // The weights live as long as the model: exact-fit device buffers rather than pages
        // sized for reuse, so device memory stays the GGUF's tensor bytes.
        device.memory_persistent_allocations(
            (Weights::new(gguf, device, progress), config),
            |(w, config)| Self::build(w, device, config, capacity),
        )
    }

    /// Builds the model of a streamed file from its `header` (parsed without tensor data)
    /// and the tensors already put on the device as they arrived ([`StagedTensors`]).
    /// Tensors the model does not use are dropped.
    pub fn from_staged(
        header: &Gguf<'_>,
        mut staged: StagedTensors,
        options: LoadOptions,
    ) -> Result<Transformer> {
        let (config, capacity) = Self::configure(header, options)?;
        let device = staged.device().clone();
        let mut progress = |_: usize, _: usize| {};
        device.memory_persistent_allocations(
            (Weights::staged(header, &mut staged, &mut progress), config),
            |(w, config)| Self::build(w, &device, config, capacity),
        )
    }

    /// The architecture's hyper-parameters and the KV cache's positions.
    fn configure(gguf: &Gguf<'_>, options: LoadOptions) -> Result<(ModelConfig, usize)> {
        let arch = gguf.metadata().architecture()?;
        let meta = ArchMetadata::new(gguf.metadata(), arch);
        let mut config = match arch {
            "llama" => llama::config(&meta)?,
            "qwen2" => qwen2::config(&meta)?,
            "gemma3" => gemma3::config(&meta)?,
            other => return Err(ModelError::UnsupportedArchitecture(other.to_string())),
        };
        config.architecture = arch.to_string();
        let capacity = options.context.clamp(1, config.context_length);
        config.check_sizes(&meta, gguf.tensors().len(), capacity)?;
        Ok((config, capacity))
    }

    fn build(
        mut w: Weights<'_, '_>,
        device: &Device,
        config: ModelConfig,
        capacity: usize,
    ) -> Result<Transformer> {
        let c = &config;
        let d = c.d_model;
        let eps = f64::from(c.rms_eps);
        let embd = w
            .dims("token_embd.weight")
            .ok_or_else(|| ModelError::MissingTensor("token_embd.weight".to_string()))?;
        let vocab = embd.get(1).copied().unwrap_or(0) as usize;
        let embedding = w.linear("token_embd.weight", vocab, d, None)?;
        let output = if w.has("output.weight") {
            Some(w.linear("output.weight", vocab, d, None)?)
        } else {
            None
        };
        let norm = RmsNorm::new(w.vector("output_norm.weight", d)?, eps);
        let (q_dim, kv_dim) = (c.heads * c.head_dim, c.kv_heads * c.head_dim);
        let mut blocks = Vec::with_capacity(c.layers);
        for i in 0..c.layers {
            let n = |s: &str| format!("blk.{i}.{s}");
            let bias = |s: &str| c.qkv_bias.then(|| n(s));
            let ff = w
                .dims(&n("ffn_up.weight"))
                .and_then(|dims| dims.get(1).copied())
                .ok_or_else(|| ModelError::MissingTensor(n("ffn_up.weight")))?
                as usize;
            let post_norm = |w: &mut Weights<'_, '_>, s: &str| -> Result<Option<RmsNorm>> {
                if c.post_norms {
                    Ok(Some(RmsNorm::new(w.vector(&n(s), d)?, eps)))
                } else {
                    Ok(None)
                }
            };
            let q = w.linear(
                &n("attn_q.weight"),
                q_dim,
                d,
                bias("attn_q.bias").as_deref(),
            )?;
            let k = w.linear(
                &n("attn_k.weight"),
                kv_dim,
                d,
                bias("attn_k.bias").as_deref(),
            )?;
            let v = w.linear(
                &n("attn_v.weight"),
                kv_dim,
                d,
                bias("attn_v.bias").as_deref(),
            )?;
            let o = w.linear(&n("attn_output.weight"), d, q_dim, None)?;
            let qk_norm = if c.qk_norm {
                let mut head_norm = |s: &str| -> Result<RmsNorm> {
                    Ok(RmsNorm::new(w.vector(&n(s), c.head_dim)?, eps))
                };
                Some(QkNorm {
                    q: head_norm("attn_q_norm.weight")?,
                    k: head_norm("attn_k_norm.weight")?,
                })
            } else {
                None
            };
            let attn = Attention {
                qkv_bias: QLinear::stacked_bias(&[&q, &k, &v]),
                q,
                k,
                v,
                o,
                qk_norm,
                heads: c.heads,
                kv_heads: c.kv_heads,
                head_dim: c.head_dim,
                scale: c.attention_scale,
                window: c.window(i),
            };
            blocks.push(Block {
                attn_norm: RmsNorm::new(w.vector(&n("attn_norm.weight"), d)?, eps),
                attn,
                attn_post_norm: post_norm(&mut w, "post_attention_norm.weight")?,
                ffn_norm: RmsNorm::new(w.vector(&n("ffn_norm.weight"), d)?, eps),
                mlp: Mlp {
                    gate: w.linear(&n("ffn_gate.weight"), ff, d, None)?,
                    up: w.linear(&n("ffn_up.weight"), ff, d, None)?,
                    down: w.linear(&n("ffn_down.weight"), d, ff, None)?,
                    activation: c.activation,
                },
                ffn_post_norm: post_norm(&mut w, "post_ffw_norm.weight")?,
            });
        }
        let rope = Rope::new(
            c.head_dim,
            capacity,
            c.rope_base,
            c.rope_scale,
            c.rope_style,
            device,
        );
        let rope_local = c.sliding_window.as_ref().map(|_| {
            Rope::new(
                c.head_dim,
                capacity,
                c.rope_base_local,
                c.rope_scale,
                c.rope_style,
                device,
            )
        });
        let gguf_bytes = w.gguf_bytes();
        w.finish();
        Ok(Transformer {
            embedding,
            blocks,
            norm,
            output,
            rope,
            rope_local,
            config,
            capacity,
            gguf_bytes,
            id: {
                static LOADS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                LOADS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            },
        })
    }

    /// The hyper-parameters.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// Tokens in the vocabulary (rows of the embedding table).
    pub fn vocab_size(&self) -> usize {
        self.embedding.rows()
    }

    /// The device the weights live on.
    pub fn device(&self) -> Device {
        self.norm.weight.device()
    }

    /// The GGUF tensor bytes the model was built from.
    pub fn gguf_tensor_bytes(&self) -> usize {
        self.gguf_bytes
    }

    /// Bytes the weights occupy on the device (the tied table counted once).
    pub fn weight_bytes(&self) -> usize {
        // Norm weights and biases are `f32`s on every device.
        let floats = |t: &Tensor<1>| t.dims()[0] * std::mem::size_of::<f32>();
        let norm = |n: &RmsNorm| floats(&n.weight);
        let opt = |n: &Option<RmsNorm>| n.as_ref().map_or(0, norm);
        let blocks: usize = self
            .blocks
            .iter()
            .map(|b| {
                let a = &b.attn;
                a.q.device_bytes()
                    + a.k.device_bytes()
                    + a.v.device_bytes()
                    + a.o.device_bytes()
                    + a.qkv_bias.as_ref().map_or(0, floats)
                    + a.qk_norm.as_ref().map_or(0, |n| norm(&n.q) + norm(&n.k))
                    + b.mlp.gate.device_bytes()
                    + b.mlp.up.device_bytes()
                    + b.mlp.down.device_bytes()
                    + norm(&b.attn_norm)
                    + norm(&b.ffn_norm)
                    + opt(&b.attn_post_norm)
                    + opt(&b.ffn_post_norm)
            })
            .sum();
        blocks
            + self.embedding.device_bytes()
            + self.output.as_ref().map_or(0, QLinear::device_bytes)
            + norm(&self.norm)
    }

    /// An empty cache for one sequence, allocated at full capacity now.
    pub fn new_cache(&self) -> Cache {
        let device = self.norm.weight.device();
        let c = &self.config;
        Cache {
            layers: (0..c.layers)
                .map(|_| KvCache::new(c.kv_heads, self.capacity, c.head_dim, &device))
                .collect(),
            position: 0,
            #[cfg(feature = "wgpu")]
            step: (!crate::device::is_cpu(&device)).then(|| {
                crate::step_graph::StepState::new(crate::step_graph::step_tensor(&device))
            }),
        }
    }

    /// Runs `tokens` at the cache's next positions (a prefill when several, a decode step
    /// when one) and returns the logits of the last token, or of every token when `all`.
    ///
    /// Every token's logits are one buffer, which a GPU device holds only up to
    /// [`MAX_PART_BYTES`] (WebGPU's guaranteed binding size): beyond that (129 positions of
    /// Gemma 3's 262,144 tokens) this refuses before running anything, and
    /// [`Transformer::all_logits`] gives them block by block.
    ///
    /// # Shapes
    /// - output: `[1, vocab]`, or `[tokens, vocab]` when `all`
    pub fn forward(&self, tokens: &[u32], cache: &mut Cache, all: bool) -> Result<Tensor<2>> {
        if all && !crate::device::is_cpu(&self.device()) {
            let vocab = self.vocab_size();
            let bytes = tokens.len().saturating_mul(vocab).saturating_mul(4);
            if bytes > MAX_PART_BYTES {
                return Err(ModelError::OutputTooLarge {
                    tokens: tokens.len(),
                    vocab,
                    bytes,
                    limit: MAX_PART_BYTES,
                });
            }
        }
        let x = self.forward_hidden(tokens, cache, all)?;
        Ok(self.head().forward(x))
    }

    /// Every token's logits read back to the host, `tokens × vocab` in token order: as
    /// [`Transformer::forward`] with `all`, on any device and for any number of tokens (the
    /// output head runs over blocks of positions whose logits fit [`MAX_PART_BYTES`]). Blocks
    /// on reading back: native code only (in the browser, [`to_vec_async`]).
    pub fn all_logits(&self, tokens: &[u32], cache: &mut Cache) -> Result<Vec<f32>> {
        let hidden = self.forward_hidden(tokens, cache, true)?;
        let [rows, dim] = hidden.dims();
        let vocab = self.vocab_size();
        let block = (MAX_PART_BYTES / (vocab * 4).max(1)).max(1);
        // (A product that overflows `usize`, on wasm32, fails as the vector grows.)
        let mut all = Vec::with_capacity(rows.checked_mul(vocab).unwrap_or(0));
        for start in (0..rows).step_by(block) {
            let end = (start + block).min(rows);
            let part = hidden.clone().slice([start..end, 0..dim]);
            all.extend(to_vec(self.logits(part))?);
        }
        Ok(all)
    }

    /// One chunk of a perplexity run as llama.cpp's `perplexity` scores it: `chunk` from the
    /// cache's current position (`reset` it first for llama.cpp's empty cache), and the natural
    /// log-probability of each token of its second half given everything before it, i.e. of
    /// `chunk[p + 1]` at positions `len / 2 .. len - 1` (the softmax summed in `f64`). Blocks on
    /// reading back, as [`Transformer::all_logits`].
    pub fn chunk_log_probs(&self, chunk: &[u32], cache: &mut Cache) -> Result<Vec<f64>> {
        let all = self.all_logits(chunk, cache)?;
        let vocab = self.vocab_size();
        let scored = chunk.len() / 2..chunk.len().saturating_sub(1);
        Ok(scored
            .map(|pos| {
                let row = &all[pos * vocab..(pos + 1) * vocab];
                let max = f64::from(row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)));
                let sum: f64 = row.iter().map(|&v| (f64::from(v) - max).exp()).sum();
                // An id past the vocabulary was refused by the forward pass above.
                f64::from(row[chunk[pos + 1] as usize]) - max - sum.ln()
            })
            .collect())
    }

    /// As [`Transformer::forward`], up to the output head: the last token's final hidden
    /// state (every token's when `all`), normed, for [`Transformer::logits`] or
    /// [`Transformer::logits_of`].
    ///
    /// # Shapes
    /// - output: `[1, dim]`, or `[tokens, dim]` when `all`
    pub fn forward_hidden(
        &self,
        tokens: &[u32],
        cache: &mut Cache,
        all: bool,
    ) -> Result<Tensor<2>> {
        // Hundreds of launches: from the device's own thread (see `on_device_thread`).
        crate::device::on_device_thread(&self.device(), || self.run_layers(tokens, cache, all))
    }

    /// [`Transformer::forward_hidden`]'s work, on whichever thread calls it.
    fn run_layers(&self, tokens: &[u32], cache: &mut Cache, all: bool) -> Result<Tensor<2>> {
        let n = tokens.len();
        if n == 0 {
            return Err(ModelError::EmptyInput);
        }
        self.check_tokens(tokens)?;
        let start = cache.position;
        if start + n > cache.capacity() {
            return Err(ModelError::ContextOverflow {
                needed: start + n,
                capacity: cache.capacity(),
            });
        }
        #[cfg(feature = "wgpu")]
        if let Some(mut step) = cache.step.take() {
            let hidden = if n == 1 && step.enabled {
                crate::step_graph::decode(self, tokens[0], start, cache, &mut step)
            } else {
                crate::step_graph::set_step(&step.buffer, start, 0);
                let x = self.embed(tokens);
                Ok(self.run_blocks(x, start, Some(&step.buffer), cache, all))
            };
            cache.step = Some(step);
            if hidden.is_ok() {
                cache.position = start + n;
            }
            return hidden;
        }
        let x = self.embed(tokens);
        let hidden = self.run_blocks(x, start, None, cache, all);
        cache.position = start + n;
        Ok(hidden)
    }

    /// The embedding rows of `tokens` (checked against the vocabulary), `[tokens, dim]`.
    pub(crate) fn embed(&self, tokens: &[u32]) -> Tensor<2> {
        self.embedding.rows_of(tokens)
    }

    /// The blocks and the final norm over embeddings `x` of tokens at `start..` (the cache's
    /// position is the caller's to move): the last row's hidden state, or every row's when
    /// `all`. On the wgpu device `position` holds `start` for the kernels.
    pub(crate) fn run_blocks(
        &self,
        x: Tensor<2>,
        start: usize,
        position: Option<&Tensor<1, Int>>,
        cache: &mut Cache,
        all: bool,
    ) -> Tensor<2> {
        let mut x = x;
        if let Some(s) = self.config.embedding_scale {
            x = x * s;
        }
        let mut residual = Residual { x, h: None };
        for (i, (block, layer_cache)) in self.blocks.iter().zip(&mut cache.layers).enumerate() {
            let rope = match (&self.rope_local, self.config.window(i)) {
                (Some(local), Some(_)) => local,
                _ => &self.rope,
            };
            residual = block.forward(residual, start, position, rope, layer_cache);
        }
        if !all {
            residual = residual.last_rows(1);
        }
        residual.add_norm(&self.norm).1
    }

    /// The embedding table.
    #[cfg(feature = "wgpu")]
    pub(crate) fn embedding(&self) -> &QLinear {
        &self.embedding
    }

    /// Which load of a model this is (see [`crate::step_graph`]).
    #[cfg(feature = "wgpu")]
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// On the wgpu device, compiles the kernels that a decoding step launches once its query
    /// sees more than 256 keys (its attention split across cubes), when `cache` holds that many
    /// positions: a launch over one position for each head size, as a warm-up. Otherwise
    /// (the CPU device, a shorter cache) nothing.
    ///
    /// Without it the first such step of a request compiled them: on the noop backend that
    /// step took 27–61 ms of the host's work against 7–30 ms with it, the rest being the new
    /// step graph's recording (bench/README.md, "Past 256 keys too"); a browser's pipeline
    /// compiles come on top.
    pub fn compile_split_attention(&self, cache: &Cache) -> Result<()> {
        #[cfg(feature = "wgpu")]
        {
            let device = self.device();
            let long = (cache.capacity().checked_sub(1))
                .is_some_and(|last| self.attention_splits(last).iter().any(|&s| s > 0));
            if long && !crate::device::is_cpu(&device) {
                crate::device::on_device_thread(&device, || {
                    // The kernels take the head size at compile time, and the rest at launch.
                    let mut sizes = Vec::new();
                    for block in &self.blocks {
                        if !sizes.contains(&block.attn.head_dim) {
                            sizes.push(block.attn.head_dim);
                            block.attn.launch_split(&device);
                        }
                    }
                    Ok(())
                })?;
                flush(&device)?;
            }
        }
        #[cfg(not(feature = "wgpu"))]
        let _ = cache;
        Ok(())
    }

    /// Each layer's attention splits for a decoding step at `start` on the wgpu device.
    #[cfg(feature = "wgpu")]
    pub(crate) fn attention_splits(&self, start: usize) -> Vec<usize> {
        (0..self.blocks.len())
            .map(|i| crate::fused::attention_splits(1, start, self.config.window(i).unwrap_or(0)))
            .collect()
    }

    /// Every token's logits from hidden states of [`Transformer::forward_hidden`].
    ///
    /// # Shapes
    /// - `hidden`: `[rows, dim]`
    /// - output: `[rows, vocab]`
    pub fn logits(&self, hidden: Tensor<2>) -> Tensor<2> {
        self.head().forward(hidden)
    }

    /// The logits of tokens `ids` only (in that order), each the value
    /// [`Transformer::logits`] gives it, on either device: the output head's other rows are
    /// not read. Under a grammar that allows a few dozen tokens this skips most of a decoding
    /// step's largest product (the head is 21% of SmolLM2's multiply-adds a token, 28% of
    /// Qwen2.5's, 63% of Gemma 3's), and on a GPU the read back of the other logits.
    ///
    /// # Shapes
    /// - `hidden`: `[rows, dim]`
    /// - output: `[rows, ids]`
    pub fn logits_of(&self, hidden: Tensor<2>, ids: &[u32]) -> Result<Tensor<2>> {
        self.check_tokens(ids)?;
        Ok(self.head().forward_rows(hidden, ids))
    }

    /// The output projection: its own matrix, or the embedding table when tied.
    fn head(&self) -> &QLinear {
        self.output.as_ref().unwrap_or(&self.embedding)
    }

    fn check_tokens(&self, tokens: &[u32]) -> Result<()> {
        let vocab = self.vocab_size();
        match tokens.iter().find(|&&t| t as usize >= vocab) {
            Some(&id) => Err(ModelError::TokenOutOfRange { id, vocab }),
            None => Ok(()),
        }
    }
}

/// The `k` largest logits of a single row and their columns, largest first and the lower
/// column first among equals, computed where the logits are: greedy decoding (`k` = 1) and a
/// sampler whose chain starts by keeping the `k` most likely tokens (llama.cpp's default
/// `top_k` is 40) read only these, so a GPU sends back `2k` words rather than the
/// vocabulary's logits (Gemma 3's are 1 MiB a token). Only the columns whose bit is set in
/// `allowed` count (bit i of word i / 32; every column when `None`), and no logit of -inf:
/// fewer come back where fewer remain. Read the result with [`read_top`] or
/// [`read_top_async`]. An error if `k` is 0 or above [`MAX_TOP`], or if `allowed` is shorter
/// than the row.
///
/// # Shapes
/// - `logits`: `[1, n]`
/// - output: `[2k]`, read by [`read_top`]
pub fn top_logits(logits: Tensor<2>, allowed: Option<&[u32]>, k: usize) -> Result<Tensor<1, Int>> {
    let [_, n] = logits.dims();
    if !(1..=MAX_TOP).contains(&k) {
        return Err(ModelError::TopOutOfRange { k, max: MAX_TOP });
    }
    if let Some(mask) = allowed
        && mask.len() < n.div_ceil(32)
    {
        return Err(ModelError::MaskTooShort {
            words: mask.len(),
            logits: n,
        });
    }
    let device = logits.device();
    #[cfg(feature = "wgpu")]
    if !crate::device::is_cpu(&device) {
        return Ok(device_top(logits, allowed, k));
    }
    // Nothing to read back on the CPU: choose on the host.
    let words: Vec<u32> = host_top(&to_vec(logits)?, allowed, k)
        .into_iter()
        .flat_map(|(c, v)| [c, v.to_bits()])
        .collect();
    let len = words.len();
    Ok(Tensor::from_data(
        TensorData::new(words, [len]),
        (&device, burn::tensor::DType::U32),
    ))
}

/// The most candidates [`top_logits`] chooses.
pub const MAX_TOP: usize = 64;

/// Prompt tokens from which a prefill multiplies them by the weights in tiles (on the wgpu
/// device its products are kernels of their own, compiled on first use): a prompt this long
/// runs every kernel a longer one does.
pub const PREFILL_TILE: usize = 8;

/// What [`top_logits`] gives where fewer than `k` columns remain.
const NO_COLUMN: u32 = u32::MAX;

#[cfg(feature = "wgpu")]
fn device_top(logits: Tensor<2>, allowed: Option<&[u32]>, k: usize) -> Tensor<1, Int> {
    use crate::top::TopOps;
    type Ops = burn::backend::Dispatch;
    let top = match allowed {
        None => <Ops as TopOps>::top_of_row(logits.into_dispatch(), k),
        Some(mask) => {
            let mask = Tensor::<1, Int>::from_data(
                TensorData::new(mask.to_vec(), [mask.len()]),
                (&logits.device(), burn::tensor::DType::U32),
            );
            <Ops as TopOps>::top_of_allowed(logits.into_dispatch(), mask.into_dispatch(), k)
        }
    };
    Tensor::from_dispatch(top)
}

/// [`top_logits`] on the host: the `k` largest of `row` above -inf (NaN never) whose bit is
/// set in `allowed` (every one when `None`), largest first and the lower column first among
/// equals; fewer where fewer remain, none for `k` = 0.
///
/// One pass that keeps the `k` best so far, skipping whole runs of values with nothing above
/// the worst of them: collecting every candidate first and selecting among them took
/// 0.69–0.77 ms of a 262,144-logit row (Gemma 3's; a CPU decoding step takes about 20 ms),
/// this 0.07–0.09 ms (k 1 and 40, bench/README.md).
pub fn host_top(row: &[f32], allowed: Option<&[u32]>, k: usize) -> Vec<(u32, f32)> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    if k == 0 {
        return Vec::new();
    }
    // The worst kept candidate on top of the heap.
    let mut kept: BinaryHeap<Reverse<Candidate>> = BinaryHeap::with_capacity(k.min(row.len()));
    for (i, chunk) in row.chunks(SCAN_CHUNK).enumerate() {
        // Once `k` are kept, most chunks hold nothing above the worst of them: their largest
        // value (eight lanes at a time) says so without looking at each.
        if kept.len() == k
            && let Some(Reverse(worst)) = kept.peek()
            && chunk_max(chunk) < worst.logit
        {
            continue;
        }
        for (j, &logit) in chunk.iter().enumerate() {
            let c = i * SCAN_CHUNK + j;
            if logit.is_nan() || logit == f32::NEG_INFINITY {
                continue;
            }
            // Columns come in increasing order, so an equal value ranks below the one kept.
            let ranks_below = |worst: &Reverse<Candidate>| logit.total_cmp(&worst.0.logit).is_le();
            if kept.len() == k && kept.peek().is_some_and(ranks_below) {
                continue;
            }
            if allowed.is_some_and(|m| m.get(c / 32).is_none_or(|w| (w >> (c % 32)) & 1 == 0)) {
                continue;
            }
            if kept.len() == k {
                kept.pop();
            }
            kept.push(Reverse(Candidate {
                logit,
                column: c as u32,
            }));
        }
    }
    // Ascending by `Reverse`: the best first.
    kept.into_sorted_vec()
        .into_iter()
        .map(|Reverse(c)| (c.column, c.logit))
        .collect()
}

/// Values [`host_top`] passes over at once when none of them can be kept.
const SCAN_CHUNK: usize = 64;

/// The largest of `values` (NaN passed over), in eight lanes so that it compiles to vector
/// maxima.
fn chunk_max(values: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; 8];
    let mut eights = values.chunks_exact(8);
    for eight in &mut eights {
        for (lane, &v) in lanes.iter_mut().zip(eight) {
            *lane = lane.max(v);
        }
    }
    let rest = eights.remainder().iter();
    lanes
        .iter()
        .chain(rest)
        .fold(f32::NEG_INFINITY, |m, &v| m.max(v))
}

/// A logit and its column, ordered as [`host_top`] ranks them: the larger logit above, the
/// lower column above among equals.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    logit: f32,
    column: u32,
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.logit
            .total_cmp(&other.logit)
            .then(other.column.cmp(&self.column))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Candidate {}

/// Reads [`top_logits`]' result back: `(column, logit)` pairs, largest first (blocking: not
/// on WebGPU, see [`read_top_async`]).
pub fn read_top(top: Tensor<1, Int>) -> Result<Vec<(u32, f32)>> {
    top_of_data(top.try_into_data().map_err(execution_error)?)
}

/// As [`read_top`], once the device has computed them: the only way WebGPU can.
pub async fn read_top_async(top: Tensor<1, Int>) -> Result<Vec<(u32, f32)>> {
    top_of_data(top.into_data_async().await.map_err(execution_error)?)
}

fn top_of_data(data: burn::tensor::TensorData) -> Result<Vec<(u32, f32)>> {
    let words = data
        .convert::<u32>()
        .try_into_vec::<u32>()
        .map_err(|e| readback_error(&e))?;
    Ok(words
        .chunks_exact(2)
        .filter(|pair| pair[0] != NO_COLUMN)
        .map(|pair| (pair[0], f32::from_bits(pair[1])))
        .collect())
}

/// Reads a float tensor back to the host (blocking: not on WebGPU, see [`to_vec_async`]).
pub fn to_vec(t: Tensor<2>) -> Result<Vec<f32>> {
    floats(t.try_into_data().map_err(execution_error)?)
}

/// Reads a float tensor back to the host once the device has computed it: the only way
/// WebGPU can.
pub async fn to_vec_async(t: Tensor<2>) -> Result<Vec<f32>> {
    floats(t.into_data_async().await.map_err(execution_error)?)
}

/// Hands the work queued on `device` to it now, without waiting for the results (a GPU
/// buffers kernels until enough accumulate or a read asks for them; the CPU has nothing
/// queued).
pub fn flush(device: &Device) -> Result<()> {
    device.flush().map_err(execution_error)
}

fn floats(data: burn::tensor::TensorData) -> Result<Vec<f32>> {
    data.try_into_vec::<f32>().map_err(|e| readback_error(&e))
}

/// A lost device is its own error: nothing on it works again, and the caller must say so.
fn execution_error(e: ExecutionError) -> ModelError {
    match e {
        ExecutionError::DevicePoisoned { reason } => ModelError::DeviceLost { reason },
        other => readback_error(&other),
    }
}

fn readback_error(e: &dyn std::fmt::Debug) -> ModelError {
    ModelError::Readback {
        what: "logits",
        reason: format!("{e:?}"),
    }
}
