//! Every plain schema of the JSONSchemaBench sample in `../shared/data` (2,689 real-world
//! schemas) compiles to a grammar or is refused with an error: never a panic or a hang.
//! (Building the matcher's automaton for all of them takes minutes; the MaskBench test
//! covers that on its own schemas.) Counts per subset are compared with
//! `tests/data/conformance/jsonschemabench-compile.tsv` (fewer compiled schemas fail the
//! test; `STAMPO_BLESS=1` records an improvement).

#![allow(clippy::panic, clippy::unwrap_used)]

mod conformance;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use conformance::print_compile_times;
use stampo_grammar::json_schema::{Options, compile_str};
use stampo_test_data::shared_data;

#[test]
fn every_benchmark_schema_compiles_or_is_refused_with_an_error() {
    let Some(root) = shared_data("JSONSchemaBench schemas", "jsonschemabench") else {
        return;
    };
    let mut rows: BTreeMap<String, [u32; 2]> = BTreeMap::new();
    let mut times: Vec<Duration> = Vec::new();
    let mut subsets: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    subsets.sort();
    for subset in subsets
        .into_iter()
        .filter(|p| p.is_dir() && !p.ends_with("maskbench"))
    {
        let row = rows
            .entry(subset.file_name().unwrap().to_string_lossy().into_owned())
            .or_default();
        for file in std::fs::read_dir(&subset).unwrap() {
            let text = std::fs::read_to_string(file.unwrap().path()).unwrap();
            row[0] += 1;
            let start = Instant::now();
            let compiled = compile_str(&text, &Options::default());
            times.push(start.elapsed());
            row[1] += u32::from(compiled.is_ok());
        }
    }
    print_compile_times("JSONSchemaBench plain schemas", times);
    let mut text =
        String::from("# JSONSchemaBench plain schemas compiled by the schema compiler\n");
    text.push_str("name\tschemas\tcompiled\n");
    let mut total = [0u32; 2];
    for (name, r) in &rows {
        writeln!(text, "{name}\t{}\t{}", r[0], r[1]).unwrap();
        (0..2).for_each(|i| total[i] += r[i]);
    }
    writeln!(text, "TOTAL\t{}\t{}", total[0], total[1]).unwrap();
    println!("{text}");
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/conformance/jsonschemabench-compile.tsv");
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let bless = std::env::var("STAMPO_BLESS").as_deref() == Ok("1");
    if bless || old.is_empty() {
        std::fs::write(&path, &text).unwrap();
        assert!(
            bless,
            "no committed table at {}; wrote it: review and commit it",
            path.display()
        );
        return;
    }
    let mut failures = Vec::new();
    for line in old
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("name\t"))
    {
        let cols: Vec<&str> = line.split('\t').collect();
        let old_vals: Vec<u32> = cols[1..].iter().map(|v| v.parse().unwrap()).collect();
        let new_vals = if cols[0] == "TOTAL" {
            Some(&total)
        } else {
            rows.get(cols[0])
        };
        match new_vals {
            Some(n) if n[1] >= old_vals[1] => {}
            Some(n) => failures.push(format!("{}: compiled {} -> {}", cols[0], old_vals[1], n[1])),
            None => failures.push(format!("{}: row missing", cols[0])),
        }
    }
    assert!(
        failures.is_empty(),
        "regressed against {}:\n{}",
        path.display(),
        failures.join("\n")
    );
}
