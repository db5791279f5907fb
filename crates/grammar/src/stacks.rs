//! The matcher's state: a set of parse stacks, hash-consed, with a lazily built DFA on top.
//!
//! A stack is a chain of frames; a frame is an automaton state plus its parent frame. Frames
//! are interned (`(state, parent)` → one id), so equal stacks are equal ids, a set of stacks
//! is a sorted list of ids, and sets are interned too. Each interned set is one state of a
//! DFA over bytes whose transitions are computed on first use and cached (a 256-entry
//! table), the way a lazy DFA runs a regex. Walking the vocabulary trie to build a token
//! mask is then mostly table look-ups.
//!
//! Sets hold only frames that can consume something (a state with byte or token edges), plus
//! [`ACCEPT`] when every frame can be popped (the document may end here).
//!
//! A frame whose parent is [`HOLE`] stands for "this rule, in any context": popping it puts
//! the [`HOLE`] marker in the set instead of continuing in a parent. Walks from such frames
//! are what token masks precompute once per automaton state (see `tokens.rs`).

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::automaton::{CompiledGrammar, StateId};

/// Frame id 0 is the bottom of every stack; in a set, 0 means "accepting".
pub(crate) const ACCEPT: u32 = 0;
const BOTTOM: u32 = 0;
/// Frame id 1 is the unknown context; in a set, 1 means "popped into the unknown context".
pub(crate) const HOLE: u32 = 1;
/// Set id of the empty set: every stack died.
pub(crate) const DEAD: u32 = 0;
const UNKNOWN: u32 = u32::MAX;
/// The character kind after the twelve ASCII byte classes: any non-ASCII scalar.
const UTF8_KIND: usize = 12;

#[derive(Clone, Copy)]
struct Frame {
    state: StateId,
    parent: u32,
    depth: u32,
}

/// Frames, sets and the lazy DFA for one compiled grammar.
pub(crate) struct Engine {
    pub(crate) g: Arc<CompiledGrammar>,
    frames: Vec<Frame>,
    frame_index: FxHashMap<(StateId, u32), u32>,
    sets: Vec<Box<[u32]>>,
    /// Per set, whether it holds the [`HOLE`] marker (checked at every trie node).
    holes: Vec<bool>,
    set_index: FxHashMap<Box<[u32]>, u32>,
    trans: Vec<Option<Box<[u32; 256]>>>,
    tables: usize,
    /// Per set, [`Engine::char_successor`] per kind of character (`UNKNOWN` until asked;
    /// `DEAD` for none).
    successors: Vec<[u32; UTF8_KIND + 1]>,
    /// Per set, the kinds known to lead back to it and the kinds known to have no successor.
    kind_summary: Vec<(u16, u16)>,
    /// Fewest bytes to empty the stack from each frame (`u32::MAX` = not computed).
    close_cost: Vec<u32>,
    pub(crate) initial: u32,
    // Scratch space for closures.
    stamp: Vec<u32>,
    epoch: u32,
    work: Vec<u32>,
    out: Vec<u32>,
    pub(crate) depth_limit_hit: bool,
    pub(crate) too_many_stacks: bool,
}

fn intern_frame(
    frames: &mut Vec<Frame>,
    index: &mut FxHashMap<(StateId, u32), u32>,
    state: StateId,
    parent: u32,
) -> u32 {
    *index.entry((state, parent)).or_insert_with(|| {
        let depth = frames[parent as usize].depth + 1;
        frames.push(Frame {
            state,
            parent,
            depth,
        });
        (frames.len() - 1) as u32
    })
}

impl Engine {
    pub(crate) fn new(g: Arc<CompiledGrammar>) -> Self {
        let mut e = Engine {
            g,
            frames: vec![
                Frame {
                    state: 0,
                    parent: BOTTOM,
                    depth: 0
                };
                2
            ],
            frame_index: FxHashMap::default(),
            sets: Vec::new(),
            holes: Vec::new(),
            set_index: FxHashMap::default(),
            trans: Vec::new(),
            tables: 0,
            successors: Vec::new(),
            kind_summary: Vec::new(),
            close_cost: Vec::new(),
            initial: DEAD,
            stamp: Vec::new(),
            epoch: 0,
            work: Vec::new(),
            out: Vec::new(),
            depth_limit_hit: false,
            too_many_stacks: false,
        };
        let dead = e.intern_set(Vec::new());
        debug_assert_eq!(dead, DEAD);
        let root_start = e.g.rule_start[0];
        let root = intern_frame(&mut e.frames, &mut e.frame_index, root_start, BOTTOM);
        e.begin();
        e.closure(root);
        e.initial = e.finish();
        e
    }

    pub(crate) fn set(&self, id: u32) -> &[u32] {
        &self.sets[id as usize]
    }

    pub(crate) fn is_accepting(&self, set: u32) -> bool {
        self.sets[set as usize].first() == Some(&ACCEPT)
    }

    /// Whether some path of `set` popped into the unknown context.
    pub(crate) fn has_hole(&self, set: u32) -> bool {
        self.holes[set as usize]
    }

    /// The top `k` frames of `frame` copied onto the unknown context: returns that local
    /// frame, and the real frame a pop into [`HOLE`] continues in (`None` when the stack is
    /// at most `k` deep, so the copy is the whole stack and exact).
    pub(crate) fn local_chain(&mut self, frame: u32, k: usize) -> (u32, Option<u32>) {
        let mut states = [0 as StateId; 8];
        let mut n = 0;
        let mut cur = frame;
        while n < k.min(states.len()) && cur != BOTTOM {
            states[n] = self.frames[cur as usize].state;
            cur = self.frames[cur as usize].parent;
            n += 1;
        }
        let (mut key, anchor) = if cur == BOTTOM {
            (BOTTOM, None)
        } else {
            (HOLE, Some(cur))
        };
        for &q in states[..n].iter().rev() {
            key = intern_frame(&mut self.frames, &mut self.frame_index, q, key);
        }
        (key, anchor)
    }

    /// The set holding `frame` and what it reaches without consuming input.
    pub(crate) fn closure_set(&mut self, frame: u32) -> u32 {
        self.begin();
        self.closure(frame);
        self.finish()
    }

    /// The one set that every character of the given kinds leads to from `set`, through
    /// states that cannot pop into the unknown context; `None` when they part ways, die or
    /// may pop. Kinds: the ASCII byte classes in `ascii` (see [`byte_class`]) and, with
    /// `utf8`, every well-formed non-ASCII scalar. Following it `h` times shows that every
    /// text of at most `h` such characters is accepted: the inside of a JSON string loops
    /// back to itself, and a string with `maxLength` steps through a counter.
    ///
    /// [`byte_class`]: crate::vocab::byte_class
    #[inline]
    pub(crate) fn char_successor(&mut self, set: u32, ascii: u16, utf8: bool) -> Option<u32> {
        let mut kinds = ascii & ((1 << UTF8_KIND) - 1);
        if utf8 {
            kinds |= 1 << UTF8_KIND;
        }
        // Most questions are answered by what is known of the set already.
        let (loops, fails) = self
            .kind_summary
            .get(set as usize)
            .copied()
            .unwrap_or((0, 0));
        if kinds & fails != 0 {
            return None;
        }
        if kinds != 0 && kinds & !loops == 0 {
            return Some(set);
        }
        let mut target = None;
        while kinds != 0 {
            let kind = kinds.trailing_zeros() as usize;
            kinds &= kinds - 1;
            let next = self.kind_successor(set, kind)?;
            if target.is_some_and(|t| t != next) {
                return None;
            }
            target = Some(next);
        }
        target
    }

    fn kind_successor(&mut self, set: u32, kind: usize) -> Option<u32> {
        if self.successors.len() < self.sets.len() {
            self.successors
                .resize(self.sets.len(), [UNKNOWN; UTF8_KIND + 1]);
        }
        let mut next = self.successors[set as usize][kind];
        if next == UNKNOWN {
            next = if kind == UTF8_KIND {
                self.utf8_successor(set)
            } else {
                self.class_successor(set, kind as u8)
            }
            .unwrap_or(DEAD);
            self.successors[set as usize][kind] = next;
            if self.kind_summary.len() < self.sets.len() {
                self.kind_summary.resize(self.sets.len(), (0, 0));
            }
            let summary = &mut self.kind_summary[set as usize];
            if next == set {
                summary.0 |= 1 << kind;
            } else if next == DEAD {
                summary.1 |= 1 << kind;
            }
        }
        (next != DEAD).then_some(next)
    }

    fn class_successor(&mut self, set: u32, class: u8) -> Option<u32> {
        let mut target = None;
        for b in (0..=255u8).filter(|&b| crate::vocab::byte_class(b) == class) {
            let t = self.step(set, b);
            if t == DEAD || self.has_hole(t) || target.is_some_and(|x| x != t) {
                return None;
            }
            target = Some(t);
        }
        target
    }

    /// Every well-formed encoding of a non-ASCII scalar, by the byte ranges of Unicode's
    /// table: at most a few thousand steps, once per set.
    fn utf8_successor(&mut self, set: u32) -> Option<u32> {
        let mut target = None;
        for shape in crate::vocab::UTF8_SHAPES {
            let mut states = vec![set];
            for &(lo, hi) in shape {
                let mut next: Vec<u32> = Vec::new();
                for &s in &states {
                    for b in lo..=hi {
                        let t = self.step(s, b);
                        if t == DEAD || self.has_hole(t) {
                            return None;
                        }
                        if !next.contains(&t) {
                            next.push(t);
                        }
                    }
                }
                // States that fan out in mid-character are no plain text: give up rather
                // than explore them.
                if next.len() > 8 {
                    return None;
                }
                states = next;
            }
            match (states.as_slice(), target) {
                (&[t], None) => target = Some(t),
                (&[t], Some(x)) if t == x => {}
                _ => return None,
            }
        }
        target
    }

    /// The automaton state of a frame.
    pub(crate) fn frame_state(&self, frame: u32) -> StateId {
        self.frames[frame as usize].state
    }

    /// The frame below `frame` ([`HOLE`] for a frame over the unknown context).
    pub(crate) fn frame_parent(&self, frame: u32) -> u32 {
        self.frames[frame as usize].parent
    }

    /// The frame for automaton state `state` over `parent` (a frame, or [`HOLE`]).
    pub(crate) fn frame(&mut self, state: StateId, parent: u32) -> u32 {
        intern_frame(&mut self.frames, &mut self.frame_index, state, parent)
    }

    fn intern_set(&mut self, v: Vec<u32>) -> u32 {
        if let Some(&id) = self.set_index.get(v.as_slice()) {
            return id;
        }
        let id = self.sets.len() as u32;
        let b: Box<[u32]> = v.into_boxed_slice();
        self.holes.push(b.iter().take(2).any(|&f| f == HOLE));
        self.sets.push(b.clone());
        self.set_index.insert(b, id);
        self.trans.push(None);
        id
    }

    fn begin(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.stamp.iter_mut().for_each(|s| *s = u32::MAX);
            self.epoch = 1;
        }
        self.out.clear();
    }

    fn finish(&mut self) -> u32 {
        let mut v = std::mem::take(&mut self.out);
        v.sort_unstable();
        v.dedup();
        if v.len() > self.g.limits.max_live_stacks {
            self.too_many_stacks = true;
            v.clear();
        }
        let id = self.intern_set(v.clone());
        v.clear();
        self.out = v;
        id
    }

    /// Adds to `out` every consuming frame reachable from `frame` without consuming input.
    fn closure(&mut self, frame: u32) {
        let g = &*self.g;
        self.work.push(frame);
        while let Some(f) = self.work.pop() {
            if self.stamp.len() < self.frames.len() {
                self.stamp.resize(self.frames.len() * 2, u32::MAX);
            }
            if f <= HOLE {
                // A marker: accepted (0) or popped into the unknown context (1).
                self.out.push(f);
                continue;
            }
            if self.stamp[f as usize] == self.epoch {
                continue;
            }
            self.stamp[f as usize] = self.epoch;
            let fr = self.frames[f as usize];
            let st = &g.states[fr.state as usize];
            if !st.bytes.is_empty() || !st.tokens.is_empty() {
                self.out.push(f);
            }
            if st.is_final {
                // Popping the root frame empties the stack: the document may end.
                self.work.push(if fr.parent == BOTTOM {
                    ACCEPT
                } else {
                    fr.parent
                });
            }
            for &(callee, ret) in &st.calls {
                if fr.depth >= g.limits.max_stack_depth {
                    self.depth_limit_hit = true;
                    continue;
                }
                let r = intern_frame(&mut self.frames, &mut self.frame_index, ret, fr.parent);
                let c = intern_frame(
                    &mut self.frames,
                    &mut self.frame_index,
                    g.rule_start[callee as usize],
                    r,
                );
                self.work.push(c);
            }
        }
    }

    /// The set after consuming `byte` from `set` (cached).
    #[inline]
    pub(crate) fn step(&mut self, set: u32, byte: u8) -> u32 {
        if let Some(t) = &self.trans[set as usize] {
            let next = t[byte as usize];
            if next != UNKNOWN {
                return next;
            }
        }
        self.step_slow(set, byte)
    }

    fn step_slow(&mut self, set: u32, byte: u8) -> u32 {
        if self.tables >= self.g.limits.max_cached_states {
            self.trans.iter_mut().for_each(|t| *t = None);
            self.tables = 0;
        }
        if self.trans[set as usize].is_none() {
            // Bytes no frame has an edge for lead nowhere: fill them in at once, so a trie
            // walk from a new state computes only the transitions that can succeed.
            let mut table = Box::new([DEAD; 256]);
            for &f in self.sets[set as usize].iter() {
                if f <= HOLE {
                    continue;
                }
                for e in &self.g.states[self.frames[f as usize].state as usize].bytes {
                    table[e.lo as usize..=e.hi as usize].fill(UNKNOWN);
                }
            }
            self.trans[set as usize] = Some(table);
            self.tables += 1;
            if let Some(t) = &self.trans[set as usize]
                && t[byte as usize] == DEAD
            {
                return DEAD;
            }
        }
        let next = if set == DEAD {
            DEAD
        } else {
            self.compute_step(set, byte)
        };
        // Every byte that falls in exactly the same edges takes the same step: fill in the
        // whole run around `byte` at once (a string's inside is a few runs, not 256 bytes).
        let (lo, hi) = self.same_edges_run(set, byte);
        if let Some(t) = &mut self.trans[set as usize] {
            t[lo as usize..=hi as usize].fill(next);
        }
        next
    }

    /// The widest run of bytes around `byte` that no edge of `set`'s frames starts or ends
    /// inside of.
    fn same_edges_run(&self, set: u32, byte: u8) -> (u8, u8) {
        let (mut lo, mut hi) = (0u8, 255u8);
        for &f in self.sets[set as usize].iter() {
            if f <= HOLE {
                continue;
            }
            for e in &self.g.states[self.frames[f as usize].state as usize].bytes {
                if e.hi < byte {
                    lo = lo.max(e.hi + 1);
                } else if e.lo > byte {
                    hi = hi.min(e.lo - 1);
                } else {
                    lo = lo.max(e.lo);
                    hi = hi.min(e.hi);
                }
            }
        }
        (lo, hi)
    }

    fn compute_step(&mut self, set: u32, byte: u8) -> u32 {
        self.begin();
        let g = self.g.clone();
        for i in 0..self.sets[set as usize].len() {
            let f = self.sets[set as usize][i];
            if f <= HOLE {
                continue;
            }
            let fr = self.frames[f as usize];
            for e in &g.states[fr.state as usize].bytes {
                if e.lo <= byte && byte <= e.hi {
                    let t =
                        intern_frame(&mut self.frames, &mut self.frame_index, e.target, fr.parent);
                    self.closure(t);
                }
            }
        }
        self.finish()
    }

    /// The set after taking token edges that match `token` (for `<...>` terminals).
    pub(crate) fn step_token(
        &mut self,
        set: u32,
        matches: impl Fn(&crate::ir::TokenRef, bool) -> bool,
    ) -> u32 {
        self.begin();
        let g = self.g.clone();
        for i in 0..self.sets[set as usize].len() {
            let f = self.sets[set as usize][i];
            if f <= HOLE {
                continue;
            }
            let fr = self.frames[f as usize];
            for (t, negated, target) in &g.states[fr.state as usize].tokens {
                if matches(t, *negated) {
                    let t =
                        intern_frame(&mut self.frames, &mut self.frame_index, *target, fr.parent);
                    self.closure(t);
                }
            }
        }
        self.finish()
    }

    /// The union of two sets (a token that matches both as bytes and as a token edge).
    pub(crate) fn union(&mut self, a: u32, b: u32) -> u32 {
        if a == DEAD {
            return b;
        }
        if b == DEAD || a == b {
            return a;
        }
        let mut v: Vec<u32> = self.sets[a as usize]
            .iter()
            .chain(self.sets[b as usize].iter())
            .copied()
            .collect();
        v.sort_unstable();
        v.dedup();
        self.intern_set(v)
    }

    /// Fewest bytes that take `set` to an accepting set (`None` if it cannot end).
    pub(crate) fn close_cost(&mut self, set: u32) -> Option<u32> {
        let mut best = u32::MAX;
        for i in 0..self.sets[set as usize].len() {
            let f = self.sets[set as usize][i];
            best = best.min(match f {
                ACCEPT => 0,
                HOLE => continue,
                _ => self.frame_cost(f),
            });
        }
        (best != u32::MAX).then_some(best)
    }

    fn frame_cost(&mut self, frame: u32) -> u32 {
        if self.close_cost.len() < self.frames.len() {
            self.close_cost.resize(self.frames.len(), u32::MAX);
        }
        // Walk up to the first frame with a known cost, then fill the chain back down.
        let mut chain = Vec::new();
        let mut f = frame;
        while f != BOTTOM && self.close_cost[f as usize] == u32::MAX {
            chain.push(f);
            f = self.frames[f as usize].parent;
        }
        let mut cost = if f == BOTTOM {
            0
        } else {
            self.close_cost[f as usize]
        };
        for &c in chain.iter().rev() {
            let own = self.g.min_to_end[self.frames[c as usize].state as usize];
            cost = own.saturating_add(cost);
            self.close_cost[c as usize] = cost;
        }
        cost
    }
}
