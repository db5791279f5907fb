//! The engine's one error type. Each variant names what went wrong and where: the request
//! field, the conflicting pair, the token id.

use thiserror::Error;

/// Everything the engine can refuse or fail at.
#[derive(Debug, Error)]
pub enum Error {
    /// The body is not a JSON object (llama.cpp answers 400 for this too).
    #[error("the request body must be a JSON object, got {got}")]
    BodyNotObject { got: &'static str },

    /// A field holds a value of the wrong JSON type or out of its range.
    #[error("field `{field}`: expected {expected}, got {got}")]
    FieldType {
        field: String,
        expected: &'static str,
        got: String,
    },

    /// A required field is absent (`prompt` for `/completion`, `messages` for chat).
    #[error("field `{field}` is required")]
    MissingField { field: &'static str },

    /// Two fields that cannot be used together, refused as llama.cpp's server refuses them.
    #[error("{message}")]
    Conflict { message: &'static str },

    /// A field's value is well-typed but not one of the accepted values.
    #[error("field `{field}`: {message}")]
    InvalidValue { field: String, message: String },

    /// `tool_choice` names a function that `tools` does not offer.
    #[error("tool_choice names `{name}`, which is not among the offered tools")]
    UnknownTool { name: String },

    /// The GBNF grammar (or the grammar built for a constraint) does not compile. Never
    /// answered with unconstrained output.
    #[error("field `{field}`: {source}")]
    Grammar {
        field: &'static str,
        #[source]
        source: stampo_grammar::GrammarError,
    },

    /// The JSON Schema does not compile (or, in strict mode, has a keyword it cannot enforce).
    #[error("field `{field}`: {source}")]
    Schema {
        field: &'static str,
        #[source]
        source: stampo_grammar::json_schema::SchemaError,
    },

    /// The chat template (or the tokenizer) failed on the messages.
    #[error("the prompt could not be built: {0}")]
    Prompt(#[source] Box<dyn std::error::Error + Send + Sync>),

    /// The caller stopped a streaming request before generation began.
    #[error("cancelled")]
    Cancelled,

    /// The bytes are not a readable GGUF file: not GGUF at all, a malformed header, or a file
    /// that stops short (the message names the byte offset or the tensor).
    #[error("the file is not a readable GGUF: {0}")]
    Gguf(String),

    /// The model file could not be loaded (a bad GGUF, an unsupported architecture, a
    /// tokenizer or device the file cannot be run with).
    #[error("the model could not be loaded: {0}")]
    Load(String),

    /// The logits source (the model) failed.
    #[error("the model failed: {0}")]
    Logits(#[source] Box<dyn std::error::Error + Send + Sync>),

    /// The grammar matcher failed or refused a token the engine committed.
    #[error("the grammar matcher failed: {0}")]
    Matcher(#[source] Box<dyn std::error::Error + Send + Sync>),

    /// The logits vector does not match the vocabulary size the engine was given.
    #[error("the model returned {got} logits, the vocabulary has {expected} tokens")]
    LogitsLength { expected: usize, got: usize },

    /// No token survives the grammar mask (and the grammar cannot end): the grammar and the
    /// vocabulary disagree. Never resolved by sampling unconstrained.
    #[error(
        "no token is allowed at step {step}: the grammar admits nothing the vocabulary can spell"
    )]
    EmptyMask { step: usize },
}

/// Names a JSON value's type the way the error messages show it.
pub(crate) fn json_type_name(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}
