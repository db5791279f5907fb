//! Printing the IR as GBNF in llama.cpp's style (`Display` for [`Grammar`]), so that any
//! grammar, whatever front end built it, can be pasted into llama.cpp.
//!
//! Rule names are printed with every character outside `[a-zA-Z0-9-]` replaced by `-`
//! (GBNF's name syntax). Literal bytes that are not UTF-8 cannot be written in GBNF (its
//! `\xNN` is a code point, not a byte); they are printed as `\xNN`, which llama.cpp reads as
//! U+00NN.

use std::fmt::{self, Display, Write};

use crate::ir::{CharRange, Expr, Grammar, TokenRef};

impl Display for Grammar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The root rule first, as llama.cpp's examples do.
        let order = self
            .root
            .iter()
            .map(|r| r.0 as usize)
            .chain((0..self.rules.len()).filter(|&i| Some(i as u32) != self.root.map(|r| r.0)));
        for i in order {
            let rule = &self.rules[i];
            write!(f, "{} ::= ", gbnf_name(&rule.name))?;
            write_expr(self, &rule.expr, Prec::Alt, f)?;
            f.write_char('\n')?;
        }
        Ok(())
    }
}

/// A rule name in GBNF's syntax.
pub fn gbnf_name(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if s.is_empty() { "rule".into() } else { s }
}

/// Binding strength of the context an expression is printed in.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Prec {
    Alt,
    Seq,
    Postfix,
}

fn write_expr(g: &Grammar, e: &Expr, ctx: Prec, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let own = match e {
        Expr::Alt(xs) if xs.len() > 1 => Prec::Alt,
        Expr::Seq(xs) if xs.len() > 1 => Prec::Seq,
        Expr::Literal(b)
            if ctx == Prec::Postfix && String::from_utf8_lossy(b).chars().count() > 1 =>
        {
            Prec::Seq
        }
        _ => Prec::Postfix,
    };
    let paren = own < ctx;
    if paren {
        f.write_char('(')?;
    }
    match e {
        Expr::Empty => f.write_str("\"\"")?,
        Expr::Literal(bytes) => write_literal(bytes, f)?,
        Expr::Class { ranges, negated } => write_class(ranges, *negated, f)?,
        Expr::Rule(r) => f.write_str(&gbnf_name(&g.rule(*r).name))?,
        Expr::Seq(xs) => {
            if xs.is_empty() {
                f.write_str("\"\"")?;
            }
            for (i, x) in xs.iter().enumerate() {
                if i > 0 {
                    f.write_char(' ')?;
                }
                write_expr(g, x, Prec::Seq, f)?;
            }
        }
        Expr::Alt(xs) => {
            if xs.is_empty() {
                // An alternation of nothing matches nothing: a class with no characters.
                f.write_str("[^\\x00-\\U0010FFFF]")?;
            }
            for (i, x) in xs.iter().enumerate() {
                if i > 0 {
                    f.write_str(" | ")?;
                }
                write_expr(g, x, Prec::Alt, f)?;
            }
        }
        Expr::Repeat { expr, min, max } => {
            write_expr(g, expr, Prec::Postfix, f)?;
            match (min, max) {
                (0, None) => f.write_char('*')?,
                (1, None) => f.write_char('+')?,
                (0, Some(1)) => f.write_char('?')?,
                (m, None) => write!(f, "{{{m},}}")?,
                (m, Some(n)) if m == n => write!(f, "{{{m}}}")?,
                (m, Some(n)) => write!(f, "{{{m},{n}}}")?,
            }
        }
        Expr::Token { token, negated } => {
            if *negated {
                f.write_char('!')?;
            }
            match token {
                TokenRef::Text(t) => f.write_str(t)?,
                TokenRef::Id(id) => write!(f, "<[{id}]>")?,
            }
        }
    }
    if paren {
        f.write_char(')')?;
    }
    Ok(())
}

fn write_char_escaped(c: char, in_class: bool, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match c {
        '\n' => f.write_str("\\n"),
        '\r' => f.write_str("\\r"),
        '\t' => f.write_str("\\t"),
        '\\' => f.write_str("\\\\"),
        '"' if !in_class => f.write_str("\\\""),
        ']' | '[' | '-' | '^' if in_class => write!(
            f,
            "\\{}",
            if c == '^' {
                "x5E".to_string()
            } else {
                c.to_string()
            }
        ),
        c if (c as u32) < 0x20 || c == '\x7f' => write!(f, "\\x{:02X}", c as u32),
        c => f.write_char(c),
    }
}

fn write_literal(bytes: &[u8], f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_char('"')?;
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            write_char_escaped(c, false, f)?;
        }
        for b in chunk.invalid() {
            write!(f, "\\x{b:02X}")?;
        }
    }
    f.write_char('"')
}

fn write_class(ranges: &[CharRange], negated: bool, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_char('[')?;
    if negated {
        f.write_char('^')?;
    } else if ranges.is_empty() {
        // `[]` is not GBNF; a class with no characters is the negation of everything.
        return f.write_str("^\\x00-\\U0010FFFF]");
    }
    for r in ranges {
        write_char_escaped(r.lo, true, f)?;
        if r.hi != r.lo {
            f.write_char('-')?;
            write_char_escaped(r.hi, true, f)?;
        }
    }
    f.write_char(']')
}
