//! The tokenizer crate's [`Tokenizer`] seen through the engine's traits: [`Vocabulary`] for
//! the loop, [`PromptEncoder`] for prompts, and the vocabulary the grammar engine builds its
//! token masks from.

use serde_json::{Map, Value};
use stampo_grammar::vocab::Vocabulary as GrammarVocabulary;
use stampo_tokenizer::Tokenizer;

use crate::generate::{BoxError, Vocabulary};
use crate::request::{Message, Tool};
use crate::session::PromptEncoder;

/// A tokenizer with its end-of-generation tokens listed once.
pub struct TokenizerText {
    tokenizer: Tokenizer,
    eog: Vec<u32>,
}

/// A chat request reached a model whose chat template stampo cannot render yet.
#[derive(Debug, thiserror::Error)]
#[error("chat templates are not rendered yet: send a /completion body with a prompt")]
pub struct NoChatTemplate;

impl TokenizerText {
    pub fn new(tokenizer: Tokenizer) -> Self {
        let eog = (0..tokenizer.n_vocab() as u32)
            .filter(|&t| tokenizer.is_eog(t))
            .collect();
        Self { tokenizer, eog }
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
}

impl PromptEncoder for TokenizerText {
    /// As llama.cpp's server tokenizes prompts: BOS as the model asks, special tokens parsed.
    fn encode(&self, text: &str) -> Vec<u32> {
        self.tokenizer.encode(text, true, true)
    }

    fn apply_chat_template(
        &self,
        _messages: &[Message],
        _tools: &[Tool],
        _add_generation_prompt: bool,
        _kwargs: &Map<String, Value>,
    ) -> Result<String, BoxError> {
        Err(Box::new(NoChatTemplate))
    }
}
