//! Numbers: exact decimal bounds and `multipleOf`, as digit-range grammars.
//!
//! Bounds are compared on the decimal text, digit by digit, so `minimum: 0.1` is exact
//! (no binary floating point anywhere). A bounded number is written without an exponent;
//! an integer without a fraction or exponent; `-0` is not generated.
//!
//! The constructions: [`uint_range`] matches the integers in `[lo, hi]` (no leading
//! zeros) by splitting on digit count and then on the first differing digit;
//! [`fraction`] matches the digits after the point given bounds on `0.ddd…`;
//! [`nonneg`] combines the two for a non-negative range and [`range`] adds the sign.

use std::cmp::Ordering;

use serde_json::Number;

use crate::ir::Expr;

use super::rules::{alt, alt_opt, class, lit, opt, plus, repeat, seq, star};

/// An exact decimal: sign, integer digits (no leading zeros; empty for zero) and fraction
/// digits (no trailing zeros). Digits are ASCII.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dec {
    pub neg: bool,
    pub int: Vec<u8>,
    pub frac: Vec<u8>,
}

impl Dec {
    pub fn zero() -> Self {
        Dec {
            neg: false,
            int: Vec::new(),
            frac: Vec::new(),
        }
    }

    /// The exact decimal of a JSON number as `serde_json` holds it (integers exactly;
    /// floats by their shortest round-trip decimal, which is what the schema author wrote).
    pub fn from_number(n: &Number) -> Option<Self> {
        let text = if let Some(i) = n.as_i64() {
            i.to_string()
        } else if let Some(u) = n.as_u64() {
            u.to_string()
        } else {
            let f = n.as_f64()?;
            if !f.is_finite() {
                return None;
            }
            format!("{f}")
        };
        Self::parse(&text)
    }

    /// Parses `-?digits(.digits)?` (no exponent).
    pub fn parse(text: &str) -> Option<Self> {
        let (neg, body) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (int, frac) = body.split_once('.').unwrap_or((body, ""));
        if int.is_empty()
            || !int.bytes().all(|b| b.is_ascii_digit())
            || !frac.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let int: Vec<u8> = int.trim_start_matches('0').bytes().collect();
        let frac: Vec<u8> = frac.trim_end_matches('0').bytes().collect();
        let is_zero = int.is_empty() && frac.is_empty();
        Some(Dec {
            neg: neg && !is_zero,
            int,
            frac,
        })
    }

    pub fn is_zero(&self) -> bool {
        self.int.is_empty() && self.frac.is_empty()
    }

    pub fn is_integer(&self) -> bool {
        self.frac.is_empty()
    }

    pub fn digits(&self) -> usize {
        self.int.len() + self.frac.len()
    }

    pub fn negate(&self) -> Self {
        Dec {
            neg: !self.neg && !self.is_zero(),
            ..self.clone()
        }
    }

    /// The integer digits as text (`"0"` for zero).
    pub fn int_text(&self) -> Vec<u8> {
        if self.int.is_empty() {
            b"0".to_vec()
        } else {
            self.int.clone()
        }
    }

    /// Smallest integer ≥ self (or > self when `strict`).
    pub fn ceil(&self, strict: bool) -> Dec {
        if self.is_integer() {
            return if strict { self.add_one() } else { self.clone() };
        }
        let trunc = Dec {
            neg: self.neg && !self.int.is_empty(),
            int: self.int.clone(),
            frac: Vec::new(),
        };
        // Truncation rounds negatives up already.
        if self.neg { trunc } else { trunc.add_one() }
    }

    /// Largest integer ≤ self (or < self when `strict`).
    pub fn floor(&self, strict: bool) -> Dec {
        self.negate().ceil(strict).negate()
    }

    /// self + 1 for an integer.
    fn add_one(&self) -> Dec {
        if self.neg {
            let mag = Dec {
                neg: false,
                ..self.clone()
            };
            return mag.sub_one_mag().negate();
        }
        let mut digits = self.int_text();
        let mut i = digits.len();
        loop {
            if i == 0 {
                digits.insert(0, b'1');
                break;
            }
            i -= 1;
            if digits[i] == b'9' {
                digits[i] = b'0';
            } else {
                digits[i] += 1;
                break;
            }
        }
        Dec::parse(std::str::from_utf8(&digits).unwrap_or("0")).unwrap_or_else(Dec::zero)
    }

    /// |self| − 1 for a positive integer.
    fn sub_one_mag(&self) -> Dec {
        let mut digits = self.int_text();
        let mut i = digits.len();
        while i > 0 {
            i -= 1;
            if digits[i] == b'0' {
                digits[i] = b'9';
            } else {
                digits[i] -= 1;
                break;
            }
        }
        Dec::parse(std::str::from_utf8(&digits).unwrap_or("0")).unwrap_or_else(Dec::zero)
    }

    /// `(m, e)` with self = m · 10^(−e), m an integer.
    pub fn scaled(&self) -> Option<(i128, u32)> {
        let mut digits = self.int.clone();
        digits.extend_from_slice(&self.frac);
        if digits.len() > 36 {
            return None;
        }
        let text = if digits.is_empty() {
            "0".to_string()
        } else {
            String::from_utf8(digits).ok()?
        };
        let m: i128 = text.parse().ok()?;
        Some((if self.neg { -m } else { m }, self.frac.len() as u32))
    }
}

impl Ord for Dec {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.neg, other.neg) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => cmp_mag(self, other),
            (true, true) => cmp_mag(other, self),
        }
    }
}

impl PartialOrd for Dec {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

fn cmp_mag(a: &Dec, b: &Dec) -> Ordering {
    a.int
        .len()
        .cmp(&b.int.len())
        .then_with(|| a.int.cmp(&b.int))
        .then_with(|| a.frac.cmp(&b.frac))
}

/// One side of a range: the value and whether it is excluded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bound {
    pub value: Dec,
    pub exclusive: bool,
}

impl Bound {
    /// The tighter of two lower bounds.
    pub fn max_lower(a: Option<Bound>, b: Bound) -> Bound {
        match a {
            None => b,
            Some(a) => match a.value.cmp(&b.value) {
                Ordering::Greater => a,
                Ordering::Less => b,
                Ordering::Equal => Bound {
                    value: a.value,
                    exclusive: a.exclusive || b.exclusive,
                },
            },
        }
    }

    /// The tighter of two upper bounds.
    pub fn min_upper(a: Option<Bound>, b: Bound) -> Bound {
        match a {
            None => b,
            Some(a) => match a.value.cmp(&b.value) {
                Ordering::Less => a,
                Ordering::Greater => b,
                Ordering::Equal => Bound {
                    value: a.value,
                    exclusive: a.exclusive || b.exclusive,
                },
            },
        }
    }
}

fn digit() -> Expr {
    class(&[('0', '9')])
}

pub(super) fn digit_range(lo: u8, hi: u8) -> Expr {
    if lo == hi {
        lit(&(lo as char).to_string())
    } else {
        class(&[(lo as char, hi as char)])
    }
}

/// Digit strings of one length in `[lo, hi]` (lexicographic = numeric for equal lengths).
fn fixed_len(lo: &[u8], hi: &[u8]) -> Expr {
    if lo.is_empty() {
        return Expr::Empty;
    }
    let n = lo.len() as u32;
    if lo.iter().all(|&d| d == b'0') && hi.iter().all(|&d| d == b'9') {
        return repeat(digit(), n, Some(n));
    }
    let (a, b) = (lo[0], hi[0]);
    if a == b {
        return seq(vec![digit_range(a, a), fixed_len(&lo[1..], &hi[1..])]);
    }
    let nines = vec![b'9'; lo.len() - 1];
    let zeros = vec![b'0'; lo.len() - 1];
    let lo_rest_free = lo[1..].iter().all(|&d| d == b'0');
    let hi_rest_free = hi[1..].iter().all(|&d| d == b'9');
    let mid_lo = if lo_rest_free { a } else { a + 1 };
    let mid_hi = if hi_rest_free { b } else { b - 1 };
    let mut parts = Vec::new();
    if !lo_rest_free {
        parts.push(seq(vec![digit_range(a, a), fixed_len(&lo[1..], &nines)]));
    }
    if mid_lo <= mid_hi {
        parts.push(seq(vec![
            digit_range(mid_lo, mid_hi),
            repeat(digit(), n - 1, Some(n - 1)),
        ]));
    }
    if !hi_rest_free {
        parts.push(seq(vec![digit_range(b, b), fixed_len(&zeros, &hi[1..])]));
    }
    alt(parts)
}

/// Unsigned integers (no leading zeros) in `[lo, hi]`; `hi: None` is unbounded. `lo` and
/// `hi` are digit strings without leading zeros (`"0"` for zero).
pub fn uint_range(lo: &[u8], hi: Option<&[u8]>) -> Option<Expr> {
    if let Some(h) = hi
        && (h.len(), h) < (lo.len(), lo)
    {
        return None;
    }
    let nlo = lo.len();
    let nines = |n: usize| vec![b'9'; n];
    let smallest = |n: usize| {
        let mut v = vec![b'0'; n];
        v[0] = b'1';
        v
    };
    let mut parts = Vec::new();
    match hi {
        Some(h) if h.len() == nlo => parts.push(fixed_len(lo, h)),
        _ => {
            parts.push(fixed_len(lo, &nines(nlo)));
            let nonzero = class(&[('1', '9')]);
            match hi {
                Some(h) => {
                    let nh = h.len() as u32;
                    if nh as usize > nlo + 1 {
                        parts.push(seq(vec![
                            nonzero,
                            repeat(digit(), nlo as u32, Some(nh - 2)),
                        ]));
                    }
                    parts.push(fixed_len(&smallest(nh as usize), h));
                }
                None => parts.push(seq(vec![nonzero, repeat(digit(), nlo as u32, None)])),
            }
        }
    }
    alt_opt(parts)
}

/// A bound on the fraction digits `0.ddd…` during [`fraction`]'s walk: the remaining
/// digits of the bound and whether it is exclusive. No bound is `None`.
type FracBound<'a> = Option<(&'a [u8], bool)>;

/// The fraction part of a number (empty, or `.` and digits) whose value `0.ddd…` lies
/// within the bounds, with at most `max_len` digits. `None` when no fraction fits.
pub fn fraction(lo: FracBound, hi: FracBound, max_len: Option<u32>) -> Option<Expr> {
    let (nonempty, empty_ok) = frac_digits(lo, hi, max_len)?;
    let dotted = nonempty.map(|e| seq(vec![lit("."), e]));
    match (dotted, empty_ok) {
        (Some(d), true) => Some(opt(d)),
        (Some(d), false) => Some(d),
        (None, true) => Some(Expr::Empty),
        (None, false) => None,
    }
}

/// Digit strings `d` with `0.d` within the bounds: the non-empty ones as an expression, and
/// whether the empty string (value 0) qualifies. `None` when nothing qualifies.
fn frac_digits(lo: FracBound, hi: FracBound, max_len: Option<u32>) -> Option<(Option<Expr>, bool)> {
    // A satisfied inclusive lower bound of zero is no bound.
    let lo = lo.filter(|(d, excl)| !d.is_empty() || *excl);
    let empty_ok = lo.is_none() && hi.is_none_or(|(d, excl)| !d.is_empty() || !excl);
    if max_len == Some(0) {
        return empty_ok.then_some((None, true));
    }
    let rest_len = max_len.map(|m| m - 1);
    let nonempty = match (lo, hi) {
        (None, None) => Some(repeat(digit(), 1, max_len)),
        // Only zeros stay at or below an exhausted inclusive upper bound of zero.
        (None, Some(([], false))) => Some(repeat(lit("0"), 1, max_len)),
        (None, Some(([], true))) => None,
        (Some(([], true)), None) => Some(nonzero_digits(max_len)),
        (Some((l, true)), Some((h, _))) if l.is_empty() && h.is_empty() => None,
        _ => {
            // Split on the first digit; neighbouring digits leading to the same tail share
            // one branch.
            let mut branches: Vec<(u8, u8, Expr)> = Vec::new();
            for c in b'0'..=b'9' {
                let lo2 = match lo {
                    None => Some(None),
                    Some((l, excl)) => {
                        let l0 = l.first().copied().unwrap_or(b'0');
                        let rest = l.get(1..).unwrap_or(&[]);
                        match c.cmp(&l0) {
                            Ordering::Greater => Some(None),
                            Ordering::Equal => Some(Some((rest, excl))),
                            Ordering::Less => None,
                        }
                    }
                };
                let hi2 = match hi {
                    None => Some(None),
                    Some((h, excl)) => {
                        let h0 = h.first().copied().unwrap_or(b'0');
                        let rest = h.get(1..).unwrap_or(&[]);
                        match c.cmp(&h0) {
                            Ordering::Less => Some(None),
                            Ordering::Equal => Some(Some((rest, excl))),
                            Ordering::Greater => None,
                        }
                    }
                };
                let (Some(lo2), Some(hi2)) = (lo2, hi2) else {
                    continue;
                };
                let tail = match frac_digits(lo2, hi2, rest_len) {
                    Some((Some(e), true)) => opt(e),
                    Some((Some(e), false)) => e,
                    Some((None, true)) => Expr::Empty,
                    _ => continue,
                };
                match branches.last_mut() {
                    Some((_, hi_d, t)) if *t == tail && *hi_d + 1 == c => *hi_d = c,
                    _ => branches.push((c, c, tail)),
                }
            }
            alt_opt(
                branches
                    .into_iter()
                    .map(|(a, b, t)| seq(vec![digit_range(a, b), t]))
                    .collect(),
            )
        }
    };
    if nonempty.is_none() && !empty_ok {
        return None;
    }
    Some((nonempty, empty_ok))
}

/// Non-empty digit strings (at most `max_len`) with a non-zero digit.
fn nonzero_digits(max_len: Option<u32>) -> Expr {
    match max_len {
        None => seq(vec![star(lit("0")), class(&[('1', '9')]), star(digit())]),
        Some(m) => alt((0..m)
            .map(|k| {
                seq(vec![
                    repeat(lit("0"), k, Some(k)),
                    class(&[('1', '9')]),
                    repeat(digit(), 0, Some(m - 1 - k)),
                ])
            })
            .collect()),
    }
}

/// Non-negative numbers in `[lo, hi]` (`lo` ≥ 0), with at most `frac_max` fraction digits
/// (`Some(0)`: integers only).
pub fn nonneg(lo: &Bound, hi: Option<&Bound>, frac_max: Option<u32>) -> Option<Expr> {
    if frac_max == Some(0) {
        let lo_int = lo.value.ceil(lo.exclusive);
        let hi_int = hi.map(|h| h.value.floor(h.exclusive));
        if let Some(h) = &hi_int
            && (h.neg || *h < lo_int)
        {
            return None;
        }
        return uint_range(
            &lo_int.int_text(),
            hi_int.as_ref().map(|h| h.int_text()).as_deref(),
        );
    }
    let ia = lo.value.int_text();
    let lo_frac: FracBound = Some((&lo.value.frac, lo.exclusive));
    let mut parts = Vec::new();
    match hi {
        Some(h) => {
            let ib = h.value.int_text();
            let hi_frac: FracBound = Some((&h.value.frac, h.exclusive));
            if ia == ib {
                let f = fraction(lo_frac, hi_frac, frac_max)?;
                return Some(seq(vec![lit(std::str::from_utf8(&ia).unwrap_or("0")), f]));
            }
            if lo.value.int.len() > h.value.int.len()
                || (lo.value.int.len() == h.value.int.len() && ia > ib)
            {
                return None;
            }
            let any_frac = fraction(None, None, frac_max);
            let mid_lo = Dec {
                neg: false,
                int: lo.value.int.clone(),
                frac: Vec::new(),
            }
            .add_one();
            let mid_hi = Dec {
                neg: false,
                int: h.value.int.clone(),
                frac: Vec::new(),
            }
            .sub_one_mag();
            if mid_lo <= mid_hi
                && !h.value.int.is_empty()
                && let (Some(mid), Some(f)) = (
                    uint_range(&mid_lo.int_text(), Some(&mid_hi.int_text())),
                    any_frac,
                )
            {
                parts.push(seq(vec![mid, f]));
            }
            if let Some(f) = fraction(lo_frac, None, frac_max) {
                parts.push(seq(vec![lit(std::str::from_utf8(&ia).unwrap_or("0")), f]));
            }
            if let Some(f) = fraction(None, hi_frac, frac_max) {
                parts.push(seq(vec![lit(std::str::from_utf8(&ib).unwrap_or("0")), f]));
            }
        }
        None => {
            let above = Dec {
                neg: false,
                int: lo.value.int.clone(),
                frac: Vec::new(),
            }
            .add_one();
            if let (Some(i), Some(f)) = (
                uint_range(&above.int_text(), None),
                fraction(None, None, frac_max),
            ) {
                parts.push(seq(vec![i, f]));
            }
            if let Some(f) = fraction(lo_frac, None, frac_max) {
                parts.push(seq(vec![lit(std::str::from_utf8(&ia).unwrap_or("0")), f]));
            }
        }
    }
    alt_opt(parts)
}

/// Numbers in `[lo, hi]` (either side open), at most `frac_max` fraction digits, no
/// exponent. `None` when the range is empty.
pub fn range(lo: Option<&Bound>, hi: Option<&Bound>, frac_max: Option<u32>) -> Option<Expr> {
    let zero_incl = Bound {
        value: Dec::zero(),
        exclusive: false,
    };
    let zero_excl = Bound {
        value: Dec::zero(),
        exclusive: true,
    };
    let mut parts = Vec::new();
    // x ≥ 0.
    let nonneg_lo = match lo {
        Some(l) if !l.value.neg => l.clone(),
        _ => zero_incl.clone(),
    };
    if hi.is_none_or(|h| !h.value.neg)
        && let Some(e) = nonneg(&nonneg_lo, hi, frac_max)
    {
        parts.push(e);
    }
    // x < 0, written as "-" y with y > 0.
    if lo.is_none_or(|l| l.value.neg) {
        let y_lo = match hi {
            Some(h) if h.value.neg => Bound {
                value: h.value.negate(),
                exclusive: h.exclusive,
            },
            _ => zero_excl,
        };
        let y_hi = lo.map(|l| Bound {
            value: l.value.negate(),
            exclusive: l.exclusive,
        });
        if let Some(e) = nonneg(&y_lo, y_hi.as_ref(), frac_max) {
            parts.push(seq(vec![lit("-"), e]));
        }
    }
    alt_opt(parts)
}

/// Any JSON number (with fraction and exponent).
pub fn any_number() -> Expr {
    seq(vec![
        opt(lit("-")),
        any_uint(),
        opt(seq(vec![lit("."), plus(digit())])),
        opt(exponent()),
    ])
}

/// Any JSON integer (no fraction, no exponent).
pub fn any_integer() -> Expr {
    seq(vec![opt(lit("-")), any_uint()])
}

fn any_uint() -> Expr {
    alt(vec![
        lit("0"),
        seq(vec![class(&[('1', '9')]), star(digit())]),
    ])
}

fn exponent() -> Expr {
    seq(vec![
        class(&[('e', 'e'), ('E', 'E')]),
        opt(class(&[('+', '+'), ('-', '-')])),
        plus(digit()),
    ])
}

/// The number (or integer, when `integer_only`) part of a conjunction: bounds and
/// `multipleOf`.
pub fn lower(
    c: &mut super::lower::Compiler,
    k: &super::constraints::Constraints,
    integer_only: bool,
) -> Result<Expr, super::SchemaError> {
    let (lo, hi) = (k.lower.clone(), k.upper.clone());
    if !k.types.has(super::constraints::TypeSet::INTEGER) {
        // Only non-integers (`not: {type: integer}`): a fraction with a non-zero digit.
        let nonzero_frac = seq(vec![
            lit("."),
            star(digit()),
            class(&[('1', '9')]),
            star(digit()),
        ]);
        if lo.is_some() || hi.is_some() || !k.multiple_of.is_empty() {
            c.warn(
                "",
                "type",
                "bounds on non-integer numbers only are not enforced",
            );
        }
        return Ok(seq(vec![opt(lit("-")), any_uint(), nonzero_frac]));
    }
    for b in [&lo, &hi].into_iter().flatten() {
        super::literal::check_digits(c, &b.value, "")?;
    }
    // Several `multipleOf`s: the first is enforced, the others are reported.
    let step = k.multiple_of.first().cloned();
    for (ptr, _) in k.multiple_of.iter().skip(1) {
        c.warn(
            ptr,
            "multipleOf",
            "only one multipleOf per instance is enforced",
        );
    }
    let frac_max = if integer_only { Some(0) } else { None };
    let Some((step_ptr, step)) = step else {
        if lo.is_none() && hi.is_none() {
            return Ok(if integer_only {
                c.shared("integer", |_| any_integer())
            } else {
                c.shared("number", |_| any_number())
            });
        }
        return Ok(range(lo.as_ref(), hi.as_ref(), frac_max)
            .unwrap_or_else(|| c.empty("", "minimum is above maximum")));
    };
    let Some((m, e)) = step.scaled() else {
        c.warn(&step_ptr, "multipleOf", "too many digits; not enforced");
        return Ok(range(lo.as_ref(), hi.as_ref(), frac_max).unwrap_or_else(super::rules::fail));
    };
    if e > 0 && m == 1 {
        // A decimal step 10^-e: at most e fraction digits (integers need nothing).
        let frac_max = if integer_only { Some(0) } else { Some(e) };
        return Ok(range(lo.as_ref(), hi.as_ref(), frac_max)
            .unwrap_or_else(|| c.empty(&step_ptr, "no multiple in range")));
    }
    if e == 0 && m == 1 {
        // Every integer is a multiple of 1.
        return Ok(range(lo.as_ref(), hi.as_ref(), Some(0))
            .unwrap_or_else(|| c.empty(&step_ptr, "no integer in range")));
    }
    // Bounded: enumerate the multiples when there are few.
    if let (Some(l), Some(h)) = (&lo, &hi)
        && let Some(values) =
            super::multiple::enumerate_multiples(l, h, m, e, c.opts.limits.max_enumerated)
    {
        if values.is_empty() {
            return Ok(c.empty(&step_ptr, "no multiple in range"));
        }
        return Ok(alt(values.iter().map(|v| lit(v)).collect()));
    }
    // Integer steps with at most one bound: remainder automata for the unbounded side.
    if e == 0 && (lo.is_none() || hi.is_none()) && m <= i128::from(c.opts.limits.max_enumerated) {
        let lo_int = lo
            .as_ref()
            .and_then(|b| b.value.ceil(b.exclusive).scaled())
            .map(|(v, _)| v);
        let hi_int = hi
            .as_ref()
            .and_then(|b| b.value.floor(b.exclusive).scaled())
            .map(|(v, _)| v);
        if let Some(e) = super::multiple::integer_multiples(c, m as u32, lo_int, hi_int) {
            return Ok(e);
        }
    }
    c.warn(
        &step_ptr,
        "multipleOf",
        "not enforced with these bounds (too many values to enumerate)",
    );
    Ok(range(lo.as_ref(), hi.as_ref(), frac_max).unwrap_or_else(super::rules::fail))
}
