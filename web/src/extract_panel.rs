//! Extraction: a system prompt and an input text, answered under the schema; the output
//! streams in, with a validity badge, `finish_reason`, speed and mask overhead. The same
//! request can run without the constraint beside it: shape is not truth, and this shows both.

use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::{Value, json};

use std::rc::Rc;

use crate::constraint::Constraint;
use crate::judge::{self, Judge, Verdict};
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
    /// The badge, once the run is over.
    verdict: Option<Verdict>,
}

/// A chat request for one input: the system prompt, the input, the sampling settings and,
/// when given, the constraint, unless Custom JSON sets one of its own (then the editor's is
/// not sent, and Custom JSON's is merged in by the package).
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
        let custom_sets_it = settings
            .custom()
            .ok()
            .flatten()
            .is_some_and(|c| judge::sets_constraint(&c));
        if let Some(constraint) = constraint.filter(|_| !custom_sets_it) {
            constraint.apply(obj);
        }
    }
    body
}

/// Streams one request into `run`, and judges the output by `judge`.
async fn execute(
    engine: Stampo,
    body: Value,
    custom: Option<Value>,
    run: RwSignal<Run>,
    judge: Rc<Judge>,
) {
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
        match result {
            Ok(_) => r.verdict = judge.verdict(&r.text),
            Err(e) => r.error = Some(e),
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
fn Output(title: &'static str, id: &'static str, run: RwSignal<Run>) -> impl IntoView {
    let badge = move || {
        run.get().verdict.map(|v| {
            let class = if v.ok { "ok badge" } else { "error badge" };
            view! { <span class=class>{v.text}</span> }
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
        // Both outputs are judged by the constraint the first request carries: the second
        // shows whether the model keeps the shape on its own.
        let judge = Rc::new(Judge::of_body(&judge::merged(
            &with_schema,
            custom.as_ref(),
        )));
        let free_custom = custom.as_ref().map(judge::without_constraint);
        let also_free = compare.get_untracked();
        spawn_local(async move {
            execute(
                engine.clone(),
                with_schema,
                custom,
                constrained,
                judge.clone(),
            )
            .await;
            if also_free {
                execute(engine, without, free_custom, free, judge).await;
            }
        });
    };
    let curl = move || {
        let s = settings.get();
        constraint.text.track();
        constraint.mode.track();
        let b = chat_body(&system.get(), &input.get(), Some(&constraint), &s, false);
        as_curl(&judge::merged(&b, s.custom().ok().flatten().as_ref()))
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
            {move || settings.get().custom().ok().flatten().filter(judge::sets_constraint).map(|_| view! {
                <p id="custom-constraint">"Custom JSON sets the constraint: the editor's is not sent."</p>
            })}
            <div class="columns">
                <Output title="With the constraint" id="output-constrained" run=constrained/>
                {move || compare.get().then(|| view! {
                    <Output title="Without it" id="output-free" run=free/>
                })}
            </div>
            <details>
                <summary>"Copy as curl (the same request for a llama.cpp server)"</summary>
                <pre id="curl">{curl}</pre>
            </details>
        </section>
    }
}
