//! Arrays: per-position schemas (`prefixItems`, array-form `items`), the schema of the
//! rest, counts, and `contains`.
//!
//! Position `i` must satisfy, for each schema object of the conjunction, its `i`-th prefix
//! schema if it has one, else its schema for the rest. Positions past every prefix share
//! one schema, repeated within the count bounds.
//!
//! `contains` with `minContains` = m is exact when nothing else bounds the length: the
//! elements are written as `X* (C X*){m}` where `C` is an element that also matches the
//! `contains` schema; `maxContains` and `uniqueItems` cannot be expressed and warn.

use super::SchemaError;
use super::constraints::Constraints;
use super::flatten::Conj;
use super::lower::Compiler;
use super::rules::{alt_opt, fail, lit, opt, repeat, seq, star};
use super::whitespace::Slot;
use crate::ir::Expr;

pub fn lower(c: &mut Compiler, here: &str, k: &Constraints) -> Result<Expr, SchemaError> {
    let max_rep = u64::from(c.opts.limits.max_repetition);
    let prefix_len = k.arrs.iter().map(|a| a.prefix.len()).max().unwrap_or(0);
    let min = k.min_items;
    let mut max = k.max_items;
    if let Some(m) = max
        && m < min
    {
        return Ok(c.empty(here, "maxItems is below minItems"));
    }
    if let Some(u) = &k.unique
        && max.is_none_or(|m| m > 1)
    {
        c.warn(
            u,
            "uniqueItems",
            "not enforced (a grammar cannot compare elements)",
        );
    }
    if min > max_rep {
        return Err(SchemaError::LimitExceeded {
            pointer: here.to_owned(),
            what: "minItems",
            value: min,
            max: max_rep,
        });
    }
    if let Some(m) = max
        && m > max_rep
    {
        c.warn(
            here,
            "maxItems",
            format!("above the repetition limit {max_rep}; not enforced"),
        );
        max = None;
    }
    let position = |c: &mut Compiler, i: Option<usize>| -> Result<Conj, SchemaError> {
        let mut conj = Conj::default();
        for part in &k.arrs {
            let ptr = match i {
                Some(i) if i < part.prefix.len() => Some(&part.prefix[i]),
                _ => part.rest.as_ref(),
            };
            if let Some(ptr) = ptr {
                c.res.flatten(ptr, &mut conj)?;
            }
        }
        Ok(conj)
    };
    let mut elems = Vec::with_capacity(prefix_len);
    for i in 0..prefix_len {
        let conj = position(c, Some(i))?;
        elems.push(c.lower(conj)?);
    }
    let rest_conj = position(c, None)?;
    let contains = k.contains.first().cloned();
    for (ptr, _, _) in k.contains.iter().skip(1) {
        c.warn(
            ptr.trim_end_matches("/contains"),
            "contains",
            "only one contains per array is enforced",
        );
    }
    let rest_conj_for_contains = rest_conj.clone();
    let rest =
        if rest_conj.own.is_empty() && rest_conj.groups.is_empty() && rest_conj.never.is_none() {
            c.any_value()
        } else {
            c.lower(rest_conj)?
        };
    let (open, close_empty, close) = (
        lit("["),
        seq(vec![c.ws(Slot::Tight), lit("]")]),
        seq(vec![c.ws(Slot::Break), lit("]")]),
    );
    let brk = c.ws(Slot::Break);
    let comma = c.comma();

    if let Some((cptr, cmin, cmax)) = contains {
        let owner = cptr.trim_end_matches("/contains").to_owned();
        if cmax.is_some() {
            c.warn(&owner, "maxContains", "not enforced");
        }
        if cmin > 0 {
            if prefix_len > 0 || max.is_some() || cmin > max_rep {
                c.warn(
                    &owner,
                    "contains",
                    "not enforced beside prefixItems or maxItems",
                );
            } else {
                let mut cconj = rest_conj_for_contains;
                c.res.flatten(&cptr, &mut cconj)?;
                let hit = c.lower(cconj)?;
                // X* C (X* C){m-1} X*, with commas between elements.
                let x_then_comma = star(seq(vec![rest.clone(), comma.clone()]));
                let comma_x = star(seq(vec![comma.clone(), rest.clone()]));
                let one = seq(vec![x_then_comma.clone(), hit.clone()]);
                let more = repeat(
                    seq(vec![comma.clone(), x_then_comma, hit]),
                    cmin as u32 - 1,
                    Some(cmin as u32 - 1),
                );
                let items = seq(vec![one, more, comma_x]);
                if min > cmin {
                    c.warn(&owner, "minItems", "not enforced beside contains");
                }
                return Ok(seq(vec![open, brk, items, close]));
            }
        }
    }

    // Elements from position `from` on, each preceded by a comma.
    let min_u = min as usize;
    let max_u = max.map(|m| m as usize);
    let mut tail = {
        let start = prefix_len.max(1);
        let lo = min_u.saturating_sub(start) as u32;
        let hi = max_u.map(|m| m.saturating_sub(start) as u32);
        if max_u.is_some_and(|m| m < start) {
            Expr::Empty
        } else {
            repeat(seq(vec![comma.clone(), rest.clone()]), lo, hi)
        }
    };
    // Prefix positions 1.. from the back: each is optional once `minItems` is reached.
    for i in (1..prefix_len).rev() {
        if max_u.is_some_and(|m| i >= m) {
            tail = Expr::Empty;
            continue;
        }
        let step = seq(vec![comma.clone(), elems[i].clone(), tail]);
        tail = if i >= min_u { opt(step) } else { step };
    }
    let first = if prefix_len > 0 {
        elems[0].clone()
    } else {
        rest
    };
    let mut alts = Vec::new();
    if min == 0 {
        alts.push(seq(vec![open.clone(), close_empty]));
    }
    if max != Some(0) {
        alts.push(seq(vec![open, brk, first, tail, close]));
    }
    Ok(alt_opt(alts).unwrap_or_else(fail))
}
