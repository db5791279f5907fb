//! One request, end to end: compile its constraint, build the prompt, generate, stream the
//! server-shaped chunks and return the server-shaped response. The CLI's `stampo request`
//! and the browser worker both go through here.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use serde_json::{Map, Value};
use stampo_grammar::vocab::Vocabulary as GrammarVocabulary;

use crate::block_on::block_on;
use crate::constraint::{self, GrammarConstraint};
use crate::error::Error;
use crate::generate::{
    BoxError, Control, GenerateOptions, LogitsSource, Output, TokenConstraint, Vocabulary,
    generate_async,
};
use crate::reasoning::Reasoning;
use crate::request::{Constraint, Endpoint, Message, Prompt, PromptPiece, Request, Tool};
use crate::response::{
    ResponseMeta, chat_chunk_delta, chat_chunk_start, chat_chunks_end, chat_response,
    completion_chunk, completion_response,
};
use crate::sampler::Sampler;
use crate::timing::Clock;
use crate::tool_calls::tools_instruction;

/// Text to tokens, and chat messages to text. The tokenizer implements this.
pub trait PromptEncoder {
    /// Tokenizes a prompt as llama.cpp's server does: special tokens in the text are parsed,
    /// and the model's BOS is added if its metadata asks for it.
    fn encode(&self, text: &str) -> Vec<u32>;
    /// Renders messages through the model's chat template.
    fn apply_chat_template(
        &self,
        messages: &[Message],
        tools: &[Tool],
        add_generation_prompt: bool,
        kwargs: &Map<String, Value>,
    ) -> Result<String, BoxError>;
}

/// A loaded model with its tokenizer, ready for requests.
pub struct Session<'a> {
    pub model: &'a mut dyn LogitsSource,
    pub encoder: &'a dyn PromptEncoder,
    pub vocab: &'a dyn Vocabulary,
    /// The same vocabulary as the grammar engine sees it (built once per model).
    pub grammar_vocab: Arc<GrammarVocabulary>,
    pub n_ctx: usize,
    /// Refuse schema keywords the grammar cannot enforce instead of warning.
    pub strict: bool,
}

/// What a request produced.
#[derive(Debug)]
pub struct Completed {
    pub output: Output,
    /// The server-shaped response (`/completion` object or `chat.completion`). When the
    /// request streams, the chunks went to the callback and this is the final object
    /// llama.cpp sends last (`/completion`) or the closing chunks (chat) as an array.
    pub response: Value,
    pub prompt_tokens: Vec<u32>,
}

/// How the caller receives a streaming request's chunks and can stop it.
pub struct Streaming<'a> {
    /// Each chunk as the server would send it in one `data:` line; `Break` cancels.
    pub on_chunk: &'a mut dyn FnMut(&Value) -> ControlFlow<()>,
    pub cancel: Option<&'a AtomicBool>,
    /// Asked after every token, streaming or not; `true` cancels (the browser's abort flag,
    /// which a worker can only poll).
    pub should_stop: Option<&'a dyn Fn() -> bool>,
    pub clock: &'a dyn Clock,
}

impl Session<'_> {
    /// Runs `request` to its end on this thread ([`Session::run_async`] for a model whose
    /// logits must be awaited: WebGPU). `fallback_seed` is used when the request asks for a
    /// random seed.
    pub fn run(
        &mut self,
        request: &Request,
        meta: &ResponseMeta,
        fallback_seed: u32,
        streaming: &mut Streaming<'_>,
    ) -> Result<Completed, Error> {
        block_on(self.run_async(request, meta, fallback_seed, streaming))
    }

    /// Runs `request`. `fallback_seed` is used when the request asks for a random seed.
    pub async fn run_async(
        &mut self,
        request: &Request,
        meta: &ResponseMeta,
        fallback_seed: u32,
        streaming: &mut Streaming<'_>,
    ) -> Result<Completed, Error> {
        // The constraint first: a grammar that does not compile costs no forward pass, and
        // never degrades to unconstrained output.
        let compiled = constraint::compile(&request.constraint, self.strict)?;
        let mut request = request.clone();
        if let Some(c) = &compiled {
            request.warnings.extend(c.warnings.iter().cloned());
        }
        let matcher = match &compiled {
            Some(c) => Some(GrammarConstraint::new(c, Arc::clone(&self.grammar_vocab))?),
            None => None,
        };
        let prompt = self.prompt_tokens(&request)?;
        let mut sampler = Sampler::new(request.sampling.clone(), fallback_seed, self.n_ctx);
        let options = GenerateOptions::from_request(&request, self.n_ctx);

        let stream = request.stream;
        let is_chat = request.endpoint == Endpoint::Chat;
        // Tool-call JSON is for the parser, not the user: it goes out as tool-call deltas at
        // the end.
        let stream_text = !matches!(request.constraint, Constraint::Tools(_));
        let should_stop = streaming.should_stop;
        let on_chunk = &mut *streaming.on_chunk;
        if stream && is_chat && on_chunk(&chat_chunk_start(meta)).is_break() {
            return Err(Error::Cancelled);
        }
        let mut on_event = |e: &crate::generate::Event<'_>| {
            if should_stop.is_some_and(|stop| stop()) {
                return ControlFlow::Break(());
            }
            if !stream || !stream_text || e.text.is_empty() {
                return ControlFlow::Continue(());
            }
            let chunk = if is_chat {
                chat_chunk_delta(meta, e.text)
            } else {
                completion_chunk(e.text, &[e.token], &request)
            };
            on_chunk(&chunk)
        };
        let mut control = Control {
            on_event: &mut on_event,
            cancel: streaming.cancel,
            clock: streaming.clock,
        };
        // A thinking model may reason freely before the constrained document.
        let (mut plain, mut reasoning) = match matcher {
            Some(m) if request.enable_thinking == Some(true) => (
                None,
                Some(Reasoning::new(m, self.vocab, self.grammar_vocab.len())),
            ),
            other => (other, None),
        };
        let constraint: Option<&mut (dyn TokenConstraint + Send)> =
            match (reasoning.as_mut(), plain.as_mut()) {
                (Some(r), _) => Some(r),
                (None, Some(m)) => Some(m),
                (None, None) => None,
            };
        let output = generate_async(
            &mut *self.model,
            self.vocab,
            constraint,
            &mut sampler,
            &prompt,
            &options,
            &mut control,
        )
        .await?;

        let response = match (is_chat, stream) {
            (true, false) => chat_response(&request, &output, self.vocab, meta),
            (true, true) => {
                let end = chat_chunks_end(&request, &output, meta);
                for c in &end {
                    let _ = on_chunk(c);
                }
                Value::Array(end)
            }
            (false, _) => {
                let r = completion_response(&request, &output, self.vocab, meta);
                if stream {
                    let _ = on_chunk(&r);
                }
                r
            }
        };
        Ok(Completed {
            output,
            response,
            prompt_tokens: prompt,
        })
    }

    fn prompt_tokens(&self, request: &Request) -> Result<Vec<u32>, Error> {
        let tokens = match &request.prompt {
            Prompt::Text(text) => self.encoder.encode(text),
            Prompt::Tokens(t) => t.clone(),
            Prompt::Pieces(pieces) => pieces
                .iter()
                .flat_map(|p| match p {
                    PromptPiece::Token(t) => vec![*t],
                    PromptPiece::Text(s) => self.encoder.encode(s),
                })
                .collect(),
            Prompt::Messages(messages) => {
                let mut messages = messages.clone();
                if let Constraint::Tools(t) = &request.constraint {
                    // As llama.cpp's generic tool format does: tell the model the JSON shape
                    // in the system message; the grammar holds it to that shape.
                    add_to_system(&mut messages, &tools_instruction(t));
                }
                let text = self
                    .encoder
                    .apply_chat_template(
                        &messages,
                        &request.tools,
                        request.add_generation_prompt,
                        &request.chat_template_kwargs,
                    )
                    .map_err(Error::Prompt)?;
                self.encoder.encode(&text)
            }
        };
        if tokens.is_empty() {
            return Err(Error::InvalidValue {
                field: "prompt".into(),
                message: "is empty after tokenization".into(),
            });
        }
        if tokens.len() >= self.n_ctx {
            return Err(Error::InvalidValue {
                field: "prompt".into(),
                message: format!(
                    "{} tokens do not fit the context of {}",
                    tokens.len(),
                    self.n_ctx
                ),
            });
        }
        Ok(tokens)
    }
}

fn add_to_system(messages: &mut Vec<Message>, text: &str) {
    match messages.first_mut() {
        Some(m) if m.role == "system" => {
            let content = m.content.get_or_insert_with(String::new);
            if !content.is_empty() {
                content.push_str("\n\n");
            }
            content.push_str(text);
        }
        _ => messages.insert(
            0,
            Message {
                role: "system".into(),
                content: Some(text.to_string()),
                tool_calls: Vec::new(),
                tool_call_id: None,
                name: None,
                reasoning_content: None,
            },
        ),
    }
}
