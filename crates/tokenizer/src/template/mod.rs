//! Chat templates: `tokenizer.chat_template` rendered with minijinja the way transformers
//! renders it with jinja2 (`trim_blocks`, `lstrip_blocks`, loop controls, its `tojson`,
//! `raise_exception`, `strftime_now`, Python string methods), so the prompt is the one the
//! model was trained on.
//!
//! A file without a template (Gemma 3 270M has none) falls back to a built-in template for
//! its architecture, and [`ChatTemplate::notice`] says so.

mod pyjson;
mod time;

use minijinja::value::{Kwargs, Value};
use minijinja::{Environment, Error, ErrorKind};
use stampo_gguf::Gguf;

use crate::Tokenizer;
use crate::error::{Result, TokenizerError};

pub use time::DateTime;

const GEMMA3: &str = include_str!("../templates/gemma3.jinja");
const CHATML: &str = include_str!("../templates/chatml.jinja");

/// Where a template came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateOrigin {
    /// `tokenizer.chat_template` in the file.
    File,
    /// A built-in template, because the file has none.
    Builtin {
        /// The file's architecture.
        arch: String,
        /// Which built-in template (`gemma3`, `chatml`).
        name: &'static str,
    },
    /// Given by the caller.
    Custom,
}

/// A chat template ready to render.
#[derive(Debug, Clone)]
pub struct ChatTemplate {
    source: String,
    origin: TemplateOrigin,
    bos_token: String,
    eos_token: String,
}

/// What a template renders: the conversation and its options.
#[derive(Debug, Clone, Default)]
pub struct ChatRequest {
    /// The messages: objects with `role`, `content` and any other fields the template reads
    /// (`tool_calls`, `name`, `tool_call_id`, content as a list of parts…).
    pub messages: serde_json::Value,
    /// Tool definitions (`[{"type": "function", "function": {...}}]`), if any.
    pub tools: Option<serde_json::Value>,
    /// End the prompt with the start of an assistant turn.
    pub add_generation_prompt: bool,
    /// Extra template variables (`chat_template_kwargs`: `enable_thinking`…).
    pub kwargs: serde_json::Map<String, serde_json::Value>,
    /// The time `strftime_now` formats; the system clock when `None` (natively; in the
    /// browser pass it in).
    pub now: Option<DateTime>,
}

impl ChatTemplate {
    /// The file's template, or the built-in one for its architecture.
    pub fn from_gguf(gguf: &Gguf<'_>, tokenizer: &Tokenizer) -> Result<Self> {
        let m = gguf.metadata();
        let tok_text = |id: Option<u32>| {
            id.and_then(|id| tokenizer.token_text(id))
                .map(|t| String::from_utf8_lossy(t).into_owned())
                .unwrap_or_default()
        };
        let (bos_token, eos_token) = (tok_text(tokenizer.bos()), tok_text(tokenizer.eos()));
        if let Some(src) = m.optional::<&str>("tokenizer.chat_template")? {
            return Ok(ChatTemplate {
                source: src.to_string(),
                origin: TemplateOrigin::File,
                bos_token,
                eos_token,
            });
        }
        let arch = m.architecture().unwrap_or("").to_string();
        let (name, source) = builtin_for(&arch);
        Ok(ChatTemplate {
            source: source.to_string(),
            origin: TemplateOrigin::Builtin { arch, name },
            bos_token,
            eos_token,
        })
    }

    /// A template given by the caller.
    pub fn from_source(source: &str, bos_token: &str, eos_token: &str) -> Self {
        ChatTemplate {
            source: source.to_string(),
            origin: TemplateOrigin::Custom,
            bos_token: bos_token.to_string(),
            eos_token: eos_token.to_string(),
        }
    }

    /// The template text.
    pub fn source(&self) -> &str {
        &self.source
    }
    /// Where it came from.
    pub fn origin(&self) -> &TemplateOrigin {
        &self.origin
    }
    /// A sentence for the user when the template is not the file's own.
    pub fn notice(&self) -> Option<String> {
        match &self.origin {
            TemplateOrigin::Builtin { arch, name } => Some(format!(
                "the model file has no chat template (tokenizer.chat_template); using the built-in '{name}' template for architecture '{arch}'"
            )),
            _ => None,
        }
    }

    /// Renders the prompt. A template that does not parse, or fails while rendering
    /// (including its own `raise_exception`), gives an error naming the template line.
    pub fn render(&self, req: &ChatRequest) -> Result<String> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_keep_trailing_newline(false);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |msg: String| -> std::result::Result<Value, Error> {
                Err(Error::new(ErrorKind::InvalidOperation, msg))
            },
        );
        let now = req.now.unwrap_or_else(DateTime::now);
        env.add_function("strftime_now", move |fmt: String| now.strftime(&fmt));
        env.add_filter("tojson", tojson);
        env.add_template("chat_template", &self.source)
            .map_err(template_error)?;
        let tmpl = env.get_template("chat_template").map_err(template_error)?;

        let mut ctx = serde_json::Map::new();
        for (k, v) in &req.kwargs {
            ctx.insert(k.clone(), v.clone());
        }
        ctx.insert("messages".into(), req.messages.clone());
        if let Some(tools) = &req.tools {
            ctx.insert("tools".into(), tools.clone());
        }
        ctx.insert(
            "add_generation_prompt".into(),
            req.add_generation_prompt.into(),
        );
        ctx.insert("bos_token".into(), self.bos_token.clone().into());
        ctx.insert("eos_token".into(), self.eos_token.clone().into());
        tmpl.render(Value::from_serialize(&ctx))
            .map_err(template_error)
    }
}

/// The built-in template for an architecture without one in its file: Gemma's turn
/// format for the gemma family, ChatML otherwise (llama.cpp's default).
pub fn builtin_for(arch: &str) -> (&'static str, &'static str) {
    if arch.starts_with("gemma") {
        ("gemma3", GEMMA3)
    } else {
        ("chatml", CHATML)
    }
}

fn tojson(v: Value, kwargs: Kwargs) -> std::result::Result<Value, Error> {
    let indent: Option<Value> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    let separators: Option<Value> = kwargs.get("separators")?;
    let _ensure_ascii: Option<bool> = kwargs.get("ensure_ascii")?;
    kwargs.assert_all_used()?;
    let indent = match indent {
        None => None,
        Some(i) if i.is_none() => None,
        Some(i) => match i.as_str() {
            Some(s) => Some(s.to_string()),
            None => Some(" ".repeat(usize::try_from(i).unwrap_or(0))),
        },
    };
    let separators = match separators {
        Some(s) if !s.is_none() => {
            let items: Vec<Value> = s.try_iter()?.collect();
            match items.as_slice() {
                [a, b] => Some((a.to_string(), b.to_string())),
                _ => {
                    return Err(Error::new(
                        ErrorKind::InvalidOperation,
                        "tojson: separators must be a pair",
                    ));
                }
            }
        }
        _ => None,
    };
    let style = pyjson::Style::new(indent, separators, sort_keys.unwrap_or(false));
    // Marked safe: transformers' environment does not autoescape.
    Ok(Value::from_safe_string(pyjson::dumps(&v, &style)?))
}

fn template_error(e: Error) -> TokenizerError {
    let line = e.line();
    let mut message = match e.detail() {
        Some(d) if e.kind() == ErrorKind::InvalidOperation => d.to_string(),
        _ => e.to_string(),
    };
    if let Some(l) = line {
        message = format!("{message} (template line {l})");
    }
    TokenizerError::Template { message, line }
}
