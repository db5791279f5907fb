//! Dequantisation of whole byte buffers (rows or tensors) to `f32`, dispatching on the
//! ggml type to the block structs of [`crate::blocks`].

use half::f16;

use crate::blocks::*;
use crate::error::{GgufError, Result};
use crate::types::GgmlType;

/// Dequantises every block of `blocks` into `out` (`out.len() == blocks.len() * B::ELEMS`).
///
/// # Panics
/// If `out` has the wrong length.
pub fn dequantize_blocks<B: Block>(blocks: &[B], out: &mut [f32]) {
    assert_eq!(out.len(), blocks.len() * B::ELEMS, "output length");
    for (b, y) in blocks.iter().zip(out.chunks_exact_mut(B::ELEMS)) {
        b.dequantize(y);
    }
}

fn bytes_as_blocks<B: Block>(bytes: &[u8], out: &mut [f32]) {
    match blocks_from_bytes::<B>(bytes) {
        Some(blocks) => dequantize_blocks(blocks, out),
        None => {
            let size = std::mem::size_of::<B>();
            for (chunk, y) in bytes.chunks_exact(size).zip(out.chunks_exact_mut(B::ELEMS)) {
                bytemuck::pod_read_unaligned::<B>(chunk).dequantize(y);
            }
        }
    }
}

/// Dequantises `bytes` of type `ty` into `out`.
///
/// `bytes` must be a whole number of blocks and `out` exactly as long as the values they
/// hold; types without dequantisation give [`GgufError::NoDequantization`].
pub fn dequantize(ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<()> {
    let n = elements_in(ty, bytes)?;
    if out.len() != n {
        return Err(GgufError::BadBuffer {
            ty,
            reason: format!(
                "{} bytes hold {n} values but the output has {}",
                bytes.len(),
                out.len()
            ),
        });
    }
    match ty {
        GgmlType::F32 => {
            for (c, y) in bytes.chunks_exact(4).zip(out.iter_mut()) {
                *y = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        GgmlType::F16 => {
            for (c, y) in bytes.chunks_exact(2).zip(out.iter_mut()) {
                *y = f16_to_f32(f16::from_le_bytes([c[0], c[1]]));
            }
        }
        GgmlType::BF16 => {
            for (c, y) in bytes.chunks_exact(2).zip(out.iter_mut()) {
                *y = bf16_bits_to_f32(u16::from_le_bytes([c[0], c[1]]));
            }
        }
        GgmlType::Q4_0 => bytes_as_blocks::<BlockQ4_0>(bytes, out),
        GgmlType::Q4_1 => bytes_as_blocks::<BlockQ4_1>(bytes, out),
        GgmlType::Q5_0 => bytes_as_blocks::<BlockQ5_0>(bytes, out),
        GgmlType::Q5_1 => bytes_as_blocks::<BlockQ5_1>(bytes, out),
        GgmlType::Q8_0 => bytes_as_blocks::<BlockQ8_0>(bytes, out),
        GgmlType::Q2_K => bytes_as_blocks::<BlockQ2K>(bytes, out),
        GgmlType::Q3_K => bytes_as_blocks::<BlockQ3K>(bytes, out),
        GgmlType::Q4_K => bytes_as_blocks::<BlockQ4K>(bytes, out),
        GgmlType::Q5_K => bytes_as_blocks::<BlockQ5K>(bytes, out),
        GgmlType::Q6_K => bytes_as_blocks::<BlockQ6K>(bytes, out),
        GgmlType::Q8_K => bytes_as_blocks::<BlockQ8K>(bytes, out),
        GgmlType::IQ4_NL => bytes_as_blocks::<BlockIq4Nl>(bytes, out),
        GgmlType::IQ4_XS => bytes_as_blocks::<BlockIq4Xs>(bytes, out),
        ty => return Err(GgufError::NoDequantization { ty }),
    }
    Ok(())
}

/// Dequantises `bytes` of type `ty` into a new vector.
pub fn dequantize_to_vec(ty: GgmlType, bytes: &[u8]) -> Result<Vec<f32>> {
    if !ty.can_dequantize() {
        return Err(GgufError::NoDequantization { ty });
    }
    let mut out = vec![0.0; elements_in(ty, bytes)?];
    dequantize(ty, bytes, &mut out)?;
    Ok(out)
}

/// The number of values `bytes` of type `ty` hold, if they are a whole number of blocks.
pub fn elements_in(ty: GgmlType, bytes: &[u8]) -> Result<usize> {
    let size = ty.type_size();
    if !bytes.len().is_multiple_of(size) {
        return Err(GgufError::BadBuffer {
            ty,
            reason: format!(
                "{} bytes is not a whole number of {size}-byte blocks",
                bytes.len()
            ),
        });
    }
    Ok(bytes.len() / size * ty.block_size())
}
