//! Behaviour that does not need llama.cpp to check: round trips, the streaming decoder,
//! the token → bytes table, special tokens. Agreement with llama.cpp is in `agreement.rs`.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use stampo_gguf::ValueType;
use stampo_gguf::writer::{GgufWriter, OwnedValue};
use stampo_tokenizer::{
    DecodeOptions, StreamDecoder, TokenAttr, Tokenizer, byte_to_char, char_to_byte,
};

/// A tiny byte-level BPE vocabulary: every byte, a few merges, two control tokens.
fn tiny_bpe() -> Tokenizer {
    let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_to_char(b).to_string()).collect();
    let mut types = vec![1i32; 256];
    let merges = ["h e", "l l", "he ll", "hell o", "Ġ w", "Ġw o"];
    for m in merges {
        tokens.push(m.replace(' ', ""));
        types.push(1);
    }
    tokens.push("<|im_start|>".into());
    types.push(3);
    tokens.push("<|im_end|>".into());
    types.push(3);
    let mut w = GgufWriter::new();
    w.add("tokenizer.ggml.model", OwnedValue::String("gpt2".into()))
        .add("tokenizer.ggml.pre", OwnedValue::String("qwen2".into()))
        .add("tokenizer.ggml.tokens", OwnedValue::strings(tokens))
        .add("tokenizer.ggml.token_type", OwnedValue::i32s(types))
        .add("tokenizer.ggml.merges", OwnedValue::strings(merges))
        .add("tokenizer.ggml.eos_token_id", OwnedValue::U32(263));
    let bytes = w.to_bytes();
    Tokenizer::from_gguf(&stampo_gguf::Gguf::parse(&bytes).unwrap()).unwrap()
}

#[test]
fn byte_map_round_trips() {
    for b in 0..=255u8 {
        assert_eq!(char_to_byte(byte_to_char(b)), Some(b));
    }
    assert_eq!(byte_to_char(b' '), 'Ġ');
    assert_eq!(byte_to_char(b'\n'), 'Ċ');
}

#[test]
fn tiny_bpe_merges_and_specials() {
    let t = tiny_bpe();
    let ids = t.encode("hello wo", false, false);
    assert_eq!(ids, [259, 261]);
    assert_eq!(t.decode(&ids, DecodeOptions::default()), "hello wo");
    // Control tokens are text unless parsed.
    let ids = t.encode("<|im_start|>hello", false, true);
    assert_eq!(ids, [262, 259]);
    assert!(t.encode("<|im_start|>hello", false, false).len() > 2);
    assert!(t.is_control(262));
    assert!(t.is_eog(263));
    assert_eq!(t.token_bytes(262), b"<|im_start|>");
    assert_eq!(t.token_to_piece(262, false), b"");
    assert_eq!(t.token_bytes(b' ' as u32), b" ");
    assert_eq!(t.attr(5), TokenAttr(TokenAttr::NORMAL));
}

#[test]
fn stream_decoder_never_splits_a_character() {
    let mut d = StreamDecoder::new(false);
    let text = "naïve 日本 🎉!";
    let mut out = String::new();
    for b in text.as_bytes() {
        let s = d.push_bytes(&[*b]);
        out.push_str(&s);
    }
    out.push_str(&d.finish());
    assert_eq!(out, text);
    // Invalid bytes become U+FFFD, never a broken sequence.
    let mut d = StreamDecoder::new(false);
    assert_eq!(d.push_bytes(&[0xE6, 0x97]), "");
    assert_eq!(d.push_bytes(b"a"), "\u{FFFD}a");
    assert_eq!(d.push_bytes(&[0xF0, 0x9F]), "");
    assert_eq!(d.finish(), "\u{FFFD}");
}

#[test]
fn unknown_model_and_pre_tokenizer_are_named() {
    let mut w = GgufWriter::new();
    w.add("tokenizer.ggml.model", OwnedValue::String("bert".into()))
        .add("tokenizer.ggml.tokens", OwnedValue::strings(["a"]));
    let bytes = w.to_bytes();
    let err = Tokenizer::from_gguf(&stampo_gguf::Gguf::parse(&bytes).unwrap()).unwrap_err();
    assert!(err.to_string().contains("'bert'"), "{err}");

    let mut w = GgufWriter::new();
    w.add("tokenizer.ggml.model", OwnedValue::String("gpt2".into()))
        .add("tokenizer.ggml.pre", OwnedValue::String("martian".into()))
        .add("tokenizer.ggml.tokens", OwnedValue::strings(["a"]))
        .add(
            "tokenizer.ggml.merges",
            OwnedValue::Array(ValueType::String, vec![]),
        );
    let bytes = w.to_bytes();
    let err = Tokenizer::from_gguf(&stampo_gguf::Gguf::parse(&bytes).unwrap()).unwrap_err();
    assert!(err.to_string().contains("'martian'"), "{err}");

    let w = GgufWriter::new();
    let bytes = w.to_bytes();
    let err = Tokenizer::from_gguf(&stampo_gguf::Gguf::parse(&bytes).unwrap()).unwrap_err();
    assert!(err.to_string().contains("tokenizer.ggml.model"), "{err}");
}

const SAMPLES: &[&str] = &[
    "Hello world! It's 12345 apples.",
    "  leading spaces\n\n\ttabs and\r\nnewlines   ",
    "Perché l'università è chiusa? Così è.",
    "日本語のテキストと中文文本。",
    "fn main() { println!(\"{}\", 1 + 2); }",
    "{\"a\": [1, 2.5e-3, null], \"b\": \"\\u00e9\"}",
    "emoji 🎉👩‍👩‍👧 and ZWJ",
    "",
];

#[test]
fn default_models_round_trip() {
    for (name, file) in common::MODELS {
        let Some(t) = common::tokenizer(file) else {
            continue;
        };
        for s in SAMPLES {
            let ids = t.encode(s, false, false);
            let back = t.decode(&ids, DecodeOptions::default());
            // SentencePiece with add_space_prefix would add a space; these files do not.
            assert_eq!(&back, s, "{name}: {s:?} -> {ids:?}");
            let mut d = t.stream_decoder(false);
            let mut streamed: String = ids.iter().map(|&id| t.stream_push(&mut d, id)).collect();
            streamed.push_str(&d.finish());
            assert_eq!(&streamed, s, "{name} streamed");
        }
        // Every token's bytes are what token_to_piece gives with special = true.
        for id in 0..t.n_vocab() as u32 {
            assert_eq!(t.token_bytes(id), t.token_to_piece(id, true));
        }
    }
}
