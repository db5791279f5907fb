//! ECMA-262 pattern syntax that `regex-syntax` reads differently, or not at all, rewritten
//! into its syntax before it parses the pattern.
//!
//! JSON Schema reads patterns with the `u` flag (code points, `\p{…}`), so this is that
//! dialect, lenient where the flag refuses what the plain reading makes clear: an escaped
//! punctuation character is the character (`^[\w\.\_]+$` is common in schemas), and so
//! is a `]` outside a class (`\[\*]`). What changes:
//! - a character class is read by ECMA-262's rules and written back with every character
//!   escaped: inside brackets `[`, `&&`, `--`, `~~` and `[:alpha:]` are plain characters
//!   (`regex-syntax` reads nested classes, set operations and POSIX classes), `[\b]` is a
//!   backspace, `[]` matches nothing and `[^]` any character;
//! - `\cX` (a control character), `\0` (NUL), `\uXXXX` with surrogate pairs and `\u{…}`;
//! - `\xHH` (and `regex-syntax`'s `\x{…}`) must have its digits;
//! - `\k<name>` is a back-reference, refused like `\1`; an ASCII letter ECMA-262 does not
//!   define (`\A`, `\z`, `\a`, `\pL`, which `regex-syntax` reads its own way) is refused.
//!
//! Everything else is copied, and each piece of the new text remembers where it came from,
//! so errors still name a byte offset in the user's pattern.

use super::RegexError;

/// The pattern in `regex-syntax`'s syntax, with where each piece of it was written.
pub(super) struct Rewritten {
    pub(super) text: String,
    /// Per piece of `text`, in order: where it starts in `text`, where its source starts in
    /// the pattern, and whether it is a copy (so offsets inside it map one to one).
    pieces: Vec<(usize, usize, bool)>,
}

impl Rewritten {
    /// The pattern's byte offset of the text's byte offset `at`.
    pub(super) fn original(&self, at: usize) -> usize {
        let i = self.pieces.partition_point(|p| p.0 <= at);
        match i.checked_sub(1).map(|i| self.pieces[i]) {
            Some((text_at, pattern_at, true)) => pattern_at + (at - text_at),
            Some((_, pattern_at, false)) => pattern_at,
            None => at,
        }
    }

    /// Copies `s`, found at `from` in the pattern.
    fn copy(&mut self, from: usize, s: &str) {
        let contiguous = self
            .pieces
            .last()
            .is_some_and(|&(t, p, copy)| copy && p + (self.text.len() - t) == from);
        if !contiguous {
            self.pieces.push((self.text.len(), from, true));
        }
        self.text.push_str(s);
    }

    /// Writes `s` in place of what starts at `from` in the pattern.
    fn write(&mut self, from: usize, s: &str) {
        self.pieces.push((self.text.len(), from, false));
        self.text.push_str(s);
    }
}

/// What an escape (or a character of a class) stands for.
enum Escape<'p> {
    /// One character.
    Char(char),
    /// A class of characters (`\d`, `\p{L}`…), written as it stands.
    Class(&'p str),
    /// `\b` outside a class, `\B`, `\1`…, left for `regex-syntax` to read or refuse
    /// as it stands.
    Other(&'p str),
}

/// Rewrites `pattern` (see the module's documentation).
pub(super) fn rewrite(pattern: &str) -> Result<Rewritten, RegexError> {
    let mut out = Rewritten {
        text: String::with_capacity(pattern.len()),
        pieces: Vec::new(),
    };
    let mut at = 0;
    while let Some(c) = pattern[at..].chars().next() {
        match c {
            '\\' => {
                let (escape, end) = escape(pattern, at, false)?;
                match escape {
                    Escape::Char(c) => out.write(at, &hex(c)),
                    Escape::Class(_) | Escape::Other(_) => out.copy(at, &pattern[at..end]),
                }
                at = end;
            }
            '[' => at = class(pattern, at, &mut out)?,
            _ => {
                out.copy(at, &pattern[at..at + c.len_utf8()]);
                at += c.len_utf8();
            }
        }
    }
    Ok(out)
}

/// `c` as a `regex-syntax` escape, which means the character wherever it stands.
fn hex(c: char) -> String {
    format!("\\x{{{:X}}}", c as u32)
}

/// Reads the class opening at `open` (a `[`) and writes it with every character escaped;
/// returns the offset after its `]`.
fn class(pattern: &str, open: usize, out: &mut Rewritten) -> Result<usize, RegexError> {
    let mut at = open + 1;
    let negated = pattern[at..].starts_with('^');
    if negated {
        at += 1;
    }
    let mut items: Vec<(usize, String)> = Vec::new();
    loop {
        let Some(c) = pattern[at..].chars().next() else {
            return Err(RegexError::Syntax {
                offset: open,
                message: "unclosed character class".into(),
            });
        };
        if c == ']' {
            break;
        }
        let start = at;
        let (first, end) = atom(pattern, at)?;
        at = end;
        // `a-b` is a range unless the `-` closes the class (`[a-]`).
        let range = pattern[at..].starts_with('-') && !pattern[at + 1..].starts_with(']');
        if !range || at + 1 >= pattern.len() {
            items.push((start, written(&first)));
            continue;
        }
        let (last, end) = atom(pattern, at + 1)?;
        let item = match (&first, &last) {
            (Escape::Char(lo), Escape::Char(hi)) if lo > hi => {
                return Err(RegexError::Syntax {
                    offset: start,
                    message: "character class range out of order".into(),
                });
            }
            (Escape::Class(_), _) | (_, Escape::Class(_)) => {
                return Err(RegexError::Syntax {
                    offset: start,
                    message: "a class escape (\\d, \\w, \\s, \\p{…}) cannot bound a range".into(),
                });
            }
            _ => format!("{}-{}", written(&first), written(&last)),
        };
        items.push((start, item));
        at = end;
    }
    let close = at + 1;
    if items.is_empty() {
        // `[]` matches nothing and `[^]` any character; `regex-syntax` reads `]` first in
        // a class as the character.
        let any = if negated { "" } else { "^" };
        out.write(open, &format!("[{any}\\x{{0}}-\\x{{10FFFF}}]"));
        return Ok(close);
    }
    out.write(open, if negated { "[^" } else { "[" });
    for (from, item) in items {
        out.write(from, &item);
    }
    out.write(at, "]");
    Ok(close)
}

/// A class item as `regex-syntax` reads it inside brackets.
fn written(item: &Escape<'_>) -> String {
    match item {
        Escape::Char(c) => hex(*c),
        Escape::Class(s) | Escape::Other(s) => (*s).to_string(),
    }
}

/// The class item at `at` (a character or an escape) and the offset after it.
fn atom(pattern: &str, at: usize) -> Result<(Escape<'_>, usize), RegexError> {
    let Some(c) = pattern[at..].chars().next() else {
        return Err(RegexError::Syntax {
            offset: at,
            message: "unclosed character class".into(),
        });
    };
    if c != '\\' {
        return Ok((Escape::Char(c), at + c.len_utf8()));
    }
    match escape(pattern, at, true)? {
        (Escape::Other(s), _) => Err(RegexError::Syntax {
            offset: at,
            message: format!("{s} cannot stand in a character class"),
        }),
        item => Ok(item),
    }
}

/// The escape whose `\` is at `at`, and the offset after it.
fn escape(pattern: &str, at: usize, in_class: bool) -> Result<(Escape<'_>, usize), RegexError> {
    let syntax = |message: &str| RegexError::Syntax {
        offset: at,
        message: message.into(),
    };
    let rest = &pattern[at + 1..];
    let Some(c) = rest.chars().next() else {
        return Err(syntax("the pattern ends with a lone \\"));
    };
    let after = at + 1 + c.len_utf8();
    let next = rest[c.len_utf8()..].chars().next();
    let char = |c: char, end: usize| Ok((Escape::Char(c), end));
    match c {
        'c' => match next {
            Some(l) if l.is_ascii_alphabetic() => char(char::from(l as u8 % 32), after + 1),
            _ => Err(syntax(
                "\\c must be followed by a letter (\\cJ is a line feed)",
            )),
        },
        '0' if !next.is_some_and(|d| d.is_ascii_digit()) => char('\0', after),
        'u' => {
            let (code, end) = code_unit(pattern, at)
                .ok_or_else(|| syntax("\\u must be followed by four hexadecimal digits or {…}"))?;
            match code {
                0xD800..=0xDBFF => match code_unit(pattern, end) {
                    Some((low @ 0xDC00..=0xDFFF, end)) => {
                        let c = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                        char(char::from_u32(c).unwrap_or('\u{FFFD}'), end)
                    }
                    _ => Err(syntax(
                        "a lone surrogate (\\uD800–\\uDFFF) is not a character",
                    )),
                },
                _ => char::from_u32(code).map_or_else(
                    || {
                        Err(syntax(
                            "a lone surrogate (\\uD800–\\uDFFF) is not a character",
                        ))
                    },
                    |c| char(c, end),
                ),
            }
        }
        'x' => {
            // Two hexadecimal digits; `regex-syntax`'s `\x{…}` is read too.
            let (digits, end) = match rest[1..].strip_prefix('{') {
                Some(braced) => braced
                    .find('}')
                    .map(|close| (&braced[..close], at + 3 + close + 1))
                    .unwrap_or(("", at)),
                None => (rest.get(1..3).unwrap_or(""), at + 4),
            };
            let code = (!digits.is_empty() && digits.chars().all(|c| c.is_ascii_hexdigit()))
                .then(|| u32::from_str_radix(digits, 16).ok())
                .flatten()
                .and_then(char::from_u32);
            match code {
                Some(c) => char(c, end),
                None => Err(syntax("\\x must be followed by two hexadecimal digits")),
            }
        }
        'k' => Err(RegexError::Unsupported {
            offset: at,
            what: "back-reference".into(),
        }),
        'b' if in_class => char('\u{8}', after),
        'f' => char('\u{c}', after),
        'n' => char('\n', after),
        'r' => char('\r', after),
        't' => char('\t', after),
        'v' => char('\u{b}', after),
        'd' | 'D' | 'w' | 'W' | 's' | 'S' => Ok((Escape::Class(&pattern[at..after]), after)),
        'p' | 'P' if next == Some('{') => match rest.find('}') {
            Some(close) => {
                let end = at + 1 + close + 1;
                Ok((Escape::Class(&pattern[at..end]), end))
            }
            None => Err(syntax("unclosed Unicode property \\p{…}")),
        },
        // `\b`, `\B`, `\1`, for `regex-syntax` to read or refuse as ECMA-262 does.
        'b' | 'B' | '0'..='9' => Ok((Escape::Other(&pattern[at..after]), after)),
        // `regex-syntax` reads `\A`, `\z`, `\a`, `\pL`… its own way; ECMA-262 refuses them
        // with the `u` flag and reads the letter without.
        c if c.is_ascii_alphanumeric() => Err(syntax(&format!(
            "\\{c} is not an ECMA-262 escape (anchor with ^ and $, escape a letter by itself)"
        ))),
        // ECMA-262 with the `u` flag allows only its syntax characters and `/` here;
        // without it, and here, any other escaped character is itself.
        c => char(c, after),
    }
}

/// The code point of `\uXXXX` or `\u{…}` whose `\` is at `at`, and the offset after it.
fn code_unit(pattern: &str, at: usize) -> Option<(u32, usize)> {
    let rest = pattern.get(at..)?.strip_prefix("\\u")?;
    if let Some(braced) = rest.strip_prefix('{') {
        let close = braced.find('}')?;
        let digits = &braced[..close];
        let code = (1..=6)
            .contains(&digits.len())
            .then(|| u32::from_str_radix(digits, 16).ok())??;
        return (code <= 0x10_FFFF).then_some((code, at + 3 + close + 1));
    }
    let digits = rest.get(..4)?;
    if !digits.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    Some((u32::from_str_radix(digits, 16).ok()?, at + 6))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(p: &str) -> String {
        rewrite(p)
            .map(|r| r.text)
            .unwrap_or_else(|e| format!("error: {e}"))
    }

    #[test]
    fn classes_are_written_with_every_character_escaped() {
        assert_eq!(text("^[a-z_]+$"), "^[\\x{61}-\\x{7A}\\x{5F}]+$");
        // `[` and `&&` are characters; the class ends at the first `]`.
        assert_eq!(text("[[&&]"), "[\\x{5B}\\x{26}\\x{26}]");
        assert_eq!(text("[[:a:]]"), "[\\x{5B}\\x{3A}\\x{61}\\x{3A}]]");
        assert_eq!(text("[%--]"), "[\\x{25}-\\x{2D}]");
        assert_eq!(text("[a-]"), "[\\x{61}\\x{2D}]");
        assert_eq!(text("[^\\b\\d\\p{L}]"), "[^\\x{8}\\d\\p{L}]");
        assert_eq!(text("[]"), "[^\\x{0}-\\x{10FFFF}]");
        assert_eq!(text("[^]"), "[\\x{0}-\\x{10FFFF}]");
    }

    #[test]
    fn escapes_regex_syntax_lacks_are_written_as_characters() {
        assert_eq!(text("\\cJ\\0"), "\\x{A}\\x{0}");
        assert_eq!(
            text("\\uD83D\\uDE00\\u{1F600}\\u00e9"),
            "\\x{1F600}\\x{1F600}\\x{E9}"
        );
        assert_eq!(text("\\[\\/\\<\\n"), "\\x{5B}\\x{2F}\\x{3C}\\x{A}");
        assert_eq!(
            text("[\\x01-\\x1f]\\x7e\\x{e9}"),
            "[\\x{1}-\\x{1F}]\\x{7E}\\x{E9}"
        );
        // Copied as they stand: `regex-syntax` reads them as ECMA-262 does, or refuses.
        assert_eq!(text("\\d\\b\\1\\p{L}"), "\\d\\b\\1\\p{L}");
    }

    #[test]
    fn errors_name_the_offset_in_the_pattern() {
        let offset = |p: &str| match rewrite(p) {
            Err(RegexError::Syntax { offset, .. } | RegexError::Unsupported { offset, .. }) => {
                offset
            }
            _ => usize::MAX,
        };
        assert_eq!(offset("ab[z-a]"), 3);
        assert_eq!(offset("a[\\d-z]"), 2);
        assert_eq!(offset("ab[cd"), 2);
        assert_eq!(offset("x\\c1"), 1);
        assert_eq!(offset("x\\uD800"), 1);
        assert_eq!(offset("ab\\x4"), 2);
        assert_eq!(offset("(?<n>a)\\k<n>"), 7);
        // Offsets in the new text lead back to the pattern.
        let r = rewrite("[ab]c(").unwrap();
        assert_eq!(r.original(r.text.len() - 1), 5);
        assert_eq!(r.original(r.text.find("x{62}").unwrap() - 1), 2);
    }
}
