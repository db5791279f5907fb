//! A little-endian reader over a byte slice that knows its absolute offset, so every error
//! names the byte where it happened.

use crate::error::{GgufError, Result};

/// Reads little-endian values from `bytes`, starting at absolute file offset `base`.
#[derive(Clone, Debug)]
pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Text appended to errors: which key or tensor is being read.
    pub(crate) context: String,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Cursor {
            bytes,
            pos: 0,
            context: String::new(),
        }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes `start..end` of the underlying slice (already read).
    pub(crate) fn span(&self, start: usize, end: usize) -> &'a [u8] {
        &self.bytes[start..end]
    }

    pub(crate) fn bytes_left(&self) -> u64 {
        (self.bytes.len() - self.pos) as u64
    }

    pub(crate) fn truncated(&self, needed: u64, what: &'static str) -> GgufError {
        GgufError::Truncated {
            offset: self.pos as u64,
            needed: needed - self.bytes_left(),
            what,
            context: self.context.clone(),
        }
    }

    /// Takes `n` bytes.
    pub(crate) fn take(&mut self, n: u64, what: &'static str) -> Result<&'a [u8]> {
        if n > self.bytes_left() {
            return Err(self.truncated(n, what));
        }
        let n = n as usize;
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N]> {
        let b = self.take(N as u64, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(b);
        Ok(out)
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }
    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// Reads a count and checks that `count * min_item_size` bytes are left, before anyone
    /// allocates for it.
    pub(crate) fn count(&mut self, what: &'static str, min_item_size: u64) -> Result<u64> {
        let offset = self.pos as u64;
        let count = self.u64(what)?;
        let need = count.checked_mul(min_item_size);
        if need.is_none_or(|need| need > self.bytes_left()) {
            return Err(GgufError::CountTooLarge {
                offset,
                what,
                count,
                bytes_left: self.bytes_left(),
                min_bytes: need.unwrap_or(u64::MAX),
                context: self.context.clone(),
            });
        }
        Ok(count)
    }

    /// A GGUF string: u64 length, then bytes (not checked for UTF-8 here).
    pub(crate) fn string_bytes(&mut self, what: &'static str) -> Result<&'a [u8]> {
        let offset = self.pos as u64;
        let len = self.u64(what)?;
        if len > self.bytes_left() {
            return Err(GgufError::CountTooLarge {
                offset,
                what,
                count: len,
                bytes_left: self.bytes_left(),
                min_bytes: len,
                context: self.context.clone(),
            });
        }
        self.take(len, what)
    }

    /// A GGUF string that must be UTF-8 (keys and tensor names).
    pub(crate) fn str(&mut self, what: &'static str) -> Result<&'a str> {
        let offset = self.pos as u64;
        let b = self.string_bytes(what)?;
        std::str::from_utf8(b).map_err(|_| GgufError::InvalidUtf8 {
            offset,
            what,
            context: self.context.clone(),
        })
    }
}
