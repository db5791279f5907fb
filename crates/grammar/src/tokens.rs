//! Token-level matching: masks of allowed tokens, committing and checking tokens.
//!
//! Masks are built from parts that do not depend on the stack below the top frame, in the
//! spirit of XGrammar's context-independent tokens. For each automaton state `q` a matcher
//! meets, one scan of the vocabulary trie (see [`Vocabulary`]) from "`q` in an unknown
//! context" yields a [`FrameMask`]: the tokens accepted without leaving the frame (a bitmask)
//! and the trie nodes where some path pops out of it (the *boundary*). The mask of a real
//! state is then, per top frame, an OR of its bitmask plus a walk of the boundary subtrees
//! from the parent's continuation — usually a few hundred tokens (those starting with `"`
//! when inside a string). Scans drive the matcher's lazy DFA (`stacks.rs`), so most trie
//! nodes cost a table look-up and a rejected prefix skips its whole subtree. Finished masks
//! are cached per DFA state too, so a state seen before costs a copy. The costliest scans,
//! from the inside of a free JSON string, are made once per vocabulary and shared by every
//! grammar (`json_string.rs`); a string with a length bound takes them filtered by its
//! count, and an object's key beside its declared names below its plain first bytes.
//!
//! Special tokens are never matched as text; they are allowed only where the grammar names
//! them (`<think>`, `<[id]>`, `!<...>`). End-of-sequence tokens are allowed exactly where the
//! document may end; committing one ends the document.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::automaton::CompiledGrammar;
use crate::automaton::StateId;
use crate::error::GrammarError;
use crate::ir::TokenRef;
use crate::json_string::{StringProbe, plain};
use crate::matcher::Matcher;
use crate::stacks::{DEAD, Engine, HOLE};
use crate::vocab::{UTF8_BELOW, UTF8_FROM_NODE, Vocabulary, byte_class};

/// What a matcher keeps about its vocabulary.
pub(crate) struct TokenState {
    vocab: Arc<Vocabulary>,
    /// `<text>` terminals resolved to ids.
    named: FxHashMap<String, u32>,
    /// Cached masks per DFA state.
    masks: FxHashMap<u32, Box<[u32]>>,
    /// Context-independent parts per automaton state.
    frames: FxHashMap<StateId, FrameMask>,
    /// Scratch: DFA state per trie depth.
    path: Vec<u32>,
    /// Recognises the inside of a free string, whose mask the vocabulary shares.
    strings: StringProbe,
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
            frames: FxHashMap::default(),
            path,
            strings: StringProbe::new(),
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
        for k in 0..self.engine.set(self.state).len() {
            let f = self.engine.set(self.state)[k];
            if f > HOLE {
                add_frame_tokens(&mut self.engine, ts, f, out);
            }
        }
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
        f > HOLE
            && !engine.g.states[engine.frame_state(f) as usize]
                .tokens
                .is_empty()
    })
}

/// How many frames of context a frame mask is computed with at most, and how many boundary
/// nodes make it worth trying one more frame. A pop out of a short rule (a number, optional
/// whitespace) then continues in the caller's known rule instead of a walk per boundary.
const MAX_CONTEXT: usize = 4;
const FEW_BOUNDARIES: usize = 8;
const MANY_BOUNDARIES: usize = 256;

/// Whether the chain `key` may pop right after a letter: then nearly every token is a
/// boundary (a string's `char`). Whitespace and digits pop after few tokens, and their short
/// chains' masks are shared by every context they occur in, so they keep them.
fn pops_after_one_char(engine: &mut Engine, key: u32) -> bool {
    let start = engine.closure_set(key);
    let s = engine.step(start, b'a');
    s != DEAD && engine.has_hole(s)
}

/// What the top frames allow whatever lies below them: tokens accepted without popping
/// below the copied frames, and the trie nodes after which some path pops (whose subtrees
/// depend on the rest of the stack).
pub(crate) struct FrameMask {
    accepted: Box<[u32]>,
    boundary: Vec<u32>,
}

/// ORs into `out` the tokens frame `f` (a top frame of the current state) allows.
fn add_frame_tokens(engine: &mut Engine, ts: &mut TokenState, f: u32, out: &mut [u32]) {
    let limit = engine.g.limits.max_cached_states;
    let mut k = 1;
    // The shorter chain just tried and the real frame below it: a longer chain's mask is
    // that mask plus its boundary subtrees re-walked one frame further, not a new full walk.
    let mut shorter: Option<(u32, u32)> = None;
    loop {
        let (key, anchor) = engine.local_chain(f, k);
        // A rule that may end after one letter (a string's `char`) pops after nearly every
        // prefix: on its own, its walk would make every node a boundary. Start from one
        // more frame of context instead.
        if anchor.is_some()
            && k < MAX_CONTEXT
            && !ts.frames.contains_key(&key)
            && pops_after_one_char(engine, key)
        {
            shorter = None;
            k += 1;
            continue;
        }
        if !ts.frames.contains_key(&key) {
            if ts.frames.len() >= limit {
                ts.frames.clear();
            }
            let base = shorter.and_then(|(key, below)| {
                let m = ts.frames.get(&key)?;
                Some((m.accepted.clone(), m.boundary.clone(), below))
            });
            let fm = match base {
                Some((accepted, boundary, below)) => {
                    // A pop out of the shorter chain now continues in a copy of `below`
                    // (the next real frame) over the unknown context.
                    let (local, _) = engine.local_chain(below, 1);
                    let cont = engine.closure_set(local);
                    continue_frame_mask(engine, &ts.vocab, &mut ts.path, accepted, &boundary, cont)
                }
                None => full_frame_mask(engine, ts, key),
            };
            ts.frames.insert(key, fm);
        }
        let Some(fm) = ts.frames.get(&key) else {
            return;
        };
        let settle = anchor.is_none() || fm.boundary.len() <= FEW_BOUNDARIES || k == MAX_CONTEXT;
        if !settle {
            // Re-walking a few boundary subtrees one frame further beats a new full walk;
            // thousands of them do not.
            let few = fm.boundary.len() <= MANY_BOUNDARIES;
            shorter = anchor.filter(|_| few).map(|below| (key, below));
            k += 1;
            continue;
        }
        for (o, a) in out.iter_mut().zip(fm.accepted.iter()) {
            *o |= a;
        }
        if let Some(anchor) = anchor
            && !fm.boundary.is_empty()
        {
            let parent = engine.closure_set(anchor);
            let boundary = fm.boundary.clone();
            for node in boundary {
                walk(
                    engine,
                    &ts.vocab,
                    &mut ts.path,
                    Span::Below(node),
                    parent,
                    out,
                    None,
                );
            }
        }
        return;
    }
}

/// The mask of chain `key` from the whole vocabulary: from the shared walk of a free
/// string's inside when `key` starts inside one (see `json_string.rs`), else a full walk.
fn full_frame_mask(engine: &mut Engine, ts: &mut TokenState, key: u32) -> FrameMask {
    let start = engine.closure_set(key);
    // No token starts more characters than it has bytes.
    let cap = ts.vocab.max_depth as u32 + 1;
    if let Some(found) = ts.strings.find(engine, start, cap)
        && let Some(inside) = ts.strings.inside(found.kind, &ts.vocab, &mut ts.path)
    {
        let part = if found.closes_at_once {
            &inside.any
        } else {
            &inside.after_char
        };
        let (accepted, ends) = inside.within(part, found.budget);
        return continue_frame_mask(engine, &ts.vocab, &mut ts.path, accepted, &ends, found.exit);
    }
    if let Some(fm) = string_after_plain_bytes(engine, ts, start, cap) {
        return fm;
    }
    let mut fm = FrameMask {
        accepted: vec![0u32; ts.vocab.mask_words()].into(),
        boundary: Vec::new(),
    };
    walk(
        engine,
        &ts.vocab,
        &mut ts.path,
        Span::All,
        start,
        &mut fm.accepted,
        Some(&mut fm.boundary),
    );
    fm
}

/// Plain characters leading into one set that many first bytes share: below that many, a
/// full walk is cheap enough.
const MANY_PLAIN: usize = 32;

/// The mask of a state that, on most plain characters (see [`plain`]), enters the inside of
/// one free string: the key of an object that also allows other properties, on its way
/// through the declared names. A token starting with such a byte is read from the string's
/// inside after it, where the inside already was before it; so below those first bytes
/// the vocabulary's shared walk holds (its tokens, and its exits walked from the state
/// after the quote). The other first bytes (a declared name's next character, the quote,
/// escapes, non-ASCII) are walked as usual.
fn string_after_plain_bytes(
    engine: &mut Engine,
    ts: &mut TokenState,
    start: u32,
    cap: u32,
) -> Option<FrameMask> {
    // Most states fail at once: three rarely named characters do not lead to one set.
    let probes = [b'q', b'X', b'~'].map(|b| engine.step(start, b));
    if !probes
        .iter()
        .enumerate()
        .any(|(i, &s)| s != DEAD && probes[i + 1..].contains(&s))
    {
        return None;
    }
    let mut after: Vec<(u32, usize)> = Vec::new();
    for &(byte, _) in &ts.vocab.first_level {
        let s = engine.step(start, byte);
        if !plain(byte) || s == DEAD {
            continue;
        }
        match after.iter_mut().find(|(t, _)| *t == s) {
            Some((_, n)) => *n += 1,
            None => after.push((s, 1)),
        }
    }
    let (inside, _) = after
        .into_iter()
        .filter(|&(_, n)| n >= MANY_PLAIN)
        .max_by_key(|&(_, n)| n)?;
    let found = ts
        .strings
        .find(engine, inside, cap)
        .filter(|f| f.closes_at_once && f.budget.is_none())?;
    let shared = ts.strings.inside(found.kind, &ts.vocab, &mut ts.path)?;
    let vocab = &ts.vocab;
    let mut fm = FrameMask {
        accepted: shared.plain_first.clone(),
        boundary: Vec::new(),
    };
    let mut boundary = Some(&mut fm.boundary);
    ts.path[0] = start;
    for &(byte, node) in &vocab.first_level {
        let s = engine.step(start, byte);
        if plain(byte) && s == inside {
            continue;
        }
        if plain(byte) {
            vocab.clear_tokens_from(node, &mut fm.accepted);
        }
        if s != DEAD {
            let end = vocab.nodes[node as usize].subtree_end as usize;
            walk_nodes(
                engine,
                vocab,
                &mut ts.path,
                node as usize,
                end,
                &mut fm.accepted,
                &mut boundary,
            );
        }
    }
    // As in `continue_frame_mask`: where the state after the quote may pop, the exits are
    // boundaries themselves.
    let pops = engine.has_hole(found.exit);
    for (&node, &first) in shared.any.exits.iter().zip(&shared.any.exit_first) {
        if !plain(first) || engine.step(start, first) != inside {
            continue;
        }
        if pops {
            fm.boundary.push(node);
        }
        walk(
            engine,
            vocab,
            &mut ts.path,
            Span::Below(node),
            found.exit,
            &mut fm.accepted,
            Some(&mut fm.boundary),
        );
    }
    fm.boundary.sort_unstable();
    fm.boundary.dedup();
    Some(fm)
}

/// A frame mask from a partial one: `accepted` holds the tokens that never reach the nodes
/// `ends`, where a path leaves a part already walked (a shorter chain's pop, a string's
/// closing quote) and continues in `cont`; only the subtrees below `ends` are walked.
fn continue_frame_mask(
    engine: &mut Engine,
    vocab: &Vocabulary,
    path: &mut [u32],
    mut accepted: Box<[u32]>,
    ends: &[u32],
    cont: u32,
) -> FrameMask {
    // If the continuation can pop at once, the end nodes are boundaries.
    let mut boundary = if engine.has_hole(cont) {
        ends.to_vec()
    } else {
        Vec::new()
    };
    for &node in ends {
        walk(
            engine,
            vocab,
            path,
            Span::Below(node),
            cont,
            &mut accepted,
            Some(&mut boundary),
        );
    }
    boundary.sort_unstable();
    boundary.dedup();
    FrameMask { accepted, boundary }
}

/// Which trie nodes a walk covers.
#[derive(Clone, Copy)]
pub(crate) enum Span {
    /// The whole vocabulary, from the root.
    All,
    /// The nodes strictly below this one, reading the bytes after it.
    Below(u32),
}

/// Sets in `out` the bit of every token in `span` whose bytes lead from `start` to a live
/// state. With `boundary`, also records the nodes where a path pops into the unknown context
/// (tokens ending there are accepted: the pop succeeds in any context).
///
/// Where the state loops on every byte class found below a node, the whole subtree is
/// accepted at once (its tokens are one slice), without visiting it.
pub(crate) fn walk(
    engine: &mut Engine,
    vocab: &Vocabulary,
    path: &mut [u32],
    span: Span,
    start: u32,
    out: &mut [u32],
    mut boundary: Option<&mut Vec<u32>>,
) {
    match span {
        Span::All => {
            path[0] = start;
            // The first-level nodes lie far apart in the trie: going through a compact list
            // of them, and stepping before touching a node, keeps a walk that allows few
            // first bytes from visiting (and missing the cache on) all of them.
            for &(byte, node) in &vocab.first_level {
                if engine.step(start, byte) != DEAD {
                    let end = vocab.nodes[node as usize].subtree_end as usize;
                    walk_nodes(engine, vocab, path, node as usize, end, out, &mut boundary);
                }
            }
        }
        Span::Below(n) => {
            let top = vocab.nodes[n as usize];
            path[top.depth as usize] = start;
            let (i, end) = (n as usize + 1, top.subtree_end as usize);
            walk_nodes(engine, vocab, path, i, end, out, &mut boundary);
        }
    }
}

/// [`walk`] over the trie nodes `i..end` (whole subtrees), whose parents' states are in
/// `path`.
fn walk_nodes(
    engine: &mut Engine,
    vocab: &Vocabulary,
    path: &mut [u32],
    mut i: usize,
    end: usize,
    out: &mut [u32],
    boundary: &mut Option<&mut Vec<u32>>,
) {
    let nodes = &vocab.nodes;
    while i < end {
        let node = nodes[i];
        let d = node.depth as usize;
        let s = engine.step(path[d - 1], node.byte);
        if s == DEAD {
            i = node.subtree_end as usize;
            continue;
        }
        // Worth checking only above a large subtree: a check may step every byte of a class.
        let big = node.subtree_end as usize - i > 16;
        // A lead byte puts the state in mid-character, where nothing loops: judge its
        // subtree from the state before it.
        if big && node.byte >= 0xC0 && {
            let classes = 1 << byte_class(node.byte) | vocab.below_classes[i];
            let utf8 = vocab.utf8[i] & UTF8_FROM_NODE != 0;
            let height = usize::from(vocab.height[i]);
            accepts_every_path(engine, path[d - 1], classes, utf8, height)
        } {
            let own = &vocab.token_ids[node.tokens_start as usize..node.tokens_end as usize];
            for &id in own {
                set_bit(out, id);
            }
            vocab.set_tokens_below(i, out);
            i = node.subtree_end as usize;
            continue;
        }
        path[d] = s;
        for &id in &vocab.token_ids[node.tokens_start as usize..node.tokens_end as usize] {
            set_bit(out, id);
        }
        let hole = engine.has_hole(s);
        if hole && let Some(b) = boundary.as_deref_mut() {
            b.push(i as u32);
        }
        if big && !hole && {
            let utf8 = vocab.utf8[i] & UTF8_BELOW != 0;
            let height = usize::from(vocab.height[i]) - 1;
            accepts_every_path(engine, s, vocab.below_classes[i], utf8, height)
        } {
            vocab.set_tokens_below(i, out);
            i = node.subtree_end as usize;
            continue;
        }
        if let Some(children) = vocab.wide_children(i) {
            for &(byte, child) in children {
                if engine.step(s, byte) != DEAD {
                    let end = nodes[child as usize].subtree_end as usize;
                    walk_nodes(engine, vocab, path, child as usize, end, out, boundary);
                }
            }
            i = node.subtree_end as usize;
            continue;
        }
        i += 1;
    }
}

/// Whether every text of at most `height` characters of the byte classes `classes` (any
/// non-ASCII scalar among them only with `utf8`, which says the texts are well-formed UTF-8,
/// possibly ending mid-character) leads from `state` to live states that cannot pop: then a
/// trie subtree spelling such texts is accepted whole, without visiting it. Chiefly the
/// inside of a string (a loop), or a string with `maxLength` (a counter): without this, a
/// string state would walk most of a large vocabulary (Qwen's 152k, Gemma's 262k).
#[inline]
fn accepts_every_path(
    engine: &mut Engine,
    mut state: u32,
    classes: u16,
    utf8: bool,
    height: usize,
) -> bool {
    const NON_ASCII: u16 = 0xF000;
    let non_ascii = classes & NON_ASCII != 0;
    if non_ascii && !utf8 {
        return false;
    }
    for _ in 0..height {
        match engine.char_successor(state, classes & !NON_ASCII, non_ascii) {
            Some(next) if next == state => return true,
            Some(next) => state = next,
            None => return false,
        }
    }
    true
}

/// Sets the bits of tokens the grammar names at this point (`<x>`, or all but x for `!<x>`).
fn allow_named_tokens(engine: &Engine, ts: &TokenState, set: u32, out: &mut [u32]) {
    if !has_token_edges(engine, set) {
        return;
    }
    for &f in engine.set(set) {
        if f <= HOLE {
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
