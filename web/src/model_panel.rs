//! The model panel: download a GGUF from this origin with progress, read its header.

use js_sys::{Reflect, Uint8Array};
use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::Value;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{ReadableStreamDefaultReader, Response};

/// The default model, served by `scripts/demo.sh` under `/models/`.
const DEFAULT_MODEL: &str = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
/// The header, metadata and tensor table of the default models fit well inside this.
const HEADER_PREFIX_MAX: usize = 32 << 20;

#[derive(Clone, Debug, PartialEq)]
enum Phase {
    Idle,
    Downloading { loaded: u64, total: Option<u64> },
    Ready { summary: Value, bytes: u64 },
    Failed(String),
}

fn js_message(value: JsValue) -> String {
    value
        .dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| value.as_string())
        .unwrap_or_else(|| format!("{value:?}"))
}

/// Downloads `url`, reporting progress, and parses the GGUF header from the first bytes.
async fn load(url: &str, set_phase: WriteSignal<Phase>) -> Result<(Value, u64), String> {
    let window = web_sys::window().ok_or("no window")?;
    let response: Response = JsFuture::from(window.fetch_with_str(url))
        .await
        .map_err(js_message)?
        .dyn_into()
        .map_err(js_message)?;
    if !response.ok() {
        return Err(format!("{url}: HTTP {}", response.status()));
    }
    let total = response
        .headers()
        .get("content-length")
        .ok()
        .flatten()
        .and_then(|s| s.parse::<u64>().ok());
    let body = response.body().ok_or("the response has no body")?;
    let reader: ReadableStreamDefaultReader = body
        .get_reader()
        .dyn_into()
        .map_err(|object: js_sys::Object| js_message(object.into()))?;
    let mut prefix: Vec<u8> = Vec::new();
    let mut summary: Option<Value> = None;
    let mut last_error = String::from("the file is empty");
    let mut loaded = 0u64;
    loop {
        let chunk = JsFuture::from(reader.read()).await.map_err(js_message)?;
        let done = Reflect::get(&chunk, &"done".into())
            .map_err(js_message)?
            .as_bool()
            .unwrap_or(true);
        if done {
            break;
        }
        let value = Uint8Array::new(&Reflect::get(&chunk, &"value".into()).map_err(js_message)?);
        loaded += u64::from(value.length());
        if summary.is_none() && prefix.len() < HEADER_PREFIX_MAX {
            prefix.extend(value.to_vec());
            match stampo_wasm::summarize_gguf(&prefix) {
                Ok(json) => {
                    summary = serde_json::from_str(&json).ok();
                    prefix = Vec::new();
                }
                Err((_, message)) => last_error = message,
            }
        }
        set_phase.set(Phase::Downloading { loaded, total });
    }
    summary.map(|s| (s, loaded)).ok_or(last_error)
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

#[component]
pub fn ModelPanel() -> impl IntoView {
    let (phase, set_phase) = signal(Phase::Idle);
    let start = move |_| {
        set_phase.set(Phase::Downloading {
            loaded: 0,
            total: None,
        });
        spawn_local(async move {
            let next = match load(DEFAULT_MODEL, set_phase).await {
                Ok((summary, bytes)) => Phase::Ready { summary, bytes },
                Err(message) => Phase::Failed(message),
            };
            set_phase.set(next);
        });
    };
    let busy = move || matches!(phase.get(), Phase::Downloading { .. });
    view! {
        <section aria-labelledby="model-title">
            <h2 id="model-title">"Model"</h2>
            <p>"Default model: SmolLM2-135M-Instruct (Q4_1, 98 MB), served by this page's origin."</p>
            <button id="load-model" on:click=start disabled=busy>"Load the default model"</button>
            {move || match phase.get() {
                Phase::Idle => view! { <p>"Not loaded."</p> }.into_any(),
                Phase::Downloading { loaded, total } => view! {
                    <p>"Downloading: " {mib(loaded)} {total.map(|t| format!(" of {}", mib(t)))}</p>
                    <progress
                        aria-label="download progress"
                        max=move || total.unwrap_or(0).to_string()
                        value=loaded.to_string()
                    ></progress>
                }.into_any(),
                Phase::Ready { summary, bytes } => view! {
                    <p class="ok" id="model-ready">"Downloaded " {mib(bytes)} "; header read in wasm."</p>
                    <pre id="model-summary">{serde_json::to_string_pretty(&summary).unwrap_or_default()}</pre>
                }.into_any(),
                Phase::Failed(message) => view! {
                    <p class="error" role="alert">"Could not load the model: " {message}</p>
                }.into_any(),
            }}
        </section>
    }
}
