//! `stampo grammar`: the schema's GBNF on stdout and its keyword report on stderr; GBNF
//! files checked with their errors located.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::PathBuf;
use std::process::{Command, Output};

fn write(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stampo-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn stampo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stampo"))
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_schema_prints_gbnf_and_the_report() {
    let schema = write(
        "s.json",
        r#"{"type": "object", "properties": {"n": {"type": "integer", "maximum": 9}, "l": {"type": "array", "uniqueItems": true}}}"#,
    );
    let out = stampo(&["grammar", schema.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let gbnf = text(&out.stdout);
    assert!(gbnf.starts_with("root ::= "), "{gbnf}");
    // The printed grammar is GBNF the parser reads back.
    stampo_grammar::gbnf::parse(&gbnf).unwrap();
    let report = text(&out.stderr);
    assert!(
        report.contains("enforced  /properties/n maximum"),
        "{report}"
    );
    assert!(report.contains("1 keyword(s) not enforced"), "{report}");
}

#[test]
fn strict_refuses_with_the_pointer() {
    let schema = write(
        "strict.json",
        r#"{"properties": {"a": {"type": "array", "uniqueItems": true}}}"#,
    );
    let out = stampo(&["grammar", "--strict", schema.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("#/properties/a: keyword 'uniqueItems' refused"),
        "{err}"
    );
}

#[test]
fn gbnf_files_are_checked() {
    let good = write("ok.gbnf", "root ::= \"a\" [0-9]+\n");
    let out = stampo(&["grammar", "--gbnf", good.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("ok, 1 rules"));
    let bad = write("bad.gbnf", "root ::= \"a\" undefined-rule\n");
    let out = stampo(&["grammar", "--gbnf", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("undefined-rule"),
        "{}",
        text(&out.stderr)
    );
}
