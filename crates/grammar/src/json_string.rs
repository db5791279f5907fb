//! The inside of a free JSON string, walked once per vocabulary and shared by every grammar.
//!
//! On a large vocabulary the costliest masks are the first ones inside a string: the walk
//! takes the letters' subtrees whole, but must visit every trie path to a token holding a
//! quote, a backslash or a control character (about 12,000 nodes on Qwen2.5's 152k tokens),
//! and a JSON Schema has one such state per string-valued property, each walked again.
//! What those walks find up to the closing quote is the same every time: the tokens that
//! stay inside the string, and the trie nodes just after the first unescaped quote (the
//! *exits*, 188 on Qwen2.5). Only what follows the quote depends on the grammar.
//!
//! So a vocabulary walks a canonical string (`"` json-char* `"`, the JSON Schema front end's
//! own `char`, and llama.cpp's) once, when it is made, and a matcher recognises a state that behaves exactly like its inside
//! by running both automata in step over every byte (a product search), before trusting the
//! shared result: the mask of such a state is the shared one plus the exits' subtrees
//! walked from the state after the quote. llguidance's "slicer" precomputes masks of
//! common string patterns per tokenizer in the same spirit.

use std::sync::{Arc, OnceLock};

use rustc_hash::FxHashMap;

use crate::automaton::CompiledGrammar;
use crate::ir::{CharRange, Expr, Grammar, Rule, RuleId};
use crate::limits::Limits;
use crate::stacks::{DEAD, Engine};
use crate::tokens::{Span, walk};
use crate::vocab::Vocabulary;

/// What a walk from the inside of a free string finds up to its closing quote: from a
/// state that may close the string at once, and from one that needs a character first.
#[derive(Clone, Debug)]
pub(crate) struct StringInside {
    pub any: Part,
    pub after_char: Part,
}

#[derive(Clone, Debug)]
pub(crate) struct Part {
    /// Tokens that stay inside the string, or end right after its closing quote.
    pub accepted: Box<[u32]>,
    /// Trie nodes just after the first unescaped quote: what lies below depends on the
    /// grammar after the string.
    pub exits: Vec<u32>,
}

/// Most state pairs the product search visits: the canonical inside has about a dozen
/// states (escapes, `\u` digits, UTF-8 continuations), so more means a different language.
const MAX_PAIRS: usize = 64;
/// Most answers a matcher remembers before starting over.
const MAX_KNOWN: usize = 4096;

/// How many spellings of a string's character are recognised: the JSON Schema front end's
/// (the JSON specification's: anything but `"`, `\` and control characters, and the escapes
/// with `\/`), and llama.cpp's (its `json.gbnf` and its schema converter: DEL excluded too,
/// no `\/`), which users bring as GBNF.
pub(crate) const KINDS: usize = 2;

fn char_expr(kind: usize) -> Expr {
    if kind == 0 {
        return crate::regex::json_char();
    }
    let class = |ranges: &[(char, char)], negated| Expr::Class {
        ranges: ranges
            .iter()
            .map(|&(lo, hi)| CharRange { lo, hi })
            .collect(),
        negated,
    };
    let hex = class(&[('0', '9'), ('a', 'f'), ('A', 'F')], false);
    let escaped = class(
        &[
            ('"', '"'),
            ('\\', '\\'),
            ('b', 'b'),
            ('f', 'f'),
            ('n', 'n'),
            ('r', 'r'),
            ('t', 't'),
        ],
        false,
    );
    Expr::Alt(vec![
        class(
            &[
                ('\0', '\u{1f}'),
                ('"', '"'),
                ('\\', '\\'),
                ('\u{7f}', '\u{7f}'),
            ],
            true,
        ),
        Expr::Seq(vec![
            Expr::Literal(b"\\".to_vec()),
            Expr::Alt(vec![
                escaped,
                Expr::Seq(vec![
                    Expr::Literal(b"u".to_vec()),
                    Expr::Repeat {
                        expr: Box::new(hex),
                        min: 4,
                        max: Some(4),
                    },
                ]),
            ]),
        ]),
    ])
}

/// The canonical string of a kind: `root ::= s`, `s ::= "\"" char* "\""`, with `s` called
/// (not inlined) so that its end is a pop into the unknown context right after the quote.
fn canonical(kind: usize) -> Option<&'static Arc<CompiledGrammar>> {
    static CANONICAL: [OnceLock<Option<Arc<CompiledGrammar>>>; KINDS] =
        [const { OnceLock::new() }; KINDS];
    CANONICAL
        .get(kind)?
        .get_or_init(|| {
            let quote = || Expr::Literal(b"\"".to_vec());
            let grammar = Grammar {
                rules: vec![
                    Rule {
                        name: "root".into(),
                        expr: Expr::Rule(RuleId(1)),
                    },
                    Rule {
                        name: "string".into(),
                        expr: Expr::Seq(vec![
                            quote(),
                            Expr::Repeat {
                                expr: Box::new(char_expr(kind)),
                                min: 0,
                                max: None,
                            },
                            quote(),
                        ]),
                    },
                ],
                root: Some(RuleId(0)),
            };
            let limits = Limits {
                max_inline_states: 0,
                ..Limits::default()
            };
            CompiledGrammar::with_limits(&grammar, limits)
                .ok()
                .map(Arc::new)
        })
        .as_ref()
}

/// A canonical string's automaton, and its inside over the unknown context.
struct Canonical {
    engine: Engine,
    inside: u32,
}

impl Canonical {
    fn new(kind: usize) -> Option<Self> {
        let mut engine = Engine::new(canonical(kind)?.clone());
        // After the opening quote, the one frame is the string's; copied onto the unknown
        // context, its closing quote pops into it.
        let open = engine.step(engine.initial, b'"');
        let &frame = engine.set(open).first()?;
        let (key, _) = engine.local_chain(frame, 1);
        let inside = engine.closure_set(key);
        Some(Canonical { engine, inside })
    }
}

/// A set found to be the inside of a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    /// Which spelling of a character (an index below [`KINDS`]).
    pub kind: usize,
    /// The set after the closing quote.
    pub exit: u32,
    /// Whether the string may close at once (else a character must come first).
    pub closes_at_once: bool,
}

/// Makes the vocabulary's walks of every kind of string inside.
pub(crate) fn prepare(vocab: &Vocabulary) {
    let mut probe = StringProbe::new();
    let mut path = vec![DEAD; vocab.max_depth + 1];
    for kind in 0..KINDS {
        probe.inside(kind, vocab, &mut path);
    }
}

/// A matcher's means of recognising the inside of a free string: the canonical automata,
/// and what it found about each set asked before.
pub(crate) struct StringProbe {
    kinds: Vec<Canonical>,
    known: FxHashMap<u32, Option<Found>>,
    pairs: Vec<(u32, u32)>,
}

impl StringProbe {
    pub(crate) fn new() -> Self {
        StringProbe {
            kinds: (0..KINDS).filter_map(Canonical::new).collect(),
            known: FxHashMap::default(),
            pairs: Vec::new(),
        }
    }

    /// Whether `set` (of `engine`) accepts exactly what the inside of a free JSON string of
    /// some kind accepts, byte for byte, never popping before the closing quote, except
    /// perhaps that it cannot close at once (a string's `char` rule, called before the
    /// quote may come).
    pub(crate) fn find(&mut self, engine: &mut Engine, set: u32) -> Option<Found> {
        if let Some(&known) = self.known.get(&set) {
            return known;
        }
        let exit = self.search(engine, set);
        if self.known.len() >= MAX_KNOWN {
            self.known.clear();
        }
        self.known.insert(set, exit);
        exit
    }

    fn search(&mut self, engine: &mut Engine, set: u32) -> Option<Found> {
        // Most sets fail at once: inside a string a control byte dies, and letters soon
        // loop (the sets right after the opening quote, or after a first character that
        // a `char+` requires, may differ from the loop's).
        if engine.step(set, 0x01) != DEAD {
            return None;
        }
        let mut s = set;
        for _ in 0..3 {
            let next = engine.step(s, b'a');
            if next == s || next == DEAD {
                break;
            }
            s = next;
        }
        if s == DEAD || engine.step(s, b'a') != s {
            return None;
        }
        let closes_at_once = engine.step(set, b'"') != DEAD;
        (0..self.kinds.len()).find_map(|kind| {
            let exit = self.product(kind, engine, set, closes_at_once)?;
            Some(Found {
                kind,
                exit,
                closes_at_once,
            })
        })
    }

    /// Runs `set` in step with the canonical inside of `kind` over every byte; the set after
    /// the closing quote if they agree.
    fn product(
        &mut self,
        kind: usize,
        engine: &mut Engine,
        set: u32,
        closes_at_once: bool,
    ) -> Option<u32> {
        let canon = self.kinds.get_mut(kind)?;
        let mut exit = None;
        self.pairs.clear();
        self.pairs.push((set, canon.inside));
        let mut i = 0;
        while let Some(&(x, y)) = self.pairs.get(i) {
            i += 1;
            let mut last = (x, y);
            for b in 0..=255u8 {
                let (x2, y2) = (engine.step(x, b), canon.engine.step(y, b));
                // The canonical string pops only at its closing quote. Wherever it does,
                // this one must go on, always in the same set (so that the shared exits
                // all continue from it); only at the very start may it refuse to close.
                if y2 != DEAD && canon.engine.has_hole(y2) {
                    if x2 == DEAD && i == 1 && !closes_at_once {
                        continue;
                    }
                    if x2 == DEAD || exit.is_some_and(|e| e != x2) {
                        return None;
                    }
                    exit = Some(x2);
                    continue;
                }
                if (x2 == DEAD) != (y2 == DEAD) {
                    return None;
                }
                if x2 == DEAD || (x2, y2) == last {
                    continue;
                }
                if engine.has_hole(x2) {
                    return None;
                }
                last = (x2, y2);
                if !self.pairs.contains(&last) {
                    if self.pairs.len() >= MAX_PAIRS {
                        return None;
                    }
                    self.pairs.push(last);
                }
            }
        }
        exit
    }

    /// The shared walk of the canonical inside of `kind` over `vocab` (made with the
    /// vocabulary, see [`prepare`]).
    pub(crate) fn inside<'v>(
        &mut self,
        kind: usize,
        vocab: &'v Vocabulary,
        path: &mut [u32],
    ) -> Option<&'v StringInside> {
        let canon = self.kinds.get_mut(kind)?;
        let cell = vocab.string_insides.get(kind)?;
        Some(cell.get_or_init(|| {
            let mut accepted: Box<[u32]> = vec![0u32; vocab.mask_words()].into();
            let mut exits = Vec::new();
            let start = canon.inside;
            walk(
                &mut canon.engine,
                vocab,
                path,
                Span::All,
                start,
                &mut accepted,
                Some(&mut exits),
            );
            // Without the empty string: no token may start with the closing quote, which
            // is the trie's first-level `"` node and its subtree (an exit, and nothing
            // below it is one).
            let mut after_char = Part {
                accepted: accepted.clone(),
                exits: exits.clone(),
            };
            if let Some(q) = vocab.first_level_node(b'"') {
                vocab.clear_tokens_from(q, &mut after_char.accepted);
                after_char.exits.retain(|&n| n != q);
            }
            StringInside {
                any: Part { accepted, exits },
                after_char,
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine_at(src: &str, prefix: &[u8]) -> (Engine, u32) {
        let g = CompiledGrammar::from_gbnf(src).unwrap();
        let mut e = Engine::new(Arc::new(g));
        let mut s = e.initial;
        for &b in prefix {
            s = e.step(s, b);
        }
        (e, s)
    }

    const JSON_CHAR: &str = r#"[^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})"#;

    #[test]
    fn recognises_a_free_string_whatever_follows_it() {
        let mut probe = StringProbe::new();
        let src = format!(r#"root ::= "{{\"a\":\"" ({JSON_CHAR})* "\"," [0-9]+ "}}""#);
        let (mut e, s) = engine_at(&src, br#"{"a":""#);
        let found = probe.find(&mut e, s).expect("the inside of a free string");
        assert_eq!((found.kind, found.closes_at_once), (0, true));
        assert_eq!(found.exit, e.step(s, b'"'));
        // Also after some characters and a completed escape.
        let (mut e, s) = engine_at(&src, br#"{"a":"x\n\u00e9y"#);
        assert!(probe.find(&mut e, s).is_some());
    }

    #[test]
    fn recognises_a_string_that_needs_a_first_character() {
        let mut probe = StringProbe::new();
        let src = format!(
            r#"root ::= "[" ("\"" char+ "\"")? "]"
char ::= {JSON_CHAR}
"#
        );
        let (mut e, s) = engine_at(&src, b"[\"");
        let found = probe.find(&mut e, s).expect("a non-empty string");
        assert!(!found.closes_at_once);
        let letter = e.step(s, b'a');
        assert_eq!(found.exit, e.step(letter, b'"'));
    }

    #[test]
    fn recognises_llama_cpp_strings() {
        let mut probe = StringProbe::new();
        // As in llama.cpp's json.gbnf: DEL excluded, no `\/`.
        let src =
            r#"root ::= "\"" ([^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}))* "\"""#;
        let (mut e, s) = engine_at(src, b"\"");
        assert_eq!(probe.find(&mut e, s).map(|f| f.kind), Some(1));
    }

    #[test]
    fn other_strings_are_not_taken_for_it() {
        let mut probe = StringProbe::new();
        let cases = [
            r#"root ::= "\"" [a-z]* "\"""#,
            r#"root ::= "\"" ([^"\\\x00-\x1F] | "\\" ["\\/bfnrt])* "\"""#,
            // DEL excluded but `\/` kept: neither spelling.
            r#"root ::= "\"" ([^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))* "\"""#,
        ];
        for src in cases {
            let (mut e, s) = engine_at(src, b"\"");
            assert_eq!(probe.find(&mut e, s), None, "{src}");
        }
        // A string with a length bound counts down: not the loop.
        let src = format!(r#"root ::= "\"" ({JSON_CHAR}){{0,3}} "\"""#);
        let (mut e, s) = engine_at(&src, b"\"");
        assert_eq!(probe.find(&mut e, s), None);
    }
}
