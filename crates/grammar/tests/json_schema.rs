//! The JSON Schema compiler, keyword by keyword: what each schema accepts and rejects
//! (exact bytes, compact and with whitespace), what the report says, and the errors for
//! bad input, each with its JSON pointer.

#![allow(clippy::panic, clippy::unwrap_used)]

use serde_json::json;
use std::sync::Arc;

use stampo_grammar::json_schema::{
    AdditionalProperties, Options, SchemaError, Whitespace, compile, compile_str,
};
use stampo_grammar::report::Status;
use stampo_grammar::{CompiledGrammar, accepts};

/// (name, schema, accepted documents, rejected documents)
type Case = (
    &'static str,
    serde_json::Value,
    &'static [&'static str],
    &'static [&'static str],
);

fn cases() -> Vec<Case> {
    vec![
        (
            "type null",
            json!({"type": "null"}),
            &["null"],
            &["0", "\"null\"", " null"],
        ),
        (
            "type list",
            json!({"type": ["string", "integer"]}),
            &["\"a\"", "-12"],
            &["1.5", "true"],
        ),
        (
            "integer is written without fraction",
            json!({"type": "integer"}),
            &["0", "-7", "120"],
            &["01", "1.0", "1e3", "+1"],
        ),
        (
            "number",
            json!({"type": "number"}),
            &["0", "-1.25", "3e-7", "1E+2"],
            &["1.", ".5", "+1", "--1"],
        ),
        (
            "minimum and maximum on integers",
            json!({"type": "integer", "minimum": -15, "maximum": 123}),
            &["-15", "-9", "0", "99", "100", "123"],
            &["-16", "-100", "124", "999", "1000"],
        ),
        (
            "exclusive bounds on integers",
            json!({"type": "integer", "exclusiveMinimum": 9, "exclusiveMaximum": 20}),
            &["10", "19"],
            &["9", "20"],
        ),
        (
            "decimal bounds are exact",
            json!({"type": "number", "minimum": 0.1, "maximum": 2.25}),
            &["0.1", "0.10", "0.5", "1", "2", "2.25", "2.2499"],
            &["0.09", "0.0999", "2.26", "2.250001", "3", "0"],
        ),
        (
            "exclusive decimal bounds",
            json!({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}),
            &["0.5", "0.0001", "0.999"],
            &["0", "0.0", "1", "1.0", "-0.5"],
        ),
        (
            "negative decimal range",
            json!({"type": "number", "minimum": -2.5, "maximum": -0.5}),
            &["-2.5", "-1", "-0.5", "-0.75"],
            &["-2.51", "-0.4", "0", "-3"],
        ),
        (
            "draft 4 boolean exclusiveMinimum",
            json!({"type": "integer", "minimum": 5, "exclusiveMinimum": true}),
            &["6"],
            &["5"],
        ),
        (
            "multipleOf an integer",
            json!({"type": "integer", "multipleOf": 7}),
            &["0", "7", "14", "-21", "700"],
            &["1", "8", "-22", "701"],
        ),
        (
            "multipleOf a decimal step",
            json!({"type": "number", "multipleOf": 0.01, "minimum": 0}),
            &["0", "1.5", "2.25"],
            &["2.255", "-1"],
        ),
        (
            "multipleOf with bounds is enumerated",
            json!({"type": "integer", "multipleOf": 5, "minimum": 3, "maximum": 21}),
            &["5", "10", "20"],
            &["0", "3", "25", "21"],
        ),
        (
            "string lengths count characters",
            json!({"type": "string", "minLength": 2, "maxLength": 3}),
            &["\"ab\"", "\"abc\"", "\"é€\"", "\"a\\n\""],
            &["\"a\"", "\"abcd\""],
        ),
        (
            "pattern is unanchored",
            json!({"type": "string", "pattern": "b+"}),
            &["\"abbc\"", "\"b\""],
            &["\"ac\"", "\"\""],
        ),
        (
            "anchored pattern",
            json!({"type": "string", "pattern": "^[a-z]{2}\\d$"}),
            &["\"ab1\""],
            &["\"ab12\"", "\"xab1\"", "\"AB1\""],
        ),
        (
            "quotes in patterns are escaped",
            json!({"pattern": "^\"$"}),
            &["\"\\\"\""],
            &["\"\"\""],
        ),
        (
            "format date",
            json!({"format": "date"}),
            &["\"2024-02-29\"", "\"2023-12-31\""],
            &["\"2023-02-29\"", "\"2023-04-31\"", "\"2023-13-01\""],
        ),
        (
            "format uuid",
            json!({"format": "uuid"}),
            &["\"123e4567-e89b-12d3-a456-426614174000\""],
            &["\"123e4567\""],
        ),
        (
            "format ipv4",
            json!({"format": "ipv4"}),
            &["\"192.168.0.1\""],
            &["\"256.1.1.1\"", "\"01.1.1.1\""],
        ),
        (
            "enum of any JSON value",
            json!({"enum": [1, "a", null, [1, {"b": true}], {"c": 2.5}]}),
            &[
                "1",
                "1.0",
                "\"a\"",
                "null",
                "[1,{\"b\":true}]",
                "{\"c\":2.5}",
                "{ \"c\": 2.50 }",
            ],
            &["2", "\"b\"", "[1]", "{\"c\":2}"],
        ),
        ("const", json!({"const": "x"}), &["\"x\""], &["\"y\""]),
        (
            "enum filtered by type",
            json!({"type": "string", "enum": ["a", 1]}),
            &["\"a\""],
            &["1"],
        ),
        (
            "properties in declared order",
            json!({"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}}, "required": ["b", "a"]}),
            &["{\"b\":1,\"a\":\"x\"}", "{ \"b\": 1, \"a\": \"x\" }"],
            &["{\"a\":\"x\",\"b\":1}", "{\"b\":1}"],
        ),
        (
            "optional properties may be skipped",
            json!({"type": "object", "properties": {"a": {}, "b": {}, "c": {}}, "additionalProperties": false}),
            &["{}", "{\"b\":1}", "{\"a\":1,\"c\":2}"],
            &["{\"c\":1,\"a\":2}", "{\"d\":1}", "{\"a\":1,\"a\":1}"],
        ),
        (
            "additional properties allowed by default",
            json!({"type": "object", "properties": {"a": {"type": "integer"}}}),
            &["{\"a\":1,\"z\":[true]}", "{\"ab\":\"x\"}"],
            &["{\"a\":\"x\"}", "{\"z\":1,\"a\":\"x\"}"],
        ),
        (
            "additionalProperties schema, never a declared name",
            json!({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}}),
            &["{\"a\":1,\"b\":\"x\"}", "{\"aa\":\"x\"}", "{\"\":\"x\"}"],
            &["{\"b\":1}", "{\"a\":1,\"a\":\"x\"}"],
        ),
        (
            "patternProperties",
            json!({"type": "object", "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": false}),
            &["{\"x-a\":1,\"x-b\":2}"],
            &["{\"x-a\":\"s\"}", "{\"y\":1}"],
        ),
        (
            // ECMA-262's `\w` and `\d` are ASCII: an enum value is checked against a pattern
            // with the meaning the pattern's grammar has.
            "enum values checked against an ECMA-262 pattern",
            json!({"type": "string", "enum": ["a", "é", "7", "١"], "pattern": "^[\\w\\d]$"}),
            &["\"a\"", "\"7\""],
            &["\"é\"", "\"١\""],
        ),
        (
            // "é" is not a match of `^\w+$`, so it keeps its own schema alone.
            "declared names checked against an ECMA-262 patternProperties key",
            json!({"type": "object", "properties": {"é": {"type": "integer"}, "ok": {"type": "integer"}},
                   "patternProperties": {"^\\w+$": {"minimum": 5}}}),
            &["{\"é\":1}", "{\"ok\":5}"],
            &["{\"ok\":1}", "{\"é\":\"x\"}"],
        ),
        (
            // A declared name the pattern matches is its own member, which no key of the
            // pattern's repeats.
            "patternProperties keys spell no declared name",
            json!({"type": "object", "properties": {"basic": {"type": "integer"}},
                   "patternProperties": {"^[a-z]+$": {"type": "integer"}}, "additionalProperties": false}),
            &[
                "{\"basic\":1,\"other\":2}",
                "{\"basics\":2}",
                "{\"basic\":1}",
            ],
            &[
                "{\"basic\":1,\"basic\":2}",
                "{\"basic\":1,\"other\":2,\"basic\":3}",
            ],
        ),
        (
            // A key that does not start with `@@` (chrome's `messages.json`): the pattern's
            // automaton, and the declared name checked against it.
            "patternProperties key with a leading negative look-ahead",
            json!({"type": "object", "properties": {"@@x": {"type": "integer"}},
                   "patternProperties": {"^(?!@@)[\\w@]+$": {"type": "string"}}, "additionalProperties": false}),
            &[
                "{\"a@\":\"s\"}",
                "{\"@@x\":1}",
                "{\"@a\":\"s\",\"b\":\"t\"}",
            ],
            &["{\"@@y\":\"s\"}", "{\"a\":1}", "{\"a-b\":\"s\"}"],
        ),
        (
            "pattern with a leading look-ahead",
            json!({"type": "string", "pattern": "^(?!pattern$).*$"}),
            &["\"patterns\"", "\"\"", "\"x\""],
            &["\"pattern\""],
        ),
        (
            "min and max properties",
            json!({"type": "object", "properties": {"a": {}, "b": {}}, "minProperties": 1, "maxProperties": 2}),
            &["{\"a\":1}", "{\"b\":1,\"c\":2}", "{\"a\":1,\"b\":2}"],
            &["{}", "{\"a\":1,\"b\":2,\"c\":3}"],
        ),
        (
            // An additional key under `propertyNames` spells no declared name.
            "propertyNames keys beside declared names",
            json!({"type": "object", "properties": {"ab": {"type": "integer"}},
                   "propertyNames": {"pattern": "^[a-z]+$"}}),
            &["{\"ab\":1,\"cd\":\"x\"}", "{\"abc\":\"x\"}", "{\"ab\":1}"],
            &["{\"ab\":1,\"ab\":\"x\"}", "{\"cd\":1,\"ab\":2}"],
        ),
        (
            "propertyNames",
            json!({"type": "object", "propertyNames": {"maxLength": 2}}),
            &["{\"ab\":1}", "{}"],
            &["{\"abc\":1}"],
        ),
        // A pattern beside a format, another pattern, a length bound or `not`: one
        // automaton of them all.
        (
            "pattern and maxLength of any shape",
            json!({"type": "string", "pattern": "^[a-z]+(-[a-z]+)*$", "maxLength": 7}),
            &[r#""ab-cd""#, r#""abcdefg""#, r#""a-b-c-d""#],
            &[r#""abcdefgh""#, r#""ab-cdefg""#, r#""-ab""#, r#""ab-""#],
        ),
        (
            "unanchored pattern within lengths",
            json!({"type": "string", "pattern": "x", "minLength": 3, "maxLength": 4}),
            &[r#""axb""#, r#""xxxx""#, r#""\"x\n""#],
            &[r#""ax""#, r#""abcd""#, r#""axbcd""#],
        ),
        (
            "two patterns",
            json!({"type": "string", "allOf": [{"pattern": "^a"}, {"pattern": "b$"}]}),
            &[r#""ab""#, r#""axxb""#],
            &[r#""ba""#, r#""a""#, r#""xab""#],
        ),
        (
            "format and pattern",
            json!({"type": "string", "format": "date", "pattern": "^2024"}),
            &[r#""2024-01-31""#],
            &[r#""2023-01-31""#, r#""2024-13-01""#, r#""2024""#],
        ),
        (
            "pattern beside excluded values",
            json!({"type": "string", "pattern": "^[a-z]+$", "not": {"enum": ["admin", "root"]}}),
            &[r#""adm""#, r#""admins""#, r#""roots""#],
            &[r#""admin""#, r#""root""#, r#""Admin""#],
        ),
        (
            "lengths beside excluded values",
            json!({"type": "string", "maxLength": 3, "not": {"const": "abc"}}),
            &[r#""""#, r#""abd""#, r#""ab""#],
            &[r#""abc""#, r#""abcd""#],
        ),
        (
            "dependentRequired",
            json!({"type": "object", "properties": {"a": {}, "b": {}}, "dependentRequired": {"a": ["b"]}, "additionalProperties": false}),
            &["{}", "{\"b\":1}", "{\"a\":1,\"b\":2}"],
            &["{\"a\":1}"],
        ),
        (
            "items and counts",
            json!({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}),
            &["[1]", "[1,2,3]", "[ 1 , 2 ]"],
            &["[]", "[1,2,3,4]", "[\"a\"]"],
        ),
        (
            "prefixItems",
            json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false}),
            &["[]", "[\"a\"]", "[\"a\",1]"],
            &["[1]", "[\"a\",1,2]"],
        ),
        (
            "array-form items with additionalItems",
            json!({"type": "array", "items": [{"const": 1}], "additionalItems": {"type": "string"}}),
            &["[1]", "[1,\"x\",\"y\"]"],
            &["[2]", "[1,2]"],
        ),
        (
            "contains",
            json!({"type": "array", "items": {"type": "integer"}, "contains": {"const": 5}, "minContains": 2}),
            &["[5,5]", "[1,5,2,5,3]"],
            &["[5]", "[]", "[1,2]"],
        ),
        (
            "anyOf",
            json!({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]}),
            &["1", "\"a\""],
            &["\"ab\"", "true"],
        ),
        (
            "oneOf with disjoint types",
            json!({"oneOf": [{"type": "integer"}, {"type": "boolean"}]}),
            &["1", "true"],
            &["\"x\""],
        ),
        (
            "allOf merges",
            json!({"allOf": [{"type": "integer", "minimum": 0}, {"maximum": 5}]}),
            &["0", "5"],
            &["-1", "6"],
        ),
        (
            "siblings beside $ref apply too",
            json!({"$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n", "minimum": 3}),
            &["3"],
            &["2", "\"a\""],
        ),
        (
            "recursive $ref",
            json!({"type": "object", "properties": {"child": {"$ref": "#"}}, "additionalProperties": false}),
            &["{}", "{\"child\":{\"child\":{}}}"],
            &["{\"child\":1}"],
        ),
        (
            "definitions (draft 4-7)",
            json!({"definitions": {"s": {"type": "string"}}, "type": "array", "items": {"$ref": "#/definitions/s"}}),
            &["[\"a\"]"],
            &["[1]"],
        ),
        (
            "not of a type",
            json!({"not": {"type": ["string", "null"]}}),
            &["1", "[]"],
            &["\"a\"", "null"],
        ),
        (
            "whitespace is bounded",
            json!({"type": "array"}),
            &["[1,\n  2]"],
            &["[1,                              2]"],
        ),
    ]
}

#[test]
fn each_schema_accepts_exactly_its_instances() {
    let mut failures = Vec::new();
    for (name, schema, good, bad) in cases() {
        let compiled = match compile(&schema, &Options::default()) {
            Ok(c) => c,
            Err(e) => {
                failures.push(format!("{name}: did not compile: {e}"));
                continue;
            }
        };
        for doc in good {
            if !accepts(&compiled.grammar, doc.as_bytes()) {
                failures.push(format!("{name}: should accept {doc}\n{}", compiled.grammar));
            }
        }
        for doc in bad {
            if accepts(&compiled.grammar, doc.as_bytes()) {
                failures.push(format!("{name}: should reject {doc}\n{}", compiled.grammar));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A string's pattern, format, lengths and excluded values are enforced together, and so is
/// a `patternProperties` key less the declared names it matches: the report warns of none.
#[test]
fn a_strings_constraints_together_are_all_enforced() {
    for schema in [
        json!({"type": "string", "pattern": "^[a-z]+(-[a-z]+)*$", "minLength": 2, "maxLength": 63}),
        json!({"type": "string", "allOf": [{"pattern": "^a"}, {"pattern": "b$"}]}),
        json!({"type": "string", "pattern": "^[a-z]+$", "not": {"enum": ["admin"]}}),
        json!({"type": "string", "format": "date", "pattern": "^2024"}),
        json!({"type": "object", "properties": {"basic": {"type": "integer"}},
               "patternProperties": {"^[a-z]+$": {"type": "integer"}}}),
        json!({"type": "object", "properties": {"ab": {"type": "integer"}},
               "propertyNames": {"pattern": "^[a-z]+$"}}),
    ] {
        let c = compile(&schema, &Options::default()).unwrap();
        let warned: Vec<String> = c.report.warnings().map(|w| w.keyword).collect();
        assert!(warned.is_empty(), "{schema}: {warned:?}");
    }
    // Where the automaton would be too large, the first pattern is enforced and the rest
    // are warned of, named.
    let schema = json!({"type": "string", "pattern": "x", "maxLength": 1500});
    let c = compile(&schema, &Options::default()).unwrap();
    let warned: Vec<String> = c.report.warnings().map(|w| w.keyword).collect();
    assert_eq!(warned, ["maxLength"]);
    // So too where a pattern's own automaton would be too large (its repetitions written
    // out): the first pattern is then compiled on its own.
    let schema = json!({"type": "string", "allOf": [
        {"pattern": "^[a-z]{0,1500}[0-9]{0,1500}(x{0,1500}y){0,20}$"}, {"pattern": "^a"}]});
    let c = compile(&schema, &Options::default()).unwrap();
    let warned: Vec<String> = c.report.warnings().map(|w| w.keyword).collect();
    assert_eq!(warned, ["pattern"]);
}

/// A `maxLength` beyond the repetition limit (2,000) is enforced up to 65,536, counting
/// an escape as one character like any other length.
#[test]
fn long_string_bounds_are_enforced() {
    let schema = json!({"type": "string", "minLength": 3, "maxLength": 4096});
    let c = compile(&schema, &Options::default()).unwrap();
    assert!(c.report.is_sound(), "{}", c.report);
    let g = Arc::new(CompiledGrammar::new(&c.grammar).unwrap());
    let string = |n: usize, unit: &str| format!("\"{}\"", unit.repeat(n));
    for n in [3, 4, 1999, 2000, 2001, 3999, 4000, 4001, 4095, 4096] {
        assert!(g.accepts(string(n, "a").as_bytes()), "{n}");
        assert!(g.accepts(string(n, "\\n").as_bytes()), "{n} escapes");
    }
    for n in [0, 2, 4097, 6000] {
        assert!(!g.accepts(string(n, "a").as_bytes()), "{n}");
    }
    // Beyond 65,536 the bound is a warning.
    let schema = json!({"type": "string", "maxLength": 70000});
    let c = compile(&schema, &Options::default()).unwrap();
    let warned: Vec<String> = c.report.warnings().map(|w| w.keyword).collect();
    assert_eq!(warned, ["maxLength"]);
}

#[test]
fn the_report_names_every_keyword_at_its_pointer() {
    let schema = json!({
        "title": "t",
        "type": "object",
        "properties": {"a": {"type": "array", "uniqueItems": true}, "b": {"minlength": 3}},
    });
    let c = compile(&schema, &Options::default()).unwrap();
    let status = |ptr: &str, kw: &str| {
        c.report
            .entries()
            .find(|e| e.pointer == ptr && e.keyword == kw)
            .map(|e| e.status)
    };
    assert_eq!(status("", "title"), Some(Status::Annotation));
    assert_eq!(status("", "type"), Some(Status::Enforced));
    assert_eq!(status("/properties/a", "type"), Some(Status::Enforced));
    assert!(matches!(
        status("/properties/a", "uniqueItems"),
        Some(Status::Warning(_))
    ));
    assert!(matches!(
        status("/properties/b", "minlength"),
        Some(Status::Warning(_))
    ));
    assert!(!c.report.is_sound());
    let printed = c.report.to_string();
    assert!(
        printed.contains("warning   /properties/b minlength: unknown keyword"),
        "{printed}"
    );
    assert!(
        !printed.contains("title"),
        "annotations are quiet: {printed}"
    );
}

#[test]
fn keywords_no_instance_reaches_are_reported_as_unreached() {
    let schema =
        json!({"$defs": {"unused": {"type": "string", "minLength": 2}}, "type": "integer"});
    let c = compile(&schema, &Options::default()).unwrap();
    let status = |ptr: &str, kw: &str| {
        c.report
            .entries()
            .find(|e| e.pointer == ptr && e.keyword == kw)
            .map(|e| e.status)
    };
    assert_eq!(
        status("/$defs/unused", "minLength"),
        Some(Status::Unreached)
    );
    assert_eq!(status("", "type"), Some(Status::Enforced));
}

#[test]
fn strict_turns_warnings_into_refusals() {
    let schema = json!({"type": "array", "uniqueItems": true});
    assert!(compile(&schema, &Options::default()).is_ok());
    assert_eq!(strict_refusal(&schema), ("".into(), "uniqueItems".into()));
}

/// The pointer and keyword `strict` refuses `schema` at.
fn strict_refusal(schema: &serde_json::Value) -> (String, String) {
    let strict = Options {
        strict: true,
        ..Options::default()
    };
    match compile(schema, &strict) {
        Err(SchemaError::Refused {
            pointer, keyword, ..
        }) => (pointer, keyword),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_pointer_missing_from_its_own_resource_is_read_from_the_root_with_a_warning() {
    // As schemastore's base-04.json: subschemas with an `id` that still point into the
    // document's definitions.
    let schema = json!({
        "$id": "https://example.com/base.json",
        "definitions": {
            "path": {"id": "path", "type": "string", "minLength": 1},
            "nullable-path": {"id": "nullable-path", "oneOf": [{"$ref": "#/definitions/path"}, {"type": "null"}]},
        },
        "$ref": "#/definitions/nullable-path",
    });
    let c = compile(&schema, &Options::default()).unwrap();
    for doc in ["\"a\"", "null"] {
        assert!(accepts(&c.grammar, doc.as_bytes()), "{doc}\n{}", c.grammar);
    }
    for doc in ["\"\"", "1"] {
        assert!(!accepts(&c.grammar, doc.as_bytes()), "{doc}\n{}", c.grammar);
    }
    let warned = c
        .report
        .warnings()
        .find(|e| e.keyword == "$ref")
        .expect("a warning for the $ref");
    assert_eq!(warned.pointer, "/definitions/nullable-path/oneOf/0");
    let Status::Warning(why) = &warned.status else {
        panic!("{warned:?}")
    };
    assert!(
        why.contains("https://example.com/nullable-path") && why.contains("root"),
        "{why}"
    );
    assert_eq!(
        strict_refusal(&schema),
        ("/definitions/nullable-path/oneOf/0".into(), "$ref".into())
    );
    // Where the root lacks it too, it is still an error.
    let mut missing = schema.clone();
    missing["definitions"]["nullable-path"]["oneOf"][0]["$ref"] = json!("#/definitions/nowhere");
    assert!(matches!(
        compile(&missing, &Options::default()),
        Err(SchemaError::RefNotFound { .. })
    ));
}

#[test]
fn bad_input_is_a_located_error() {
    let err = |text: &str| compile_str(text, &Options::default()).unwrap_err();
    assert!(matches!(
        err("{\"type\": "),
        SchemaError::NotJson { line: 1, .. }
    ));
    assert!(matches!(err("42"), SchemaError::NotASchema { .. }));
    match err(r#"{"properties": {"a": {"type": "strung"}}}"#) {
        SchemaError::NotASchema { pointer, .. } => assert_eq!(pointer, "/properties/a/type"),
        e => panic!("{e}"),
    }
    match err(r##"{"items": {"$ref": "#/$defs/missing"}}"##) {
        SchemaError::RefNotFound { pointer, target } => {
            assert_eq!(
                (pointer.as_str(), target.as_str()),
                ("/items", "#/$defs/missing")
            );
        }
        e => panic!("{e}"),
    }
    // Every instance would need infinite depth.
    assert!(matches!(
        err(r##"{"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]}"##),
        SchemaError::Unsatisfiable { .. }
    ));
    match err(r#"{"allOf": [{"type": "string"}, {"type": "integer"}]}"#) {
        SchemaError::Unsatisfiable { .. } => {}
        e => panic!("{e}"),
    }
    // A pattern and a length that no string meets together.
    match err(r#"{"type": "string", "pattern": "^a{5}$", "maxLength": 3}"#) {
        SchemaError::Unsatisfiable { .. } => {}
        e => panic!("{e}"),
    }
    match err(r#"{"properties": {"p": {"pattern": "a(?=b)"}}}"#) {
        SchemaError::Regex { pointer, .. } => assert_eq!(pointer, "/properties/p"),
        e => panic!("{e}"),
    }
    // A `patternProperties` key is a pattern too, read as the grammar reads one.
    let e = err(r#"{"properties": {"a": {}}, "patternProperties": {"a(?!b)": {}}}"#);
    match &e {
        SchemaError::Regex { pointer, .. } => assert_eq!(pointer, "/patternProperties/a(?!b)"),
        e => panic!("{e}"),
    }
    assert!(e.to_string().contains("look-around assertion"), "{e}");
    assert!(matches!(
        err(r#"{"type": "string", "minLength": 100000}"#),
        SchemaError::LimitExceeded { .. }
    ));
    // Deep nesting is a budget error, not a stack overflow.
    let mut deep = String::from("{}");
    for _ in 0..120 {
        deep = format!(r#"{{"type": "array", "items": {deep}}}"#);
    }
    let shallow = Options {
        limits: stampo_grammar::json_schema::SchemaLimits {
            max_depth: 50,
            ..Default::default()
        },
        ..Options::default()
    };
    assert!(matches!(
        compile_str(&deep, &shallow),
        Err(SchemaError::LimitExceeded { .. })
    ));
    assert!(compile_str(&deep, &Options::default()).is_ok());
    let e = err(r#"{"properties": {"a": {"minimum": "x"}}}"#);
    assert!(e.to_string().starts_with("#/properties/a/minimum"), "{e}");
}

#[test]
fn whitespace_policies() {
    let schema =
        json!({"type": "object", "properties": {"a": {"type": "array"}}, "required": ["a"]});
    let with = |ws: Whitespace| {
        compile(
            &schema,
            &Options {
                whitespace: ws,
                ..Options::default()
            },
        )
        .unwrap()
        .grammar
    };
    let compact = with(Whitespace::Compact);
    assert!(accepts(&compact, b"{\"a\":[1,2]}"));
    assert!(!accepts(&compact, b"{\"a\": [1,2]}"));
    let indented = with(Whitespace::Indented { max_indent: 8 });
    assert!(accepts(&indented, b"{\n  \"a\": [\n    1,\n    2\n  ]\n}"));
    assert!(accepts(&indented, b"{\n  \"a\": []\n}"));
    assert!(!accepts(&indented, b"{\"a\":[1,2]}"));
    let flexible = with(Whitespace::Flexible);
    assert!(accepts(&flexible, b"{\"a\":[1,2]}"));
    assert!(accepts(&flexible, b"{\n\t\"a\" : [ 1 , 2 ]\n}"));
    assert!(
        !accepts(&flexible, b" {\"a\":[]}"),
        "no whitespace before the document"
    );
}

#[test]
fn forbidding_additional_properties_by_option() {
    let schema = json!({"type": "object", "properties": {"a": {}}});
    let opts = Options {
        additional_properties: AdditionalProperties::Forbid,
        ..Options::default()
    };
    let g = compile(&schema, &opts).unwrap().grammar;
    assert!(accepts(&g, b"{\"a\":1}"));
    assert!(!accepts(&g, b"{\"b\":1}"));
}

#[test]
fn the_grammar_prints_as_gbnf_the_parser_reads_back() {
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 12}, "s": {"pattern": "^\"[a-z]\\\\$"}}});
    let g = compile(&schema, &Options::default()).unwrap().grammar;
    let text = g.to_string();
    let back = stampo_grammar::gbnf::parse(&text).unwrap();
    for doc in ["{\"n\":12}", "{\"s\":\"\\\"x\\\\\"}", "{}"] {
        assert!(accepts(&back, doc.as_bytes()), "{doc}\n{text}");
    }
    assert!(!accepts(&back, b"{\"n\":13}"));
    // llama.cpp starts from `root`, whatever the schema.
    for schema in [
        json!(true),
        json!({}),
        json!({"$ref": "#/$defs/a", "$defs": {"a": {"type": "null"}}}),
    ] {
        let g = compile(&schema, &Options::default()).unwrap().grammar;
        assert_eq!(g.rule(g.root.unwrap()).name, "root", "{schema}");
    }
}
