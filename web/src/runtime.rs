//! The page's handle on stampo's runtime: the npm package (`pkg/`), served beside the page
//! under `stampo/`, runs the model in its Web Worker; this module binds its JS API.

use js_sys::{JSON, Promise, Reflect};
use serde_json::Value;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

#[wasm_bindgen(raw_module = "./stampo/index.js")]
extern "C" {
    /// A model loaded in the package's worker.
    #[derive(Clone)]
    pub type Stampo;

    #[wasm_bindgen(static_method_of = Stampo, js_name = load, catch)]
    fn load_js(options: &JsValue) -> Result<Promise, JsValue>;

    #[wasm_bindgen(method, js_name = request, catch)]
    fn request_js(this: &Stampo, body: &JsValue, options: &JsValue) -> Result<Promise, JsValue>;

    #[wasm_bindgen(method, getter)]
    fn info(this: &Stampo) -> JsValue;

    #[wasm_bindgen(method)]
    pub fn unload(this: &Stampo) -> Promise;
}

#[wasm_bindgen(raw_module = "./stampo/index.js")]
extern "C" {
    #[wasm_bindgen(js_namespace = cache, js_name = list)]
    fn cache_list_js() -> Promise;

    #[wasm_bindgen(js_namespace = cache, js_name = delete)]
    fn cache_delete_js(url: &str) -> Promise;
}

/// A model the runtime keeps in Cache Storage.
#[derive(Clone, Debug, PartialEq)]
pub struct CachedModel {
    pub url: String,
    pub bytes: f64,
}

/// The cached models, by URL.
pub async fn cached_models() -> Result<Vec<CachedModel>, String> {
    let list = JsFuture::from(cache_list_js())
        .await
        .map_err(|e| js_message(&e))?;
    Ok(to_json(&list)
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|m| CachedModel {
                    url: m["url"].as_str().unwrap_or_default().to_string(),
                    bytes: m["bytes"].as_f64().unwrap_or(0.0),
                })
                .collect()
        })
        .unwrap_or_default())
}

/// Removes the cached copy of `url`.
pub async fn delete_cached(url: &str) -> Result<(), String> {
    JsFuture::from(cache_delete_js(url))
        .await
        .map(|_| ())
        .map_err(|e| js_message(&e))
}

/// A JS error's message (and code, when the runtime gave one).
pub fn js_message(value: &JsValue) -> String {
    let message = Reflect::get(value, &"message".into())
        .ok()
        .and_then(|m| m.as_string())
        .or_else(|| value.as_string())
        .unwrap_or_else(|| format!("{value:?}"));
    match Reflect::get(value, &"code".into())
        .ok()
        .and_then(|c| c.as_string())
    {
        Some(code) => format!("{message} ({code})"),
        None => message,
    }
}

fn to_js(value: &Value) -> Result<JsValue, String> {
    JSON::parse(&value.to_string()).map_err(|e| js_message(&e))
}

fn to_json(value: &JsValue) -> Value {
    JSON::stringify(value)
        .ok()
        .and_then(|s| s.as_string())
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or(Value::Null)
}

/// Loads `model` (a URL string or a `File`) on `device` (`"auto"`, `"webgpu"` or `"cpu"`),
/// reporting `(phase, loaded, total)`.
pub async fn load(
    model: JsValue,
    context_size: u32,
    device: &str,
    on_progress: impl Fn(String, f64, Option<f64>) + 'static,
) -> Result<(Stampo, Value), String> {
    let progress = Closure::<dyn Fn(JsValue)>::new(move |p: JsValue| {
        let get = |k: &str| Reflect::get(&p, &k.into()).ok();
        let phase = get("phase").and_then(|v| v.as_string()).unwrap_or_default();
        let loaded = get("loaded").and_then(|v| v.as_f64()).unwrap_or(0.0);
        let total = get("total").and_then(|v| v.as_f64());
        on_progress(phase, loaded, total);
    });
    let options = js_sys::Object::new();
    let set =
        |k: &str, v: &JsValue| Reflect::set(&options, &k.into(), v).map_err(|e| js_message(&e));
    set("model", &model)?;
    set("contextSize", &JsValue::from(context_size))?;
    set("device", &JsValue::from_str(device))?;
    set("onProgress", progress.as_ref())?;
    let promise = Stampo::load_js(&options).map_err(|e| js_message(&e))?;
    let engine: Stampo = JsFuture::from(promise)
        .await
        .map_err(|e| js_message(&e))?
        .unchecked_into();
    // The package calls onProgress only while loading.
    drop(progress);
    let info = to_json(&engine.info());
    Ok((engine, info))
}

/// Runs `body` with the Custom JSON object merged over it; streamed chunks go to `on_chunk`.
pub async fn request(
    engine: &Stampo,
    body: &Value,
    custom_json: Option<&Value>,
    signal: Option<&web_sys::AbortSignal>,
    on_chunk: impl Fn(Value) + 'static,
) -> Result<Value, String> {
    let chunk = Closure::<dyn Fn(JsValue)>::new(move |c: JsValue| on_chunk(to_json(&c)));
    let options = js_sys::Object::new();
    let set =
        |k: &str, v: &JsValue| Reflect::set(&options, &k.into(), v).map_err(|e| js_message(&e));
    set("onChunk", chunk.as_ref())?;
    if let Some(custom) = custom_json {
        set("customJson", &to_js(custom)?)?;
    }
    if let Some(signal) = signal {
        set("signal", signal)?;
    }
    let promise = engine
        .request_js(&to_js(body)?, &options)
        .map_err(|e| js_message(&e))?;
    let result = JsFuture::from(promise).await;
    drop(chunk);
    result.map(|v| to_json(&v)).map_err(|e| js_message(&e))
}
