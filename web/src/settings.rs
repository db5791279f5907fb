//! Sampling settings and Custom JSON, as llama.cpp's web UI has them, kept in localStorage.

use leptos::prelude::*;
use serde_json::{Map, Value, json};

const STORAGE_KEY: &str = "stampo.settings.v1";

/// The fields the settings panel edits; every request carries them.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub temperature: f64,
    pub top_k: i64,
    pub top_p: f64,
    pub min_p: f64,
    pub n_predict: i64,
    pub seed: i64,
    pub repeat_penalty: f64,
    /// The Custom JSON text, as typed.
    pub custom_json: String,
}

impl Default for Settings {
    fn default() -> Self {
        // llama.cpp's server defaults, but greedy: extraction wants the likeliest answer.
        Settings {
            temperature: 0.0,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            n_predict: 256,
            seed: -1,
            repeat_penalty: 1.0,
            custom_json: String::new(),
        }
    }
}

impl Settings {
    /// The sampling fields of a request body.
    pub fn body_fields(&self) -> Map<String, Value> {
        let v = json!({
            "temperature": self.temperature,
            "top_k": self.top_k,
            "top_p": self.top_p,
            "min_p": self.min_p,
            "max_tokens": self.n_predict,
            "seed": self.seed,
            "repeat_penalty": self.repeat_penalty,
        });
        v.as_object().cloned().unwrap_or_default()
    }

    /// The Custom JSON object, `None` when empty; an error when it is not a JSON object.
    pub fn custom(&self) -> Result<Option<Value>, String> {
        if self.custom_json.trim().is_empty() {
            return Ok(None);
        }
        match serde_json::from_str::<Value>(&self.custom_json) {
            Ok(v @ Value::Object(_)) => Ok(Some(v)),
            Ok(_) => Err("Custom JSON must be a JSON object".into()),
            Err(e) => Err(format!("Custom JSON: {e}")),
        }
    }

    fn to_json(&self) -> Value {
        let mut v = Value::Object(self.body_fields());
        v["custom_json"] = json!(self.custom_json);
        v
    }

    fn from_json(v: &Value) -> Settings {
        let d = Settings::default();
        Settings {
            temperature: v["temperature"].as_f64().unwrap_or(d.temperature),
            top_k: v["top_k"].as_i64().unwrap_or(d.top_k),
            top_p: v["top_p"].as_f64().unwrap_or(d.top_p),
            min_p: v["min_p"].as_f64().unwrap_or(d.min_p),
            n_predict: v["max_tokens"].as_i64().unwrap_or(d.n_predict),
            seed: v["seed"].as_i64().unwrap_or(d.seed),
            repeat_penalty: v["repeat_penalty"].as_f64().unwrap_or(d.repeat_penalty),
            custom_json: v["custom_json"].as_str().unwrap_or_default().to_string(),
        }
    }

    /// The settings saved by an earlier visit, else the defaults.
    pub fn restore() -> Settings {
        storage()
            .and_then(|s| s.get_item(STORAGE_KEY).ok().flatten())
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .map(|v| Settings::from_json(&v))
            .unwrap_or_default()
    }

    pub fn save(&self) {
        if let Some(s) = storage() {
            let _ = s.set_item(STORAGE_KEY, &self.to_json().to_string());
        }
    }
}

fn storage() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok().flatten()
}

/// A number input bound to one field of the settings.
fn number_field(
    id: &'static str,
    label: &'static str,
    step: &'static str,
    settings: RwSignal<Settings>,
    get: fn(&Settings) -> f64,
    set: fn(&mut Settings, f64),
) -> impl IntoView {
    view! {
        <div class="field">
            <label for=id>{label}</label>
            <input
                id=id
                type="number"
                step=step
                prop:value=move || get(&settings.get()).to_string()
                on:change=move |ev| {
                    if let Ok(v) = event_target_value(&ev).parse::<f64>() {
                        settings.update(|s| set(s, v));
                    }
                }
            />
        </div>
    }
}

#[component]
pub fn SettingsPanel(settings: RwSignal<Settings>) -> impl IntoView {
    Effect::new(move |_| settings.get().save());
    let custom_error = move || settings.get().custom().err();
    view! {
        <section aria-labelledby="settings-title">
            <h2 id="settings-title">"Settings"</h2>
            <div class="fields">
                {number_field("temperature", "temperature", "0.05", settings, |s| s.temperature, |s, v| s.temperature = v)}
                {number_field("top-k", "top_k", "1", settings, |s| s.top_k as f64, |s, v| s.top_k = v as i64)}
                {number_field("top-p", "top_p", "0.01", settings, |s| s.top_p, |s, v| s.top_p = v)}
                {number_field("min-p", "min_p", "0.01", settings, |s| s.min_p, |s, v| s.min_p = v)}
                {number_field("n-predict", "n_predict", "1", settings, |s| s.n_predict as f64, |s, v| s.n_predict = v as i64)}
                {number_field("seed", "seed (-1: random)", "1", settings, |s| s.seed as f64, |s, v| s.seed = v as i64)}
                {number_field("repeat-penalty", "repeat_penalty", "0.05", settings, |s| s.repeat_penalty, |s, v| s.repeat_penalty = v)}
            </div>
            <label for="custom-json">"Custom JSON (merged into every request, as in llama.cpp's web UI)"</label>
            <textarea
                id="custom-json"
                class="short"
                spellcheck="false"
                placeholder=r#"{"json_schema": {...}} or {"grammar": "root ::= ..."}"#
                prop:value=move || settings.get().custom_json
                on:input=move |ev| {
                    let text = event_target_value(&ev);
                    settings.update(|s| s.custom_json = text);
                }
            ></textarea>
            {move || custom_error().map(|e| view! {
                <p class="error" role="alert" id="custom-json-error">{e} " — not applied."</p>
            })}
        </section>
    }
}

/// The request as a `curl` command for a llama.cpp server on its default port.
pub fn as_curl(body: &Value) -> String {
    let text = serde_json::to_string_pretty(body)
        .unwrap_or_default()
        .replace('\'', r"'\''");
    format!(
        "curl http://localhost:8080/v1/chat/completions \\\n  -H 'Content-Type: application/json' \\\n  -d '{text}'"
    )
}
