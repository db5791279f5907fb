//! The calls JS makes. Each is a plain Rust function returning JSON text (tested natively),
//! and a `#[wasm_bindgen]` wrapper that turns its error into a JS `Error` with a `code`.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use stampo_gguf::Gguf;
use stampo_grammar::json_schema::{self, Options};
use stampo_grammar::report::Status;
use stampo_grammar::{CompiledGrammar, Matcher, bench, gbnf};
use wasm_bindgen::prelude::*;

use crate::error::{ErrorCode, js_error};

type ApiResult = Result<String, (ErrorCode, String)>;

#[wasm_bindgen]
extern "C" {
    /// `performance.now()`, in a page and in a worker alike.
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    pub(crate) fn performance_now() -> f64;
}

fn to_js(result: ApiResult) -> Result<String, JsValue> {
    result.map_err(|(code, message)| js_error(code, &message))
}

/// Compiles a JSON Schema (given as JSON text). Returns
/// `{"gbnf": "...", "report": [{"pointer", "keyword", "status", "reason"?}]}`.
/// With `strict`, a keyword the grammar cannot enforce is an error instead of a warning.
pub fn compile_schema_json(schema: &str, strict: bool) -> ApiResult {
    let options = Options {
        strict,
        ..Options::default()
    };
    let compiled = json_schema::compile_str(schema, &options)
        .map_err(|e| (ErrorCode::SchemaRefused, e.to_string()))?;
    let report: Vec<Value> = compiled
        .report
        .entries()
        // Keywords no instance reaches have no effect on the grammar; the report omits them.
        .filter(|entry| entry.status != Status::Unreached)
        .map(|entry| {
            let (status, reason) = match &entry.status {
                Status::Enforced => ("enforced", None),
                Status::Narrowed(why) => ("narrowed", Some(why)),
                Status::Annotation => ("annotation", None),
                Status::Warning(why) => ("ignored", Some(why)),
                Status::Refused(why) => ("refused", Some(why)),
                Status::Unreached => ("unreached", None),
            };
            let mut item = json!({
                "pointer": entry.pointer,
                "keyword": entry.keyword,
                "status": status,
            });
            if let Some(reason) = reason {
                item["reason"] = json!(reason);
            }
            item
        })
        .collect();
    Ok(json!({ "gbnf": compiled.grammar.to_string(), "report": report }).to_string())
}

#[wasm_bindgen(js_name = compileSchema)]
pub fn compile_schema(schema: &str, strict: bool) -> Result<String, JsValue> {
    to_js(compile_schema_json(schema, strict))
}

fn compile_gbnf(text: &str) -> Result<Arc<CompiledGrammar>, (ErrorCode, String)> {
    let grammar = gbnf::parse(text).map_err(|e| (ErrorCode::GrammarInvalid, e.to_string()))?;
    let compiled =
        CompiledGrammar::new(&grammar).map_err(|e| (ErrorCode::GrammarInvalid, e.to_string()))?;
    Ok(Arc::new(compiled))
}

/// Checks a GBNF grammar. Returns `{"rules": N, "gbnf": "<normalised text>"}`.
pub fn check_gbnf_json(text: &str) -> ApiResult {
    let grammar = gbnf::parse(text).map_err(|e| (ErrorCode::GrammarInvalid, e.to_string()))?;
    CompiledGrammar::new(&grammar).map_err(|e| (ErrorCode::GrammarInvalid, e.to_string()))?;
    Ok(json!({ "rules": grammar.rules.len(), "gbnf": grammar.to_string() }).to_string())
}

#[wasm_bindgen(js_name = checkGbnf)]
pub fn check_gbnf(text: &str) -> Result<String, JsValue> {
    to_js(check_gbnf_json(text))
}

/// Whether `input` is a complete document of the GBNF grammar.
pub fn gbnf_accepts(grammar: &str, input: &str) -> Result<bool, (ErrorCode, String)> {
    let mut matcher = Matcher::new(compile_gbnf(grammar)?);
    Ok(matcher.consume_bytes(input.as_bytes()).is_ok() && matcher.is_accepting())
}

#[wasm_bindgen(js_name = grammarAccepts)]
pub fn grammar_accepts(grammar: &str, input: &str) -> Result<bool, JsValue> {
    gbnf_accepts(grammar, input).map_err(|(code, message)| js_error(code, &message))
}

/// A model file's summary from a prefix of its bytes (the header, metadata and tensor
/// table must be inside it): version, architecture, sizes, tensor types.
pub fn summarize_gguf(bytes: &[u8]) -> ApiResult {
    let bad = |e: stampo_gguf::GgufError| (ErrorCode::GgufInvalid, e.to_string());
    let gguf = Gguf::parse_header(bytes).map_err(bad)?;
    let meta = gguf.metadata();
    let architecture = gguf.architecture().map_err(bad)?;
    let arch_u32 = |key: &str| meta.arch_optional::<u32>(key).ok().flatten();
    let vocab_size = meta
        .get_array("tokenizer.ggml.tokens")
        .map(|a| a.len())
        .ok();
    let mut types: BTreeMap<String, usize> = BTreeMap::new();
    for t in gguf.tensors() {
        *types.entry(t.ty.name().to_string()).or_default() += 1;
    }
    Ok(json!({
        "version": gguf.version(),
        "architecture": architecture,
        "name": meta.get_str("general.name").ok(),
        "metadataCount": meta.len(),
        "tensorCount": gguf.tensors().len(),
        "tensorBytes": gguf.data_size(),
        "contextLength": arch_u32("context_length"),
        "embeddingLength": arch_u32("embedding_length"),
        "blockCount": arch_u32("block_count"),
        "vocabSize": vocab_size,
        "tensorTypes": types,
    })
    .to_string())
}

/// The grammar benchmark on a cases file from `bench/grammar/peers.py` (JSON text): the
/// per-schema records and totals of `stampo bench grammar --cases`, timed by `now_us`.
/// `{"summary": {...}, "files": [...]}`.
pub fn bench_grammar_json(cases: &str, now_us: &mut dyn FnMut() -> f64) -> ApiResult {
    let v: Value =
        serde_json::from_str(cases).map_err(|e| (ErrorCode::InvalidArgument, e.to_string()))?;
    let (vocab, cases) = bench::cases_from_json(&v).map_err(|e| (ErrorCode::InvalidArgument, e))?;
    let vocab = Arc::new(vocab);
    let mut mask = vec![0u32; vocab.mask_words()];
    let files: Vec<Value> = cases
        .iter()
        .map(|case| bench::run_case(case, &vocab, &mut mask, now_us))
        .collect();
    Ok(json!({"summary": bench::summarise(&files), "files": files}).to_string())
}

/// [`bench_grammar_json`] timed by `performance.now()` (whose resolution a browser coarsens:
/// 5 µs in a cross-origin isolated page, 100 µs otherwise).
#[wasm_bindgen(js_name = benchGrammar)]
pub fn bench_grammar(cases: &str) -> Result<String, JsValue> {
    to_js(bench_grammar_json(cases, &mut || performance_now() * 1e3))
}

#[wasm_bindgen(js_name = inspectGguf)]
pub fn inspect_gguf(bytes: &[u8]) -> Result<String, JsValue> {
    to_js(summarize_gguf(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_report_names_keywords() {
        let out = compile_schema_json(
            r#"{"type":"object","properties":{"age":{"type":"integer","minimum":0}},"required":["age"]}"#,
            false,
        )
        .unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert!(v["gbnf"].as_str().unwrap().contains("root ::="));
        let keywords: Vec<&str> = v["report"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["keyword"].as_str().unwrap())
            .collect();
        assert!(keywords.contains(&"minimum"), "{keywords:?}");
    }

    #[test]
    fn bad_inputs_have_codes() {
        assert_eq!(
            compile_schema_json("{not json", false).unwrap_err().0,
            ErrorCode::SchemaRefused
        );
        let (code, message) = check_gbnf_json("root ::= foo").unwrap_err();
        assert_eq!(code, ErrorCode::GrammarInvalid);
        assert!(message.contains("foo"), "{message}");
        assert_eq!(
            summarize_gguf(b"GGUF\x03").unwrap_err().0,
            ErrorCode::GgufInvalid
        );
    }

    #[test]
    fn the_grammar_bench_walks_a_cases_file() {
        let hex = |t: &str| t.bytes().map(|b| format!("{b:02x}")).collect::<String>();
        let vocab: Vec<String> = ["</s>", "{", "}", "\"a\"", ":", "1", "x"]
            .iter()
            .map(|t| hex(t))
            .collect();
        let cases = json!({
            "vocab_hex": vocab, "special": [0], "eos": [0],
            "cases": [{
                "name": "a",
                "schema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                "valid": [[1, 3, 4, 5, 2]],
                "invalid": [[1, 2], [1, 3, 4, 6, 2]],
            }, {"name": "bad", "schema": {"type": "nope"}, "valid": [], "invalid": []}],
        });
        let mut clock = 0.0;
        let out = bench_grammar_json(&cases.to_string(), &mut || {
            clock += 1.0;
            clock
        })
        .unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["summary"]["compiled"], 1, "{v}");
        assert_eq!(v["summary"]["refused"], 1, "{v}");
        assert_eq!(v["files"][0]["valid_rejected"], 0, "{v}");
        assert_eq!(v["files"][0]["invalid_accepted"], 0, "{v}");
        // One mask per token of the valid instance, each one tick of the clock.
        assert_eq!(v["files"][0]["mask_us"]["n"], 5, "{v}");
        assert_eq!(v["files"][0]["mask_us"]["max"], 1.0, "{v}");
        assert_eq!(
            bench_grammar_json("[]", &mut || 0.0).unwrap_err().0,
            ErrorCode::InvalidArgument
        );
    }

    #[test]
    fn gbnf_accepts_and_rejects() {
        let g = r#"root ::= "yes" | "no""#;
        assert!(gbnf_accepts(g, "yes").unwrap());
        assert!(!gbnf_accepts(g, "maybe").unwrap());
        assert!(!gbnf_accepts(g, "ye").unwrap());
    }
}
