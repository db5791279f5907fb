//! Random walks under JSON Schemas over SmolLM2's real vocabulary: whatever a sampler picks
//! from the masks, the document it ends with is valid by the `jsonschema` crate, a validator
//! independent of stampo's compiler (formats asserted). The schemas: the demo page's examples
//! (`web/examples/`) and a sample of the MaskBench files whose keyword report says every
//! keyword is enforced.

#![allow(clippy::panic, clippy::unwrap_used)]

mod common;
mod conformance;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{Rng, random_walk};
use serde_json::Value;
use stampo_grammar::json_schema::{self, Options};
use stampo_grammar::{CompiledGrammar, Matcher, Vocabulary};

const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// What the validator could say of a schema's walks.
#[derive(Debug, PartialEq)]
enum Judged {
    /// Every document valid.
    Valid,
    /// The validator cannot compile the schema: nothing to judge by.
    NoValidator,
    /// A document holds a number beyond an f64's range (`47e586`): valid JSON, and valid
    /// for an unbounded `number`, but serde_json (and so the validator) cannot read it.
    BeyondF64,
}

/// Walks `schema` (compiled by stampo as `compiled`) `walks` times; `Err` names the first
/// document the validator refuses.
fn walk_schema(
    schema: &Value,
    compiled: &json_schema::Compiled,
    v: &Arc<Vocabulary>,
    walks: u32,
    seed: u64,
) -> Result<Judged, String> {
    let Ok(validator) = jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
    else {
        return Ok(Judged::NoValidator);
    };
    let g = Arc::new(CompiledGrammar::new(&compiled.grammar).map_err(|e| e.to_string())?);
    let mut m = Matcher::with_vocabulary(g, v.clone()).map_err(|e| e.to_string())?;
    let mut rng = Rng(seed);
    for walk in 0..walks {
        let doc =
            random_walk(&mut m, v, &mut rng, 60, 5000).map_err(|e| format!("walk {walk}: {e}"))?;
        let text = String::from_utf8(doc).map_err(|e| format!("walk {walk}: not UTF-8: {e}"))?;
        let value: Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(e) if e.to_string().starts_with("number out of range") => {
                return Ok(Judged::BeyondF64);
            }
            Err(e) => return Err(format!("walk {walk}: not JSON ({e}): {text}")),
        };
        if let Some(e) = validator.iter_errors(&value).next() {
            return Err(format!(
                "walk {walk}: invalid at {}: {e}\n{text}",
                e.instance_path()
            ));
        }
    }
    Ok(Judged::Valid)
}

#[test]
fn the_demos_examples_yield_valid_documents() {
    let Some(v) = common::vocab(SMOLLM2) else {
        return;
    };
    let v = Arc::new(v);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web/examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 5, "the demo's examples in {}", dir.display());
    for file in files {
        let schema: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let compiled = json_schema::compile(&schema, &Options::default())
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let judged = walk_schema(&schema, &compiled, &v, 20, 0x5EED)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert_eq!(judged, Judged::Valid, "{}", file.display());
    }
}

#[test]
fn sound_maskbench_schemas_yield_valid_documents() {
    let Some(v) = common::vocab(SMOLLM2) else {
        return;
    };
    let Some(root) = stampo_test_data::shared_data("MaskBench files", "jsonschemabench/maskbench")
    else {
        return;
    };
    let v = Arc::new(v);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .flat_map(|subset| std::fs::read_dir(subset.unwrap().path()).unwrap())
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let (mut walked, mut unjudged, mut beyond, mut failures) = (0, 0, 0, Vec::new());
    for file in &files {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        let schema = &doc["schema"];
        // Only where stampo claims to enforce every keyword.
        let compiled = match json_schema::compile(schema, &Options::default()) {
            Ok(c) if c.report.is_sound() => c,
            _ => continue,
        };
        let label = file
            .strip_prefix(&root)
            .unwrap_or(file)
            .display()
            .to_string();
        match walk_schema(schema, &compiled, &v, 3, 0xC0FFEE) {
            Ok(Judged::Valid) => walked += 1,
            Ok(Judged::NoValidator) => unjudged += 1,
            Ok(Judged::BeyondF64) => beyond += 1,
            Err(e) => failures.push(format!("{label}: {e}")),
        }
    }
    println!(
        "MaskBench walks: {walked} schemas valid on every walk, {} failed, {beyond} with a \
         number beyond f64 (unjudged), {unjudged} the validator could not compile",
        failures.len()
    );
    assert!(walked >= 1000, "only {walked} schemas walked");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
