//! The regex front end: ECMA-262 meaning, JSON Schema's unanchored matching, and located
//! refusals for what a grammar cannot express.

#![allow(clippy::panic, clippy::unwrap_used)]

use stampo_grammar::accepts;
use stampo_grammar::ir::{Grammar, Rule, RuleId};
use stampo_grammar::regex::{Encoding, RegexError, compile, grammar as grammar_of};

fn grammar(pattern: &str, encoding: Encoding) -> Grammar {
    let expr = compile(pattern, encoding, 100).unwrap();
    Grammar {
        rules: vec![Rule {
            name: "root".into(),
            expr,
        }],
        root: Some(RuleId(0)),
    }
}

/// (pattern, matching strings, non-matching strings), raw encoding.
const CASES: &[(&str, &[&str], &[&str])] = &[
    ("abc", &["abc", "xabcx"], &["ab", "acb"]),
    ("^abc", &["abc", "abcx"], &["xabc"]),
    ("abc$", &["abc", "xabc"], &["abcx"]),
    ("^a|b$", &["ax", "xb"], &["xa", "bx"]),
    ("^\\d+$", &["0123"], &["١٢", "12a"]),
    ("^\\w$", &["a", "_", "7"], &["é", "-"]),
    ("^.$", &["a", "é"], &["\n", "\r", "\u{2028}"]),
    ("^[^a-c]{2,3}$", &["xy", "xyz"], &["x", "ab", "wxyz"]),
    ("^(ab)*$", &["", "abab"], &["aba"]),
    ("^a{3}$", &["aaa"], &["aa", "aaaa"]),
    ("^\\/\\.$", &["/."], &["/x"]),
    ("^(?<y>\\d{4})-\\u00e9$", &["2024-é"], &["2024-e"]),
    // ECMA-262 reads `\<` and `\>` as the characters (`regex` as word boundaries).
    (
        "^.+\\<.+@.+\\>$",
        &["Ann <a@b.c>"],
        &["Ann a@b.c", "<a@b.c"],
    ),
    // Anchors inside a group, alternative or repetition at an edge of the pattern.
    (
        "^(\\/?((\\.{2})|([a-z0-9\\-]*))($|\\/))*$",
        &["", "a/b", "/a/../b", "a/", "..", "/"],
        &["A", "a//.b", "a/.../c"],
    ),
    ("^(^a|b)c", &["ac", "bcx"], &["xac", "abc"]),
    ("(a|b$)+", &["xaa", "xab", "b", "ab"], &["xbx", "c"]),
    ("((^|-)x)+$", &["x", "x-x", "a-x"], &["ax", "x-"]),
    // Inside brackets `[` is a character, so this is a class and then `]` (not a POSIX
    // class); a `]` outside a class is the character, as without the `u` flag.
    ("^[[:alpha:]]$", &["a]", "[]", ":]"], &["a", "b]"]),
    ("^\\$\\[\\*]$", &["$[*]"], &["$[*"]),
    (
        "^[a-z&&[^aeiou]]+$",
        &["a]", "&]]", "[]"],
        &["b", "a&]", "b]a"],
    ),
    // `"--` is the range from `"` to `-` (a schema's list of punctuation; `regex-syntax`
    // reads `--` as set difference and took `.` and `/` away).
    ("^[\\w\"--/.]+$", &["a.b", "#-/", "'(x)'"], &["a b", "é"]),
];

#[test]
fn patterns_match_as_ecma_262_says() {
    let mut failures = Vec::new();
    for (pattern, good, bad) in CASES {
        let g = grammar(pattern, Encoding::Raw);
        for s in *good {
            if !accepts(&g, s.as_bytes()) {
                failures.push(format!("/{pattern}/ should match {s:?}"));
            }
        }
        for s in *bad {
            if accepts(&g, s.as_bytes()) {
                failures.push(format!("/{pattern}/ should not match {s:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn json_string_encoding_escapes_what_json_must() {
    let g = grammar("^[\"\\\\\\n]a$", Encoding::JsonString);
    for s in ["\\\"a", "\\\\a", "\\na", "\\u000aa", "\\u000Aa"] {
        assert!(accepts(&g, s.as_bytes()), "{s}");
    }
    for s in ["\"a", "\na", "\\a"] {
        assert!(!accepts(&g, s.as_bytes()), "{s}");
    }
    // Unanchored sides take any JSON string content, escapes included.
    let g = grammar("x", Encoding::JsonString);
    assert!(accepts(&g, b"\\u0041x\\\""));
    assert!(!accepts(&g, b"\"x"));
}

#[test]
fn what_a_grammar_cannot_express_is_refused_with_its_offset() {
    let err = |p: &str| compile(p, Encoding::Raw, 100).unwrap_err();
    assert!(matches!(
        err("ab(?=c)"),
        RegexError::Unsupported { offset: 2, .. }
    ));
    assert!(matches!(
        err("a(?!b)"),
        RegexError::Unsupported { offset: 1, .. }
    ));
    assert!(matches!(
        err("(a)\\1"),
        RegexError::Unsupported { offset: 3, .. }
    ));
    assert!(matches!(
        err("a\\bc"),
        RegexError::Unsupported { offset: 1, .. }
    ));
    assert!(matches!(
        err("a{101}"),
        RegexError::RepetitionTooLarge {
            value: 101,
            max: 100
        }
    ));
    assert!(matches!(err("a("), RegexError::Syntax { .. }));
    // ECMA-262 syntax errors, located in the pattern as written.
    assert!(matches!(
        err("ab[z-a]"),
        RegexError::Syntax { offset: 3, .. }
    ));
    assert!(matches!(
        err("a[\\w-z]"),
        RegexError::Syntax { offset: 2, .. }
    ));
    assert!(matches!(
        err("[ab]\\Ac"),
        RegexError::Syntax { offset: 4, .. }
    ));
    assert!(matches!(
        err("(?<n>a)\\k<n>"),
        RegexError::Unsupported { offset: 7, .. }
    ));
    // An error `regex-syntax` finds after a rewritten class names the pattern's offset.
    assert!(matches!(
        err("[ab]\\bc"),
        RegexError::Unsupported { offset: 4, .. }
    ));
    assert!(matches!(err("a^b"), RegexError::Unsupported { .. }));
}

/// Checks every pattern of a fixture written by `tests/fixtures/regex/ecma_reference.mjs`
/// that stampo compiles against V8's verdicts: how many compiled, how many were refused,
/// and each disagreement. A pattern V8 refuses (`null`) must be refused too.
fn against_v8(fixture: &str) -> (usize, usize, Vec<String>) {
    let path = format!(
        "{}/tests/fixtures/regex/{fixture}",
        env!("CARGO_MANIFEST_DIR")
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let strings: Vec<&str> = doc["strings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    let (mut compiled, mut refused, mut failures) = (0, 0, Vec::new());
    for case in doc["cases"].as_array().unwrap() {
        let pattern = case[0].as_str().unwrap();
        let Some(verdicts) = case[1].as_str() else {
            if grammar_of(pattern, Encoding::Raw, 100).is_ok() {
                failures.push(format!("/{pattern}/: V8 refuses it, stampo compiles it"));
            }
            continue;
        };
        let Ok(g) = grammar_of(pattern, Encoding::Raw, 100) else {
            refused += 1;
            continue;
        };
        compiled += 1;
        for (s, v) in strings.iter().zip(verdicts.chars()) {
            if accepts(&g, s.as_bytes()) != (v == '1') {
                failures.push(format!("/{pattern}/ on {s:?}: V8 says {v}"));
            }
        }
    }
    println!("{fixture}: {compiled} patterns compiled, {refused} refused");
    (compiled, refused, failures)
}

/// Patterns with `^` and `$` inside groups, alternatives and repetitions: every pattern
/// stampo compiles matches exactly where V8's `RegExp` finds a match; the others are
/// refused with an error, and most compile.
#[test]
fn anchors_inside_a_pattern_match_as_v8_does() {
    let (compiled, refused, failures) = against_v8("anchors.json");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(compiled >= 300, "{compiled} compiled, {refused} refused");
}

/// Classes and escapes whose meaning differs between ECMA-262 and Rust's `regex`, on the
/// characters that tell them apart (Unicode digits and letters, the white space of each,
/// line terminators).
#[test]
fn classes_and_escapes_match_as_v8_does() {
    let (compiled, refused, failures) = against_v8("escapes.json");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(compiled >= 290, "{compiled} compiled, {refused} refused");
}

/// Classes and escapes as ECMA-262 reads them with the `u` flag, JSON Schema's reading:
/// `[`, `&&`, `--` and `[:alpha:` inside brackets are characters (`regex-syntax` reads
/// nested classes, set operations and POSIX classes), `[\b]` is a backspace, `[]` matches
/// nothing and `[^]` anything; `\cJ`, `\0`, `\u{1F600}`, surrogate pairs, `\p{L}`. What V8
/// refuses (a range out of order, `[\d-z]`) is refused.
#[test]
fn classes_read_with_the_u_flag_match_as_v8_does() {
    let (compiled, refused, failures) = against_v8("classes.json");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(compiled >= 290, "{compiled} compiled, {refused} refused");
}

/// Patterns opening with look-ahead (`^(?!X)Y`, `^(?=X)Y`, two in a row), whose grammar is
/// an automaton of the difference (or intersection) of the two languages.
#[test]
fn leading_look_ahead_matches_as_v8_does() {
    let (compiled, refused, failures) = against_v8("lookahead.json");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(compiled >= 250, "{compiled} compiled, {refused} refused");
}

/// Where look-ahead is not the pattern's opening, or guards only one alternative of it, it is
/// refused with its offset; an automaton past its limits is an error, not a long wait.
#[test]
fn look_ahead_elsewhere_is_refused_and_an_automaton_is_bounded() {
    let err = |p: &str| grammar_of(p, Encoding::Raw, 100).unwrap_err();
    // In `^(?!a)b|c` the look-ahead guards `b` only.
    assert!(matches!(
        err("^(?!a)b|c"),
        RegexError::Unsupported { offset: 1, .. }
    ));
    assert!(matches!(
        err("a(?!b)"),
        RegexError::Unsupported { offset: 1, .. }
    ));
    // An error inside the look-ahead or after it is located in the whole pattern.
    assert!(matches!(
        err("^(?!a(?=b))c"),
        RegexError::Unsupported { offset: 5, .. }
    ));
    assert!(matches!(
        err("^(?!a)b(?=c)"),
        RegexError::Unsupported { offset: 7, .. }
    ));
    // Escaped and bracketed parentheses do not close the look-ahead.
    let g = grammar_of(r"^(?![)]\)).", Encoding::Raw, 100).unwrap();
    assert!(accepts(&g, b")a") && accepts(&g, b"a))") && !accepts(&g, b"))x"));
    let started = std::time::Instant::now();
    assert!(matches!(
        err("^(?![ab]*a[ab]{12}$)[ab]*$"),
        RegexError::TooLarge { .. }
    ));
    assert!(started.elapsed().as_secs() < 10, "{:?}", started.elapsed());
}
