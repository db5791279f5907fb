//! The vocabulary as the grammar engine sees it: each token's bytes, which tokens are
//! special, which end the sequence, and a byte trie over the ordinary tokens.
//!
//! The trie is stored flat in depth-first preorder (as llguidance's `toktrie` does): a node
//! knows its byte, its depth and where its subtree ends, so a mask is one forward scan that
//! skips a whole subtree the moment its prefix is rejected, and tokens sharing a prefix share
//! the work of matching it.

use std::sync::OnceLock;

use crate::json_string::{KINDS, StringInside};

/// How many children make a node worth a compact list of them (see `wide_children`).
const WIDE_CHILDREN: usize = 8;

/// One trie node: the token(s) spelled by the path to it end here.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TrieNode {
    pub byte: u8,
    /// Length of the path from the root (1 for a first byte).
    pub depth: u32,
    /// Index just past this node's subtree.
    pub subtree_end: u32,
    /// Tokens ending here: `token_ids[tokens_start..tokens_end]`.
    pub tokens_start: u32,
    pub tokens_end: u32,
}

/// A coarse partition of bytes, fixed for every grammar: a trie walk may take a whole
/// subtree at once when its state loops on every class the subtree's bytes fall in (the
/// inside of a JSON string loops on letters, digits, spaces and most punctuation).
pub(crate) const fn byte_class(b: u8) -> u8 {
    match b {
        b'\t' => 1,
        b'\n' => 2,
        b'\r' => 3,
        0x00..=0x1F => 0,
        b' ' => 4,
        b'"' => 5,
        b'\\' => 6,
        b'0'..=b'9' => 7,
        b'A'..=b'Z' => 8,
        b'a'..=b'z' => 9,
        0x7F => 11,
        0x21..=0x7E => 10,
        0x80..=0xBF => 12,
        0xC0..=0xDF => 13,
        0xE0..=0xEF => 14,
        _ => 15,
    }
}

/// Bits of [`Vocabulary::utf8`].
pub(crate) const UTF8_FROM_NODE: u8 = 1;
pub(crate) const UTF8_BELOW: u8 = 2;

/// Unicode's well-formed UTF-8 byte sequences of non-ASCII scalars (Table 3-7), as byte
/// ranges per position.
pub(crate) const UTF8_SHAPES: [&[(u8, u8)]; 8] = [
    &[(0xC2, 0xDF), (0x80, 0xBF)],
    &[(0xE0, 0xE0), (0xA0, 0xBF), (0x80, 0xBF)],
    &[(0xE1, 0xEC), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xED, 0xED), (0x80, 0x9F), (0x80, 0xBF)],
    &[(0xEE, 0xEF), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xF0, 0xF0), (0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xF1, 0xF3), (0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xF4, 0xF4), (0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)],
];

/// Where a UTF-8 decoder stands between bytes: at a character boundary, or waiting for
/// continuation bytes (some with a narrowed first range, which rules out overlong forms,
/// surrogates and values past U+10FFFF).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Utf8Phase {
    Boundary = 0,
    Need1,
    Need2,
    Need3,
    AfterE0,
    AfterED,
    AfterF0,
    AfterF4,
}

impl Utf8Phase {
    const ALL: [Utf8Phase; 8] = [
        Utf8Phase::Boundary,
        Utf8Phase::Need1,
        Utf8Phase::Need2,
        Utf8Phase::Need3,
        Utf8Phase::AfterE0,
        Utf8Phase::AfterED,
        Utf8Phase::AfterF0,
        Utf8Phase::AfterF4,
    ];

    /// The phase after byte `b`, or `None` where `b` breaks well-formed UTF-8.
    fn step(self, b: u8) -> Option<Utf8Phase> {
        use Utf8Phase::*;
        let cont = |range: std::ops::RangeInclusive<u8>, next| range.contains(&b).then_some(next);
        match self {
            Boundary => match b {
                0x00..=0x7F => Some(Boundary),
                0xC2..=0xDF => Some(Need1),
                0xE0 => Some(AfterE0),
                0xED => Some(AfterED),
                0xE1..=0xEF => Some(Need2),
                0xF0 => Some(AfterF0),
                0xF1..=0xF3 => Some(Need3),
                0xF4 => Some(AfterF4),
                _ => None,
            },
            Need1 => cont(0x80..=0xBF, Boundary),
            Need2 => cont(0x80..=0xBF, Need1),
            Need3 => cont(0x80..=0xBF, Need2),
            AfterE0 => cont(0xA0..=0xBF, Need1),
            AfterED => cont(0x80..=0x9F, Need1),
            AfterF0 => cont(0x90..=0xBF, Need2),
            AfterF4 => cont(0x80..=0x8F, Need2),
        }
    }
}

/// Token byte strings plus what the grammar engine needs to know about them.
#[derive(Clone, Debug)]
pub struct Vocabulary {
    tokens: Vec<Vec<u8>>,
    special: Vec<bool>,
    eos: Vec<u32>,
    pub(crate) nodes: Vec<TrieNode>,
    pub(crate) token_ids: Vec<u32>,
    pub(crate) max_depth: usize,
    /// Per node, the classes of the bytes below it (bit `byte_class(b)`).
    pub(crate) below_classes: Vec<u16>,
    /// Per node, whether the paths through it, read from a character boundary, are
    /// well-formed UTF-8 (ending mid-character allowed): bit [`UTF8_FROM_NODE`] for the
    /// node's byte and everything below, bit [`UTF8_BELOW`] for what lies strictly below.
    /// Such a subtree can be taken whole (see `Engine::char_successor`).
    pub(crate) utf8: Vec<u8>,
    /// Per node, the length in bytes of the longest path from its byte to a leaf (1 for a
    /// leaf), saturating.
    pub(crate) height: Vec<u16>,
    /// Per node (and one past the end), the index in `token_ids` of the first token at or
    /// after it in preorder: a subtree's tokens are one contiguous slice.
    pub(crate) first_token: Vec<u32>,
    /// Bitmasks of the tokens below the few nodes with very many tokens below them (the
    /// first bytes of common words), so that taking such a subtree whole is an OR of words
    /// instead of thousands of scattered bits. Indexed by node; `None` for the rest.
    pub(crate) big_subtrees: Vec<Option<Box<[u32]>>>,
    /// The first-level nodes (a token's first byte) with their bytes, in trie order.
    pub(crate) first_level: Vec<(u8, u32)>,
    /// Per node, an index in `wide_children` when it has many children, else `u32::MAX`.
    wide: Vec<u32>,
    /// The children (byte, node) of the nodes with many of them: a walk steps through this
    /// compact list instead of visiting children that lie far apart in the trie.
    wide_children: Vec<Box<[(u8, u32)]>>,
    /// The walks of a free JSON string's inside, per spelling of its characters, shared by
    /// every grammar (walked when the vocabulary is made).
    pub(crate) string_insides: [OnceLock<StringInside>; KINDS],
}

impl Vocabulary {
    /// `tokens[id]` is token `id`'s bytes; `special[id]` marks control tokens (never matched
    /// as text, only when the grammar names them); `eos` are the end-of-sequence ids,
    /// allowed exactly where the document may end.
    pub fn new(tokens: Vec<Vec<u8>>, special: Vec<bool>, eos: Vec<u32>) -> Self {
        let mut special = special;
        special.resize(tokens.len(), false);
        let mut order: Vec<u32> = (0..tokens.len() as u32)
            .filter(|&i| {
                !special[i as usize] && !tokens[i as usize].is_empty() && !eos.contains(&i)
            })
            .collect();
        order
            .sort_unstable_by(|&a, &b| tokens[a as usize].cmp(&tokens[b as usize]).then(a.cmp(&b)));
        let mut nodes: Vec<TrieNode> = Vec::new();
        let mut token_ids = Vec::with_capacity(order.len());
        // `path[d]` is the node index of the current path's node at depth d+1.
        let mut path: Vec<usize> = Vec::new();
        let mut prev: &[u8] = &[];
        let mut max_depth = 0;
        for &id in &order {
            let t = tokens[id as usize].as_slice();
            let common = t.iter().zip(prev).take_while(|(a, b)| a == b).count();
            while path.len() > common {
                if let Some(n) = path.pop() {
                    nodes[n].subtree_end = nodes.len() as u32;
                }
            }
            for (d, &byte) in t.iter().enumerate().skip(common) {
                path.push(nodes.len());
                nodes.push(TrieNode {
                    byte,
                    depth: d as u32 + 1,
                    subtree_end: 0,
                    tokens_start: 0,
                    tokens_end: 0,
                });
            }
            max_depth = max_depth.max(t.len());
            if let Some(&last) = path.last() {
                // Tokens with equal bytes arrive together (sorted), so their ids are adjacent.
                if nodes[last].tokens_end == 0 {
                    nodes[last].tokens_start = token_ids.len() as u32;
                }
                token_ids.push(id);
                nodes[last].tokens_end = token_ids.len() as u32;
            }
            prev = t;
        }
        while let Some(n) = path.pop() {
            nodes[n].subtree_end = nodes.len() as u32;
        }
        let (below_classes, first_token) = subtree_summaries(&nodes, token_ids.len());
        let big_subtrees = big_subtree_masks(&nodes, &token_ids, &first_token, tokens.len());
        let (utf8, height) = utf8_and_height(&nodes);
        let children_of = |i: usize, end: usize| {
            let mut out = Vec::new();
            let mut c = i;
            while c < end {
                out.push((nodes[c].byte, c as u32));
                c = nodes[c].subtree_end as usize;
            }
            out
        };
        let first_level = children_of(0, nodes.len());
        let mut wide = vec![u32::MAX; nodes.len()];
        let mut wide_children = Vec::new();
        for (i, n) in nodes.iter().enumerate() {
            // Only where a node has many children is the list worth its memory.
            if n.subtree_end as usize - i > WIDE_CHILDREN {
                let children = children_of(i + 1, n.subtree_end as usize);
                if children.len() >= WIDE_CHILDREN {
                    wide[i] = wide_children.len() as u32;
                    wide_children.push(children.into_boxed_slice());
                }
            }
        }
        let vocab = Vocabulary {
            tokens,
            special,
            eos,
            nodes,
            token_ids,
            max_depth,
            below_classes,
            utf8,
            height,
            first_token,
            big_subtrees,
            first_level,
            wide,
            wide_children,
            string_insides: [const { OnceLock::new() }; KINDS],
        };
        // Walked now rather than at the first grammar's first string: like the trie, a
        // cost of loading the vocabulary (well under a millisecond), not of a request.
        crate::json_string::prepare(&vocab);
        vocab
    }

    /// Sets in `out` the bits of the tokens strictly below trie node `i`.
    pub(crate) fn set_tokens_below(&self, i: usize, out: &mut [u32]) {
        if let Some(Some(mask)) = self.big_subtrees.get(i) {
            for (o, m) in out.iter_mut().zip(mask.iter()) {
                *o |= m;
            }
            return;
        }
        for &id in self.tokens_below(i) {
            if let Some(w) = out.get_mut(id as usize / 32) {
                *w |= 1 << (id % 32);
            }
        }
    }

    /// The children of node `i` as (byte, node), when it has many.
    pub(crate) fn wide_children(&self, i: usize) -> Option<&[(u8, u32)]> {
        let w = *self.wide.get(i)?;
        self.wide_children.get(w as usize).map(|c| &c[..])
    }

    /// The first-level trie node for `byte` (the tokens starting with it), if any.
    pub(crate) fn first_level_node(&self, byte: u8) -> Option<u32> {
        self.first_level
            .iter()
            .find(|&&(b, _)| b == byte)
            .map(|&(_, n)| n)
    }

    /// Clears in `out` the bits of the tokens at trie node `i` and below it.
    pub(crate) fn clear_tokens_from(&self, i: u32, out: &mut [u32]) {
        let (i, n) = (i as usize, self.nodes[i as usize]);
        let own = &self.token_ids[n.tokens_start as usize..n.tokens_end as usize];
        for &id in own.iter().chain(self.tokens_below(i)) {
            if let Some(w) = out.get_mut(id as usize / 32) {
                *w &= !(1 << (id % 32));
            }
        }
    }

    /// The tokens strictly below trie node `i`, as a slice of `token_ids`.
    pub(crate) fn tokens_below(&self, i: usize) -> &[u32] {
        let end = self.nodes[i].subtree_end as usize;
        &self.token_ids[self.first_token[i + 1] as usize..self.first_token[end] as usize]
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Length in `u32` words of a token bitmask for this vocabulary.
    pub fn mask_words(&self) -> usize {
        self.tokens.len().div_ceil(32)
    }

    /// Token `id`'s bytes (empty when out of range).
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        self.tokens.get(id as usize).map_or(&[], |t| t.as_slice())
    }

    pub fn is_special(&self, id: u32) -> bool {
        self.special.get(id as usize).copied().unwrap_or(false)
    }

    pub fn eos(&self) -> &[u32] {
        &self.eos
    }

    /// The id of the token spelled exactly `text` (special tokens first), for `<text>`.
    pub fn find(&self, text: &[u8]) -> Option<u32> {
        let ids = 0..self.tokens.len() as u32;
        let mut candidates = ids.filter(|&i| self.tokens[i as usize] == text);
        let first = candidates.next()?;
        Some(if self.is_special(first) {
            first
        } else {
            candidates.find(|&i| self.is_special(i)).unwrap_or(first)
        })
    }

    /// Number of trie nodes (for statistics).
    pub fn trie_nodes(&self) -> usize {
        self.nodes.len()
    }
}

fn subtree_summaries(nodes: &[TrieNode], n_tokens: usize) -> (Vec<u16>, Vec<u32>) {
    let mut below = vec![0u16; nodes.len()];
    for i in (0..nodes.len()).rev() {
        let mut acc = 0u16;
        let mut j = i + 1;
        while j < nodes[i].subtree_end as usize {
            acc |= 1 << byte_class(nodes[j].byte) | below[j];
            j = nodes[j].subtree_end as usize;
        }
        below[i] = acc;
    }
    let mut first = vec![n_tokens as u32; nodes.len() + 1];
    for i in (0..nodes.len()).rev() {
        first[i] = if nodes[i].tokens_end > nodes[i].tokens_start {
            nodes[i].tokens_start
        } else {
            first[i + 1]
        };
    }
    (below, first)
}

/// Per node, its [`Vocabulary::utf8`] bits and its height. Bottom-up, over the phases a
/// decoder may be in before each node.
fn utf8_and_height(nodes: &[TrieNode]) -> (Vec<u8>, Vec<u16>) {
    // Bit p of `ok[i]`: from phase p, node i's byte and all paths below it are well-formed.
    let mut ok = vec![0u8; nodes.len()];
    let mut height = vec![1u16; nodes.len()];
    let mut flags = vec![0u8; nodes.len()];
    let boundary = 1 << Utf8Phase::Boundary as u8;
    for i in (0..nodes.len()).rev() {
        let children = || {
            let mut j = i + 1;
            std::iter::from_fn(move || {
                (j < nodes[i].subtree_end as usize).then(|| {
                    let c = j;
                    j = nodes[c].subtree_end as usize;
                    c
                })
            })
        };
        for phase in Utf8Phase::ALL {
            if let Some(after) = phase.step(nodes[i].byte)
                && children().all(|c| ok[c] & (1 << after as u8) != 0)
            {
                ok[i] |= 1 << phase as u8;
            }
        }
        height[i] = children()
            .map(|c| height[c].saturating_add(1))
            .max()
            .unwrap_or(1);
        if ok[i] & boundary != 0 {
            flags[i] |= UTF8_FROM_NODE;
        }
        if children().all(|c| ok[c] & boundary != 0) {
            flags[i] |= UTF8_BELOW;
        }
    }
    (flags, height)
}

/// Masks for the nodes with more tokens below them than one mask has words (times four):
/// there an OR of words is cheaper than setting bits one by one. Few nodes qualify (the
/// common first bytes), so the memory is a few dozen masks.
fn big_subtree_masks(
    nodes: &[TrieNode],
    token_ids: &[u32],
    first: &[u32],
    n_tokens: usize,
) -> Vec<Option<Box<[u32]>>> {
    let words = n_tokens.div_ceil(32);
    let threshold = (4 * words).max(256);
    let mut out: Vec<Option<Box<[u32]>>> = vec![None; nodes.len()];
    for (i, node) in nodes.iter().enumerate() {
        let (lo, hi) = (
            first[i + 1] as usize,
            first[node.subtree_end as usize] as usize,
        );
        if hi - lo >= threshold {
            let mut m = vec![0u32; words].into_boxed_slice();
            for &id in &token_ids[lo..hi] {
                m[id as usize / 32] |= 1 << (id % 32);
            }
            out[i] = Some(m);
        }
    }
    out
}
