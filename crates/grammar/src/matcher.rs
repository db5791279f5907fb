//! The byte-level matcher: feed bytes, ask whether the document may end, roll back.
//!
//! Each successful `consume_*` call is one *step*; [`Matcher::rollback`] undoes whole steps
//! (a token is one step). After a rejection the matcher is stopped, keeps the state from
//! before the rejected step, and answers [`GrammarError::Stopped`] until it is rolled back or
//! reset: an error is never silently skipped.

use std::sync::Arc;

use crate::automaton::CompiledGrammar;
use crate::error::GrammarError;
use crate::ir::Grammar;
use crate::stacks::{DEAD, Engine};

/// Matches input against a [`CompiledGrammar`].
pub struct Matcher {
    pub(crate) engine: Engine,
    /// Current DFA state (an interned set of stacks).
    pub(crate) state: u32,
    /// State, bytes-consumed count and `ended` before each step.
    history: Vec<(u32, usize, bool)>,
    consumed: usize,
    error: Option<GrammarError>,
    /// An end-of-sequence token was committed.
    pub(crate) ended: bool,
    /// The vocabulary, when token-level methods are used (see `tokens.rs`).
    pub(crate) vocab: Option<crate::tokens::TokenState>,
}

impl Matcher {
    pub fn new(grammar: Arc<CompiledGrammar>) -> Self {
        let engine = Engine::new(grammar);
        let state = engine.initial;
        Matcher {
            engine,
            state,
            history: Vec::new(),
            consumed: 0,
            error: None,
            ended: false,
            vocab: None,
        }
    }

    pub fn grammar(&self) -> &Arc<CompiledGrammar> {
        &self.engine.g
    }

    /// Consumes `bytes` as one step. On rejection the matcher stops (see the module docs).
    pub fn consume_bytes(&mut self, bytes: &[u8]) -> Result<(), GrammarError> {
        self.check_running()?;
        let mut s = self.state;
        for (i, &b) in bytes.iter().enumerate() {
            s = self.engine.step(s, b);
            if s == DEAD {
                return Err(self.stop_at(self.consumed + i));
            }
        }
        self.push_step(s, bytes.len());
        Ok(())
    }

    /// The state after `bytes` from the current one, without moving; `None` if rejected.
    fn state_after(&mut self, bytes: &[u8]) -> Option<u32> {
        let mut s = self.state;
        for &b in bytes {
            s = self.engine.step(s, b);
            if s == DEAD {
                return None;
            }
        }
        Some(s)
    }

    /// Whether the bytes could be consumed now, without consuming them.
    pub fn can_consume(&mut self, bytes: &[u8]) -> bool {
        if self.error.is_some() || self.ended {
            return false;
        }
        self.state_after(bytes).is_some()
    }

    pub(crate) fn push_step(&mut self, next: u32, len: usize) {
        self.history.push((self.state, self.consumed, self.ended));
        self.state = next;
        self.consumed += len;
    }

    pub(crate) fn check_running(&self) -> Result<(), GrammarError> {
        match self.error {
            Some(_) => Err(GrammarError::Stopped),
            None if self.ended => Err(GrammarError::Ended),
            None => Ok(()),
        }
    }

    pub(crate) fn stop_at(&mut self, offset: usize) -> GrammarError {
        let err = if self.engine.too_many_stacks {
            self.engine.too_many_stacks = false;
            GrammarError::LimitExceeded {
                limit: "max_live_stacks",
                value: self.engine.g.limits.max_live_stacks as u64 + 1,
                max: self.engine.g.limits.max_live_stacks as u64,
                hint: "the grammar is too ambiguous here",
            }
        } else {
            GrammarError::Rejected { offset }
        };
        self.stop(err)
    }

    pub(crate) fn stop(&mut self, err: GrammarError) -> GrammarError {
        self.error = Some(err.clone());
        err
    }

    /// Whether the input so far is a complete document.
    pub fn is_accepting(&self) -> bool {
        self.error.is_none() && self.engine.is_accepting(self.state)
    }

    /// The error that stopped the matcher, if any.
    pub fn error(&self) -> Option<&GrammarError> {
        self.error.as_ref()
    }

    /// Whether a stack grew past [`Limits::max_stack_depth`](crate::Limits) and was dropped.
    pub fn depth_limit_hit(&self) -> bool {
        self.engine.depth_limit_hit
    }

    /// Bytes consumed so far.
    pub fn consumed(&self) -> usize {
        self.consumed
    }

    /// Number of steps that [`rollback`](Self::rollback) can undo.
    pub fn steps(&self) -> usize {
        self.history.len()
    }

    /// Undoes the last `n` steps and clears a stop.
    pub fn rollback(&mut self, n: usize) -> Result<(), GrammarError> {
        if n > self.history.len() {
            return Err(GrammarError::RollbackTooFar {
                requested: n,
                available: self.history.len(),
            });
        }
        if n > 0 {
            let (state, consumed, ended) = self.history[self.history.len() - n];
            self.history.truncate(self.history.len() - n);
            self.state = state;
            self.consumed = consumed;
            self.ended = ended;
        }
        self.error = None;
        Ok(())
    }

    /// Back to the start; caches are kept.
    pub fn reset(&mut self) {
        self.state = self.engine.initial;
        self.history.clear();
        self.consumed = 0;
        self.error = None;
        self.ended = false;
    }

    /// Bytes every continuation must start with (for fast-forwarding). Stops where the
    /// document could end or where more than one byte is possible.
    pub fn forced_bytes(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut s = self.state;
        if self.error.is_some() {
            return out;
        }
        while !self.engine.is_accepting(s) {
            let mut only = None;
            for b in 0..=255u8 {
                if self.engine.step(s, b) != DEAD {
                    if only.is_some() {
                        return out;
                    }
                    only = Some(b);
                }
            }
            match only {
                Some(b) => {
                    out.push(b);
                    s = self.engine.step(s, b);
                }
                None => return out,
            }
        }
        out
    }

    /// Fewest bytes needed to complete the document (0 when accepting; `None` when it
    /// cannot be completed, e.g. after an error).
    pub fn min_bytes_to_close(&mut self) -> Option<u32> {
        if self.error.is_some() {
            return None;
        }
        self.engine.close_cost(self.state)
    }

    /// The fewest bytes completing the document after `bytes`, which are not consumed;
    /// `None` when `bytes` are rejected or nothing completes the document then.
    pub fn min_bytes_to_close_after(&mut self, bytes: &[u8]) -> Option<u32> {
        if self.error.is_some() {
            return None;
        }
        let s = self.state_after(bytes)?;
        self.engine.close_cost(s)
    }

    /// One shortest byte string completing the document.
    pub fn closing_bytes(&mut self) -> Option<Vec<u8>> {
        let mut cost = self.min_bytes_to_close()?;
        let mut s = self.state;
        let mut out = Vec::with_capacity(cost as usize);
        while cost > 0 {
            let mut found = None;
            for b in 0..=255u8 {
                let t = self.engine.step(s, b);
                if t != DEAD && self.engine.close_cost(t) == Some(cost - 1) {
                    found = Some((b, t));
                    break;
                }
            }
            let (b, t) = found?;
            out.push(b);
            s = t;
            cost -= 1;
        }
        Some(out)
    }
}

/// Whether `bytes` is a complete document of `grammar` (default [`Limits`](crate::Limits));
/// `false` also when the grammar does not compile.
pub fn accepts(grammar: &Grammar, bytes: &[u8]) -> bool {
    match CompiledGrammar::new(grammar) {
        Ok(g) => Arc::new(g).accepts(bytes),
        Err(_) => false,
    }
}
