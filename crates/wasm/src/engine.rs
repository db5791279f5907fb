//! The model in the browser: [`Engine`] loads a GGUF file onto WebGPU (burn's wgpu device,
//! where the browser has an adapter and the module was built with the `webgpu` feature) or
//! onto burn's CPU device (Flex, with `simd128`), and runs llama.cpp- or OpenAI-shaped
//! request bodies through the engine. Its calls return promises, because WebGPU reads logits
//! back only asynchronously; on the CPU they run to the end without yielding, so the npm
//! package runs the engine in a Web Worker and the page never waits on it.
//!
//! [`EngineCore`] holds the logic and is tested natively; [`Engine`] is its JS face.

use std::ops::ControlFlow;

use serde_json::{Value, json};
use stampo_engine::request::custom_json;
use stampo_engine::response::ResponseMeta;
use stampo_engine::timing::Clock;
use stampo_engine::{Error as EngineError, LoadedModel, Request, Streaming};
use stampo_model::{Device, DeviceKind, ModelError};
use stampo_tokenizer::DecodeOptions;
use wasm_bindgen::prelude::*;

use crate::error::{ErrorCode, js_error};

type CoreResult<T> = Result<T, (ErrorCode, String)>;

/// What a request takes from its surroundings: time, and randomness for `seed: -1`.
#[derive(Clone, Copy)]
pub struct RunEnv<'a> {
    pub clock: &'a dyn Clock,
    /// The seed used when the request asks for a random one.
    pub seed: u32,
    /// Seconds since the Unix epoch, for the response's `created`.
    pub now_unix: u64,
}

/// Where a model runs, as the caller asked and as it came out.
#[derive(Clone, Debug)]
pub struct DeviceChoice {
    pub device: Device,
    /// `"webgpu"` or `"cpu"`.
    pub name: &'static str,
    /// Why WebGPU is not used, when `"auto"` fell back to the CPU.
    pub fallback: Option<String>,
}

impl DeviceChoice {
    /// `"cpu"`, `"webgpu"` (an error if it cannot start), or `"auto"` (WebGPU where it starts,
    /// else the CPU, with the reason kept).
    pub async fn choose(requested: &str) -> CoreResult<Self> {
        let cpu = |fallback| {
            DeviceKind::Cpu
                .device()
                .map(|device| DeviceChoice {
                    device,
                    name: "cpu",
                    fallback,
                })
                .map_err(|e| (ErrorCode::DeviceUnavailable, e.to_string()))
        };
        match requested {
            "cpu" => cpu(None),
            "webgpu" | "auto" => match DeviceKind::Wgpu.device_async().await {
                Ok(device) => Ok(DeviceChoice {
                    device,
                    name: "webgpu",
                    fallback: None,
                }),
                Err(e) if requested == "auto" => cpu(Some(e.to_string())),
                Err(e) => Err((ErrorCode::DeviceUnavailable, e.to_string())),
            },
            other => Err((
                ErrorCode::InvalidArgument,
                format!("device must be \"auto\", \"webgpu\" or \"cpu\", got {other:?}"),
            )),
        }
    }
}

/// A loaded model and what it needs to answer requests.
pub struct EngineCore {
    loaded: LoadedModel,
    weight_bytes: usize,
    device: DeviceChoice,
    requests: u64,
}

impl EngineCore {
    /// Loads a whole GGUF file onto `device` with a KV cache of `context_size` positions.
    pub fn load(
        bytes: &[u8],
        context_size: usize,
        device: DeviceChoice,
        progress: &mut (dyn FnMut(usize, usize) + Send),
    ) -> CoreResult<Self> {
        let loaded = LoadedModel::load_reporting(bytes, &device.device, context_size, progress)
            .map_err(|e| (ErrorCode::ModelInvalid, e.to_string()))?;
        let weight_bytes = loaded.source.model().weight_bytes();
        Ok(Self {
            loaded,
            weight_bytes,
            device,
            requests: 0,
        })
    }

    /// `{"name", "architecture", "context_size", "n_vocab", "weight_bytes", "device"}`, and
    /// `"webgpu_fallback"` (why WebGPU was not used) when `"auto"` chose the CPU.
    pub fn info(&self) -> Value {
        let model = self.loaded.source.model();
        json!({
            "name": self.loaded.name,
            "architecture": model.config().architecture,
            "context_size": self.loaded.source.context_size(),
            "n_vocab": model.vocab_size(),
            "weight_bytes": self.weight_bytes,
            "device": self.device.name,
            "webgpu_fallback": self.device.fallback,
        })
    }

    /// Runs one token through the model and forgets it (see [`ModelSource::warm_up`]).
    ///
    /// [`ModelSource::warm_up`]: stampo_engine::ModelSource::warm_up
    pub async fn warm_up(&mut self) -> CoreResult<()> {
        self.loaded.source.warm_up().await.map_err(|e| {
            // Classified as a request's model failure is: a lost device, or a failed pass.
            let (code, message) = request_error(EngineError::Logits(e));
            (code, format!("warm-up: {message}"))
        })
    }

    /// Runs `body` (JSON text) with `custom` (JSON text, may be empty) merged over it.
    /// Streaming bodies send each chunk to `on_chunk`, which returns `true` to stop.
    pub async fn run(
        &mut self,
        body: &str,
        custom: &str,
        env: &RunEnv<'_>,
        on_chunk: &mut dyn FnMut(&Value) -> bool,
        should_stop: Option<&dyn Fn() -> bool>,
    ) -> CoreResult<Value> {
        let RunEnv {
            clock,
            seed,
            now_unix,
        } = *env;
        let mut body: Value = serde_json::from_str(body)
            .map_err(|e| (ErrorCode::InvalidArgument, format!("request body: {e}")))?;
        let mut warnings = Vec::new();
        if let Some(map) = body.as_object_mut() {
            warnings = custom_json::merge_text(map, custom);
        }
        let mut request = Request::from_body(&body).map_err(request_error)?;
        request.warnings.extend(warnings);
        self.requests += 1;
        let meta = ResponseMeta {
            id: format!("stampo-{now_unix}-{}", self.requests),
            created: now_unix,
            model: self.loaded.name.clone(),
        };
        let mut forward = |chunk: &Value| {
            if on_chunk(chunk) {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        };
        let mut streaming = Streaming {
            on_chunk: &mut forward,
            cancel: None,
            should_stop,
            clock,
        };
        let done = self
            .loaded
            .session(false)
            .run_async(&request, &meta, seed, &mut streaming)
            .await
            .map_err(request_error)?;
        Ok(done.response)
    }

    pub fn tokenize(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        self.loaded
            .text
            .tokenizer()
            .encode(text, add_special, parse_special)
    }

    pub fn detokenize(&self, ids: &[u32]) -> CoreResult<String> {
        let tok = self.loaded.text.tokenizer();
        if let Some(&bad) = ids.iter().find(|&&id| id as usize >= tok.n_vocab()) {
            return Err((
                ErrorCode::InvalidArgument,
                format!(
                    "token id {bad} is outside the vocabulary ({} tokens)",
                    tok.n_vocab()
                ),
            ));
        }
        Ok(tok.decode(ids, DecodeOptions::default()))
    }
}

/// Whether the model's error is a lost device (which the caller recovers from by loading
/// the model again, unlike any other failure).
fn is_device_lost(source: &(dyn std::error::Error + 'static)) -> bool {
    matches!(
        source.downcast_ref::<ModelError>(),
        Some(ModelError::DeviceLost { .. })
    )
}

fn request_error(e: EngineError) -> (ErrorCode, String) {
    let code = match &e {
        EngineError::Cancelled => ErrorCode::Cancelled,
        EngineError::Logits(source) if is_device_lost(source.as_ref()) => ErrorCode::DeviceLost,
        EngineError::Schema { .. } => ErrorCode::SchemaRefused,
        EngineError::Grammar { .. } => ErrorCode::GrammarInvalid,
        EngineError::Logits(_)
        | EngineError::Matcher(_)
        | EngineError::LogitsLength { .. }
        | EngineError::EmptyMask { .. }
        | EngineError::Load(_) => ErrorCode::GenerationFailed,
        _ => ErrorCode::InvalidArgument,
    };
    (code, e.to_string())
}

#[wasm_bindgen]
extern "C" {
    /// `performance.now()`, in a page and in a worker alike.
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;
}

struct PerformanceClock;

impl Clock for PerformanceClock {
    fn now_ms(&self) -> f64 {
        performance_now()
    }
}

/// A model loaded in this thread (a Web Worker, in the npm package).
#[wasm_bindgen]
pub struct Engine {
    core: EngineCore,
}

/// The page's upload callback. burn asks for `Send` because a device may load on another
/// thread; this module has one thread (wasm32 without atomics), where the load runs.
struct OnUpload(Option<js_sys::Function>);

// SAFETY: built for wasm32 without the atomics feature, the module has a single thread, so
// the function is called on the thread that made it. (Natively a JS function cannot be made.)
unsafe impl Send for OnUpload {}

/// Loads a whole GGUF file onto `device` (`"auto"`, `"webgpu"` or `"cpu"`). The bytes are
/// copied into the module's memory (and from there to the GPU, on WebGPU); the caller's copy
/// can be dropped once the promise settles. `on_upload(loaded, total)`, when given, is called
/// as the weights go onto the device (in GGUF tensor bytes).
#[wasm_bindgen(js_name = loadEngine)]
pub async fn load_engine(
    bytes: js_sys::Uint8Array,
    context_size: usize,
    device: String,
    on_upload: Option<js_sys::Function>,
) -> Result<Engine, JsValue> {
    let fail = |(code, message): (ErrorCode, String)| js_error(code, &message);
    let device = DeviceChoice::choose(&device).await.map_err(fail)?;
    let on_upload = OnUpload(on_upload);
    let mut progress = move |done: usize, total: usize| {
        if let Some(f) = &on_upload.0 {
            // A progress callback that throws changes nothing about the load.
            let _ = f.call2(
                &JsValue::NULL,
                &(done as f64).into(),
                &(total as f64).into(),
            );
        }
    };
    EngineCore::load(&bytes.to_vec(), context_size, device, &mut progress)
        .map(|core| Engine { core })
        .map_err(fail)
}

#[wasm_bindgen]
impl Engine {
    /// The model's name, architecture, context size, vocabulary size, weight bytes and device,
    /// as JSON text.
    pub fn info(&self) -> String {
        self.core.info().to_string()
    }

    /// Runs a request body (JSON text) with the Custom JSON text merged over it. A streaming
    /// body calls `on_chunk(chunkJson)` for each chunk; a `true` return stops generation.
    /// `abort`, an `Int32Array` over a `SharedArrayBuffer`, is read after every token: a
    /// non-zero first element stops generation (another thread sets it with `Atomics.store`).
    /// Resolves to the response (or, when streaming, the last object) as JSON text. One run
    /// at a time: a call while another is pending is refused by wasm-bindgen's borrow check.
    pub async fn run(
        &mut self,
        body: String,
        custom_json: String,
        on_chunk: js_sys::Function,
        abort: Option<js_sys::Int32Array>,
    ) -> Result<String, JsValue> {
        let stop = move || {
            abort
                .as_ref()
                .is_some_and(|flag| js_sys::Atomics::load(flag, 0).is_ok_and(|v| v != 0))
        };
        let seed = (js_sys::Math::random() * f64::from(u32::MAX)) as u32;
        let now_unix = (js_sys::Date::now() / 1e3) as u64;
        let mut callback = |chunk: &Value| {
            on_chunk
                .call1(&JsValue::NULL, &JsValue::from_str(&chunk.to_string()))
                .map(|v| v.is_truthy())
                // A throwing callback stops generation rather than losing the error silently
                // in a loop that would go on producing tokens nobody reads.
                .unwrap_or(true)
        };
        self.core
            .run(
                &body,
                &custom_json,
                &RunEnv {
                    clock: &PerformanceClock,
                    seed,
                    now_unix,
                },
                &mut callback,
                Some(&stop),
            )
            .await
            .map(|v| v.to_string())
            .map_err(|(code, message)| js_error(code, &message))
    }

    /// Runs one token through the model and forgets it, so the first request does not pay
    /// for compiling the device's kernels (WebGPU). Resolves when done.
    #[wasm_bindgen(js_name = warmUp)]
    pub async fn warm_up(&mut self) -> Result<(), JsValue> {
        self.core
            .warm_up()
            .await
            .map_err(|(code, message)| js_error(code, &message))
    }

    /// Token ids of `text`.
    pub fn tokenize(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        self.core.tokenize(text, add_special, parse_special)
    }

    /// The text of token ids.
    pub fn detokenize(&self, ids: &[u32]) -> Result<String, JsValue> {
        self.core
            .detokenize(ids)
            .map_err(|(code, message)| js_error(code, &message))
    }
}
