//! GBNF syntax: every construct of llama.cpp's grammar language, matched byte by byte, and
//! the errors a malformed grammar gets (with line:column and what was expected).

#![allow(clippy::panic)] // test helpers fail with the grammar in the message
use std::sync::Arc;

use stampo_grammar::{CompiledGrammar, GrammarError, Location, Matcher, gbnf};

fn compiled(src: &str) -> Arc<CompiledGrammar> {
    let g = gbnf::parse(src).unwrap_or_else(|e| panic!("{src}: {e}"));
    Arc::new(CompiledGrammar::new(&g).unwrap_or_else(|e| panic!("{src}: {e}")))
}

/// (name, grammar, accepted inputs, rejected inputs)
const CASES: &[(&str, &str, &[&str], &[&str])] = &[
    (
        "literal",
        r#"root ::= "abc""#,
        &["abc"],
        &["", "ab", "abcd", "abd"],
    ),
    (
        "alternation",
        r#"root ::= "a" | "bc" | """#,
        &["a", "bc", ""],
        &["b", "abc"],
    ),
    (
        "class",
        "root ::= [a-c0-9_]",
        &["a", "c", "5", "_"],
        &["d", "", "ab"],
    ),
    (
        "negated class",
        "root ::= [^a-c]",
        &["d", "é", "\n", "日"],
        &["a", "b", ""],
    ),
    (
        "any char",
        "root ::= . .",
        &["ab", "日本", "a\u{10FFFF}"],
        &["a", "abc"],
    ),
    (
        "star",
        r#"root ::= "a"*"#,
        &["", "a", "aaaa"],
        &["b", "aab"],
    ),
    ("plus", r#"root ::= "ab"+"#, &["ab", "abab"], &["", "aba"]),
    (
        "optional",
        r#"root ::= "a" "b"? "c""#,
        &["ac", "abc"],
        &["abbc", "a"],
    ),
    (
        "exact count",
        "root ::= [0-9]{3}",
        &["123"],
        &["12", "1234"],
    ),
    ("at least", "root ::= [0-9]{2,}", &["12", "12345"], &["1"]),
    (
        "between",
        "root ::= [0-9]{1,3}",
        &["1", "123"],
        &["", "1234"],
    ),
    (
        "zero to n",
        r#"root ::= "x"{0,2}"#,
        &["", "x", "xx"],
        &["xxx"],
    ),
    (
        "group repeat",
        r#"root ::= ("a" | "bc")+ "d""#,
        &["ad", "bcad", "abcbcd"],
        &["d", "bd"],
    ),
    (
        "escapes",
        r#"root ::= "\n\t\r\"\\\x41\u00e9\U0001F600""#,
        &["\n\t\r\"\\Aé😀"],
        &["A"],
    ),
    (
        "class escapes",
        r#"root ::= [\]\[\-\\]+"#,
        &["]", "[", "-", "\\", "][-"],
        &["a"],
    ),
    (
        "trailing dash in class",
        "root ::= [a-]",
        &["a", "-"],
        &["b"],
    ),
    (
        "unicode range",
        "root ::= [ぁ-ゟ]+",
        &["ひらがな"],
        &["カ", "a"],
    ),
    (
        "rule refs",
        "root ::= a b\na ::= \"x\"\nb ::= a | \"y\"",
        &["xx", "xy"],
        &["x", "yx"],
    ),
    (
        "right recursion",
        "root ::= \"(\" root \")\" | \"\"",
        &["", "()", "((()))"],
        &["(", "(()", ")("],
    ),
    (
        "multi-line alternation",
        "root ::= \"a\" |\n  \"b\" | # comment\n  (\n \"c\"\n | \"d\" )\n",
        &["a", "b", "c", "d"],
        &["e"],
    ),
    (
        "comments everywhere",
        "# head\nroot ::= \"a\" # tail\n# end",
        &["a"],
        &["#"],
    ),
    (
        "crlf line ends",
        "root ::= a\r\na ::= \"z\"\r\n",
        &["z"],
        &["a"],
    ),
    (
        "nullable rule in repetition",
        "root ::= (x)* \"e\"\nx ::= \"a\"?",
        &["e", "aae"],
        &["b"],
    ),
    (
        "nested nullable",
        "root ::= x x \"!\"\nx ::= \"\" | \"a\"",
        &["!", "a!", "aa!"],
        &["aaa!"],
    ),
];

#[test]
fn constructs_match_like_llama_cpp() {
    for (name, src, good, bad) in CASES {
        let g = compiled(src);
        for s in *good {
            assert!(g.accepts(s.as_bytes()), "{name}: should accept {s:?}");
        }
        for s in *bad {
            assert!(!g.accepts(s.as_bytes()), "{name}: should reject {s:?}");
        }
    }
}

/// (name, grammar, expected error location, text the message must contain)
const ERRORS: &[(&str, &str, (u32, u32), &str)] = &[
    ("missing ::=", "root \"a\"", (1, 6), "'::='"),
    (
        "unclosed literal",
        "root ::= \"abc",
        (1, 14),
        "closing the literal",
    ),
    ("unclosed class", "root ::= [abc", (1, 14), "']'"),
    ("unclosed group", "root ::= (\"a\" ", (1, 15), "')'"),
    ("bad escape", "root ::= \"\\q\"", (1, 11), "unknown escape"),
    ("short hex", "root ::= \"\\x4\"", (1, 11), "2 hex digits"),
    (
        "repetition without item",
        "root ::= * \"a\"",
        (1, 10),
        "an item before",
    ),
    ("bad brace", "root ::= \"a\"{1;2}", (1, 15), "',' or '}'"),
    ("max below min", "root ::= \"a\"{3,1}", (1, 17), "max < min"),
    (
        "junk after rule",
        "root ::= \"a\" )\n",
        (1, 14),
        "end of the line",
    ),
    // As in llama.cpp, outside parentheses a rule ends at the newline: `|` must end the line.
    (
        "alternation continued by a leading |",
        "root ::= \"a\"\n  | \"b\"",
        (2, 3),
        "a rule name",
    ),
    ("second line error", "root ::= a\na ::= [", (2, 8), "']'"),
];

#[test]
fn syntax_errors_name_line_column_and_expectation() {
    for (name, src, (line, column), needle) in ERRORS {
        let err = gbnf::parse(src)
            .err()
            .unwrap_or_else(|| panic!("{name}: parsed"));
        let at = match &err {
            GrammarError::Syntax { at, .. } | GrammarError::BadToken { at, .. } => *at,
            other => panic!("{name}: unexpected error {other}"),
        };
        assert_eq!(
            at,
            Location {
                line: *line,
                column: *column
            },
            "{name}: {err}"
        );
        assert!(err.to_string().contains(needle), "{name}: {err}");
    }
}

#[test]
fn undefined_duplicate_and_missing_root_are_refused() {
    let e = gbnf::parse("root ::= a b\na ::= \"x\"").err();
    assert!(
        matches!(&e, Some(GrammarError::UndefinedRule { name, at }) if name == "b" && *at == Location { line: 1, column: 12 }),
        "{e:?}"
    );
    let e = gbnf::parse("root ::= \"a\"\nroot ::= \"b\"").err();
    assert!(
        matches!(e, Some(GrammarError::DuplicateRule { .. })),
        "{e:?}"
    );
    let e = gbnf::parse("start ::= \"a\"").err();
    assert!(matches!(e, Some(GrammarError::NoRoot { .. })), "{e:?}");
}

#[test]
fn left_recursion_is_refused_with_the_cycle_and_a_rewrite() {
    for src in [
        "root ::= root \"a\" | \"a\"",
        "root ::= x\nx ::= y \"a\"\ny ::= \"\" | x",
        "root ::= e\ne ::= e \"+\" t | t\nt ::= [0-9]",
    ] {
        let g = gbnf::parse(src).unwrap_or_else(|e| panic!("{src}: {e}"));
        let err = CompiledGrammar::new(&g).err();
        let Some(err @ GrammarError::LeftRecursion { .. }) = err else {
            panic!("{src}: {err:?}")
        };
        assert!(err.to_string().contains("right-recursively"), "{err}");
    }
}

#[test]
fn repetition_bounds_are_limited() {
    let e = gbnf::parse("root ::= \"a\"{0,5000}").err();
    assert!(
        matches!(
            e,
            Some(GrammarError::LimitExceeded {
                limit: "max_repetition",
                ..
            })
        ),
        "{e:?}"
    );
    // Nested repetitions multiply: the automaton budget stops them, in bounded time.
    let limits = stampo_grammar::Limits {
        max_states: 10_000,
        ..Default::default()
    };
    let g =
        gbnf::parse("root ::= ((\"a\"{0,100}){0,100}){0,100}").unwrap_or_else(|e| panic!("{e}"));
    let e = CompiledGrammar::with_limits(&g, limits).err();
    assert!(
        matches!(
            e,
            Some(GrammarError::LimitExceeded {
                limit: "max_states",
                ..
            })
        ),
        "{e:?}"
    );
    // A stack of stars (found by the `gbnf` fuzz target): each doubles the inlining estimate,
    // which once overflowed; now it saturates and the grammar compiles.
    let src = format!("root ::= x\nx ::= \"a\" {} \"b\"", "*".repeat(80));
    let g = compiled(&src);
    assert!(g.accepts(b"b") && g.accepts(b"aaab") && !g.accepts(b"ba"));
}

#[test]
fn stacked_quantifiers_are_one_repetition() {
    // Each pair of equal grammars must accept the same inputs; before, fourteen `+` after
    // `[1-8]?` (the `gbnf` fuzz target, in CI) took 16 seconds to compile.
    let pairs = [
        (
            "root ::= [1-8]? ++++++++++++++ \"x\"",
            "root ::= [1-8]* \"x\"",
        ),
        ("root ::= (\"a\"+)+ \"x\"", "root ::= \"a\"+ \"x\""),
        ("root ::= (\"a\"?)+ \"x\"", "root ::= \"a\"* \"x\""),
        ("root ::= (\"a\"+)? \"x\"", "root ::= \"a\"* \"x\""),
        ("root ::= (\"a\"*){2,3} \"x\"", "root ::= \"a\"* \"x\""),
        ("root ::= (\"a\"?)? \"x\"", "root ::= \"a\"? \"x\""),
        ("root ::= (\"a\"{2,}){3,} \"x\"", "root ::= \"a\"{6,} \"x\""),
        (
            "root ::= (\"a\"{2,})* \"x\"",
            "root ::= (\"aa\" \"a\"*)? \"x\"",
        ),
        (
            "root ::= (\"a\"{2,3}){2} \"x\"",
            "root ::= \"a\"{4,6} \"x\"",
        ),
    ];
    let inputs: Vec<String> = (0..9)
        .flat_map(|n| ["a".repeat(n) + "x", "1".repeat(n) + "x", "a".repeat(n)])
        .collect();
    for (stacked, plain) in pairs {
        let (g, h) = (compiled(stacked), compiled(plain));
        for input in &inputs {
            assert_eq!(
                g.accepts(input.as_bytes()),
                h.accepts(input.as_bytes()),
                "{stacked} against {plain} on {input:?}"
            );
        }
    }
    // Loops nested in a long repetition: the removal of empty moves is bounded too.
    let g = gbnf::parse(
        "root ::= ((\"a\"? \"b\"? \"c\"? \"d\"? \"e\"? \"f\"? \"g\"? \"h\"?)+ \"i\"?){1,2000} \"x\"",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let e = CompiledGrammar::new(&g).err();
    assert!(
        matches!(
            e,
            Some(GrammarError::LimitExceeded {
                limit: "max_states",
                ..
            })
        ),
        "{e:?}"
    );
}

#[test]
fn rollback_undoes_steps_and_clears_a_stop() {
    let mut m = Matcher::new(compiled(r#"root ::= "ab" "c"+"#));
    m.consume_bytes(b"a").unwrap();
    m.consume_bytes(b"bc").unwrap();
    assert!(m.is_accepting());
    let err = m.consume_bytes(b"x").err();
    assert_eq!(err, Some(GrammarError::Rejected { offset: 3 }));
    assert_eq!(m.consume_bytes(b"c").err(), Some(GrammarError::Stopped));
    m.rollback(1).unwrap();
    assert!(!m.is_accepting());
    assert_eq!(m.consumed(), 1);
    m.consume_bytes(b"bcc").unwrap();
    assert!(m.is_accepting());
    assert!(matches!(
        m.rollback(3),
        Err(GrammarError::RollbackTooFar { .. })
    ));
}

#[test]
fn forced_and_closing_bytes() {
    let mut m = Matcher::new(compiled(r#"root ::= "{\"name\": \"" [a-z]+ "\"}""#));
    assert_eq!(m.forced_bytes(), b"{\"name\": \"");
    assert_eq!(m.min_bytes_to_close(), Some(13));
    m.consume_bytes(b"{\"name\": \"ab").unwrap();
    assert_eq!(m.forced_bytes(), b"");
    assert_eq!(m.min_bytes_to_close(), Some(2));
    assert_eq!(m.closing_bytes(), Some(b"\"}".to_vec()));
    m.consume_bytes(b"\"}").unwrap();
    assert_eq!(m.min_bytes_to_close(), Some(0));
}
