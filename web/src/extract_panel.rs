//! Extraction: a system prompt and an input text, answered under the schema; the output
//! streams in, with a validity badge, `finish_reason`, speed and mask overhead. The same
//! request can run without the constraint beside it: shape is not truth, and this shows both.

use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::{Value, json};

use crate::constraint::Constraint;
use crate::runtime::{self, Stampo};
use crate::settings::{Settings, as_curl};

const SYSTEM: &str = "Extract the person described in the text. Answer with JSON only.";
const INPUT: &str = "Mi chiamo Giulia Rossi, ho 34 anni e vivo a Torino.";

/// One run's state, constrained or not.
#[derive(Clone, Debug, Default, PartialEq)]
struct Run {
    text: String,
    running: bool,
    response: Option<Value>,
    error: Option<String>,
}

/// A chat request for one input: the system prompt, the input, the sampling settings and,
/// when given, the constraint.
pub(crate) fn chat_body(
    system: &str,
    input: &str,
    constraint: Option<&Constraint>,
    settings: &Settings,
    stream: bool,
) -> Value {
    let mut body = json!({
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": input}
        ],
        "stream": stream,
    });
    if let Some(obj) = body.as_object_mut() {
        obj.extend(settings.body_fields());
        if let Some(constraint) = constraint {
            constraint.apply(obj);
        }
    }
    body
}

/// Streams one request into `run`.
async fn execute(engine: Stampo, body: Value, custom: Option<Value>, run: RwSignal<Run>) {
    run.set(Run {
        running: true,
        ..Run::default()
    });
    let on_chunk = move |chunk: Value| {
        if let Some(piece) = chunk["choices"][0]["delta"]["content"].as_str() {
            let piece = piece.to_string();
            run.update(|r| r.text.push_str(&piece));
        }
        // The closing chunk carries timings and finish_reason.
        if chunk["choices"][0]["finish_reason"].is_string() || chunk.get("timings").is_some() {
            run.update(|r| {
                let mut merged = r.response.take().unwrap_or_else(|| json!({}));
                if let (Some(m), Some(c)) = (merged.as_object_mut(), chunk.as_object()) {
                    for (k, v) in c {
                        m.insert(k.clone(), v.clone());
                    }
                    if let Some(reason) = chunk["choices"][0]["finish_reason"].as_str() {
                        m.insert("finish_reason".into(), json!(reason));
                    }
                }
                r.response = Some(merged);
            });
        }
    };
    let result = runtime::request(&engine, &body, custom.as_ref(), None, on_chunk).await;
    run.update(|r| {
        r.running = false;
        if let Err(e) = result {
            r.error = Some(e);
        }
    });
}

fn stats(response: &Value) -> String {
    let t = &response["timings"];
    let mut parts = Vec::new();
    if let Some(reason) = response["finish_reason"].as_str() {
        parts.push(format!("finish_reason: {reason}"));
    }
    if let (Some(n), Some(tps)) = (
        t["predicted_n"].as_f64(),
        t["predicted_per_second"].as_f64(),
    ) {
        parts.push(format!("{n} tokens at {tps:.1} tokens/s"));
    }
    if let Some(share) = response["mask_stats"]["share_of_decode"].as_f64() {
        parts.push(format!("mask overhead {:.2}%", share * 100.0));
    }
    parts.join(" · ")
}

#[component]
fn Output(
    title: &'static str,
    id: &'static str,
    run: RwSignal<Run>,
    gbnf: Signal<Option<String>>,
    wants_json: Signal<bool>,
) -> impl IntoView {
    let badge = move || {
        let r = run.get();
        if r.running || r.text.is_empty() {
            return None;
        }
        let matches = gbnf
            .get()
            .and_then(|g| stampo_wasm::gbnf_accepts(&g, &r.text).ok());
        if !wants_json.get() {
            return Some(match matches {
                Some(true) => {
                    view! { <span class="ok badge">"valid: in the grammar's language"</span> }
                        .into_any()
                }
                _ => view! { <span class="error badge">"outside the grammar's language"</span> }
                    .into_any(),
            });
        }
        let parses = serde_json::from_str::<Value>(&r.text).is_ok();
        Some(match (parses, matches) {
            (true, Some(true)) => {
                view! { <span class="ok badge">"valid: JSON, and in the schema's grammar"</span> }
                    .into_any()
            }
            (true, Some(false)) => {
                view! { <span class="error badge">"JSON, but outside the schema's grammar"</span> }
                    .into_any()
            }
            (true, None) => view! { <span class="ok badge">"valid JSON"</span> }.into_any(),
            (false, _) => view! { <span class="error badge">"not JSON"</span> }.into_any(),
        })
    };
    let pretty = move || {
        let r = run.get();
        serde_json::from_str::<Value>(&r.text)
            .ok()
            .and_then(|v| serde_json::to_string_pretty(&v).ok())
            .unwrap_or(r.text)
    };
    view! {
        <div>
            <h3>{title}</h3>
            <pre id=id aria-live="polite" aria-busy=move || run.get().running.to_string()>{pretty}</pre>
            <p>{badge} " " {move || run.get().response.as_ref().map(stats)}</p>
            {move || run.get().error.map(|e| view! { <p class="error" role="alert">{e}</p> })}
        </div>
    }
}

#[component]
pub fn ExtractPanel(
    engine: RwSignal<Option<Stampo>, LocalStorage>,
    constraint: Constraint,
    settings: RwSignal<Settings>,
) -> impl IntoView {
    let (system, set_system) = signal(SYSTEM.to_string());
    let (input, set_input) = signal(INPUT.to_string());
    let (compare, set_compare) = signal(true);
    let constrained = RwSignal::new(Run::default());
    let free = RwSignal::new(Run::default());
    let gbnf = Signal::derive(move || constraint.gbnf());
    let wants_json = Signal::derive(move || constraint.wants_json());
    let busy = move || constrained.get().running || free.get().running;
    let start = move |_| {
        let Some(engine) = engine.get_untracked() else {
            return;
        };
        let s = settings.get_untracked();
        let custom = s.custom().ok().flatten();
        let (sys, inp) = (system.get_untracked(), input.get_untracked());
        let with_schema = chat_body(&sys, &inp, Some(&constraint), &s, true);
        let without = chat_body(&sys, &inp, None, &s, true);
        let also_free = compare.get_untracked();
        spawn_local(async move {
            execute(engine.clone(), with_schema, custom.clone(), constrained).await;
            if also_free {
                execute(engine, without, custom, free).await;
            }
        });
    };
    let curl = move || {
        let s = settings.get();
        constraint.text.track();
        constraint.mode.track();
        let mut b = chat_body(&system.get(), &input.get(), Some(&constraint), &s, false);
        if let (Ok(Some(Value::Object(custom))), Some(obj)) = (s.custom(), b.as_object_mut()) {
            obj.extend(custom);
        }
        as_curl(&b)
    };
    view! {
        <section aria-labelledby="extract-title">
            <h2 id="extract-title">"Extraction"</h2>
            <label for="system-prompt">"System prompt"</label>
            <textarea id="system-prompt" class="short" prop:value=system
                on:input=move |ev| set_system.set(event_target_value(&ev))></textarea>
            <label for="input-text">"Input text"</label>
            <textarea id="input-text" class="short" prop:value=input
                on:input=move |ev| set_input.set(event_target_value(&ev))></textarea>
            <label>
                <input type="checkbox" prop:checked=compare
                    on:change=move |ev| set_compare.set(event_target_checked(&ev))/>
                " also run the same request without the constraint"
            </label>
            <button id="extract" on:click=start
                disabled=move || busy() || engine.get().is_none()>
                "Extract"
            </button>
            {move || engine.get().is_none().then(|| view! { <span>" Load a model first."</span> })}
            <div class="columns">
                <Output title="With the constraint" id="output-constrained" run=constrained gbnf=gbnf wants_json=wants_json/>
                {move || compare.get().then(|| view! {
                    <Output title="Without it" id="output-free" run=free gbnf=gbnf wants_json=wants_json/>
                })}
            </div>
            <details>
                <summary>"Copy as curl (the same request for a llama.cpp server)"</summary>
                <pre id="curl">{curl}</pre>
            </details>
        </section>
    }
}
