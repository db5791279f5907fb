//! stampo's engine: requests shaped like llama.cpp's server, the sampler chain, and the
//! constrained generation loop that joins a model's logits to a grammar's token masks.
//!
//! Key types: [`Request`] (a resolved `/completion` or `/v1/chat/completions` body),
//! [`Constraint`] (the one constraint a request asks for), [`Sampler`] (llama.cpp's chain
//! with a portable seeded generator).
//!
//! Usage:
//! 1. Merge the UI's Custom JSON over the body: [`request::custom_json::merge_text`].
//! 2. Resolve it: [`Request::from_body`] — wrong types and conflicts are errors naming the
//!    field, unknown fields become [`Warning`]s carried into the response.
//! 3. Build a [`Sampler`] from `request.sampling`, feed it the prompt with
//!    [`Sampler::accept`], then draw with [`Sampler::sample`] under the grammar's mask.

pub mod block_on;
pub mod constraint;
pub mod error;
pub mod generate;
pub mod model_source;
pub mod reasoning;
pub mod request;
pub mod response;
pub mod sampler;
pub mod session;
pub mod stop;
pub mod stream_load;
pub mod text;
pub mod timing;
pub mod tool_calls;

pub use block_on::block_on;
pub use error::Error;
pub use generate::{
    Control, Event, GenerateOptions, LogitsSource, Output, PendingLogits, PendingTop, StopKind,
    TokenConstraint, Vocabulary, generate, generate_async,
};
pub use model_source::{LoadedModel, ModelSource};
pub use request::{
    Constraint, Endpoint, Message, Prompt, Request, Tool, ToolCall, ToolChoice, Warning,
};
pub use sampler::{Sampled, Sampler, SamplingParams, Stage};
pub use session::{Completed, PromptEncoder, Session, Streaming};
pub use stream_load::StreamingLoad;
