//! Patterns that open with look-ahead, `^(?!X)Y` and `^(?=X)Y`: a key that does not start
//! with `@@` (`^(?!@@)[\w@]+$`), any name but one (`^(?!pattern$).*$`).
//!
//! A context-free grammar has no complement, but these languages are regular: the strings
//! `Y` matches from the start, less (or only) those `X` matches from the start. They are
//! built as one automaton, the subsets of Thompson automata of `Y` and of each `X` read in
//! step over the intervals of characters their classes tell apart, and written as one rule
//! per state. Look-around anywhere else is still refused.

use std::collections::{HashMap, VecDeque};

use regex_syntax::hir::{Class, Hir, HirKind};

use super::{Encoding, Lower, RegexError, edge_cores, parse};
use crate::ir::Expr;
use crate::json_schema::rules::{RuleSet, alt, fail, seq};

/// At most this many states (beyond, the pattern is refused): a rule each.
const MAX_STATES: usize = 2_000;
/// At most this many automaton nodes per part (counted repetitions are written out).
const MAX_NODES: usize = 20_000;
/// At most this many automaton nodes visited while building the states (their sets times the
/// intervals), so that no pattern takes long to refuse.
const MAX_WORK: usize = 20_000_000;
/// One past the last Unicode scalar value.
const END: u32 = 0x11_0000;

/// A pattern split into its leading look-aheads and the rest.
pub(super) struct Leading<'p> {
    /// Each look-ahead: whether it is negative (`(?!…)`), its pattern and where that starts.
    looks: Vec<(bool, &'p str, usize)>,
    /// What follows them, after the pattern's `^`, and where it starts.
    rest: (&'p str, usize),
}

/// Splits `^(?!X)(?=Z)…Y` when the pattern opens so and `Y` has no alternative of its own
/// (in `^(?!X)a|b` the look-ahead guards `a` only); `None` otherwise.
pub(super) fn split_leading(pattern: &str) -> Option<Leading<'_>> {
    if !pattern.starts_with('^') {
        return None;
    }
    let mut looks = Vec::new();
    let mut at = 1;
    loop {
        let negative = match pattern.get(at..at + 3) {
            Some("(?!") => true,
            Some("(?=") => false,
            _ => break,
        };
        let close = scan(pattern, at + 3, true)?;
        looks.push((negative, &pattern[at + 3..close], at + 3));
        at = close + 1;
    }
    let rest = &pattern[at..];
    (!looks.is_empty() && scan(rest, 0, false).is_none()).then_some(Leading {
        looks,
        rest: (rest, at),
    })
}

/// From `from`, the byte offset of the `)` closing a group opened before it (`close`), or of
/// a `|` outside any group (`!close`); `None` when there is none. Escapes and character
/// classes are skipped.
fn scan(pattern: &str, from: usize, close: bool) -> Option<usize> {
    let (mut depth, mut in_class, mut escaped) = (0usize, false, false);
    for (i, c) in pattern[from..].char_indices() {
        let i = i + from;
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '[' if !in_class => in_class = true,
            ']' if in_class => in_class = false,
            _ if in_class => {}
            '(' => depth += 1,
            ')' if depth == 0 && close => return Some(i),
            ')' => depth = depth.saturating_sub(1),
            '|' if depth == 0 && !close => return Some(i),
            _ => {}
        }
    }
    None
}

/// Thompson automaton nodes.
enum Node {
    /// One character in the ranges, then the node.
    Char(Vec<(u32, u32)>, usize),
    /// Any of the nodes, reading nothing.
    Split(Vec<usize>),
    Match,
}

struct Nfa {
    nodes: Vec<Node>,
    start: usize,
}

impl Nfa {
    /// The automaton of the strings in which `hir` matches from position 0 (as JSON Schema
    /// reads a pattern, but held to the start: the `Y` after the pattern's `^`, and each
    /// look-ahead's `X`, tried where the string starts).
    fn of(hir: &Hir, max_repetition: u32) -> Result<Nfa, RegexError> {
        let mut nfa = Nfa {
            nodes: vec![Node::Match],
            start: 0,
        };
        let mut entries = Vec::new();
        for (core, _, at_end) in edge_cores(hir) {
            let mut next = 0;
            if !at_end {
                next = nfa.any_then(next);
            }
            entries.push(nfa.build(&core, next, max_repetition)?);
        }
        nfa.start = nfa.push(Node::Split(entries))?;
        Ok(nfa)
    }

    fn push(&mut self, node: Node) -> Result<usize, RegexError> {
        if self.nodes.len() >= MAX_NODES {
            return Err(RegexError::TooLarge {
                what: format!("a look-ahead pattern of more than {MAX_NODES} automaton nodes"),
            });
        }
        self.nodes.push(node);
        Ok(self.nodes.len() - 1)
    }

    /// Any characters, then `next`.
    fn any_then(&mut self, next: usize) -> usize {
        // A loop: the split's first way is filled in once the character node exists.
        self.nodes.push(Node::Split(Vec::new()));
        let split = self.nodes.len() - 1;
        self.nodes.push(Node::Char(vec![(0, END - 1)], split));
        self.nodes[split] = Node::Split(vec![self.nodes.len() - 1, next]);
        split
    }

    /// The entry of `h` followed by `next`.
    fn build(&mut self, h: &Hir, next: usize, max_rep: u32) -> Result<usize, RegexError> {
        Ok(match h.kind() {
            HirKind::Empty => next,
            HirKind::Literal(l) => {
                let mut at = next;
                for c in String::from_utf8_lossy(&l.0).chars().rev() {
                    at = self.push(Node::Char(vec![(c as u32, c as u32)], at))?;
                }
                at
            }
            HirKind::Class(Class::Unicode(c)) => {
                let ranges = c.iter().map(|r| (r.start() as u32, r.end() as u32));
                self.push(Node::Char(ranges.collect(), next))?
            }
            // `[]` (see `Lower::lower`).
            HirKind::Class(Class::Bytes(b)) if b.ranges().is_empty() => {
                self.push(Node::Char(Vec::new(), next))?
            }
            HirKind::Class(Class::Bytes(_)) => {
                return Err(RegexError::Unsupported {
                    offset: 0,
                    what: "byte class".into(),
                });
            }
            HirKind::Look(_) => return Err(super::inner_anchor()),
            HirKind::Capture(c) => self.build(&c.sub, next, max_rep)?,
            HirKind::Concat(xs) => {
                let mut at = next;
                for x in xs.iter().rev() {
                    at = self.build(x, at, max_rep)?;
                }
                at
            }
            HirKind::Alternation(xs) => {
                let ways = xs
                    .iter()
                    .map(|x| self.build(x, next, max_rep))
                    .collect::<Result<_, _>>()?;
                self.push(Node::Split(ways))?
            }
            HirKind::Repetition(r) => {
                super::check_bounds(r, max_rep)?;
                // The optional copies past the minimum, innermost first, then the required ones.
                let mut at = match r.max {
                    None => {
                        let split = self.push(Node::Split(Vec::new()))?;
                        let body = self.build(&r.sub, split, max_rep)?;
                        self.nodes[split] = Node::Split(vec![body, next]);
                        split
                    }
                    Some(max) => {
                        let mut at = next;
                        for _ in r.min..max {
                            let body = self.build(&r.sub, at, max_rep)?;
                            at = self.push(Node::Split(vec![body, next]))?;
                        }
                        at
                    }
                };
                for _ in 0..r.min {
                    at = self.build(&r.sub, at, max_rep)?;
                }
                at
            }
        })
    }

    /// The nodes reachable from `from` reading nothing, sorted: character nodes and `Match`.
    fn closure(&self, from: impl IntoIterator<Item = usize>) -> Vec<usize> {
        let mut seen = vec![false; self.nodes.len()];
        let mut stack: Vec<usize> = from.into_iter().collect();
        let mut out = Vec::new();
        while let Some(n) = stack.pop() {
            if std::mem::replace(&mut seen[n], true) {
                continue;
            }
            match &self.nodes[n] {
                Node::Split(ways) => stack.extend(ways.iter().copied()),
                _ => out.push(n),
            }
        }
        out.sort_unstable();
        out
    }

    /// The closure after reading a character of `[lo, …]` (its interval) from `set`.
    fn step(&self, set: &[usize], lo: u32) -> Vec<usize> {
        let next = set.iter().filter_map(|&n| match &self.nodes[n] {
            Node::Char(ranges, next) if ranges.iter().any(|&(a, b)| a <= lo && lo <= b) => {
                Some(*next)
            }
            _ => None,
        });
        self.closure(next)
    }

    fn accepts(&self, set: &[usize]) -> bool {
        set.contains(&0)
    }

    fn bounds(&self, out: &mut Vec<u32>) {
        for node in &self.nodes {
            if let Node::Char(ranges, _) = node {
                for &(lo, hi) in ranges {
                    out.extend([lo, hi + 1]);
                }
            }
        }
    }
}

/// A pattern with leading look-aheads, as a deterministic automaton over intervals of
/// characters.
pub(super) struct Dfa {
    /// The first character of each interval; the last ends before [`END`].
    starts: Vec<u32>,
    /// Per state, per interval, the next state (`None`: rejected).
    next: Vec<Vec<Option<usize>>>,
    accepting: Vec<bool>,
}

impl Dfa {
    /// Builds the automaton of `leading` (found in `pattern`).
    pub(super) fn new(leading: &Leading<'_>, max_rep: u32) -> Result<Dfa, RegexError> {
        let located = |offset: usize| move |e: RegexError| e.relocated(|o| o + offset);
        let (rest, rest_at) = leading.rest;
        let body = parse(rest).map_err(located(rest_at))?;
        // `Y` from the pattern's `^`; each `X` from position 0 as well.
        let mut parts = vec![Nfa::of(&body, max_rep).map_err(located(rest_at))?];
        for &(_, look, at) in &leading.looks {
            let x = parse(look).map_err(located(at))?;
            parts.push(Nfa::of(&x, max_rep).map_err(located(at))?);
        }
        let mut bounds = vec![0, END];
        parts.iter().for_each(|p| p.bounds(&mut bounds));
        bounds.sort_unstable();
        bounds.dedup();
        let starts: Vec<u32> = bounds.into_iter().filter(|&b| b < END).collect();

        let negative: Vec<bool> = leading.looks.iter().map(|l| l.0).collect();
        let accepts = |sets: &[Vec<usize>]| {
            parts[0].accepts(&sets[0])
                && (1..parts.len()).all(|i| parts[i].accepts(&sets[i]) != negative[i - 1])
        };
        let first: Vec<Vec<usize>> = parts.iter().map(|p| p.closure([p.start])).collect();
        let mut ids: HashMap<Vec<Vec<usize>>, usize> = HashMap::from([(first.clone(), 0)]);
        let mut queue = VecDeque::from([first.clone()]);
        let (mut next, mut accepting) = (Vec::new(), Vec::new());
        let mut work = 0usize;
        while let Some(sets) = queue.pop_front() {
            work += sets.iter().map(Vec::len).sum::<usize>() * starts.len();
            if work > MAX_WORK {
                return Err(RegexError::TooLarge {
                    what: "a look-ahead pattern too large to build its automaton".into(),
                });
            }
            accepting.push(accepts(&sets));
            let mut row = Vec::with_capacity(starts.len());
            for &lo in &starts {
                let after: Vec<Vec<usize>> = parts
                    .iter()
                    .zip(&sets)
                    .map(|(p, s)| p.step(s, lo))
                    .collect();
                // Once `Y` has no way on, nothing after is accepted.
                if after[0].is_empty() {
                    row.push(None);
                    continue;
                }
                let count = ids.len();
                let id = *ids.entry(after.clone()).or_insert_with(|| {
                    queue.push_back(after);
                    count
                });
                if ids.len() > MAX_STATES {
                    return Err(RegexError::TooLarge {
                        what: format!("a look-ahead pattern of more than {MAX_STATES} states"),
                    });
                }
                row.push(Some(id));
            }
            next.push(row);
        }
        let mut dfa = Dfa {
            starts,
            next,
            accepting,
        };
        dfa.drop_dead_ends();
        Ok(dfa)
    }

    /// Removes the ways into states from which no accepting state can be reached (after a
    /// negative look-ahead's match, say), so that no rule leads nowhere.
    fn drop_dead_ends(&mut self) {
        let n = self.next.len();
        let mut live = self.accepting.clone();
        let mut changed = true;
        while changed {
            changed = false;
            for s in 0..n {
                if !live[s] && self.next[s].iter().flatten().any(|&t| live[t]) {
                    live[s] = true;
                    changed = true;
                }
            }
        }
        for row in &mut self.next {
            for t in row.iter_mut() {
                if t.is_some_and(|t| !live[t]) {
                    *t = None;
                }
            }
        }
    }

    /// Whether `s` is in the pattern's language.
    pub(super) fn is_match(&self, s: &str) -> bool {
        let mut state = 0;
        for c in s.chars() {
            let interval = self.starts.partition_point(|&lo| lo <= c as u32) - 1;
            match self.next[state][interval] {
                Some(t) => state = t,
                None => return false,
            }
        }
        self.accepting[state]
    }

    /// One rule per state (named after `hint`), written in `encoding`: the first state's.
    pub(super) fn rules(
        &self,
        encoding: Encoding,
        rules: &mut RuleSet,
        hint: &str,
    ) -> Result<Expr, RegexError> {
        let lower = Lower {
            encoding,
            max_repetition: 0,
        };
        // Rules for the states reached from the first (the others lead nowhere, see
        // `drop_dead_ends`).
        let mut reached = vec![false; self.next.len()];
        reached[0] = true;
        let mut stack = vec![0];
        while let Some(s) = stack.pop() {
            for &t in self.next[s].iter().flatten() {
                if !std::mem::replace(&mut reached[t], true) {
                    stack.push(t);
                }
            }
        }
        let ids: Vec<_> = reached
            .iter()
            .map(|&r| r.then(|| rules.reserve(hint)))
            .collect();
        for (s, row) in self.next.iter().enumerate() {
            let Some(id) = ids[s] else { continue };
            let mut ways = Vec::new();
            if self.accepting[s] {
                ways.push(Expr::Empty);
            }
            // The intervals into each next state, as one class.
            let mut into: Vec<(usize, Vec<(char, char)>)> = Vec::new();
            for (i, t) in row.iter().enumerate() {
                let Some(t) = *t else { continue };
                let hi = self.starts.get(i + 1).map_or(END - 1, |&b| b - 1);
                let ranges = chars(self.starts[i], hi);
                match into.iter_mut().find(|(target, _)| *target == t) {
                    Some((_, r)) => r.extend(ranges),
                    None => into.push((t, ranges)),
                }
            }
            for (t, ranges) in into {
                if let Some(target) = ids[t] {
                    ways.push(seq(vec![lower.class_expr(&ranges), Expr::Rule(target)]));
                }
            }
            rules.define(id, if ways.is_empty() { fail() } else { alt(ways) });
        }
        Ok(ids[0].map_or_else(fail, Expr::Rule))
    }
}

/// The characters of `[lo, hi]`, without the surrogates (which are not characters).
fn chars(lo: u32, hi: u32) -> Vec<(char, char)> {
    let parts = [(lo, hi.min(0xD7FF)), (lo.max(0xE000), hi)];
    parts
        .into_iter()
        .filter(|(a, b)| a <= b)
        .filter_map(|(a, b)| Some((char::from_u32(a)?, char::from_u32(b)?)))
        .collect()
}
