//! Test helpers: a real vocabulary read from a GGUF file's metadata.
//!
//! The grammar crate must not depend on the tokenizer, so tests read the token strings
//! themselves: a minimal walk over GGUF metadata (header, then key/value pairs) that keeps
//! `tokenizer.ggml.tokens`, `.token_type` and `.eos_token_id`, and the byte decoding of the
//! two token spellings (GPT-2 byte-level BPE; SentencePiece with `▁` and `<0xXX>`).

#![allow(dead_code, clippy::panic)]

use stampo_grammar::{Matcher, Vocabulary};

/// The model's vocabulary, or `None` (after printing SKIPPED) when the file is absent and
/// fixtures are not required.
pub fn vocab(file: &str) -> Option<Vocabulary> {
    stampo_test_data::model_bytes(file).map(|bytes| read_vocab(&bytes))
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        s
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take(4).try_into().unwrap_or_default())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take(8).try_into().unwrap_or_default())
    }
    fn string(&mut self) -> Vec<u8> {
        let n = self.u64() as usize;
        self.take(n).to_vec()
    }
    /// Reads a value of GGUF type `t`; scalars as i64, strings/arrays into the out lists.
    fn value(&mut self, t: u32, strings: &mut Vec<Vec<u8>>, ints: &mut Vec<i64>) {
        match t {
            0 | 1 | 7 => ints.push(self.take(1)[0] as i8 as i64),
            2 | 3 => {
                ints.push(i16::from_le_bytes(self.take(2).try_into().unwrap_or_default()) as i64)
            }
            4 => ints.push(self.u32() as i64),
            5 => ints.push(self.u32() as i32 as i64),
            6 => ints.push(f32::from_bits(self.u32()) as i64),
            8 => strings.push(self.string()),
            9 => {
                let et = self.u32();
                let n = self.u64();
                for _ in 0..n {
                    self.value(et, strings, ints);
                }
            }
            10..=12 => ints.push(self.u64() as i64),
            _ => panic!("unknown GGUF type {t}"),
        }
    }
}

fn read_vocab(b: &[u8]) -> Vocabulary {
    let mut r = Reader { b, pos: 0 };
    assert_eq!(r.take(4), b"GGUF");
    let _version = r.u32();
    let _tensors = r.u64();
    let kvs = r.u64();
    let (mut tokens, mut types, mut eos, mut model) = (Vec::new(), Vec::new(), None, Vec::new());
    for _ in 0..kvs {
        let key = r.string();
        let t = r.u32();
        let (mut strings, mut ints) = (Vec::new(), Vec::new());
        r.value(t, &mut strings, &mut ints);
        match key.as_slice() {
            b"tokenizer.ggml.tokens" => tokens = strings,
            b"tokenizer.ggml.token_type" => types = ints,
            b"tokenizer.ggml.eos_token_id" => eos = ints.first().map(|&e| e as u32),
            b"tokenizer.ggml.model" => model = strings.pop().unwrap_or_default(),
            _ => {}
        }
    }
    let gpt2 = model == b"gpt2";
    let unicode_to_byte = gpt2_byte_decoder();
    // token_type: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte.
    let special: Vec<bool> = types.iter().map(|&t| t == 3 || t == 5 || t == 2).collect();
    let bytes: Vec<Vec<u8>> = tokens
        .iter()
        .zip(types.iter().chain(std::iter::repeat(&1)))
        .map(|(tok, &ty)| {
            let s = String::from_utf8_lossy(tok);
            if gpt2 && ty != 4 {
                s.chars()
                    .map(|c| unicode_to_byte.get(&c).copied().unwrap_or(b'?'))
                    .collect()
            } else if ty == 6 && s.starts_with("<0x") {
                vec![u8::from_str_radix(&s[3..5], 16).unwrap_or(0)]
            } else {
                s.replace('\u{2581}', " ").into_bytes()
            }
        })
        .collect();
    Vocabulary::new(bytes, special, eos.into_iter().collect())
}

/// GPT-2's byte ↔ printable-character table, inverted.
fn gpt2_byte_decoder() -> std::collections::HashMap<char, u8> {
    let mut printable: Vec<u32> = (b'!' as u32..=b'~' as u32)
        .chain(0xA1..=0xAC)
        .chain(0xAE..=0xFF)
        .collect();
    let mut chars: Vec<u32> = printable.clone();
    let mut n = 0;
    for b in 0..256u32 {
        if !printable.contains(&b) {
            printable.push(b);
            chars.push(256 + n);
            n += 1;
        }
    }
    printable
        .iter()
        .zip(&chars)
        .filter_map(|(&b, &c)| Some((char::from_u32(c)?, b as u8)))
        .collect()
}

/// A token sequence spelling `text`: greedy longest match over the vocabulary (a valid
/// spelling, not necessarily the model tokenizer's).
pub fn greedy_tokens(v: &Vocabulary, text: &[u8]) -> Vec<u32> {
    let mut by_bytes: std::collections::HashMap<&[u8], u32> = std::collections::HashMap::new();
    for id in 0..v.len() as u32 {
        if !v.is_special(id) && !v.eos().contains(&id) && !v.token_bytes(id).is_empty() {
            by_bytes.entry(v.token_bytes(id)).or_insert(id);
        }
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let mut best = None;
        for len in (1..=(text.len() - i).min(64)).rev() {
            if let Some(&id) = by_bytes.get(&text[i..i + len]) {
                best = Some((id, len));
                break;
            }
        }
        let (id, len) = best.unwrap_or_else(|| panic!("no token for byte {}", text[i]));
        out.push(id);
        i += len;
    }
    out
}

/// The token ids set in a mask.
pub fn bits(mask: &[u32]) -> Vec<u32> {
    (0..mask.len() as u32 * 32)
        .filter(|&i| mask[i as usize / 32] >> (i % 32) & 1 == 1)
        .collect()
}

/// A tiny deterministic generator (xorshift), so failures reproduce.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// One random walk from `m`'s start: a token drawn uniformly from each mask for `free`
/// steps, then steered to the end (end-of-sequence where allowed, else a token spelling the
/// start of the shortest closing bytes), up to `limit` steps. Returns the document, or why
/// the walk failed: a dead end (an empty mask) or no end within `limit`.
pub fn random_walk(
    m: &mut Matcher,
    v: &Vocabulary,
    rng: &mut Rng,
    free: usize,
    limit: usize,
) -> Result<Vec<u8>, String> {
    let eos = v.eos()[0];
    let mut mask = vec![0u32; v.mask_words()];
    let mut doc = Vec::new();
    m.reset();
    for step in 0..limit {
        m.compute_mask(&mut mask).map_err(|e| e.to_string())?;
        let allowed = bits(&mask);
        if allowed.is_empty() {
            return Err(format!(
                "dead end after {:?}",
                String::from_utf8_lossy(&doc)
            ));
        }
        let id = if step < free {
            allowed[(rng.next() % allowed.len() as u64) as usize]
        } else if allowed.contains(&eos) {
            eos
        } else {
            let close = m.closing_bytes().unwrap_or_default();
            *allowed
                .iter()
                .find(|&&t| !v.token_bytes(t).is_empty() && close.starts_with(v.token_bytes(t)))
                .unwrap_or(&allowed[0])
        };
        m.commit_token(id).map_err(|e| e.to_string())?;
        if id == eos {
            return if m.has_ended() {
                Ok(doc)
            } else {
                Err("end-of-sequence where the document cannot end".into())
            };
        }
        doc.extend_from_slice(v.token_bytes(id));
    }
    Err(format!(
        "no end within {limit} steps: {:?}",
        String::from_utf8_lossy(&doc)
    ))
}
