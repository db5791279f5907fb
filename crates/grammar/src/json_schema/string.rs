//! Strings: length in characters, `pattern`, `format` and excluded values (`not`).
//!
//! A JSON string character is an unescaped character or an escape sequence; `minLength`
//! and `maxLength` count them, which is the specification's count of code points except
//! for a surrogate pair written as two `\u` escapes (counted as two; such strings are then
//! narrowed away, never wrongly accepted beyond the bound of raw characters).
//!
//! A grammar cannot intersect two regular languages directly, so a pattern beside a format,
//! another pattern, a length bound or excluded values is written as one automaton of them
//! all ([`regex::conjunction`]), a rule per state. Where that automaton would pass its
//! limit, the first pattern (or format) alone is enforced and the rest reported as
//! warnings.

use super::constraints::Constraints;
use super::lower::Compiler;
use super::rules::{alt, lit, repeat, rule, seq};
use super::{SchemaError, format};
use crate::ir::Expr;
use crate::regex::{self, ConjunctionError, Encoding, RegexError};

/// The longest `maxLength` enforced where it is beyond the repetition limit (a rule per
/// limit's worth of characters, once per schema per bound, about a matcher state per
/// character). JSON Schema documents use 4,096, 32,767 and 65,535 most.
const MAX_LONG_STRING: u64 = 65_536;

/// A regular language the string must be in: where it is written, which keyword, the
/// pattern.
struct Regular {
    ptr: String,
    keyword: &'static str,
    pattern: String,
}

pub fn lower(c: &mut Compiler, k: &Constraints) -> Result<Expr, SchemaError> {
    let max_rep = c.opts.limits.max_repetition;
    let (min, min_ptr) = (k.min_len.0, k.min_len.1.clone());
    let max = k.max_len.clone();
    if let Some((m, ptr)) = &max
        && *m < min
    {
        return Ok(c.empty(ptr, "maxLength is below minLength"));
    }
    let mut regular: Vec<Regular> = k
        .patterns
        .iter()
        .map(|(ptr, p)| Regular {
            ptr: ptr.clone(),
            keyword: "pattern",
            pattern: (*p).to_owned(),
        })
        .collect();
    for (ptr, name) in &k.formats {
        match format::pattern(name) {
            Some(pattern) => {
                c.narrow(
                    ptr,
                    "format",
                    format!("'{name}' asserted (the specification makes format an annotation by default)"),
                );
                regular.push(Regular {
                    ptr: ptr.clone(),
                    keyword: "format",
                    pattern,
                });
            }
            None => c.warn(
                ptr,
                "format",
                format!("format '{name}' is not known; not enforced"),
            ),
        }
    }
    let has_length = min > 0 || max.is_some();
    let excluded = &k.not_strings;
    let body = match regular.as_slice() {
        [] if excluded.is_empty() && !has_length => return Ok(c.any_string()),
        [] if excluded.is_empty() => return Ok(quoted(length_only(c, min, min_ptr, max)?)),
        // Any string but the excluded ones (a `not: {enum: [...]}`).
        [] if !has_length => return Ok(super::object::not_in(c, "not-string", excluded)),
        [one] if excluded.is_empty() && !has_length => single(c, one)?,
        // Patterns shaped like `^[a-z][a-z0-9]*$` take the length bound exactly.
        [one] if excluded.is_empty() => {
            let max_len = max.as_ref().map(|(m, _)| *m);
            match regex::compile_with_length(
                &one.pattern,
                Encoding::JsonString,
                max_rep,
                min,
                max_len,
            )
            .map_err(|source| regex_error(one, source))?
            {
                Some(e) => e,
                None => together(c, &regular, k, max.as_ref())?,
            }
        }
        _ => together(c, &regular, k, max.as_ref())?,
    };
    let inner = c.rules.add("string-pattern", body);
    Ok(quoted(Expr::Rule(inner)))
}

fn quoted(inside: Expr) -> Expr {
    seq(vec![lit("\""), inside, lit("\"")])
}

fn regex_error(r: &Regular, source: RegexError) -> SchemaError {
    SchemaError::Regex {
        pointer: r.ptr.clone(),
        source,
    }
}

/// One pattern or format alone.
fn single(c: &mut Compiler, r: &Regular) -> Result<Expr, SchemaError> {
    let hint = format!("{}-{}", r.ptr, r.keyword);
    let max_rep = c.opts.limits.max_repetition;
    regex::compile_in(
        &r.pattern,
        Encoding::JsonString,
        max_rep,
        &mut c.rules,
        &hint,
    )
    .map_err(|source| regex_error(r, source))
}

/// The patterns, formats, length and excluded values as one automaton; over its limit, the
/// first pattern alone, the rest reported.
fn together(
    c: &mut Compiler,
    regular: &[Regular],
    k: &Constraints,
    max: Option<&(u64, String)>,
) -> Result<Expr, SchemaError> {
    let (min, min_ptr) = (k.min_len.0, &k.min_len.1);
    let patterns: Vec<&str> = regular.iter().map(|r| r.pattern.as_str()).collect();
    let hint = regular.first().map_or_else(
        || format!("{min_ptr}-string"),
        |r| format!("{}-{}", r.ptr, r.keyword),
    );
    let language = regex::StringLanguage {
        patterns: &patterns,
        excluded: &k.not_strings,
        min,
        max: max.map(|(m, _)| *m),
    };
    let why = match c.string_automaton(&language, &hint) {
        Ok(Some(e)) => return Ok(e),
        Ok(None) => {
            let at = regular.first().map_or(min_ptr, |r| &r.ptr);
            return Ok(c.empty(
                at,
                "no string meets the pattern, format, length and `not` together",
            ));
        }
        Err(ConjunctionError::Pattern(i, source)) => return Err(regex_error(&regular[i], source)),
        Err(ConjunctionError::TooLarge(e)) => e.to_string(),
    };
    // Too large together: the first pattern alone.
    let Some((first, rest)) = regular.split_first() else {
        c.warn(
            min_ptr,
            "not",
            format!("excluded strings beside a length not enforced ({why})"),
        );
        return length_only(c, min, min_ptr.clone(), max.cloned());
    };
    let body = single(c, first)?;
    for r in rest {
        c.warn(
            &r.ptr,
            r.keyword,
            format!("not enforced beside another pattern or format ({why})"),
        );
    }
    if min > 0 {
        c.warn(
            min_ptr,
            "minLength",
            format!("not enforced beside a pattern or format ({why})"),
        );
    }
    if let Some((_, ptr)) = max {
        c.warn(
            ptr,
            "maxLength",
            format!("not enforced beside a pattern or format ({why})"),
        );
    }
    if !k.not_strings.is_empty() {
        c.warn(
            min_ptr,
            "not",
            format!("excluded strings not enforced beside a pattern or format ({why})"),
        );
    }
    Ok(body)
}

/// The inside of a string of `min` to `max` characters.
fn length_only(
    c: &mut Compiler,
    min: u64,
    min_ptr: String,
    max: Option<(u64, String)>,
) -> Result<Expr, SchemaError> {
    let max_rep = c.opts.limits.max_repetition;
    if min > u64::from(max_rep) {
        return Err(SchemaError::LimitExceeded {
            pointer: min_ptr,
            what: "minLength",
            value: min,
            max: u64::from(max_rep),
        });
    }
    let ch = c.shared("char", |_| regex::json_char());
    let min = min as u32;
    Ok(match max {
        None => repeat(ch, min, None),
        Some((m, _)) if m <= u64::from(max_rep) => repeat(ch, min, Some(m as u32)),
        Some((m, _)) if m <= MAX_LONG_STRING && max_rep > 0 => {
            let rest = up_to(c, ch.clone(), m - u64::from(min));
            seq(vec![repeat(ch, min, Some(min)), rest])
        }
        Some((_, ptr)) => {
            c.warn(
                &ptr,
                "maxLength",
                format!("above {MAX_LONG_STRING}; not enforced"),
            );
            repeat(ch, min, None)
        }
    })
}

/// Up to `n` characters (`ch`), `n` beyond the repetition limit `L` of a single
/// repetition: `up-to-n ::= ch{0,L} | exactly-L up-to-(n-L)`, a rule per `L` characters,
/// each defined once per schema, so that a bound repeated over many properties costs once.
fn up_to(c: &mut Compiler, ch: Expr, n: u64) -> Expr {
    let l = c.opts.limits.max_repetition;
    if n <= u64::from(l) {
        return repeat(ch, 0, Some(n as u32));
    }
    if let Some(&id) = c.long_strings.get(&n) {
        return rule(id);
    }
    let id = c.rules.reserve(&format!("string-up-to-{n}"));
    c.long_strings.insert(n, id);
    let exactly = {
        let ch = ch.clone();
        c.shared("string-exactly-limit", move |_| repeat(ch, l, Some(l)))
    };
    let rest = up_to(c, ch.clone(), n - u64::from(l));
    let body = alt(vec![repeat(ch, 0, Some(l)), seq(vec![exactly, rest])]);
    c.rules.define(id, body);
    rule(id)
}
