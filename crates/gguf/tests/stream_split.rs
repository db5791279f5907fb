//! The streaming reader (chunks of every size give the same tensors as parsing the whole
//! file) and split files (parts load as one model; parts that do not fit are refused).
#![allow(clippy::unwrap_used, clippy::panic)]

use stampo_gguf::split::{SplitGguf, parse_split_path, split_path};
use stampo_gguf::stream::{Event, StreamingGguf};
use stampo_gguf::writer::{GgufWriter, OwnedValue};
use stampo_gguf::{GgmlType, Gguf, GgufError};

fn sample_file() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.add("general.architecture", OwnedValue::String("llama".into()))
        .add(
            "tokenizer.ggml.tokens",
            OwnedValue::strings((0..500).map(|i| format!("token{i}"))),
        );
    for i in 0..6u8 {
        let n = 32 * (i as usize + 1);
        w.add_tensor(
            &format!("t{i}"),
            GgmlType::F32,
            &[n as u64],
            (0..n * 4).map(|b| (b as u8).wrapping_add(i)).collect(),
        );
    }
    w.add_tensor("empty", GgmlType::F32, &[0], vec![]);
    w.to_bytes()
}

/// Streams `file` in chunks of `size` and returns each tensor's reassembled bytes.
fn stream(file: &[u8], size: usize) -> Vec<Vec<u8>> {
    let mut r = StreamingGguf::new();
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut done = Vec::new();
    let mut headers = 0;
    for chunk in file.chunks(size) {
        r.push(chunk, &mut |e| {
            match e {
                Event::Header(g) => {
                    headers += 1;
                    out = vec![Vec::new(); g.tensors().len()];
                }
                Event::TensorData {
                    index,
                    offset,
                    bytes,
                } => {
                    assert_eq!(offset as usize, out[index].len(), "pieces arrive in order");
                    out[index].extend_from_slice(bytes);
                }
                Event::TensorDone { index } => done.push(index),
            }
            Ok(())
        })
        .unwrap();
    }
    assert!(r.has_header());
    assert_eq!(r.header().unwrap().tensors().len(), out.len());
    r.finish().unwrap();
    assert_eq!(headers, 1);
    done.sort();
    assert_eq!(done, (0..out.len()).collect::<Vec<_>>());
    out
}

#[test]
fn any_chunk_size_gives_the_same_tensors() {
    let file = sample_file();
    let g = Gguf::parse(&file).unwrap();
    let want: Vec<&[u8]> = g.tensors().iter().map(|t| g.tensor_data(t)).collect();
    for size in [1, 2, 3, 7, 64, 100, 1000, 4096, file.len()] {
        assert_eq!(stream(&file, size), want, "chunk size {size}");
    }
}

#[test]
fn header_is_reported_before_the_data_arrives() {
    let file = sample_file();
    let g = Gguf::parse(&file).unwrap();
    let mut r = StreamingGguf::new();
    let mut seen = false;
    r.push(&file[..g.data_offset() as usize], &mut |e| {
        seen |= matches!(e, Event::Header(_));
        Ok(())
    })
    .unwrap();
    assert!(seen, "header parsed as soon as its bytes are in");
}

#[test]
fn truncated_streams_are_errors() {
    let file = sample_file();
    let g = Gguf::parse(&file).unwrap();
    // Ends inside the tensor data.
    let mut r = StreamingGguf::new();
    r.push(&file[..file.len() - 100], &mut |_| Ok(())).unwrap();
    let err = r.finish().unwrap_err();
    assert!(matches!(err, GgufError::Truncated { .. }), "{err}");
    assert!(err.to_string().contains("tensor 't"), "{err}");
    // Ends inside the header.
    let mut r = StreamingGguf::new();
    r.push(&file[..g.data_offset() as usize / 2], &mut |_| Ok(()))
        .unwrap();
    assert!(r.finish().is_err());
    // A bad magic is reported as soon as the header parses.
    let mut bad = file.clone();
    bad[0] = b'X';
    let mut r = StreamingGguf::new();
    assert!(matches!(
        r.push(&bad, &mut |_| Ok(())),
        Err(GgufError::BadMagic { .. })
    ));
}

#[test]
fn a_sink_error_stops_the_stream() {
    let file = sample_file();
    let mut r = StreamingGguf::new();
    let err = r
        .push(&file, &mut |_| {
            Err(GgufError::Stream {
                reason: "out of memory".into(),
            })
        })
        .unwrap_err();
    assert!(err.to_string().contains("out of memory"));
}

fn part(no: u16, count: u16, total: i32, tensors: &[(&str, u8)]) -> Vec<u8> {
    let mut w = GgufWriter::new();
    if no == 0 {
        w.add("general.architecture", OwnedValue::String("llama".into()));
    }
    w.add("split.no", OwnedValue::U16(no))
        .add("split.count", OwnedValue::U16(count))
        .add("split.tensors.count", OwnedValue::I32(total));
    for (name, fill) in tensors {
        w.add_tensor(name, GgmlType::F32, &[8], vec![*fill; 32]);
    }
    w.to_bytes()
}

#[test]
fn split_parts_load_as_one_model() {
    let p = [
        part(0, 3, 4, &[("a", 1)]),
        part(1, 3, 4, &[("b", 2), ("c", 3)]),
        part(2, 3, 4, &[("d", 4)]),
    ];
    let refs: Vec<&[u8]> = p.iter().map(|v| v.as_slice()).collect();
    let s = SplitGguf::parse(&refs).unwrap();
    assert_eq!(s.tensor_count(), 4);
    assert_eq!(s.metadata().architecture().unwrap(), "llama");
    assert_eq!(s.tensor_data("c").unwrap(), [3; 32]);
    assert_eq!(
        s.tensors().map(|(_, t)| t.name).collect::<Vec<_>>(),
        ["a", "b", "c", "d"]
    );

    // Out of order, missing or foreign parts are refused with the reason.
    let err = SplitGguf::parse(&[refs[1], refs[0], refs[2]]).unwrap_err();
    assert!(err.to_string().contains("out of order"), "{err}");
    let err = SplitGguf::parse(&refs[..2]).unwrap_err();
    assert!(err.to_string().contains("split.count"), "{err}");
    let wrong_total = part(0, 1, 9, &[("a", 1)]);
    assert!(
        SplitGguf::parse(&[&wrong_total])
            .unwrap_err()
            .to_string()
            .contains("split.tensors.count")
    );
    let dup = [part(0, 2, 2, &[("a", 1)]), part(1, 2, 2, &[("a", 2)])];
    assert!(matches!(
        SplitGguf::parse(&[&dup[0], &dup[1]]),
        Err(GgufError::DuplicateTensor { .. })
    ));
    // An unsplit file is a one-part model.
    let single = stampo_gguf::testing::tiny_file();
    assert_eq!(SplitGguf::parse(&[&single]).unwrap().tensor_count(), 1);
}

#[test]
fn split_file_names() {
    assert_eq!(
        split_path("models/qwen", 0, 3),
        "models/qwen-00001-of-00003.gguf"
    );
    assert_eq!(
        parse_split_path("models/qwen-00002-of-00003.gguf"),
        Some(("models/qwen", 1, 3))
    );
    assert_eq!(parse_split_path("models/qwen.gguf"), None);
    assert_eq!(parse_split_path("x-00004-of-00003.gguf"), None);
}

/// The default models streamed in 1 MiB chunks: every tensor gets exactly its bytes
/// (count, first and last 64 bytes checked against the whole-file reader).
#[test]
fn default_models_stream() {
    for file in [
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "gemma-3-270m-q4_k_m.gguf",
    ] {
        let Some(bytes) = stampo_test_data::model_bytes(file) else {
            continue;
        };
        let g = Gguf::parse(&bytes).unwrap();
        let sizes: Vec<u64> = g.tensors().iter().map(|t| t.size).collect();
        let mut got: Vec<(u64, Vec<u8>, Vec<u8>)> = vec![(0, vec![], vec![]); sizes.len()];
        let mut r = StreamingGguf::new();
        for chunk in bytes.chunks(1 << 20) {
            r.push(chunk, &mut |e| {
                if let Event::TensorData {
                    index,
                    offset,
                    bytes,
                } = e
                {
                    let (n, head, tail) = &mut got[index];
                    *n += bytes.len() as u64;
                    for (i, &b) in bytes.iter().enumerate() {
                        let at = offset + i as u64;
                        if at < 64 {
                            head.push(b);
                        }
                        if at + 64 >= sizes[index] {
                            tail.push(b);
                        }
                    }
                }
                Ok(())
            })
            .unwrap();
        }
        r.finish().unwrap();
        for t in g.tensors() {
            let data = g.tensor_data(t);
            let (n, head, tail) = &got[t.index];
            assert_eq!(*n, data.len() as u64, "{file} {}", t.name);
            assert_eq!(
                head.as_slice(),
                &data[..data.len().min(64)],
                "{file} {}",
                t.name
            );
            assert_eq!(
                tail.as_slice(),
                &data[data.len().saturating_sub(64)..],
                "{file} {}",
                t.name
            );
        }
    }
}
