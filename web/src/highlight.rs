//! Syntax highlighting for the constraint editor: JSON (a schema) and GBNF cut into spans of a
//! few kinds. The editor draws them in a layer under a transparent textarea, so the textarea
//! stays the one control people type into, select in and reach with the keyboard; the spans
//! must therefore cover the text exactly, byte for byte, whatever it holds (half-typed
//! strings, stray characters), which the tests check.

use crate::constraint::Mode;

/// What a span of editor text is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Whitespace and anything not worth a colour.
    Plain,
    /// A JSON object key, or a GBNF rule name where it is defined.
    Key,
    /// A string literal.
    String,
    /// A number, `true`, `false`, `null`; a GBNF repetition count `{m,n}`.
    Literal,
    /// `{ } [ ] : ,` in JSON; `::= | ( ) * + ?` in GBNF.
    Punct,
    /// A GBNF character class `[...]`.
    Class,
    /// A GBNF comment.
    Comment,
}

impl Kind {
    /// The CSS class of the span (`style.css`).
    pub fn class(self) -> &'static str {
        match self {
            Kind::Plain => "tok-plain",
            Kind::Key => "tok-key",
            Kind::String => "tok-string",
            Kind::Literal => "tok-literal",
            Kind::Punct => "tok-punct",
            Kind::Class => "tok-class",
            Kind::Comment => "tok-comment",
        }
    }
}

/// The text cut into consecutive spans that cover it exactly.
pub fn spans(text: &str, mode: Mode) -> Vec<(Kind, &str)> {
    let cuts = match mode {
        Mode::Schema => json_cuts(text),
        Mode::Gbnf => gbnf_cuts(text),
    };
    let mut out: Vec<(Kind, &str)> = Vec::with_capacity(cuts.len());
    let mut at = 0;
    for (kind, end) in cuts {
        // Every cut ends on a character boundary (the scanners step by whole characters).
        if end <= at {
            continue;
        }
        let piece = &text[at..end];
        match out.last_mut() {
            // Neighbours of one kind merge into one span.
            Some((k, prev)) if *k == kind => {
                let start = at - prev.len();
                *prev = &text[start..end];
            }
            _ => out.push((kind, piece)),
        }
        at = end;
    }
    if at < text.len() {
        out.push((Kind::Plain, &text[at..]));
    }
    out
}

/// Byte length of the literal that `s[0]` opens (a quote, a class's `[`): through `close`,
/// escapes skipped, or to the end of the line when it is not closed yet.
fn delimited_len(s: &str, close: char) -> usize {
    let mut escaped = false;
    for (i, c) in s.char_indices().skip(1) {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '\n' => return i,
            c if c == close => return i + 1,
            _ => {}
        }
    }
    s.len()
}

/// Byte length of the run of characters at the start of `s` that `keep` accepts.
fn run_len(s: &str, keep: impl Fn(char) -> bool) -> usize {
    s.char_indices()
        .find(|&(_, c)| !keep(c))
        .map_or(s.len(), |(i, _)| i)
}

/// `(kind, end)` pairs covering `text`: `token` gives the kind and byte length of the token
/// that starts with `c` at the start of `rest` (at least the character itself is taken).
fn cuts(text: &str, token: impl Fn(char, &str) -> (Kind, usize)) -> Vec<(Kind, usize)> {
    let mut cuts = Vec::new();
    let mut i = 0;
    while let Some(c) = text[i..].chars().next() {
        let (kind, len) = token(c, &text[i..]);
        i += len.max(c.len_utf8());
        cuts.push((kind, i));
    }
    cuts
}

/// `(kind, end)` pairs for JSON: a string followed by `:` is a key.
fn json_cuts(text: &str) -> Vec<(Kind, usize)> {
    let word = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '+' | '.' | '_');
    cuts(text, |c, rest| match c {
        '"' => {
            let len = delimited_len(rest, '"');
            let key = rest[len..].trim_start().starts_with(':');
            (if key { Kind::Key } else { Kind::String }, len)
        }
        '{' | '}' | '[' | ']' | ':' | ',' => (Kind::Punct, 1),
        '-' | '0'..='9' => (Kind::Literal, run_len(rest, word)),
        'a'..='z' => {
            let len = run_len(rest, word);
            let literal = matches!(&rest[..len], "true" | "false" | "null");
            (if literal { Kind::Literal } else { Kind::Plain }, len)
        }
        _ => (Kind::Plain, c.len_utf8()),
    })
}

/// `(kind, end)` pairs for GBNF: a name followed by `::=` is a rule being defined.
fn gbnf_cuts(text: &str) -> Vec<(Kind, usize)> {
    let name = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    cuts(text, |c, rest| match c {
        '#' => (Kind::Comment, rest.find('\n').unwrap_or(rest.len())),
        '"' => (Kind::String, delimited_len(rest, '"')),
        '[' => (Kind::Class, delimited_len(rest, ']')),
        '{' => (
            Kind::Literal,
            rest.find('}').map_or(rest.len(), |end| end + 1),
        ),
        ':' if rest.starts_with("::=") => (Kind::Punct, 3),
        '|' | '(' | ')' | '*' | '+' | '?' => (Kind::Punct, 1),
        c if name(c) => {
            let len = run_len(rest, name);
            let defined = rest[len..].trim_start().starts_with("::=");
            (if defined { Kind::Key } else { Kind::Plain }, len)
        }
        _ => (Kind::Plain, c.len_utf8()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::constraint::EXAMPLES;

    fn joined(spans: &[(Kind, &str)]) -> String {
        spans.iter().map(|(_, s)| *s).collect()
    }

    fn of_kind<'a>(spans: &[(Kind, &'a str)], kind: Kind) -> Vec<&'a str> {
        spans
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, s)| *s)
            .collect()
    }

    #[test]
    fn json_keys_strings_and_literals() {
        let s = spans(
            r#"{"type": "integer", "minimum": -3.5e2, "x": [true, null]}"#,
            Mode::Schema,
        );
        assert_eq!(
            of_kind(&s, Kind::Key),
            [r#""type""#, r#""minimum""#, r#""x""#]
        );
        assert_eq!(of_kind(&s, Kind::String), [r#""integer""#]);
        assert_eq!(of_kind(&s, Kind::Literal), ["-3.5e2", "true", "null"]);
    }

    #[test]
    fn gbnf_rules_strings_classes_and_comments() {
        let text = "# yes or no\nroot ::= (\"yes\" | \"no\") [a-z\\]]{1,3} ws\nws ::= [ \\t]*\n";
        let s = spans(text, Mode::Gbnf);
        assert_eq!(of_kind(&s, Kind::Key), ["root", "ws"]);
        assert_eq!(of_kind(&s, Kind::String), ["\"yes\"", "\"no\""]);
        assert_eq!(of_kind(&s, Kind::Class), ["[a-z\\]]", "[ \\t]"]);
        assert_eq!(of_kind(&s, Kind::Literal), ["{1,3}"]);
        assert_eq!(of_kind(&s, Kind::Comment), ["# yes or no"]);
    }

    /// Whatever the text — the examples, and every prefix of them (text as it is being typed),
    /// with unclosed strings and classes and multi-byte characters — the spans cover it exactly.
    #[test]
    fn spans_cover_any_text_exactly() {
        let mut texts: Vec<String> = EXAMPLES.iter().map(|(_, t)| (*t).to_string()).collect();
        texts.push("root ::= \"città ✓ [\" [^\"\\\\]* # ünïcode\n".into());
        texts.push("{\"a\": \"unterminated\n, \"é\": 1".into());
        for text in &texts {
            for (end, _) in text.char_indices() {
                for mode in [Mode::Schema, Mode::Gbnf] {
                    let prefix = &text[..end];
                    assert_eq!(joined(&spans(prefix, mode)), prefix);
                }
            }
        }
    }
}
