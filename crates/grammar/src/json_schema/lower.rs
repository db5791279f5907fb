//! The compiler: conjunctions to rules, `anyOf`/`oneOf` to alternatives, types to the
//! per-type lowerings.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::Value;

use super::constraints::{Constraints, TypeSet, json_eq};
use super::flatten::{Conj, ConjKey, Resolver};
use super::rules::{RuleSet, alt, fail, lit, rule, seq};
use super::whitespace::Slot;
use super::{Compiled, Options, SchemaError, literal, number, prune};
use crate::ir::{Expr, RuleId};
use crate::regex::{
    Budget, ConjunctionError, Encoding, PatternMatcher, RegexError, StringLanguage,
};
use crate::report::{Report, Status};

/// At most this many states (a rule each) in one automaton of a string's language
/// ([`crate::regex::conjunction`]); fewer where the grammar is already large, so that no
/// schema passes the rule limit for them.
const MAX_AUTOMATON_STATES: usize = 2_000;
/// At most about this many matcher states for all of a schema's such automata (the
/// matcher allows 500,000 in all), so that they cannot make a schema that compiled
/// without them too large to match.
const MAX_AUTOMATON_MATCHER_STATES: usize = 150_000;

pub struct Compiler<'a> {
    pub res: Resolver<'a>,
    pub opts: &'a Options,
    pub rules: RuleSet,
    memo: HashMap<ConjKey, RuleId>,
    shared: HashMap<&'static str, RuleId>,
    pub report: Report,
    /// The first place found to accept nothing, for the error when the root does.
    pub empty_at: Option<(String, String)>,
    /// How many conjunctions are being lowered, nested.
    depth: usize,
    /// About how many matcher states the automata of string languages take so far.
    automaton_cost: usize,
    /// The rules of strings longer than a repetition allows, by bound ([`super::string`]).
    pub long_strings: HashMap<u64, RuleId>,
    /// Each pattern's matcher, built once: declared names and enum values are tested on
    /// the same patterns again and again (a look-ahead pattern's matcher is an automaton).
    matchers: HashMap<String, Result<PatternMatcher, RegexError>>,
}

impl<'a> Compiler<'a> {
    pub fn new(root: &'a Value, opts: &'a Options) -> Result<Self, SchemaError> {
        if !matches!(root, Value::Object(_) | Value::Bool(_)) {
            return Err(SchemaError::NotASchema {
                pointer: String::new(),
                message: "a schema is an object or a boolean".into(),
            });
        }
        Ok(Self {
            res: Resolver::new(root),
            opts,
            rules: RuleSet::default(),
            memo: HashMap::new(),
            shared: HashMap::new(),
            report: Report::default(),
            empty_at: None,
            depth: 0,
            automaton_cost: 0,
            long_strings: HashMap::new(),
            matchers: HashMap::new(),
        })
    }

    pub fn run(mut self) -> Result<Compiled, SchemaError> {
        let mut conj = Conj::default();
        self.res.flatten("", &mut conj)?;
        // llama.cpp starts from the rule named `root`.
        let root = match self.lower(conj)? {
            Expr::Rule(id) if self.rules.name(id) == "root" => id,
            other => self.rules.add("root", other),
        };
        for (ptr, why) in self.res.read_from_root() {
            self.report.record(&ptr, "$ref", Status::Warning(why));
        }
        if self.opts.strict
            && let Some(w) = self.report.warnings().next()
        {
            let reason = match w.status {
                Status::Warning(r) => r,
                _ => String::new(),
            };
            return Err(SchemaError::Refused {
                pointer: w.pointer,
                keyword: w.keyword,
                reason,
            });
        }
        mark_unreached(&self.res, "", &mut self.report, 0);
        let grammar = self.rules.into_grammar(root);
        let grammar = prune::prune(grammar).ok_or_else(|| {
            let (pointer, reason) = self.empty_at.clone().unwrap_or_else(|| {
                (
                    String::new(),
                    "every path recurses without a base case".into(),
                )
            });
            SchemaError::Unsatisfiable { pointer, reason }
        })?;
        Ok(Compiled {
            grammar,
            report: self.report,
        })
    }

    /// Notes that the schema at `ptr` accepts nothing, and returns [`fail`].
    pub fn empty(&mut self, ptr: &str, reason: &str) -> Expr {
        self.empty_at
            .get_or_insert_with(|| (ptr.to_owned(), reason.to_owned()));
        fail()
    }

    pub fn warn(&mut self, ptr: &str, keyword: &str, reason: impl Into<String>) {
        self.report
            .record(ptr, keyword, Status::Warning(reason.into()));
    }

    pub fn narrow(&mut self, ptr: &str, keyword: &str, reason: impl Into<String>) {
        self.report
            .record(ptr, keyword, Status::Narrowed(reason.into()));
    }

    /// The rule for the schema at `ptr` alone.
    pub fn lower_ptr(&mut self, ptr: &str) -> Result<Expr, SchemaError> {
        let mut conj = Conj::default();
        self.res.flatten(ptr, &mut conj)?;
        self.lower(conj)
    }

    /// The rule for a conjunction: one per distinct conjunction, so recursion through
    /// `$ref` closes on itself.
    pub fn lower(&mut self, conj: Conj) -> Result<Expr, SchemaError> {
        if let Some(ptr) = &conj.never {
            let ptr = ptr.clone();
            return Ok(self.empty(&ptr, "the schema is false"));
        }
        let key = conj.key();
        if let Some(&id) = self.memo.get(&key) {
            return Ok(rule(id));
        }
        let max = self.opts.limits.max_rules;
        if self.rules.len() >= max {
            return Err(SchemaError::LimitExceeded {
                pointer: conj.name_hint(),
                what: "the number of grammar rules",
                value: self.rules.len() as u64 + 1,
                max: max as u64,
            });
        }
        let hint = conj.name_hint();
        if self.depth >= self.opts.limits.max_depth {
            return Err(SchemaError::LimitExceeded {
                pointer: hint,
                what: "the nesting depth of subschemas",
                value: self.depth as u64 + 1,
                max: self.opts.limits.max_depth as u64,
            });
        }
        let id = self
            .rules
            .reserve(if hint.is_empty() { "root" } else { &hint });
        self.memo.insert(key, id);
        self.depth += 1;
        let body = self.lower_body(conj);
        self.depth -= 1;
        self.rules.define(id, body?);
        Ok(rule(id))
    }

    fn lower_body(&mut self, mut conj: Conj) -> Result<Expr, SchemaError> {
        if let Some(group) = conj.groups.pop_first() {
            let n = match self.res.get(&group) {
                Some(Value::Array(a)) => a.len(),
                _ => 0,
            };
            if group.ends_with("/oneOf") {
                self.check_one_of(&group, n);
            }
            let mut branches = Vec::with_capacity(n);
            for i in 0..n {
                let mut c = conj.clone();
                self.res.flatten(&format!("{group}/{i}"), &mut c)?;
                branches.push(self.lower(c)?);
            }
            return Ok(alt(branches));
        }
        let cons = Constraints::gather(&self.res, &conj, &mut self.report)?;
        self.lower_constraints(&conj, cons)
    }

    /// `oneOf` is `anyOf` when no instance can match two branches; that is proven here by
    /// disjoint types or distinct `const`/`enum` values (directly or on a required
    /// property). Otherwise the exclusivity is not enforced and says so.
    fn check_one_of(&mut self, group: &str, n: usize) {
        let sigs: Vec<Option<Signature>> = (0..n)
            .map(|i| self.signature(&format!("{group}/{i}")))
            .collect();
        let disjoint = sigs.iter().enumerate().all(|(i, a)| {
            sigs[i + 1..].iter().all(|b| match (a, b) {
                (Some(a), Some(b)) => a.disjoint(b),
                _ => false,
            })
        });
        let ptr = group.trim_end_matches("/oneOf");
        if !disjoint {
            self.warn(
                ptr,
                "oneOf",
                "branches not proven disjoint: enforced as anyOf",
            );
        }
    }

    fn signature(&self, ptr: &str) -> Option<Signature> {
        let mut conj = Conj::default();
        self.res.flatten(ptr, &mut conj).ok()?;
        let mut sig = Signature {
            types: TypeSet::ALL.0,
            values: None,
            tags: Vec::new(),
        };
        for p in &conj.own {
            let Some(Value::Object(map)) = self.res.get(p) else {
                continue;
            };
            if let Some(t) = map.get("type") {
                let mut bits = 0;
                for name in t
                    .as_array()
                    .map(|a| a.iter().collect())
                    .unwrap_or_else(|| vec![t])
                {
                    bits |= match name.as_str()? {
                        "null" => TypeSet::NULL,
                        "boolean" => TypeSet::BOOLEAN,
                        "object" => TypeSet::OBJECT,
                        "array" => TypeSet::ARRAY,
                        "string" => TypeSet::STRING,
                        "integer" => TypeSet::INTEGER,
                        "number" => TypeSet::INTEGER | TypeSet::FRACTION,
                        _ => return None,
                    };
                }
                sig.types &= bits;
            }
            if let Some(v) = map.get("const") {
                sig.values = Some(vec![v.clone()]);
            } else if let Some(Value::Array(vs)) = map.get("enum") {
                sig.values = Some(vs.clone());
            }
            // Required properties with a `const`/`enum`: discriminator tags.
            let required: Vec<&str> = map
                .get("required")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if let Some(Value::Object(props)) = map.get("properties") {
                for name in required {
                    let Some(Value::Object(p)) = props.get(name) else {
                        continue;
                    };
                    let vals = match (p.get("const"), p.get("enum")) {
                        (Some(c), _) => vec![c.clone()],
                        (None, Some(Value::Array(vs))) => vs.clone(),
                        _ => continue,
                    };
                    sig.tags.push((name.to_owned(), vals));
                }
            }
        }
        if !conj.groups.is_empty()
            && sig.values.is_none()
            && sig.tags.is_empty()
            && sig.types == TypeSet::ALL.0
        {
            return None;
        }
        Some(sig)
    }

    /// A conjunction restricted to strings (object keys under `propertyNames`), none of
    /// `except` (the object's declared names).
    pub fn lower_as_string(&mut self, conj: Conj, except: &[&'a str]) -> Result<Expr, SchemaError> {
        if conj.never.is_some() {
            return Ok(fail());
        }
        if !conj.groups.is_empty() {
            let ptr = conj.name_hint();
            self.warn(
                &ptr,
                "anyOf",
                "branches of a propertyNames schema are not enforced on keys",
            );
            if !except.is_empty() {
                self.warn(
                    &ptr,
                    "propertyNames",
                    "an additional key may repeat a declared property",
                );
            }
            return Ok(self.any_string());
        }
        let mut c = Constraints::gather(&self.res, &conj, &mut self.report)?;
        c.types = TypeSet(c.types.0 & TypeSet::STRING);
        c.not_strings.extend(except);
        self.lower_constraints(&conj, c)
    }

    fn lower_constraints(
        &mut self,
        conj: &Conj,
        mut c: Constraints<'a>,
    ) -> Result<Expr, SchemaError> {
        let here = conj.name_hint();
        for n in c.nots.clone() {
            self.apply_not(&n, &mut c)?;
        }
        if let Some((values, ptr)) = c.enums.take() {
            let kept: Vec<&Value> = values
                .into_iter()
                .filter(|v| self.value_fits(v, &c))
                .collect();
            if kept.is_empty() {
                return Ok(self.empty(&ptr, "no enum/const value satisfies the other keywords"));
            }
            // Objects and arrays in an enum are not checked against sibling object/array
            // keywords (only their type is).
            let compound = kept.iter().any(|v| v.is_object() || v.is_array());
            let has_shape = !c.objs.is_empty()
                || !c.required.is_empty()
                || c.min_props > 0
                || c.max_props.is_some()
                || !c.arrs.is_empty()
                || c.min_items > 0
                || c.max_items.is_some()
                || !c.contains.is_empty();
            if compound && has_shape {
                let at = ptr.rsplit_once('/').map_or("", |(p, _)| p).to_owned();
                self.warn(
                    &at,
                    "enum",
                    "object/array values are not checked against sibling keywords",
                );
            }
            let mut alts = Vec::with_capacity(kept.len());
            for v in kept {
                alts.push(literal::value(self, v, &ptr)?);
            }
            return Ok(alt(alts));
        }
        let t = c.types;
        let mut alts = Vec::new();
        if t.has(TypeSet::NULL) {
            alts.push(lit("null"));
        }
        if t.has(TypeSet::BOOLEAN) {
            alts.push(match c.not_bool {
                Some(true) => lit("false"),
                Some(false) => lit("true"),
                None => alt(vec![lit("true"), lit("false")]),
            });
        }
        if t.has(TypeSet::STRING) {
            alts.push(super::string::lower(self, &c)?);
        }
        if t.has(TypeSet::INTEGER | TypeSet::FRACTION) {
            alts.push(number::lower(self, &c, !t.has(TypeSet::FRACTION))?);
        }
        if t.has(TypeSet::OBJECT) {
            alts.push(super::object::lower(self, &here, &c)?);
        }
        if t.has(TypeSet::ARRAY) {
            alts.push(super::array::lower(self, &here, &c)?);
        }
        if alts.is_empty() {
            return Ok(self.empty(&here, "no type is allowed"));
        }
        Ok(alt(alts))
    }

    /// `not` in the forms a grammar can express; other forms warn.
    fn apply_not(&mut self, ptr: &str, c: &mut Constraints<'a>) -> Result<(), SchemaError> {
        if !self.negate(ptr, c)? {
            let parent = ptr.trim_end_matches("/not");
            self.warn(
                parent,
                "not",
                "only `not` of true/false, type, enum/const (strings, null, booleans, or beside an enum), required of one property, not, or anyOf of these is enforced",
            );
        }
        Ok(())
    }

    /// Applies the negation of the schema at `ptr` to `c`; false when its form is not
    /// supported (then `c` may be partly narrowed by the supported parts, which only ever
    /// removes instances the negation also removes).
    fn negate(&mut self, ptr: &str, c: &mut Constraints<'a>) -> Result<bool, SchemaError> {
        let Some(v) = self.res.get(ptr) else {
            return Ok(false);
        };
        let map = match v {
            Value::Bool(true) => {
                c.types = TypeSet(0);
                return Ok(true);
            }
            Value::Bool(false) => return Ok(true),
            Value::Object(m) => m,
            _ => return Ok(false),
        };
        let keys: Vec<&str> = map
            .keys()
            .map(String::as_str)
            .filter(|k| !matches!(super::keywords::kind(k), super::keywords::Kind::Annotation))
            .collect();
        let handled = match keys.as_slice() {
            [] => {
                c.types = TypeSet(0);
                true
            }
            // `not: {not: X}` is X, which the conjunction already holds (see flatten).
            ["not"] => true,
            ["type"] => {
                let mut sub = Conj::default();
                self.res.flatten(ptr, &mut sub)?;
                let inner = Constraints::gather(&self.res, &sub, &mut self.report)?;
                c.types = TypeSet(c.types.0 & !inner.types.0);
                true
            }
            [kw @ ("enum" | "const")] => {
                let excluded: Vec<&'a Value> = match (*kw, map.get(*kw)) {
                    ("const", Some(v)) => vec![v],
                    (_, Some(Value::Array(vs))) => vs.iter().collect(),
                    _ => Vec::new(),
                };
                self.exclude_values(&excluded, c)
            }
            ["required"] => match map
                .get("required")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
            {
                Some([Value::String(name)]) => {
                    if !c.forbidden.contains(&name.as_str()) {
                        c.forbidden.push(name.as_str());
                    }
                    true
                }
                // `not: {required: []}`: every object has all of no properties.
                Some([]) => {
                    c.types = TypeSet(c.types.0 & !TypeSet::OBJECT);
                    true
                }
                _ => false,
            },
            ["anyOf"] => {
                // not (A or B) = not A and not B.
                let n = map
                    .get("anyOf")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                let mut all = true;
                for i in 0..n {
                    all &= self.negate(&format!("{ptr}/anyOf/{i}"), c)?;
                }
                all
            }
            _ => false,
        };
        if handled {
            for k in keys {
                self.report.record(ptr, k, Status::Enforced);
            }
        }
        Ok(handled)
    }

    /// Removes values from what `c` accepts: from its enum if it has one; otherwise strings
    /// (generated as "any string but these"), `null` and booleans. Numbers, arrays and
    /// objects cannot be excluded one by one.
    fn exclude_values(&mut self, excluded: &[&'a Value], c: &mut Constraints<'a>) -> bool {
        if let Some((vals, _)) = &mut c.enums {
            vals.retain(|v| !excluded.iter().any(|x| json_eq(v, x)));
            return true;
        }
        let mut ok = true;
        let has_true = excluded.iter().any(|v| **v == Value::Bool(true));
        let has_false = excluded.iter().any(|v| **v == Value::Bool(false));
        for v in excluded {
            match v {
                Value::Null => c.types = TypeSet(c.types.0 & !TypeSet::NULL),
                Value::String(s) => c.not_strings.push(s.as_str()),
                Value::Bool(_) if has_true && has_false => {
                    c.types = TypeSet(c.types.0 & !TypeSet::BOOLEAN)
                }
                Value::Bool(b) => c.not_bool = Some(*b),
                _ => ok &= !c.types.has(TypeSet::of(v)),
            }
        }
        ok
    }

    /// Whether an enum value satisfies the other keywords of its conjunction, as far as the
    /// simple ones go (type, length, bounds, nested object/array shape is not checked).
    fn value_fits(&mut self, v: &Value, c: &Constraints) -> bool {
        let ty = TypeSet::of(v);
        if !c.types.has(ty) {
            return false;
        }
        match v {
            Value::String(s) => {
                let n = s.chars().count() as u64;
                // The grammar's meaning of the pattern; one it refuses fits nothing.
                let patterns = c.patterns.iter().map(|(ptr, p)| (ptr, Cow::Borrowed(*p)));
                let formats = c.formats.iter().filter_map(|(ptr, f)| {
                    super::format::pattern(f).map(|p| (ptr, Cow::<str>::Owned(p)))
                });
                let mut fits = n >= c.min_len.0
                    && c.max_len.as_ref().is_none_or(|(m, _)| n <= *m)
                    && !c.not_strings.contains(&s.as_str());
                for (ptr, p) in patterns.chain(formats) {
                    fits = fits && self.pattern_matches(ptr, &p, s).unwrap_or(false);
                }
                fits
            }
            Value::Number(n) => {
                let Some(d) = number::Dec::from_number(n) else {
                    return false;
                };
                c.lower.as_ref().is_none_or(|b| {
                    if b.exclusive {
                        d > b.value
                    } else {
                        d >= b.value
                    }
                }) && c.upper.as_ref().is_none_or(|b| {
                    if b.exclusive {
                        d < b.value
                    } else {
                        d <= b.value
                    }
                }) && c.multiple_of.iter().all(|(_, step)| is_multiple(&d, step))
            }
            _ => true,
        }
    }

    /// A string's language as one automaton inside a JSON string
    /// ([`crate::regex::conjunction`]), within what is left of the schema's budget for
    /// them, which it then takes; `Ok(None)` when no string is in it.
    pub fn string_automaton(
        &mut self,
        language: &StringLanguage<'_>,
        hint: &str,
    ) -> Result<Option<Expr>, ConjunctionError> {
        let budget = Budget {
            max_repetition: self.opts.limits.max_repetition,
            max_states: (self.opts.limits.max_rules / 2)
                .saturating_sub(self.rules.len())
                .min(MAX_AUTOMATON_STATES),
            max_matcher_states: MAX_AUTOMATON_MATCHER_STATES.saturating_sub(self.automaton_cost),
        };
        let built = crate::regex::conjunction(
            language,
            &budget,
            Encoding::JsonString,
            &mut self.rules,
            hint,
        )?;
        Ok(built.map(|(expr, matcher_states)| {
            self.automaton_cost += matcher_states;
            expr
        }))
    }

    /// Whether `pattern` (at `ptr`) matches `s` as the grammar reads it (ECMA-262,
    /// unanchored unless `^`/`$` say otherwise).
    pub fn pattern_matches(
        &mut self,
        ptr: &str,
        pattern: &str,
        s: &str,
    ) -> Result<bool, SchemaError> {
        if !self.matchers.contains_key(pattern) {
            self.matchers
                .insert(pattern.to_owned(), crate::regex::matcher(pattern));
        }
        match &self.matchers[pattern] {
            Ok(m) => Ok(m.is_match(s)),
            Err(source) => Err(SchemaError::Regex {
                pointer: ptr.to_owned(),
                source: source.clone(),
            }),
        }
    }

    /// A shared rule (`string`, `value`, whitespace…), defined on first use.
    pub fn shared(&mut self, name: &'static str, build: impl FnOnce(&mut Self) -> Expr) -> Expr {
        if let Some(&id) = self.shared.get(name) {
            return rule(id);
        }
        let id = self.rules.reserve(name);
        self.shared.insert(name, id);
        let body = build(self);
        self.rules.define(id, body);
        rule(id)
    }

    /// Whitespace for a slot, as a shared rule (or nothing when the policy allows none).
    pub fn ws(&mut self, slot: Slot) -> Expr {
        let ws = self.opts.whitespace;
        let e = ws.slot(slot);
        if e == Expr::Empty || matches!(e, Expr::Literal(_)) {
            return e;
        }
        self.shared(ws.slot_name(slot), |_| e)
    }

    /// `tight "," break`: between two elements.
    pub fn comma(&mut self) -> Expr {
        let t = self.ws(Slot::Tight);
        let b = self.ws(Slot::Break);
        seq(vec![t, lit(","), b])
    }

    /// Any JSON value.
    pub fn any_value(&mut self) -> Expr {
        if let Some(&id) = self.shared.get("value") {
            return rule(id);
        }
        let id = self.rules.reserve("value");
        self.shared.insert("value", id);
        let string = self.any_string();
        let number = self.shared("number", |_| number::any_number());
        let v = rule(id);
        let (t, b, col) = (
            self.ws(Slot::Tight),
            self.ws(Slot::Break),
            self.ws(Slot::Colon),
        );
        let comma = self.comma();
        let kv = seq(vec![string.clone(), t.clone(), lit(":"), col, v.clone()]);
        let object = seq(vec![
            lit("{"),
            alt(vec![
                seq(vec![t.clone(), lit("}")]),
                seq(vec![
                    b.clone(),
                    kv.clone(),
                    super::rules::star(seq(vec![comma.clone(), kv])),
                    b.clone(),
                    lit("}"),
                ]),
            ]),
        ]);
        let array = seq(vec![
            lit("["),
            alt(vec![
                seq(vec![t, lit("]")]),
                seq(vec![
                    b.clone(),
                    v.clone(),
                    super::rules::star(seq(vec![comma, v])),
                    b,
                    lit("]"),
                ]),
            ]),
        ]);
        let object = self.shared("object", |_| object);
        let array = self.shared("array", |_| array);
        let body = alt(vec![
            object,
            array,
            string,
            number,
            lit("true"),
            lit("false"),
            lit("null"),
        ]);
        self.rules.define(id, body);
        rule(id)
    }

    /// Any JSON string.
    pub fn any_string(&mut self) -> Expr {
        let ch = self.shared("char", |_| crate::regex::json_char());
        self.shared("string", |_| {
            seq(vec![lit("\""), super::rules::star(ch), lit("\"")])
        })
    }
}

/// What a `oneOf` branch is known to require, for proving branches disjoint.
struct Signature {
    types: u8,
    values: Option<Vec<Value>>,
    tags: Vec<(String, Vec<Value>)>,
}

impl Signature {
    fn disjoint(&self, other: &Signature) -> bool {
        if self.types & other.types == 0 {
            return true;
        }
        let distinct =
            |a: &[Value], b: &[Value]| !a.iter().any(|x| b.iter().any(|y| json_eq(x, y)));
        if let (Some(a), Some(b)) = (&self.values, &other.values)
            && distinct(a, b)
        {
            return true;
        }
        self.tags
            .iter()
            .any(|(name, a)| other.tags.iter().any(|(n, b)| n == name && distinct(a, b)))
    }
}

/// Records every keyword of every schema in the document that lowering did not reach, so
/// the report names all of them.
fn mark_unreached(res: &Resolver, ptr: &str, report: &mut Report, depth: usize) {
    let Some(Value::Object(map)) = res.get(ptr) else {
        return;
    };
    // The document was parsed by serde_json, whose own nesting limit bounds this walk too.
    if depth > 512 {
        return;
    }
    for (k, v) in map {
        report.record_if_absent(ptr, k, Status::Unreached);
        let sub = format!("{ptr}/{}", super::flatten::escape(k));
        match (k.as_str(), v) {
            (
                "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas"
                | "dependencies",
                Value::Object(m),
            ) => {
                for name in m.keys() {
                    let p = format!("{sub}/{}", super::flatten::escape(name));
                    mark_unreached(res, &p, report, depth + 1);
                }
            }
            ("items" | "prefixItems" | "allOf" | "anyOf" | "oneOf", Value::Array(xs)) => {
                for i in 0..xs.len() {
                    mark_unreached(res, &format!("{sub}/{i}"), report, depth + 1);
                }
            }
            (
                "items"
                | "additionalProperties"
                | "additionalItems"
                | "not"
                | "if"
                | "then"
                | "else"
                | "contains"
                | "propertyNames"
                | "unevaluatedItems"
                | "unevaluatedProperties"
                | "contentSchema",
                Value::Object(_),
            ) => mark_unreached(res, &sub, report, depth + 1),
            _ => {}
        }
    }
}

/// Whether `d` is an integer multiple of `step` (exact decimal arithmetic; values too
/// large to compute count as not multiples, so they are dropped rather than wrongly kept).
fn is_multiple(d: &number::Dec, step: &number::Dec) -> bool {
    match (d.scaled(), step.scaled()) {
        (Some((dm, de)), Some((sm, se))) if sm != 0 => {
            let e = de.max(se);
            let scale =
                |m: i128, from: u32| 10i128.checked_pow(e - from).and_then(|p| m.checked_mul(p));
            match (scale(dm, de), scale(sm, se)) {
                (Some(a), Some(b)) => a % b == 0,
                _ => false,
            }
        }
        _ => false,
    }
}
