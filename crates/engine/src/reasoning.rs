//! Thinking models: with `chat_template_kwargs.enable_thinking`, a free reasoning block is
//! allowed before the constrained output — `<think>…</think>`, then optional whitespace, then
//! the document the grammar describes.
//!
//! [`Reasoning`] wraps the grammar's [`TokenConstraint`]: while thinking, every text token is
//! allowed except those that would close the block with bytes left over (so the block always
//! ends at a token boundary and the grammar starts clean); after the end tag, whitespace-only
//! tokens or the grammar's own; from the first grammar token on, the grammar alone.

use crate::generate::{BoxError, TokenConstraint, Vocabulary};

/// The tag that ends the reasoning block (Qwen3, DeepSeek-R1 and most thinking models).
pub const END_TAG: &[u8] = b"</think>";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Thinking,
    /// After the end tag, before the document: whitespace may come.
    Gap,
    Constrained,
}

/// A reasoning block, then `inner`.
pub struct Reasoning<'v, C> {
    inner: C,
    vocab: &'v dyn Vocabulary,
    phase: Phase,
    /// The last bytes of the reasoning text, enough to find an end tag across tokens.
    tail: Vec<u8>,
    /// Tokens with text, as a mask (computed once).
    text_tokens: Vec<u32>,
    /// Tokens containing `>`, the only ones that can complete the end tag.
    closers: Vec<u32>,
    scratch: Vec<u32>,
}

impl<'v, C: TokenConstraint> Reasoning<'v, C> {
    /// `n_tokens` is the size of the logits the masks cover.
    pub fn new(inner: C, vocab: &'v dyn Vocabulary, n_tokens: usize) -> Self {
        let mut text_tokens = vec![0u32; n_tokens.div_ceil(32)];
        for id in 0..n_tokens as u32 {
            if !vocab.token_bytes(id).is_empty() && !vocab.end_of_generation().contains(&id) {
                text_tokens[id as usize / 32] |= 1 << (id % 32);
            }
        }
        let closers = (0..n_tokens as u32)
            .filter(|&id| vocab.token_bytes(id).contains(&b'>'))
            .collect();
        Self {
            inner,
            vocab,
            phase: Phase::Thinking,
            tail: Vec::new(),
            text_tokens,
            closers,
            scratch: Vec::new(),
        }
    }

    pub fn inner(&self) -> &C {
        &self.inner
    }

    /// Where `piece` ends the block: `Some(bytes after the tag)` if appending it to the
    /// reasoning text completes the end tag.
    fn closes(&self, piece: &[u8]) -> Option<usize> {
        let mut text = self.tail.clone();
        let start = text.len();
        text.extend_from_slice(piece);
        let at = text.windows(END_TAG.len()).position(|w| w == END_TAG)?;
        let end = at + END_TAG.len();
        (end > start).then(|| text.len() - end)
    }
}

fn is_space(piece: &[u8]) -> bool {
    !piece.is_empty()
        && piece
            .iter()
            .all(|b| matches!(b, b' ' | b'\n' | b'\t' | b'\r'))
}

impl<C: TokenConstraint> TokenConstraint for Reasoning<'_, C> {
    fn fill_mask(&mut self, mask: &mut [u32]) -> Result<(), BoxError> {
        match self.phase {
            Phase::Thinking => {
                let n = self.text_tokens.len().min(mask.len());
                mask[..n].copy_from_slice(&self.text_tokens[..n]);
                // A token that closes the block and runs on past the tag is left out.
                for &id in &self.closers {
                    if self
                        .closes(self.vocab.token_bytes(id))
                        .is_some_and(|rest| rest > 0)
                        && let Some(w) = mask.get_mut(id as usize / 32)
                    {
                        *w &= !(1 << (id % 32));
                    }
                }
                Ok(())
            }
            Phase::Gap => {
                self.inner.fill_mask(mask)?;
                for (w, word) in mask.iter_mut().enumerate() {
                    let mut spaces = self.text_tokens.get(w).copied().unwrap_or(0);
                    let mut bits = spaces;
                    while bits != 0 {
                        let id = w as u32 * 32 + bits.trailing_zeros();
                        bits &= bits - 1;
                        if !is_space(self.vocab.token_bytes(id)) {
                            spaces &= !(1 << (id % 32));
                        }
                    }
                    *word |= spaces;
                }
                Ok(())
            }
            Phase::Constrained => self.inner.fill_mask(mask),
        }
    }

    fn commit(&mut self, token: u32) -> Result<(), BoxError> {
        let piece = self.vocab.token_bytes(token);
        match self.phase {
            Phase::Thinking => {
                if self.closes(piece).is_some() {
                    self.phase = Phase::Gap;
                    self.tail.clear();
                } else {
                    self.tail.extend_from_slice(piece);
                    let keep = END_TAG.len() - 1;
                    if self.tail.len() > keep {
                        self.tail.drain(..self.tail.len() - keep);
                    }
                }
                Ok(())
            }
            Phase::Gap if is_space(piece) => {
                // Whitespace the grammar would also take goes to the grammar.
                self.scratch.resize(self.text_tokens.len(), 0);
                self.scratch.fill(0);
                self.inner.fill_mask(&mut self.scratch)?;
                if self
                    .scratch
                    .get(token as usize / 32)
                    .is_some_and(|w| w >> (token % 32) & 1 == 1)
                {
                    self.phase = Phase::Constrained;
                    return self.inner.commit(token);
                }
                Ok(())
            }
            Phase::Gap | Phase::Constrained => {
                self.phase = Phase::Constrained;
                self.inner.commit(token)
            }
        }
    }

    fn is_accepting(&self) -> bool {
        self.phase != Phase::Thinking && self.inner.is_accepting()
    }

    fn closing_bytes(&mut self) -> Option<Vec<u8>> {
        let inner = self.inner.closing_bytes()?;
        if self.phase != Phase::Thinking {
            return Some(inner);
        }
        // The shortest way out: finish the end tag (reusing what the tail already has).
        let have = (1..END_TAG.len())
            .rev()
            .find(|&n| self.tail.ends_with(&END_TAG[..n]))
            .unwrap_or(0);
        let mut out = END_TAG[have..].to_vec();
        out.extend_from_slice(&inner);
        Some(out)
    }

    fn cache_hit_rate(&self) -> Option<f64> {
        self.inner.cache_hit_rate()
    }

    fn forced_bytes(&mut self) -> Vec<u8> {
        match self.phase {
            Phase::Constrained => self.inner.forced_bytes(),
            _ => Vec::new(),
        }
    }

    fn allows(&mut self, token: u32) -> bool {
        self.phase == Phase::Constrained && self.inner.allows(token)
    }
}

/// Splits generated text into the reasoning block and the answer after it (llama.cpp's
/// `reasoning_content` / `content`). Text without an end tag is all answer.
pub fn split_reasoning(text: &str) -> (Option<String>, String) {
    let tag = "</think>";
    match text.find(tag) {
        Some(at) => {
            let thought = text[..at]
                .trim_start()
                .strip_prefix("<think>")
                .unwrap_or(&text[..at])
                .trim();
            (
                Some(thought.to_string()),
                text[at + tag.len()..].trim_start().to_string(),
            )
        }
        None => (None, text.to_string()),
    }
}
