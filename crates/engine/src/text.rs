//! The tokenizer crate's [`Tokenizer`] seen through the engine's traits: [`Vocabulary`] for
//! the loop, [`PromptEncoder`] for prompts, and the vocabulary the grammar engine builds its
//! token masks from.

use serde_json::{Map, Value, json};
use stampo_grammar::vocab::Vocabulary as GrammarVocabulary;
use stampo_tokenizer::{ChatRequest, ChatTemplate, Tokenizer};

use crate::generate::{BoxError, Vocabulary};
use crate::request::{Message, Tool};
use crate::session::PromptEncoder;

/// A tokenizer and its chat template, with the end-of-generation tokens listed once.
pub struct TokenizerText {
    tokenizer: Tokenizer,
    template: Option<ChatTemplate>,
    eog: Vec<u32>,
}

/// A chat request reached a tokenizer built without a chat template.
#[derive(Debug, thiserror::Error)]
#[error("no chat template was loaded: send a /completion body with a prompt")]
pub struct NoChatTemplate;

impl TokenizerText {
    /// A tokenizer for `/completion` prompts only (chat requests are refused).
    pub fn new(tokenizer: Tokenizer) -> Self {
        let eog = (0..tokenizer.n_vocab() as u32)
            .filter(|&t| tokenizer.is_eog(t))
            .collect();
        Self {
            tokenizer,
            template: None,
            eog,
        }
    }

    /// A tokenizer with the model's chat template (or the built-in one for its architecture).
    pub fn with_template(tokenizer: Tokenizer, template: ChatTemplate) -> Self {
        let mut text = Self::new(tokenizer);
        text.template = Some(template);
        text
    }

    pub fn template(&self) -> Option<&ChatTemplate> {
        self.template.as_ref()
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The vocabulary for token masks: each token's raw bytes; control tokens are never
    /// matched as text; end-of-generation tokens are allowed where the document may end.
    pub fn grammar_vocabulary(&self) -> GrammarVocabulary {
        let t = &self.tokenizer;
        let n = t.n_vocab() as u32;
        let tokens = (0..n).map(|id| t.token_bytes(id).to_vec()).collect();
        let special = (0..n).map(|id| t.is_control(id)).collect();
        GrammarVocabulary::new(tokens, special, self.eog.clone())
    }
}

impl Vocabulary for TokenizerText {
    /// What the token adds to the output text: control tokens add nothing, as llama.cpp's
    /// server renders them (`special = false`).
    fn token_bytes(&self, token: u32) -> &[u8] {
        self.tokenizer.token_to_piece(token, false)
    }

    fn end_of_generation(&self) -> &[u32] {
        &self.eog
    }

    fn tokenize(&self, bytes: &[u8]) -> Option<Vec<u32>> {
        let text = std::str::from_utf8(bytes).ok()?;
        Some(self.tokenizer.encode(text, false, false))
    }
}

impl PromptEncoder for TokenizerText {
    /// As llama.cpp's server tokenizes prompts: BOS as the model asks, special tokens parsed.
    fn encode(&self, text: &str) -> Vec<u32> {
        self.tokenizer.encode(text, true, true)
    }

    fn apply_chat_template(
        &self,
        messages: &[Message],
        tools: &[Tool],
        add_generation_prompt: bool,
        kwargs: &Map<String, Value>,
    ) -> Result<String, BoxError> {
        let template = self.template.as_ref().ok_or(NoChatTemplate)?;
        let request = ChatRequest {
            messages: Value::Array(messages.iter().map(message_json).collect()),
            tools: (!tools.is_empty()).then(|| Value::Array(tools.iter().map(tool_json).collect())),
            add_generation_prompt,
            kwargs: kwargs.clone(),
            now: None,
        };
        Ok(template.render(&request)?)
    }
}

/// A message as chat templates read it: OpenAI's shape, with tool-call arguments as the JSON
/// value they hold (templates such as Qwen's apply `tojson` to them), as llama.cpp passes them.
fn message_json(m: &Message) -> Value {
    let mut v = json!({"role": m.role, "content": m.content});
    if !m.tool_calls.is_empty() {
        v["tool_calls"] = m
            .tool_calls
            .iter()
            .map(|c| {
                let arguments = serde_json::from_str::<Value>(&c.arguments).unwrap_or_else(|_| Value::String(c.arguments.clone()));
                json!({"type": "function", "id": c.id, "function": {"name": c.name, "arguments": arguments}})
            })
            .collect();
    }
    for (key, value) in [
        ("tool_call_id", &m.tool_call_id),
        ("name", &m.name),
        ("reasoning_content", &m.reasoning_content),
    ] {
        if let Some(text) = value {
            v[key] = json!(text);
        }
    }
    v
}

fn tool_json(t: &Tool) -> Value {
    json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}})
}
