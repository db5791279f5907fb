//! Pre-tokenizers: split text into words before BPE, exactly where llama.cpp splits.
//!
//! llama.cpp implements the common split patterns by hand (`unicode_regex_split_custom_*`
//! in `unicode.cpp`) and runs the rest through `std::regex` over a "collapsed" text where
//! each non-ASCII code point stands for its category. Both are ported here as code over
//! code points, quirks included, rather than through a regex engine: a regex engine would
//! agree with the *intended* pattern, not with llama.cpp.
//!
//! A pre-tokenizer is a list of [`Split`] steps; each step splits every piece the previous
//! steps produced (pieces are lengths in code points, as in llama.cpp).

use crate::unicode::{Flags, flags, tolower_contraction};

/// One split step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
    Gpt2,
    /// `(?i:'s|…)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
    /// with `N` = 3 (llama3) or 1 (qwen2).
    Llama3 { max_digits: usize },
    /// `\p{N}`: every digit on its own.
    EachDigit,
    /// `\p{N}+`: runs of digits.
    DigitRuns,
    /// `[\p{P}\$\+<=>\^~\|]+`: runs of punctuation.
    PunctuationRuns,
    /// `[0-9][0-9][0-9]`: ASCII digits in threes.
    AsciiDigitTriples,
}

/// The pre-tokenizer named by `tokenizer.ggml.pre`, as llama.cpp maps the names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreTokenizer {
    /// The name as read (`smollm`, `qwen2`…).
    pub name: String,
    /// The split steps, applied in order.
    pub steps: Vec<Split>,
    /// Whether detokenising removes spaces before punctuation (`clean_spaces`).
    pub clean_spaces: bool,
    /// Whether a word that is a whole token skips the merges (`ignore_merges`).
    pub ignore_merges: bool,
    /// Whether the name turns `add_bos` on by default (llama3).
    pub default_add_bos: bool,
}

impl PreTokenizer {
    /// The pre-tokenizer for a `tokenizer.ggml.pre` name, or `None` if stampo does not
    /// know it. An empty name is llama.cpp's `default`.
    pub fn from_name(name: &str) -> Option<Self> {
        use Split::*;
        let mut p = PreTokenizer {
            name: name.to_string(),
            steps: vec![],
            clean_spaces: true,
            ignore_merges: false,
            default_add_bos: false,
        };
        match name {
            "" | "default" => p.steps = vec![PunctuationRuns, Gpt2, DigitRuns, AsciiDigitTriples],
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral"
            | "midm-2.0" | "lfm2" | "jina-v5-nano" => {
                p.steps = vec![Llama3 { max_digits: 3 }];
                p.ignore_merges = true;
                p.default_add_bos = true;
            }
            "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "stablelm2" => {
                p.steps = vec![Llama3 { max_digits: 1 }];
                p.clean_spaces = name == "stablelm2";
            }
            "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone"
            | "minerva" | "mellum2" => {
                p.steps = vec![EachDigit, Gpt2];
                p.clean_spaces = !matches!(name, "smollm" | "command-r");
            }
            "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es"
            | "jina-v2-de" | "a.x-4.0" | "mellum" | "modern-bert" | "mpt" | "olmo" | "jais"
            | "trillion" | "granite-docling" | "jina-v1-en" | "jina-v2-code" | "roberta-bpe" => {
                p.steps = vec![Gpt2]
            }
            _ => return None,
        }
        Some(p)
    }

    /// Splits `cpts` into word lengths (in code points).
    pub fn split(&self, cpts: &[u32]) -> Vec<usize> {
        let mut offsets = vec![cpts.len()];
        for step in &self.steps {
            offsets = step.apply(cpts, &offsets);
        }
        offsets
    }
}

impl Split {
    fn apply(self, cpts: &[u32], offsets: &[usize]) -> Vec<usize> {
        let mut out = Vec::with_capacity(offsets.len() * 2);
        let mut start = 0;
        for &len in offsets {
            let seg = Segment {
                cpts,
                ini: start,
                end: start + len,
            };
            match self {
                Split::Gpt2 => seg.gpt2(&mut out),
                Split::Llama3 { max_digits } => seg.llama3(max_digits, &mut out),
                Split::EachDigit => seg.class_matches(collapsed_number, false, &mut out),
                Split::DigitRuns => seg.class_matches(collapsed_number, true, &mut out),
                Split::PunctuationRuns => seg.class_matches(collapsed_punctuation, true, &mut out),
                Split::AsciiDigitTriples => seg.ascii_digit_triples(&mut out),
            }
            start += len;
        }
        out
    }
}

const OUT_OF_RANGE: u32 = 0xFFFF_FFFF;

/// `\p{N}` as llama.cpp's std::regex sees it on the collapsed text.
fn collapsed_number(c: u32) -> bool {
    if c < 128 {
        return is_ascii_digit(c);
    }
    let f = flags(c);
    !f.is_whitespace() && f.category() == Flags::NUMBER
}

/// `[\p{P}\$\+<=>\^~\|]` as llama.cpp's std::regex sees it on the collapsed text.
fn collapsed_punctuation(c: u32) -> bool {
    if c < 128 {
        return matches!(c as u8,
            b'!'..=b'#' | b'%'..=b'*' | b','..=b'/' | b':' | b';' | b'?' | b'@' | b'['..=b']' | b'_' | b'{' | b'}'
            | b'$' | b'+' | b'<' | b'=' | b'>' | b'^' | b'~' | b'|');
    }
    let f = flags(c);
    !f.is_whitespace() && f.category() == Flags::PUNCTUATION
}

fn is_ascii_digit(c: u32) -> bool {
    (0x30..=0x39).contains(&c)
}

struct Segment<'a> {
    cpts: &'a [u32],
    ini: usize,
    end: usize,
}

impl Segment<'_> {
    #[inline]
    fn cpt(&self, pos: usize) -> u32 {
        if self.ini <= pos && pos < self.end {
            self.cpts[pos]
        } else {
            OUT_OF_RANGE
        }
    }
    #[inline]
    fn flags(&self, pos: usize) -> Flags {
        if self.ini <= pos && pos < self.end {
            flags(self.cpts[pos])
        } else {
            Flags(0)
        }
    }

    /// Pieces at each match of a one-character class (repeated when `runs`), with the
    /// text between matches as pieces of its own (std::regex_iterator over a segment).
    fn class_matches(&self, class: fn(u32) -> bool, runs: bool, out: &mut Vec<usize>) {
        let mut prev = self.ini;
        let mut pos = self.ini;
        while pos < self.end {
            if class(self.cpts[pos]) {
                let start = pos;
                pos += 1;
                if runs {
                    while pos < self.end && class(self.cpts[pos]) {
                        pos += 1;
                    }
                }
                if start > prev {
                    out.push(start - prev);
                }
                out.push(pos - start);
                prev = pos;
            } else {
                pos += 1;
            }
        }
        if self.end > prev {
            out.push(self.end - prev);
        }
    }

    fn ascii_digit_triples(&self, out: &mut Vec<usize>) {
        let mut prev = self.ini;
        let mut pos = self.ini;
        while pos + 3 <= self.end {
            if (pos..pos + 3).all(|p| is_ascii_digit(self.cpts[p])) {
                if pos > prev {
                    out.push(pos - prev);
                }
                out.push(3);
                pos += 3;
                prev = pos;
            } else {
                pos += 1;
            }
        }
        if self.end > prev {
            out.push(self.end - prev);
        }
    }

    /// Contractions `'s 't 're 've 'm 'll 'd` at `pos` (lowercased when `ci`): their length.
    fn contraction(&self, pos: usize, ci: bool) -> Option<usize> {
        if self.cpt(pos) != '\'' as u32 || pos + 1 >= self.end {
            return None;
        }
        let low = |c: u32| if ci { tolower_contraction(c) } else { c };
        let next = low(self.cpt(pos + 1));
        if [b's', b't', b'm', b'd'].iter().any(|&b| next == b as u32) {
            return Some(2);
        }
        if pos + 2 < self.end {
            let next2 = low(self.cpt(pos + 2));
            let pair = |a: u8, b: u8| next == a as u32 && next2 == b as u32;
            if pair(b'r', b'e') || pair(b'v', b'e') || pair(b'l', b'l') {
                return Some(3);
            }
        }
        None
    }

    fn gpt2(&self, out: &mut Vec<usize>) {
        let mut prev = self.ini;
        let mut add = |end: usize, out: &mut Vec<usize>| {
            if end > prev {
                out.push(end - prev);
            }
            prev = end;
        };
        let mut pos = self.ini;
        while pos < self.end {
            let cpt = self.cpt(pos);
            let f = self.flags(pos);
            if let Some(n) = self.contraction(pos, false) {
                pos += n;
                add(pos, out);
                continue;
            }
            let space = cpt == ' ' as u32;
            let mut f2 = if space { self.flags(pos + 1) } else { f };
            // <space>?\p{L}+
            if f2.is_letter() {
                pos += usize::from(space);
                while f2.is_letter() {
                    pos += 1;
                    f2 = self.flags(pos);
                }
                add(pos, out);
                continue;
            }
            // <space>?\p{N}+
            if f2.is_number() {
                pos += usize::from(space);
                while f2.is_number() {
                    pos += 1;
                    f2 = self.flags(pos);
                }
                add(pos, out);
                continue;
            }
            // <space>?[^\s\p{L}\p{N}]+
            let other =
                |f: Flags| !(f.is_whitespace() || f.is_letter() || f.is_number()) && f.is_some();
            if other(f2) {
                pos += usize::from(space);
                while other(f2) {
                    pos += 1;
                    f2 = self.flags(pos);
                }
                add(pos, out);
                continue;
            }
            let mut n_ws = 0;
            while self.flags(pos + n_ws).is_whitespace() {
                n_ws += 1;
            }
            // \s+(?!\S)
            if n_ws > 1 && self.cpt(pos + n_ws) != OUT_OF_RANGE {
                pos += n_ws - 1;
                add(pos, out);
                continue;
            }
            // \s+
            if n_ws > 0 {
                pos += n_ws;
                add(pos, out);
                continue;
            }
            // no match
            pos += 1;
            add(pos, out);
        }
    }

    fn llama3(&self, max_digits: usize, out: &mut Vec<usize>) {
        let mut prev = self.ini;
        let mut add = |end: usize, out: &mut Vec<usize>| {
            if end > prev {
                out.push(end - prev);
            }
            prev = end;
        };
        let is_crlf = |c: u32| c == '\r' as u32 || c == '\n' as u32;
        let mut pos = self.ini;
        while pos < self.end {
            let cpt = self.cpt(pos);
            let f = self.flags(pos);
            // (?i:'s|'t|'re|'ve|'m|'ll|'d)
            if let Some(n) = self.contraction(pos, true) {
                pos += n;
                add(pos, out);
                continue;
            }
            // [^\r\n\p{L}\p{N}]?\p{L}+
            if !(is_crlf(cpt) || f.is_number())
                && (f.is_letter() || self.flags(pos + 1).is_letter())
            {
                pos += 1;
                while self.flags(pos).is_letter() {
                    pos += 1;
                }
                add(pos, out);
                continue;
            }
            // \p{N}{1,max}
            if f.is_number() {
                let mut ini = pos;
                while self.flags(pos).is_number() {
                    pos += 1;
                    if pos - ini >= max_digits {
                        add(pos, out);
                        ini = pos;
                    }
                }
                add(pos, out);
                continue;
            }
            // <space>?[^\s\p{L}\p{N}]+[\r\n]*  (llama.cpp tests the current code point's
            // flags for "is a code point", not the next one's)
            let mut f2 = if cpt == ' ' as u32 {
                self.flags(pos + 1)
            } else {
                f
            };
            let other = |f: Flags| !(f.is_whitespace() || f.is_letter() || f.is_number());
            if other(f2) && f.is_some() {
                pos += usize::from(cpt == ' ' as u32);
                while other(f2) && f2.is_some() {
                    pos += 1;
                    f2 = self.flags(pos);
                }
                while is_crlf(self.cpt(pos)) {
                    pos += 1;
                }
                add(pos, out);
                continue;
            }
            let mut n_ws = 0;
            let mut last_crlf_end = 0;
            while self.flags(pos + n_ws).is_whitespace() {
                if is_crlf(self.cpt(pos + n_ws)) {
                    last_crlf_end = pos + n_ws + 1;
                }
                n_ws += 1;
            }
            // \s*[\r\n]+
            if last_crlf_end > 0 {
                pos = last_crlf_end;
                add(pos, out);
                continue;
            }
            // \s+(?!\S)
            if n_ws > 1 && self.cpt(pos + n_ws) != OUT_OF_RANGE {
                pos += n_ws - 1;
                add(pos, out);
                continue;
            }
            // \s+
            if n_ws > 0 {
                pos += n_ws;
                add(pos, out);
                continue;
            }
            pos += 1;
            add(pos, out);
        }
    }
}
