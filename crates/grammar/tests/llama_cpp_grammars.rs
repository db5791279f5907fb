//! llama.cpp's own grammars (vendored from its `grammars/` folder, MIT): each parses,
//! compiles, and accepts or rejects a corpus exactly as llama.cpp does. The verdicts in
//! `fixtures/gbnf/expected.json` come from llama.cpp itself (see `fixtures/gbnf/generate.py`).
//! The GBNF we print for each grammar is also checked: it parses back (here) to a grammar
//! with the same verdicts, and llama.cpp parses it (recorded by the same script).

#![allow(clippy::panic)] // test helpers fail with the grammar in the message

use std::path::{Path, PathBuf};
use std::sync::Arc;

use stampo_grammar::{CompiledGrammar, gbnf};

const GRAMMARS: &[&str] = &[
    "arithmetic.gbnf",
    "c.gbnf",
    "chess.gbnf",
    "english.gbnf",
    "japanese.gbnf",
    "json.gbnf",
    "json_arr.gbnf",
    "list.gbnf",
];

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

fn read(name: &str) -> String {
    let p = data().join("data/llama.cpp-grammars").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn compile(src: &str, what: &str) -> Arc<CompiledGrammar> {
    let g = gbnf::parse(src).unwrap_or_else(|e| panic!("{what}: {e}"));
    Arc::new(CompiledGrammar::new(&g).unwrap_or_else(|e| panic!("{what}: {e}")))
}

fn expected() -> Option<serde_json::Value> {
    let p = data().join("fixtures/gbnf/expected.json");
    match std::fs::read_to_string(&p) {
        Ok(s) => Some(serde_json::from_str(&s).unwrap_or_else(|e| panic!("{}: {e}", p.display()))),
        Err(_) if !stampo_test_data::required() => {
            println!("SKIPPED: llama.cpp verdicts not found at {}", p.display());
            None
        }
        Err(e) => panic!("{}: {e}", p.display()),
    }
}

#[test]
fn every_llama_cpp_grammar_parses_and_compiles() {
    for name in GRAMMARS {
        compile(&read(name), name);
    }
}

#[test]
fn verdicts_agree_with_llama_cpp() {
    let Some(exp) = expected() else { return };
    let cases = exp["cases"]
        .as_array()
        .unwrap_or_else(|| panic!("no cases"));
    assert!(cases.len() > 50, "corpus too small: {}", cases.len());
    let mut disagreements = Vec::new();
    for name in GRAMMARS {
        let src = read(name);
        let ours = compile(&src, name);
        let printed = compile(
            &gbnf::parse(&src).map(|g| g.to_string()).unwrap_or_default(),
            name,
        );
        for case in cases.iter().filter(|c| c["grammar"] == *name) {
            let input = case["input"].as_str().unwrap_or_default();
            let want = case["accept"].as_bool().unwrap_or_default();
            if ours.accepts(input.as_bytes()) != want {
                disagreements.push(format!("{name} {input:?}: llama.cpp says {want}"));
            }
            if printed.accepts(input.as_bytes()) != want {
                disagreements.push(format!("{name} (printed) {input:?}: llama.cpp says {want}"));
            }
        }
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
}

#[test]
fn llama_cpp_parses_our_exports() {
    let Some(exp) = expected() else { return };
    for name in GRAMMARS {
        assert_eq!(
            exp["exports"][name].as_bool(),
            Some(true),
            "llama.cpp on our export of {name}"
        );
    }
    // Exports of JSON Schema grammars (see `write_exports`).
    for file in SCHEMA_EXPORTS {
        let name = schema_export_name(file);
        assert_eq!(
            exp["exports"][&name].as_bool(),
            Some(true),
            "llama.cpp on our export of {name}"
        );
    }
}

/// MaskBench schemas (one per subset) whose compiled grammars are exported for llama.cpp.
const SCHEMA_EXPORTS: &[&str] = &[
    "BFCL_simple/BFCL_simple_0.json",
    "Github_easy/Github_easy---o10077.json",
    "Github_medium/Github_medium---o1050.json",
    "Glaiveai2K/Glaiveai2K---analyze_health_data_4ad104b4.json",
    "JsonSchemaStore/JsonSchemaStore---0.5.2.json",
    "Kubernetes/Kubernetes---kb_1000_Normalized.json",
    "MCPspec/MCPspec---CallToolRequest.json",
    "Snowplow/Snowplow---sp_104_Normalized.json",
    "WashingtonPost/WashingtonPost---wp_101_Normalized.json",
];

fn schema_export_name(file: &str) -> String {
    format!(
        "schema-{}.gbnf",
        file.replace('/', "-").trim_end_matches(".json")
    )
}

/// Writes our GBNF export of every grammar for `generate.py` to hand to llama.cpp.
#[test]
#[ignore = "writes fixture inputs; run before generate.py"]
fn write_exports() {
    let dir = data().join("fixtures/gbnf/exports");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    for name in GRAMMARS {
        let g = gbnf::parse(&read(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        std::fs::write(dir.join(name), g.to_string()).unwrap_or_else(|e| panic!("{e}"));
    }
    let maskbench = stampo_test_data::shared_data("MaskBench files", "jsonschemabench/maskbench")
        .unwrap_or_else(|| panic!("MaskBench files are needed to write the exports"));
    for file in SCHEMA_EXPORTS {
        let text =
            std::fs::read_to_string(maskbench.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
        let c = stampo_grammar::json_schema::compile(&v["schema"], &Default::default())
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let name = schema_export_name(file);
        std::fs::write(dir.join(name), c.grammar.to_string()).unwrap_or_else(|e| panic!("{e}"));
    }
}
