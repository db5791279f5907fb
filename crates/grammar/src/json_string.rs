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
//!
//! A string with a length bound (`maxLength`) is a chain of positions instead of a loop,
//! each calling the shared `char` rule and allowing the closing quote: a product search
//! would have to follow the whole count. It is recognised from its automaton instead (the
//! chain's shape, and the called rule checked once to be exactly a string's character), and
//! takes the same shared walk without the tokens that start more characters than the
//! positions left, which the walk counted for every token and every exit.

use std::sync::{Arc, OnceLock};

use rustc_hash::FxHashMap;

use crate::automaton::CompiledGrammar;
use crate::automaton::StateId;
use crate::ir::{CharRange, Expr, Grammar, Rule, RuleId};
use crate::limits::Limits;
use crate::stacks::{DEAD, Engine, HOLE};
use crate::tokens::{Span, walk};
use crate::vocab::Vocabulary;

/// What a walk from the inside of a free string finds up to its closing quote: from a
/// state that may close the string at once, and from one that needs a character first.
#[derive(Clone, Debug)]
pub(crate) struct StringInside {
    pub any: Part,
    pub after_char: Part,
    /// The tokens `any` accepts, by how many characters each starts before the closing
    /// quote (or its end): index `n` lists those starting `n`.
    by_chars: Vec<Vec<u32>>,
    /// The tokens `any` accepts whose first byte is [`plain`]: what a state that enters the
    /// inside of a string on such a byte accepts below it (see `tokens.rs`).
    pub plain_first: Box<[u32]>,
}

#[derive(Clone, Debug)]
pub(crate) struct Part {
    /// Tokens that stay inside the string, or end right after its closing quote.
    pub accepted: Box<[u32]>,
    /// Trie nodes just after the first unescaped quote: what lies below depends on the
    /// grammar after the string.
    pub exits: Vec<u32>,
    /// Per exit, the characters before its quote.
    exit_chars: Vec<u32>,
    /// Per exit, its path's first byte.
    pub exit_first: Vec<u8>,
}

/// A byte that is a whole character of a string, and after which a string's inside is
/// where it was: printable ASCII but the quote and the backslash.
pub(crate) fn plain(b: u8) -> bool {
    (0x20..=0x7E).contains(&b) && b != b'"' && b != b'\\'
}

impl StringInside {
    /// `part` for a string that may take at most `budget` more characters (`None`: no
    /// bound): its tokens and exits that start no more characters than that.
    pub(crate) fn within(&self, part: &Part, budget: Option<u32>) -> (Box<[u32]>, Vec<u32>) {
        let most = self.by_chars.len().saturating_sub(1);
        let Some(budget) = budget.map(|b| b as usize).filter(|&b| b < most) else {
            return (part.accepted.clone(), part.exits.clone());
        };
        let (fit, over) = self.by_chars.split_at(budget + 1);
        let count = |lists: &[Vec<u32>]| lists.iter().map(Vec::len).sum::<usize>();
        // Clear the few that do not fit, or set the few that do, whichever is less work.
        let accepted = if count(over) <= count(fit) {
            let mut out = part.accepted.clone();
            for &id in over.iter().flatten() {
                out[id as usize / 32] &= !(1 << (id % 32));
            }
            out
        } else {
            let mut out: Box<[u32]> = vec![0u32; part.accepted.len()].into();
            for &id in fit.iter().flatten() {
                let (w, bit) = (id as usize / 32, 1 << (id % 32));
                out[w] |= part.accepted[w] & bit;
            }
            out
        };
        let exits = part
            .exits
            .iter()
            .zip(&part.exit_chars)
            .filter(|&(_, &n)| n as usize <= budget)
            .map(|(&e, _)| e)
            .collect();
        (accepted, exits)
    }
}

/// How many characters `bytes`, read from a character boundary inside a string, starts
/// before its first unescaped quote (or its end): an escape is one, a UTF-8 sequence one, a
/// character cut off at the end counts.
fn chars_started(bytes: &[u8]) -> u32 {
    let (mut n, mut after_backslash, mut hex_left) = (0u32, false, 0u8);
    for &b in bytes {
        if after_backslash {
            after_backslash = false;
            if b == b'u' {
                hex_left = 4;
            }
        } else if hex_left > 0 {
            hex_left -= 1;
        } else {
            match b {
                b'"' => break,
                b'\\' => {
                    n += 1;
                    after_backslash = true;
                }
                // Continuation bytes: the character started at its lead byte.
                0x80..=0xBF => {}
                _ => n += 1,
            }
        }
    }
    n
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
            called_rule(Expr::Seq(vec![
                quote(),
                Expr::Repeat {
                    expr: Box::new(char_expr(kind)),
                    min: 0,
                    max: None,
                },
                quote(),
            ]))
        })
        .as_ref()
}

/// `root ::= r`, `r ::= body`, compiled with `r` called (never inlined), so that its end is
/// a pop into whatever context it is copied onto.
fn called_rule(body: Expr) -> Option<Arc<CompiledGrammar>> {
    let grammar = Grammar {
        rules: vec![
            Rule {
                name: "root".into(),
                expr: Expr::Rule(RuleId(1)),
            },
            Rule {
                name: "canonical".into(),
                expr: body,
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
}

/// The set's first frame (the called rule's) copied onto the unknown context, and what it
/// reaches from there.
fn over_unknown_context(engine: &mut Engine, set: u32) -> Option<u32> {
    let &frame = engine.set(set).first()?;
    let (key, _) = engine.local_chain(frame, 1);
    Some(engine.closure_set(key))
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
        let inside = over_unknown_context(&mut engine, open)?;
        Some(Canonical { engine, inside })
    }
}

/// The canonical character of a kind as a called rule (`root ::= c`, `c ::= char`), and
/// its start over the unknown context.
struct CharCanonical {
    engine: Engine,
    start: u32,
}

impl CharCanonical {
    fn new(kind: usize) -> Option<Self> {
        static CANONICAL: [OnceLock<Option<Arc<CompiledGrammar>>>; KINDS] =
            [const { OnceLock::new() }; KINDS];
        let g = CANONICAL
            .get(kind)?
            .get_or_init(|| called_rule(char_expr(kind)))
            .as_ref()?;
        let mut engine = Engine::new(g.clone());
        let initial = engine.initial;
        let start = over_unknown_context(&mut engine, initial)?;
        Some(CharCanonical { engine, start })
    }
}

/// Whether `set` accepts exactly the canonical character's bytes, popping exactly when it
/// does and into nothing else.
fn same_character(engine: &mut Engine, set: u32, mut canon: CharCanonical) -> bool {
    let mut pairs = vec![(set, canon.start)];
    let mut i = 0;
    while let Some(&(x, y)) = pairs.get(i) {
        i += 1;
        for b in 0..=255u8 {
            let (x2, y2) = (engine.step(x, b), canon.engine.step(y, b));
            if (x2 == DEAD) != (y2 == DEAD) {
                return false;
            }
            if x2 == DEAD {
                continue;
            }
            if canon.engine.has_hole(y2) || engine.has_hole(x2) {
                // A finished character leaves nothing but the pop.
                if engine.set(x2) != [HOLE] || canon.engine.set(y2) != [HOLE] {
                    return false;
                }
                continue;
            }
            if !pairs.contains(&(x2, y2)) {
                if pairs.len() >= MAX_PAIRS {
                    return false;
                }
                pairs.push((x2, y2));
            }
        }
    }
    true
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
    /// At most how many more characters, for a string with a length bound.
    pub budget: Option<u32>,
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
    /// Per rule start state, which spelling of a character the rule is (if any).
    char_kinds: FxHashMap<StateId, Option<usize>>,
}

impl StringProbe {
    pub(crate) fn new() -> Self {
        StringProbe {
            kinds: (0..KINDS).filter_map(Canonical::new).collect(),
            known: FxHashMap::default(),
            pairs: Vec::new(),
            char_kinds: FxHashMap::default(),
        }
    }

    /// Whether `set` (of `engine`) accepts exactly what the inside of a free JSON string of
    /// some kind accepts, byte for byte, never popping before the closing quote, except
    /// perhaps that it cannot close at once (a string's `char` rule, called before the
    /// quote may come).
    ///
    /// Or whether it is the inside of a string with a length bound (see the module docs):
    /// then [`Found::budget`] is the most characters it may still take, or `None` if that
    /// is at least `cap`.
    pub(crate) fn find(&mut self, engine: &mut Engine, set: u32, cap: u32) -> Option<Found> {
        if let Some(&known) = self.known.get(&set) {
            return known;
        }
        let exit = self.search(engine, set, cap);
        if self.known.len() >= MAX_KNOWN {
            self.known.clear();
        }
        self.known.insert(set, exit);
        exit
    }

    fn search(&mut self, engine: &mut Engine, set: u32, cap: u32) -> Option<Found> {
        // Most sets fail at once: inside a string a control byte dies, and letters soon
        // loop (the sets right after the opening quote, or after a first character that
        // a `char+` requires, may differ from the loop's).
        if engine.step(set, 0x01) != DEAD {
            return None;
        }
        if let Some(found) = self.bounded(engine, set, cap) {
            return Some(found);
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
                budget: None,
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

    /// Whether `set` is a position of a string with a length bound: a chain of automaton
    /// states in one frame, each allowing the closing quote (always into the
    /// same state) or a call of one rule that is exactly a string's character, returning
    /// to the next position; the last allows only the quote. Either the position itself
    /// (its frame, and the character rule's frame returning to the next position), or a
    /// character already begun (that frame alone: it must be finished before the quote).
    fn bounded(&mut self, engine: &mut Engine, set: u32, cap: u32) -> Option<Found> {
        // The character's frame returns to the next position, over the same frame (or
        // context) as the position's own frame.
        let called_from = |c: u32, position: u32| {
            let next = engine.frame_parent(c);
            next > HOLE && engine.frame_parent(next) == engine.frame_parent(position)
        };
        let (position, char_frame) = match *engine.set(set) {
            [c] if c > HOLE => (None, c),
            [a, b] if a > HOLE && b > HOLE && called_from(b, a) => (Some(a), b),
            [a, b] if a > HOLE && b > HOLE && called_from(a, b) => (Some(b), a),
            _ => return None,
        };
        let next = engine.frame_parent(char_frame);
        if next <= HOLE {
            return None;
        }
        let below = engine.frame_parent(next);
        let (char_state, next_state) = (engine.frame_state(char_frame), engine.frame_state(next));
        let (mut state, closes_at_once) = match position {
            None => (next_state, false),
            Some(p) => (engine.frame_state(p), true),
        };
        let g = Arc::clone(&engine.g);
        let mut chars = u32::from(!closes_at_once);
        let mut quote_to = None;
        loop {
            let st = g.states.get(state as usize)?;
            let [edge] = st.bytes.as_slice() else {
                return None;
            };
            if st.is_final
                || !st.tokens.is_empty()
                || (edge.lo, edge.hi) != (b'"', b'"')
                || quote_to.is_some_and(|q| q != edge.target)
            {
                return None;
            }
            quote_to = Some(edge.target);
            match st.calls.as_slice() {
                [] => break,
                &[(rule, back)] => {
                    // The position's own call is the one whose frame is in the set.
                    let first = closes_at_once && chars == 0;
                    if g.rule_start.get(rule as usize) != Some(&char_state)
                        || (first && back != next_state)
                    {
                        return None;
                    }
                    chars += 1;
                    if chars >= cap {
                        break;
                    }
                    state = back;
                }
                _ => return None,
            }
        }
        let kind = self.char_kind(engine, char_state)?;
        let after = engine.frame(quote_to?, below);
        Some(Found {
            kind,
            exit: engine.closure_set(after),
            closes_at_once,
            budget: (chars < cap).then_some(chars),
        })
    }

    /// Which spelling of a string's character the rule starting at `start` is exactly, if
    /// any: its automaton, over the unknown context, run in step with the canonical
    /// character's over every byte, both finishing (popping) together.
    fn char_kind(&mut self, engine: &mut Engine, start: StateId) -> Option<usize> {
        if let Some(&known) = self.char_kinds.get(&start) {
            return known;
        }
        let frame = engine.frame(start, HOLE);
        let set = engine.closure_set(frame);
        let kind = (0..KINDS).find(|&kind| {
            let Some(canon) = CharCanonical::new(kind) else {
                return false;
            };
            same_character(engine, set, canon)
        });
        self.char_kinds.insert(start, kind);
        kind
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
            // What a bound on the characters filters by (see `within`).
            let mut by_chars: Vec<Vec<u32>> = Vec::new();
            for (w, &word) in accepted.iter().enumerate() {
                let mut bits = word;
                while bits != 0 {
                    let id = (32 * w) as u32 + bits.trailing_zeros();
                    bits &= bits - 1;
                    let n = chars_started(vocab.token_bytes(id)) as usize;
                    if by_chars.len() <= n {
                        by_chars.resize(n + 1, Vec::new());
                    }
                    by_chars[n].push(id);
                }
            }
            // An exit's path is the start of any token below it.
            let exit_chars: Vec<u32> = exits
                .iter()
                .map(|&node| {
                    let n = vocab.nodes[node as usize];
                    let first = vocab.token_ids[vocab.first_token[node as usize] as usize];
                    let path = vocab.token_bytes(first);
                    chars_started(&path[..(n.depth as usize).min(path.len())])
                })
                .collect();
            let exit_first: Vec<u8> = exits
                .iter()
                .map(|&node| {
                    let first = vocab.token_ids[vocab.first_token[node as usize] as usize];
                    vocab.token_bytes(first).first().copied().unwrap_or(0)
                })
                .collect();
            let mut plain_first = accepted.clone();
            for &(byte, node) in &vocab.first_level {
                if !plain(byte) {
                    vocab.clear_tokens_from(node, &mut plain_first);
                }
            }
            // Without the empty string: no token may start with the closing quote, which
            // is the trie's first-level `"` node and its subtree (an exit, and nothing
            // below it is one).
            let mut after_char = Part {
                accepted: accepted.clone(),
                exits: exits.clone(),
                exit_chars: exit_chars.clone(),
                exit_first: exit_first.clone(),
            };
            if let Some(q) = vocab.first_level_node(b'"') {
                vocab.clear_tokens_from(q, &mut after_char.accepted);
                let kept: Vec<usize> = (0..exits.len()).filter(|&i| exits[i] != q).collect();
                after_char.exits = kept.iter().map(|&i| exits[i]).collect();
                after_char.exit_chars = kept.iter().map(|&i| exit_chars[i]).collect();
                after_char.exit_first = kept.iter().map(|&i| exit_first[i]).collect();
            }
            StringInside {
                any: Part {
                    accepted,
                    exits,
                    exit_chars,
                    exit_first,
                },
                after_char,
                by_chars,
                plain_first,
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
        let found = probe
            .find(&mut e, s, 64)
            .expect("the inside of a free string");
        assert_eq!((found.kind, found.closes_at_once), (0, true));
        assert_eq!(found.exit, e.step(s, b'"'));
        // Also after some characters and a completed escape.
        let (mut e, s) = engine_at(&src, br#"{"a":"x\n\u00e9y"#);
        assert!(probe.find(&mut e, s, 64).is_some());
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
        let found = probe.find(&mut e, s, 64).expect("a non-empty string");
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
        assert_eq!(probe.find(&mut e, s, 64).map(|f| f.kind), Some(1));
    }

    fn schema_engine_at(schema: serde_json::Value, prefix: &[u8]) -> (Engine, u32) {
        let c = crate::json_schema::compile(&schema, &Default::default()).unwrap();
        let g = CompiledGrammar::new(&c.grammar).unwrap();
        let mut e = Engine::new(Arc::new(g));
        let mut s = e.initial;
        for &b in prefix {
            s = e.step(s, b);
        }
        (e, s)
    }

    #[test]
    fn recognises_a_bounded_string_and_counts_what_is_left() {
        let schema =
            serde_json::json!({"type": "array", "items": {"type": "string", "maxLength": 5}});
        // A probe remembers sets by id: one per engine.
        let cases: [(&[u8], u32); 4] = [
            (b"[\"", 5),
            (b"[\"ab", 3),
            (b"[\"\\n\xC3\xA9x", 2),
            (b"[\"abcd", 1),
        ];
        for (prefix, left) in cases {
            let (mut e, s) = schema_engine_at(schema.clone(), prefix);
            let found = StringProbe::new()
                .find(&mut e, s, 64)
                .expect("a bounded string");
            assert_eq!(
                (found.kind, found.budget, found.closes_at_once),
                (0, Some(left), true)
            );
            assert_eq!(found.exit, e.step(s, b'"'));
        }
        // Beyond the cap the bound cannot show within a token: as a free string.
        let (mut e, s) = schema_engine_at(schema, b"[\"");
        let found = StringProbe::new().find(&mut e, s, 4);
        assert_eq!(found.map(|f| f.budget), Some(None));
        // A character begun is no position: a bound of one, its `\` taken.
        let one = serde_json::json!({"type": "string", "maxLength": 1});
        let (mut e, s) = schema_engine_at(one, b"\"\\");
        assert_eq!(StringProbe::new().find(&mut e, s, 64), None);
    }

    #[test]
    fn a_bounded_string_of_other_characters_is_not_taken_for_one() {
        // Letters only, and a JSON character without `\u` escapes: called rules in the
        // place of a string's character, but not one.
        for c in ["[a-z]", r#"[^"\\\x00-\x1F] | "\\" ["\\/bfnrt]"#] {
            // (Recursive, so that it stays a rule of its own rather than being inlined.)
            let src = format!("root ::= \"\\\"\" c{{0,40}} \"\\\"\"\nc ::= {c} | \"<\" c\n");
            let (mut e, s) = engine_at(&src, b"\"");
            assert_eq!(StringProbe::new().find(&mut e, s, 64), None, "{src}");
        }
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
            assert_eq!(probe.find(&mut e, s, 64), None, "{src}");
        }
        // A string with a length bound counts down: not the loop.
        let src = format!(r#"root ::= "\"" ({JSON_CHAR}){{0,3}} "\"""#);
        let (mut e, s) = engine_at(&src, b"\"");
        assert_eq!(probe.find(&mut e, s, 64), None);
    }
}
