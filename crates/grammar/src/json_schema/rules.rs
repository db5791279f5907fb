//! Building IR rules: a rule set with unique GBNF-safe names, and small expression helpers
//! that keep the trees flat (a one-element sequence is its element, nested alternatives
//! are merged), so the exported GBNF stays readable.

use std::collections::{HashMap, HashSet};

use crate::ir::{CharRange, Expr, Grammar, Rule, RuleId};

/// Rules under construction. Names are made unique and GBNF-safe (`[a-zA-Z0-9-]`).
#[derive(Debug, Default)]
pub struct RuleSet {
    rules: Vec<Rule>,
    names: HashSet<String>,
    /// The next suffix to try per base name, so naming stays linear when thousands of
    /// rules share a base (`string-pattern`, trie nodes).
    next_suffix: HashMap<String, u32>,
}

impl RuleSet {
    /// Reserves a rule (so it can be referenced before it is defined: recursion) and
    /// returns its id. Its body is [`Expr::Empty`] until [`RuleSet::define`].
    pub fn reserve(&mut self, hint: &str) -> RuleId {
        let name = self.unique_name(hint);
        self.names.insert(name.clone());
        self.rules.push(Rule {
            name,
            expr: Expr::Empty,
        });
        RuleId(self.rules.len() as u32 - 1)
    }

    pub fn define(&mut self, id: RuleId, expr: Expr) {
        self.rules[id.0 as usize].expr = expr;
    }

    /// Reserves and defines a rule at once.
    pub fn add(&mut self, hint: &str, expr: Expr) -> RuleId {
        let id = self.reserve(hint);
        self.define(id, expr);
        id
    }

    pub fn name(&self, id: RuleId) -> &str {
        &self.rules[id.0 as usize].name
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn into_grammar(self, root: RuleId) -> Grammar {
        Grammar {
            rules: self.rules,
            root: Some(root),
        }
    }

    fn unique_name(&mut self, hint: &str) -> String {
        let mut base: String = hint
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        // Collapse runs of '-' and trim them, so pointers like `/properties/a b` read well.
        while base.contains("--") {
            base = base.replace("--", "-");
        }
        let base = base.trim_matches('-');
        let base = if base.is_empty() { "r" } else { base };
        // Long pointers make unreadable names; keep the tail, which names the property.
        let base = if base.len() > 48 {
            let cut = base.len() - 48;
            base[cut..].trim_start_matches('-')
        } else {
            base
        };
        if !self.names.contains(base) {
            return base.to_owned();
        }
        let next = self.next_suffix.entry(base.to_owned()).or_insert(1);
        loop {
            let name = format!("{base}-{next}");
            *next += 1;
            if !self.names.contains(&name) {
                return name;
            }
        }
    }
}

pub fn lit(s: &str) -> Expr {
    if s.is_empty() {
        Expr::Empty
    } else {
        Expr::Literal(s.as_bytes().to_vec())
    }
}

pub fn rule(id: RuleId) -> Expr {
    Expr::Rule(id)
}

/// The expression that matches nothing (an empty character class);
/// [`prune`](super::prune) removes it.
pub fn fail() -> Expr {
    class(&[])
}

pub fn class(ranges: &[(char, char)]) -> Expr {
    Expr::Class {
        ranges: ranges
            .iter()
            .map(|&(lo, hi)| CharRange { lo, hi })
            .collect(),
        negated: false,
    }
}

/// A sequence, with empty parts dropped, nested sequences flattened and adjacent literals
/// joined.
pub fn seq(parts: Vec<Expr>) -> Expr {
    let mut out: Vec<Expr> = Vec::with_capacity(parts.len());
    for p in parts {
        match p {
            Expr::Empty => {}
            Expr::Seq(inner) => {
                for q in inner {
                    push_seq(&mut out, q);
                }
            }
            other => push_seq(&mut out, other),
        }
    }
    match out.len() {
        0 => Expr::Empty,
        1 => out.pop().unwrap_or(Expr::Empty),
        _ => Expr::Seq(out),
    }
}

fn push_seq(out: &mut Vec<Expr>, e: Expr) {
    if let (Some(Expr::Literal(prev)), Expr::Literal(next)) = (out.last_mut(), &e) {
        prev.extend_from_slice(next);
        return;
    }
    out.push(e);
}

/// An alternation, with nested alternations flattened and duplicates removed. An empty
/// list is the empty *language*: callers use [`alt_opt`] when that can happen.
pub fn alt(parts: Vec<Expr>) -> Expr {
    alt_opt(parts).unwrap_or(Expr::Empty)
}

/// An alternation, or `None` when there are no alternatives (nothing matches).
pub fn alt_opt(parts: Vec<Expr>) -> Option<Expr> {
    let mut out: Vec<Expr> = Vec::with_capacity(parts.len());
    for p in parts {
        match p {
            Expr::Alt(inner) => {
                for q in inner {
                    if !out.contains(&q) {
                        out.push(q);
                    }
                }
            }
            other => {
                if !out.contains(&other) {
                    out.push(other);
                }
            }
        }
    }
    match out.len() {
        0 => None,
        1 => out.pop(),
        _ => Some(Expr::Alt(out)),
    }
}

pub fn repeat(e: Expr, min: u32, max: Option<u32>) -> Expr {
    match (min, max) {
        (_, Some(0)) => Expr::Empty,
        (1, Some(1)) => e,
        _ if e == Expr::Empty => Expr::Empty,
        _ => Expr::Repeat {
            expr: Box::new(e),
            min,
            max,
        },
    }
}

pub fn opt(e: Expr) -> Expr {
    repeat(e, 0, Some(1))
}

pub fn star(e: Expr) -> Expr {
    repeat(e, 0, None)
}

pub fn plus(e: Expr) -> Expr {
    repeat(e, 1, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_join_literals_and_drop_empties() {
        let e = seq(vec![lit("a"), Expr::Empty, seq(vec![lit("b"), lit("c")])]);
        assert_eq!(e, lit("abc"));
    }

    #[test]
    fn alternations_flatten_and_deduplicate() {
        let e = alt(vec![lit("a"), alt(vec![lit("a"), lit("b")])]);
        assert_eq!(e, Expr::Alt(vec![lit("a"), lit("b")]));
        assert_eq!(alt_opt(vec![]), None);
    }

    #[test]
    fn rule_names_are_gbnf_safe_and_unique() {
        let mut r = RuleSet::default();
        let a = r.reserve("/properties/a b");
        let b = r.reserve("/properties/a b");
        let g = r.into_grammar(a);
        assert_eq!(g.rule(a).name, "properties-a-b");
        assert_eq!(g.rule(b).name, "properties-a-b-1");
    }
}
