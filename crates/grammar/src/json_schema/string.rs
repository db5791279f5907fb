//! Strings: length in characters, `pattern` and `format`.
//!
//! A JSON string character is an unescaped character or an escape sequence; `minLength`
//! and `maxLength` count them, which is the specification's count of code points except
//! for a surrogate pair written as two `\u` escapes (counted as two; such strings are then
//! narrowed away, never wrongly accepted beyond the bound of raw characters).
//!
//! A grammar cannot intersect a pattern with a length bound or with a format directly, so
//! when both are present the pattern (or format) is enforced and the length is reported
//! as a warning.

use super::constraints::Constraints;
use super::lower::Compiler;
use super::rules::{lit, repeat, seq};
use super::{SchemaError, format};
use crate::ir::Expr;
use crate::regex::{self, Encoding};

pub fn lower(c: &mut Compiler, k: &Constraints) -> Result<Expr, SchemaError> {
    let max_rep = c.opts.limits.max_repetition;
    let (min, min_ptr) = (k.min_len.0, k.min_len.1.clone());
    let max = k.max_len.clone();
    if let Some((m, ptr)) = &max
        && *m < min
    {
        return Ok(c.empty(ptr, "maxLength is below minLength"));
    }
    let mut body: Option<Expr> = None;
    let mut length_done = false;
    for (ptr, pattern) in &k.patterns {
        if body.is_some() {
            c.warn(ptr, "pattern", "only one pattern per string is enforced");
            continue;
        }
        let regex_err = |source| SchemaError::Regex {
            pointer: ptr.clone(),
            source,
        };
        if min > 0 || max.is_some() {
            // Patterns shaped like `^[a-z][a-z0-9]*$` take the length bound exactly.
            let max_len = max.as_ref().map(|(m, _)| *m);
            let e =
                regex::compile_with_length(pattern, Encoding::JsonString, max_rep, min, max_len)
                    .map_err(regex_err)?;
            if let Some(e) = e {
                body = Some(e);
                length_done = true;
                continue;
            }
        }
        let hint = format!("{ptr}-pattern");
        body = Some(
            regex::compile_in(pattern, Encoding::JsonString, max_rep, &mut c.rules, &hint)
                .map_err(regex_err)?,
        );
    }
    for (ptr, name) in &k.formats {
        if body.is_some() {
            c.warn(
                ptr,
                "format",
                "not enforced beside a pattern or another format",
            );
            continue;
        }
        match format::pattern(name) {
            Some(p) => {
                c.narrow(
                    ptr,
                    "format",
                    format!("'{name}' asserted (the specification makes format an annotation by default)"),
                );
                let e = regex::compile(&p, Encoding::JsonString, max_rep).map_err(|source| {
                    SchemaError::Regex {
                        pointer: ptr.clone(),
                        source,
                    }
                })?;
                body = Some(e);
            }
            None => c.warn(
                ptr,
                "format",
                format!("format '{name}' is not known; not enforced"),
            ),
        }
    }
    let has_length = min > 0 || max.is_some();
    if !k.not_strings.is_empty() {
        if body.is_none() && !has_length {
            // Any string but the excluded ones (a `not: {enum: [...]}`).
            return Ok(super::object::not_in(c, "not-string", &k.not_strings));
        }
        c.warn(
            &min_ptr,
            "not",
            "excluded strings are not enforced beside a pattern, format or length",
        );
    }
    if let Some(body) = body {
        if has_length && !length_done {
            if min > 0 {
                c.warn(
                    &min_ptr,
                    "minLength",
                    "not enforced beside a pattern or format",
                );
            }
            if let Some((_, ptr)) = &max {
                c.warn(ptr, "maxLength", "not enforced beside a pattern or format");
            }
        }
        let inner = c.rules.add("string-pattern", body);
        return Ok(seq(vec![lit("\""), Expr::Rule(inner), lit("\"")]));
    }
    if !has_length {
        return Ok(c.any_string());
    }
    if min > u64::from(max_rep) {
        return Err(SchemaError::LimitExceeded {
            pointer: min_ptr,
            what: "minLength",
            value: min,
            max: u64::from(max_rep),
        });
    }
    let max = match max {
        Some((m, ptr)) if m > u64::from(max_rep) => {
            c.warn(
                &ptr,
                "maxLength",
                format!("above the repetition limit {max_rep}; not enforced"),
            );
            None
        }
        Some((m, _)) => Some(m as u32),
        None => None,
    };
    let ch = c.shared("char", |_| regex::json_char());
    Ok(seq(vec![lit("\""), repeat(ch, min as u32, max), lit("\"")]))
}
