//! The schema panel: a JSON Schema compiled as you type into GBNF and a keyword report,
//! and a document checked against it.

use leptos::prelude::*;
use serde_json::Value;

pub const PERSON: &str = r#"{
  "type": "object",
  "properties": {
    "nome": { "type": "string", "minLength": 1 },
    "eta": { "type": "integer", "minimum": 0, "maximum": 120 },
    "citta": { "type": "string" }
  },
  "required": ["nome", "eta", "citta"],
  "additionalProperties": false
}"#;

const PERSON_DOCUMENT: &str = r#"{"nome":"Giulia","eta":34,"citta":"Torino"}"#;

#[derive(Clone, Debug, PartialEq)]
struct Compiled {
    gbnf: String,
    report: Vec<Value>,
}

fn compile(schema: &str, strict: bool) -> Result<Compiled, String> {
    let json = stampo_wasm::compile_schema_json(schema, strict).map_err(|(_, message)| message)?;
    let value: Value = serde_json::from_str(&json).map_err(|e| e.to_string())?;
    Ok(Compiled {
        gbnf: value["gbnf"].as_str().unwrap_or_default().to_string(),
        report: value["report"].as_array().cloned().unwrap_or_default(),
    })
}

#[component]
pub fn SchemaPanel(schema: RwSignal<String>) -> impl IntoView {
    let set_schema = move |s: String| schema.set(s);
    let (strict, set_strict) = signal(false);
    let (document, set_document) = signal(PERSON_DOCUMENT.to_string());
    let compiled = Memo::new(move |_| compile(&schema.get(), strict.get()));
    let verdict = move || {
        let compiled = compiled.get().ok()?;
        Some(stampo_wasm::gbnf_accepts(&compiled.gbnf, &document.get()).map_err(|(_, m)| m))
    };
    view! {
        <section aria-labelledby="schema-title">
            <h2 id="schema-title">"JSON Schema"</h2>
            <div class="columns">
                <div>
                    <label for="schema-editor">"Schema"</label>
                    <textarea
                        id="schema-editor"
                        spellcheck="false"
                        prop:value=schema
                        on:input=move |ev| set_schema(event_target_value(&ev))
                    ></textarea>
                    <label>
                        <input
                            type="checkbox"
                            prop:checked=strict
                            on:change=move |ev| set_strict.set(event_target_checked(&ev))
                        />
                        " strict: refuse keywords the grammar cannot enforce"
                    </label>
                    <label for="document">"Check a document (compact JSON)"</label>
                    <textarea
                        id="document"
                        spellcheck="false"
                        style="min-height: 4rem"
                        prop:value=document
                        on:input=move |ev| set_document.set(event_target_value(&ev))
                    ></textarea>
                    <p id="verdict" aria-live="polite">
                        {move || match verdict() {
                            None => view! { <span></span> }.into_any(),
                            Some(Ok(true)) => view! { <span class="ok">"The grammar accepts this document."</span> }.into_any(),
                            Some(Ok(false)) => view! { <span class="error">"The grammar rejects this document."</span> }.into_any(),
                            Some(Err(m)) => view! { <span class="error">{m}</span> }.into_any(),
                        }}
                    </p>
                </div>
                <div>
                    {move || match compiled.get() {
                        Err(message) => view! {
                            <p class="error" role="alert" id="schema-error">{message}</p>
                        }.into_any(),
                        Ok(c) => view! {
                            <label for="gbnf">"GBNF (paste into llama.cpp)"</label>
                            <pre id="gbnf">{c.gbnf}</pre>
                            <label>"Keyword report"</label>
                            <table id="report">
                                <thead><tr><th>"pointer"</th><th>"keyword"</th><th>"status"</th></tr></thead>
                                <tbody>
                                    {c.report.into_iter().map(|e| {
                                        let status = e["status"].as_str().unwrap_or_default().to_string();
                                        let reason = e["reason"].as_str().map(|r| format!(" ({r})")).unwrap_or_default();
                                        view! {
                                            <tr>
                                                <td>{format!("#{}", e["pointer"].as_str().unwrap_or_default())}</td>
                                                <td>{e["keyword"].as_str().unwrap_or_default().to_string()}</td>
                                                <td class=format!("status-{status}")>{status.clone()}{reason}</td>
                                            </tr>
                                        }
                                    }).collect_view()}
                                </tbody>
                            </table>
                        }.into_any(),
                    }}
                </div>
            </div>
        </section>
    }
}
