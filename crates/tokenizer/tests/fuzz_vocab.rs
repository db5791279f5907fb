//! Tokenizers built from corrupted vocabularies never panic: a small BPE and a small
//! SentencePiece vocabulary are mutated at random (in the GGUF bytes), and whatever still
//! parses is built into a tokenizer and made to encode and decode text.
//! `STAMPO_FUZZ_ITERS` sets the number of mutants (default 2000).
#![allow(clippy::unwrap_used, clippy::panic)]

use stampo_gguf::writer::{GgufWriter, OwnedValue};
use stampo_tokenizer::{DecodeOptions, Tokenizer, byte_to_char};

fn bpe() -> Vec<u8> {
    let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_to_char(b).to_string()).collect();
    tokens.extend(["he", "ll", "hell", "hello", "<|im_start|>", "<|im_end|>"].map(String::from));
    let mut types = vec![1i32; tokens.len()];
    let n = types.len();
    types[n - 2] = 3;
    types[n - 1] = 4;
    let mut w = GgufWriter::new();
    w.add("tokenizer.ggml.model", OwnedValue::String("gpt2".into()))
        .add("tokenizer.ggml.pre", OwnedValue::String("llama-bpe".into()))
        .add("tokenizer.ggml.tokens", OwnedValue::strings(tokens))
        .add("tokenizer.ggml.token_type", OwnedValue::i32s(types))
        .add(
            "tokenizer.ggml.merges",
            OwnedValue::strings(["h e", "l l", "he ll", "hell o"]),
        )
        .add("tokenizer.ggml.bos_token_id", OwnedValue::U32(260));
    w.to_bytes()
}

fn spm() -> Vec<u8> {
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    tokens.extend(["▁", "▁h", "▁he", "ll", "llo", "▁hello", "o"].map(String::from));
    let n = tokens.len();
    let mut types = vec![1i32; n];
    types[..3].copy_from_slice(&[2, 3, 3]);
    types[3..259].fill(6);
    let scores: Vec<f32> = (0..n).map(|i| -(i as f32)).collect();
    let mut w = GgufWriter::new();
    w.add("tokenizer.ggml.model", OwnedValue::String("llama".into()))
        .add("tokenizer.ggml.tokens", OwnedValue::strings(tokens))
        .add("tokenizer.ggml.scores", OwnedValue::f32s(scores))
        .add("tokenizer.ggml.token_type", OwnedValue::i32s(types));
    w.to_bytes()
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const TEXTS: &[&str] = &[
    "hello world",
    "<|im_start|>hello<|im_end|>",
    "  \n\n日本 🎉 12345 it's",
    "",
];

#[test]
fn corrupted_vocabularies_never_panic() {
    let iters: usize = std::env::var("STAMPO_FUZZ_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let seeds = [bpe(), spm()];
    for s in &seeds {
        let g = stampo_gguf::Gguf::parse(s).unwrap();
        Tokenizer::from_gguf(&g).unwrap();
    }
    let mut rng = Rng(0xC0FFEE);
    let mut built = 0;
    for i in 0..iters {
        let mut b = seeds[i % 2].clone();
        for _ in 0..1 + rng.below(3) {
            let at = rng.below(b.len());
            b[at] = match rng.below(3) {
                0 => b[at] ^ (1 << rng.below(8)),
                1 => rng.next() as u8,
                _ => b' ',
            };
        }
        let r = std::panic::catch_unwind(|| {
            let Ok(g) = stampo_gguf::Gguf::parse(&b) else {
                return false;
            };
            let Ok(t) = Tokenizer::from_gguf(&g) else {
                return false;
            };
            for text in TEXTS {
                for (add, parse) in [(false, false), (true, true)] {
                    let ids = t.encode(text, add, parse);
                    let _ = t.decode(
                        &ids,
                        DecodeOptions {
                            remove_special: add,
                            unparse_special: parse,
                        },
                    );
                }
            }
            for id in 0..t.n_vocab() as u32 + 2 {
                let _ = (
                    t.token_bytes(id),
                    t.token_to_piece(id, false),
                    t.is_control(id),
                );
            }
            true
        });
        match r {
            Ok(ok) => built += usize::from(ok),
            Err(_) => panic!("mutant {i} panicked"),
        }
    }
    assert!(built > iters / 10, "only {built} mutants built a tokenizer");
}
