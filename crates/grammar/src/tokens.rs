//! Token-level matching: masks of allowed tokens, committing and checking tokens.
//!
//! A mask is computed by one scan of the vocabulary trie (see [`Vocabulary`]) driving the
//! matcher's lazy DFA (see `stacks.rs`): most trie nodes cost one table look-up, a rejected
//! prefix skips its whole subtree, and the finished mask is cached per DFA state, so a state
//! seen before (the inside of a string, the same place in a repeated object) costs a copy.
//!
//! Special tokens are never matched as text; they are allowed only where the grammar names
//! them (`<think>`, `<[id]>`, `!<...>`). End-of-sequence tokens are allowed exactly where the
//! document may end; committing one ends the document.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::automaton::CompiledGrammar;
use crate::error::GrammarError;
use crate::ir::TokenRef;
use crate::matcher::Matcher;
use crate::stacks::{DEAD, Engine};
use crate::vocab::Vocabulary;

/// What a matcher keeps about its vocabulary.
pub(crate) struct TokenState {
    vocab: Arc<Vocabulary>,
    /// `<text>` terminals resolved to ids.
    named: FxHashMap<String, u32>,
    /// Cached masks per DFA state.
    masks: FxHashMap<u32, Box<[u32]>>,
    /// Scratch: DFA state per trie depth.
    path: Vec<u32>,
}

fn set_bit(mask: &mut [u32], id: u32) {
    if let Some(w) = mask.get_mut(id as usize / 32) {
        *w |= 1 << (id % 32);
    }
}

impl Matcher {
    /// A matcher that also works on tokens of `vocab`. Fails if the grammar names a token
    /// (`<text>`, `<[id]>`) the vocabulary does not have.
    pub fn with_vocabulary(
        grammar: Arc<CompiledGrammar>,
        vocab: Arc<Vocabulary>,
    ) -> Result<Self, GrammarError> {
        let mut named = FxHashMap::default();
        for (rule, st) in grammar
            .states
            .iter()
            .enumerate()
            .flat_map(|(i, s)| std::iter::repeat_n(i, s.tokens.len()).zip(&s.tokens))
        {
            let (t, _, _) = st;
            let unknown = |token: String| GrammarError::UnknownToken {
                token,
                rule: format!("state {rule}"),
            };
            match t {
                TokenRef::Id(id) if (*id as usize) >= vocab.len() => {
                    return Err(unknown(format!("<[{id}]>")));
                }
                TokenRef::Id(_) => {}
                TokenRef::Text(text) => {
                    let id = vocab
                        .find(text.as_bytes())
                        .ok_or_else(|| unknown(text.clone()))?;
                    named.insert(text.clone(), id);
                }
            }
        }
        let mut m = Matcher::new(grammar);
        let path = vec![DEAD; vocab.max_depth + 1];
        m.vocab = Some(TokenState {
            vocab,
            named,
            masks: FxHashMap::default(),
            path,
        });
        Ok(m)
    }

    /// The vocabulary given at construction.
    pub fn vocabulary(&self) -> Option<&Arc<Vocabulary>> {
        self.vocab.as_ref().map(|v| &v.vocab)
    }

    /// Writes the allowed-token bitmask (bit `id % 32` of word `id / 32`) into `out`, which
    /// must have [`Vocabulary::mask_words`] words. After the end, the mask is empty.
    pub fn compute_mask(&mut self, out: &mut [u32]) -> Result<(), GrammarError> {
        if self.error().is_some() {
            return Err(GrammarError::Stopped);
        }
        let ts = self.vocab.as_mut().ok_or(GrammarError::NoVocabulary)?;
        let need = ts.vocab.mask_words();
        if out.len() != need {
            return Err(GrammarError::MaskSize {
                got: out.len(),
                need,
            });
        }
        if self.ended {
            out.fill(0);
            return Ok(());
        }
        if let Some(m) = ts.masks.get(&self.state) {
            out.copy_from_slice(m);
            return Ok(());
        }
        out.fill(0);
        walk_trie(&mut self.engine, &ts.vocab, &mut ts.path, self.state, out);
        allow_named_tokens(&self.engine, ts, self.state, out);
        if self.engine.is_accepting(self.state) {
            for &e in ts.vocab.eos() {
                set_bit(out, e);
            }
        }
        if ts.masks.len() >= self.engine.g.limits.max_cached_states {
            ts.masks.clear();
        }
        ts.masks.insert(self.state, out.into());
        Ok(())
    }

    /// Whether token `id` may come next (without committing it). Cheaper than a mask: the
    /// sampled token is checked first, and a mask is needed only when it is rejected.
    pub fn is_token_allowed(&mut self, id: u32) -> bool {
        self.error().is_none() && !self.ended && matches!(self.token_target(id), Ok(Some(_)))
    }

    /// Commits token `id` as one step. A rejected token stops the matcher.
    pub fn commit_token(&mut self, id: u32) -> Result<(), GrammarError> {
        self.check_running()?;
        match self.token_target(id)? {
            Some((next, len, is_eos)) => {
                self.push_step(next, len);
                self.ended = is_eos;
                Ok(())
            }
            None => Err(self.stop(GrammarError::TokenRejected { token: id })),
        }
    }

    /// Commits several tokens, each one step.
    pub fn commit_tokens(&mut self, ids: &[u32]) -> Result<(), GrammarError> {
        ids.iter().try_for_each(|&id| self.commit_token(id))
    }

    /// Whether the document may end here (an end-of-sequence token is allowed).
    pub fn can_end(&self) -> bool {
        self.is_accepting()
    }

    /// Whether an end-of-sequence token was committed.
    pub fn has_ended(&self) -> bool {
        self.ended
    }

    /// The state after token `id`, its byte length and whether it ends the document; `None`
    /// when the grammar rejects it here.
    fn token_target(&mut self, id: u32) -> Result<Option<(u32, usize, bool)>, GrammarError> {
        let ts = self.vocab.as_ref().ok_or(GrammarError::NoVocabulary)?;
        if id as usize >= ts.vocab.len() {
            return Ok(None);
        }
        if ts.vocab.eos().contains(&id) {
            return Ok(self
                .engine
                .is_accepting(self.state)
                .then_some((self.state, 0, true)));
        }
        let bytes = ts.vocab.token_bytes(id);
        let mut s = DEAD;
        if !ts.vocab.is_special(id) {
            s = self.state;
            for &b in bytes {
                s = self.engine.step(s, b);
                if s == DEAD {
                    break;
                }
            }
        }
        if has_token_edges(&self.engine, self.state) {
            let named = &ts.named;
            let by_token = self.engine.step_token(self.state, |t, negated| {
                let tid = match t {
                    TokenRef::Id(x) => Some(*x),
                    TokenRef::Text(text) => named.get(text).copied(),
                };
                (tid == Some(id)) != negated
            });
            s = self.engine.union(s, by_token);
        }
        Ok((s != DEAD).then_some((s, bytes.len(), false)))
    }
}

fn has_token_edges(engine: &Engine, set: u32) -> bool {
    engine.set(set).iter().any(|&f| {
        f != crate::stacks::ACCEPT
            && !engine.g.states[engine.frame_state(f) as usize]
                .tokens
                .is_empty()
    })
}

/// Sets the bit of every ordinary token whose bytes the grammar accepts from `start`.
fn walk_trie(
    engine: &mut Engine,
    vocab: &Vocabulary,
    path: &mut [u32],
    start: u32,
    out: &mut [u32],
) {
    let nodes = &vocab.nodes;
    path[0] = start;
    let mut i = 0;
    while i < nodes.len() {
        let node = nodes[i];
        let d = node.depth as usize;
        let s = engine.step(path[d - 1], node.byte);
        if s == DEAD {
            i = node.subtree_end as usize;
            continue;
        }
        path[d] = s;
        for &id in &vocab.token_ids[node.tokens_start as usize..node.tokens_end as usize] {
            set_bit(out, id);
        }
        i += 1;
    }
}

/// Sets the bits of tokens the grammar names at this point (`<x>`, or all but x for `!<x>`).
fn allow_named_tokens(engine: &Engine, ts: &TokenState, set: u32, out: &mut [u32]) {
    if !has_token_edges(engine, set) {
        return;
    }
    for &f in engine.set(set) {
        if f == crate::stacks::ACCEPT {
            continue;
        }
        for (t, negated, _) in &engine.g.states[engine.frame_state(f) as usize].tokens {
            let id = match t {
                TokenRef::Id(x) => Some(*x),
                TokenRef::Text(text) => ts.named.get(text).copied(),
            };
            if *negated {
                for other in 0..ts.vocab.len() as u32 {
                    if Some(other) != id && !ts.vocab.eos().contains(&other) {
                        set_bit(out, other);
                    }
                }
            } else if let Some(id) = id {
                set_bit(out, id);
            }
        }
    }
}
