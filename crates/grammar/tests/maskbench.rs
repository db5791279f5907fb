//! MaskBench (JSONSchemaBench schemas with valid and invalid instances): every schema is
//! compiled, every valid instance must be accepted and every invalid one rejected. Counts
//! per subset are compared with `tests/data/conformance/maskbench.tsv`.
//!
//! The data is not vendored (test use only): it is read from `../shared/data`.

#![allow(clippy::panic, clippy::unwrap_used)]

mod conformance;

use std::collections::BTreeMap;
use std::path::Path;

use conformance::{Case, Row, check_table, print_compile_times, run_case};
use serde_json::Value;
use stampo_test_data::shared_data;

#[test]
fn maskbench_conformance_does_not_regress() {
    let Some(root) = shared_data("MaskBench files", "jsonschemabench/maskbench") else {
        return;
    };
    let verbose = std::env::var("STAMPO_VERBOSE").as_deref() == Ok("1");
    let mut rows: BTreeMap<String, Row> = BTreeMap::new();
    let mut times = Vec::new();
    let mut subsets: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    subsets.sort();
    for subset in subsets {
        let name = subset.file_name().unwrap().to_string_lossy().into_owned();
        let mut files: Vec<_> = std::fs::read_dir(&subset)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        let row = rows.entry(name.clone()).or_default();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let doc: Value = serde_json::from_str(&text).unwrap();
            let tests: Vec<(&Value, bool)> = doc["tests"]
                .as_array()
                .map(|ts| {
                    ts.iter()
                        .map(|t| (&t["data"], t["valid"].as_bool().unwrap_or(false)))
                        .collect()
                })
                .unwrap_or_default();
            let case = Case {
                schema: &doc["schema"],
                tests,
            };
            let label = file.file_name().unwrap().to_string_lossy().into_owned();
            let (r, notes, took) = run_case(&case, &label);
            times.push(took);
            if verbose {
                notes.iter().for_each(|n| println!("{n}"));
            }
            row.add(&r);
        }
    }
    let table = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/conformance/maskbench.tsv");
    print_compile_times("MaskBench sample", times);
    check_table(&table, "MaskBench sample conformance (stampo)", &rows);

    // llguidance on the same files, judged the same way (fixture written by
    // tests/fixtures/maskbench/llguidance_reference.py): stampo must pass at least as many
    // schemas, and accept no invalid instance where it claims to enforce every keyword.
    let reference = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/conformance/maskbench-llguidance.tsv");
    let reference = std::fs::read_to_string(reference).unwrap();
    let total = reference
        .lines()
        .find(|l| l.starts_with("TOTAL\t"))
        .unwrap();
    let llg: Vec<u32> = total
        .split('\t')
        .skip(1)
        .map(|v| v.parse().unwrap())
        .collect();
    let mut ours = Row::default();
    rows.values().for_each(|r| ours.add(r));
    println!(
        "passing: stampo {} / llguidance {} of {} schemas; compiled: {} / {}",
        ours.passing, llg[3], ours.schemas, ours.compiled, llg[1]
    );
    assert!(
        ours.passing >= llg[3],
        "fewer MaskBench passes than llguidance"
    );
    assert_eq!(
        ours.invalid_accepted_sound, 0,
        "invalid instances accepted by grammars reported sound"
    );
}
