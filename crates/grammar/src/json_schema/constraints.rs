//! Gathering the keywords of a conjunction into one set of [`Constraints`].
//!
//! Keywords of different schema objects combine as the specification says: types
//! intersect, bounds take the tighter value, `required` unions, enums intersect. Keywords
//! that only make sense relative to their own schema object (`properties` with
//! `additionalProperties`, `prefixItems` with `items`) stay grouped per object
//! ([`ObjPart`], [`ArrPart`]) so that [`object`](super::object) and [`array`](super::array)
//! can apply each object's rules exactly.

use serde_json::{Map, Value};

use super::SchemaError;
use super::flatten::{Conj, Resolver, escape, kind_of};
use super::keywords::{Kind, kind};
use super::number::{Bound, Dec};
use crate::report::{Report, Status};

/// JSON types as a bit set. `number` is `INTEGER | FRACTION`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypeSet(pub u8);

impl TypeSet {
    pub const NULL: u8 = 1;
    pub const BOOLEAN: u8 = 2;
    pub const OBJECT: u8 = 4;
    pub const ARRAY: u8 = 8;
    pub const STRING: u8 = 16;
    pub const INTEGER: u8 = 32;
    /// Numbers that are not integers.
    pub const FRACTION: u8 = 64;
    pub const ALL: TypeSet = TypeSet(127);

    pub fn has(self, bits: u8) -> bool {
        self.0 & bits != 0
    }

    fn from_name(name: &str) -> Option<u8> {
        Some(match name {
            "null" => Self::NULL,
            "boolean" => Self::BOOLEAN,
            "object" => Self::OBJECT,
            "array" => Self::ARRAY,
            "string" => Self::STRING,
            "integer" => Self::INTEGER,
            "number" => Self::INTEGER | Self::FRACTION,
            _ => return None,
        })
    }

    /// The type of a JSON value.
    pub fn of(v: &Value) -> u8 {
        match v {
            Value::Null => Self::NULL,
            Value::Bool(_) => Self::BOOLEAN,
            Value::Object(_) => Self::OBJECT,
            Value::Array(_) => Self::ARRAY,
            Value::String(_) => Self::STRING,
            Value::Number(n) => match Dec::from_number(n) {
                Some(d) if !d.is_integer() => Self::FRACTION,
                _ => Self::INTEGER,
            },
        }
    }
}

/// The object keywords of one schema object.
#[derive(Clone, Debug, Default)]
pub struct ObjPart<'a> {
    pub ptr: String,
    /// `properties`, in declared order: name and the pointer of its schema.
    pub props: Vec<(&'a str, String)>,
    /// `patternProperties`: pattern and the pointer of its schema.
    pub patterns: Vec<(&'a str, String)>,
    pub additional: Option<String>,
}

/// The array keywords of one schema object: the schemas of the first positions and of the
/// rest.
#[derive(Clone, Debug, Default)]
pub struct ArrPart {
    pub prefix: Vec<String>,
    pub rest: Option<String>,
}

/// Everything a conjunction asserts.
#[derive(Debug)]
pub struct Constraints<'a> {
    pub types: TypeSet,
    /// `enum`/`const` (intersected) and the pointer of the keyword that set it.
    pub enums: Option<(Vec<&'a Value>, String)>,
    pub min_len: (u64, String),
    pub max_len: Option<(u64, String)>,
    pub patterns: Vec<(String, &'a str)>,
    pub formats: Vec<(String, &'a str)>,
    pub lower: Option<Bound>,
    pub upper: Option<Bound>,
    pub multiple_of: Vec<(String, Dec)>,
    pub objs: Vec<ObjPart<'a>>,
    pub required: Vec<&'a str>,
    pub min_props: u64,
    pub max_props: Option<u64>,
    pub property_names: Vec<String>,
    /// `dependentRequired` (and array-valued `dependencies`): pointer, name, its dependents.
    pub dependent: Vec<(String, &'a str, Vec<&'a str>)>,
    pub arrs: Vec<ArrPart>,
    pub min_items: u64,
    pub max_items: Option<u64>,
    /// `contains` schema pointer with its `minContains`/`maxContains`.
    pub contains: Vec<(String, u64, Option<u64>)>,
    pub unique: Option<String>,
    pub nots: Vec<String>,
    /// Strings excluded by `not: {enum/const}`.
    pub not_strings: Vec<&'a str>,
    /// A boolean excluded by `not: {const: true}` (or `false`).
    pub not_bool: Option<bool>,
    /// Properties excluded by `not: {required: [name]}`.
    pub forbidden: Vec<&'a str>,
}

fn not_schema(ptr: &str, kw: &str, message: &str) -> SchemaError {
    SchemaError::NotASchema {
        pointer: format!("{ptr}/{kw}"),
        message: message.into(),
    }
}

fn count(ptr: &str, kw: &str, v: &Value) -> Result<u64, SchemaError> {
    if let Some(n) = v.as_u64() {
        return Ok(n);
    }
    match v.as_f64() {
        Some(f) if f >= 0.0 && f.fract() == 0.0 && f < 1e18 => Ok(f as u64),
        _ => Err(not_schema(ptr, kw, "must be a non-negative integer")),
    }
}

fn number(ptr: &str, kw: &str, v: &Value) -> Result<Dec, SchemaError> {
    v.as_number()
        .and_then(Dec::from_number)
        .ok_or_else(|| not_schema(ptr, kw, "must be a number"))
}

/// JSON equality as JSON Schema defines it: numbers by value (`1` equals `1.0`).
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => Dec::from_number(x) == Dec::from_number(y),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

impl<'a> Constraints<'a> {
    /// Gathers the keywords of every schema object in `conj`, recording each in `report`.
    pub fn gather(
        res: &Resolver<'a>,
        conj: &Conj,
        report: &mut Report,
    ) -> Result<Self, SchemaError> {
        let mut c = Constraints {
            types: TypeSet::ALL,
            enums: None,
            min_len: (0, String::new()),
            max_len: None,
            patterns: Vec::new(),
            formats: Vec::new(),
            lower: None,
            upper: None,
            multiple_of: Vec::new(),
            objs: Vec::new(),
            required: Vec::new(),
            min_props: 0,
            max_props: None,
            property_names: Vec::new(),
            dependent: Vec::new(),
            arrs: Vec::new(),
            min_items: 0,
            max_items: None,
            contains: Vec::new(),
            unique: None,
            nots: Vec::new(),
            not_strings: Vec::new(),
            not_bool: None,
            forbidden: Vec::new(),
        };
        for ptr in &conj.own {
            if let Some(Value::Object(map)) = res.get(ptr) {
                c.add_object(ptr, map, report)?;
            }
        }
        Ok(c)
    }

    fn add_object(
        &mut self,
        ptr: &str,
        map: &'a Map<String, Value>,
        report: &mut Report,
    ) -> Result<(), SchemaError> {
        let mut obj = ObjPart {
            ptr: ptr.to_owned(),
            ..Default::default()
        };
        let mut arr = ArrPart::default();
        let mut has_obj = false;
        let mut has_arr = false;
        for (kw, v) in map {
            let k = kw.as_str();
            match kind(k) {
                Kind::Annotation => report.record(ptr, k, Status::Annotation),
                Kind::Applicator => report.record(ptr, k, Status::Enforced),
                Kind::Unsupported => {
                    report.record(ptr, k, Status::Warning("not supported; ignored".into()))
                }
                Kind::Unknown => {
                    report.record(ptr, k, Status::Warning("unknown keyword; ignored".into()))
                }
                Kind::Assertion => {
                    report.record(ptr, k, Status::Enforced);
                    self.add_assertion(ptr, k, v, map, &mut obj, &mut arr, report)?;
                    has_obj |= matches!(
                        k,
                        "properties" | "patternProperties" | "additionalProperties"
                    );
                    has_arr |= matches!(k, "items" | "prefixItems");
                }
            }
        }
        if has_obj {
            self.objs.push(obj);
        }
        if has_arr {
            self.arrs.push(arr);
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn add_assertion(
        &mut self,
        ptr: &str,
        k: &str,
        v: &'a Value,
        map: &'a Map<String, Value>,
        obj: &mut ObjPart<'a>,
        arr: &mut ArrPart,
        report: &mut Report,
    ) -> Result<(), SchemaError> {
        let sub = |name: &str| format!("{ptr}/{k}/{}", escape(name));
        match k {
            "type" => {
                let bits = match v {
                    Value::String(s) => TypeSet::from_name(s)
                        .ok_or_else(|| not_schema(ptr, k, "unknown type name"))?,
                    Value::Array(names) => names.iter().try_fold(0u8, |acc, n| {
                        n.as_str()
                            .and_then(TypeSet::from_name)
                            .map(|b| acc | b)
                            .ok_or_else(|| not_schema(ptr, k, "unknown type name"))
                    })?,
                    _ => {
                        return Err(not_schema(
                            ptr,
                            k,
                            "must be a type name or an array of them",
                        ));
                    }
                };
                self.types = TypeSet(self.types.0 & bits);
            }
            "enum" | "const" => {
                let values: Vec<&'a Value> = match (k, v) {
                    ("const", v) => vec![v],
                    (_, Value::Array(vs)) => vs.iter().collect(),
                    _ => return Err(not_schema(ptr, k, "must be an array")),
                };
                let merged = match self.enums.take() {
                    None => values,
                    Some((old, _)) => old
                        .into_iter()
                        .filter(|o| values.iter().any(|n| json_eq(o, n)))
                        .collect(),
                };
                self.enums = Some((merged, format!("{ptr}/{k}")));
            }
            "minLength" => {
                let n = count(ptr, k, v)?;
                if n >= self.min_len.0 {
                    self.min_len = (n, ptr.to_owned());
                }
            }
            "maxLength" => {
                let n = count(ptr, k, v)?;
                if self.max_len.as_ref().is_none_or(|(m, _)| n < *m) {
                    self.max_len = Some((n, ptr.to_owned()));
                }
            }
            "pattern" => {
                let p = v
                    .as_str()
                    .ok_or_else(|| not_schema(ptr, k, "must be a string"))?;
                self.patterns.push((ptr.to_owned(), p));
            }
            "format" => {
                let f = v
                    .as_str()
                    .ok_or_else(|| not_schema(ptr, k, "must be a string"))?;
                self.formats.push((ptr.to_owned(), f));
            }
            "minimum" | "exclusiveMinimum" | "maximum" | "exclusiveMaximum" => {
                if let Value::Bool(_) = v {
                    // Draft 4: a flag on `minimum`/`maximum`, read with them.
                    return Ok(());
                }
                let value = number(ptr, k, v)?;
                let flag = |name: &str| matches!(map.get(name), Some(Value::Bool(true)));
                let bound = match k {
                    "minimum" => Bound {
                        value,
                        exclusive: flag("exclusiveMinimum"),
                    },
                    "maximum" => Bound {
                        value,
                        exclusive: flag("exclusiveMaximum"),
                    },
                    _ => Bound {
                        value,
                        exclusive: true,
                    },
                };
                if k.ends_with("inimum") {
                    self.lower = Some(Bound::max_lower(self.lower.take(), bound));
                } else {
                    self.upper = Some(Bound::min_upper(self.upper.take(), bound));
                }
            }
            "multipleOf" => {
                let d = number(ptr, k, v)?;
                if d.neg || d.is_zero() {
                    return Err(not_schema(ptr, k, "must be a number greater than 0"));
                }
                self.multiple_of.push((ptr.to_owned(), d));
            }
            "properties" => {
                let props = v
                    .as_object()
                    .ok_or_else(|| not_schema(ptr, k, "must be an object of schemas"))?;
                obj.props = props
                    .keys()
                    .map(|name| (name.as_str(), sub(name)))
                    .collect();
            }
            "patternProperties" => {
                let props = v
                    .as_object()
                    .ok_or_else(|| not_schema(ptr, k, "must be an object of schemas"))?;
                obj.patterns = props.keys().map(|p| (p.as_str(), sub(p))).collect();
            }
            "additionalProperties" => {
                check_schema(ptr, k, v)?;
                obj.additional = Some(format!("{ptr}/{k}"));
            }
            "required" => match v {
                Value::Array(names) => {
                    for n in names {
                        let n = n
                            .as_str()
                            .ok_or_else(|| not_schema(ptr, k, "must be an array of strings"))?;
                        if !self.required.contains(&n) {
                            self.required.push(n);
                        }
                    }
                }
                // Draft 3's boolean `required` inside a property.
                _ => report.record(
                    ptr,
                    k,
                    Status::Warning("draft 3 boolean form; ignored".into()),
                ),
            },
            "minProperties" => self.min_props = self.min_props.max(count(ptr, k, v)?),
            "maxProperties" => {
                let n = count(ptr, k, v)?;
                self.max_props = Some(self.max_props.map_or(n, |m| m.min(n)));
            }
            "propertyNames" => {
                check_schema(ptr, k, v)?;
                self.property_names.push(format!("{ptr}/{k}"));
            }
            "dependentRequired" | "dependencies" => {
                let deps = v
                    .as_object()
                    .ok_or_else(|| not_schema(ptr, k, "must be an object"))?;
                for (name, d) in deps {
                    match d {
                        Value::Array(names) => {
                            let names: Option<Vec<&str>> = names.iter().map(Value::as_str).collect();
                            let names = names.ok_or_else(|| not_schema(ptr, k, "dependents must be strings"))?;
                            self.dependent.push((ptr.to_owned(), name.as_str(), names));
                        }
                        _ if k == "dependencies" => report.record(
                            ptr,
                            k,
                            Status::Warning(format!("schema dependency of '{name}' (dependentSchemas) not supported; ignored")),
                        ),
                        _ => return Err(not_schema(ptr, k, "dependents must be an array of strings")),
                    }
                }
            }
            "prefixItems" => {
                let items = v
                    .as_array()
                    .ok_or_else(|| not_schema(ptr, k, "must be an array of schemas"))?;
                arr.prefix = (0..items.len()).map(|i| format!("{ptr}/{k}/{i}")).collect();
            }
            "items" => match v {
                Value::Array(items) => {
                    if map.contains_key("prefixItems") {
                        return Err(not_schema(ptr, k, "an array beside prefixItems"));
                    }
                    arr.prefix = (0..items.len()).map(|i| format!("{ptr}/{k}/{i}")).collect();
                    if map.contains_key("additionalItems") {
                        arr.rest = Some(format!("{ptr}/additionalItems"));
                    }
                }
                _ => {
                    check_schema(ptr, k, v)?;
                    arr.rest = Some(format!("{ptr}/{k}"));
                }
            },
            "additionalItems" => {
                check_schema(ptr, k, v)?;
                if !matches!(map.get("items"), Some(Value::Array(_))) {
                    // Without an array-form `items` it has no effect.
                    report.record(ptr, k, Status::Annotation);
                }
            }
            "minItems" => self.min_items = self.min_items.max(count(ptr, k, v)?),
            "maxItems" => {
                let n = count(ptr, k, v)?;
                self.max_items = Some(self.max_items.map_or(n, |m| m.min(n)));
            }
            "contains" => {
                check_schema(ptr, k, v)?;
                let min = match map.get("minContains") {
                    Some(m) => count(ptr, "minContains", m)?,
                    None => 1,
                };
                let max = map
                    .get("maxContains")
                    .map(|m| count(ptr, "maxContains", m))
                    .transpose()?;
                self.contains.push((format!("{ptr}/{k}"), min, max));
            }
            "minContains" | "maxContains" => {
                count(ptr, k, v)?;
                if !map.contains_key("contains") {
                    report.record(ptr, k, Status::Annotation);
                }
            }
            "uniqueItems" => match v {
                Value::Bool(true) => self.unique = Some(ptr.to_owned()),
                Value::Bool(false) => {}
                _ => return Err(not_schema(ptr, k, "must be a boolean")),
            },
            "not" => {
                check_schema(ptr, k, v)?;
                self.nots.push(format!("{ptr}/{k}"));
            }
            _ => {}
        }
        Ok(())
    }
}

fn check_schema(ptr: &str, k: &str, v: &Value) -> Result<(), SchemaError> {
    match v {
        Value::Object(_) | Value::Bool(_) => Ok(()),
        other => Err(not_schema(
            ptr,
            k,
            &format!("must be a schema, not {}", kind_of(other)),
        )),
    }
}
