//! Code point classes exactly as llama.cpp's `unicode_cpt_flags` (its own tables, not the
//! Rust standard library's, so the pre-tokenizers split text where llama.cpp does).
#![allow(dead_code)]

use std::sync::OnceLock;

use crate::unicode_data::{FLAG_RANGES, LOWER_CONTRACTION, WHITESPACE};

/// Category and whitespace bits of one code point (`unicode_cpt_flags`). Zero means "no
/// code point" (past the end of a fragment), as in llama.cpp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flags(pub u16);

impl Flags {
    pub const UNDEFINED: u16 = 0x0001;
    pub const NUMBER: u16 = 0x0002;
    pub const LETTER: u16 = 0x0004;
    pub const SEPARATOR: u16 = 0x0008;
    pub const ACCENT_MARK: u16 = 0x0010;
    pub const PUNCTUATION: u16 = 0x0020;
    pub const SYMBOL: u16 = 0x0040;
    pub const CONTROL: u16 = 0x0080;
    pub const WHITESPACE: u16 = 0x0100;

    #[inline]
    pub fn is_letter(self) -> bool {
        self.0 & Self::LETTER != 0
    }
    #[inline]
    pub fn is_number(self) -> bool {
        self.0 & Self::NUMBER != 0
    }
    #[inline]
    pub fn is_whitespace(self) -> bool {
        self.0 & Self::WHITESPACE != 0
    }
    #[inline]
    pub fn is_punctuation(self) -> bool {
        self.0 & Self::PUNCTUATION != 0
    }
    /// The category bits alone.
    #[inline]
    pub fn category(self) -> u16 {
        self.0 & 0xFF
    }
    /// Whether this is a code point at all (`as_uint() != 0`).
    #[inline]
    pub fn is_some(self) -> bool {
        self.0 != 0
    }
}

const MAX_CODEPOINTS: usize = 0x110000;

fn table() -> &'static [u16] {
    static TABLE: OnceLock<Vec<u16>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = vec![Flags::UNDEFINED; MAX_CODEPOINTS];
        for w in FLAG_RANGES.windows(2) {
            let (start, flags) = w[0];
            let end = (w[1].0 as usize).min(MAX_CODEPOINTS);
            t[start as usize..end].fill(u16::from(flags));
        }
        for &c in &WHITESPACE {
            t[c as usize] |= Flags::WHITESPACE;
        }
        t
    })
}

/// The flags of a code point.
#[inline]
pub fn flags(cpt: u32) -> Flags {
    Flags(
        table()
            .get(cpt as usize)
            .copied()
            .unwrap_or(Flags::UNDEFINED),
    )
}

/// llama.cpp's `unicode_tolower`, for the contraction letters only (everything else is
/// returned as is, which is all the pre-tokenizers need).
#[inline]
pub fn tolower_contraction(cpt: u32) -> u32 {
    LOWER_CONTRACTION
        .iter()
        .find(|(c, _)| *c == cpt)
        .map_or(cpt, |&(_, l)| l)
}

/// GPT-2's byte-to-character map: byte `b` is written as this character in byte-level BPE
/// vocabularies (printable bytes as themselves, the rest shifted to U+0100 and up).
pub fn byte_to_char(b: u8) -> char {
    static MAP: OnceLock<[char; 256]> = OnceLock::new();
    MAP.get_or_init(|| {
        let mut map = ['\0'; 256];
        let mut n = 0u32;
        for b in 0..=255u8 {
            let printable = matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF);
            map[b as usize] = if printable {
                char::from(b)
            } else {
                let c = char::from_u32(256 + n).unwrap_or('\u{FFFD}');
                n += 1;
                c
            };
        }
        map
    })[b as usize]
}

/// [`byte_to_char`] as UTF-8 bytes, from a table built once.
pub(crate) fn byte_to_utf8(b: u8) -> &'static [u8] {
    static MAP: OnceLock<[([u8; 2], u8); 256]> = OnceLock::new();
    let (bytes, len) = &MAP.get_or_init(|| {
        let mut map = [([0u8; 2], 0u8); 256];
        for (b, slot) in map.iter_mut().enumerate() {
            let mut buf = [0u8; 4];
            let s = byte_to_char(b as u8).encode_utf8(&mut buf);
            slot.0[..s.len()].copy_from_slice(s.as_bytes());
            slot.1 = s.len() as u8;
        }
        map
    })[b as usize];
    &bytes[..*len as usize]
}

/// The inverse of [`byte_to_char`].
pub fn char_to_byte(c: char) -> Option<u8> {
    let c = c as u32;
    match c {
        0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF => Some(c as u8),
        0x100..=0x143 => {
            // The 68 non-printable bytes in order: 0x00-0x20, 0x7F-0xA0, 0xAD.
            let n = c - 0x100;
            Some(match n {
                0..=32 => n as u8,
                33..=66 => (0x7F + (n - 33)) as u8,
                67 => 0xAD,
                _ => return None,
            })
        }
        _ => None,
    }
}
