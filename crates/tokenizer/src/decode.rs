//! Token ids to text: per-token pieces (`llama_token_to_piece`), whole-sequence decoding
//! (`llama_detokenize`, with its space clean-up) and a streaming decoder that never emits
//! a broken UTF-8 sequence.

use crate::index::Strings;
use crate::unicode::char_to_byte;
use crate::vocab::{TokenAttr, TokenId, Vocab, VocabKind};

/// The bytes of every token as llama.cpp renders it with `special = true`: byte-level BPE
/// characters mapped back to bytes, SentencePiece `▁` as a space and `<0xXX>` as the byte,
/// control and user-defined tokens as their text.
pub(crate) fn build_pieces(vocab: &Vocab) -> Strings {
    let mut out = Strings::with_capacity(vocab.texts.len(), vocab.texts.len() * 8);
    for id in 0..vocab.texts.len() {
        out.push(&piece(vocab, id as TokenId));
    }
    out
}

fn piece(vocab: &Vocab, id: TokenId) -> Vec<u8> {
    let attr = vocab.attrs[id as usize];
    let text = &vocab.texts[id as usize];
    if attr.has(TokenAttr::UNKNOWN | TokenAttr::CONTROL | TokenAttr::USER_DEFINED) {
        return text.to_vec();
    }
    if attr.has(TokenAttr::NORMAL) {
        return match vocab.kind {
            VocabKind::Spm => replace_all(text, "\u{2581}".as_bytes(), b" "),
            VocabKind::Bpe => decode_byte_level(text),
        };
    }
    if attr.has(TokenAttr::BYTE) {
        return vec![vocab.token_to_byte(id)];
    }
    Vec::new()
}

fn replace_all(text: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    out
}

/// `llama_decode_text`: each character of a byte-level token back to its byte; a character
/// outside the map becomes llama.cpp's `[UNK_BYTE_0x…]` marker.
fn decode_byte_level(text: &[u8]) -> Vec<u8> {
    let s = String::from_utf8_lossy(text);
    let mut out = Vec::with_capacity(text.len());
    for c in s.chars() {
        match char_to_byte(c) {
            Some(b) => out.push(b),
            None => {
                out.extend_from_slice(b"[UNK_BYTE_0x");
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).as_bytes() {
                    out.extend_from_slice(format!("{b:02x}").as_bytes());
                }
                out.extend_from_slice(s.as_bytes());
                out.push(b']');
            }
        }
    }
    out
}

/// Options of [`crate::Tokenizer::decode`], as `llama_detokenize`'s flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DecodeOptions {
    /// Drop a leading BOS and trailing EOS when the model adds them.
    pub remove_special: bool,
    /// Render control tokens as their text instead of nothing.
    pub unparse_special: bool,
}

pub(crate) fn detokenize(
    vocab: &Vocab,
    pieces: &Strings,
    ids: &[TokenId],
    opts: DecodeOptions,
) -> Vec<u8> {
    let mut ids = ids;
    let mut remove_space = vocab.add_space_prefix;
    if opts.remove_special
        && vocab.add_bos
        && ids.first().is_some_and(|&t| Some(t) == vocab.special.bos)
    {
        remove_space = false;
        ids = &ids[1..];
    }
    if opts.remove_special
        && vocab.add_eos
        && ids.last().is_some_and(|&t| Some(t) == vocab.special.eos)
    {
        ids = &ids[..ids.len() - 1];
    }
    let mut text = Vec::new();
    for &id in ids {
        let mut p = piece_for(vocab, pieces, id, opts.unparse_special);
        if remove_space && p.first() == Some(&b' ') {
            p = &p[1..];
        }
        remove_space = false;
        text.extend_from_slice(p);
    }
    if vocab.clean_spaces {
        text = clean_spaces(text);
    }
    text
}

pub(crate) fn piece_for<'a>(
    vocab: &Vocab,
    pieces: &'a Strings,
    id: TokenId,
    special: bool,
) -> &'a [u8] {
    let Some(attr) = vocab.attrs.get(id as usize) else {
        return &[];
    };
    if !special && attr.has(TokenAttr::UNKNOWN | TokenAttr::CONTROL) {
        return &[];
    }
    &pieces[id as usize]
}

/// llama.cpp's three clean-up passes: no space before `?!.,`, none around a lone `'`,
/// none before `'s`, `'m`, `'re`, `'ve`.
fn clean_spaces(text: Vec<u8>) -> Vec<u8> {
    let mut t = text;
    // first pass: " ?", " !", " .", " ,"
    let mut out: Vec<u8> = Vec::with_capacity(t.len());
    for (i, &x) in t.iter().enumerate() {
        if i > 0 && t[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            out.pop();
        }
        out.push(x);
    }
    t = out;
    // second pass: " ' " -> "'"
    let mut out: Vec<u8> = Vec::with_capacity(t.len());
    let mut i = 0;
    // llama.cpp overwrites a removed space with NUL in place, so the character before the
    // next one is then not a space.
    let mut prev_removed = false;
    while i < t.len() {
        let x = t[i];
        let prev_is_space = i > 0 && t[i - 1] == b' ' && !prev_removed;
        prev_removed = false;
        if i > 0 && x == b'\'' && i + 1 < t.len() && prev_is_space && t[i + 1] == b' ' {
            out.pop();
            out.push(x);
            i += 2;
            prev_removed = true;
            continue;
        }
        out.push(x);
        i += 1;
    }
    t = out;
    // third pass: " 's", " 'm", " 're", " 've"
    let mut out: Vec<u8> = Vec::with_capacity(t.len());
    for (i, &x) in t.iter().enumerate() {
        if i > 0 && t[i - 1] == b' ' && x == b'\'' && i + 1 < t.len() {
            let x1 = t[i + 1];
            let remove = match x1 {
                b's' | b'm' => true,
                b'r' | b'v' => i + 2 < t.len() && t[i + 2] == b'e',
                _ => false,
            };
            if remove {
                out.pop();
            }
        }
        out.push(x);
    }
    out
}

/// Decodes tokens one at a time into text, holding back the bytes of a UTF-8 sequence
/// until it is complete: every string it returns is whole characters. Bytes that can
/// never form a character come out as U+FFFD.
#[derive(Debug, Clone, Default)]
pub struct StreamDecoder {
    pending: Vec<u8>,
    special: bool,
}

impl StreamDecoder {
    /// A decoder; `special` renders control tokens as their text.
    pub fn new(special: bool) -> Self {
        StreamDecoder {
            pending: Vec::new(),
            special,
        }
    }

    /// Adds a token's bytes (from [`crate::Tokenizer::token_to_piece`]) and returns the
    /// text that is now complete.
    pub fn push_bytes(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    // The prefix is valid UTF-8 by the error's own report.
                    out.push_str(&String::from_utf8_lossy(&self.pending[..valid]));
                    match e.error_len() {
                        // An incomplete sequence at the end: wait for more bytes.
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                        Some(n) => {
                            out.push('\u{FFFD}');
                            self.pending.drain(..valid + n);
                        }
                    }
                }
            }
        }
    }

    /// Whether control tokens are rendered.
    pub fn special(&self) -> bool {
        self.special
    }

    /// Ends the stream: held-back bytes of an unfinished character come out as U+FFFD.
    pub fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }
}
