//! Typed, field-by-field reading of a JSON body. Every read marks the key as known, so what
//! is left at the end are the fields nobody asked for: they become warnings, never silence.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::error::{Error, json_type_name};

/// Reads fields out of one JSON object, remembering which keys were looked at.
pub(crate) struct Fields<'a> {
    map: &'a Map<String, Value>,
    seen: BTreeSet<&'a str>,
}

impl<'a> Fields<'a> {
    pub(crate) fn new(map: &'a Map<String, Value>) -> Self {
        Self {
            map,
            seen: BTreeSet::new(),
        }
    }

    /// The value under `key`, with `null` read as absent, as llama.cpp's `json_value` does.
    pub(crate) fn get(&mut self, key: &'a str) -> Option<&'a Value> {
        let (k, v) = self.map.get_key_value(key)?;
        self.seen.insert(k.as_str());
        (!v.is_null()).then_some(v)
    }

    /// Whether `key` is present with a non-null value (and marks it known).
    pub(crate) fn has(&mut self, key: &'a str) -> bool {
        self.get(key).is_some()
    }

    pub(crate) fn f32(&mut self, key: &'a str, default: f32) -> Result<f32, Error> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_f64()
                .map(|x| x as f32)
                .ok_or_else(|| type_error(key, "a number", v)),
        }
    }

    /// An integer; an integral float such as `64.0` is accepted (nlohmann converts it too),
    /// a fractional one is an error rather than a silent truncation.
    pub(crate) fn i64(&mut self, key: &'a str, default: i64) -> Result<i64, Error> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => as_integer(v).ok_or_else(|| type_error(key, "an integer", v)),
        }
    }

    pub(crate) fn bool(&mut self, key: &'a str, default: bool) -> Result<bool, Error> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| type_error(key, "a boolean", v)),
        }
    }

    pub(crate) fn string(&mut self, key: &'a str) -> Result<Option<&'a str>, Error> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .map(Some)
                .ok_or_else(|| type_error(key, "a string", v)),
        }
    }

    pub(crate) fn object(&mut self, key: &'a str) -> Result<Option<&'a Map<String, Value>>, Error> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_object()
                .map(Some)
                .ok_or_else(|| type_error(key, "an object", v)),
        }
    }

    pub(crate) fn array(&mut self, key: &'a str) -> Result<Option<&'a Vec<Value>>, Error> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_array()
                .map(Some)
                .ok_or_else(|| type_error(key, "an array", v)),
        }
    }

    /// The keys present in the body that no read touched, in body order.
    pub(crate) fn unread(&self) -> Vec<String> {
        self.map
            .keys()
            .filter(|k| !self.seen.contains(k.as_str()))
            .cloned()
            .collect()
    }
}

pub(crate) fn as_integer(v: &Value) -> Option<i64> {
    if let Some(i) = v.as_i64() {
        return Some(i);
    }
    let f = v.as_f64()?;
    (f.fract() == 0.0 && f.abs() < 9.0e15).then_some(f as i64)
}

pub(crate) fn type_error(field: &str, expected: &'static str, got: &Value) -> Error {
    Error::FieldType {
        field: field.to_string(),
        expected,
        got: describe(got),
    }
}

/// A short description of a value for error messages: its type and a clipped rendering.
fn describe(v: &Value) -> String {
    let mut text = v.to_string();
    if text.len() > 40 {
        let cut = (0..=40)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        text.truncate(cut);
        text.push('…');
    }
    format!("{} ({text})", json_type_name(v))
}
