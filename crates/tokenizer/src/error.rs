//! The crate's error type.

/// Everything that can go wrong building a tokenizer or rendering a chat template.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenizerError {
    /// The GGUF metadata is missing a key or has a wrong type.
    #[error(transparent)]
    Gguf(#[from] stampo_gguf::GgufError),

    /// `tokenizer.ggml.model` names a tokenizer stampo does not implement.
    #[error(
        "unsupported tokenizer model '{model}' (tokenizer.ggml.model): supported are 'gpt2' and 'llama'"
    )]
    UnsupportedModel { model: String },

    /// `tokenizer.ggml.pre` names a pre-tokenizer stampo does not implement.
    #[error("unsupported pre-tokenizer '{name}' (tokenizer.ggml.pre)")]
    UnsupportedPreTokenizer { name: String },

    /// A metadata array has a length that does not match the vocabulary.
    #[error("metadata key '{key}' has {found} entries, the vocabulary {expected}")]
    LengthMismatch {
        key: String,
        expected: usize,
        found: usize,
    },

    /// A token id outside the vocabulary.
    #[error("token id {id} is outside the vocabulary ({n_vocab} tokens)")]
    BadTokenId { id: u32, n_vocab: usize },

    /// A chat template that does not parse or fails to render.
    #[error("chat template: {message}")]
    Template {
        message: String,
        line: Option<usize>,
    },

    /// The file has no chat template and its architecture has no known fallback.
    #[error(
        "the model has no chat template (tokenizer.chat_template) and architecture '{arch}' has no built-in one"
    )]
    NoTemplate { arch: String },

    /// Messages or template arguments that are not what a template expects.
    #[error("chat messages: {message}")]
    Messages { message: String },
}

/// The crate's result type.
pub type Result<T, E = TokenizerError> = std::result::Result<T, E>;
