//! The model panel: the default model, a URL or a local file, loaded into the runtime's
//! worker with a progress bar; the models the browser has cached, with their sizes.

use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::Value;
use wasm_bindgen::{JsCast, JsValue};

use crate::runtime::{self, Stampo};

/// The default model, served by `scripts/demo.sh` under `/models/`.
const DEFAULT_MODEL: &str = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
const CONTEXT_SIZE: u32 = 2048;

#[derive(Clone, Debug, PartialEq)]
enum Phase {
    Idle,
    Loading {
        phase: String,
        loaded: f64,
        total: Option<f64>,
    },
    Ready(Value),
    Failed(String),
}

/// Where the model runs, as the page says it: the device, the CPU path's threads, and why
/// WebGPU or more threads were passed over.
fn device_line(info: &Value) -> String {
    if info["device"] == "webgpu" {
        return "Running on WebGPU in a Web Worker.".to_string();
    }
    let threads = info["threads"].as_u64().unwrap_or(1);
    let plural = if threads == 1 { "" } else { "s" };
    let mut line = format!("Running on the CPU path ({threads} thread{plural}) in a Web Worker");
    if let Some(why) = info["webgpu_fallback"].as_str() {
        line.push_str(&format!(": {why}"));
    }
    line.push('.');
    if let Some(why) = info["threads_fallback"].as_str() {
        line.push_str(&format!(" One thread only: {why}."));
    }
    line
}

fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / f64::from(1u32 << 20))
}

#[component]
pub fn ModelPanel(engine: RwSignal<Option<Stampo>, LocalStorage>) -> impl IntoView {
    let phase = RwSignal::new(Phase::Idle);
    let cached = RwSignal::new(Vec::<runtime::CachedModel>::new());
    let refresh = move || {
        spawn_local(async move {
            if let Ok(list) = runtime::cached_models().await {
                cached.set(list);
            }
        });
    };
    refresh();
    let (url, set_url) = signal(DEFAULT_MODEL.to_string());
    let (device, set_device) = signal("auto".to_string());
    let load = move |model: JsValue| {
        phase.set(Phase::Loading {
            phase: "download".into(),
            loaded: 0.0,
            total: None,
        });
        if let Some(old) = engine.get_untracked() {
            engine.set(None);
            drop(old.unload());
        }
        spawn_local(async move {
            // The weights go onto the device as the file arrives: while bytes are still
            // coming, the bar follows them, and the "parse" and "upload" reports that run
            // alongside are not shown over it.
            let progress = move |p: String, loaded: f64, total: Option<f64>| {
                let arriving = matches!(
                    phase.get_untracked(),
                    Phase::Loading { phase: ref shown, loaded: got, total: all }
                        if matches!(shown.as_str(), "download" | "cache" | "read")
                            && all.is_none_or(|all| got < all)
                );
                if arriving && matches!(p.as_str(), "parse" | "upload") {
                    return;
                }
                phase.set(Phase::Loading {
                    phase: p,
                    loaded,
                    total,
                });
            };
            let device = device.get_untracked();
            match runtime::load(model, CONTEXT_SIZE, &device, progress).await {
                Ok((stampo, info)) => {
                    engine.set(Some(stampo));
                    phase.set(Phase::Ready(info));
                    refresh();
                }
                Err(message) => phase.set(Phase::Failed(message)),
            }
        });
    };
    let load_url = move |_| load(JsValue::from_str(&url.get_untracked()));
    let load_file = move |ev: leptos::ev::Event| {
        let file = ev
            .target()
            .and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok())
            .and_then(|input| input.files())
            .and_then(|files| files.get(0));
        if let Some(file) = file {
            load(file.into());
        }
    };
    let drop_file = move |ev: leptos::ev::DragEvent| {
        ev.prevent_default();
        if let Some(file) = ev
            .data_transfer()
            .and_then(|d| d.files())
            .and_then(|f| f.get(0))
        {
            load(file.into());
        }
    };
    let busy = move || matches!(phase.get(), Phase::Loading { .. });
    view! {
        <section aria-labelledby="model-title"
            on:dragover=|ev: leptos::ev::DragEvent| ev.prevent_default()
            on:drop=drop_file>
            <h2 id="model-title">"Model"</h2>
            <label for="model-url">"Model URL (default: SmolLM2-135M-Instruct Q4_1, 98 MB, from this page's origin)"</label>
            <input id="model-url" type="url" prop:value=url
                on:input=move |ev| set_url.set(event_target_value(&ev))/>
            <button id="load-model" on:click=load_url disabled=busy>"Load"</button>
            <label for="model-file">"…or a GGUF file from this computer (or drop one on this panel)"</label>
            <input id="model-file" type="file" accept=".gguf" on:change=load_file disabled=busy/>
            <label for="device-choice">"Device (for the next load)"</label>
            <select id="device-choice" disabled=busy
                on:change=move |ev| set_device.set(event_target_value(&ev))>
                <option value="auto" selected>"Auto: WebGPU on a GPU, else the CPU"</option>
                <option value="webgpu">"WebGPU"</option>
                <option value="cpu">"CPU (WebAssembly SIMD)"</option>
            </select>
            // One live region for the model's state: announced when loading ends (held back
            // while busy, so the progress figures are not read out one by one).
            <div id="model-status" aria-live="polite"
                aria-busy=move || matches!(phase.get(), Phase::Loading { .. }).to_string()>
            {move || match phase.get() {
                Phase::Idle => view! { <p>"Not loaded."</p> }.into_any(),
                Phase::Loading { phase, loaded, total } => view! {
                    <p>{phase} ": " {mib(loaded)} {total.map(|t| format!(" of {}", mib(t)))}</p>
                    <progress
                        aria-label="model loading progress"
                        max=move || total.unwrap_or(0.0).to_string()
                        value=loaded.to_string()
                    ></progress>
                }.into_any(),
                Phase::Ready(info) => view! {
                    <p class="ok" id="model-ready">
                        {format!(
                            "{} ready on the {} ({} from {}, {:.0} ms to load).",
                            info["name"].as_str().unwrap_or("model"),
                            info["device"].as_str().unwrap_or("?"),
                            mib(info["bytes"].as_f64().unwrap_or(0.0)),
                            info["source"].as_str().unwrap_or("?"),
                            info["loadMs"].as_f64().unwrap_or(0.0),
                        )}
                    </p>
                    <p id="model-device">{device_line(&info)}</p>
                }.into_any(),
                Phase::Failed(message) => view! {
                    <p class="error" role="alert">"Could not load the model: " {message}</p>
                }.into_any(),
            }}
            </div>
            <h3>"Models kept in this browser"</h3>
            <ul id="cached-models">
                {move || {
                    let list = cached.get();
                    if list.is_empty() {
                        return view! { <li>"None yet: a model loaded from a URL is kept for the next visit."</li> }.into_any();
                    }
                    list.into_iter().map(|m| {
                        let url = m.url.clone();
                        let delete = move |_| {
                            let url = url.clone();
                            spawn_local(async move {
                                let _ = runtime::delete_cached(&url).await;
                                refresh();
                            });
                        };
                        view! {
                            <li>
                                {m.url.rsplit('/').next().unwrap_or_default().to_string()}
                                {format!(" — {} ", mib(m.bytes))}
                                <button class="delete-cached" on:click=delete
                                    aria-label=format!("Delete {} from this browser", m.url)>"Delete"</button>
                            </li>
                        }
                    }).collect_view().into_any()
                }}
            </ul>
        </section>
    }
}
