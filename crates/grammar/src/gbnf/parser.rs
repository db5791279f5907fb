//! A parser for llama.cpp's GBNF, producing the crate's [`Grammar`] IR.
//!
//! The accepted syntax is exactly llama.cpp's (`src/llama-grammar.cpp`, `grammars/README.md`):
//! `name ::= alternatives` rules; literals `"..."` and classes `[...]`, `[^...]` with the
//! escapes `\x.. \u.... \U........ \t \r \n \\ \" \[ \] \-`; `.` for any character; groups
//! `( ... )` inside which newlines are free; `|` alternation, which may continue on the next
//! line; `* + ? {m} {m,} {m,n}` on the preceding item; `#` comments; token terminals
//! `<[id]>`, `<text>` and their negations `!<...>`. Names are `[a-zA-Z0-9-]+`.
//!
//! Where llama.cpp is silent or lenient we are stricter but never different on valid input:
//! a rule defined twice and a repetition bound over [`Limits::max_repetition`] are errors
//! (llama.cpp keeps the last definition and turns large bounds into `*`).

use rustc_hash::FxHashMap;

use crate::error::{GrammarError, Location};
use crate::ir::{CharRange, Expr, Grammar, Rule, RuleId, TokenRef};
use crate::limits::Limits;

/// Parses GBNF text with the default [`Limits`]. The start rule is `root`.
pub fn parse(src: &str) -> Result<Grammar, GrammarError> {
    parse_with_limits(src, &Limits::default())
}

/// Parses GBNF text; the start rule is `root`.
pub fn parse_with_limits(src: &str, limits: &Limits) -> Result<Grammar, GrammarError> {
    let mut p = Parser {
        src,
        pos: 0,
        limits,
        rules: Vec::new(),
        by_name: FxHashMap::default(),
    };
    p.skip_space(true);
    while p.pos < src.len() {
        p.parse_rule()?;
    }
    for (i, slot) in p.rules.iter().enumerate() {
        if slot.defined_at.is_none() {
            let at = p.location(slot.first_use);
            let name = p.rules[i].name.clone();
            return Err(GrammarError::UndefinedRule { name, at });
        }
    }
    let root = p.by_name.get("root").copied();
    let grammar = Grammar {
        rules: p
            .rules
            .into_iter()
            .map(|s| Rule {
                name: s.name,
                expr: s.expr,
            })
            .collect(),
        root,
    };
    if grammar.root.is_none() {
        return Err(GrammarError::NoRoot {
            name: "root".into(),
        });
    }
    Ok(grammar)
}

struct Slot {
    name: String,
    expr: Expr,
    defined_at: Option<usize>,
    first_use: usize,
}

struct Parser<'a> {
    src: &'a str,
    pos: usize,
    limits: &'a Limits,
    rules: Vec<Slot>,
    by_name: FxHashMap<String, RuleId>,
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.src.as_bytes().get(self.pos).copied()
    }

    fn peek_at(&self, k: usize) -> Option<u8> {
        self.src.as_bytes().get(self.pos + k).copied()
    }

    fn location(&self, offset: usize) -> Location {
        let before = &self.src[..offset.min(self.src.len())];
        let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        Location {
            line: line as u32,
            column: column as u32,
        }
    }

    fn found(&self) -> String {
        match self.src[self.pos..].chars().next() {
            None => "end of input".into(),
            Some('\n') => "end of line".into(),
            Some(c) => format!("{c:?}"),
        }
    }

    fn expected(&self, what: &str) -> GrammarError {
        GrammarError::Syntax {
            at: self.location(self.pos),
            expected: what.into(),
            found: self.found(),
        }
    }

    fn bad(&self, at: usize, message: String) -> GrammarError {
        GrammarError::BadToken {
            at: self.location(at),
            message,
        }
    }

    /// Skips blanks and `#` comments; newlines too when `newline_ok` (as llama.cpp does
    /// inside groups and after `::=` or `|`).
    fn skip_space(&mut self, newline_ok: bool) {
        while let Some(b) = self.peek() {
            match b {
                b' ' | b'\t' => self.pos += 1,
                b'\r' | b'\n' if newline_ok => self.pos += 1,
                b'#' => {
                    while let Some(b) = self.peek() {
                        if b == b'\r' || b == b'\n' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
    }

    fn parse_name(&mut self) -> Result<&str, GrammarError> {
        let start = self.pos;
        while self.peek().is_some_and(is_word) {
            self.pos += 1;
        }
        if start == self.pos {
            return Err(self.expected("a rule name"));
        }
        Ok(&self.src[start..self.pos])
    }

    fn rule_id(&mut self, name: &str, at: usize) -> RuleId {
        if let Some(&id) = self.by_name.get(name) {
            return id;
        }
        let id = RuleId(self.rules.len() as u32);
        self.rules.push(Slot {
            name: name.into(),
            expr: Expr::Empty,
            defined_at: None,
            first_use: at,
        });
        self.by_name.insert(name.into(), id);
        id
    }

    fn parse_rule(&mut self) -> Result<(), GrammarError> {
        let start = self.pos;
        let name = self.parse_name()?.to_string();
        self.skip_space(false);
        if !self.src[self.pos..].starts_with("::=") {
            return Err(self.expected("'::='"));
        }
        self.pos += 3;
        self.skip_space(true);
        let expr = self.parse_alternates(false)?;
        match self.peek() {
            None => {}
            Some(b'\n') => self.pos += 1,
            Some(b'\r') => self.pos += if self.peek_at(1) == Some(b'\n') { 2 } else { 1 },
            Some(_) => return Err(self.expected("'|', an item, or the end of the line")),
        }
        self.skip_space(true);
        let id = self.rule_id(&name, start);
        let slot = &mut self.rules[id.0 as usize];
        if let Some(first) = slot.defined_at {
            let (at, first) = (self.location(start), self.location(first));
            return Err(GrammarError::DuplicateRule { name, at, first });
        }
        slot.defined_at = Some(start);
        slot.expr = expr;
        Ok(())
    }

    fn parse_alternates(&mut self, nested: bool) -> Result<Expr, GrammarError> {
        let mut alts = vec![self.parse_sequence(nested)?];
        while self.peek() == Some(b'|') {
            self.pos += 1;
            self.skip_space(true);
            alts.push(self.parse_sequence(nested)?);
        }
        Ok(if alts.len() == 1 {
            alts.pop().unwrap_or(Expr::Empty)
        } else {
            Expr::Alt(alts)
        })
    }

    fn parse_sequence(&mut self, nested: bool) -> Result<Expr, GrammarError> {
        let mut items: Vec<Expr> = Vec::new();
        while let Some(b) = self.peek() {
            let item = match b {
                b'"' => self.parse_literal()?,
                b'[' => self.parse_class()?,
                b'<' | b'!' => self.parse_token()?,
                b'.' => {
                    self.pos += 1;
                    Expr::Class {
                        ranges: Vec::new(),
                        negated: true,
                    }
                }
                b'(' => {
                    self.pos += 1;
                    self.skip_space(true);
                    let inner = self.parse_alternates(true)?;
                    if self.peek() != Some(b')') {
                        return Err(self.expected("')'"));
                    }
                    self.pos += 1;
                    inner
                }
                b'*' | b'+' | b'?' | b'{' => {
                    let at = self.pos;
                    let (min, max) = self.parse_repetition()?;
                    let Some(last) = items.pop() else {
                        self.pos = at;
                        return Err(self.expected("an item before the repetition operator"));
                    };
                    self.skip_space(nested);
                    items.push(Expr::Repeat {
                        expr: Box::new(last),
                        min,
                        max,
                    });
                    continue;
                }
                b if is_word(b) => {
                    let at = self.pos;
                    let name = self.parse_name()?.to_string();
                    Expr::Rule(self.rule_id(&name, at))
                }
                _ => break,
            };
            self.skip_space(nested);
            items.push(item);
        }
        Ok(match items.len() {
            0 => Expr::Empty,
            1 => items.pop().unwrap_or(Expr::Empty),
            _ => Expr::Seq(items),
        })
    }

    fn parse_repetition(&mut self) -> Result<(u32, Option<u32>), GrammarError> {
        let b = self.peek();
        self.pos += 1;
        match b {
            Some(b'*') => return Ok((0, None)),
            Some(b'+') => return Ok((1, None)),
            Some(b'?') => return Ok((0, Some(1))),
            _ => {}
        }
        self.skip_space(true);
        let min = self.parse_int()?;
        self.skip_space(true);
        let max = match self.peek() {
            Some(b'}') => Some(min),
            Some(b',') => {
                self.pos += 1;
                self.skip_space(true);
                let max = if self.peek().is_some_and(|b| b.is_ascii_digit()) {
                    Some(self.parse_int()?)
                } else {
                    None
                };
                self.skip_space(true);
                if self.peek() != Some(b'}') {
                    return Err(self.expected("'}'"));
                }
                max
            }
            _ => return Err(self.expected("',' or '}'")),
        };
        self.pos += 1;
        if let Some(max) = max
            && max < min
        {
            return Err(self.bad(
                self.pos - 1,
                format!("repetition {{{min},{max}}} has max < min"),
            ));
        }
        Ok((min, max))
    }

    fn parse_int(&mut self) -> Result<u32, GrammarError> {
        let start = self.pos;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
        if start == self.pos {
            return Err(self.expected("an integer"));
        }
        let value: u64 = self.src[start..self.pos].parse().unwrap_or(u64::MAX);
        let max = u64::from(self.limits.max_repetition);
        if value > max {
            return Err(GrammarError::LimitExceeded {
                limit: "max_repetition",
                value,
                max,
                hint: "use * or + for unbounded repetition",
            });
        }
        Ok(value as u32)
    }

    fn parse_literal(&mut self) -> Result<Expr, GrammarError> {
        self.pos += 1;
        let mut bytes = Vec::new();
        loop {
            match self.peek() {
                None => return Err(self.expected("'\"' closing the literal")),
                Some(b'"') => break,
                Some(_) => {
                    let c = self.parse_char()?;
                    let mut buf = [0u8; 4];
                    bytes.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
        self.pos += 1;
        Ok(if bytes.is_empty() {
            Expr::Empty
        } else {
            Expr::Literal(bytes)
        })
    }

    fn parse_class(&mut self) -> Result<Expr, GrammarError> {
        self.pos += 1;
        let negated = self.peek() == Some(b'^');
        if negated {
            self.pos += 1;
        }
        let mut ranges = Vec::new();
        loop {
            match self.peek() {
                None => return Err(self.expected("']' closing the character class")),
                Some(b']') => break,
                Some(_) => {
                    let lo = self.parse_char()?;
                    let mut hi = lo;
                    if self.peek() == Some(b'-') && !matches!(self.peek_at(1), Some(b']') | None) {
                        self.pos += 1;
                        hi = self.parse_char()?;
                    }
                    ranges.push(CharRange { lo, hi });
                }
            }
        }
        self.pos += 1;
        Ok(Expr::Class { ranges, negated })
    }

    /// One character of a literal or class, escapes decoded (llama.cpp's `parse_char`).
    fn parse_char(&mut self) -> Result<char, GrammarError> {
        let start = self.pos;
        let rest = &self.src[self.pos..];
        let mut chars = rest.chars();
        let Some(c) = chars.next() else {
            return Err(self.expected("a character"));
        };
        if c != '\\' {
            self.pos += c.len_utf8();
            return Ok(c);
        }
        let Some(e) = chars.next() else {
            return Err(self.expected("an escape after '\\'"));
        };
        self.pos += 1 + e.len_utf8();
        let digits = match e {
            'x' => 2,
            'u' => 4,
            'U' => 8,
            't' => return Ok('\t'),
            'r' => return Ok('\r'),
            'n' => return Ok('\n'),
            '\\' | '"' | '[' | ']' | '-' => return Ok(e),
            _ => return Err(self.bad(start, format!("unknown escape '\\{e}'"))),
        };
        let hex = self.src.get(self.pos..self.pos + digits).unwrap_or("");
        if hex.len() != digits || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(self.bad(
                start,
                format!("expecting {digits} hex digits after '\\{e}'"),
            ));
        }
        self.pos += digits;
        let code = u32::from_str_radix(hex, 16).unwrap_or(u32::MAX);
        char::from_u32(code)
            .ok_or_else(|| self.bad(start, format!("U+{code:X} is not a Unicode scalar value")))
    }

    fn parse_token(&mut self) -> Result<Expr, GrammarError> {
        let negated = self.peek() == Some(b'!');
        if negated {
            self.pos += 1;
        }
        if self.peek() != Some(b'<') {
            return Err(self.expected("'<' starting a token"));
        }
        let start = self.pos;
        let token = if self.peek_at(1) == Some(b'[') {
            self.pos += 2;
            let digits = self.pos;
            while self.peek().is_some_and(|b| b.is_ascii_digit()) {
                self.pos += 1;
            }
            let id: u32 = self.src[digits..self.pos].parse().map_err(|_| {
                self.bad(
                    digits,
                    "expecting a token id (a u32) inside '<[...]>'".into(),
                )
            })?;
            if !self.src[self.pos..].starts_with("]>") {
                return Err(self.expected("']>' closing the token id"));
            }
            self.pos += 2;
            TokenRef::Id(id)
        } else {
            let Some(end) = self.src[self.pos..].find('>') else {
                return Err(self.expected("'>' closing the token"));
            };
            self.pos += end + 1;
            TokenRef::Text(self.src[start..self.pos].to_string())
        };
        Ok(Expr::Token { token, negated })
    }
}
