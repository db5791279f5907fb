//! The container: header, every metadata type, the tensor table and the errors for each
//! kind of bad file.

use stampo_gguf::writer::{GgufWriter, OwnedValue};
use stampo_gguf::{GgmlType, Gguf, GgufError, Value, ValueType};

fn every_type_file() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.add("general.architecture", OwnedValue::String("llama".into()))
        .add("u8", OwnedValue::U8(200))
        .add("i8", OwnedValue::I8(-100))
        .add("u16", OwnedValue::U16(60000))
        .add("i16", OwnedValue::I16(-30000))
        .add("u32", OwnedValue::U32(4_000_000_000))
        .add("i32", OwnedValue::I32(-2_000_000_000))
        .add("f32", OwnedValue::F32(1.5))
        .add("bool", OwnedValue::Bool(true))
        .add("str", OwnedValue::String("héllo".into()))
        .add("u64", OwnedValue::U64(u64::MAX))
        .add("i64", OwnedValue::I64(i64::MIN))
        .add("f64", OwnedValue::F64(-2.25))
        .add("llama.context_length", OwnedValue::U32(2048))
        .add("arr.f32", OwnedValue::f32s([1.0, 2.0, 3.0]))
        .add("arr.str", OwnedValue::strings(["a", "bc", ""]))
        .add(
            "arr.bool",
            OwnedValue::Array(
                ValueType::Bool,
                vec![OwnedValue::Bool(false), OwnedValue::Bool(true)],
            ),
        )
        .add(
            "arr.nested",
            OwnedValue::Array(
                ValueType::Array,
                vec![
                    OwnedValue::i32s([1, 2]),
                    OwnedValue::strings(["x"]),
                    OwnedValue::Array(ValueType::Array, vec![OwnedValue::i32s([7])]),
                ],
            ),
        )
        .add("not.utf8", OwnedValue::Bytes(vec![0xff, 0xfe]));
    w.add_tensor(
        "a",
        GgmlType::F32,
        &[3],
        [1.0f32, 2.0, 3.0]
            .iter()
            .flat_map(|f| f.to_le_bytes())
            .collect(),
    );
    w.add_tensor("b", GgmlType::Q8_0, &[32, 2], vec![0; 68]);
    w.to_bytes()
}

#[test]
fn reads_every_metadata_type() {
    let bytes = every_type_file();
    let g = Gguf::parse(&bytes).unwrap();
    let m = g.metadata();
    assert_eq!(g.version(), 3);
    assert_eq!(m.get("u8"), Some(&Value::U8(200)));
    assert_eq!(m.get("i8"), Some(&Value::I8(-100)));
    assert_eq!(m.get("u16"), Some(&Value::U16(60000)));
    assert_eq!(m.get("i16"), Some(&Value::I16(-30000)));
    assert_eq!(m.get_u32("u32").unwrap(), 4_000_000_000);
    assert_eq!(m.require::<i32>("i32").unwrap(), -2_000_000_000);
    assert_eq!(m.get_f32("f32").unwrap(), 1.5);
    assert!(m.get_bool("bool").unwrap());
    assert_eq!(m.get_str("str").unwrap(), "héllo");
    assert_eq!(m.get_u64("u64").unwrap(), u64::MAX);
    assert_eq!(m.require::<i64>("i64").unwrap(), i64::MIN);
    assert_eq!(m.require::<f64>("f64").unwrap(), -2.25);
    assert_eq!(
        m.get_array("arr.f32")
            .unwrap()
            .f32s()
            .unwrap()
            .collect::<Vec<_>>(),
        [1.0, 2.0, 3.0]
    );
    let strs: Vec<_> = m
        .get_array("arr.str")
        .unwrap()
        .strings()
        .unwrap()
        .map(|s| s.to_str().unwrap())
        .collect();
    assert_eq!(strs, ["a", "bc", ""]);
    assert_eq!(
        m.get_array("arr.bool").unwrap().get(1),
        Some(Value::Bool(true))
    );

    let nested = m.get_array("arr.nested").unwrap();
    assert_eq!(nested.len(), 3);
    let inner: Vec<_> = nested.iter().collect();
    assert_eq!(inner[0].as_array().unwrap().integers().unwrap(), [1, 2]);
    assert_eq!(
        inner[1]
            .as_array()
            .unwrap()
            .strings()
            .unwrap()
            .next()
            .unwrap()
            .as_bytes(),
        b"x"
    );
    let deepest = inner[2]
        .as_array()
        .unwrap()
        .get(0)
        .unwrap()
        .as_array()
        .unwrap();
    assert_eq!(deepest.integers().unwrap(), [7]);

    // A string value that is not UTF-8 is kept as bytes; asking for &str names the key.
    assert_eq!(
        m.require::<stampo_gguf::GgufStr>("not.utf8")
            .unwrap()
            .as_bytes(),
        [0xff, 0xfe]
    );
    assert!(
        matches!(m.get_str("not.utf8"), Err(GgufError::WrongType { key, .. }) if key == "not.utf8")
    );
}

#[test]
fn getters_name_the_key() {
    let bytes = every_type_file();
    let g = Gguf::parse(&bytes).unwrap();
    let m = g.metadata();
    let err = m.get_u32("llama.block_count").unwrap_err();
    assert_eq!(
        err.to_string(),
        "metadata key 'llama.block_count' is missing"
    );
    let err = m.arch_require::<u32>("block_count").unwrap_err();
    assert!(err.to_string().contains("'llama.block_count'"), "{err}");
    assert_eq!(m.arch_require::<u32>("context_length").unwrap(), 2048);
    let err = m.get_u32("str").unwrap_err();
    assert_eq!(err.to_string(), "metadata key 'str' is str, expected u32");
    // Integers convert when they fit and fail when they do not.
    assert_eq!(m.require::<u64>("u8").unwrap(), 200);
    assert!(m.require::<u8>("u16").is_err());
    assert_eq!(m.optional::<u32>("absent").unwrap(), None);
    assert_eq!(m.get_or("absent", 7u32).unwrap(), 7);
}

#[test]
fn tensor_table_and_data() {
    let bytes = every_type_file();
    let g = Gguf::parse(&bytes).unwrap();
    assert_eq!(g.alignment(), 32);
    assert_eq!(g.data_offset() % 32, 0);
    let a = g.require_tensor("a").unwrap();
    assert_eq!(
        (a.ty, a.dims.as_slice(), a.size),
        (GgmlType::F32, &[3u64][..], 12)
    );
    let data = g.tensor_data(a);
    assert_eq!(
        stampo_gguf::dequantize_to_vec(a.ty, data).unwrap(),
        [1.0, 2.0, 3.0]
    );
    let b = g.tensor("b").unwrap();
    assert_eq!((b.offset, b.size, b.elements()), (32, 68, 64));
    assert_eq!(b.shape_row_major(), [2, 32]);
    assert!(matches!(
        g.require_tensor("c"),
        Err(GgufError::MissingTensor { .. })
    ));
}

#[test]
fn custom_alignment() {
    let mut w = GgufWriter::new();
    w.add("general.alignment", OwnedValue::U32(64));
    w.add_tensor("a", GgmlType::F32, &[1], vec![0; 4]);
    w.add_tensor("b", GgmlType::F32, &[1], vec![0; 4]);
    let bytes = w.to_bytes();
    let g = Gguf::parse(&bytes).unwrap();
    assert_eq!(g.alignment(), 64);
    assert_eq!(g.data_offset() % 64, 0);
    assert_eq!(g.tensor("b").unwrap().offset, 64);

    let mut w = GgufWriter::new();
    w.add("general.alignment", OwnedValue::U32(48));
    assert!(matches!(
        Gguf::parse(&w.to_bytes()),
        Err(GgufError::BadAlignment { value: 48 })
    ));
}

#[test]
fn version_2_is_read() {
    let mut bytes = every_type_file();
    bytes[4] = 2;
    assert_eq!(Gguf::parse(&bytes).unwrap().version(), 2);
}

#[test]
fn bad_headers() {
    let good = every_type_file();
    let mut bad = good.clone();
    bad[..4].copy_from_slice(b"GGML");
    assert!(matches!(Gguf::parse(&bad), Err(GgufError::BadMagic { .. })));

    let mut be = good.clone();
    be[4..8].copy_from_slice(&3u32.to_be_bytes());
    let err = Gguf::parse(&be).unwrap_err();
    assert!(matches!(err, GgufError::BigEndian { swapped: 3 }));
    assert!(err.to_string().contains("big-endian"));

    let mut v1 = good.clone();
    v1[4] = 1;
    assert!(matches!(
        Gguf::parse(&v1),
        Err(GgufError::UnsupportedVersion { version: 1 })
    ));

    // A tensor count that cannot fit in the file is refused before allocating.
    let mut huge = good.clone();
    huge[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    let err = Gguf::parse(&huge).unwrap_err();
    assert!(
        matches!(err, GgufError::CountTooLarge { offset: 8, .. }),
        "{err}"
    );
}

/// Every prefix of a valid file is an error (never a panic), and the error says where.
#[test]
fn every_truncation_is_a_clear_error() {
    let good = every_type_file();
    let g = Gguf::parse(&good).unwrap();
    let header_end = g.data_offset() as usize;
    let file_end = (g.data_offset() + g.data_size()) as usize;
    assert!(Gguf::parse(&good[..file_end]).is_ok());
    for len in 0..file_end {
        let err = Gguf::parse(&good[..len]).expect_err("a truncated file must not parse");
        let msg = err.to_string();
        if len < header_end - 32 {
            assert!(
                matches!(
                    err,
                    GgufError::Truncated { .. } | GgufError::CountTooLarge { .. }
                ),
                "prefix {len}: {msg}"
            );
            assert!(msg.contains("byte"), "prefix {len}: {msg}");
        }
    }
    let err = Gguf::parse(&good[..12]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "file truncated at byte 8: 4 more byte(s) needed while reading the tensor count"
    );
    let err = Gguf::parse(&good[..20]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the tensor count at byte 8 is 2, which cannot fit in the 4 byte(s) left"
    );
}

#[test]
fn string_length_past_the_end() {
    let mut w = GgufWriter::new();
    w.add("k", OwnedValue::String("value".into()));
    let mut bytes = w.to_bytes();
    // The value's length field sits after magic, version, counts (24), key (8 + 1), type (4).
    let at = 24 + 9 + 4;
    bytes[at..at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let err = Gguf::parse(&bytes).unwrap_err();
    assert!(
        matches!(err, GgufError::CountTooLarge { offset, .. } if offset == at as u64),
        "{err}"
    );
    assert!(err.to_string().contains("metadata key 'k'"), "{err}");
}

#[test]
fn array_count_past_the_end() {
    let mut w = GgufWriter::new();
    w.add("k", OwnedValue::i32s([1, 2, 3]));
    let mut bytes = w.to_bytes();
    let at = 24 + 9 + 4 + 4;
    bytes[at..at + 8].copy_from_slice(&(u64::MAX / 2).to_le_bytes());
    assert!(matches!(
        Gguf::parse(&bytes),
        Err(GgufError::CountTooLarge { .. })
    ));
}

#[test]
fn nesting_too_deep() {
    let mut v = OwnedValue::i32s([1]);
    for _ in 0..20 {
        v = OwnedValue::Array(ValueType::Array, vec![v]);
    }
    let mut w = GgufWriter::new();
    w.add("deep", v);
    assert!(matches!(
        Gguf::parse(&w.to_bytes()),
        Err(GgufError::NestingTooDeep { .. })
    ));
}

#[test]
fn unknown_value_type_and_bad_bool() {
    let mut w = GgufWriter::new();
    w.add("k", OwnedValue::U8(1));
    let mut bytes = w.to_bytes();
    let at = 24 + 9;
    bytes[at] = 13;
    assert!(matches!(
        Gguf::parse(&bytes),
        Err(GgufError::UnknownValueType { type_id: 13, .. })
    ));

    let mut w = GgufWriter::new();
    w.add("k", OwnedValue::Bool(true));
    let mut bytes = w.to_bytes();
    bytes[24 + 9 + 4] = 2;
    assert!(matches!(
        Gguf::parse(&bytes),
        Err(GgufError::InvalidBool { value: 2, .. })
    ));
}

#[test]
fn duplicate_keys_and_tensors() {
    let mut w = GgufWriter::new();
    w.add("k", OwnedValue::U8(1)).add("k", OwnedValue::U8(2));
    assert!(matches!(
        Gguf::parse(&w.to_bytes()),
        Err(GgufError::DuplicateKey { .. })
    ));
    let mut w = GgufWriter::new();
    w.add_tensor("t", GgmlType::F32, &[1], vec![0; 4])
        .add_tensor("t", GgmlType::F32, &[1], vec![0; 4]);
    assert!(matches!(
        Gguf::parse(&w.to_bytes()),
        Err(GgufError::DuplicateTensor { .. })
    ));
}

/// Builds a file with one tensor and lets the test corrupt its table entry.
fn one_tensor(patch: impl FnOnce(&mut Vec<u8>, usize)) -> Result<(), GgufError> {
    let mut w = GgufWriter::new();
    w.add_tensor("t", GgmlType::Q4_0, &[32, 2], vec![0; 36]);
    let mut bytes = w.to_bytes();
    // Entry: name (8 + 1), n_dims (4) at 33, dims at 37 and 45, type at 53, offset at 57.
    patch(&mut bytes, 24);
    Gguf::parse(&bytes).map(|_| ())
}

#[test]
fn bad_tensor_entries() {
    assert!(one_tensor(|_, _| {}).is_ok());
    let err = one_tensor(|b, e| b[e + 9..e + 13].copy_from_slice(&5u32.to_le_bytes())).unwrap_err();
    assert!(matches!(err, GgufError::LimitExceeded { .. }), "{err}");
    let err =
        one_tensor(|b, e| b[e + 29..e + 33].copy_from_slice(&4u32.to_le_bytes())).unwrap_err();
    assert!(
        matches!(err, GgufError::UnknownTensorType { type_id: 4, .. }),
        "{err}"
    );
    let err =
        one_tensor(|b, e| b[e + 13..e + 21].copy_from_slice(&33u64.to_le_bytes())).unwrap_err();
    assert!(matches!(err, GgufError::BadTensorShape { .. }), "{err}");
    let err = one_tensor(|b, e| b[e + 21..e + 29].copy_from_slice(&(1u64 << 62).to_le_bytes()))
        .unwrap_err();
    assert!(matches!(err, GgufError::BadTensorShape { .. }), "{err}");
    let err =
        one_tensor(|b, e| b[e + 33..e + 41].copy_from_slice(&3u64.to_le_bytes())).unwrap_err();
    assert!(
        matches!(err, GgufError::TensorMisaligned { offset: 3, .. }),
        "{err}"
    );
    let err = one_tensor(|b, e| b[e + 33..e + 41].copy_from_slice(&(1u64 << 40).to_le_bytes()))
        .unwrap_err();
    assert!(matches!(err, GgufError::TensorOutOfBounds { .. }), "{err}");
    assert!(err.to_string().contains("'t'"));
}

#[test]
fn overlapping_tensors() {
    let mut w = GgufWriter::new();
    w.add_tensor("a", GgmlType::F32, &[16], vec![0; 64])
        .add_tensor("b", GgmlType::F32, &[16], vec![0; 64]);
    let mut bytes = w.to_bytes();
    // b's offset (the last 8 bytes of the table) := 32, inside a.
    let g = Gguf::parse(&bytes).unwrap();
    let table_end =
        g.data_offset() as usize - ((g.data_offset() as usize) - 24 - (8 + 1 + 4 + 8 + 4 + 8) * 2);
    bytes[table_end - 8..table_end].copy_from_slice(&32u64.to_le_bytes());
    let err = Gguf::parse(&bytes).unwrap_err();
    assert!(matches!(err, GgufError::TensorsOverlap { .. }), "{err}");
}

#[test]
fn header_only_prefix() {
    let bytes = every_type_file();
    let full = Gguf::parse(&bytes).unwrap();
    let prefix = &bytes[..full.data_offset() as usize];
    let g = Gguf::parse_header(prefix).unwrap();
    assert_eq!(g.tensors().len(), 2);
    assert!(g.tensor_data(g.tensor("a").unwrap()).is_empty());
    assert!(Gguf::parse(prefix).is_err());
}
