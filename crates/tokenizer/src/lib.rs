//! stampo's tokenizers, built from GGUF metadata and agreeing with llama.cpp token for
//! token: byte-level BPE (`tokenizer.ggml.model = gpt2`, with the pre-tokenizer named by
//! `tokenizer.ggml.pre`) and SentencePiece (`llama`: scores, `▁`, byte fallback).
//!
//! Key types: [`Tokenizer`] (encode, decode, the token → bytes table), [`StreamDecoder`]
//! (decoding that never emits half a character), [`TokenAttr`] (which tokens are control
//! or user-defined), [`PreTokenizer`].
//!
//! # Usage
//! 1. Parse the model file with `stampo_gguf::Gguf::parse`.
//! 2. [`Tokenizer::from_gguf`] reads the vocabulary, merges or scores, special tokens
//!    and flags, with llama.cpp's defaults.
//! 3. [`Tokenizer::encode`]`(text, add_special, parse_special)` gives the ids
//!    `llama_tokenize` gives; [`Tokenizer::decode`] the text `llama_detokenize` gives.
//! 4. For a grammar engine: [`Tokenizer::token_bytes`] is each token's raw bytes and
//!    [`Tokenizer::is_control`] tells which tokens text can never produce.

mod decode;
mod encode;
mod error;
mod index;
mod pretokenize;
pub mod template;
mod unicode;
mod unicode_data;
mod vocab;

use aho_corasick::AhoCorasick;
use stampo_gguf::{Gguf, Metadata};

pub use decode::{DecodeOptions, StreamDecoder};
pub use error::{Result, TokenizerError};
pub use pretokenize::{PreTokenizer, Split};
pub use template::{ChatRequest, ChatTemplate, TemplateOrigin};
pub use unicode::{byte_to_char, char_to_byte};
pub use vocab::{SpecialTokens, TokenAttr, TokenId, VocabKind};

use vocab::Vocab;

/// A tokenizer read from a GGUF file.
#[derive(Debug, Clone)]
pub struct Tokenizer {
    vocab: Vocab,
    pieces: index::Strings,
    /// Finds which special tokens occur in a text at all (pattern i = `special_cache[i]`),
    /// so the longest-first split only scans for those.
    special_finder: Option<AhoCorasick>,
}

impl Tokenizer {
    /// Builds the tokenizer from a parsed GGUF file's metadata.
    pub fn from_gguf(gguf: &Gguf<'_>) -> Result<Self> {
        Self::from_metadata(gguf.metadata())
    }

    /// Builds the tokenizer from GGUF metadata.
    pub fn from_metadata(metadata: &Metadata<'_>) -> Result<Self> {
        let vocab = Vocab::from_metadata(metadata)?;
        let pieces = decode::build_pieces(&vocab);
        let patterns: Vec<&[u8]> = vocab
            .special_cache
            .iter()
            .map(|&id| &vocab.texts[id as usize])
            .collect();
        let special_finder = if patterns.is_empty() {
            None
        } else {
            AhoCorasick::new(&patterns).ok()
        };
        Ok(Tokenizer {
            vocab,
            pieces,
            special_finder,
        })
    }

    /// Text to token ids, as `llama_tokenize(text, add_special, parse_special)`.
    ///
    /// `add_special` adds BOS/EOS where the model asks for them; `parse_special` turns the
    /// text of control tokens (`<|im_start|>`) into those tokens instead of plain text.
    /// User-defined tokens are always matched.
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<TokenId> {
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        let candidates = self.special_candidates(text);
        self.vocab
            .encode(text, &candidates, add_special, parse_special, &mut out);
        out
    }

    fn special_candidates(&self, text: &str) -> Vec<TokenId> {
        let Some(finder) = &self.special_finder else {
            return vec![];
        };
        let mut seen = vec![false; self.vocab.special_cache.len()];
        let mut any = false;
        for m in finder.find_overlapping_iter(text) {
            seen[m.pattern().as_usize()] = true;
            any = true;
        }
        if !any {
            return vec![];
        }
        self.vocab
            .special_cache
            .iter()
            .zip(seen)
            .filter(|(_, s)| *s)
            .map(|(&id, _)| id)
            .collect()
    }

    /// Token ids to text, as `llama_detokenize`; bytes that are not UTF-8 become U+FFFD.
    pub fn decode(&self, ids: &[TokenId], opts: DecodeOptions) -> String {
        String::from_utf8_lossy(&self.decode_bytes(ids, opts)).into_owned()
    }

    /// Token ids to bytes, as `llama_detokenize` (a sequence may end mid-character).
    pub fn decode_bytes(&self, ids: &[TokenId], opts: DecodeOptions) -> Vec<u8> {
        decode::detokenize(&self.vocab, &self.pieces, ids, opts)
    }

    /// One token's bytes as `llama_token_to_piece(id, lstrip = 0, special)`: control and
    /// unknown tokens are empty unless `special`. Out-of-range ids are empty.
    pub fn token_to_piece(&self, id: TokenId, special: bool) -> &[u8] {
        decode::piece_for(&self.vocab, &self.pieces, id, special)
    }

    /// The raw bytes of every token, the table a grammar engine builds its token masks
    /// from: byte-level BPE tokens un-mapped to bytes, SentencePiece `▁` as a space and
    /// `<0xXX>` as the byte, control and user-defined tokens as their text (use
    /// [`Tokenizer::is_control`] to leave those out of masks).
    pub fn token_bytes(&self, id: TokenId) -> &[u8] {
        if (id as usize) < self.pieces.len() {
            &self.pieces[id as usize]
        } else {
            &[]
        }
    }

    /// A decoder for streaming output; `special` renders control tokens as their text.
    pub fn stream_decoder(&self, special: bool) -> StreamDecoder {
        StreamDecoder::new(special)
    }

    /// Feeds one token to a stream decoder.
    pub fn stream_push(&self, decoder: &mut StreamDecoder, id: TokenId) -> String {
        let bytes = self.token_to_piece(id, decoder.special());
        decoder.push_bytes(bytes)
    }

    /// The number of tokens.
    pub fn n_vocab(&self) -> usize {
        self.vocab.texts.len()
    }
    /// The token's text as stored in the file (`Ġhello`, `▁hello`, `<0x0A>`).
    pub fn token_text(&self, id: TokenId) -> Option<&[u8]> {
        ((id as usize) < self.vocab.texts.len()).then(|| &self.vocab.texts[id as usize])
    }
    /// The id of a token text as stored in the file.
    pub fn token_id(&self, text: &str) -> Option<TokenId> {
        self.vocab.text_to_token(text.as_bytes())
    }
    /// The token's attributes.
    pub fn attr(&self, id: TokenId) -> TokenAttr {
        self.vocab
            .attrs
            .get(id as usize)
            .copied()
            .unwrap_or_default()
    }
    /// Whether the token is a control or unknown token: text never produces it unless
    /// special tokens are parsed, and it decodes to nothing unless asked.
    pub fn is_control(&self, id: TokenId) -> bool {
        self.attr(id).has(TokenAttr::CONTROL | TokenAttr::UNKNOWN)
    }
    /// Whether the token is special in any way (control, unknown or user-defined).
    pub fn is_special(&self, id: TokenId) -> bool {
        self.attr(id)
            .has(TokenAttr::CONTROL | TokenAttr::UNKNOWN | TokenAttr::USER_DEFINED)
    }
    /// The special token ids.
    pub fn special_tokens(&self) -> &SpecialTokens {
        &self.vocab.special
    }
    /// BOS, if the model has one.
    pub fn bos(&self) -> Option<TokenId> {
        self.vocab.special.bos
    }
    /// EOS, if the model has one.
    pub fn eos(&self) -> Option<TokenId> {
        self.vocab.special.eos
    }
    /// Whether the token ends generation.
    pub fn is_eog(&self, id: TokenId) -> bool {
        self.vocab.special.eog.binary_search(&id).is_ok()
    }
    /// Whether encoding with `add_special` adds BOS.
    pub fn add_bos(&self) -> bool {
        self.vocab.add_bos
    }
    /// Whether encoding with `add_special` adds EOS.
    pub fn add_eos(&self) -> bool {
        self.vocab.add_eos
    }
    /// BPE or SentencePiece.
    pub fn kind(&self) -> VocabKind {
        self.vocab.kind
    }
    /// The pre-tokenizer (BPE only).
    pub fn pre_tokenizer(&self) -> Option<&PreTokenizer> {
        self.vocab.pre.as_ref()
    }
}
