//! The GGUF container: header, metadata and tensor table, read from a byte slice without
//! copying.

use std::collections::HashMap;

use crate::cursor::Cursor;
use crate::error::{GgufError, Result};
use crate::metadata::Metadata;
use crate::types::GgmlType;
use crate::value::{Value, read_type};

/// The four bytes every GGUF file starts with.
pub const GGUF_MAGIC: [u8; 4] = *b"GGUF";
/// The alignment of tensor data when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// ggml's maximum number of tensor dimensions.
pub const MAX_DIMS: usize = 4;

/// Limits of the reader, applied before anything is allocated. Every count and length is
/// also checked against the bytes left in the file, so no allocation is larger than the
/// file; these bound what a well-formed but hostile file can ask for.
#[derive(Debug, Clone, Copy)]
pub struct Limits;

impl Limits {
    /// Nesting of arrays inside metadata arrays. Real files nest at most 2 deep
    /// (`tokenizer.ggml.merges` is 1).
    pub const MAX_ARRAY_DEPTH: u32 = 8;
    /// Elements in one tensor (2^50; the largest real tensors hold about 2^32).
    pub const MAX_TENSOR_ELEMENTS: u64 = 1 << 50;
}

/// Header fields of a GGUF file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// 2 or 3.
    pub version: u32,
    /// Entries in the tensor table.
    pub tensor_count: u64,
    /// Metadata key-value pairs.
    pub metadata_count: u64,
}

/// One entry of the tensor table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo<'a> {
    /// The tensor's name (`blk.0.attn_q.weight`…).
    pub name: &'a str,
    /// The ggml type of its elements.
    pub ty: GgmlType,
    /// Dimensions, innermost (contiguous) first, as ggml's `ne`; `n_dims` of them.
    pub dims: Vec<u64>,
    /// Offset of its data from the start of the data section.
    pub offset: u64,
    /// Bytes of data.
    pub size: u64,
    /// Index in the tensor table.
    pub index: usize,
}

impl TensorInfo<'_> {
    /// Total number of elements.
    pub fn elements(&self) -> u64 {
        self.dims.iter().product()
    }
    /// The shape outermost first (the PyTorch / NumPy order).
    pub fn shape_row_major(&self) -> Vec<u64> {
        self.dims.iter().rev().copied().collect()
    }
}

/// A parsed GGUF file over a byte slice: metadata and tensor table are views of the bytes.
///
/// [`Gguf::parse`] needs the whole file; [`Gguf::parse_header`] needs only the header and
/// tensor table (the data may be elsewhere, as in the streaming reader).
#[derive(Debug, Clone)]
pub struct Gguf<'a> {
    bytes: &'a [u8],
    header: Header,
    metadata: Metadata<'a>,
    tensors: Vec<TensorInfo<'a>>,
    by_name: HashMap<&'a str, usize>,
    alignment: u64,
    data_offset: u64,
    /// Bytes of tensor data the table needs (the end of the last tensor).
    data_size: u64,
}

impl<'a> Gguf<'a> {
    /// Parses a whole file: header, metadata, tensor table, and checks that every tensor's
    /// data lies inside `bytes`.
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        let gguf = Self::parse_header(bytes)?;
        let data_len = (bytes.len() as u64).saturating_sub(gguf.data_offset);
        if gguf.tensors.is_empty() {
            return Ok(gguf);
        }
        if gguf.data_offset > bytes.len() as u64 {
            return Err(GgufError::Truncated {
                offset: bytes.len() as u64,
                needed: gguf.data_offset - bytes.len() as u64,
                what: "padding before the tensor data",
                context: String::new(),
            });
        }
        for t in &gguf.tensors {
            let end = t.offset + t.size;
            if end > data_len {
                return Err(GgufError::TensorOutOfBounds {
                    tensor: t.name.to_string(),
                    offset: t.offset,
                    end,
                    data_len,
                });
            }
        }
        Ok(gguf)
    }

    /// Parses the header, metadata and tensor table from a prefix of a file. Tensor data
    /// need not be present: [`Gguf::tensor_data`] returns an empty slice for tensors
    /// outside `bytes`. A prefix too short gives [`GgufError::Truncated`].
    pub fn parse_header(bytes: &'a [u8]) -> Result<Self> {
        let mut cur = Cursor::new(bytes);
        let header = read_header(&mut cur)?;

        let mut metadata = Metadata::with_capacity(header.metadata_count as usize);
        for i in 0..header.metadata_count {
            cur.context = format!(" (metadata entry {i})");
            let key = cur.str("a metadata key")?;
            cur.context = format!(" (metadata key '{key}')");
            let ty = read_type(&mut cur)?;
            let value = Value::read(&mut cur, ty, Limits::MAX_ARRAY_DEPTH)?;
            metadata.insert(key, value)?;
        }
        cur.context.clear();

        let alignment = match metadata.get("general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some(Value::U32(a)) if *a != 0 && a.is_power_of_two() => u64::from(*a),
            Some(v) => {
                return Err(GgufError::BadAlignment {
                    value: v
                        .as_integer()
                        .and_then(|i| u64::try_from(i).ok())
                        .unwrap_or(0),
                });
            }
        };

        let mut tensors = Vec::with_capacity(header.tensor_count as usize);
        let mut by_name = HashMap::with_capacity(header.tensor_count as usize);
        for index in 0..header.tensor_count as usize {
            cur.context = format!(" (tensor table entry {index})");
            let t = read_tensor_info(&mut cur, index, alignment)?;
            if by_name.insert(t.name, index).is_some() {
                return Err(GgufError::DuplicateTensor {
                    name: t.name.to_string(),
                });
            }
            tensors.push(t);
        }
        check_overlaps(&tensors)?;
        let data_size = tensors.iter().map(|t| t.offset + t.size).max().unwrap_or(0);

        let end = cur.pos() as u64;
        let data_offset = end.div_ceil(alignment) * alignment;
        // Every tensor's absolute end must be a file position.
        if let Some(t) = tensors
            .iter()
            .find(|t| data_offset.checked_add(t.offset + t.size).is_none())
        {
            return Err(GgufError::TensorOutOfBounds {
                tensor: t.name.to_string(),
                offset: t.offset,
                end: u64::MAX,
                data_len: u64::MAX - data_offset,
            });
        }
        Ok(Gguf {
            bytes,
            header,
            metadata,
            tensors,
            by_name,
            alignment,
            data_offset,
            data_size,
        })
    }

    /// The header fields.
    pub fn header(&self) -> Header {
        self.header
    }
    /// The GGUF version (2 or 3).
    pub fn version(&self) -> u32 {
        self.header.version
    }
    /// The metadata, in file order, with typed getters.
    pub fn metadata(&self) -> &Metadata<'a> {
        &self.metadata
    }
    /// The alignment of tensor data (`general.alignment`, default 32).
    pub fn alignment(&self) -> u64 {
        self.alignment
    }
    /// The byte offset where the data section starts.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }
    /// Bytes of the data section the tensor table uses (end of the furthest tensor).
    pub fn data_size(&self) -> u64 {
        self.data_size
    }
    /// The whole file's bytes as given to the parser.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The tensor table, in file order.
    pub fn tensors(&self) -> &[TensorInfo<'a>] {
        &self.tensors
    }
    /// A tensor by name.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo<'a>> {
        self.by_name.get(name).map(|&i| &self.tensors[i])
    }
    /// A tensor by name, or an error naming it.
    pub fn require_tensor(&self, name: &str) -> Result<&TensorInfo<'a>> {
        self.tensor(name).ok_or_else(|| GgufError::MissingTensor {
            name: name.to_string(),
        })
    }

    /// The bytes of a tensor of this file, without copying. Bounds were checked by
    /// [`Gguf::parse`]; after [`Gguf::parse_header`] on a prefix, a tensor whose data is not
    /// in the prefix (or a `TensorInfo` from another file) gives an empty slice.
    pub fn tensor_data(&self, info: &TensorInfo<'_>) -> &'a [u8] {
        let start = self.data_offset.saturating_add(info.offset);
        let end = start.saturating_add(info.size);
        usize::try_from(start)
            .ok()
            .zip(usize::try_from(end).ok())
            .and_then(|(s, e)| self.bytes.get(s..e))
            .unwrap_or(&[])
    }

    /// A tensor's bytes by name.
    pub fn tensor_data_by_name(&self, name: &str) -> Result<&'a [u8]> {
        Ok(self.tensor_data(self.require_tensor(name)?))
    }

    /// `general.architecture` (`llama`, `qwen2`, `gemma3`…).
    pub fn architecture(&self) -> Result<&'a str> {
        self.metadata.get_str("general.architecture")
    }
}

pub(crate) fn read_header(cur: &mut Cursor<'_>) -> Result<Header> {
    let magic = cur.take(4, "the magic")?;
    if magic != GGUF_MAGIC {
        return Err(GgufError::BadMagic {
            found: [magic[0], magic[1], magic[2], magic[3]],
        });
    }
    let version = cur.u32("the version")?;
    if version & 0xFFFF == 0 && version != 0 {
        return Err(GgufError::BigEndian {
            swapped: version.swap_bytes(),
        });
    }
    if !(2..=3).contains(&version) {
        return Err(GgufError::UnsupportedVersion { version });
    }
    // A tensor-table entry takes at least 8 (name length) + 4 (n_dims) + 4 (type) + 8
    // (offset) bytes; a metadata entry at least 8 (key length) + 4 (type) + 1 (value).
    let tensor_count = cur.count("the tensor count", 24)?;
    let metadata_count = cur.count("the metadata count", 13)?;
    Ok(Header {
        version,
        tensor_count,
        metadata_count,
    })
}

fn read_tensor_info<'a>(
    cur: &mut Cursor<'a>,
    index: usize,
    alignment: u64,
) -> Result<TensorInfo<'a>> {
    let name = cur.str("a tensor name")?;
    cur.context = format!(" (tensor '{name}')");
    let dims_offset = cur.pos() as u64;
    let n_dims = cur.u32("a tensor's number of dimensions")?;
    if n_dims as usize > MAX_DIMS {
        return Err(GgufError::LimitExceeded {
            offset: dims_offset,
            what: "a tensor's number of dimensions",
            value: n_dims.into(),
            limit: MAX_DIMS as u64,
            context: cur.context.clone(),
        });
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    for _ in 0..n_dims {
        dims.push(cur.u64("a tensor dimension")?);
    }
    let type_id = cur.u32("a tensor type")?;
    let offset = cur.u64("a tensor offset")?;
    let bad_shape = |reason| GgufError::BadTensorShape {
        tensor: name.to_string(),
        shape: dims.clone(),
        reason,
    };
    let ty = GgmlType::from_id(type_id).ok_or_else(|| GgufError::UnknownTensorType {
        tensor: name.to_string(),
        type_id,
    })?;
    // ggml stores dimensions as int64_t.
    if dims.iter().any(|&d| d > i64::MAX as u64) {
        return Err(bad_shape("a dimension is larger than i64::MAX"));
    }
    let elements = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= Limits::MAX_TENSOR_ELEMENTS)
        .ok_or_else(|| bad_shape("the number of elements overflows or exceeds 2^50"))?;
    let row = dims.first().copied().unwrap_or(1);
    let row_bytes = ty
        .row_size(row)
        .ok_or_else(|| bad_shape("the row length is not a multiple of the block size"))?;
    let rows = elements.checked_div(row).unwrap_or(0);
    let size = row_bytes
        .checked_mul(rows)
        .ok_or_else(|| bad_shape("the size overflows"))?;
    if offset % alignment != 0 {
        return Err(GgufError::TensorMisaligned {
            tensor: name.to_string(),
            offset,
            alignment,
        });
    }
    if offset.checked_add(size).is_none() {
        return Err(GgufError::TensorOutOfBounds {
            tensor: name.to_string(),
            offset,
            end: u64::MAX,
            data_len: 0,
        });
    }
    Ok(TensorInfo {
        name,
        ty,
        dims,
        offset,
        size,
        index,
    })
}

fn check_overlaps(tensors: &[TensorInfo<'_>]) -> Result<()> {
    let mut order: Vec<&TensorInfo<'_>> = tensors.iter().filter(|t| t.size > 0).collect();
    order.sort_by_key(|t| t.offset);
    for pair in order.windows(2) {
        if pair[0].offset + pair[0].size > pair[1].offset {
            return Err(GgufError::TensorsOverlap {
                first: pair[0].name.to_string(),
                second: pair[1].name.to_string(),
            });
        }
    }
    Ok(())
}
