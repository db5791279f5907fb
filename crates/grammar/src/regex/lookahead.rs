//! Patterns that open with look-ahead, `^(?!X)Y` and `^(?=X)Y`: a key that does not start
//! with `@@` (`^(?!@@)[\w@]+$`), any name but one (`^(?!pattern$).*$`).
//!
//! A context-free grammar has no complement, but these languages are regular: the strings
//! `Y` matches from the start, less (or only) those `X` matches from the start, built as
//! one automaton of those parts ([`super::automaton`]). Look-around anywhere else is still
//! refused.

use super::automaton::Part;
use super::{RegexError, parse};

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

/// The parts of the automaton of `leading`: `Y` held to the start (it follows the
/// pattern's `^`), and each `X` from the start as well, negative for `(?!X)`.
pub(super) fn parts(leading: &Leading<'_>, max_rep: u32) -> Result<Vec<Part>, RegexError> {
    let located = |offset: usize| move |e: RegexError| e.relocated(|o| o + offset);
    let (rest, rest_at) = leading.rest;
    let body = parse(rest).map_err(located(rest_at))?;
    let mut parts = vec![Part::new(&body, true, false, max_rep).map_err(located(rest_at))?];
    for &(negative, look, at) in &leading.looks {
        let x = parse(look).map_err(located(at))?;
        parts.push(Part::new(&x, true, negative, max_rep).map_err(located(at))?);
    }
    Ok(parts)
}
