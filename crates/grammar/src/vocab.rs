//! The vocabulary as the grammar engine sees it: each token's bytes, which tokens are
//! special, which end the sequence, and a byte trie over the ordinary tokens.
//!
//! The trie is stored flat in depth-first preorder (as llguidance's `toktrie` does): a node
//! knows its byte, its depth and where its subtree ends, so a mask is one forward scan that
//! skips a whole subtree the moment its prefix is rejected, and tokens sharing a prefix share
//! the work of matching it.

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

/// Token byte strings plus what the grammar engine needs to know about them.
#[derive(Clone, Debug)]
pub struct Vocabulary {
    tokens: Vec<Vec<u8>>,
    special: Vec<bool>,
    eos: Vec<u32>,
    pub(crate) nodes: Vec<TrieNode>,
    pub(crate) token_ids: Vec<u32>,
    pub(crate) max_depth: usize,
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
        Vocabulary {
            tokens,
            special,
            eos,
            nodes,
            token_ids,
            max_depth,
        }
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
