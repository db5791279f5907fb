//! Objects: declared properties in order, then additional ones, with counts.
//!
//! The members are generated as a chain of rules `S(i, n, seen)`: `i` is the next declared
//! property, `n` how many members were written so far (exactly, when `maxProperties` or
//! `minProperties` need it; otherwise only "none yet" or "some"), and `seen` the declared
//! properties present that `dependentRequired` mentions. Each step writes property `i` or,
//! when it is optional, skips it; after the last declared property come the additional
//! members and the closing brace. Unreachable or dead-end states are removed by
//! [`prune`](super::prune).
//!
//! A property's value must satisfy, for each schema object of the conjunction, its
//! `properties` entry, else every matching `patternProperties` entry, else its
//! `additionalProperties` — exactly as the specification applies them.

use std::collections::HashMap;

use serde_json::Value;

use super::constraints::{Constraints, TypeSet};
use super::flatten::Conj;
use super::lower::Compiler;
use super::rules::{alt, alt_opt, fail, lit, repeat, seq, star};
use super::whitespace::Slot;
use super::{AdditionalProperties, SchemaError};
use crate::ir::Expr;
use crate::regex::{self as re, Encoding};
use crate::report::Status;

struct Member {
    name: String,
    /// `"name" : value`, or `None` when the property may not appear.
    kv: Option<Expr>,
    required: bool,
    /// Index into the `seen` bit set, for properties `dependentRequired` mentions.
    bit: Option<u32>,
}

pub fn lower<'a>(
    c: &mut Compiler<'a>,
    here: &str,
    k: &Constraints<'a>,
) -> Result<Expr, SchemaError> {
    // Declared names in the order the conjunction reached their schema objects (a schema,
    // then its `$ref` target and `allOf` members, depth first), then required names no
    // `properties` declares.
    let mut names: Vec<&str> = Vec::new();
    for part in &k.objs {
        for (n, _) in &part.props {
            if !names.contains(n) {
                names.push(n);
            }
        }
    }
    // Required names, and names `dependentRequired` mentions, that no `properties`
    // declares: they are generated in this order after the declared ones, with the schema
    // an additional property would get.
    // (Dependents before the property that needs them.)
    let mentioned = k
        .dependent
        .iter()
        .flat_map(|(_, a, ds)| ds.iter().chain(std::iter::once(a)));
    // Names `not: {required: [name]}` forbids are members that may not appear, so that no
    // additional key spells them either.
    for n in k.required.iter().chain(mentioned).chain(k.forbidden.iter()) {
        if !names.contains(n) {
            names.push(n);
        }
    }
    let has_additional_schema = k.objs.iter().any(|p| p.additional.is_some());
    let dep_names: Vec<&str> = {
        let mut v: Vec<&str> = Vec::new();
        for (_, a, ds) in &k.dependent {
            for n in std::iter::once(a).chain(ds.iter()) {
                if names.contains(n) && !v.contains(n) {
                    v.push(n);
                }
            }
        }
        v
    };
    let track_deps = dep_names.len() <= 12;
    if !track_deps {
        for (ptr, _, _) in &k.dependent {
            c.warn(
                ptr,
                "dependentRequired",
                "more than 12 properties involved; not enforced",
            );
        }
    }
    let (t, col) = (c.ws(Slot::Tight), c.ws(Slot::Colon));
    let mut members = Vec::with_capacity(names.len());
    for name in &names {
        let mut conj = Conj::default();
        for part in &k.objs {
            // A declared name's value meets its own schema and that of every pattern of the
            // same object that matches it; `additionalProperties` only where neither applies.
            let declared = part.props.iter().find(|(n, _)| n == name);
            if let Some((_, ptr)) = declared {
                c.res.flatten(ptr, &mut conj)?;
            }
            let mut matched = false;
            for (p, ptr) in &part.patterns {
                if c.pattern_matches(ptr, p, name)? {
                    c.res.flatten(ptr, &mut conj)?;
                    matched = true;
                }
            }
            if declared.is_none()
                && !matched
                && let Some(ptr) = &part.additional
            {
                c.res.flatten(ptr, &mut conj)?;
            }
        }
        let mut allowed = !k.forbidden.contains(name);
        for pn in &k.property_names {
            match string_fits(c, pn, name)? {
                Some(ok) => allowed &= ok,
                None => c.warn(
                    pn.trim_end_matches("/propertyNames"),
                    "propertyNames",
                    "too complex to check declared names",
                ),
            }
        }
        let required = k.required.contains(name);
        let kv = if allowed {
            let value = c.lower(conj)?;
            Some(seq(vec![
                lit(&Value::String((*name).to_owned()).to_string()),
                t.clone(),
                lit(":"),
                col.clone(),
                value,
            ]))
        } else {
            None
        };
        let bit = if track_deps {
            dep_names.iter().position(|n| n == name).map(|b| b as u32)
        } else {
            None
        };
        members.push(Member {
            name: (*name).to_owned(),
            kv,
            required,
            bit,
        });
    }
    let additional = additional_members(c, here, k, &names, has_additional_schema)?;
    let deps = if track_deps {
        deps(c, k, &members)
    } else {
        Vec::new()
    };
    let mut chain = Chain {
        here: here.to_owned(),
        members,
        additional,
        min: k.min_props,
        max: k.max_props,
        memo: HashMap::new(),
        deps,
    };
    let body = chain.state(c, 0, 0, 0)?;
    Ok(seq(vec![lit("{"), body]))
}

/// `dependentRequired` as bit masks: (if this bit is seen, these bits must be), or `None`
/// for a dependent that can only be an additional property (narrowed: never satisfied).
fn deps(c: &mut Compiler, k: &Constraints, members: &[Member]) -> Vec<(u32, Option<u32>)> {
    let bit_of = |n: &str| members.iter().find(|m| m.name == n).and_then(|m| m.bit);
    let mut out = Vec::new();
    for (ptr, a, ds) in &k.dependent {
        let Some(abit) = bit_of(a) else {
            c.warn(
                ptr,
                "dependentRequired",
                format!("'{a}' is not a declared property; not enforced"),
            );
            continue;
        };
        let mut mask = Some(0u32);
        for d in ds {
            match bit_of(d) {
                Some(b) => mask = mask.map(|m| m | (1 << b)),
                None => {
                    c.narrow(
                        ptr,
                        "dependentRequired",
                        format!("'{d}' is not declared: '{a}' is not generated"),
                    );
                    mask = None;
                }
            }
        }
        out.push((abit, mask));
    }
    out
}

struct Chain {
    here: String,
    members: Vec<Member>,
    /// One additional member (`"key": value`), if any may appear.
    additional: Option<Expr>,
    min: u64,
    max: Option<u64>,
    memo: HashMap<(usize, u64, u32), Expr>,
    deps: Vec<(u32, Option<u32>)>,
}

impl Chain {
    fn state(
        &mut self,
        c: &mut Compiler,
        i: usize,
        n: u64,
        seen: u32,
    ) -> Result<Expr, SchemaError> {
        // Without `maxProperties`, counts past `minProperties` (and past "some") behave alike.
        let n = match self.max {
            None => n.min(self.min.max(1)),
            Some(_) => n,
        };
        if let Some(e) = self.memo.get(&(i, n, seen)) {
            return Ok(e.clone());
        }
        if c.rules.len() >= c.opts.limits.max_rules {
            return Err(SchemaError::LimitExceeded {
                pointer: self.here.clone(),
                what: "the number of grammar rules",
                value: c.rules.len() as u64 + 1,
                max: c.opts.limits.max_rules as u64,
            });
        }
        let id = c.rules.reserve(&format!("{}-obj-{i}", self.here));
        self.memo.insert((i, n, seen), Expr::Rule(id));
        let body = if i == self.members.len() {
            self.tail(c, n, seen)
        } else {
            self.step(c, i, n, seen)?
        };
        c.rules.define(id, body);
        Ok(Expr::Rule(id))
    }

    fn step(&mut self, c: &mut Compiler, i: usize, n: u64, seen: u32) -> Result<Expr, SchemaError> {
        let mut alts = Vec::new();
        let (kv, required, bit) = {
            let m = &self.members[i];
            (m.kv.clone(), m.required, m.bit)
        };
        if let Some(kv) = kv
            && self.max.is_none_or(|m| n < m)
        {
            let sep = if n == 0 { c.ws(Slot::Break) } else { c.comma() };
            let seen2 = seen | bit.map_or(0, |b| 1 << b);
            let next = self.state(c, i + 1, n + 1, seen2)?;
            alts.push(seq(vec![sep, kv, next]));
        }
        if !required {
            alts.push(self.state(c, i + 1, n, seen)?);
        }
        Ok(alt_opt(alts).unwrap_or_else(fail))
    }

    fn tail(&mut self, c: &mut Compiler, n: u64, seen: u32) -> Expr {
        let deps_ok = self
            .deps
            .iter()
            .all(|&(a, need)| seen & (1 << a) == 0 || need.is_some_and(|m| seen & m == m));
        if !deps_ok {
            return fail();
        }
        let close_empty = seq(vec![c.ws(Slot::Tight), lit("}")]);
        let close = seq(vec![c.ws(Slot::Break), lit("}")]);
        let need = self.min.saturating_sub(n);
        let room = self.max.map(|m| m.saturating_sub(n));
        let mut alts = Vec::new();
        if need == 0 {
            alts.push(if n == 0 { close_empty } else { close.clone() });
        }
        // Counts beyond the repetition limit are not unrolled: the bound is dropped (and
        // reported) rather than building a huge automaton.
        let max_rep = u64::from(c.opts.limits.max_repetition);
        let room = match room {
            Some(r) if r > max_rep => {
                c.warn(
                    &self.here,
                    "maxProperties",
                    format!("above the repetition limit {max_rep}; not enforced"),
                );
                None
            }
            other => other,
        };
        if need > max_rep {
            c.warn(
                &self.here,
                "minProperties",
                format!("above the repetition limit {max_rep}; not enforced"),
            );
        }
        let need = need.min(max_rep);
        if let Some(add) = self.additional.clone()
            && room.is_none_or(|r| r > 0)
        {
            let first = if n == 0 {
                seq(vec![c.ws(Slot::Break), add.clone()])
            } else {
                seq(vec![c.comma(), add.clone()])
            };
            let more_min = need.saturating_sub(1).min(u64::from(u32::MAX)) as u32;
            let more_max = room.map(|r| (r - 1).min(u64::from(u32::MAX)) as u32);
            let comma = c.comma();
            alts.push(seq(vec![
                first,
                repeat(seq(vec![comma, add]), more_min, more_max),
                close,
            ]));
        }
        alt_opt(alts).unwrap_or_else(fail)
    }
}

/// The inside of a key that `pattern` (at `ptr`, in `owner`'s `patternProperties`)
/// matches and that is none of `declared`; `None` when every key it matches is declared.
fn pattern_key(
    c: &mut Compiler,
    owner: &str,
    ptr: &str,
    pattern: &str,
    declared: &[&str],
    hint: &str,
) -> Result<Option<Expr>, SchemaError> {
    let regex_error = |source| SchemaError::Regex {
        pointer: ptr.to_owned(),
        source,
    };
    let max_rep = c.opts.limits.max_repetition;
    let why = if declared.is_empty() {
        None
    } else {
        let language = re::StringLanguage {
            patterns: &[pattern],
            excluded: declared,
            min: 0,
            max: None,
        };
        match c.string_automaton(&language, hint) {
            Ok(Some(key)) => return Ok(Some(key)),
            Ok(None) => return Ok(None),
            Err(re::ConjunctionError::Pattern(_, source)) => return Err(regex_error(source)),
            Err(re::ConjunctionError::TooLarge(e)) => Some(e.to_string()),
        }
    };
    if let Some(why) = why {
        for n in declared {
            c.warn(
                owner,
                "patternProperties",
                format!("declared property '{n}' matches '{pattern}' and may repeat ({why})"),
            );
        }
    }
    re::compile_in(pattern, Encoding::JsonString, max_rep, &mut c.rules, hint)
        .map(Some)
        .map_err(regex_error)
}

/// One additional member (`"key": value`), or `None` when no additional property may
/// appear.
fn additional_members<'a>(
    c: &mut Compiler<'a>,
    here: &str,
    k: &Constraints<'a>,
    names: &[&'a str],
    has_additional_schema: bool,
) -> Result<Option<Expr>, SchemaError> {
    let (t, col) = (c.ws(Slot::Tight), c.ws(Slot::Colon));
    let mut alts = Vec::new();
    // Keys matching a `patternProperties` pattern.
    let patterns: Vec<(&str, &str, &str)> = k
        .objs
        .iter()
        .flat_map(|p| {
            p.patterns
                .iter()
                .map(move |(pat, ptr)| (p.ptr.as_str(), *pat, ptr.as_str()))
        })
        .collect();
    let parts_with_rules = k
        .objs
        .iter()
        .filter(|p| !p.patterns.is_empty() || p.additional.is_some())
        .count();
    for (owner, pattern, ptr) in &patterns {
        if patterns.len() > 1 || parts_with_rules > 1 {
            c.warn(
                owner,
                "patternProperties",
                "a key matching several patterns gets only one pattern's schema",
            );
        }
        // Declared names the pattern also matches are members of their own: a key of the
        // pattern's spells none of them, so that no key repeats.
        let mut declared = Vec::new();
        for n in names {
            if c.pattern_matches(ptr, pattern, n)? {
                declared.push(*n);
            }
        }
        let hint = format!("{ptr}-key");
        let Some(key) = pattern_key(c, owner, ptr, pattern, &declared, &hint)? else {
            continue;
        };
        let key = c.rules.add(&hint, key);
        let value = c.lower_ptr(ptr)?;
        alts.push(seq(vec![
            lit("\""),
            Expr::Rule(key),
            lit("\""),
            t.clone(),
            lit(":"),
            col.clone(),
            value,
        ]));
    }
    // Keys matching no pattern and no declared name.
    let mut conj = Conj::default();
    for part in &k.objs {
        if let Some(ptr) = &part.additional {
            c.res.flatten(ptr, &mut conj)?;
        }
    }
    let forbidden = conj.never.is_some()
        || (!has_additional_schema && c.opts.additional_properties == AdditionalProperties::Forbid);
    if !forbidden {
        if !patterns.is_empty() {
            for (owner, _, _) in &patterns {
                c.narrow(
                    owner,
                    "patternProperties",
                    "keys matching no pattern are not generated",
                );
            }
        } else {
            let key = if let Some(pn) = k.property_names.first() {
                // A key `propertyNames` allows, but none of the declared names.
                let mut pconj = Conj::default();
                c.res.flatten(pn, &mut pconj)?;
                c.lower_as_string(pconj, names)?
            } else {
                not_in(c, here, names)
            };
            let value = if conj.own.is_empty() {
                c.any_value()
            } else {
                c.lower(conj)?
            };
            alts.push(seq(vec![key, t, lit(":"), col, value]));
        }
    }
    if let Some(pn) = k.property_names.get(1) {
        c.warn(
            pn.trim_end_matches("/propertyNames"),
            "propertyNames",
            "only one propertyNames applies to additional keys",
        );
    }
    Ok(alt_opt(alts))
}

/// A JSON string (with its quotes) that is none of `names`. A trie over the names' JSON
/// text: at each node the key may end (unless a name ends there), continue along a name,
/// or leave all names behind with another raw character and then anything.
pub(super) fn not_in(c: &mut Compiler, here: &str, names: &[&str]) -> Expr {
    if names.is_empty() {
        return c.any_string();
    }
    let texts: Vec<Vec<char>> = names
        .iter()
        .map(|n| {
            let quoted = Value::String((*n).to_owned()).to_string();
            quoted[1..quoted.len() - 1].chars().collect()
        })
        .collect();
    let ch = c.shared("char", |_| re::json_char());
    let rest = seq(vec![star(ch), lit("\"")]);
    let rest = c.shared("any-key-rest", |_| rest);
    let body = trie_node(c, here, &texts, 0, &rest);
    seq(vec![lit("\""), body])
}

fn trie_node(c: &mut Compiler, here: &str, texts: &[Vec<char>], depth: usize, rest: &Expr) -> Expr {
    let ends_here = texts.iter().any(|t| t.len() == depth);
    let mut children: Vec<char> = texts.iter().filter_map(|t| t.get(depth).copied()).collect();
    children.sort_unstable();
    children.dedup();
    let mut alts = Vec::new();
    if !ends_here {
        alts.push(lit("\""));
    }
    // Diverging: any raw character that is not a child (and not a quote or backslash).
    let mut excluded: Vec<(char, char)> = vec![('\0', '\u{1f}'), ('"', '"'), ('\\', '\\')];
    excluded.extend(children.iter().map(|&ch| (ch, ch)));
    let diverge = Expr::Class {
        ranges: excluded
            .iter()
            .map(|&(lo, hi)| crate::ir::CharRange { lo, hi })
            .collect(),
        negated: true,
    };
    alts.push(seq(vec![diverge, rest.clone()]));
    for ch in children {
        let sub: Vec<Vec<char>> = texts
            .iter()
            .filter(|t| t.get(depth) == Some(&ch))
            .cloned()
            .collect();
        let node = trie_node(c, here, &sub, depth + 1, rest);
        let node = if sub.len() == 1 && sub[0].len() > depth + 1 {
            node
        } else {
            let id = c.rules.add(&format!("{here}-key"), node);
            Expr::Rule(id)
        };
        alts.push(seq(vec![lit(ch.encode_utf8(&mut [0; 4])), node]));
    }
    alt(alts)
}

/// Whether a declared property name satisfies a `propertyNames` schema, when the schema is
/// simple enough to check here (type, enum/const, lengths, pattern); `None` otherwise.
fn string_fits(c: &mut Compiler, pn: &str, name: &str) -> Result<Option<bool>, SchemaError> {
    let mut conj = Conj::default();
    c.res.flatten(pn, &mut conj)?;
    if conj.never.is_some() {
        return Ok(Some(false));
    }
    if !conj.groups.is_empty() {
        return Ok(None);
    }
    let k = Constraints::gather(&c.res, &conj, &mut c.report)?;
    if !k.formats.is_empty() || !k.nots.is_empty() {
        return Ok(None);
    }
    let len = name.chars().count() as u64;
    let mut ok = k.types.has(TypeSet::STRING)
        && len >= k.min_len.0
        && k.max_len.as_ref().is_none_or(|(m, _)| len <= *m);
    if let Some((vals, _)) = &k.enums {
        ok &= vals.iter().any(|v| v.as_str() == Some(name));
    }
    for (ptr, p) in &k.patterns {
        ok &= c.pattern_matches(ptr, p, name)?;
    }
    c.report.record(
        pn.trim_end_matches("/propertyNames"),
        "propertyNames",
        Status::Enforced,
    );
    Ok(Some(ok))
}
