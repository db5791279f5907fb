//! The constraint editor: a JSON Schema compiled as you type into GBNF and a keyword report
//! (or a GBNF grammar checked as you type), highlighted, errors at their line and column,
//! examples to start from, and a document checked against the result.

use leptos::prelude::*;
use serde_json::Value;
use wasm_bindgen::JsCast;

use crate::constraint::{Constraint, EXAMPLES, Mode, YES_NO_GBNF};
use crate::highlight::spans;

const PERSON_DOCUMENT: &str = r#"{"nome":"Giulia","eta":34,"citta":"Torino"}"#;

#[derive(Clone, Debug, PartialEq)]
struct Compiled {
    gbnf: String,
    report: Vec<Value>,
}

fn compile(text: &str, mode: Mode, strict: bool) -> Result<Compiled, String> {
    let (json, is_schema) = match mode {
        Mode::Schema => (stampo_wasm::compile_schema_json(text, strict), true),
        Mode::Gbnf => (stampo_wasm::check_gbnf_json(text), false),
    };
    let value: Value =
        serde_json::from_str(&json.map_err(|(_, message)| message)?).map_err(|e| e.to_string())?;
    Ok(Compiled {
        gbnf: if is_schema {
            value["gbnf"].as_str().unwrap_or_default().to_string()
        } else {
            text.to_string()
        },
        report: value["report"].as_array().cloned().unwrap_or_default(),
    })
}

#[component]
pub fn SchemaPanel(constraint: Constraint) -> impl IntoView {
    let Constraint { text, mode } = constraint;
    let (strict, set_strict) = signal(false);
    let (document, set_document) = signal(PERSON_DOCUMENT.to_string());
    let compiled = Memo::new(move |_| compile(&text.get(), mode.get(), strict.get()));
    let highlight = NodeRef::<leptos::html::Pre>::new();
    let verdict = move || {
        let compiled = compiled.get().ok()?;
        Some(stampo_wasm::gbnf_accepts(&compiled.gbnf, &document.get()).map_err(|(_, m)| m))
    };
    let set_mode = move |m: Mode| {
        if mode.get_untracked() != m {
            mode.set(m);
            text.set(match m {
                Mode::Schema => EXAMPLES[0].1.to_string(),
                Mode::Gbnf => YES_NO_GBNF.to_string(),
            });
        }
    };
    view! {
        <section aria-labelledby="schema-title">
            <h2 id="schema-title">"Constraint"</h2>
            <fieldset class="inline">
                <legend>"Language"</legend>
                <label><input type="radio" name="mode" id="mode-schema"
                    prop:checked=move || mode.get() == Mode::Schema
                    on:change=move |_| set_mode(Mode::Schema)/>" JSON Schema"</label>
                <label><input type="radio" name="mode" id="mode-gbnf"
                    prop:checked=move || mode.get() == Mode::Gbnf
                    on:change=move |_| set_mode(Mode::Gbnf)/>" GBNF grammar"</label>
            </fieldset>
            <div class="columns">
                <div>
                    {move || (mode.get() == Mode::Schema).then(|| view! {
                        <label for="example">"Start from an example"</label>
                        <select id="example" on:change=move |ev| {
                            if let Ok(i) = event_target_value(&ev).parse::<usize>()
                                && let Some((_, schema)) = EXAMPLES.get(i)
                            {
                                text.set((*schema).to_string());
                            }
                        }>
                            {EXAMPLES.iter().enumerate().map(|(i, (label, _))| view! {
                                <option value=i.to_string()>{*label}</option>
                            }).collect_view()}
                        </select>
                    })}
                    <label for="schema-editor">
                        {move || if mode.get() == Mode::Schema { "Schema" } else { "Grammar (GBNF, as llama.cpp reads it)" }}
                    </label>
                    // The highlighted copy lies under the transparent textarea and scrolls
                    // with it; screen readers and the keyboard only meet the textarea.
                    <div class="editor">
                        <pre class="highlight" id="schema-highlight" aria-hidden="true" node_ref=highlight>
                            {move || spans(&text.get(), mode.get()).into_iter().map(|(kind, piece)| view! {
                                <span class=kind.class()>{piece.to_string()}</span>
                            }).collect_view()}
                            // A last line that ends in a newline still has its height.
                            "\n"
                        </pre>
                        <textarea
                            id="schema-editor"
                            spellcheck="false"
                            prop:value=text
                            on:input=move |ev| text.set(event_target_value(&ev))
                            on:scroll=move |ev| {
                                if let (Some(pre), Some(area)) = (
                                    highlight.get(),
                                    ev.target().and_then(|t| t.dyn_into::<web_sys::Element>().ok()),
                                ) {
                                    pre.set_scroll_top(area.scroll_top());
                                    pre.set_scroll_left(area.scroll_left());
                                }
                            }
                        ></textarea>
                    </div>
                    {move || (mode.get() == Mode::Schema).then(|| view! {
                        <label>
                            <input
                                type="checkbox"
                                prop:checked=strict
                                on:change=move |ev| set_strict.set(event_target_checked(&ev))
                            />
                            " strict: refuse keywords the grammar cannot enforce"
                        </label>
                    })}
                    <label for="document">"Check a document"</label>
                    <textarea
                        id="document"
                        class="short"
                        spellcheck="false"
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
                            {(!c.report.is_empty()).then(|| view! {
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
                            })}
                        }.into_any(),
                    }}
                </div>
            </div>
        </section>
    }
}
