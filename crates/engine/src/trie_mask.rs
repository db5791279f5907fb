//! A [`TokenConstraint`] over any byte-level matcher: the vocabulary's byte strings in a
//! trie, walked depth-first under the matcher (consume a byte, descend, roll it back), so a
//! subtree the grammar rejects is skipped whole.
//!
//! This is the plain baseline: a mask costs one matcher step per trie node the grammar lets
//! through, which inside a free-text JSON string is most of the vocabulary. A grammar engine
//! with precomputed and cached masks implements [`TokenConstraint`] itself and replaces it.

use std::sync::Arc;

use crate::generate::{BoxError, TokenConstraint};

/// A matcher that consumes bytes and can take them back.
pub trait ByteMatcher {
    /// Consumes `bytes` if the grammar allows all of them; otherwise leaves the state as it
    /// was and returns false.
    fn try_consume(&mut self, bytes: &[u8]) -> bool;
    /// Takes back the last `n` consumed bytes.
    fn rollback(&mut self, n: usize);
    fn is_accepting(&self) -> bool;
    /// The shortest bytes completing the document, if known.
    fn closing_bytes(&mut self) -> Option<Vec<u8>> {
        None
    }
}

#[derive(Debug, Default, Clone)]
struct Node {
    /// (byte, child node index), sorted by byte.
    children: Vec<(u8, u32)>,
    /// Tokens whose bytes end at this node.
    tokens: Vec<u32>,
}

/// The vocabulary's byte strings as a trie (built once per model, shared by generations).
#[derive(Debug, Clone)]
pub struct TokenTrie {
    nodes: Vec<Node>,
    pieces: Vec<Vec<u8>>,
}

impl TokenTrie {
    /// `pieces[i]` is token i's bytes; empty pieces (control tokens) are never allowed.
    pub fn new(pieces: Vec<Vec<u8>>) -> Self {
        let mut nodes = vec![Node::default()];
        for (id, piece) in pieces.iter().enumerate() {
            if piece.is_empty() {
                continue;
            }
            let mut at = 0usize;
            for &b in piece {
                at = match nodes[at].children.binary_search_by_key(&b, |&(c, _)| c) {
                    Ok(i) => nodes[at].children[i].1 as usize,
                    Err(i) => {
                        let next = nodes.len();
                        nodes.push(Node::default());
                        nodes[at].children.insert(i, (b, next as u32));
                        next
                    }
                };
            }
            nodes[at].tokens.push(id as u32);
        }
        Self { nodes, pieces }
    }

    pub fn piece(&self, token: u32) -> &[u8] {
        self.pieces.get(token as usize).map_or(&[], Vec::as_slice)
    }

    pub fn len(&self) -> usize {
        self.pieces.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }
}

/// A byte matcher seen through a token trie.
pub struct TrieConstraint<M> {
    matcher: M,
    trie: Arc<TokenTrie>,
}

/// The matcher refused a token the loop committed (a bug in the mask, never user input).
#[derive(Debug, thiserror::Error)]
#[error("the grammar rejects token {token} ({piece:?})")]
pub struct RejectedToken {
    pub token: u32,
    pub piece: String,
}

impl<M: ByteMatcher> TrieConstraint<M> {
    pub fn new(matcher: M, trie: Arc<TokenTrie>) -> Self {
        Self { matcher, trie }
    }

    pub fn matcher(&self) -> &M {
        &self.matcher
    }

    fn walk(&mut self, node: usize, mask: &mut [u32]) {
        let trie = Arc::clone(&self.trie);
        for &(byte, child) in &trie.nodes[node].children {
            if !self.matcher.try_consume(&[byte]) {
                continue;
            }
            for &t in &trie.nodes[child as usize].tokens {
                mask[t as usize / 32] |= 1 << (t % 32);
            }
            self.walk(child as usize, mask);
            self.matcher.rollback(1);
        }
    }
}

impl<M: ByteMatcher> TokenConstraint for TrieConstraint<M> {
    fn fill_mask(&mut self, mask: &mut [u32]) -> Result<(), BoxError> {
        self.walk(0, mask);
        Ok(())
    }

    fn commit(&mut self, token: u32) -> Result<(), BoxError> {
        let piece = self.trie.piece(token);
        if piece.is_empty() || !self.matcher.try_consume(piece) {
            return Err(Box::new(RejectedToken {
                token,
                piece: String::from_utf8_lossy(piece).into_owned(),
            }));
        }
        Ok(())
    }

    fn is_accepting(&self) -> bool {
        self.matcher.is_accepting()
    }

    fn closing_bytes(&mut self) -> Option<Vec<u8>> {
        self.matcher.closing_bytes()
    }
}
