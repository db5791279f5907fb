//! `stampo inspect`, `tokenize`, `detokenize` and `template`: on small files written by the
//! test (always); and those, `generate`, `run` and `perplexity` on SmolLM2 and Gemma 3 when the
//! models are present.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::PathBuf;
use std::process::{Command, Output};

use stampo_gguf::writer::{GgufWriter, OwnedValue};
use stampo_gguf::{GgmlType, ValueType};

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("stampo-cli-model-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
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

/// A tiny llama-like file with a byte-level BPE vocabulary and a chat template.
fn tiny_model(path: &PathBuf, split: Option<(u16, u16)>) {
    let mut tokens: Vec<String> = (0..=255u8)
        .map(|b| stampo_tokenizer::byte_to_char(b).to_string())
        .collect();
    tokens.extend(["he", "ll", "hell", "hello", "<|im_start|>", "<|im_end|>"].map(String::from));
    let mut types = vec![1i32; tokens.len()];
    let n = types.len();
    types[n - 2] = 3;
    types[n - 1] = 3;
    let mut w = GgufWriter::new();
    if let Some((no, count)) = split {
        w.add("split.no", OwnedValue::U16(no))
            .add("split.count", OwnedValue::U16(count));
    }
    if split.is_none_or(|(no, _)| no == 0) {
        w.add("general.architecture", OwnedValue::String("llama".into()))
            .add("llama.context_length", OwnedValue::U32(128))
            .add("tokenizer.ggml.model", OwnedValue::String("gpt2".into()))
            .add("tokenizer.ggml.pre", OwnedValue::String("gpt-2".into()))
            .add("tokenizer.ggml.tokens", OwnedValue::strings(tokens))
            .add("tokenizer.ggml.token_type", OwnedValue::i32s(types))
            .add("tokenizer.ggml.merges", OwnedValue::strings(["h e", "l l", "he ll", "hell o"]))
            .add("tokenizer.ggml.eos_token_id", OwnedValue::U32(261))
            .add(
                "tokenizer.chat_template",
                OwnedValue::String(
                    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}\
                     {% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
                        .into(),
                ),
            )
            .add("nested", OwnedValue::Array(ValueType::Array, vec![OwnedValue::i32s([1, 2])]));
    }
    let no = split.map_or(0, |(no, _)| no);
    w.add_tensor(&format!("t{no}"), GgmlType::Q8_0, &[32, 2], vec![0; 68]);
    std::fs::write(path, w.to_bytes()).unwrap();
}

#[test]
fn inspect_prints_metadata_and_tensors() {
    let path = dir().join("tiny.gguf");
    tiny_model(&path, None);
    let out = stampo(&["inspect", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("GGUF v3"), "{s}");
    assert!(s.contains("general.architecture = \"llama\""), "{s}");
    assert!(
        s.contains("[STRING]   |      262 | tokenizer.ggml.tokens"),
        "{s}"
    );
    assert!(s.contains("| Q8_0    |         68 | t0"), "{s}");

    let out = stampo(&["inspect", "--json", path.to_str().unwrap()]);
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["tensors"][0]["bytes"], 68);
    assert_eq!(j["metadata"]["llama.context_length"], 128);

    // A bad file is an error naming what is wrong, not a panic.
    let bad = dir().join("bad.gguf");
    std::fs::write(&bad, b"GGUF\x03\0\0\0").unwrap();
    let out = stampo(&["inspect", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("truncated at byte 8"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn inspect_loads_every_part_of_a_split_model() {
    let d = dir();
    for no in 0..2u16 {
        tiny_model(
            &d.join(stampo_gguf::split::split_path("m", u32::from(no), 2)),
            Some((no, 2)),
        );
    }
    let first = d.join("m-00001-of-00002.gguf");
    let out = stampo(&["inspect", first.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("* File 2:") && s.contains("| t1"), "{s}");
}

#[test]
fn tokenize_detokenize_and_template() {
    let path = dir().join("tok.gguf");
    tiny_model(&path, None);
    let p = path.to_str().unwrap();
    let out = stampo(&["tokenize", "-m", p, "hello <|im_start|>", "--special"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ids: Vec<u32> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(ids, [259, 32, 260]);
    let out = stampo(&["detokenize", "-m", p, "[259, 32, 260]", "--special"]);
    assert_eq!(text(&out.stdout), "hello <|im_start|>\n");
    let out = stampo(&["detokenize", "-m", p, "[259, 32, 260]"]);
    assert_eq!(text(&out.stdout), "hello \n");
    let out = stampo(&["detokenize", "-m", p, "[9999]"]);
    assert!(text(&out.stderr).contains("outside the vocabulary"));

    let msgs = dir().join("msgs.json");
    std::fs::write(
        &msgs,
        r#"{"messages": [{"role": "user", "content": "hi"}]}"#,
    )
    .unwrap();
    let out = stampo(&["template", "-m", p, "--messages", msgs.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
}

fn model(file: &str) -> Option<PathBuf> {
    stampo_test_data::model_path(file)
}

#[test]
fn default_models() {
    if let Some(p) = model("SmolLM2-135M-Instruct.Q4_1.gguf") {
        let out = stampo(&["tokenize", "-m", p.to_str().unwrap(), "Hello world!"]);
        assert_eq!(text(&out.stdout).trim(), "[19556,905,17]");
    }
    if let Some(p) = model("gemma-3-270m-q4_k_m.gguf") {
        let msgs = dir().join("gemma.json");
        std::fs::write(&msgs, r#"[{"role": "user", "content": "Hi"}]"#).unwrap();
        let out = stampo(&[
            "template",
            "-m",
            p.to_str().unwrap(),
            "--messages",
            msgs.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_eq!(
            text(&out.stdout),
            "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"
        );
        assert!(
            text(&out.stderr).contains("built-in 'gemma3' template"),
            "{}",
            text(&out.stderr)
        );
    }
}

/// `stampo generate` on each device: SmolLM2 completes "The capital of France is" with
/// " Paris" (id 7042) on the CPU and on wgpu (lavapipe where there is no GPU); an unknown
/// device is an error naming it.
#[test]
fn generate_on_each_device() {
    let Some(p) = model("SmolLM2-135M-Instruct.Q4_1.gguf") else {
        return;
    };
    let p = p.to_str().unwrap();
    let args = |device| {
        [
            "generate",
            "-m",
            p,
            "-p",
            "The capital of France is",
            "-n",
            "2",
            "--json",
            "--device",
            device,
        ]
    };
    for device in ["cpu", "wgpu"] {
        let out = stampo(&args(device));
        if device == "wgpu"
            && !out.status.success()
            && std::env::var("STAMPO_REQUIRE_WGPU").as_deref() != Ok("1")
        {
            eprintln!("SKIPPED the wgpu device: {}", text(&out.stderr));
            continue;
        }
        assert!(out.status.success(), "{device}: {}", text(&out.stderr));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["generated_ids"][0], 7042, "{device}: {json}");
    }
    let out = stampo(&args("tpu"));
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("tpu"), "{}", text(&out.stderr));
}

/// `stampo perplexity` cuts `tests/fixtures/model/perplexity.txt` as llama.cpp's perplexity
/// does (Gemma 3 asks for a BOS: it starts the text and every chunk) and comes within 1% of
/// llama.cpp's perplexity (`perplexity.json`, made by `perplexity.py`).
#[test]
fn perplexity_as_llama_cpp_cuts_the_text() {
    let file = "gemma-3-270m-q4_k_m.gguf";
    let Some(p) = model(file) else {
        return;
    };
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/model");
    let reference: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures.join("perplexity.json")).unwrap())
            .unwrap();
    let reference = &reference["models"][file];
    let text_file = fixtures.join("perplexity.txt");
    let out = stampo(&[
        "perplexity",
        "-m",
        p.to_str().unwrap(),
        "-f",
        text_file.to_str().unwrap(),
        "--ctx",
        "512",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let tokens = reference["tokens"].as_u64().unwrap();
    assert!(
        text(&out.stderr).starts_with(&format!("{tokens} tokens, 4 chunks of 512")),
        "llama.cpp counts {tokens} tokens: {}",
        text(&out.stderr)
    );
    let stdout = text(&out.stdout);
    let ppl: f64 = stdout
        .strip_prefix("Final estimate: PPL = ")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no perplexity in {stdout:?}"));
    let theirs = reference["ppl"].as_f64().unwrap();
    assert!(
        (ppl - theirs).abs() / theirs <= 0.01,
        "perplexity {ppl} vs llama.cpp {theirs}"
    );
}

/// `stampo run --json` constrains a raw prompt as it does a chat (the constraint once went in
/// `response_format`, which `/completion` ignores: the output was free text).
#[test]
fn run_json_constrains_a_raw_prompt() {
    let Some(p) = model("SmolLM2-135M-Instruct.Q4_1.gguf") else {
        return;
    };
    let out = stampo(&[
        "run",
        "-m",
        p.to_str().unwrap(),
        "-p",
        "The capital of France is",
        "-n",
        "24",
        "--temp",
        "0",
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !text(&out.stderr).contains("unknown field"),
        "{}",
        text(&out.stderr)
    );
    let printed = text(&out.stdout);
    assert!(
        printed.trim_start().starts_with('{'),
        "not a JSON object: {printed}"
    );
}
