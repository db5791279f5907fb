//! Text to token ids: special-token partitioning, then BPE or SentencePiece on each piece
//! of text, as llama.cpp's `llama_vocab::impl::tokenize`.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::unicode::byte_to_utf8;
use crate::vocab::{TokenAttr, TokenId, Vocab, VocabKind};

/// A piece of the input after special tokens are split out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fragment {
    /// Bytes `start..end` of the text.
    Text(usize, usize),
    /// A special token found in the text.
    Token(TokenId),
}

/// Splits `text` on special tokens, longest token first (`tokenizer_st_partition`).
/// `candidates` are the special tokens (in cache order) that occur in `text` at all.
pub(crate) fn partition(
    vocab: &Vocab,
    text: &str,
    candidates: &[TokenId],
    parse_special: bool,
) -> Vec<Fragment> {
    let bytes = text.as_bytes();
    let mut frags = vec![Fragment::Text(0, bytes.len())];
    if bytes.is_empty() {
        return vec![];
    }
    for &id in candidates {
        let attr = vocab.attrs[id as usize];
        if !parse_special && attr.has(TokenAttr::CONTROL | TokenAttr::UNKNOWN) {
            continue;
        }
        let needle = &vocab.texts[id as usize];
        let mut next = Vec::with_capacity(frags.len() + 2);
        for f in frags {
            let Fragment::Text(mut start, end) = f else {
                next.push(f);
                continue;
            };
            while let Some(found) = find(&bytes[start..end], needle) {
                let m = start + found;
                let mut left_end = m;
                if attr.has(TokenAttr::LSTRIP) {
                    while left_end > start && bytes[left_end - 1].is_ascii_whitespace() {
                        left_end -= 1;
                    }
                }
                if left_end > start {
                    next.push(Fragment::Text(start, left_end));
                }
                next.push(Fragment::Token(id));
                start = m + needle.len();
                if attr.has(TokenAttr::RSTRIP) {
                    while start < end && bytes[start].is_ascii_whitespace() {
                        start += 1;
                    }
                }
            }
            if start < end {
                next.push(Fragment::Text(start, end));
            }
        }
        frags = next;
    }
    frags
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || needle.len() > hay.len() {
        return None;
    }
    memchr::memmem::find(hay, needle)
}

/// A symbol during merging: bytes `start..start + len` of the word, in a linked list.
#[derive(Debug, Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: isize,
    next: isize,
}

fn utf8_len(first: u8) -> usize {
    const LOOKUP: [usize; 16] = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4];
    LOOKUP[(first >> 4) as usize]
}

fn symbols_of(word: &[u8]) -> Vec<Symbol> {
    let mut symbols = Vec::with_capacity(word.len());
    let mut offs = 0;
    let mut index = 0isize;
    while offs < word.len() {
        let len = utf8_len(word[offs]).min(word.len() - offs);
        offs += len;
        symbols.push(Symbol {
            start: offs - len,
            len,
            prev: index - 1,
            next: if offs == word.len() { -1 } else { index + 1 },
        });
        index += 1;
    }
    symbols
}

/// A candidate merge. Ordered so that `BinaryHeap` pops llama.cpp's choice first.
#[derive(Debug, Clone, Copy)]
struct Bigram<K> {
    key: K,
    left: usize,
    right: usize,
    size: usize,
}

/// BPE: the lowest rank first, then the leftmost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Rank(u32);
impl PartialEq for Bigram<Rank> {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Bigram<Rank> {}
impl PartialOrd for Bigram<Rank> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Bigram<Rank> {
    fn cmp(&self, o: &Self) -> Ordering {
        o.key.0.cmp(&self.key.0).then(o.left.cmp(&self.left))
    }
}

/// SentencePiece: the highest score first, then the leftmost.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Score(f32);
impl PartialEq for Bigram<Score> {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Bigram<Score> {}
impl PartialOrd for Bigram<Score> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Bigram<Score> {
    fn cmp(&self, o: &Self) -> Ordering {
        self.key
            .0
            .partial_cmp(&o.key.0)
            .unwrap_or(Ordering::Equal)
            .then(o.left.cmp(&self.left))
    }
}

/// Reusable buffers for one encode call, and the ids of words already seen in it (natural
/// text repeats its words, and BPE gives a word the same ids wherever it appears).
#[derive(Default)]
pub(crate) struct Scratch {
    word: Vec<u8>,
    cpts: Vec<u32>,
    cache: rustc_hash::FxHashMap<Box<[u8]>, Box<[TokenId]>>,
}

/// Words cached per encode call before the cache is emptied (bounds its memory).
const WORD_CACHE_MAX: usize = 1 << 16;

impl Vocab {
    #[inline]
    fn merge_rank(&self, word: &[u8], l: &Symbol, r: &Symbol) -> Option<u32> {
        self.merges.rank(
            &word[l.start..l.start + l.len],
            &word[r.start..r.start + r.len],
        )
    }

    /// Byte-level BPE on one pre-tokenized word (already mapped to GPT-2 characters).
    pub(crate) fn bpe_word(&self, word: &[u8], ignore_merges: bool, out: &mut Vec<TokenId>) {
        if ignore_merges && let Some(id) = self.text_to_token(word) {
            out.push(id);
            return;
        }
        let mut symbols = symbols_of(word);
        let mut queue: BinaryHeap<Bigram<Rank>> = BinaryHeap::new();
        let add = |symbols: &[Symbol], queue: &mut BinaryHeap<Bigram<Rank>>, l: isize, r: isize| {
            if l < 0 || r < 0 {
                return;
            }
            let (ls, rs) = (&symbols[l as usize], &symbols[r as usize]);
            if let Some(rank) = self.merge_rank(word, ls, rs) {
                queue.push(Bigram {
                    key: Rank(rank),
                    left: l as usize,
                    right: r as usize,
                    size: ls.len + rs.len,
                });
            }
        };
        for i in 1..symbols.len() as isize {
            add(&symbols, &mut queue, i - 1, i);
        }
        while let Some(b) = queue.pop() {
            let (l, r) = (symbols[b.left], symbols[b.right]);
            if l.len == 0 || r.len == 0 || l.len + r.len != b.size {
                continue;
            }
            symbols[b.left].len += r.len;
            symbols[b.right].len = 0;
            symbols[b.left].next = r.next;
            if r.next >= 0 {
                symbols[r.next as usize].prev = b.left as isize;
            }
            let left = symbols[b.left];
            add(&symbols, &mut queue, left.prev, b.left as isize);
            add(&symbols, &mut queue, b.left as isize, left.next);
        }
        for s in symbols.iter().filter(|s| s.len > 0) {
            let text = &word[s.start..s.start + s.len];
            match self.text_to_token(text) {
                Some(id) => out.push(id),
                None => out.extend(text.iter().filter_map(|&b| self.text_to_token(&[b]))),
            }
        }
    }

    /// Pre-tokenizes a piece of text and runs BPE on each word.
    pub(crate) fn bpe_text(&self, text: &str, scratch: &mut Scratch, out: &mut Vec<TokenId>) {
        let Some(pre) = &self.pre else { return };
        scratch.cpts.clear();
        scratch.cpts.extend(text.chars().map(|c| c as u32));
        let lens = pre.split(&scratch.cpts);
        let mut chars = text
            .char_indices()
            .map(|(i, _)| i)
            .chain(std::iter::once(text.len()));
        let mut byte_start = chars.next().unwrap_or(0);
        for len in lens {
            let mut byte_end = byte_start;
            for _ in 0..len {
                byte_end = chars.next().unwrap_or(text.len());
            }
            let piece = &text.as_bytes()[byte_start..byte_end];
            byte_start = byte_end;
            scratch.word.clear();
            for &b in piece {
                scratch.word.extend_from_slice(byte_to_utf8(b));
            }
            if let Some(ids) = scratch.cache.get(scratch.word.as_slice()) {
                out.extend_from_slice(ids);
                continue;
            }
            let start = out.len();
            let word = std::mem::take(&mut scratch.word);
            self.bpe_word(&word, pre.ignore_merges, out);
            if scratch.cache.len() >= WORD_CACHE_MAX {
                scratch.cache.clear();
            }
            scratch
                .cache
                .insert(word.as_slice().into(), out[start..].into());
            scratch.word = word;
        }
    }

    /// SentencePiece on a piece of text whose spaces are already `▁`.
    pub(crate) fn spm_text(&self, text: &[u8], out: &mut Vec<TokenId>) {
        let mut symbols = symbols_of(text);
        let mut queue: BinaryHeap<Bigram<Score>> = BinaryHeap::new();
        let add =
            |symbols: &[Symbol], queue: &mut BinaryHeap<Bigram<Score>>, l: isize, r: isize| {
                if l < 0 || r < 0 {
                    return;
                }
                let (ls, rs) = (&symbols[l as usize], &symbols[r as usize]);
                let bytes = &text[ls.start..rs.start + rs.len];
                if let Some(id) = self.text_to_token(bytes) {
                    queue.push(Bigram {
                        key: Score(self.scores[id as usize]),
                        left: l as usize,
                        right: r as usize,
                        size: bytes.len(),
                    });
                }
            };
        for i in 1..symbols.len() as isize {
            add(&symbols, &mut queue, i - 1, i);
        }
        while let Some(b) = queue.pop() {
            let (l, r) = (symbols[b.left], symbols[b.right]);
            if l.len == 0 || r.len == 0 || l.len + r.len != b.size {
                continue;
            }
            symbols[b.left].len += r.len;
            symbols[b.right].len = 0;
            symbols[b.left].next = r.next;
            if r.next >= 0 {
                symbols[r.next as usize].prev = b.left as isize;
            }
            let left = symbols[b.left];
            add(&symbols, &mut queue, left.prev, b.left as isize);
            add(&symbols, &mut queue, b.left as isize, left.next);
        }
        let mut i = if symbols.is_empty() { -1 } else { 0 };
        while i >= 0 {
            let s = symbols[i as usize];
            let bytes = &text[s.start..s.start + s.len];
            match self.text_to_token(bytes) {
                Some(id) => out.push(id),
                None => {
                    out.extend(
                        bytes
                            .iter()
                            .filter_map(|&b| self.byte_to_token(b).or(self.special.unk)),
                    );
                }
            }
            i = s.next;
        }
    }

    /// The whole of `llama_tokenize`.
    pub(crate) fn encode(
        &self,
        text: &str,
        candidates: &[TokenId],
        add_special: bool,
        parse_special: bool,
        out: &mut Vec<TokenId>,
    ) {
        let frags = partition(self, text, candidates, parse_special);
        let mut scratch = Scratch::default();
        match self.kind {
            VocabKind::Spm => {
                let mut is_prev_special = true;
                if add_special && self.add_bos {
                    out.extend(self.special.bos);
                }
                let mut buf = Vec::new();
                for f in frags {
                    match f {
                        Fragment::Text(s, e) => {
                            buf.clear();
                            if self.add_space_prefix && is_prev_special {
                                buf.extend_from_slice("\u{2581}".as_bytes());
                            }
                            for &b in &text.as_bytes()[s..e] {
                                if b == b' ' {
                                    buf.extend_from_slice("\u{2581}".as_bytes());
                                } else {
                                    buf.push(b);
                                }
                            }
                            self.spm_text(&buf, out);
                            is_prev_special = false;
                        }
                        Fragment::Token(id) => {
                            out.push(id);
                            is_prev_special = true;
                        }
                    }
                }
                if add_special && self.add_eos {
                    out.extend(self.special.eos);
                }
            }
            VocabKind::Bpe => {
                if add_special && self.add_bos {
                    out.extend(self.special.bos);
                }
                for f in frags {
                    match f {
                        Fragment::Text(s, e) => match text.get(s..e) {
                            Some(t) => self.bpe_text(t, &mut scratch, out),
                            None => {
                                let t =
                                    String::from_utf8_lossy(&text.as_bytes()[s..e]).into_owned();
                                self.bpe_text(&t, &mut scratch, out)
                            }
                        },
                        Fragment::Token(id) => out.push(id),
                    }
                }
                if add_special && self.add_eos {
                    out.extend(self.special.eos);
                }
            }
        }
    }
}
