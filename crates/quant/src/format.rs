//! The ggml block formats the quantised matmul reads, with their block geometry.
//!
//! Weights keep the exact byte layout of the GGUF file (one row of `cols` values is
//! `cols / block_len` blocks of `block_bytes` bytes); nothing here copies or converts them.

use half::f16;

/// A weight storage format the quantised matmul understands.
///
/// Each variant names a ggml tensor type; the numbers are ggml's block geometry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuantFormat {
    /// Plain little-endian `f32`.
    F32,
    /// Plain little-endian IEEE half.
    F16,
    /// 32 values: `f16` scale, 16 bytes of 4-bit quants offset by 8.
    Q4_0,
    /// 32 values: `f16` scale and `f16` min, 16 bytes of unsigned 4-bit quants.
    Q4_1,
    /// 32 values: `f16` scale, 32 high bits, 16 bytes of low nibbles; 5-bit quants offset by 16.
    Q5_0,
    /// 32 values: `f16` scale, 32 signed bytes.
    Q8_0,
    /// 256 values: `f16` super-scale and super-min, 12 bytes of 6-bit sub-scales/mins, 4-bit quants.
    Q4K,
    /// 256 values: as [`QuantFormat::Q4K`] plus one high bit per value (5-bit quants).
    Q5K,
    /// 256 values: 6-bit quants in low/high planes, 16 signed 8-bit sub-scales, `f16` scale.
    Q6K,
}

impl QuantFormat {
    /// Every supported format, for tests and error messages.
    pub const ALL: [QuantFormat; 9] = [
        QuantFormat::F32,
        QuantFormat::F16,
        QuantFormat::Q4_0,
        QuantFormat::Q4_1,
        QuantFormat::Q5_0,
        QuantFormat::Q8_0,
        QuantFormat::Q4K,
        QuantFormat::Q5K,
        QuantFormat::Q6K,
    ];

    /// The ggml type id (`ggml_type` in ggml.h), as stored in a GGUF tensor table.
    pub const fn ggml_id(self) -> u32 {
        match self {
            QuantFormat::F32 => 0,
            QuantFormat::F16 => 1,
            QuantFormat::Q4_0 => 2,
            QuantFormat::Q4_1 => 3,
            QuantFormat::Q5_0 => 6,
            QuantFormat::Q8_0 => 8,
            QuantFormat::Q4K => 12,
            QuantFormat::Q5K => 13,
            QuantFormat::Q6K => 14,
        }
    }

    /// The format for a ggml type id, or `None` when the matmul does not support it.
    pub fn from_ggml_id(id: u32) -> Option<QuantFormat> {
        QuantFormat::ALL.into_iter().find(|f| f.ggml_id() == id)
    }

    /// ggml's name for the type.
    pub const fn name(self) -> &'static str {
        match self {
            QuantFormat::F32 => "F32",
            QuantFormat::F16 => "F16",
            QuantFormat::Q4_0 => "Q4_0",
            QuantFormat::Q4_1 => "Q4_1",
            QuantFormat::Q5_0 => "Q5_0",
            QuantFormat::Q8_0 => "Q8_0",
            QuantFormat::Q4K => "Q4_K",
            QuantFormat::Q5K => "Q5_K",
            QuantFormat::Q6K => "Q6_K",
        }
    }

    /// Values per block.
    pub const fn block_len(self) -> usize {
        match self {
            QuantFormat::F32 | QuantFormat::F16 => 1,
            QuantFormat::Q4_0 | QuantFormat::Q4_1 | QuantFormat::Q5_0 | QuantFormat::Q8_0 => 32,
            QuantFormat::Q4K | QuantFormat::Q5K | QuantFormat::Q6K => 256,
        }
    }

    /// Bytes per block.
    pub const fn block_bytes(self) -> usize {
        match self {
            QuantFormat::F32 => 4,
            QuantFormat::F16 => 2,
            QuantFormat::Q4_0 => 18,
            QuantFormat::Q4_1 => 20,
            QuantFormat::Q5_0 => 22,
            QuantFormat::Q8_0 => 34,
            QuantFormat::Q4K => 144,
            QuantFormat::Q5K => 176,
            QuantFormat::Q6K => 210,
        }
    }

    /// Bytes of one row of `cols` values, or `None` when `cols` is not a whole number of blocks.
    pub const fn row_bytes(self, cols: usize) -> Option<usize> {
        if !cols.is_multiple_of(self.block_len()) {
            return None;
        }
        Some(cols / self.block_len() * self.block_bytes())
    }

    /// The activation encoding llama.cpp's CPU backend pairs with this weight format
    /// (`vec_dot_type` in ggml-cpu.c); matching it keeps our logits close to llama.cpp's.
    pub const fn activation(self) -> ActivationFormat {
        match self {
            QuantFormat::F32 => ActivationFormat::F32,
            QuantFormat::F16 => ActivationFormat::F16,
            QuantFormat::Q4_0 | QuantFormat::Q5_0 | QuantFormat::Q8_0 => ActivationFormat::Q8_0,
            QuantFormat::Q4_1 => ActivationFormat::Q8_1,
            QuantFormat::Q4K | QuantFormat::Q5K | QuantFormat::Q6K => ActivationFormat::Q8K,
        }
    }
}

impl std::fmt::Display for QuantFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How activations are encoded before the dot product with a weight row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActivationFormat {
    /// Kept as `f32`.
    F32,
    /// Rounded to half precision.
    F16,
    /// Blocks of 32 signed bytes with an `f16` scale.
    Q8_0,
    /// As `Q8_0`, plus the `f16` of scale × sum of quants (for formats with a min).
    Q8_1,
    /// Blocks of 256 signed bytes with an `f32` scale and sums per 16.
    Q8K,
}

/// Reads the little-endian `f16` at `bytes[at..at + 2]` as `f32`.
#[inline]
pub(crate) fn read_f16(bytes: &[u8], at: usize) -> f32 {
    f16_at(f16_table(), bytes, at)
}

/// [`read_f16`] through a table the caller fetched once (hot loops read a scale per block).
#[inline]
pub(crate) fn f16_at(table: &[f32; 1 << 16], bytes: &[u8], at: usize) -> f32 {
    // One 16-bit load: built from two byte loads, LLVM folds the high byte's shift into the
    // table's address arithmetic and spends four instructions per scale in the hot loops.
    let bits: [u8; 2] = match bytes.get(at..at + 2).and_then(|b| b.try_into().ok()) {
        Some(bits) => bits,
        // The kernels pass offsets inside a whole block; were one not, a NaN scale makes the
        // product NaN: visibly wrong, not a plausible wrong number.
        None => return f32::NAN,
    };
    table[usize::from(u16::from_le_bytes(bits))]
}

/// Every `f16` as `f32` (256 KiB), as ggml keeps it: block scales are read millions of times
/// per token, and a table lookup costs less than a conversion (which, in `half`, also checks
/// the CPU's features on every call).
pub(crate) fn f16_table() -> &'static [f32; 1 << 16] {
    static TABLE: std::sync::OnceLock<Box<[f32; 1 << 16]>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = Box::new([0.0f32; 1 << 16]);
        for (bits, v) in table.iter_mut().enumerate() {
            *v = f16::from_bits(bits as u16).to_f32();
        }
        table
    })
}

/// Rounds an `f32` through half precision, as ggml does when it stores a scale.
#[inline]
pub(crate) fn round_f16(x: f32) -> f32 {
    f16::from_f32(x).to_f32()
}
