//! The one grammar IR every front end lowers into.
//!
//! A [`Grammar`] is a set of named rules over *bytes*: every front end (GBNF, JSON Schema,
//! regex) builds [`Expr`] trees, and the matcher compiles them into its own automata. The
//! IR is shaped like llama.cpp's GBNF on purpose, so that [`Grammar`] prints back as GBNF a
//! user can paste into llama.cpp.
//!
//! Character classes are over Unicode scalar values, as in GBNF; the matcher expands them to
//! UTF-8 byte sequences.

/// Index of a rule inside its [`Grammar`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u32);

/// An inclusive range of Unicode scalar values, `lo..=hi`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CharRange {
    pub lo: char,
    pub hi: char,
}

/// A special token named by the grammar (`<think>`, `<[128000]>`), or any token but it
/// (`!<think>`). Only usable when the matcher is given a vocabulary.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TokenRef {
    /// `<text>`: the token whose text is exactly this.
    Text(String),
    /// `<[id]>`: the token with this id.
    Id(u32),
}

/// A grammar expression.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expr {
    /// Matches the empty string.
    Empty,
    /// An exact byte string (a GBNF literal, UTF-8 encoded).
    Literal(Vec<u8>),
    /// One character from the ranges (or, when `negated`, any character outside them).
    Class {
        ranges: Vec<CharRange>,
        negated: bool,
    },
    /// A reference to another rule.
    Rule(RuleId),
    /// Each in turn.
    Seq(Vec<Expr>),
    /// Any one of them.
    Alt(Vec<Expr>),
    /// `expr{min,max}`; `max: None` is unbounded.
    Repeat {
        expr: Box<Expr>,
        min: u32,
        max: Option<u32>,
    },
    /// A special token (`<...>`), or any token but it (`!<...>`) when `negated`.
    Token { token: TokenRef, negated: bool },
}

/// A named rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub name: String,
    pub expr: Expr,
}

/// A complete grammar: rules and the start rule.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Grammar {
    pub rules: Vec<Rule>,
    pub root: Option<RuleId>,
}

impl Grammar {
    /// The rule with this id. Ids come from this grammar, so the index is in range.
    pub fn rule(&self, id: RuleId) -> &Rule {
        &self.rules[id.0 as usize]
    }

    /// The id of the rule with this name, if any.
    pub fn find(&self, name: &str) -> Option<RuleId> {
        self.rules
            .iter()
            .position(|r| r.name == name)
            .map(|i| RuleId(i as u32))
    }
}
