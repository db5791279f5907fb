//! Byte-string lookups built with two allocations instead of one per entry: the strings
//! live in one buffer and a `hashbrown::HashTable` holds only their indices. Loading a
//! 262k-token vocabulary is then a matter of milliseconds, which matters in the browser.

use std::hash::{BuildHasher, Hasher};

use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;

/// Strings stored back to back, with their start offsets.
#[derive(Debug, Clone, Default)]
pub(crate) struct Strings {
    buf: Vec<u8>,
    /// `offs[i]..offs[i + 1]` is string `i`.
    offs: Vec<u32>,
}

impl Strings {
    pub fn with_capacity(n: usize, bytes: usize) -> Self {
        let mut offs = Vec::with_capacity(n + 1);
        offs.push(0);
        Strings {
            buf: Vec::with_capacity(bytes),
            offs,
        }
    }
    pub fn push(&mut self, s: &[u8]) {
        self.buf.extend_from_slice(s);
        self.offs.push(self.buf.len() as u32);
    }
    pub fn len(&self) -> usize {
        self.offs.len() - 1
    }
    pub fn get(&self, i: usize) -> &[u8] {
        &self.buf[self.offs[i] as usize..self.offs[i + 1] as usize]
    }
}

impl std::ops::Index<usize> for Strings {
    type Output = [u8];
    fn index(&self, i: usize) -> &[u8] {
        self.get(i)
    }
}

fn hash_one(s: &[u8]) -> u64 {
    let mut h = FxBuildHasher.build_hasher();
    h.write(s);
    h.finish()
}

fn hash_pair(a: &[u8], b: &[u8]) -> u64 {
    let mut h = FxBuildHasher.build_hasher();
    h.write(a);
    h.write_u8(0xFF);
    h.write(b);
    h.finish()
}

/// Token text → id. A text that appears twice maps to its last id (llama.cpp's
/// `token_to_id[text] = id` in id order).
#[derive(Debug, Clone, Default)]
pub(crate) struct TextIndex {
    table: HashTable<u32>,
}

impl TextIndex {
    pub fn build(texts: &Strings) -> Self {
        let mut table = HashTable::with_capacity(texts.len());
        for id in 0..texts.len() {
            let t = texts.get(id);
            let h = hash_one(t);
            match table.find_mut(h, |&other: &u32| texts.get(other as usize) == t) {
                Some(slot) => *slot = id as u32,
                None => {
                    table.insert_unique(h, id as u32, |&i: &u32| hash_one(texts.get(i as usize)));
                }
            }
        }
        TextIndex { table }
    }

    #[inline]
    pub fn get(&self, texts: &Strings, key: &[u8]) -> Option<u32> {
        self.table
            .find(hash_one(key), |&id| texts.get(id as usize) == key)
            .copied()
    }
}

/// BPE merges: `(left, right)` → rank, the first occurrence of a pair winning.
#[derive(Debug, Clone, Default)]
pub(crate) struct MergeIndex {
    /// Merge `rank` is `lefts[rank]` + `rights[rank]`.
    lefts: Strings,
    rights: Strings,
    table: HashTable<u32>,
}

impl MergeIndex {
    pub fn with_capacity(n: usize, bytes: usize) -> Self {
        MergeIndex {
            lefts: Strings::with_capacity(n, bytes / 2),
            rights: Strings::with_capacity(n, bytes / 2),
            table: HashTable::with_capacity(n),
        }
    }

    /// Adds the merge of the next rank (ignored for lookups if the pair is already there).
    pub fn push(&mut self, left: &[u8], right: &[u8]) {
        let rank = self.lefts.len() as u32;
        self.lefts.push(left);
        self.rights.push(right);
        let h = hash_pair(left, right);
        let (lefts, rights) = (&self.lefts, &self.rights);
        let same = |&r: &u32| lefts.get(r as usize) == left && rights.get(r as usize) == right;
        if self.table.find(h, same).is_none() {
            self.table.insert_unique(h, rank, |&r: &u32| {
                hash_pair(lefts.get(r as usize), rights.get(r as usize))
            });
        }
    }

    #[inline]
    pub fn rank(&self, left: &[u8], right: &[u8]) -> Option<u32> {
        self.table
            .find(hash_pair(left, right), |&r| {
                self.lefts.get(r as usize) == left && self.rights.get(r as usize) == right
            })
            .copied()
    }
}
