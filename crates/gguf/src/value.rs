//! Metadata values, read without copying: strings and arrays are views of the file's bytes.
//!
//! Arrays are validated once when the file is parsed (every nested length checked against
//! the bytes left); iterating them later re-reads those validated bytes and cannot fail.

use std::fmt;

use crate::cursor::Cursor;
use crate::error::{GgufError, Result};

/// The type tag of a metadata value (`gguf_type` in ggml).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl ValueType {
    /// The type for a tag, if it is one of the 13 GGUF knows.
    pub fn from_u32(id: u32) -> Option<Self> {
        use ValueType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    /// Bytes of one value of a fixed-size type; `None` for strings and arrays.
    pub fn fixed_size(self) -> Option<usize> {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => Some(1),
            U16 | I16 => Some(2),
            U32 | I32 | F32 => Some(4),
            U64 | I64 | F64 => Some(8),
            String | Array => None,
        }
    }

    /// The fewest bytes one value of this type can take: arrays of this type are checked
    /// against the bytes left with it before anything is read.
    pub(crate) fn min_size(self) -> u64 {
        match self {
            ValueType::String => 8,
            ValueType::Array => 12,
            other => other.fixed_size().unwrap_or(1) as u64,
        }
    }

    /// The name GGUF tools print (`u32`, `str`, `arr`…).
    pub fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "str",
            Array => "arr",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A GGUF string: raw bytes from the file. Keys and tensor names are checked for UTF-8
/// when the file is parsed; values are checked when asked for as `&str`, since a
/// vocabulary may hold byte strings that are not valid UTF-8.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct GgufStr<'a>(pub &'a [u8]);

impl<'a> GgufStr<'a> {
    /// The raw bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.0
    }
    /// The text, if it is valid UTF-8.
    pub fn to_str(&self) -> Option<&'a str> {
        std::str::from_utf8(self.0).ok()
    }
    /// The text with invalid sequences replaced by U+FFFD.
    pub fn to_string_lossy(&self) -> std::borrow::Cow<'a, str> {
        String::from_utf8_lossy(self.0)
    }
}

impl fmt::Debug for GgufStr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.to_string_lossy(), f)
    }
}

impl fmt::Display for GgufStr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_string_lossy())
    }
}

/// One metadata value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(GgufStr<'a>),
    Array(Array<'a>),
    U64(u64),
    I64(i64),
    F64(f64),
}

impl<'a> Value<'a> {
    /// The type tag.
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
        }
    }

    /// Any integer type as `i128` (so every GGUF integer fits); `None` for other types.
    pub fn as_integer(&self) -> Option<i128> {
        Some(match *self {
            Value::U8(v) => v.into(),
            Value::I8(v) => v.into(),
            Value::U16(v) => v.into(),
            Value::I16(v) => v.into(),
            Value::U32(v) => v.into(),
            Value::I32(v) => v.into(),
            Value::U64(v) => v.into(),
            Value::I64(v) => v.into(),
            _ => return None,
        })
    }

    /// `f32` or `f64` as `f64`.
    pub fn as_float(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            _ => None,
        }
    }

    /// The string, if this is a string.
    pub fn as_gguf_str(&self) -> Option<GgufStr<'a>> {
        match *self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The array, if this is an array.
    pub fn as_array(&self) -> Option<Array<'a>> {
        match *self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// Reads one value of type `ty` (its tag already read). Arrays are validated recursively
    /// down to `depth_left` levels and returned as views.
    pub(crate) fn read(cur: &mut Cursor<'a>, ty: ValueType, depth_left: u32) -> Result<Self> {
        let what = "a metadata value";
        Ok(match ty {
            ValueType::U8 => Value::U8(cur.u8(what)?),
            ValueType::I8 => Value::I8(cur.u8(what)? as i8),
            ValueType::U16 => Value::U16(u16::from_le_bytes(take2(cur, what)?)),
            ValueType::I16 => Value::I16(i16::from_le_bytes(take2(cur, what)?)),
            ValueType::U32 => Value::U32(cur.u32(what)?),
            ValueType::I32 => Value::I32(cur.u32(what)? as i32),
            ValueType::F32 => Value::F32(f32::from_bits(cur.u32(what)?)),
            ValueType::U64 => Value::U64(cur.u64(what)?),
            ValueType::I64 => Value::I64(cur.u64(what)? as i64),
            ValueType::F64 => Value::F64(f64::from_bits(cur.u64(what)?)),
            ValueType::Bool => {
                let offset = cur.pos() as u64;
                match cur.u8(what)? {
                    0 => Value::Bool(false),
                    1 => Value::Bool(true),
                    value => {
                        return Err(GgufError::InvalidBool {
                            offset,
                            value,
                            context: cur.context.clone(),
                        });
                    }
                }
            }
            ValueType::String => Value::String(GgufStr(cur.string_bytes("a string value")?)),
            ValueType::Array => Value::Array(Array::read(cur, depth_left)?),
        })
    }
}

fn take2(cur: &mut Cursor<'_>, what: &'static str) -> Result<[u8; 2]> {
    let b = cur.take(2, what)?;
    Ok([b[0], b[1]])
}

/// Reads a value type tag.
pub(crate) fn read_type(cur: &mut Cursor<'_>) -> Result<ValueType> {
    let offset = cur.pos() as u64;
    let id = cur.u32("a metadata value type")?;
    ValueType::from_u32(id).ok_or_else(|| GgufError::UnknownValueType {
        offset,
        type_id: id,
        context: cur.context.clone(),
    })
}

/// A metadata array: its element type, length and the bytes that hold its elements.
#[derive(Clone, Copy, PartialEq)]
pub struct Array<'a> {
    elem: ValueType,
    len: usize,
    /// The elements' bytes, validated at parse time.
    data: &'a [u8],
    /// Levels of nesting allowed below this array (validated at parse time).
    depth_left: u32,
}

impl fmt::Debug for Array<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Array<{}>[{}]", self.elem, self.len)
    }
}

impl<'a> Array<'a> {
    fn read(cur: &mut Cursor<'a>, depth_left: u32) -> Result<Self> {
        let start_offset = cur.pos() as u64;
        if depth_left == 0 {
            return Err(GgufError::NestingTooDeep {
                offset: start_offset,
                limit: crate::Limits::MAX_ARRAY_DEPTH,
                context: cur.context.clone(),
            });
        }
        let elem = read_type(cur)?;
        let len = cur.count("an array length", elem.min_size())?;
        let start = cur.pos();
        if let Some(size) = elem.fixed_size() {
            // `count` checked len * min_size <= bytes left, and min_size == size here.
            let data = cur.take(len * size as u64, "array elements")?;
            if elem == ValueType::Bool
                && let Some(i) = data.iter().position(|&b| b > 1)
            {
                return Err(GgufError::InvalidBool {
                    offset: (start + i) as u64,
                    value: data[i],
                    context: cur.context.clone(),
                });
            }
            return Ok(Array {
                elem,
                len: len as usize,
                data,
                depth_left: depth_left - 1,
            });
        }
        for _ in 0..len {
            Value::read(cur, elem, depth_left - 1)?;
        }
        let end = cur.pos();
        let data = cur.span(start, end);
        Ok(Array {
            elem,
            len: len as usize,
            data,
            depth_left: depth_left - 1,
        })
    }

    /// The element type.
    pub fn elem_type(&self) -> ValueType {
        self.elem
    }
    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The raw little-endian bytes of the elements (for fixed-size element types, the
    /// packed values; for strings and arrays, their length-prefixed encodings).
    pub fn raw_bytes(&self) -> &'a [u8] {
        self.data
    }

    /// Every element, in order.
    pub fn iter(&self) -> ArrayIter<'a> {
        ArrayIter {
            cur: Cursor::new(self.data),
            elem: self.elem,
            left: self.len,
            depth_left: self.depth_left,
        }
    }

    /// Element `i` in O(1) for fixed-size types, O(i) for strings and arrays.
    pub fn get(&self, i: usize) -> Option<Value<'a>> {
        if i >= self.len {
            return None;
        }
        match self.elem.fixed_size() {
            Some(size) => {
                let mut cur = Cursor::new(&self.data[i * size..(i + 1) * size]);
                Value::read(&mut cur, self.elem, 0).ok()
            }
            None => self.iter().nth(i),
        }
    }

    /// The elements as strings, or `None` if this is not an array of strings.
    pub fn strings(&self) -> Option<impl ExactSizeIterator<Item = GgufStr<'a>> + 'a> {
        (self.elem == ValueType::String).then(|| StringIter {
            cur: Cursor::new(self.data),
            left: self.len,
        })
    }

    /// The elements as `f32`, or `None` if this is not an array of `f32`.
    pub fn f32s(&self) -> Option<impl ExactSizeIterator<Item = f32> + 'a> {
        (self.elem == ValueType::F32).then(|| {
            self.data
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        })
    }

    /// Integer elements of any integer type as `i64`, or `None` if the element type is not
    /// an integer type (u64 values above `i64::MAX` are `None` too).
    pub fn integers(&self) -> Option<Vec<i64>> {
        if !matches!(
            self.elem,
            ValueType::U8
                | ValueType::I8
                | ValueType::U16
                | ValueType::I16
                | ValueType::U32
                | ValueType::I32
                | ValueType::U64
                | ValueType::I64
        ) {
            return None;
        }
        self.iter()
            .map(|v| v.as_integer().and_then(|i| i64::try_from(i).ok()))
            .collect()
    }
}

impl<'a> IntoIterator for Array<'a> {
    type Item = Value<'a>;
    type IntoIter = ArrayIter<'a>;
    fn into_iter(self) -> ArrayIter<'a> {
        self.iter()
    }
}

/// Iterator over an [`Array`]'s elements.
#[derive(Clone, Debug)]
pub struct ArrayIter<'a> {
    cur: Cursor<'a>,
    elem: ValueType,
    left: usize,
    depth_left: u32,
}

impl<'a> Iterator for ArrayIter<'a> {
    type Item = Value<'a>;
    fn next(&mut self) -> Option<Value<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // The bytes were validated at parse time, so this cannot fail.
        Value::read(&mut self.cur, self.elem, self.depth_left).ok()
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for ArrayIter<'_> {}

struct StringIter<'a> {
    cur: Cursor<'a>,
    left: usize,
}

impl<'a> Iterator for StringIter<'a> {
    type Item = GgufStr<'a>;
    fn next(&mut self) -> Option<GgufStr<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        self.cur.string_bytes("a string").ok().map(GgufStr)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for StringIter<'_> {}
