//! The whitespace policy: where whitespace may go between JSON tokens, and how much.
//!
//! Whitespace is always bounded, so a model cannot stall in an endless run of spaces, and
//! never allowed before the first token or after the last, so the document ends where its
//! closing token does.

use crate::ir::Expr;

use super::rules::{alt, class, lit, repeat, seq};

/// Whitespace between the tokens of generated JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Whitespace {
    /// llama.cpp's `space` rule between any two tokens: nothing, one space, or one or two
    /// newlines followed by up to 20 spaces or tabs. Accepts compact and indented output.
    #[default]
    Flexible,
    /// No whitespace at all: `{"a":1,"b":[2,3]}`.
    Compact,
    /// A newline and up to `max_indent` spaces after `{`, `[` and `,` and before `}` and
    /// `]`, one space after `:`, nothing before `:` or `,`. The depth of the indentation is
    /// not checked, only bounded.
    Indented { max_indent: u32 },
}

/// A place between two tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    /// After `{`, `[`, `,`; before `}`, `]` of a non-empty container.
    Break,
    /// After `:`.
    Colon,
    /// Before `:` and `,`, and inside an empty container.
    Tight,
}

impl Whitespace {
    /// The expression for one slot, or [`Expr::Empty`] where this policy allows nothing.
    pub(crate) fn slot(&self, slot: Slot) -> Expr {
        match (self, slot) {
            (Whitespace::Compact, _) => Expr::Empty,
            (Whitespace::Flexible, _) => alt(vec![
                Expr::Empty,
                lit(" "),
                seq(vec![
                    repeat(lit("\n"), 1, Some(2)),
                    repeat(class(&[(' ', ' '), ('\t', '\t')]), 0, Some(20)),
                ]),
            ]),
            (Whitespace::Indented { max_indent }, Slot::Break) => {
                seq(vec![lit("\n"), repeat(lit(" "), 0, Some(*max_indent))])
            }
            (Whitespace::Indented { .. }, Slot::Colon) => lit(" "),
            (Whitespace::Indented { .. }, Slot::Tight) => Expr::Empty,
        }
    }

    /// The rule name for a slot's expression, so each distinct one is defined once.
    pub(crate) fn slot_name(&self, slot: Slot) -> &'static str {
        match (self, slot) {
            (Whitespace::Flexible, _) => "space",
            (_, Slot::Break) => "break",
            (_, Slot::Colon) => "colon-space",
            (_, Slot::Tight) => "tight",
        }
    }
}
