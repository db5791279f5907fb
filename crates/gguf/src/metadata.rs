//! Metadata key-value pairs with typed getters whose errors name the key.

use std::collections::HashMap;

use crate::error::{GgufError, Result};
use crate::value::{Array, GgufStr, Value};

/// The metadata of a GGUF file, in file order.
#[derive(Debug, Clone, Default)]
pub struct Metadata<'a> {
    entries: Vec<(&'a str, Value<'a>)>,
    index: HashMap<&'a str, usize>,
}

/// A Rust type a metadata value converts to. Integers convert between widths when the
/// value fits (files disagree on `u32` vs `i32` vs `u64` for counts); floats accept
/// `f32` and `f64`.
pub trait FromValue<'a>: Sized {
    /// The name used in errors (`"u32"`, `"string"`…).
    const EXPECTED: &'static str;
    /// The converted value, or `None` if the value has another type or does not fit.
    fn from_value(v: &Value<'a>) -> Option<Self>;
}

macro_rules! int_from_value {
    ($($t:ty),*) => {$(
        impl<'a> FromValue<'a> for $t {
            const EXPECTED: &'static str = stringify!($t);
            fn from_value(v: &Value<'a>) -> Option<Self> {
                v.as_integer().and_then(|i| <$t>::try_from(i).ok())
            }
        }
    )*};
}
int_from_value!(u8, i8, u16, i16, u32, i32, u64, i64, usize);

impl<'a> FromValue<'a> for f32 {
    const EXPECTED: &'static str = "f32";
    fn from_value(v: &Value<'a>) -> Option<Self> {
        match *v {
            Value::F32(x) => Some(x),
            Value::F64(x) => Some(x as f32),
            _ => None,
        }
    }
}

impl<'a> FromValue<'a> for f64 {
    const EXPECTED: &'static str = "f64";
    fn from_value(v: &Value<'a>) -> Option<Self> {
        v.as_float()
    }
}

impl<'a> FromValue<'a> for bool {
    const EXPECTED: &'static str = "bool";
    fn from_value(v: &Value<'a>) -> Option<Self> {
        match *v {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }
}

impl<'a> FromValue<'a> for &'a str {
    const EXPECTED: &'static str = "a UTF-8 string";
    fn from_value(v: &Value<'a>) -> Option<Self> {
        v.as_gguf_str().and_then(|s| s.to_str())
    }
}

impl<'a> FromValue<'a> for GgufStr<'a> {
    const EXPECTED: &'static str = "str";
    fn from_value(v: &Value<'a>) -> Option<Self> {
        v.as_gguf_str()
    }
}

impl<'a> FromValue<'a> for Array<'a> {
    const EXPECTED: &'static str = "arr";
    fn from_value(v: &Value<'a>) -> Option<Self> {
        v.as_array()
    }
}

impl<'a> FromValue<'a> for Value<'a> {
    const EXPECTED: &'static str = "any value";
    fn from_value(v: &Value<'a>) -> Option<Self> {
        Some(*v)
    }
}

impl<'a> Metadata<'a> {
    pub(crate) fn with_capacity(n: usize) -> Self {
        Metadata {
            entries: Vec::with_capacity(n),
            index: HashMap::with_capacity(n),
        }
    }

    pub(crate) fn insert(&mut self, key: &'a str, value: Value<'a>) -> Result<()> {
        if self.index.insert(key, self.entries.len()).is_some() {
            return Err(GgufError::DuplicateKey {
                key: key.to_string(),
            });
        }
        self.entries.push((key, value));
        Ok(())
    }

    /// Every pair in file order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&'a str, &Value<'a>)> + '_ {
        self.entries.iter().map(|(k, v)| (*k, v))
    }
    /// The number of pairs.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// The raw value of a key.
    pub fn get(&self, key: &str) -> Option<&Value<'a>> {
        self.index.get(key).map(|&i| &self.entries[i].1)
    }
    /// Whether the key is present.
    pub fn contains(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }

    /// A value converted to `T`; errors name the key when it is missing or of another type.
    pub fn require<T: FromValue<'a>>(&self, key: &str) -> Result<T> {
        self.optional(key)?.ok_or_else(|| GgufError::MissingKey {
            key: key.to_string(),
        })
    }

    /// A value converted to `T`, `None` when missing; an error naming the key when the
    /// value has another type.
    pub fn optional<T: FromValue<'a>>(&self, key: &str) -> Result<Option<T>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => T::from_value(v)
                .map(Some)
                .ok_or_else(|| GgufError::WrongType {
                    key: key.to_string(),
                    expected: T::EXPECTED,
                    found: v.value_type(),
                }),
        }
    }

    /// A value converted to `T`, or `default` when missing.
    pub fn get_or<T: FromValue<'a>>(&self, key: &str, default: T) -> Result<T> {
        Ok(self.optional(key)?.unwrap_or(default))
    }

    /// A required `u32` (any integer type that fits).
    pub fn get_u32(&self, key: &str) -> Result<u32> {
        self.require(key)
    }
    /// A required `u64` (any integer type that fits).
    pub fn get_u64(&self, key: &str) -> Result<u64> {
        self.require(key)
    }
    /// A required `i32` (any integer type that fits).
    pub fn get_i32(&self, key: &str) -> Result<i32> {
        self.require(key)
    }
    /// A required `f32` (`f32` or `f64`).
    pub fn get_f32(&self, key: &str) -> Result<f32> {
        self.require(key)
    }
    /// A required `bool`.
    pub fn get_bool(&self, key: &str) -> Result<bool> {
        self.require(key)
    }
    /// A required UTF-8 string.
    pub fn get_str(&self, key: &str) -> Result<&'a str> {
        self.require(key)
    }
    /// A required array.
    pub fn get_array(&self, key: &str) -> Result<Array<'a>> {
        self.require(key)
    }

    /// `general.architecture`.
    pub fn architecture(&self) -> Result<&'a str> {
        self.get_str("general.architecture")
    }

    /// The key `{architecture}.{suffix}`, e.g. `arch_key("context_length")` is
    /// `llama.context_length` in a llama file.
    pub fn arch_key(&self, suffix: &str) -> Result<String> {
        Ok(format!("{}.{suffix}", self.architecture()?))
    }

    /// A required value under the architecture's prefix: `arch_require::<u32>("block_count")`
    /// reads `llama.block_count`, and a missing key is named in full in the error.
    pub fn arch_require<T: FromValue<'a>>(&self, suffix: &str) -> Result<T> {
        self.require(&self.arch_key(suffix)?)
    }

    /// An optional value under the architecture's prefix.
    pub fn arch_optional<T: FromValue<'a>>(&self, suffix: &str) -> Result<Option<T>> {
        self.optional(&self.arch_key(suffix)?)
    }
}
