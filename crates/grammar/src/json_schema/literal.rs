//! `const` and `enum` values as grammar literals.
//!
//! A value is written as `serde_json` writes it compactly, with the whitespace policy's
//! slots between tokens and object members in the value's own order. Numbers match their
//! value in any decimal spelling (`1`, `1.0`), as JSON Schema compares numbers by value.

use serde_json::Value;

use super::SchemaError;
use super::lower::Compiler;
use super::number::{self, Bound, Dec};
use super::rules::{lit, seq};
use super::whitespace::Slot;
use crate::ir::Expr;

pub fn value(c: &mut Compiler, v: &Value, ptr: &str) -> Result<Expr, SchemaError> {
    Ok(match v {
        Value::Null | Value::Bool(_) | Value::String(_) => lit(&v.to_string()),
        Value::Number(n) => {
            let d = Dec::from_number(n).ok_or_else(|| SchemaError::NotASchema {
                pointer: ptr.to_owned(),
                message: "a number that is not finite".into(),
            })?;
            check_digits(c, &d, ptr)?;
            let b = Bound {
                value: d,
                exclusive: false,
            };
            number::range(Some(&b), Some(&b), None).unwrap_or_else(|| lit(&v.to_string()))
        }
        Value::Array(items) => {
            if items.is_empty() {
                let t = c.ws(Slot::Tight);
                return Ok(seq(vec![lit("["), t, lit("]")]));
            }
            let b = c.ws(Slot::Break);
            let mut parts = vec![lit("["), b.clone()];
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    parts.push(c.comma());
                }
                parts.push(value(c, item, ptr)?);
            }
            parts.extend([b, lit("]")]);
            seq(parts)
        }
        Value::Object(map) => {
            if map.is_empty() {
                let t = c.ws(Slot::Tight);
                return Ok(seq(vec![lit("{"), t, lit("}")]));
            }
            let (b, t, col) = (c.ws(Slot::Break), c.ws(Slot::Tight), c.ws(Slot::Colon));
            let mut parts = vec![lit("{"), b.clone()];
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    parts.push(c.comma());
                }
                parts.extend([
                    lit(&Value::String(k.clone()).to_string()),
                    t.clone(),
                    lit(":"),
                    col.clone(),
                ]);
                parts.push(value(c, item, ptr)?);
            }
            parts.extend([b, lit("}")]);
            seq(parts)
        }
    })
}

/// Numbers with huge exponents (`1e300`) spell out hundreds of digits; refuse beyond the
/// limit instead of building enormous literals.
pub fn check_digits(c: &Compiler, d: &Dec, ptr: &str) -> Result<(), SchemaError> {
    let max = c.opts.limits.max_digits;
    if d.digits() > max {
        return Err(SchemaError::LimitExceeded {
            pointer: ptr.to_owned(),
            what: "the number of digits of a number",
            value: d.digits() as u64,
            max: max as u64,
        });
    }
    Ok(())
}
