//! A conjunction of regular languages as one deterministic automaton, written as one
//! grammar rule per state: a pattern with leading look-aheads ([`super::lookahead`]), a
//! string's patterns and formats together, less the strings `not` excludes, within a
//! length bound.
//!
//! A context-free grammar has no intersection or complement, but these languages are
//! regular. Each part is a Thompson automaton; the states are the subsets of all parts
//! read in step over the intervals of characters their classes tell apart (and the count
//! of characters read, where a length is bounded). Limits on nodes, states and work keep
//! any pattern from taking long or growing the grammar beyond bounds.

use std::collections::{HashMap, VecDeque};

use regex_syntax::hir::{Class, Hir, HirKind};

use super::{Encoding, Lower, RegexError, edge_cores};
use crate::ir::Expr;
use crate::json_schema::rules::{RuleSet, alt, fail, seq};

/// At most this many automaton nodes per part (counted repetitions are written out).
const MAX_NODES: usize = 20_000;
/// At most this many automaton nodes visited while building the states (their sets times the
/// intervals), so that no pattern takes long to refuse.
const MAX_WORK: usize = 20_000_000;
/// One past the last Unicode scalar value.
const END: u32 = 0x11_0000;

/// One language of a conjunction: the strings a pattern matches, or (`negative`) those
/// it does not.
pub(super) struct Part {
    nfa: Nfa,
    negative: bool,
}

impl Part {
    /// The strings `hir` matches as JSON Schema reads a pattern (anywhere in the string,
    /// unless its anchors say otherwise); `held` holds it to the string's start, as a
    /// look-ahead at the start is, or the rest of a pattern after its `^`.
    pub(super) fn new(
        hir: &Hir,
        held: bool,
        negative: bool,
        max_repetition: u32,
    ) -> Result<Part, RegexError> {
        Ok(Part {
            nfa: Nfa::of(hir, held, max_repetition)?,
            negative,
        })
    }
}

/// How many characters a string may have: at least `min`, at most `max`.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Length {
    pub(super) min: u64,
    pub(super) max: Option<u64>,
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
    /// The automaton of the strings in which `hir` matches (see [`Part::new`]).
    fn of(hir: &Hir, held: bool, max_repetition: u32) -> Result<Nfa, RegexError> {
        let mut nfa = Nfa {
            nodes: vec![Node::Match],
            start: 0,
        };
        let mut entries = Vec::new();
        for (core, at_start, at_end) in edge_cores(hir) {
            let mut next = 0;
            if !at_end {
                next = nfa.any_then(next);
            }
            let mut entry = nfa.build(&core, next, max_repetition)?;
            if !(held || at_start) {
                entry = nfa.any_then(entry);
            }
            entries.push(entry);
        }
        nfa.start = nfa.push(Node::Split(entries))?;
        Ok(nfa)
    }

    fn push(&mut self, node: Node) -> Result<usize, RegexError> {
        if self.nodes.len() >= MAX_NODES {
            return Err(RegexError::TooLarge {
                what: format!("a pattern of more than {MAX_NODES} automaton nodes"),
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

/// A conjunction of [`Part`]s, as a deterministic automaton over intervals of characters.
pub(super) struct Dfa {
    /// The first character of each interval; the last ends before [`END`].
    starts: Vec<u32>,
    /// Per state, per interval, the next state (`None`: rejected).
    next: Vec<Vec<Option<usize>>>,
    accepting: Vec<bool>,
}

impl Dfa {
    /// The strings in the language of every part, with a length within `length`; at most
    /// `max_states` states (`what` names the automaton in the error beyond).
    pub(super) fn build(
        parts: &[Part],
        length: Length,
        max_states: usize,
        what: &str,
    ) -> Result<Dfa, RegexError> {
        let too_large = |why: String| RegexError::TooLarge { what: why };
        let mut bounds = vec![0, END];
        parts.iter().for_each(|p| p.nfa.bounds(&mut bounds));
        bounds.sort_unstable();
        bounds.dedup();
        let starts: Vec<u32> = bounds.into_iter().filter(|&b| b < END).collect();

        let accepts = |(sets, count): &(Vec<Vec<usize>>, u64)| {
            *count >= length.min
                && parts
                    .iter()
                    .zip(sets)
                    .all(|(p, set)| p.nfa.accepts(set) != p.negative)
        };
        // The characters read, up to the maximum; without one, up to the minimum (all
        // counts beyond it are alike).
        let counted = |count: u64| match length.max {
            Some(max) => (count < max).then_some(count + 1),
            None => Some((count + 1).min(length.min)),
        };
        let first: Vec<Vec<usize>> = parts.iter().map(|p| p.nfa.closure([p.nfa.start])).collect();
        let first = (first, 0u64);
        let mut ids: HashMap<(Vec<Vec<usize>>, u64), usize> = HashMap::from([(first.clone(), 0)]);
        let mut queue = VecDeque::from([first]);
        let (mut next, mut accepting) = (Vec::new(), Vec::new());
        let mut work = 0usize;
        while let Some(state) = queue.pop_front() {
            work += state.0.iter().map(Vec::len).sum::<usize>() * starts.len();
            if work > MAX_WORK {
                return Err(too_large(format!(
                    "{what} too large to build its automaton"
                )));
            }
            accepting.push(accepts(&state));
            let (sets, count) = state;
            let Some(count) = counted(count) else {
                next.push(vec![None; starts.len()]);
                continue;
            };
            let mut row = Vec::with_capacity(starts.len());
            for &lo in &starts {
                let after: Vec<Vec<usize>> = parts
                    .iter()
                    .zip(&sets)
                    .map(|(p, s)| p.nfa.step(s, lo))
                    .collect();
                // Once a part that must match has no way on, nothing after is accepted.
                if parts
                    .iter()
                    .zip(&after)
                    .any(|(p, s)| !p.negative && s.is_empty())
                {
                    row.push(None);
                    continue;
                }
                let n = ids.len();
                let id = *ids.entry((after, count)).or_insert_with_key(|key| {
                    queue.push_back(key.clone());
                    n
                });
                if ids.len() > max_states {
                    return Err(too_large(format!(
                        "{what} of more than {max_states} states"
                    )));
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

    /// Whether no string is accepted.
    pub(super) fn is_empty(&self) -> bool {
        !self.accepting[0] && self.next[0].iter().all(Option::is_none)
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

    /// Whether `s` is in the automaton's language.
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

    /// The ways on from state `s`: each next state with the characters that lead there.
    fn ways(&self, s: usize) -> Vec<(usize, Vec<(char, char)>)> {
        let mut into: Vec<(usize, Vec<(char, char)>)> = Vec::new();
        for (i, t) in self.next[s].iter().enumerate() {
            let Some(t) = *t else { continue };
            let hi = self.starts.get(i + 1).map_or(END - 1, |&b| b - 1);
            let ranges = chars(self.starts[i], hi);
            match into.iter_mut().find(|(target, _)| *target == t) {
                Some((_, r)) => r.extend(ranges),
                None => into.push((t, ranges)),
            }
        }
        into
    }

    /// About how many states the matcher's automaton (`crate::automaton`) takes for
    /// [`Dfa::rules`] in JSON strings, measured on such automata: a few per way on whose
    /// characters are plain ASCII, some three hundred per way with characters beyond ASCII
    /// or that JSON escapes (their UTF-8 sequences and `\u` escapes, copied into each
    /// caller).
    pub(super) fn matcher_cost(&self) -> usize {
        let plain = |&(lo, hi): &(char, char)| {
            lo >= ' ' && hi <= '~' && !(lo..=hi).contains(&'"') && !(lo..=hi).contains(&'\\')
        };
        (0..self.next.len())
            .flat_map(|s| self.ways(s))
            .map(|(_, ranges)| if ranges.iter().all(plain) { 4 } else { 300 })
            .sum()
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
        for (s, &id) in ids.iter().enumerate() {
            let Some(id) = id else { continue };
            let mut ways = Vec::new();
            if self.accepting[s] {
                ways.push(Expr::Empty);
            }
            for (t, ranges) in self.ways(s) {
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
