//! The crate's one error type.
//!
//! Every variant carries where the problem is: a GBNF line and column, a rule name, a byte
//! offset in the matched input, or the [`Limits`](crate::Limits) field that was exceeded.
//! Front ends (JSON Schema, regex) add their own variants here, each with its location.

use thiserror::Error;

/// A position in GBNF source text, 1-based, columns counted in characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    pub line: u32,
    pub column: u32,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum GrammarError {
    /// The GBNF text does not follow the syntax.
    #[error("GBNF syntax error at {at}: expected {expected}, found {found}")]
    Syntax {
        at: Location,
        expected: String,
        found: String,
    },

    /// A GBNF escape or number that is malformed or out of range.
    #[error("GBNF error at {at}: {message}")]
    BadToken { at: Location, message: String },

    /// A rule is referenced but never defined.
    #[error("undefined rule '{name}' referenced at {at}")]
    UndefinedRule { name: String, at: Location },

    /// A rule is defined twice (llama.cpp silently keeps the last one; we refuse).
    #[error("rule '{name}' defined again at {at} (first defined at {first})")]
    DuplicateRule {
        name: String,
        at: Location,
        first: Location,
    },

    /// The grammar has no start rule (`root` in GBNF).
    #[error("the grammar has no '{name}' rule to start from")]
    NoRoot { name: String },

    /// A rule can reach itself without consuming input; a top-down matcher would loop.
    #[error(
        "left recursion: {} can reach itself without consuming input; rewrite it right-recursively, e.g. `{rule} ::= x {rule}?` or `{rule} ::= x+` instead of `{rule} ::= {rule} x | x`",
        cycle.join(" -> ")
    )]
    LeftRecursion { rule: String, cycle: Vec<String> },

    /// A budget in [`Limits`](crate::Limits) was exceeded.
    #[error("limit '{limit}' exceeded: {value} > {max} ({hint})")]
    LimitExceeded {
        limit: &'static str,
        value: u64,
        max: u64,
        hint: &'static str,
    },

    /// A token terminal (`<think>`, `<[12]>`) names a token the vocabulary does not have.
    #[error("token {token} in rule '{rule}' is not in the vocabulary")]
    UnknownToken { token: String, rule: String },

    /// The matcher rejected input at this byte offset of the bytes consumed so far.
    #[error("input rejected by the grammar at byte {offset}")]
    Rejected { offset: usize },

    /// A token id outside the vocabulary, or a token the grammar does not allow here.
    #[error("token {token} rejected by the grammar")]
    TokenRejected { token: u32 },

    /// The matcher is in its error state after an earlier rejection; reset or roll back.
    #[error("the matcher stopped after an earlier error; roll back or reset it")]
    Stopped,

    /// An end-of-sequence token was committed; nothing more can follow.
    #[error("the document has ended (an end-of-sequence token was committed)")]
    Ended,

    /// A token-level method on a matcher made without a vocabulary.
    #[error("this matcher has no vocabulary; create it with Matcher::with_vocabulary")]
    NoVocabulary,

    /// `rollback(n)` asked for more steps than were taken.
    #[error("cannot roll back {requested} steps, only {available} taken")]
    RollbackTooFar { requested: usize, available: usize },

    /// A bitmask buffer of the wrong length.
    #[error("mask buffer has {got} words, the vocabulary needs {need}")]
    MaskSize { got: usize, need: usize },
}
