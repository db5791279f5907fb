//! Removing what can never match.
//!
//! Lowering writes [`fail`](super::rules::fail) where a schema accepts nothing (a
//! contradiction, a `false` schema) and may produce rules that only recurse (a required
//! property whose schema is the object itself). This pass finds the *productive* rules
//! (those that derive at least one string), drops the alternatives that are not, and
//! removes rules no longer reachable from the root. An unproductive root means the schema
//! accepts no instance at all.

use std::collections::HashMap;

use crate::ir::{Expr, Grammar, Rule, RuleId};

fn is_fail(e: &Expr) -> bool {
    matches!(e, Expr::Class { ranges, negated: false } if ranges.is_empty())
}

fn productive(e: &Expr, ok: &[bool]) -> bool {
    match e {
        Expr::Class { .. } => !is_fail(e),
        Expr::Empty | Expr::Literal(_) | Expr::Token { .. } => true,
        Expr::Rule(id) => ok[id.0 as usize],
        Expr::Seq(xs) => xs.iter().all(|x| productive(x, ok)),
        Expr::Alt(xs) => xs.iter().any(|x| productive(x, ok)),
        Expr::Repeat { expr, min, .. } => *min == 0 || productive(expr, ok),
    }
}

/// Rewrites `e` without its unproductive parts; `None` if it is unproductive itself.
fn simplify(e: &Expr, ok: &[bool]) -> Option<Expr> {
    if !productive(e, ok) {
        return None;
    }
    Some(match e {
        Expr::Seq(xs) => Expr::Seq(xs.iter().filter_map(|x| simplify(x, ok)).collect()),
        Expr::Alt(xs) => {
            let kept: Vec<Expr> = xs.iter().filter_map(|x| simplify(x, ok)).collect();
            if kept.len() == 1 {
                kept.into_iter().next()?
            } else {
                Expr::Alt(kept)
            }
        }
        Expr::Repeat { expr, min, max } => match simplify(expr, ok) {
            Some(inner) => Expr::Repeat {
                expr: Box::new(inner),
                min: *min,
                max: *max,
            },
            None => Expr::Empty,
        },
        other => other.clone(),
    })
}

fn refs(e: &Expr, out: &mut Vec<RuleId>) {
    match e {
        Expr::Rule(id) => out.push(*id),
        Expr::Seq(xs) | Expr::Alt(xs) => xs.iter().for_each(|x| refs(x, out)),
        Expr::Repeat { expr, .. } => refs(expr, out),
        _ => {}
    }
}

fn renumber(e: &mut Expr, map: &HashMap<RuleId, RuleId>) {
    match e {
        Expr::Rule(id) => {
            if let Some(n) = map.get(id) {
                *id = *n;
            }
        }
        Expr::Seq(xs) | Expr::Alt(xs) => xs.iter_mut().for_each(|x| renumber(x, map)),
        Expr::Repeat { expr, .. } => renumber(expr, map),
        _ => {}
    }
}

/// The grammar without unproductive or unreachable parts; `None` if the root is
/// unproductive.
pub fn prune(g: Grammar) -> Option<Grammar> {
    let root = g.root?;
    let mut ok = vec![false; g.rules.len()];
    // Rules are reserved before the rules they reference are built, so productivity flows
    // from later rules to earlier ones: sweeping from the back settles most grammars in one
    // or two passes.
    loop {
        let mut changed = false;
        for (i, r) in g.rules.iter().enumerate().rev() {
            if !ok[i] && productive(&r.expr, &ok) {
                ok[i] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    if !ok[root.0 as usize] {
        return None;
    }
    let bodies: Vec<Option<Expr>> = g.rules.iter().map(|r| simplify(&r.expr, &ok)).collect();
    // Reachable rules, in first-reached order from the root so the GBNF reads top-down.
    let mut order = vec![root];
    let mut seen = vec![false; g.rules.len()];
    seen[root.0 as usize] = true;
    let mut i = 0;
    while i < order.len() {
        let mut next = Vec::new();
        if let Some(body) = &bodies[order[i].0 as usize] {
            refs(body, &mut next);
        }
        for id in next {
            if !seen[id.0 as usize] {
                seen[id.0 as usize] = true;
                order.push(id);
            }
        }
        i += 1;
    }
    let map: HashMap<RuleId, RuleId> = order
        .iter()
        .enumerate()
        .map(|(n, &old)| (old, RuleId(n as u32)))
        .collect();
    let rules = order
        .iter()
        .map(|&old| {
            let mut expr = bodies[old.0 as usize].clone().unwrap_or(Expr::Empty);
            renumber(&mut expr, &map);
            Rule {
                name: g.rules[old.0 as usize].name.clone(),
                expr,
            }
        })
        .collect();
    Some(Grammar {
        rules,
        root: Some(RuleId(0)),
    })
}
