//! Requests on SmolLM2's real tokenizer, chat template and vocabulary (from the GGUF file in
//! `$STAMPO_MODELS`), with a scripted logits source standing in for the model: it pushes the
//! tokens of an answer the schema forbids, and the output must still be valid.

mod common;

use std::ops::ControlFlow;
use std::sync::Arc;

use serde_json::{Value, json};
use stampo_engine::generate::{BoxError, LogitsSource};
use stampo_engine::response::ResponseMeta;
use stampo_engine::text::TokenizerText;
use stampo_engine::timing::StdClock;
use stampo_engine::{PromptEncoder, Request, Session, Streaming};
use stampo_tokenizer::{ChatTemplate, DecodeOptions, Tokenizer};

const SHOW_SPECIAL: DecodeOptions = DecodeOptions {
    remove_special: false,
    unparse_special: true,
};

/// Favours `want[step]` (logit 10) at each step; every other token 0.
struct Pushy {
    want: Vec<u32>,
    step: usize,
    n_vocab: usize,
    fed: Vec<u32>,
}

impl LogitsSource for Pushy {
    fn forward(&mut self, tokens: &[u32]) -> Result<Vec<f32>, BoxError> {
        self.fed.extend_from_slice(tokens);
        let mut logits = vec![0.0; self.n_vocab];
        if let Some(&t) = self.want.get(self.step) {
            logits[t as usize] = 10.0;
        }
        self.step += 1;
        Ok(logits)
    }
}

fn run(text: &TokenizerText, body: Value, push: &str) -> (Value, String) {
    let request = Request::from_body(&body).expect("accepted");
    let n_vocab = text.tokenizer().n_vocab();
    let want = text.tokenizer().encode(push, false, false);
    let mut model = Pushy {
        want,
        step: 0,
        n_vocab,
        fed: Vec::new(),
    };
    let mut session = Session {
        model: &mut model,
        encoder: text,
        vocab: text,
        grammar_vocab: Arc::new(text.grammar_vocabulary()),
        n_ctx: 2048,
        strict: false,
    };
    let clock = StdClock::default();
    let mut on_chunk = |_: &Value| ControlFlow::Continue(());
    let mut streaming = Streaming {
        on_chunk: &mut on_chunk,
        cancel: None,
        should_stop: None,
        clock: &clock,
    };
    let meta = ResponseMeta {
        id: "t".into(),
        created: 0,
        model: "smollm2".into(),
    };
    let done = session
        .run(&request, &meta, 7, &mut streaming)
        .expect("ran");
    let prompt = text
        .tokenizer()
        .decode(&model.fed[..done.prompt_tokens.len()], SHOW_SPECIAL);
    (done.response, prompt)
}

fn load() -> Option<TokenizerText> {
    let path = common::smollm2_path()?;
    let bytes = std::fs::read(path).expect("read");
    let gguf = stampo_gguf::Gguf::parse(&bytes).expect("gguf");
    let tokenizer = Tokenizer::from_gguf(&gguf).expect("tokenizer");
    let template = ChatTemplate::from_gguf(&gguf, &tokenizer).expect("template");
    Some(TokenizerText::with_template(tokenizer, template))
}

#[test]
fn person_extraction_on_the_real_vocabulary() {
    let Some(text) = load() else { return };
    let body = json!({
        "messages": [{"role": "user", "content": "Estrai: Mario Rossi ha 35 anni e vive a Roma."}],
        "temperature": 0, "max_tokens": 40, "finish_in_budget": true,
        "response_format": {"type": "json_schema", "json_schema": {"schema": {
            "type": "object",
            "properties": {"nome": {"type": "string"}, "eta": {"type": "integer", "minimum": 0, "maximum": 120},
                           "citta": {"type": "string"}},
            "required": ["nome", "eta", "citta"], "additionalProperties": false}}}
    });
    let (r, prompt) = run(
        &text,
        body,
        r#"{"nome": "Mario Rossi", "eta": 350, "citta": "Roma"} Spero ti sia utile!"#,
    );
    assert!(
        prompt.contains("<|im_start|>user\nEstrai"),
        "ChatML from the file's template: {prompt:?}"
    );
    let content = r["choices"][0]["message"]["content"]
        .as_str()
        .expect("content");
    let v: Value = serde_json::from_str(content).unwrap_or_else(|e| panic!("{e}: {content}"));
    assert_eq!(
        v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["nome".into(), "eta".into(), "citta".into()])
    );
    assert!(
        v["eta"].as_i64().is_some_and(|e| (0..=120).contains(&e)),
        "{content}"
    );
    assert_eq!(v["nome"], "Mario Rossi");
}

#[test]
fn gbnf_yes_no_and_a_list_on_the_real_vocabulary() {
    let Some(text) = load() else { return };
    let (r, _) = run(
        &text,
        json!({"prompt": "Is Rome in Italy? Answer:", "grammar": "root ::= \" yes\" | \" no\"", "temperature": 0}),
        " maybe",
    );
    assert!(matches!(r["content"].as_str(), Some(" yes" | " no")), "{r}");
    assert_eq!(r["stop_type"], "eos");
    let list = "root ::= item+\nitem ::= \"- \" [a-z]+ \"\\n\"";
    let body = json!({"prompt": "Fruits:\n", "grammar": list, "temperature": 0, "n_predict": 12, "finish_in_budget": true});
    let (r, _) = run(&text, body, "- apple\n- Pear\n* kiwi");
    let out = r["content"].as_str().expect("content");
    assert!(out.starts_with("- apple\n"), "{out:?}");
    assert!(
        out.lines()
            .all(|l| l.starts_with("- ") && l[2..].chars().all(|c| c.is_ascii_lowercase())),
        "{out:?}"
    );
    assert!(out.ends_with('\n'), "closed inside the budget: {out:?}");
}

#[test]
fn prompts_are_tokenized_like_llama_cpp_with_bos_when_asked() {
    let Some(text) = load() else { return };
    let ids = text.encode("<|im_start|>user");
    assert_eq!(
        text.tokenizer().decode(&ids, SHOW_SPECIAL),
        "<|im_start|>user",
        "special tokens are parsed"
    );
    assert_eq!(ids.len(), 2);
}
