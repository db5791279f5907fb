//! `multipleOf`: the multiples of a step within bounds, listed when few, or matched by
//! remainder automata (rule `r` matches the digit strings that bring remainder `r` to 0)
//! when a side is unbounded.

use super::number::{Bound, Dec, digit_range};
use super::rules::{alt, lit, seq};
use crate::ir::Expr;

/// Non-negative integer multiples of `k` (k ≥ 2), as a remainder automaton: rule `r`
/// matches the digit strings that bring remainder `r` to 0. Returns the rule bodies
/// (index = remainder) and the start expression over them; the caller names the rules.
pub fn multiples_automaton(k: u32) -> Vec<Vec<(u8, u8, u32)>> {
    (0..k)
        .map(|r| {
            let mut edges: Vec<(u8, u8, u32)> = Vec::new();
            for d in 0..10u32 {
                let to = (r * 10 + d) % k;
                match edges.last_mut() {
                    Some((_, hi, t)) if *t == to && u32::from(*hi) + 1 == d => *hi = d as u8,
                    _ => edges.push((d as u8, d as u8, to)),
                }
            }
            edges
        })
        .collect()
}

/// The multiples of `m · 10^-e` within the bounds, as decimal text, if at most `max`.
pub(super) fn enumerate_multiples(
    lo: &Bound,
    hi: &Bound,
    m: i128,
    e: u32,
    max: u32,
) -> Option<Vec<String>> {
    let scale = |d: &Dec| -> Option<i128> {
        // d · 10^e must be exact to compare with integer multiples; round outward.
        let (dm, de) = d.scaled()?;
        if de > e {
            return None;
        }
        dm.checked_mul(10i128.checked_pow(e - de)?)
    };
    let (a, b) = (scale(&lo.value)?, scale(&hi.value)?);
    let first = a.div_euclid(m) + i128::from(a.rem_euclid(m) != 0 || lo.exclusive);
    let last = b.div_euclid(m) - i128::from(b.rem_euclid(m) == 0 && hi.exclusive);
    if last < first {
        return Some(Vec::new());
    }
    if last - first >= i128::from(max) {
        return None;
    }
    Some((first..=last).map(|q| format_scaled(q * m, e)).collect())
}

fn format_scaled(v: i128, e: u32) -> String {
    let neg = v < 0;
    let digits = v.unsigned_abs().to_string();
    let e = e as usize;
    let body = if e == 0 {
        digits
    } else {
        let padded = format!("{digits:0>width$}", width = e + 1);
        let (i, f) = padded.split_at(padded.len() - e);
        let f = f.trim_end_matches('0');
        if f.is_empty() {
            i.to_string()
        } else {
            format!("{i}.{f}")
        }
    };
    if neg { format!("-{body}") } else { body }
}

/// Integer multiples of `k` at or above `lo` (or at or below `hi`; one side open), or
/// `None` when the bounded side has too many values to enumerate.
pub(super) fn integer_multiples(
    c: &mut super::lower::Compiler,
    k: u32,
    lo: Option<i128>,
    hi: Option<i128>,
) -> Option<Expr> {
    let max = c.opts.limits.max_enumerated;
    let mut auto = Multiples::new(c, k);
    let literals = |from: i128, to: i128| -> Option<Vec<Expr>> {
        let kk = i128::from(k);
        let first = from.div_euclid(kk) + i128::from(from.rem_euclid(kk) != 0);
        let last = to.div_euclid(kk);
        if last - first >= i128::from(max) {
            return None;
        }
        Some((first..=last).map(|q| lit(&(q * kk).to_string())).collect())
    };
    let mut alts = Vec::new();
    match (lo, hi) {
        (None, None) => {
            alts.extend([
                lit("0"),
                auto.positive(c, 1),
                seq(vec![lit("-"), auto.positive(c, 1)]),
            ]);
        }
        (Some(l), None) if l <= 0 => {
            alts.extend(literals(l, -1)?);
            alts.extend([lit("0"), auto.positive(c, 1)]);
        }
        (Some(l), None) => alts.push(auto.at_least(c, l as u128, &literals)?),
        (None, Some(h)) if h >= 0 => {
            alts.extend(literals(0, h)?);
            alts.push(seq(vec![lit("-"), auto.positive(c, 1)]));
        }
        (None, Some(h)) => {
            // x <= h < 0: "-" and a multiple of at least -h.
            let neg = |from: i128, to: i128| literals(from, to);
            alts.push(seq(vec![
                lit("-"),
                auto.at_least(c, h.unsigned_abs(), &neg)?,
            ]));
        }
        (Some(_), Some(_)) => return None,
    }
    Some(alt(alts))
}

/// Remainder automata for multiples of `k`: rule `r` matches the digit strings that take
/// remainder `r` to 0.
struct Multiples {
    k: u32,
    rem: Vec<crate::ir::RuleId>,
}

impl Multiples {
    fn new(c: &mut super::lower::Compiler, k: u32) -> Self {
        let auto = multiples_automaton(k);
        let rem: Vec<_> = (0..k)
            .map(|r| c.rules.reserve(&format!("multiple-of-{k}-r{r}")))
            .collect();
        for (r, edges) in auto.iter().enumerate() {
            let mut alts: Vec<Expr> = edges
                .iter()
                .map(|&(a, b, to)| {
                    seq(vec![
                        digit_range(a + b'0', b + b'0'),
                        Expr::Rule(rem[to as usize]),
                    ])
                })
                .collect();
            if r == 0 {
                alts.insert(0, Expr::Empty);
            }
            c.rules.define(rem[r], alt(alts));
        }
        Multiples { k, rem }
    }

    /// Positive multiples with at least `min_digits` digits: a non-zero first digit, then
    /// `min_digits - 1` digits tracked by remainder, then any digits reaching remainder 0.
    fn positive(&mut self, c: &mut super::lower::Compiler, min_digits: u32) -> Expr {
        let k = self.k;
        // chain[j][r]: exactly j more digits are required, current remainder r.
        let mut level: Vec<Expr> = self.rem.iter().map(|&id| Expr::Rule(id)).collect();
        for j in 1..min_digits {
            let next: Vec<Expr> = (0..k)
                .map(|r| {
                    let body = alt((0..10u32)
                        .map(|d| {
                            seq(vec![
                                digit_range(d as u8 + b'0', d as u8 + b'0'),
                                level[((r * 10 + d) % k) as usize].clone(),
                            ])
                        })
                        .collect());
                    Expr::Rule(c.rules.add(&format!("multiple-of-{k}-len{j}-r{r}"), body))
                })
                .collect();
            level = next;
        }
        let body = alt((1..=9u32)
            .map(|d| {
                seq(vec![
                    digit_range(d as u8 + b'0', d as u8 + b'0'),
                    level[(d % k) as usize].clone(),
                ])
            })
            .collect());
        Expr::Rule(c.rules.add(&format!("positive-multiple-of-{k}"), body))
    }

    /// Multiples of at least `l` (> 0): those with as many digits as `l`, listed, and any
    /// with more digits.
    fn at_least(
        &mut self,
        c: &mut super::lower::Compiler,
        l: u128,
        literals: &dyn Fn(i128, i128) -> Option<Vec<Expr>>,
    ) -> Option<Expr> {
        let digits = l.to_string().len() as u32;
        if u64::from(self.k) * u64::from(digits) > 20_000 {
            return None;
        }
        let top = 10i128.checked_pow(digits)? - 1;
        let mut alts = literals(i128::try_from(l).ok()?, top)?;
        alts.push(self.positive(c, digits + 1));
        Some(alt(alts))
    }
}
