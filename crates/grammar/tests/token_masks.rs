//! Token masks on SmolLM2's real 49k vocabulary: the mask is exactly the set of tokens the
//! byte-level matcher accepts; special tokens only where named; end-of-sequence only where
//! the document may end; and random walks sampling from the mask always end in documents the
//! grammar accepts.

#![allow(clippy::panic)]

mod common;

use common::{Rng, bits, random_walk};

use std::sync::Arc;

use stampo_grammar::{CompiledGrammar, Matcher, Vocabulary, gbnf};

const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

fn grammar(src: &str) -> Arc<CompiledGrammar> {
    Arc::new(
        CompiledGrammar::new(&gbnf::parse(src).unwrap_or_else(|e| panic!("{e}")))
            .unwrap_or_else(|e| panic!("{e}")),
    )
}

fn llama_grammar(name: &str) -> Arc<CompiledGrammar> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/llama.cpp-grammars")
        .join(name);
    grammar(&std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{e}")))
}

/// The mask, token by token, by brute force over the byte-level matcher.
fn brute_force(m: &mut Matcher, v: &Vocabulary) -> Vec<u32> {
    (0..v.len() as u32)
        .filter(|&id| {
            if v.eos().contains(&id) {
                m.is_accepting()
            } else {
                !v.is_special(id) && m.can_consume(v.token_bytes(id))
            }
        })
        .collect()
}

/// Commits `doc`'s tokens one by one from the matcher's current state, checking every
/// `every`-th mask against brute force on the way, and that the document may end after them.
fn check_masks_along(m: &mut Matcher, v: &Vocabulary, doc: &[u8], every: usize, what: &str) {
    let mut mask = vec![0u32; v.mask_words()];
    let text = String::from_utf8_lossy(doc);
    for (i, id) in common::greedy_tokens(v, doc).into_iter().enumerate() {
        if i % every == 0 {
            m.compute_mask(&mut mask).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                bits(&mask),
                brute_force(m, v),
                "{what}: after {i} tokens of {text}"
            );
        }
        m.commit_token(id)
            .unwrap_or_else(|e| panic!("{what}: {e} at token {i} of {text}"));
    }
    assert!(m.can_end(), "{what}: {text}");
}

#[test]
fn masks_equal_brute_force_along_a_json_document() {
    let Some(v) = common::vocab(SMOLLM2) else {
        return;
    };
    let v = Arc::new(v);
    let doc = br#"{"name": "Ada \u00e9", "tags": [1, -2.5e3, true, null], "o": {}}"#;
    let mut m = Matcher::with_vocabulary(llama_grammar("json.gbnf"), v.clone())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut mask = vec![0u32; v.mask_words()];
    for (i, id) in common::greedy_tokens(&v, doc).into_iter().enumerate() {
        // Every few tokens, the full comparison (brute force is slow in debug builds).
        if i % 5 == 0 {
            m.compute_mask(&mut mask).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(bits(&mask), brute_force(&mut m, &v), "after {i} tokens");
        }
        assert!(
            m.is_token_allowed(id),
            "token {i} ({:?})",
            String::from_utf8_lossy(v.token_bytes(id))
        );
        m.commit_token(id).unwrap_or_else(|e| panic!("{e}"));
    }
    m.compute_mask(&mut mask).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(bits(&mask), brute_force(&mut m, &v));
    assert!(m.can_end());
    let eos = v.eos()[0];
    assert!(bits(&mask).contains(&eos));
    m.commit_token(eos).unwrap_or_else(|e| panic!("{e}"));
    assert!(m.has_ended());
    m.compute_mask(&mut mask).unwrap_or_else(|e| panic!("{e}"));
    assert!(bits(&mask).is_empty());
}

/// A grammar shaped like the JSON Schema front end's output: called `string`, `char` and
/// `integer` rules (pops at every character and digit), bounded whitespace, nested objects.
const SCHEMA_LIKE: &str = r#"root ::= "{" obj-0
obj-0 ::= space "\"area\"" space ":" space inner obj-1
space ::= "" | " " | "\n"{1,2} [ \t]{0,20}
inner ::= "{" space "\"base\"" space ":" space integer space "," space "\"unit\"" space ":" space string space "}"
obj-1 ::= space "," space "\"tags\"" space ":" space "[" space (string (space "," space string)*)? space "]" space "}"
integer ::= "-"? ("0" | [1-9] [0-9]*)
string ::= "\"" char* "\""
char ::= [^\x00-\x1F"\\] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
"#;

#[test]
fn masks_equal_brute_force_on_a_schema_shaped_grammar() {
    let Some(v) = common::vocab(SMOLLM2) else {
        return;
    };
    let v = Arc::new(v);
    let docs: [&[u8]; 2] = [
        br#"{"area": {"base": 1024, "unit": "square metres \"m2\""}, "tags": ["a", "b c", "\u00e9"]}"#,
        b"{\n  \"area\":{\"base\":-7,\"unit\":\"\"},\"tags\":[]}",
    ];
    let mut m =
        Matcher::with_vocabulary(grammar(SCHEMA_LIKE), v.clone()).unwrap_or_else(|e| panic!("{e}"));
    for doc in docs {
        m.reset();
        check_masks_along(&mut m, &v, doc, 3, "schema-shaped grammar");
    }
}

/// Strings whose subtrees are taken whole: plain `char*` loops, a `maxLength`-style counter
/// (`char{0,12}`), an inline class that loops in one rule, and a class that takes only some
/// non-ASCII letters (so multi-byte subtrees must be walked, not taken).
const MULTIBYTE: &str = r#"root ::= "{" space "\"a\":" space string "," space "\"b\":" space short "," space "\"c\":" space inline "," space "\"d\":" space latin space "}"
space ::= "" | " "
string ::= "\"" char* "\""
short ::= "\"" char{0,12} "\""
inline ::= "\"" [^"\\\x00-\x1F]* "\""
latin ::= "\"" [a-z àèéìòù]* "\""
char ::= [^\x00-\x1F"\\] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
"#;

/// On the two large vocabularies (Qwen2.5's byte-level 152k, Gemma 3's SentencePiece 262k),
/// full of CJK words and partial UTF-8 sequences, masks inside strings equal brute force.
#[test]
fn masks_equal_brute_force_on_multibyte_strings_in_large_vocabularies() {
    let docs: [&str; 3] = [
        r#"{"a": "東京は日本の首都です 🚀", "b": "北京市朝阳区", "c": "naïve café – ok", "d": "città è già"}"#,
        r#"{"a":"","b":"","c":"","d":""}"#,
        r#"{"a": "Ελληνικά и русский", "b": "emoji 🎉🎉", "c": "中文 text é", "d": "perché"}"#,
    ];
    for file in [
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "gemma-3-270m-q4_k_m.gguf",
    ] {
        let Some(v) = common::vocab(file) else {
            continue;
        };
        let v = Arc::new(v);
        let mut m = Matcher::with_vocabulary(grammar(MULTIBYTE), v.clone())
            .unwrap_or_else(|e| panic!("{e}"));
        for doc in docs {
            m.reset();
            check_masks_along(&mut m, &v, doc.as_bytes(), 2, file);
        }
    }
}

/// The inside of a free string is walked once per vocabulary and shared by every grammar
/// (`json_string.rs`): two schemas on one vocabulary, strings followed by a comma, a brace,
/// a bracket, whitespace or a pop, right after the quote and after escapes, and a string
/// that cannot be empty (its first character is a called rule), each mask equal to brute
/// force. The second schema's strings use the walk the first one made.
#[test]
fn shared_string_masks_equal_brute_force_across_grammars() {
    let Some(v) = common::vocab(SMOLLM2) else {
        return;
    };
    let v = Arc::new(v);
    let schemas = [
        serde_json::json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "short": {"type": "string", "maxLength": 3},
                "nonempty": {"type": "string", "minLength": 1}
            },
            "required": ["name", "tags", "short", "nonempty"]
        }),
        serde_json::json!({
            "type": "object",
            "additionalProperties": {"anyOf": [{"type": "string"}, {"type": "integer"}]}
        }),
    ];
    let docs: [&[&[u8]]; 2] = [
        &[
            br#"{"name":"a \"quoted\" \u00e9 name","tags":["x","", "y z"],"short":"abc","nonempty":"\"x"}"#,
            br#"{ "name" : "" , "tags" : [ ] , "short" : "\n" ,"nonempty":"\u00e9"}"#,
        ],
        &[
            br#"{"key one":"value","k\"2":12,"":"\\"}"#,
            b"{\"a\" : \"b\"\n}",
        ],
    ];
    // Right after an opening quote (a token boundary there is not certain in a document).
    let prefixes: [&[&[u8]]; 2] = [
        &[
            br#"{"name":""#,
            br#"{"name":"x","tags":[""#,
            br#"{"name":"","tags":[],"short":"ab","nonempty":""#,
        ],
        &[br#"{""#, br#"{"a":""#],
    ];
    let mut mask = vec![0u32; v.mask_words()];
    for ((schema, docs), prefixes) in schemas.iter().zip(docs).zip(prefixes) {
        let what = schema.to_string();
        let c = stampo_grammar::json_schema::compile(schema, &Default::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let g = Arc::new(CompiledGrammar::new(&c.grammar).unwrap_or_else(|e| panic!("{e}")));
        let mut m = Matcher::with_vocabulary(g, v.clone()).unwrap_or_else(|e| panic!("{e}"));
        for doc in docs {
            m.reset();
            check_masks_along(&mut m, &v, doc, 1, &what);
        }
        for prefix in prefixes {
            m.reset();
            m.consume_bytes(prefix)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            m.compute_mask(&mut mask).unwrap_or_else(|e| panic!("{e}"));
            let text = String::from_utf8_lossy(prefix);
            assert_eq!(bits(&mask), brute_force(&mut m, &v), "{what}: after {text}");
        }
    }
    // A string that cannot be empty, whose first character is a rule of its own.
    let src = r#"root ::= "[" ("\"" char+ "\"" ("," "\"" char+ "\"")*)? "]"
char ::= [^\x00-\x1F"\\] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
"#;
    let mut m = Matcher::with_vocabulary(grammar(src), v.clone()).unwrap_or_else(|e| panic!("{e}"));
    for prefix in [&b"[\""[..], b"[\"x\",\""] {
        m.reset();
        m.consume_bytes(prefix).unwrap_or_else(|e| panic!("{e}"));
        m.compute_mask(&mut mask).unwrap_or_else(|e| panic!("{e}"));
        let text = String::from_utf8_lossy(prefix);
        assert_eq!(bits(&mask), brute_force(&mut m, &v), "{src}: after {text}");
    }
}

/// Strings with a length bound take the shared string walk without the tokens that start
/// more characters than the positions left (`json_string.rs`): every mask along documents
/// that fill the bounds, with escapes and multi-byte characters, and right after the opening
/// quote, equal to brute force, on a vocabulary whose longest tokens outrun the bounds.
#[test]
fn bounded_string_masks_equal_brute_force() {
    for file in [SMOLLM2, "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"] {
        let Some(v) = common::vocab(file) else {
            continue;
        };
        let v = Arc::new(v);
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "none": {"type": "string", "maxLength": 0},
                "one": {"type": "string", "maxLength": 1},
                "five": {"type": "string", "maxLength": 5},
                "some": {"type": "string", "minLength": 1, "maxLength": 12},
                "two": {"type": "string", "minLength": 2, "maxLength": 9},
                "long": {"type": "string", "maxLength": 200},
                "list": {"type": "array", "items": {"type": "string", "maxLength": 3}}
            },
            "required": ["none", "one", "five", "some", "two", "long", "list"]
        });
        let c = stampo_grammar::json_schema::compile(&schema, &Default::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let g = Arc::new(CompiledGrammar::new(&c.grammar).unwrap_or_else(|e| panic!("{e}")));
        let mut m = Matcher::with_vocabulary(g, v.clone()).unwrap_or_else(|e| panic!("{e}"));
        let long = "word ".repeat(39) + "abcd\\n";
        let docs = [
            format!(
                r#"{{"none":"","one":"é","five":"ab\"cd","some":"x","two":"東京","long":"{long}","list":["abc","","\u00e9🚀"]}}"#
            ),
            r#"{"none":"","one":"","five":"","some":"            ","two":"ok","long":"","list":[]}"#
                .to_string(),
            format!(
                r#"{{"none":"","one":"\t","five":"hello","some":"hello, world","two":"nine char","long":"{}","list":["   "]}}"#,
                "-".repeat(200)
            ),
        ];
        for doc in &docs {
            m.reset();
            check_masks_along(&mut m, &v, doc.as_bytes(), 1, file);
        }
        let mut mask = vec![0u32; v.mask_words()];
        for prefix in [
            r#"{"none":""#,
            r#"{"none":"","one":""#,
            r#"{"none":"","one":"","five":"abcd"#,
            r#"{"none":"","one":"","five":"","some":""#,
            r#"{"none":"","one":"","five":"","some":"x","two":""#,
            r#"{"none":"","one":"","five":"","some":"x","two":"a"#,
            r#"{"none":"","one":"","five":"","some":"x","two":"ab","long":""#,
        ] {
            m.reset();
            m.consume_bytes(prefix.as_bytes())
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            m.compute_mask(&mut mask).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                bits(&mask),
                brute_force(&mut m, &v),
                "{file}: after {prefix}"
            );
        }
    }
}

/// The same with made-up tokens that hold the closing quote after one, two or three
/// characters (an escape and a multi-byte character among them) and go on past it: a bound
/// of two must refuse exactly those with three before the quote, whether they end there or
/// continue after it.
#[test]
fn bounded_strings_count_the_characters_before_a_token_s_quote() {
    let words: [&[u8]; 20] = [
        b"[\"",
        b"\"",
        b"\",\"",
        b"\"]",
        b",",
        b"]",
        b"a",
        b"ab",
        b"abc",
        b"a\"",
        b"ab\"",
        b"abc\"",
        b"ab\",\"",
        b"abc\",\"",
        b"\\n\xC3\xA9\"]",
        b"\\n\xC3\xA9x\"]",
        b"\xC3\xA9",
        b"\\u00e9\"",
        b"\\u00e9a\"",
        b"x\",",
    ];
    let tokens: Vec<Vec<u8>> = words.iter().map(|w| w.to_vec()).collect();
    let n = tokens.len();
    let v = Arc::new(Vocabulary::new(tokens, vec![false; n], vec![]));
    let schema = serde_json::json!({"type": "array", "items": {"type": "string", "maxLength": 2}});
    let options = stampo_grammar::json_schema::Options {
        whitespace: stampo_grammar::json_schema::Whitespace::Compact,
        ..Default::default()
    };
    let c =
        stampo_grammar::json_schema::compile(&schema, &options).unwrap_or_else(|e| panic!("{e}"));
    let g = Arc::new(CompiledGrammar::new(&c.grammar).unwrap_or_else(|e| panic!("{e}")));
    let mut m = Matcher::with_vocabulary(g, v.clone()).unwrap_or_else(|e| panic!("{e}"));
    let mut mask = vec![0u32; v.mask_words()];
    for prefix in [&b"[\""[..], b"[\"a", b"[\"ab", b"[\"ab\",\"", b"[\"\\n"] {
        m.reset();
        m.consume_bytes(prefix).unwrap_or_else(|e| panic!("{e}"));
        m.compute_mask(&mut mask).unwrap_or_else(|e| panic!("{e}"));
        let text = String::from_utf8_lossy(prefix);
        assert_eq!(bits(&mask), brute_force(&mut m, &v), "after {text}");
    }
    // Right after the opening quote: the two-character ones, not the three-character ones.
    m.reset();
    m.consume_bytes(b"[\"").unwrap_or_else(|e| panic!("{e}"));
    assert!(m.can_consume(b"ab\",\"") && !m.can_consume(b"abc\",\""));
}

/// An object that also allows other properties: its keys walk a trie of the declared names
/// or leave it for any string, and where most plain characters lead into that free string
/// the mask below them comes from the shared string walk (`string_after_plain_bytes` in
/// `tokens.rs`). Keys that follow a declared name part way, leave it, carry escapes and
/// multi-byte characters, and every mask along them, equal to brute force. (An escape
/// cannot leave the names: the grammar takes one only once a key has left them.)
#[test]
fn masks_of_keys_beside_declared_names_equal_brute_force() {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "names": {"type": "integer"},
            "description": {"type": "string"},
            "type": {"type": "string"}
        }
    });
    let docs: [&[u8]; 4] = [
        br#"{"name":"a","names":1,"description":"d","type":"t","nam":"b","nome":"c","typo":2}"#,
        br#"{"type":"t","descriptio":"","nox\"":"x","nx\u00e4me":3,"types":[1]}"#,
        "{\"näme\":1,\"東京\":\"x\",\"type \":null,\"\":0,\"ty\":{\"name\":\"y\"}}".as_bytes(),
        br#"{"n":"b","x y z":"e","descriptionx":1,"namespace":"a"}"#,
    ];
    let prefixes: [&[u8]; 5] = [
        br#"{""#,
        br#"{"n"#,
        br#"{"nam"#,
        br#"{"name"#,
        br#"{"name":"a",""#,
    ];
    for file in [
        SMOLLM2,
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "gemma-3-270m-q4_k_m.gguf",
    ] {
        let Some(v) = common::vocab(file) else {
            continue;
        };
        let v = Arc::new(v);
        let c = stampo_grammar::json_schema::compile(&schema, &Default::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let g = Arc::new(CompiledGrammar::new(&c.grammar).unwrap_or_else(|e| panic!("{e}")));
        let mut m = Matcher::with_vocabulary(g, v.clone()).unwrap_or_else(|e| panic!("{e}"));
        for doc in docs {
            m.reset();
            check_masks_along(&mut m, &v, doc, 1, file);
        }
        let mut mask = vec![0u32; v.mask_words()];
        for prefix in prefixes {
            m.reset();
            m.consume_bytes(prefix)
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            m.compute_mask(&mut mask).unwrap_or_else(|e| panic!("{e}"));
            let text = String::from_utf8_lossy(prefix);
            assert_eq!(bits(&mask), brute_force(&mut m, &v), "{file}: after {text}");
        }
    }
}

/// The same with made-up tokens that start along a declared name and then take an escape,
/// which the key's grammar refuses there (`n\n` right after `{"`) but the shared walk of a
/// free string accepts: the mask must not take them from it.
#[test]
fn keys_refuse_what_the_shared_string_walk_would_take_below_a_name() {
    let mut tokens: Vec<Vec<u8>> = [
        &b"{\""[..],
        b"\"",
        b"\":",
        b"1",
        b"}",
        b"n\\n",
        b"na\\t",
        b"x\\n",
        b"name",
    ]
    .iter()
    .map(|t| t.to_vec())
    .collect();
    tokens.extend((b'a'..=b'z').chain(b'A'..=b'Z').map(|c| vec![c]));
    let n = tokens.len();
    let v = Arc::new(Vocabulary::new(tokens, vec![false; n], vec![]));
    let schema = serde_json::json!({"type": "object", "properties": {"name": {"type": "integer"}}});
    let c = stampo_grammar::json_schema::compile(&schema, &Default::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let g = Arc::new(CompiledGrammar::new(&c.grammar).unwrap_or_else(|e| panic!("{e}")));
    let mut m = Matcher::with_vocabulary(g, v.clone()).unwrap_or_else(|e| panic!("{e}"));
    m.consume_bytes(b"{\"").unwrap_or_else(|e| panic!("{e}"));
    let mut mask = vec![0u32; v.mask_words()];
    m.compute_mask(&mut mask).unwrap_or_else(|e| panic!("{e}"));
    let allowed = bits(&mask);
    assert_eq!(allowed, brute_force(&mut m, &v));
    assert!(!allowed.contains(&5) && !allowed.contains(&6) && allowed.contains(&7));
}

/// A made-up vocabulary with large subtrees under `x`: well-formed multi-byte tails (taken
/// whole inside a string) beside ill-formed ones (a lead byte followed by ASCII, a stray
/// continuation byte, a cut-off four-byte lead, an overlong form), which the string must
/// refuse token by token.
#[test]
fn ill_formed_utf8_below_a_string_state_is_not_taken_whole() {
    let mut tokens: Vec<Vec<u8>> = vec![b"\"".to_vec(), b"x".to_vec()];
    for c in b'a'..=b'z' {
        tokens.push(vec![b'x', c]);
        tokens.push(vec![b'x', c, c]);
    }
    for tail in [
        &b"\xC3\xA9"[..],
        b"\xE4\xB8",
        b"\xE4\xB8\xAD",
        b"\xF0\x9F\x9A\x80",
        b"\xC3A",
        b"\x80",
        b"\xF0\x9Fz",
        b"\xC0\xAF",
        b"\xED\xA0\x80",
    ] {
        tokens.push([b"x", tail].concat());
    }
    let n = tokens.len();
    let v = Arc::new(Vocabulary::new(tokens, vec![false; n], vec![]));
    let g = grammar("root ::= \"\\\"\" [^\"]* \"\\\"\"\n");
    let mut m = Matcher::with_vocabulary(g, v.clone()).unwrap_or_else(|e| panic!("{e}"));
    m.commit_token(0).unwrap_or_else(|e| panic!("{e}"));
    let mut mask = vec![0u32; v.mask_words()];
    m.compute_mask(&mut mask).unwrap_or_else(|e| panic!("{e}"));
    let allowed = bits(&mask);
    assert_eq!(allowed, brute_force(&mut m, &v));
    assert_eq!(
        allowed.len(),
        n - 5,
        "the five ill-formed tokens are refused"
    );
}

#[test]
fn special_tokens_only_where_named() {
    let Some(v) = common::vocab(SMOLLM2) else {
        return;
    };
    let v = Arc::new(v);
    let special: Vec<u32> = (0..v.len() as u32)
        .filter(|&i| v.is_special(i) && !v.eos().contains(&i))
        .collect();
    assert!(!special.is_empty());
    let s = special[0];
    let text = String::from_utf8_lossy(v.token_bytes(s)).to_string();
    let g = grammar(&format!("root ::= \"a\" {text} \"b\" | \"c\" <[{s}]>"));
    let mut m = Matcher::with_vocabulary(g, v.clone()).unwrap_or_else(|e| panic!("{e}"));
    let mut mask = vec![0u32; v.mask_words()];
    m.compute_mask(&mut mask).unwrap_or_else(|e| panic!("{e}"));
    assert!(!bits(&mask).contains(&s));
    m.consume_bytes(b"a").unwrap_or_else(|e| panic!("{e}"));
    m.compute_mask(&mut mask).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(bits(&mask), vec![s]);
    m.commit_token(s).unwrap_or_else(|e| panic!("{e}"));
    m.consume_bytes(b"b").unwrap_or_else(|e| panic!("{e}"));
    assert!(m.can_end());
}

#[test]
fn random_walks_over_the_real_vocabulary_yield_accepted_documents() {
    let Some(v) = common::vocab(SMOLLM2) else {
        return;
    };
    let v = Arc::new(v);
    for name in [
        "json.gbnf",
        "arithmetic.gbnf",
        "chess.gbnf",
        "list.gbnf",
        "json_arr.gbnf",
        "c.gbnf",
    ] {
        let g = llama_grammar(name);
        let mut m =
            Matcher::with_vocabulary(g.clone(), v.clone()).unwrap_or_else(|e| panic!("{e}"));
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for walk in 0..20 {
            let doc = random_walk(&mut m, &v, &mut rng, 200, 400)
                .unwrap_or_else(|e| panic!("{name} walk {walk}: {e}"));
            assert!(
                g.accepts(&doc),
                "{name} walk {walk}: {:?}",
                String::from_utf8_lossy(&doc)
            );
        }
    }
}

/// Prints mask timings along random walks (a measurement, not a check):
/// `cargo test -p stampo-grammar --release --test token_masks -- --ignored --nocapture`.
#[test]
#[ignore = "measurement"]
fn print_mask_timings() {
    let Some(v) = common::vocab(SMOLLM2) else {
        return;
    };
    let v = Arc::new(v);
    println!("vocab {} tokens, {} trie nodes", v.len(), v.trie_nodes());
    let mut mask = vec![0u32; v.mask_words()];
    for name in ["json.gbnf", "c.gbnf", "english.gbnf"] {
        let t0 = std::time::Instant::now();
        let g = llama_grammar(name);
        let compile = t0.elapsed();
        let mut m = Matcher::with_vocabulary(g, v.clone()).unwrap_or_else(|e| panic!("{e}"));
        let mut rng = Rng(42);
        let mut times = Vec::new();
        let mut sample = Vec::new();
        for walk in 0..10 {
            m.reset();
            for _ in 0..100 {
                let t = std::time::Instant::now();
                m.compute_mask(&mut mask).unwrap_or_else(|e| panic!("{e}"));
                times.push(t.elapsed().as_secs_f64() * 1e6);
                let allowed = bits(&mask);
                let id = allowed[(rng.next() % allowed.len() as u64) as usize];
                if v.eos().contains(&id) {
                    break;
                }
                m.commit_token(id).unwrap_or_else(|e| panic!("{e}"));
                if walk == 0 {
                    sample.extend_from_slice(v.token_bytes(id));
                }
            }
        }
        times.sort_by(f64::total_cmp);
        let q = |p: f64| times[((times.len() - 1) as f64 * p) as usize];
        println!(
            "{name}: compile {:.2} ms, {} masks, p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs; sample {:?}",
            compile.as_secs_f64() * 1e3,
            times.len(),
            q(0.5),
            q(0.99),
            q(1.0),
            String::from_utf8_lossy(&sample[..sample.len().min(120)])
        );
    }
}

/// MaskBench schemas compiled by the JSON Schema front end: at every third token of each
/// valid instance the mask equals brute force, and the instance is accepted.
#[test]
fn masks_equal_brute_force_on_maskbench_schemas() {
    let Some(v) = common::vocab(SMOLLM2) else {
        return;
    };
    let v = Arc::new(v);
    let Some(root) = stampo_test_data::shared_data("MaskBench files", "jsonschemabench/maskbench")
    else {
        return;
    };
    let files = [
        "BFCL_simple/BFCL_simple_0.json",
        "Github_medium/Github_medium---o1050.json",
        "Kubernetes/Kubernetes---kb_1000_Normalized.json",
        "Snowplow/Snowplow---sp_104_Normalized.json",
        "Glaiveai2K/Glaiveai2K---analyze_health_data_4ad104b4.json",
    ];
    for file in files {
        let text =
            std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let case: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
        let c = stampo_grammar::json_schema::compile(&case["schema"], &Default::default())
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let g =
            Arc::new(CompiledGrammar::new(&c.grammar).unwrap_or_else(|e| panic!("{file}: {e}")));
        let mut m = Matcher::with_vocabulary(g, v.clone()).unwrap_or_else(|e| panic!("{e}"));
        for test in case["tests"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| t["valid"] == true)
        {
            let doc = serde_json::to_string(&test["data"]).unwrap_or_default();
            m.reset();
            check_masks_along(&mut m, &v, doc.as_bytes(), 3, file);
        }
    }
}
