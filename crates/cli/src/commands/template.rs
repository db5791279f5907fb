//! `stampo template -m MODEL.gguf --messages FILE.json`: the prompt the model's chat
//! template makes of a conversation. FILE.json is an array of messages, or an object with
//! `messages` and optionally `tools`.

use std::path::{Path, PathBuf};

use serde_json::Value;
use stampo_tokenizer::{ChatRequest, ChatTemplate};

#[derive(clap::Args)]
pub struct Args {
    /// The model file.
    #[arg(short, long)]
    model: PathBuf,
    /// The conversation: `[{"role": "user", "content": "…"}]` or `{"messages": […], "tools": […]}`.
    #[arg(long)]
    messages: PathBuf,
    /// Extra template variables as a JSON object (`chat_template_kwargs`), e.g. `{"enable_thinking": false}`.
    #[arg(long)]
    kwargs: Option<String>,
    /// Tool definitions as a JSON file (overrides `tools` in the messages file).
    #[arg(long)]
    tools: Option<PathBuf>,
    /// Do not end with the start of an assistant turn.
    #[arg(long)]
    no_generation_prompt: bool,
}

fn read_json(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

pub fn run(args: &Args) -> Result<(), String> {
    let file = read_json(&args.messages)?;
    let (messages, mut tools) = match file {
        Value::Array(_) => (file, None),
        Value::Object(mut o) => (
            o.remove("messages")
                .ok_or_else(|| format!("{}: no \"messages\"", args.messages.display()))?,
            o.remove("tools"),
        ),
        _ => {
            return Err(format!(
                "{}: expected an array of messages or an object",
                args.messages.display()
            ));
        }
    };
    if let Some(t) = &args.tools {
        tools = Some(read_json(t)?);
    }
    let kwargs = match &args.kwargs {
        None => serde_json::Map::new(),
        Some(k) => match serde_json::from_str(k).map_err(|e| format!("--kwargs: {e}"))? {
            Value::Object(o) => o,
            _ => return Err("--kwargs: expected a JSON object".into()),
        },
    };
    super::model_file::with_tokenizer(&args.model, |g, tok| {
        let tmpl = ChatTemplate::from_gguf(g, tok).map_err(|e| e.to_string())?;
        if let Some(n) = tmpl.notice() {
            eprintln!("note: {n}");
        }
        let req = ChatRequest {
            messages,
            tools,
            add_generation_prompt: !args.no_generation_prompt,
            kwargs,
            now: None,
        };
        print!("{}", tmpl.render(&req).map_err(|e| e.to_string())?);
        Ok(())
    })
}
