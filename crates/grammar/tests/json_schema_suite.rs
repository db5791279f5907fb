//! The JSON Schema Test Suite (draft 2020-12, vendored in `tests/data/`): every valid
//! instance accepted, every invalid one rejected. Counts per keyword file are compared with
//! `tests/data/conformance/json-schema-test-suite.tsv`; the committed table says where the
//! compiler refuses a schema (remote `$ref`, `$dynamicRef`…) or narrows it.
//!
//! Invalid instances accepted while the report claims every keyword enforced
//! (`invalid_accepted_sound`) are bugs; the table pins their number so it can only fall.

#![allow(clippy::panic, clippy::unwrap_used)]

mod conformance;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use conformance::{Case, Row, check_table, print_compile_times, run_case};
use serde_json::Value;

fn files(dir: &Path, prefix: &str, out: &mut Vec<(String, PathBuf)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            files(&p, &format!("{prefix}{name}/"), out);
        } else if name.ends_with(".json") {
            out.push((format!("{prefix}{name}"), p));
        }
    }
}

#[test]
fn json_schema_test_suite_does_not_regress() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/json-schema-test-suite/draft2020-12");
    let verbose = std::env::var("STAMPO_VERBOSE").as_deref() == Ok("1");
    let mut list = Vec::new();
    files(&root, "", &mut list);
    assert!(list.len() > 40, "the vendored suite is incomplete");
    let mut rows: BTreeMap<String, Row> = BTreeMap::new();
    let mut times = Vec::new();
    for (name, path) in list {
        let groups: Vec<Value> =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let row = rows.entry(name.clone()).or_default();
        for (gi, group) in groups.iter().enumerate() {
            let tests = group["tests"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| (&t["data"], t["valid"].as_bool().unwrap()))
                .collect();
            let case = Case {
                schema: &group["schema"],
                tests,
            };
            let label = format!(
                "{name}#{gi} ({})",
                group["description"].as_str().unwrap_or("")
            );
            let (r, notes, took) = run_case(&case, &label);
            times.push(took);
            if verbose {
                notes.iter().for_each(|n| println!("{n}"));
            }
            row.add(&r);
        }
    }
    let table = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/conformance/json-schema-test-suite.tsv");
    print_compile_times("JSON Schema Test Suite", times);
    check_table(
        &table,
        "JSON Schema Test Suite draft 2020-12 conformance (stampo)",
        &rows,
    );
}
