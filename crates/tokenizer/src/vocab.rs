//! The vocabulary read from GGUF metadata: token texts, scores, attributes, special ids
//! and flags, with llama.cpp's defaults and its detection of special tokens by text.

use stampo_gguf::Metadata;

use crate::error::{Result, TokenizerError};
use crate::index::{MergeIndex, Strings, TextIndex};
use crate::pretokenize::PreTokenizer;

/// A token id.
pub type TokenId = u32;

/// Token attributes, as llama.cpp's `llama_token_attr` bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TokenAttr(pub u32);

impl TokenAttr {
    pub const UNDEFINED: u32 = 0;
    pub const UNKNOWN: u32 = 1 << 0;
    pub const UNUSED: u32 = 1 << 1;
    pub const NORMAL: u32 = 1 << 2;
    /// Control tokens (`<|im_start|>`, `<bos>`…): never produced from text unless
    /// special tokens are parsed, and decoded as empty unless asked for.
    pub const CONTROL: u32 = 1 << 3;
    /// User-defined tokens: always matched in text before anything else, decoded as their text.
    pub const USER_DEFINED: u32 = 1 << 4;
    /// Byte tokens (`<0x0A>`).
    pub const BYTE: u32 = 1 << 5;
    pub const NORMALIZED: u32 = 1 << 6;
    pub const LSTRIP: u32 = 1 << 7;
    pub const RSTRIP: u32 = 1 << 8;
    pub const SINGLE_WORD: u32 = 1 << 9;

    /// Whether any of `bits` is set.
    pub fn has(self, bits: u32) -> bool {
        self.0 & bits != 0
    }

    fn from_token_type(t: i32) -> Self {
        TokenAttr(match t {
            1 => Self::NORMAL,
            2 => Self::UNKNOWN,
            3 => Self::CONTROL,
            4 => Self::USER_DEFINED,
            5 => Self::UNUSED,
            6 => Self::BYTE,
            _ => Self::UNDEFINED,
        })
    }
}

/// The two tokenizer algorithms stampo implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VocabKind {
    /// `tokenizer.ggml.model = gpt2`: byte-level BPE with merges.
    Bpe,
    /// `tokenizer.ggml.model = llama`: SentencePiece (scores, `▁`, byte fallback).
    Spm,
}

/// Ids of the special tokens the model names (absent ones are `None`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpecialTokens {
    pub bos: Option<TokenId>,
    pub eos: Option<TokenId>,
    pub eot: Option<TokenId>,
    pub eom: Option<TokenId>,
    pub unk: Option<TokenId>,
    pub sep: Option<TokenId>,
    pub pad: Option<TokenId>,
    pub mask: Option<TokenId>,
    pub fim_pre: Option<TokenId>,
    pub fim_suf: Option<TokenId>,
    pub fim_mid: Option<TokenId>,
    pub fim_pad: Option<TokenId>,
    pub fim_rep: Option<TokenId>,
    pub fim_sep: Option<TokenId>,
    /// Every token that ends generation (eos, eot, eom, `<|im_end|>`…), sorted.
    pub eog: Vec<TokenId>,
}

/// The vocabulary and tokenizer settings.
#[derive(Debug, Clone)]
pub struct Vocab {
    pub(crate) kind: VocabKind,
    pub(crate) texts: Strings,
    pub(crate) scores: Vec<f32>,
    pub(crate) attrs: Vec<TokenAttr>,
    pub(crate) text_to_id: TextIndex,
    pub(crate) special: SpecialTokens,
    pub(crate) add_bos: bool,
    pub(crate) add_eos: bool,
    pub(crate) add_space_prefix: bool,
    pub(crate) clean_spaces: bool,
    pub(crate) pre: Option<PreTokenizer>,
    /// Special-token texts to split text on, longest first (`cache_special_tokens`).
    pub(crate) special_cache: Vec<TokenId>,
    /// Byte-level BPE merges: `(left, right)` → rank (the first occurrence wins).
    pub(crate) merges: MergeIndex,
}

const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];
const EOM_TEXTS: &[&str] = &["<|eom_id|>"];
const FIM_PRE_TEXTS: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
];
const FIM_SUF_TEXTS: &[&str] = &[
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
];
const FIM_MID_TEXTS: &[&str] = &[
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
];
const FIM_PAD_TEXTS: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP_TEXTS: &[&str] = &[
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
];
const FIM_SEP_TEXTS: &[&str] = &["<|file_sep|>"];
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

impl Vocab {
    pub(crate) fn from_metadata(m: &Metadata<'_>) -> Result<Self> {
        let model: &str = m.get_str("tokenizer.ggml.model")?;
        let pre_name: &str = m.optional("tokenizer.ggml.pre")?.unwrap_or("");
        let kind = match model {
            "gpt2" => VocabKind::Bpe,
            "llama" => VocabKind::Spm,
            other => {
                return Err(TokenizerError::UnsupportedModel {
                    model: other.to_string(),
                });
            }
        };

        let tokens = m.get_array("tokenizer.ggml.tokens")?;
        let strings = tokens
            .strings()
            .ok_or_else(|| stampo_gguf::GgufError::WrongType {
                key: "tokenizer.ggml.tokens".into(),
                expected: "an array of strings",
                found: stampo_gguf::ValueType::Array,
            })?;
        let n = strings.len();
        let mut texts = Strings::with_capacity(n, tokens.raw_bytes().len());
        for (i, s) in strings.enumerate() {
            if s.as_bytes().is_empty() {
                texts.push(format!("[EMPTY_{i}]").as_bytes());
            } else {
                texts.push(s.as_bytes());
            }
        }
        let text_to_id = TextIndex::build(&texts);

        let scores = match m.optional::<stampo_gguf::Array>("tokenizer.ggml.scores")? {
            None => vec![0.0; n],
            Some(a) => {
                let v: Vec<f32> = match a.f32s() {
                    Some(it) => it.collect(),
                    None => a
                        .integers()
                        .unwrap_or_default()
                        .into_iter()
                        .map(|i| i as f32)
                        .collect(),
                };
                if v.len() < n {
                    return Err(TokenizerError::LengthMismatch {
                        key: "tokenizer.ggml.scores".into(),
                        expected: n,
                        found: v.len(),
                    });
                }
                v
            }
        };
        let mut attrs = match m.optional::<stampo_gguf::Array>("tokenizer.ggml.token_type")? {
            None => vec![TokenAttr(TokenAttr::NORMAL); n],
            Some(a) => {
                let v = a.integers().unwrap_or_default();
                if v.len() < n {
                    return Err(TokenizerError::LengthMismatch {
                        key: "tokenizer.ggml.token_type".into(),
                        expected: n,
                        found: v.len(),
                    });
                }
                v.iter()
                    .take(n)
                    .map(|&t| TokenAttr::from_token_type(t as i32))
                    .collect()
            }
        };

        // Defaults per model, then per pre-tokenizer, then the metadata's own flags.
        let mut special = SpecialTokens::default();
        let (mut add_bos, mut add_eos, mut add_space_prefix, clean_spaces);
        let mut pre = None;
        let mut merges = MergeIndex::default();
        match kind {
            VocabKind::Spm => {
                special.bos = Some(1);
                special.eos = Some(2);
                special.unk = Some(0);
                add_bos = true;
                add_eos = false;
                add_space_prefix = true;
                clean_spaces = false;
            }
            VocabKind::Bpe => {
                special.bos = Some(11);
                special.eos = Some(11);
                let p = PreTokenizer::from_name(pre_name).ok_or_else(|| {
                    TokenizerError::UnsupportedPreTokenizer {
                        name: pre_name.to_string(),
                    }
                })?;
                add_bos = p.default_add_bos;
                add_eos = false;
                add_space_prefix = false;
                clean_spaces = p.clean_spaces;
                pre = Some(p);
                let arr = m.get_array("tokenizer.ggml.merges")?;
                let list = arr
                    .strings()
                    .ok_or_else(|| stampo_gguf::GgufError::WrongType {
                        key: "tokenizer.ggml.merges".into(),
                        expected: "an array of strings",
                        found: stampo_gguf::ValueType::Array,
                    })?;
                merges = MergeIndex::with_capacity(list.len(), arr.raw_bytes().len());
                for s in list {
                    let b = s.as_bytes();
                    // llama.cpp splits at the first space after the first byte.
                    let (first, second): (&[u8], &[u8]) =
                        match b.iter().skip(1).position(|&c| c == b' ') {
                            Some(p) => (&b[..p + 1], &b[p + 2..]),
                            None => (&[], &[]),
                        };
                    merges.push(first, second);
                }
            }
        }
        if let Some(v) = m.optional::<bool>("tokenizer.ggml.add_space_prefix")? {
            add_space_prefix = v;
        }

        type Slot = fn(&mut SpecialTokens) -> &mut Option<TokenId>;
        let keys: [(&str, Slot); 17] = [
            ("tokenizer.ggml.bos_token_id", |s| &mut s.bos),
            ("tokenizer.ggml.eos_token_id", |s| &mut s.eos),
            ("tokenizer.ggml.eot_token_id", |s| &mut s.eot),
            ("tokenizer.ggml.eom_token_id", |s| &mut s.eom),
            ("tokenizer.ggml.unknown_token_id", |s| &mut s.unk),
            ("tokenizer.ggml.seperator_token_id", |s| &mut s.sep),
            ("tokenizer.ggml.padding_token_id", |s| &mut s.pad),
            ("tokenizer.ggml.mask_token_id", |s| &mut s.mask),
            ("tokenizer.ggml.fim_pre_token_id", |s| &mut s.fim_pre),
            ("tokenizer.ggml.fim_suf_token_id", |s| &mut s.fim_suf),
            ("tokenizer.ggml.fim_mid_token_id", |s| &mut s.fim_mid),
            ("tokenizer.ggml.fim_pad_token_id", |s| &mut s.fim_pad),
            ("tokenizer.ggml.fim_rep_token_id", |s| &mut s.fim_rep),
            ("tokenizer.ggml.fim_sep_token_id", |s| &mut s.fim_sep),
            ("tokenizer.ggml.prefix_token_id", |s| &mut s.fim_pre),
            ("tokenizer.ggml.suffix_token_id", |s| &mut s.fim_suf),
            ("tokenizer.ggml.middle_token_id", |s| &mut s.fim_mid),
        ];
        for (key, slot) in keys {
            let slot = slot(&mut special);
            if slot.is_some_and(|id| id as usize >= n) {
                *slot = None;
            }
            if let Some(id) = m.optional::<u32>(key)?
                && (id as usize) < n
            {
                *slot = Some(id);
            }
        }
        if let Some(v) = m.optional::<bool>("tokenizer.ggml.add_bos_token")? {
            add_bos = v;
        }
        if let Some(v) = m.optional::<bool>("tokenizer.ggml.add_eos_token")? {
            add_eos = v;
        }

        // When several texts of a list are in the vocabulary, llama.cpp takes the first its
        // hash map yields; stampo takes the first in the list's order.
        let find = |list: &[&str]| {
            list.iter()
                .find_map(|t| text_to_id.get(&texts, t.as_bytes()))
        };
        let mut mark_control = |id: TokenId| attrs[id as usize].0 |= TokenAttr::CONTROL;
        for (slot, list) in [
            (&mut special.eot, EOT_TEXTS),
            (&mut special.eom, EOM_TEXTS),
            (&mut special.fim_pre, FIM_PRE_TEXTS),
            (&mut special.fim_suf, FIM_SUF_TEXTS),
            (&mut special.fim_mid, FIM_MID_TEXTS),
            (&mut special.fim_pad, FIM_PAD_TEXTS),
            (&mut special.fim_rep, FIM_REP_TEXTS),
            (&mut special.fim_sep, FIM_SEP_TEXTS),
        ] {
            if slot.is_none()
                && let Some(id) = find(list)
            {
                *slot = Some(id);
                mark_control(id);
            }
        }
        // Control tokens named "unused" are unused.
        for (id, a) in attrs.iter_mut().enumerate() {
            if a.has(TokenAttr::CONTROL) && texts[id].windows(6).any(|w| w == b"unused") {
                a.0 |= TokenAttr::UNUSED;
            }
        }
        let mut eog: Vec<TokenId> = [special.fim_pad, special.fim_rep, special.fim_sep]
            .into_iter()
            .flatten()
            .collect();
        for t in EOG_TEXTS {
            if let Some(id) = text_to_id.get(&texts, t.as_bytes()) {
                eog.push(id);
                attrs[id as usize].0 |= TokenAttr::CONTROL;
            }
        }
        for t in ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"] {
            if let Some(id) = text_to_id.get(&texts, t.as_bytes()) {
                attrs[id as usize] = TokenAttr(TokenAttr::USER_DEFINED);
            }
        }
        eog.extend(
            [special.eos, special.eot, special.eom]
                .into_iter()
                .flatten(),
        );
        eog.sort_unstable();
        eog.dedup();
        let text_of = |id: TokenId| &texts[id as usize];
        let has = |eog: &[TokenId], s: &str| eog.iter().any(|&id| text_of(id) == s.as_bytes());
        if ((has(&eog, "<|return|>") && has(&eog, "<|call|>"))
            || (has(&eog, "<|calls|>") && has(&eog, "<|flush|>")))
            && let Some(end) = eog.iter().copied().find(|&id| text_of(id) == b"<|end|>")
        {
            eog.retain(|&id| id != end);
            attrs[end as usize] = TokenAttr(TokenAttr::USER_DEFINED);
        }
        if (has(&eog, "<|tool_response>") || has(&eog, "<|plamo:eos|>"))
            && let Some(s) = eog.iter().copied().find(|&id| text_of(id) == b"</s>")
        {
            eog.retain(|&id| id != s);
            attrs[s as usize] = TokenAttr(TokenAttr::NORMAL);
        }
        special.eog = eog;

        let mut special_cache: Vec<TokenId> = (0..n as TokenId)
            .filter(|&id| {
                attrs[id as usize]
                    .has(TokenAttr::CONTROL | TokenAttr::USER_DEFINED | TokenAttr::UNKNOWN)
            })
            .collect();
        special_cache.sort_by_key(|&id| std::cmp::Reverse(texts[id as usize].len()));

        Ok(Vocab {
            kind,
            texts,
            scores,
            attrs,
            text_to_id,
            special,
            add_bos,
            add_eos,
            add_space_prefix,
            clean_spaces,
            pre,
            special_cache,
            merges,
        })
    }

    #[inline]
    pub(crate) fn text_to_token(&self, text: &[u8]) -> Option<TokenId> {
        self.text_to_id.get(&self.texts, text)
    }

    /// SentencePiece byte fallback: `<0xXX>`, else the byte as a one-byte token.
    pub(crate) fn byte_to_token(&self, b: u8) -> Option<TokenId> {
        const HEX: &[u8; 16] = b"0123456789ABCDEF";
        let name = [
            b'<',
            b'0',
            b'x',
            HEX[(b >> 4) as usize],
            HEX[(b & 15) as usize],
            b'>',
        ];
        self.text_to_token(&name)
            .or_else(|| self.text_to_token(&[b]))
    }

    /// The byte of a `<0xXX>` token.
    pub(crate) fn token_to_byte(&self, id: TokenId) -> u8 {
        let t = &self.texts[id as usize];
        std::str::from_utf8(t.get(3..5).unwrap_or(b"00"))
            .ok()
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .unwrap_or(0)
    }
}
