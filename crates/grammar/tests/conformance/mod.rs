//! Conformance harness shared by the JSON Schema Test Suite and MaskBench tests.
//!
//! An instance is serialised compactly in two member orders: as written in the file, and
//! with members ordered by where their names first appear under `properties` in the
//! schema document (the compiler generates declared order). A valid instance passes when
//! the grammar accepts one of them; an invalid one when the grammar rejects both.
//!
//! Results are written as a table, one row per file or subset, and compared with the
//! committed table: a row that gets worse fails the test; `STAMPO_BLESS=1` rewrites the
//! committed table (for improvements).

#![allow(dead_code, clippy::panic, clippy::unwrap_used)]

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use stampo_grammar::CompiledGrammar;
use stampo_grammar::json_schema::{self, Options};

/// Counts for one row of a table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Row {
    /// Schemas seen, compiled, and compiled with every keyword enforced (no warning).
    pub schemas: u32,
    pub compiled: u32,
    pub sound: u32,
    /// Schemas compiled whose every instance was judged right.
    pub passing: u32,
    pub valid_accepted: u32,
    /// Valid instances rejected (validation errors).
    pub valid_rejected: u32,
    pub invalid_rejected: u32,
    /// Invalid instances accepted by a grammar whose report says every keyword is
    /// enforced: bugs.
    pub invalid_accepted_sound: u32,
    /// Invalid instances accepted where the report warned the grammar may accept them.
    pub invalid_accepted_warned: u32,
}

const COLUMNS: [&str; 9] = [
    "schemas",
    "compiled",
    "sound",
    "passing",
    "valid_accepted",
    "valid_rejected",
    "invalid_rejected",
    "invalid_accepted_sound",
    "invalid_accepted_warned",
];

impl Row {
    fn values(&self) -> [u32; 9] {
        [
            self.schemas,
            self.compiled,
            self.sound,
            self.passing,
            self.valid_accepted,
            self.valid_rejected,
            self.invalid_rejected,
            self.invalid_accepted_sound,
            self.invalid_accepted_warned,
        ]
    }

    fn from_values(v: &[u32]) -> Self {
        Row {
            schemas: v[0],
            compiled: v[1],
            sound: v[2],
            passing: v[3],
            valid_accepted: v[4],
            valid_rejected: v[5],
            invalid_rejected: v[6],
            invalid_accepted_sound: v[7],
            invalid_accepted_warned: v[8],
        }
    }

    pub fn add(&mut self, o: &Row) {
        let sum: Vec<u32> = self
            .values()
            .iter()
            .zip(o.values())
            .map(|(a, b)| a + b)
            .collect();
        *self = Row::from_values(&sum);
    }

    /// Regressions against a previous row: fewer passes or more errors.
    fn regressions(&self, old: &Row) -> Vec<String> {
        let mut out = Vec::new();
        let better_higher = [
            ("compiled", self.compiled, old.compiled),
            ("passing", self.passing, old.passing),
            ("valid_accepted", self.valid_accepted, old.valid_accepted),
            (
                "invalid_rejected",
                self.invalid_rejected,
                old.invalid_rejected,
            ),
        ];
        for (name, new, old) in better_higher {
            if new < old {
                out.push(format!("{name} {old} -> {new}"));
            }
        }
        let better_lower = [
            ("valid_rejected", self.valid_rejected, old.valid_rejected),
            (
                "invalid_accepted_sound",
                self.invalid_accepted_sound,
                old.invalid_accepted_sound,
            ),
        ];
        for (name, new, old) in better_lower {
            if new > old {
                out.push(format!("{name} {old} -> {new}"));
            }
        }
        out
    }
}

/// One schema's instances: `(instance, valid)`.
pub struct Case<'a> {
    pub schema: &'a Value,
    pub tests: Vec<(&'a Value, bool)>,
}

/// Compiles the schema and judges every instance; returns the row, for failures a line
/// each (for `STAMPO_VERBOSE=1`), and how long the schema compiler took.
pub fn run_case(case: &Case, label: &str) -> (Row, Vec<String>, Duration) {
    let mut row = Row {
        schemas: 1,
        ..Row::default()
    };
    let mut notes = Vec::new();
    let start = Instant::now();
    let compiled = json_schema::compile(case.schema, &Options::default());
    let took = start.elapsed();
    let compiled = match compiled {
        Ok(c) => c,
        Err(e) => {
            notes.push(format!("{label}: refused: {e}"));
            return (row, notes, took);
        }
    };
    let sound = compiled.report.is_sound();
    row.compiled = 1;
    row.sound = u32::from(sound);
    let g = match CompiledGrammar::new(&compiled.grammar) {
        Ok(g) => Arc::new(g),
        Err(e) => {
            row.compiled = 0;
            row.sound = 0;
            notes.push(format!("{label}: matcher refused the grammar: {e}"));
            return (row, notes, took);
        }
    };
    let ranks = property_ranks(case.schema);
    let mut all_right = true;
    for (data, valid) in &case.tests {
        let forms = [
            serde_json::to_string(data).unwrap(),
            serialise_ranked(data, &ranks),
        ];
        let accepted = forms.iter().any(|f| g.accepts(f.as_bytes()));
        match (valid, accepted) {
            (true, true) => row.valid_accepted += 1,
            (true, false) => {
                row.valid_rejected += 1;
                all_right = false;
                notes.push(format!("{label}: valid instance rejected: {}", forms[1]));
            }
            (false, false) => row.invalid_rejected += 1,
            (false, true) => {
                all_right = false;
                if sound {
                    row.invalid_accepted_sound += 1;
                } else {
                    row.invalid_accepted_warned += 1;
                }
                notes.push(format!(
                    "{label}: invalid instance accepted (sound={sound}): {}",
                    forms[1]
                ));
            }
        }
    }
    row.passing = u32::from(all_right);
    (row, notes, took)
}

/// Prints the median and maximum of compile times (information, not asserted: the machine
/// is shared).
pub fn print_compile_times(what: &str, mut times: Vec<Duration>) {
    if times.is_empty() {
        return;
    }
    times.sort();
    let total: Duration = times.iter().sum();
    println!(
        "{what}: {} schemas compiled in {:.1} ms total; per schema p50 {} us, p99 {} us, max {} us",
        times.len(),
        total.as_secs_f64() * 1e3,
        times[times.len() / 2].as_micros(),
        times[times.len() * 99 / 100].as_micros(),
        times[times.len() - 1].as_micros()
    );
}

/// Ranks of property names by first appearance under `properties` in the document.
fn property_ranks(schema: &Value) -> HashMap<String, usize> {
    fn walk(v: &Value, out: &mut HashMap<String, usize>) {
        match v {
            Value::Object(map) => {
                for (k, child) in map {
                    if k == "properties"
                        && let Value::Object(props) = child
                    {
                        for name in props.keys() {
                            let n = out.len();
                            out.entry(name.clone()).or_insert(n);
                        }
                    }
                    if !matches!(k.as_str(), "enum" | "const" | "examples" | "default") {
                        walk(child, out);
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = HashMap::new();
    walk(schema, &mut out);
    out
}

fn serialise_ranked(v: &Value, ranks: &HashMap<String, usize>) -> String {
    fn order(v: &Value, ranks: &HashMap<String, usize>) -> Value {
        match v {
            Value::Object(map) => {
                let mut members: Vec<(&String, &Value)> = map.iter().collect();
                members.sort_by_key(|(k, _)| ranks.get(*k).copied().unwrap_or(usize::MAX));
                Value::Object(
                    members
                        .into_iter()
                        .map(|(k, x)| (k.clone(), order(x, ranks)))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(|x| order(x, ranks)).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_string(&order(v, ranks)).unwrap()
}

/// Writes the table and compares it with the committed one at `path`.
pub fn check_table(path: &Path, title: &str, rows: &BTreeMap<String, Row>) {
    let mut total = Row::default();
    rows.values().for_each(|r| total.add(r));
    let mut text = String::new();
    writeln!(text, "# {title}").unwrap();
    writeln!(
        text,
        "# Written by the test; STAMPO_BLESS=1 rewrites it. Columns: see tests/conformance/mod.rs."
    )
    .unwrap();
    writeln!(text, "name\t{}", COLUMNS.join("\t")).unwrap();
    for (name, r) in rows
        .iter()
        .chain(std::iter::once((&"TOTAL".to_string(), &total)))
    {
        let vals: Vec<String> = r.values().iter().map(u32::to_string).collect();
        writeln!(text, "{name}\t{}", vals.join("\t")).unwrap();
    }
    println!("{text}");
    let bless = std::env::var("STAMPO_BLESS").as_deref() == Ok("1");
    let old = std::fs::read_to_string(path).ok();
    if bless || old.is_none() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, &text).unwrap();
        if old.is_none() && !bless {
            panic!(
                "no committed table at {}; wrote it: review and commit it",
                path.display()
            );
        }
        return;
    }
    let old = old.unwrap_or_default();
    let mut failures = Vec::new();
    for line in old
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("name\t"))
    {
        let mut cols = line.split('\t');
        let name = cols.next().unwrap_or_default().to_owned();
        let vals: Vec<u32> = cols.filter_map(|c| c.parse().ok()).collect();
        if vals.len() != COLUMNS.len() {
            continue;
        }
        let old_row = Row::from_values(&vals);
        let new_row = if name == "TOTAL" {
            Some(&total)
        } else {
            rows.get(&name)
        };
        match new_row {
            Some(new_row) => {
                for r in new_row.regressions(&old_row) {
                    failures.push(format!("{name}: {r}"));
                }
            }
            None => failures.push(format!("{name}: row missing")),
        }
    }
    if !failures.is_empty() {
        panic!(
            "conformance regressed against {}:\n{}",
            path.display(),
            failures.join("\n")
        );
    }
    if text != old {
        println!(
            "note: results differ from {} (improved); STAMPO_BLESS=1 to update",
            path.display()
        );
    }
}
