//! Dequantisation: hand-checked blocks here; bit-exactness against the `gguf` Python
//! package on random blocks is in `dequant_reference.rs`.

use half::f16;
use stampo_gguf::blocks::*;
use stampo_gguf::{GgmlType, dequantize, dequantize_to_vec};

#[test]
fn q4_0_by_hand() {
    let mut block = vec![];
    block.extend(f16::from_f32(2.0).to_le_bytes());
    block.extend((0..16u8).map(|i| i | ((15 - i) << 4)));
    let y = dequantize_to_vec(GgmlType::Q4_0, &block).unwrap();
    assert_eq!(y[0], -16.0);
    assert_eq!(y[15], 14.0);
    assert_eq!(y[16], 14.0);
    assert_eq!(y[31], -16.0);
}

#[test]
fn q8_0_and_f16_bf16() {
    let mut block = vec![];
    block.extend(f16::from_f32(0.5).to_le_bytes());
    block.extend((0..32).map(|i| (i as i8 - 16) as u8));
    let y = dequantize_to_vec(GgmlType::Q8_0, &block).unwrap();
    assert_eq!(y[0], -8.0);
    assert_eq!(y[31], 7.5);

    let bytes: Vec<u8> = [1.0f32, -0.0, f32::INFINITY]
        .iter()
        .flat_map(|&x| f16::from_f32(x).to_le_bytes())
        .collect();
    assert_eq!(
        dequantize_to_vec(GgmlType::F16, &bytes).unwrap(),
        [1.0, -0.0, f32::INFINITY]
    );
    let bytes: Vec<u8> = [0x3f80u16, 0xc000]
        .iter()
        .flat_map(|b| b.to_le_bytes())
        .collect();
    assert_eq!(
        dequantize_to_vec(GgmlType::BF16, &bytes).unwrap(),
        [1.0, -2.0]
    );
}

#[test]
fn f16_conversion_is_exact_for_every_non_nan() {
    for bits in 0..=u16::MAX {
        let h = f16::from_bits(bits);
        if h.is_nan() {
            assert!(f16_to_f32(h).is_nan());
        } else {
            assert_eq!(
                f16_to_f32(h).to_bits(),
                h.to_f32().to_bits(),
                "bits {bits:#06x}"
            );
        }
    }
}

#[test]
fn unaligned_bytes_give_the_same_values() {
    let mut bytes = vec![0u8; 1 + 144 * 3];
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = (i * 37 % 251) as u8;
    }
    // Keep the f16 scales finite.
    for blk in 0..3 {
        bytes[1 + 144 * blk + 1] = 0x3c;
        bytes[1 + 144 * blk + 3] = 0x38;
    }
    let unaligned = &bytes[1..];
    let copy = unaligned.to_vec();
    assert_eq!(
        dequantize_to_vec(GgmlType::Q4_K, unaligned).unwrap(),
        dequantize_to_vec(GgmlType::Q4_K, &copy).unwrap()
    );
}

#[test]
fn errors() {
    assert!(dequantize_to_vec(GgmlType::Q4_0, &[0; 17]).is_err());
    assert!(dequantize(GgmlType::Q4_0, &[0; 18], &mut [0.0; 31]).is_err());
    assert!(matches!(
        dequantize_to_vec(GgmlType::IQ2_XXS, &[0; 66]),
        Err(stampo_gguf::GgufError::NoDequantization {
            ty: GgmlType::IQ2_XXS
        })
    ));
}

#[test]
fn sizes_match_the_type_table() {
    assert_eq!(std::mem::size_of::<BlockQ4K>(), GgmlType::Q4_K.type_size());
    for ty in GgmlType::ALL {
        assert_eq!(GgmlType::from_id(ty.id()), Some(ty));
        assert_eq!(ty.name().parse::<GgmlType>(), Ok(ty));
    }
    assert_eq!(GgmlType::from_id(4), None);
    assert_eq!(GgmlType::Q6_K.row_size(512), Some(420));
    assert_eq!(GgmlType::Q6_K.row_size(100), None);
}

/// `gguf-py` has no Q8_K dequantisation; ggml's is `d * q` with an f32 `d`.
#[test]
fn q8_k_by_hand() {
    let mut block = vec![];
    block.extend(0.25f32.to_le_bytes());
    block.extend((0..256i32).map(|i| (i - 128) as i8 as u8));
    block.extend([0u8; 32]);
    let y = dequantize_to_vec(GgmlType::Q8_K, &block).unwrap();
    assert_eq!(y[0], -32.0);
    assert_eq!(y[255], 31.75);
}
