//! Compiling the IR into the matcher's automaton: one byte-level NFA per called rule, with
//! rule-call edges between them (a recursive transition network).
//!
//! Small non-recursive rules are *inlined* into their callers (up to
//! [`Limits::max_inline_states`]): `string ::= "\"" char* "\""` becomes one automaton whose
//! `char` loop never leaves the frame. That matters for speed: the matcher's state is a set
//! of stacks of frames, and fewer pushes and pops mean fewer distinct states to cache.
//!
//! Repetitions are loops in the automaton, not helper rules, so `x*` never recurses and a
//! nullable body cannot loop. Character classes become UTF-8 byte-range sequences. The
//! automaton has no ε-edges: they are removed after the Thompson construction.
//!
//! A rule that can call itself before consuming a byte (left recursion) is refused, as
//! llama.cpp does, with the cycle named.

use rustc_hash::FxHashSet;

use crate::error::GrammarError;
use crate::ir::{CharRange, Expr, Grammar, RuleId, TokenRef};
use crate::limits::Limits;

/// Index of a state in [`CompiledGrammar::states`].
pub(crate) type StateId = u32;

/// A byte-range edge `lo..=hi → target`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ByteEdge {
    pub lo: u8,
    pub hi: u8,
    pub target: StateId,
}

/// One automaton state. A frame of the matcher's stack sits at a state.
#[derive(Clone, Debug, Default)]
pub(crate) struct State {
    pub bytes: Vec<ByteEdge>,
    /// `(rule, return state)`: push the rule, continue at the return state when it ends.
    pub calls: Vec<(u32, StateId)>,
    /// A whole-token edge (`<think>`, `!<[2]>`), resolved against a vocabulary.
    pub tokens: Vec<(TokenRef, bool, StateId)>,
    /// The rule may end here.
    pub is_final: bool,
}

/// A grammar ready for matching; share it between matchers with an `Arc`.
#[derive(Clone, Debug)]
pub struct CompiledGrammar {
    pub(crate) states: Vec<State>,
    /// Start state per called rule (indexed by the rule's position in `called`).
    pub(crate) rule_start: Vec<StateId>,
    /// IR rule names per called rule, for messages.
    pub(crate) rule_names: Vec<String>,
    /// Fewest bytes from each state to the end of its rule.
    pub(crate) min_to_end: Vec<u32>,
    pub(crate) limits: Limits,
}

impl CompiledGrammar {
    /// Compiles with the default [`Limits`].
    pub fn new(grammar: &Grammar) -> Result<Self, GrammarError> {
        Self::with_limits(grammar, Limits::default())
    }

    /// Compiles under the given budgets.
    pub fn with_limits(grammar: &Grammar, limits: Limits) -> Result<Self, GrammarError> {
        let root = grammar.root.ok_or_else(|| GrammarError::NoRoot {
            name: "root".into(),
        })?;
        let inline = inlinable(grammar, &limits);
        let mut b = Builder {
            g: grammar,
            inline: &inline,
            limits: &limits,
            nfa: Vec::new(),
            called: vec![root.0],
            called_index: Default::default(),
        };
        b.called_index.insert(root.0, 0);
        let mut rule_start = Vec::new();
        let mut rule_ends = Vec::new();
        let mut i = 0;
        while i < b.called.len() {
            let r = RuleId(b.called[i]);
            let start = b.new_state()?;
            let end = b.expr(&grammar.rule(r).expr, start, 0)?;
            rule_start.push(start);
            rule_ends.push(end);
            i += 1;
        }
        let rule_names = b
            .called
            .iter()
            .map(|&r| grammar.rule(RuleId(r)).name.clone())
            .collect();
        let (states, rule_start) = remove_epsilons(&b.nfa, &rule_start, &rule_ends, &limits)?;
        let mut g = CompiledGrammar {
            states,
            rule_start,
            rule_names,
            min_to_end: Vec::new(),
            limits,
        };
        g.check_left_recursion()?;
        g.min_to_end = g.compute_min_to_end();
        Ok(g)
    }

    /// Parses GBNF and compiles it.
    pub fn from_gbnf(src: &str) -> Result<Self, GrammarError> {
        let limits = Limits::default();
        let grammar = crate::gbnf::parse_with_limits(src, &limits)?;
        Self::with_limits(&grammar, limits)
    }

    /// Number of automaton states.
    pub fn num_states(&self) -> usize {
        self.states.len()
    }

    /// The budgets this grammar was compiled under (the matcher uses them too).
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Whether `bytes` is a complete document of the grammar.
    pub fn accepts(self: &std::sync::Arc<Self>, bytes: &[u8]) -> bool {
        let mut m = crate::Matcher::new(self.clone());
        m.consume_bytes(bytes).is_ok() && m.is_accepting()
    }

    /// Which called rules can match the empty string (a fixpoint).
    fn nullable_rules(&self) -> Vec<bool> {
        let mut nullable = vec![false; self.rule_start.len()];
        loop {
            let mut changed = false;
            for r in 0..self.rule_start.len() {
                if !nullable[r] && self.reach_empty(r, &nullable).0 {
                    nullable[r] = true;
                    changed = true;
                }
            }
            if !changed {
                return nullable;
            }
        }
    }

    /// From rule `r`'s start without consuming: (can it end, which rules it calls).
    fn reach_empty(&self, r: usize, nullable: &[bool]) -> (bool, Vec<u32>) {
        let mut seen = FxHashSet::default();
        let mut todo = vec![self.rule_start[r]];
        let (mut ends, mut calls) = (false, Vec::new());
        while let Some(s) = todo.pop() {
            if !seen.insert(s) {
                continue;
            }
            let st = &self.states[s as usize];
            ends |= st.is_final;
            for &(callee, ret) in &st.calls {
                calls.push(callee);
                if nullable[callee as usize] {
                    todo.push(ret);
                }
            }
        }
        (ends, calls)
    }

    fn check_left_recursion(&self) -> Result<(), GrammarError> {
        let nullable = self.nullable_rules();
        let edges: Vec<Vec<u32>> = (0..self.rule_start.len())
            .map(|r| self.reach_empty(r, &nullable).1)
            .collect();
        // Depth-first search for a cycle; colour 1 = on the path, 2 = done.
        let mut colour = vec![0u8; edges.len()];
        for start in 0..edges.len() {
            if colour[start] != 0 {
                continue;
            }
            let mut path: Vec<(usize, usize)> = vec![(start, 0)];
            colour[start] = 1;
            while let Some(&mut (r, ref mut next)) = path.last_mut() {
                if let Some(&callee) = edges[r].get(*next) {
                    *next += 1;
                    let c = callee as usize;
                    if colour[c] == 1 {
                        let from = path.iter().position(|&(p, _)| p == c).unwrap_or(0);
                        let mut cycle: Vec<String> = path[from..]
                            .iter()
                            .map(|&(p, _)| self.rule_names[p].clone())
                            .collect();
                        cycle.push(self.rule_names[c].clone());
                        return Err(GrammarError::LeftRecursion {
                            rule: self.rule_names[c].clone(),
                            cycle,
                        });
                    }
                    if colour[c] == 0 {
                        colour[c] = 1;
                        path.push((c, 0));
                    }
                } else {
                    colour[r] = 2;
                    path.pop();
                }
            }
        }
        Ok(())
    }

    /// Fewest bytes from each state to its rule's end, by Bellman-Ford rounds over the
    /// rules' minimum lengths (grammars are small; rounds stop when nothing improves).
    fn compute_min_to_end(&self) -> Vec<u32> {
        let n = self.states.len();
        let mut dist = vec![u32::MAX; n];
        loop {
            let mut changed = false;
            for s in (0..n).rev() {
                let st = &self.states[s];
                let mut best = if st.is_final { 0 } else { u32::MAX };
                for e in &st.bytes {
                    best = best.min(dist[e.target as usize].saturating_add(1));
                }
                for &(callee, ret) in &st.calls {
                    let inner = dist[self.rule_start[callee as usize] as usize];
                    best = best.min(inner.saturating_add(dist[ret as usize]));
                }
                for &(_, _, t) in &st.tokens {
                    // A token's length is unknown without a vocabulary; count it as one byte.
                    best = best.min(dist[t as usize].saturating_add(1));
                }
                if best < dist[s] {
                    dist[s] = best;
                    changed = true;
                }
            }
            if !changed {
                return dist;
            }
        }
    }
}

/// Which rules are copied into their callers: non-recursive and small once expanded.
fn inlinable(g: &Grammar, limits: &Limits) -> Vec<bool> {
    let n = g.rules.len();
    // size[r]: Some(expanded size) once known; recursion makes a rule non-inlinable.
    let mut size: Vec<Option<usize>> = vec![None; n];
    let mut state = vec![0u8; n]; // 0 new, 1 visiting, 2 done
    fn visit(
        g: &Grammar,
        r: usize,
        size: &mut Vec<Option<usize>>,
        state: &mut Vec<u8>,
        limits: &Limits,
    ) -> Option<usize> {
        match state[r] {
            1 => return None,
            2 => return size[r],
            _ => {}
        }
        state[r] = 1;
        let s = expr_size(g, &g.rules[r].expr, size, state, limits);
        state[r] = 2;
        size[r] = s.filter(|&s| s <= limits.max_inline_states);
        size[r]
    }
    fn expr_size(
        g: &Grammar,
        e: &Expr,
        size: &mut Vec<Option<usize>>,
        state: &mut Vec<u8>,
        limits: &Limits,
    ) -> Option<usize> {
        Some(match e {
            Expr::Empty => 1,
            Expr::Literal(b) => b.len() + 1,
            Expr::Class { .. } | Expr::Token { .. } => 8,
            Expr::Rule(r) => {
                let inner = visit(g, r.0 as usize, size, state, limits);
                // A called (not inlined) rule costs one state here; a recursive one poisons
                // only itself, its callers may still be inlined around the call.
                inner.unwrap_or(2)
            }
            Expr::Seq(xs) | Expr::Alt(xs) => {
                // Saturating: nested repetitions (`x****`) reach usize::MAX, never inlined.
                let mut t: usize = 2;
                for x in xs {
                    t = t.saturating_add(expr_size(g, x, size, state, limits)?);
                }
                t
            }
            Expr::Repeat { expr, min, max } => {
                let body = expr_size(g, expr, size, state, limits)?;
                body.saturating_mul((*max).unwrap_or(*min).max(1) as usize + 1)
            }
        })
    }
    for r in 0..n {
        visit(g, r, &mut size, &mut state, limits);
    }
    // Recursive rules were visited while "visiting" and got None through the cycle check.
    let mut on_cycle = vec![false; n];
    for (r, flag) in on_cycle.iter_mut().enumerate() {
        *flag = reaches(g, r, r);
    }
    (0..n)
        .map(|r| size[r].is_some() && !on_cycle[r] && Some(RuleId(r as u32)) != g.root)
        .collect()
}

/// Whether rule `from` references `to` (directly or transitively).
fn reaches(g: &Grammar, from: usize, to: usize) -> bool {
    let mut seen = vec![false; g.rules.len()];
    let mut todo = Vec::new();
    refs(&g.rules[from].expr, &mut todo);
    while let Some(r) = todo.pop() {
        if r == to {
            return true;
        }
        if !std::mem::replace(&mut seen[r], true) {
            refs(&g.rules[r].expr, &mut todo);
        }
    }
    false
}

fn refs(e: &Expr, out: &mut Vec<usize>) {
    match e {
        Expr::Rule(r) => out.push(r.0 as usize),
        Expr::Seq(xs) | Expr::Alt(xs) => xs.iter().for_each(|x| refs(x, out)),
        Expr::Repeat { expr, .. } => refs(expr, out),
        _ => {}
    }
}

/// A repetition of a repetition as one, where that is the same language: `(x+)+` is `x+`,
/// `(x?)+` and `(x*)?` are `x*`, `(x{2,}){3,}` is `x{6,}`. Stacked quantifiers (`x++++`,
/// which llama.cpp's syntax allows) otherwise copy the body twice per level, and the
/// automaton's loops nest: fourteen of them took seconds to compile.
fn stacked_repeats(expr: &Expr, min: u32, max: Option<u32>) -> (&Expr, u32, Option<u32>) {
    let (mut expr, mut min, mut max) = (expr, min, max);
    while let Expr::Repeat {
        expr: inner,
        min: a,
        max: b,
    } = expr
    {
        let (a, b) = (*a, *b);
        (min, max) = match (a, b, min, max) {
            // Sums of at least `min` runs of at least `a`: every count from `a·min` up.
            (a, None, c, None) if c >= 1 => match a.checked_mul(c) {
                Some(n) => (n, None),
                None => break,
            },
            // Runs that may be empty or single, any number of times: any count.
            (0 | 1, None, _, _) | (0, Some(1), _, None)
                if max != Some(0) && (a == 0 || min == 0) =>
            {
                (0, None)
            }
            (0, Some(1), 0, Some(1)) => (0, Some(1)),
            _ => break,
        };
        expr = inner;
    }
    (expr, min, max)
}

/// A Thompson-construction state, before ε-removal.
#[derive(Default)]
struct NfaState {
    eps: Vec<StateId>,
    bytes: Vec<ByteEdge>,
    calls: Vec<(u32, StateId)>,
    tokens: Vec<(TokenRef, bool, StateId)>,
}

struct Builder<'a> {
    g: &'a Grammar,
    inline: &'a [bool],
    limits: &'a Limits,
    nfa: Vec<NfaState>,
    called: Vec<u32>,
    called_index: rustc_hash::FxHashMap<u32, u32>,
}

impl Builder<'_> {
    fn new_state(&mut self) -> Result<StateId, GrammarError> {
        if self.nfa.len() >= self.limits.max_states {
            return Err(GrammarError::LimitExceeded {
                limit: "max_states",
                value: self.nfa.len() as u64 + 1,
                max: self.limits.max_states as u64,
                hint: "the grammar expands to too large an automaton; lower repetition bounds",
            });
        }
        self.nfa.push(NfaState::default());
        Ok((self.nfa.len() - 1) as StateId)
    }

    fn eps(&mut self, from: StateId, to: StateId) {
        self.nfa[from as usize].eps.push(to);
    }

    /// Adds `e` starting at `from`; returns the state where it ends.
    fn expr(&mut self, e: &Expr, from: StateId, depth: u32) -> Result<StateId, GrammarError> {
        match e {
            Expr::Empty => Ok(from),
            Expr::Literal(bytes) => {
                let mut cur = from;
                for &b in bytes {
                    let next = self.new_state()?;
                    self.nfa[cur as usize].bytes.push(ByteEdge {
                        lo: b,
                        hi: b,
                        target: next,
                    });
                    cur = next;
                }
                Ok(cur)
            }
            Expr::Class { ranges, negated } => self.class(ranges, *negated, from),
            Expr::Token { token, negated } => {
                let next = self.new_state()?;
                self.nfa[from as usize]
                    .tokens
                    .push((token.clone(), *negated, next));
                Ok(next)
            }
            Expr::Rule(r) => {
                if self.inline[r.0 as usize] && depth < 64 {
                    let body = &self.g.rule(*r).expr;
                    return self.expr(body, from, depth + 1);
                }
                let idx = match self.called_index.get(&r.0) {
                    Some(&i) => i,
                    None => {
                        let i = self.called.len() as u32;
                        self.called.push(r.0);
                        self.called_index.insert(r.0, i);
                        i
                    }
                };
                let next = self.new_state()?;
                self.nfa[from as usize].calls.push((idx, next));
                Ok(next)
            }
            Expr::Seq(xs) => {
                let mut cur = from;
                for x in xs {
                    cur = self.expr(x, cur, depth)?;
                }
                Ok(cur)
            }
            Expr::Alt(xs) => {
                let end = self.new_state()?;
                for x in xs {
                    let s = self.new_state()?;
                    self.eps(from, s);
                    let e = self.expr(x, s, depth)?;
                    self.eps(e, end);
                }
                Ok(end)
            }
            Expr::Repeat { expr, min, max } => {
                let (expr, min, max) = &stacked_repeats(expr, *min, *max);
                let limit = self.limits.max_repetition;
                let worst = max.unwrap_or(*min).max(*min);
                if worst > limit {
                    return Err(GrammarError::LimitExceeded {
                        limit: "max_repetition",
                        value: u64::from(worst),
                        max: u64::from(limit),
                        hint: "use * or + for unbounded repetition",
                    });
                }
                let mut cur = from;
                for _ in 0..*min {
                    cur = self.expr(expr, cur, depth)?;
                }
                match max {
                    None => {
                        let lp = self.new_state()?;
                        self.eps(cur, lp);
                        let body = self.new_state()?;
                        self.eps(lp, body);
                        let e = self.expr(expr, body, depth)?;
                        self.eps(e, lp);
                        Ok(lp)
                    }
                    Some(max) => {
                        let end = self.new_state()?;
                        for _ in *min..*max {
                            self.eps(cur, end);
                            let body = self.new_state()?;
                            self.eps(cur, body);
                            cur = self.expr(expr, body, depth)?;
                        }
                        self.eps(cur, end);
                        Ok(end)
                    }
                }
            }
        }
    }

    fn class(
        &mut self,
        ranges: &[CharRange],
        negated: bool,
        from: StateId,
    ) -> Result<StateId, GrammarError> {
        let end = self.new_state()?;
        let mut set: Vec<(u32, u32)> = ranges
            .iter()
            .filter(|r| r.lo <= r.hi)
            .map(|r| (r.lo as u32, r.hi as u32))
            .collect();
        set.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::new();
        for (lo, hi) in set {
            match merged.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        if negated {
            let mut comp = Vec::new();
            let mut next = 0u32;
            for (lo, hi) in merged {
                if lo > next {
                    comp.push((next, lo - 1));
                }
                next = hi + 1;
            }
            if next <= 0x10FFFF {
                comp.push((next, 0x10FFFF));
            }
            merged = comp;
        }
        for (lo, hi) in merged {
            let (Some(lo), Some(hi)) = (scalar_at_or_after(lo), scalar_at_or_before(hi)) else {
                continue;
            };
            if lo > hi {
                continue;
            }
            for seq in regex_syntax::utf8::Utf8Sequences::new(lo, hi) {
                let rs = seq.as_slice();
                let mut cur = from;
                for (i, r) in rs.iter().enumerate() {
                    let next = if i + 1 == rs.len() {
                        end
                    } else {
                        self.new_state()?
                    };
                    self.nfa[cur as usize].bytes.push(ByteEdge {
                        lo: r.start,
                        hi: r.end,
                        target: next,
                    });
                    cur = next;
                }
            }
        }
        Ok(end)
    }
}

/// The first scalar value ≥ `c` (skipping surrogates).
fn scalar_at_or_after(c: u32) -> Option<char> {
    char::from_u32(if (0xD800..=0xDFFF).contains(&c) {
        0xE000
    } else {
        c
    })
}

/// The last scalar value ≤ `c` (skipping surrogates).
fn scalar_at_or_before(c: u32) -> Option<char> {
    char::from_u32(if (0xD800..=0xDFFF).contains(&c) {
        0xD7FF
    } else {
        c.min(0x10FFFF)
    })
}

/// Removes ε-edges: each kept state gets the edges of its ε-closure. Kept states are the
/// rule starts and the targets of consuming edges and returns; the rest disappear.
///
/// The work is the kept states times their closures, quadratic where loops nest deeply; it
/// is bounded by [`Limits::max_states`] times [`CLOSURE_WORK_PER_STATE`].
fn remove_epsilons(
    nfa: &[NfaState],
    starts: &[StateId],
    ends: &[StateId],
    limits: &Limits,
) -> Result<(Vec<State>, Vec<StateId>), GrammarError> {
    let budget = limits.max_states.saturating_mul(CLOSURE_WORK_PER_STATE);
    let mut work = 0usize;
    let mut is_end = vec![false; nfa.len()];
    for &e in ends {
        is_end[e as usize] = true;
    }
    let mut new_id: Vec<StateId> = vec![StateId::MAX; nfa.len()];
    let mut order: Vec<StateId> = Vec::new();
    for &s in starts {
        if new_id[s as usize] == StateId::MAX {
            new_id[s as usize] = order.len() as StateId;
            order.push(s);
        }
    }
    let mut states: Vec<State> = Vec::new();
    let mut stack = Vec::new();
    let mut seen = vec![u32::MAX; nfa.len()];
    // Breadth-first: `order` grows as targets are discovered.
    let mut qi = 0;
    while qi < order.len() {
        let old = order[qi];
        let mut st = State::default();
        stack.clear();
        stack.push(old);
        while let Some(s) = stack.pop() {
            if seen[s as usize] == qi as u32 {
                continue;
            }
            seen[s as usize] = qi as u32;
            work += 1;
            if work > budget {
                return Err(GrammarError::LimitExceeded {
                    limit: "max_states",
                    value: work as u64,
                    max: budget as u64,
                    hint: "removing the empty moves of nested loops takes too long; \
                           avoid deeply nested repetitions",
                });
            }
            let ns = &nfa[s as usize];
            st.is_final |= is_end[s as usize];
            let map = |t: StateId, new_id: &mut Vec<StateId>, order: &mut Vec<StateId>| {
                if new_id[t as usize] == StateId::MAX {
                    new_id[t as usize] = order.len() as StateId;
                    order.push(t);
                }
                new_id[t as usize]
            };
            for e in &ns.bytes {
                let target = map(e.target, &mut new_id, &mut order);
                st.bytes.push(ByteEdge {
                    lo: e.lo,
                    hi: e.hi,
                    target,
                });
            }
            for &(r, ret) in &ns.calls {
                let ret = map(ret, &mut new_id, &mut order);
                st.calls.push((r, ret));
            }
            for (t, neg, target) in &ns.tokens {
                let target = map(*target, &mut new_id, &mut order);
                st.tokens.push((t.clone(), *neg, target));
            }
            stack.extend(ns.eps.iter().copied());
        }
        st.bytes.sort_unstable_by_key(|e| (e.lo, e.hi, e.target));
        st.bytes.dedup();
        st.calls.sort_unstable();
        st.calls.dedup();
        states.push(st);
        qi += 1;
    }
    let starts = starts.iter().map(|&s| new_id[s as usize]).collect();
    Ok((states, starts))
}

/// States of ε-closure visited per allowed automaton state while removing ε-edges (see
/// [`remove_epsilons`]): a JSON Schema's grammar visits a few per state.
const CLOSURE_WORK_PER_STATE: usize = 16;
