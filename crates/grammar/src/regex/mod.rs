//! Regular expressions (JSON Schema `pattern`, ECMA-262 flavour) lowered to the grammar IR.
//!
//! The pattern's ECMA-262 syntax that `regex-syntax` reads otherwise is rewritten first
//! ([`ecma`]: classes, `\cX`, `\0`, `\u{…}`); it is then parsed by `regex-syntax` and
//! adjusted to ECMA-262 meaning before it is translated: `\d` and `\w` are ASCII-only,
//! `\s` is ECMA-262's white space (with U+FEFF, without U+0085) and `.` excludes all four
//! line terminators (`\n`, `\r`, U+2028, U+2029). As JSON Schema says, a pattern is
//! *unanchored*: it matches a string that merely contains a match, unless it begins with
//! `^` or ends with `$` (per alternative; also inside a group or repetition at the
//! pattern's edge, as in `^(\w+(\/|$))*$`).
//!
//! Several regular languages together (a pattern beside a format, another pattern, a
//! length bound, excluded strings: [`conjunction`]) are written as one automaton
//! ([`automaton`]), a rule per state.
//!
//! Look-ahead that opens the pattern (`^(?!X)Y`) is written as an automaton ([`lookahead`]);
//! other look-around, back-references and word boundaries cannot be expressed by a
//! context-free grammar and are refused with the byte offset in the pattern. Repetition bounds above
//! the limit are refused too, so a pattern cannot blow the grammar up.
//!
//! [`Encoding::JsonString`] produces the text *inside* a JSON string literal: characters
//! that JSON must escape (`"`, `\`, controls) match their escape sequences instead.

use regex_syntax::ast::{self, Ast, ClassAsciiKind, ClassPerlKind};
use regex_syntax::hir::{self, Class, Hir, HirKind, Look};
use thiserror::Error;

use crate::ir::{CharRange, Expr, Grammar};
use crate::json_schema::rules::{RuleSet, alt, alt_opt, class, fail, lit, repeat, seq, star};

mod automaton;
mod ecma;
mod lookahead;

use automaton::{Dfa, Length, Part};

/// At most this many states in a look-ahead pattern's automaton (a rule each; beyond, the
/// pattern is refused).
const LOOKAHEAD_STATES: usize = 2_000;

/// How matched characters are written in the text the grammar matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// The characters themselves.
    Raw,
    /// The inside of a JSON string: `"`, `\` and U+0000–U+001F as JSON escapes.
    JsonString,
}

/// Why a pattern was refused; `offset` is a byte offset into the pattern when known.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum RegexError {
    #[error("regex syntax error at byte {offset}: {message}")]
    Syntax { offset: usize, message: String },
    #[error("regex feature not supported at byte {offset}: {what} (a grammar cannot express it)")]
    Unsupported { offset: usize, what: String },
    #[error("regex repetition bound {value} exceeds the limit {max}")]
    RepetitionTooLarge { value: u32, max: u32 },
    /// A look-ahead pattern whose automaton passes a limit ([`lookahead`]).
    #[error("regex too large: {what}")]
    TooLarge { what: String },
}

impl RegexError {
    /// The same error, its offset moved by `to` (from a piece of a pattern to the pattern).
    fn relocated(self, to: impl Fn(usize) -> usize) -> RegexError {
        match self {
            RegexError::Syntax { offset, message } => RegexError::Syntax {
                offset: to(offset),
                message,
            },
            RegexError::Unsupported { offset, what } => RegexError::Unsupported {
                offset: to(offset),
                what,
            },
            other => other,
        }
    }
}

/// Compiles `pattern` to an expression matching every string that contains a match
/// (respecting `^`/`$`), written in `encoding`. Repetition bounds above `max_repetition`
/// are refused.
pub fn compile(pattern: &str, encoding: Encoding, max_repetition: u32) -> Result<Expr, RegexError> {
    let hir = parse(pattern)?;
    let lower = Lower {
        encoding,
        max_repetition,
    };
    let mut out = Vec::new();
    for (core, at_start, at_end) in edge_cores(&hir) {
        let any = || star(lower.any_char());
        out.push(seq(vec![
            if at_start { Expr::Empty } else { any() },
            lower.lower(&core)?,
            if at_end { Expr::Empty } else { any() },
        ]));
    }
    // No way through (an anchor that cannot hold on any path): nothing matches (an empty
    // alternation would match the empty string).
    Ok(alt_opt(out).unwrap_or_else(fail))
}

/// As [`compile`], and also for a pattern that opens with look-ahead (`^(?!X)Y`,
/// `^(?=X)Y`), whose automaton takes rules of its own in `rules` (named after `hint`).
pub(crate) fn compile_in(
    pattern: &str,
    encoding: Encoding,
    max_repetition: u32,
    rules: &mut RuleSet,
    hint: &str,
) -> Result<Expr, RegexError> {
    match lookahead::split_leading(pattern) {
        Some(leading) => {
            lookahead_automaton(&leading, max_repetition)?.rules(encoding, rules, hint)
        }
        None => compile(pattern, encoding, max_repetition),
    }
}

fn lookahead_automaton(
    leading: &lookahead::Leading<'_>,
    max_repetition: u32,
) -> Result<Dfa, RegexError> {
    let parts = lookahead::parts(leading, max_repetition)?;
    Dfa::build(
        &parts,
        Length::default(),
        LOOKAHEAD_STATES,
        "a look-ahead pattern",
    )
}

/// What a string must be, for [`conjunction`]: in the language of every pattern (each
/// read as [`compile_in`] reads it), none of the excluded strings, and of `min` to `max`
/// characters.
pub(crate) struct StringLanguage<'a> {
    pub(crate) patterns: &'a [&'a str],
    pub(crate) excluded: &'a [&'a str],
    pub(crate) min: u64,
    pub(crate) max: Option<u64>,
}

/// The bounds on [`conjunction`]'s automaton.
pub(crate) struct Budget {
    pub(crate) max_repetition: u32,
    /// At most this many states (a rule each).
    pub(crate) max_states: usize,
    /// At most about this many states of the matcher's automaton for its rules.
    pub(crate) max_matcher_states: usize,
}

/// Why [`conjunction`] built nothing.
pub(crate) enum ConjunctionError {
    /// The pattern of this index is refused on its own.
    Pattern(usize, RegexError),
    /// The automaton would pass the budget.
    TooLarge(RegexError),
}

/// A string's language as one automaton, written in `encoding` as a rule per state (named
/// after `hint`): a `pattern` beside a `format`, another pattern, a length bound or `not`.
/// With about how many matcher states its rules take; `Ok(None)` when no string is in it.
pub(crate) fn conjunction(
    language: &StringLanguage<'_>,
    budget: &Budget,
    encoding: Encoding,
    rules: &mut RuleSet,
    hint: &str,
) -> Result<Option<(Expr, usize)>, ConjunctionError> {
    let max_repetition = budget.max_repetition;
    let mut parts = Vec::new();
    for (i, pattern) in language.patterns.iter().enumerate() {
        // A part too large for the automaton is a reason to do without it, not an error
        // of the pattern's.
        let of_pattern = |e| match e {
            RegexError::TooLarge { .. } => ConjunctionError::TooLarge(e),
            e => ConjunctionError::Pattern(i, e),
        };
        match lookahead::split_leading(pattern) {
            Some(leading) => {
                parts.extend(lookahead::parts(&leading, max_repetition).map_err(of_pattern)?);
            }
            None => {
                let hir = parse(pattern).map_err(of_pattern)?;
                parts.push(Part::new(&hir, false, false, max_repetition).map_err(of_pattern)?);
            }
        }
    }
    if !language.excluded.is_empty() {
        let words = language.excluded.iter().map(|s| Hir::literal(s.as_bytes()));
        let whole = Hir::concat(vec![
            Hir::alternation(words.collect()),
            Hir::look(Look::End),
        ]);
        parts.push(Part::new(&whole, true, true, u32::MAX).map_err(ConjunctionError::TooLarge)?);
    }
    let length = Length {
        min: language.min,
        max: language.max,
    };
    let what = "a string's pattern, format, length and `not` together";
    let dfa =
        Dfa::build(&parts, length, budget.max_states, what).map_err(ConjunctionError::TooLarge)?;
    if dfa.is_empty() {
        return Ok(None);
    }
    let (cost, max_cost) = (dfa.matcher_cost(), budget.max_matcher_states);
    if cost > max_cost {
        let what = format!("{what}: about {cost} matcher states, over {max_cost}");
        return Err(ConjunctionError::TooLarge(RegexError::TooLarge { what }));
    }
    let expr = dfa
        .rules(encoding, rules, hint)
        .map_err(ConjunctionError::TooLarge)?;
    Ok(Some((expr, cost)))
}

/// The grammar of the strings `pattern` matches (its root rule `root`): [`compile_in`]'s
/// expression with the rules it takes.
pub fn grammar(
    pattern: &str,
    encoding: Encoding,
    max_repetition: u32,
) -> Result<Grammar, RegexError> {
    let mut rules = RuleSet::default();
    let expr = compile_in(pattern, encoding, max_repetition, &mut rules, "pattern")?;
    let root = rules.add("root", expr);
    Ok(rules.into_grammar(root))
}

/// The pieces of `hir` with the anchors at its edges split off (also inside groups,
/// alternatives and repetitions, as in `(^a|b)c$`), each with whether it is anchored at
/// the start and at the end.
fn edge_cores(hir: &Hir) -> Vec<(Hir, bool, bool)> {
    let (start_anchored, start_free) = split(hir, Edge::Start);
    let start_anchored = start_anchored.map(|h| at_edge(h, Edge::Start));
    let mut out = Vec::new();
    for (h, at_start) in [(start_anchored, true), (start_free, false)] {
        let Some(h) = h else { continue };
        let (end_anchored, end_free) = split(&h, Edge::End);
        let end_anchored = end_anchored.map(|h| at_edge(h, Edge::End));
        for (core, at_end) in [(end_anchored, true), (end_free, false)] {
            if let Some(core) = core {
                out.push((core, at_start, at_end));
            }
        }
    }
    out
}

/// Refuses a repetition with a bound above `max`.
fn check_bounds(r: &hir::Repetition, max: u32) -> Result<(), RegexError> {
    match [Some(r.min), r.max]
        .into_iter()
        .flatten()
        .find(|&b| b > max)
    {
        Some(value) => Err(RegexError::RepetitionTooLarge { value, max }),
        None => Ok(()),
    }
}

/// An anchor the lowering cannot place.
fn inner_anchor() -> RegexError {
    RegexError::Unsupported {
        offset: 0,
        what: "anchor (^ or $) other than at the pattern's start or end (or at those of a group, alternative or repetition there)"
            .into(),
    }
}

/// A matcher for `pattern` with the meaning [`compile_in`] gives it (ECMA-262, unanchored
/// unless `^`/`$` say otherwise), for testing strings known while compiling (a declared
/// property name against `patternProperties`, an `enum` value against `pattern`). Built
/// from the same adjusted HIR, so that such a test agrees with the grammar: `regex`'s own
/// parse would read `\d`, `\w` and `.` in their Unicode meaning.
pub fn matcher(pattern: &str) -> Result<PatternMatcher, RegexError> {
    if let Some(leading) = lookahead::split_leading(pattern) {
        // No limit on repetitions here: the grammar's compile applies it.
        let dfa = lookahead_automaton(&leading, u32::MAX)?;
        return Ok(PatternMatcher(Matching::Ahead(Box::new(dfa))));
    }
    let hir = parse(pattern)?;
    let regex = regex_automata::meta::Builder::new()
        .build_from_hir(&hir)
        .map_err(|e| RegexError::Syntax {
            offset: 0,
            message: e.to_string(),
        })?;
    Ok(PatternMatcher(Matching::Regex(regex)))
}

/// See [`matcher`].
pub struct PatternMatcher(Matching);

enum Matching {
    Regex(regex_automata::meta::Regex),
    Ahead(Box<Dfa>),
}

impl PatternMatcher {
    /// Whether the pattern matches somewhere in `s` (or as its anchors say).
    pub fn is_match(&self, s: &str) -> bool {
        match &self.0 {
            Matching::Regex(r) => r.is_match(s),
            Matching::Ahead(dfa) => dfa.is_match(s),
        }
    }
}

/// Parses an ECMA-262 pattern into `regex-syntax`'s HIR with ECMA-262 meaning: its syntax
/// first ([`ecma`]), then its classes (`make_ecma`).
fn parse(pattern: &str) -> Result<Hir, RegexError> {
    let source = ecma::rewrite(pattern)?;
    let text = &source.text;
    let hir = ast::parse::ParserBuilder::new()
        .build()
        .parse(text)
        .map_err(|e| classify_syntax_error(&e))
        .and_then(|mut ast| {
            make_ecma(&mut ast)?;
            regex_syntax::hir::translate::TranslatorBuilder::new()
                .unicode(true)
                .utf8(true)
                .build()
                .translate(text, &ast)
                .map_err(|e| RegexError::Syntax {
                    offset: e.span().start.offset,
                    message: e.kind().to_string(),
                })
        });
    hir.map_err(|e| e.relocated(|at| source.original(at)))
}

/// A pattern together with a length bound (`minLength`/`maxLength` beside `pattern`), when
/// the pattern's shape allows intersecting them exactly: `^…$` whose parts have fixed
/// character counts except one repetition of a single character (`^[A-Z][a-z0-9_]*$`).
/// The repetition's bounds absorb the length bound. `Ok(None)` for other shapes.
pub fn compile_with_length(
    pattern: &str,
    encoding: Encoding,
    max_repetition: u32,
    min_len: u64,
    max_len: Option<u64>,
) -> Result<Option<Expr>, RegexError> {
    let hir = parse(pattern)?;
    let HirKind::Concat(items) = hir.kind() else {
        return Ok(None);
    };
    let is = |h: &Hir, look: Look| matches!(h.kind(), HirKind::Look(l) if *l == look);
    let (Some(first), Some(last)) = (items.first(), items.last()) else {
        return Ok(None);
    };
    if items.len() < 3 || !is(first, Look::Start) || !is(last, Look::End) {
        return Ok(None);
    }
    let core = &items[1..items.len() - 1];
    let mut fixed: u64 = 0;
    let mut variable: Option<usize> = None;
    for (i, h) in core.iter().enumerate() {
        match fixed_chars(h) {
            Some(n) => fixed += n,
            None => match h.kind() {
                HirKind::Repetition(r) if fixed_chars(&r.sub) == Some(1) && variable.is_none() => {
                    fixed += u64::from(r.min);
                    variable = Some(i);
                }
                _ => return Ok(None),
            },
        }
    }
    let lower = Lower {
        encoding,
        max_repetition,
    };
    let mut parts = Vec::with_capacity(core.len());
    for (i, h) in core.iter().enumerate() {
        let HirKind::Repetition(r) = h.kind() else {
            parts.push(lower.lower(h)?);
            continue;
        };
        if Some(i) != variable {
            parts.push(lower.lower(h)?);
            continue;
        }
        // Characters the repetition may add beyond its minimum, within both bounds.
        let base = fixed;
        let lo = u64::from(r.min).max(min_len.saturating_sub(base - u64::from(r.min)));
        let own_hi = r.max.map(u64::from);
        let len_hi = max_len.map(|m| m.saturating_sub(base - u64::from(r.min)));
        let hi = match (own_hi, len_hi) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if hi.is_some_and(|h| h < lo) || max_len.is_some_and(|m| m < base) {
            return Ok(Some(fail()));
        }
        // Bounds over the limit: leave the length to the caller (it reports it).
        if std::iter::once(lo)
            .chain(hi)
            .any(|b| b > u64::from(max_repetition))
        {
            return Ok(None);
        }
        parts.push(repeat(
            lower.lower(&r.sub)?,
            lo as u32,
            hi.map(|h| h as u32),
        ));
    }
    if variable.is_none() {
        // No repetition: the length is fixed; it fits or nothing matches.
        if fixed < min_len || max_len.is_some_and(|m| fixed > m) {
            return Ok(Some(fail()));
        }
    }
    Ok(Some(seq(parts)))
}

/// The number of characters `h` always matches, if fixed and it has no anchors.
fn fixed_chars(h: &Hir) -> Option<u64> {
    match h.kind() {
        HirKind::Empty => Some(0),
        HirKind::Literal(l) => Some(String::from_utf8_lossy(&l.0).chars().count() as u64),
        HirKind::Class(_) => Some(1),
        HirKind::Capture(c) => fixed_chars(&c.sub),
        HirKind::Repetition(r) if Some(r.min) == r.max => {
            fixed_chars(&r.sub).map(|n| n * u64::from(r.min))
        }
        HirKind::Concat(xs) => xs.iter().map(fixed_chars).sum(),
        HirKind::Alternation(xs) => {
            let first = fixed_chars(xs.first()?)?;
            xs.iter()
                .all(|x| fixed_chars(x) == Some(first))
                .then_some(first)
        }
        HirKind::Look(_) | HirKind::Repetition(_) => None,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Edge {
    Start,
    End,
}

/// Splits `h` into the part whose matches begin (or end) with an anchor at that edge,
/// anchor removed, and the part without one. Anchors elsewhere stay and are refused
/// later.
fn split(h: &Hir, edge: Edge) -> (Option<Hir>, Option<Hir>) {
    let is_anchor = |h: &Hir| {
        matches!(
            (h.kind(), edge),
            (HirKind::Look(Look::Start | Look::StartLF), Edge::Start)
                | (HirKind::Look(Look::End | Look::EndLF), Edge::End)
        )
    };
    match h.kind() {
        _ if is_anchor(h) => (Some(Hir::empty()), None),
        HirKind::Capture(c) => split(&c.sub, edge),
        HirKind::Alternation(bs) => {
            let mut anchored = Vec::new();
            let mut free = Vec::new();
            for b in bs {
                let (a, f) = split(b, edge);
                anchored.extend(a);
                free.extend(f);
            }
            let join = |v: Vec<Hir>| {
                if v.is_empty() {
                    None
                } else {
                    Some(Hir::alternation(v))
                }
            };
            (join(anchored), join(free))
        }
        HirKind::Concat(xs) if !xs.is_empty() => {
            let (i, rest_range) = match edge {
                Edge::Start => (0, 1..xs.len()),
                Edge::End => (xs.len() - 1, 0..xs.len() - 1),
            };
            let (a, f) = split(&xs[i], edge);
            let rebuild = |part: Hir| {
                let mut v: Vec<Hir> = xs[rest_range.clone()].to_vec();
                match edge {
                    Edge::Start => v.insert(0, part),
                    Edge::End => v.push(part),
                }
                Hir::concat(v)
            };
            (a.map(rebuild), f.map(rebuild))
        }
        // The iterations before the one at the edge are free ones; the one at the edge may
        // be anchored. Where an iteration can match nothing, such iterations can stand at
        // the edge beside the anchored one, so only the maximum bounds the others.
        HirKind::Repetition(r) if r.max != Some(0) => {
            let (Some(anchored), free) = split(&r.sub, edge) else {
                return (None, Some(h.clone()));
            };
            let times = |min: u32, max: Option<u32>, sub: &Hir| {
                Hir::repetition(hir::Repetition {
                    min,
                    max,
                    greedy: r.greedy,
                    sub: Box::new(sub.clone()),
                })
            };
            let nullable = |h: &Hir| h.properties().minimum_len() == Some(0);
            let pad = nullable(&anchored) || free.as_ref().is_some_and(nullable);
            let before = if pad { 0 } else { r.min.saturating_sub(1) };
            let others = free
                .as_ref()
                .map(|f| times(before, r.max.map(|m| m - 1), f));
            let at_edge = match others {
                Some(o) => Some(Hir::concat(match edge {
                    Edge::Start => vec![anchored, o],
                    Edge::End => vec![o, anchored],
                })),
                None if pad || r.min <= 1 => Some(anchored),
                None => None,
            };
            let free = match &free {
                Some(f) => Some(times(r.min, r.max, f)),
                None if r.min == 0 => Some(Hir::empty()),
                None => None,
            };
            (at_edge, free)
        }
        _ => (None, Some(h.clone())),
    }
}

/// `h` matched at `edge` of the string: anchors at that edge of it (inside groups,
/// alternatives and repetitions at the edge, as in `^(a(\/|$))*$`) hold there, so they are
/// dropped, pass after pass while there are any (eight passes at most: a repetition's pass
/// copies its body, anchors and all, so the count need not fall); anchors left elsewhere
/// are refused when lowered.
fn at_edge(mut h: Hir, edge: Edge) -> Hir {
    for _ in 0..8 {
        match split(&h, edge) {
            (None, _) => break,
            (Some(a), None) => h = a,
            (Some(a), Some(f)) => h = Hir::alternation(vec![a, f]),
        }
    }
    h
}

/// `regex-syntax` reports look-around and back-references as syntax errors; say what they
/// are, since the user wrote valid ECMA-262.
fn classify_syntax_error(e: &ast::Error) -> RegexError {
    let offset = e.span().start.offset;
    match e.kind() {
        ast::ErrorKind::UnsupportedLookAround => RegexError::Unsupported {
            offset,
            what: "look-around assertion".into(),
        },
        ast::ErrorKind::UnsupportedBackreference => RegexError::Unsupported {
            offset,
            what: "back-reference".into(),
        },
        kind => RegexError::Syntax {
            offset,
            message: kind.to_string(),
        },
    }
}

/// Rewrites the AST to ECMA-262 meaning: ASCII `\d`/`\w`, `.` without line terminators;
/// refuses word boundaries.
fn make_ecma(ast: &mut Ast) -> Result<(), RegexError> {
    match ast {
        Ast::Dot(span) => {
            let span = **span;
            let item = |c: char| {
                ast::ClassSetItem::Literal(ast::Literal {
                    span,
                    kind: ast::LiteralKind::Verbatim,
                    c,
                })
            };
            *ast = Ast::ClassBracketed(Box::new(ast::ClassBracketed {
                span,
                negated: true,
                kind: ast::ClassSet::Item(ast::ClassSetItem::Union(ast::ClassSetUnion {
                    span,
                    items: vec![item('\n'), item('\r'), item('\u{2028}'), item('\u{2029}')],
                })),
            }));
        }
        Ast::ClassPerl(p) => {
            if let Some(ascii) = ascii_perl(p) {
                *ast = Ast::ClassBracketed(Box::new(ast::ClassBracketed {
                    span: p.span,
                    negated: false,
                    kind: ast::ClassSet::Item(ascii),
                }));
            }
        }
        Ast::ClassBracketed(b) => make_ecma_set(&mut b.kind),
        Ast::Assertion(a) => match a.kind {
            ast::AssertionKind::StartLine
            | ast::AssertionKind::EndLine
            | ast::AssertionKind::StartText
            | ast::AssertionKind::EndText => {}
            _ => {
                return Err(RegexError::Unsupported {
                    offset: a.span.start.offset,
                    what: "word-boundary assertion".into(),
                });
            }
        },
        Ast::Repetition(r) => make_ecma(&mut r.ast)?,
        Ast::Group(g) => make_ecma(&mut g.ast)?,
        Ast::Alternation(a) => {
            for x in &mut a.asts {
                make_ecma(x)?;
            }
        }
        Ast::Concat(c) => {
            for x in &mut c.asts {
                make_ecma(x)?;
            }
        }
        Ast::Empty(_) | Ast::Flags(_) | Ast::Literal(_) | Ast::ClassUnicode(_) => {}
    }
    Ok(())
}

fn make_ecma_set(set: &mut ast::ClassSet) {
    match set {
        ast::ClassSet::Item(item) => make_ecma_item(item),
        ast::ClassSet::BinaryOp(op) => {
            make_ecma_set(&mut op.lhs);
            make_ecma_set(&mut op.rhs);
        }
    }
}

fn make_ecma_item(item: &mut ast::ClassSetItem) {
    match item {
        ast::ClassSetItem::Perl(p) => {
            if let Some(ascii) = ascii_perl(p) {
                *item = ascii;
            }
        }
        ast::ClassSetItem::Bracketed(b) => make_ecma_set(&mut b.kind),
        ast::ClassSetItem::Union(u) => u.items.iter_mut().for_each(make_ecma_item),
        _ => {}
    }
}

/// ECMA-262's white space and line terminators, the class `\s` names: Unicode's `White_Space`
/// (`regex`'s `\s`) but for U+0085, and with U+FEFF.
const ECMA_SPACE: &[(char, char)] = &[
    ('\t', '\r'),
    (' ', ' '),
    ('\u{a0}', '\u{a0}'),
    ('\u{1680}', '\u{1680}'),
    ('\u{2000}', '\u{200a}'),
    ('\u{2028}', '\u{2029}'),
    ('\u{202f}', '\u{202f}'),
    ('\u{205f}', '\u{205f}'),
    ('\u{3000}', '\u{3000}'),
    ('\u{feff}', '\u{feff}'),
];

/// `\d`, `\w`, `\s` (and negations) as ECMA-262's classes: ASCII digits and word
/// characters, [`ECMA_SPACE`].
fn ascii_perl(p: &ast::ClassPerl) -> Option<ast::ClassSetItem> {
    let kind = match p.kind {
        ClassPerlKind::Digit => ClassAsciiKind::Digit,
        ClassPerlKind::Word => ClassAsciiKind::Word,
        ClassPerlKind::Space => {
            let span = p.span;
            let literal = |c: char| ast::Literal {
                span,
                kind: ast::LiteralKind::Verbatim,
                c,
            };
            let items = ECMA_SPACE
                .iter()
                .map(|&(lo, hi)| {
                    ast::ClassSetItem::Range(ast::ClassSetRange {
                        span,
                        start: literal(lo),
                        end: literal(hi),
                    })
                })
                .collect();
            return Some(ast::ClassSetItem::Bracketed(Box::new(
                ast::ClassBracketed {
                    span,
                    negated: p.negated,
                    kind: ast::ClassSet::Item(ast::ClassSetItem::Union(ast::ClassSetUnion {
                        span,
                        items,
                    })),
                },
            )));
        }
    };
    Some(ast::ClassSetItem::Ascii(ast::ClassAscii {
        span: p.span,
        kind,
        negated: p.negated,
    }))
}

struct Lower {
    encoding: Encoding,
    max_repetition: u32,
}

impl Lower {
    fn lower(&self, hir: &Hir) -> Result<Expr, RegexError> {
        Ok(match hir.kind() {
            HirKind::Empty => Expr::Empty,
            HirKind::Literal(l) => {
                let text = String::from_utf8_lossy(&l.0);
                seq(text.chars().map(|c| self.char_expr(c)).collect())
            }
            HirKind::Class(Class::Unicode(c)) => {
                let ranges: Vec<(char, char)> = c.iter().map(|r| (r.start(), r.end())).collect();
                self.class_expr(&ranges)
            }
            // `[]`: `regex-syntax` writes the class of no characters as an empty byte class.
            HirKind::Class(Class::Bytes(b)) if b.ranges().is_empty() => fail(),
            HirKind::Class(Class::Bytes(_)) => {
                return Err(RegexError::Unsupported {
                    offset: 0,
                    what: "byte class".into(),
                });
            }
            HirKind::Look(_) => return Err(inner_anchor()),
            HirKind::Repetition(r) => {
                check_bounds(r, self.max_repetition)?;
                repeat(self.lower(&r.sub)?, r.min, r.max)
            }
            HirKind::Capture(c) => self.lower(&c.sub)?,
            HirKind::Concat(xs) => {
                seq(xs.iter().map(|x| self.lower(x)).collect::<Result<_, _>>()?)
            }
            HirKind::Alternation(xs) => {
                alt(xs.iter().map(|x| self.lower(x)).collect::<Result<_, _>>()?)
            }
        })
    }

    fn any_char(&self) -> Expr {
        match self.encoding {
            Encoding::Raw => Expr::Class {
                ranges: vec![CharRange {
                    lo: '\0',
                    hi: char::MAX,
                }],
                negated: false,
            },
            Encoding::JsonString => json_char(),
        }
    }

    fn char_expr(&self, c: char) -> Expr {
        match self.encoding {
            Encoding::Raw => lit(c.encode_utf8(&mut [0; 4])),
            Encoding::JsonString => {
                json_escaped(c).unwrap_or_else(|| lit(c.encode_utf8(&mut [0; 4])))
            }
        }
    }

    fn class_expr(&self, ranges: &[(char, char)]) -> Expr {
        match self.encoding {
            Encoding::Raw => class(ranges),
            Encoding::JsonString => json_class(ranges),
        }
    }
}

/// Characters JSON must escape inside a string.
fn must_escape(c: char) -> bool {
    c == '"' || c == '\\' || c < ' '
}

/// How a character that must be escaped may be written: its short escape (`\n`) where JSON
/// has one, and `\u00XX` in upper or lower case hex.
fn json_escaped(c: char) -> Option<Expr> {
    if !must_escape(c) {
        return None;
    }
    let short = match c {
        '"' => Some("\\\""),
        '\\' => Some("\\\\"),
        '\n' => Some("\\n"),
        '\r' => Some("\\r"),
        '\t' => Some("\\t"),
        '\u{8}' => Some("\\b"),
        '\u{c}' => Some("\\f"),
        _ => None,
    };
    let code = c as u32;
    let mut forms = vec![
        lit(&format!("\\u{code:04x}")),
        lit(&format!("\\u{code:04X}")),
    ];
    if let Some(s) = short {
        forms.insert(0, lit(s));
    }
    Some(alt(forms))
}

/// The characters JSON must escape, as sorted ranges.
const ESCAPED: [(char, char); 3] = [('\0', '\u{1f}'), ('"', '"'), ('\\', '\\')];

/// A character class inside a JSON string: the characters JSON lets through raw, plus the
/// escape sequences of those it must escape.
pub fn json_class(ranges: &[(char, char)]) -> Expr {
    let mut raw: Vec<(char, char)> = Vec::new();
    let mut escaped: Vec<char> = Vec::new();
    for &(lo, hi) in ranges {
        // Subtract the escaped ranges from [lo, hi], left to right.
        let mut start = lo as u32;
        let end = hi as u32;
        for (elo, ehi) in ESCAPED {
            let (elo, ehi) = (elo as u32, ehi as u32);
            if ehi < start || elo > end {
                continue;
            }
            if elo > start {
                push_range(&mut raw, start, elo - 1);
            }
            escaped.extend((elo.max(start)..=ehi.min(end)).filter_map(char::from_u32));
            start = ehi + 1;
        }
        if start <= end {
            push_range(&mut raw, start, end);
        }
    }
    let mut parts = Vec::new();
    if !raw.is_empty() {
        parts.push(class(&raw));
    }
    parts.extend(escaped.into_iter().filter_map(json_escaped));
    alt(parts)
}

/// Pushes `lo..=hi` as characters; the range never starts or ends inside the surrogate gap
/// because class ranges from `regex-syntax` never do and the escaped characters are ASCII.
fn push_range(out: &mut Vec<(char, char)>, lo: u32, hi: u32) {
    if let (Some(lo), Some(hi)) = (char::from_u32(lo), char::from_u32(hi)) {
        out.push((lo, hi));
    }
}

/// Any one character of a JSON string's content: an unescaped character or an escape
/// sequence (`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\uXXXX`).
pub fn json_char() -> Expr {
    let hex = class(&[('0', '9'), ('a', 'f'), ('A', 'F')]);
    alt(vec![
        Expr::Class {
            ranges: vec![
                CharRange {
                    lo: '\0',
                    hi: '\u{1f}',
                },
                CharRange { lo: '"', hi: '"' },
                CharRange { lo: '\\', hi: '\\' },
            ],
            negated: true,
        },
        seq(vec![
            lit("\\"),
            alt(vec![
                class(&[
                    ('"', '"'),
                    ('\\', '\\'),
                    ('/', '/'),
                    ('b', 'b'),
                    ('f', 'f'),
                    ('n', 'n'),
                    ('r', 'r'),
                    ('t', 't'),
                ]),
                seq(vec![lit("u"), repeat(hex, 4, Some(4))]),
            ]),
        ]),
    ])
}
