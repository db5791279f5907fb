//! Batch extraction: many inputs (pasted one per line, or a .txt, .csv or .jsonl file), one
//! schema, a progress bar, a results table, and the results as JSONL or CSV.

use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::{Value, json};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

use crate::constraint::Constraint;
use crate::extract_panel::chat_body;
use crate::judge::{self, Judge};
use crate::runtime::{self, Stampo};
use crate::settings::Settings;

#[derive(Clone, Debug, PartialEq)]
struct Row {
    input: String,
    output: String,
    finish: String,
    valid: bool,
}

/// The inputs of a file by its kind: a line each (.txt, .csv after its header), or a
/// `.jsonl` line's `text`/`input` field (or the line itself when it is a plain string).
fn inputs_of(name: &str, text: &str) -> Vec<String> {
    let lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    if name.ends_with(".jsonl") {
        lines
            .map(|l| match serde_json::from_str::<Value>(l) {
                Ok(Value::String(s)) => s,
                Ok(v) => v["text"]
                    .as_str()
                    .or_else(|| v["input"].as_str())
                    .map_or_else(|| l.to_string(), str::to_string),
                Err(_) => l.to_string(),
            })
            .collect()
    } else if name.ends_with(".csv") {
        lines.skip(1).map(str::to_string).collect()
    } else {
        lines.map(str::to_string).collect()
    }
}

fn csv_field(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

/// Offers `text` as a file download.
fn download(name: &str, mime: &str, text: &str) -> Result<(), JsValue> {
    let parts = js_sys::Array::of1(&JsValue::from_str(text));
    let options = web_sys::BlobPropertyBag::new();
    options.set_type(mime);
    let blob = web_sys::Blob::new_with_str_sequence_and_options(&parts, &options)?;
    let url = web_sys::Url::create_object_url_with_blob(&blob)?;
    let document = web_sys::window()
        .and_then(|w| w.document())
        .ok_or_else(|| JsValue::from_str("no document"))?;
    let a: web_sys::HtmlAnchorElement = document.create_element("a")?.dyn_into()?;
    a.set_href(&url);
    a.set_download(name);
    a.click();
    web_sys::Url::revoke_object_url(&url)
}

#[component]
pub fn BatchPanel(
    engine: RwSignal<Option<Stampo>, LocalStorage>,
    constraint: Constraint,
    settings: RwSignal<Settings>,
) -> impl IntoView {
    let (text, set_text) = signal(String::from(
        "Mi chiamo Giulia Rossi, ho 34 anni e vivo a Torino.\nSono Marco Bianchi, 58 anni, di Napoli.",
    ));
    let rows = RwSignal::new(Vec::<Row>::new());
    let total = RwSignal::new(0usize);
    let running = RwSignal::new(false);
    let stop = RwSignal::new(false);
    let error = RwSignal::new(None::<String>);

    let load_file = move |ev: leptos::ev::Event| {
        let Some(file) = ev
            .target()
            .and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok())
            .and_then(|i| i.files())
            .and_then(|f| f.get(0))
        else {
            return;
        };
        spawn_local(async move {
            match JsFuture::from(file.text()).await {
                Ok(content) => {
                    let inputs = inputs_of(&file.name(), &content.as_string().unwrap_or_default());
                    set_text.set(inputs.join("\n"));
                }
                Err(e) => error.set(Some(runtime::js_message(&e))),
            }
        });
    };

    let start = move |_| {
        let Some(engine) = engine.get_untracked() else {
            return;
        };
        let inputs: Vec<String> = inputs_of("pasted.txt", &text.get_untracked());
        let s = settings.get_untracked();
        let custom = s.custom().ok().flatten();
        let body_of = move |input: &str| {
            chat_body(
                "Extract the data in the text as JSON.",
                input,
                Some(&constraint),
                &s,
                false,
            )
        };
        let judge = Judge::of_body(&judge::merged(&body_of(""), custom.as_ref()));
        rows.set(Vec::new());
        total.set(inputs.len());
        running.set(true);
        stop.set(false);
        error.set(None);
        spawn_local(async move {
            for input in inputs {
                if stop.get_untracked() {
                    break;
                }
                let body = body_of(&input);
                match runtime::request(&engine, &body, custom.as_ref(), None, |_| {}).await {
                    Ok(response) => {
                        let output = response["choices"][0]["message"]["content"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string();
                        let valid = judge.verdict(&output).is_none_or(|v| v.ok);
                        let finish = response["choices"][0]["finish_reason"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string();
                        rows.update(|r| {
                            r.push(Row {
                                input,
                                output,
                                finish,
                                valid,
                            })
                        });
                    }
                    Err(e) => {
                        error.set(Some(e));
                        break;
                    }
                }
            }
            running.set(false);
        });
    };

    let save_jsonl = move |_| {
        let text: String = rows
            .get_untracked()
            .iter()
            .map(|r| {
                let output = serde_json::from_str::<Value>(&r.output).unwrap_or(json!(r.output));
                json!({"input": r.input, "output": output, "finish_reason": r.finish, "valid": r.valid})
                    .to_string()
                    + "\n"
            })
            .collect();
        if let Err(e) = download("stampo-results.jsonl", "application/jsonl", &text) {
            error.set(Some(runtime::js_message(&e)));
        }
    };
    let save_csv = move |_| {
        let mut text = String::from("input,output,finish_reason,valid\n");
        for r in rows.get_untracked() {
            text.push_str(&format!(
                "{},{},{},{}\n",
                csv_field(&r.input),
                csv_field(&r.output),
                r.finish,
                r.valid
            ));
        }
        if let Err(e) = download("stampo-results.csv", "text/csv", &text) {
            error.set(Some(runtime::js_message(&e)));
        }
    };

    view! {
        <section aria-labelledby="batch-title">
            <h2 id="batch-title">"Batch extraction"</h2>
            <label for="batch-inputs">"Inputs, one per line (the constraint above applies to each)"</label>
            <textarea id="batch-inputs" class="short" prop:value=text
                on:input=move |ev| set_text.set(event_target_value(&ev))></textarea>
            <label for="batch-file">"…or a .txt, .csv or .jsonl file"</label>
            <input id="batch-file" type="file" accept=".txt,.csv,.jsonl" on:change=load_file/>
            <p>
                <button id="batch-run" on:click=start
                    disabled=move || running.get() || engine.get().is_none()>"Run the batch"</button>
                " "
                <button on:click=move |_| stop.set(true) disabled=move || !running.get()>"Stop"</button>
                " "
                <button id="batch-jsonl" on:click=save_jsonl disabled=move || rows.get().is_empty()>"Download JSONL"</button>
                " "
                <button on:click=save_csv disabled=move || rows.get().is_empty()>"Download CSV"</button>
            </p>
            <progress aria-label="batch progress" max=move || total.get().to_string()
                value=move || rows.get().len().to_string()></progress>
            <p id="batch-status" aria-live="polite">{move || format!("{} of {} done", rows.get().len(), total.get())}</p>
            {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
            <table id="batch-results">
                <thead><tr><th>"input"</th><th>"output"</th><th>"finish"</th><th>"valid"</th></tr></thead>
                <tbody>
                    {move || rows.get().into_iter().map(|r| view! {
                        <tr>
                            <td>{r.input}</td>
                            <td><code>{r.output}</code></td>
                            <td>{r.finish}</td>
                            <td class=if r.valid { "ok" } else { "error" }>{if r.valid { "yes" } else { "no" }}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </section>
    }
}
