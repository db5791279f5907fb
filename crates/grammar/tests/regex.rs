//! The regex front end: ECMA-262 meaning, JSON Schema's unanchored matching, and located
//! refusals for what a grammar cannot express.

#![allow(clippy::panic, clippy::unwrap_used)]

use stampo_grammar::accepts;
use stampo_grammar::ir::{Grammar, Rule, RuleId};
use stampo_grammar::regex::{Encoding, RegexError, compile};

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
    assert!(matches!(err("a^b"), RegexError::Unsupported { .. }));
}
