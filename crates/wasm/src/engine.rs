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
use sha2::{Digest, Sha256};
use stampo_engine::request::custom_json;
use stampo_engine::response::ResponseMeta;
use stampo_engine::timing::Clock;
use stampo_engine::{Error as EngineError, LoadedModel, Request, Streaming, StreamingLoad};
use stampo_model::quant::pool::Pool;
use stampo_model::{Device, DeviceKind, ModelError};
use stampo_tokenizer::DecodeOptions;
use wasm_bindgen::prelude::*;

use crate::api::performance_now;
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
    fn new(loaded: LoadedModel, device: DeviceChoice) -> Self {
        let weight_bytes = loaded.source.model().weight_bytes();
        Self {
            loaded,
            weight_bytes,
            device,
            requests: 0,
        }
    }

    /// `{"name", "architecture", "context_size", "n_vocab", "weight_bytes", "device",
    /// "threads", "step_graphs"}` (threads: the CPU products' pool, whichever the device;
    /// step_graphs: whether WebGPU's decoding steps replay a recording, null on the CPU), and
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
            "threads": Pool::global().threads(),
            "step_graphs": self.loaded.source.step_graphs(),
        })
    }

    /// Runs what a request runs through the model and forgets it (see
    /// [`ModelSource::warm_up`]).
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

/// A load's failure: the file (`gguf_invalid`) or what it holds (`model_invalid`).
fn load_error(e: EngineError) -> (ErrorCode, String) {
    let code = match e {
        EngineError::Gguf(_) => ErrorCode::GgufInvalid,
        _ => ErrorCode::ModelInvalid,
    };
    (code, e.to_string())
}

/// A model file arriving in pieces ([`StreamingLoad`]), and the checksum of what arrived.
pub struct LoaderCore {
    load: StreamingLoad,
    device: DeviceChoice,
    context_size: usize,
    /// The SHA-256 the caller expects (lowercase hex), and the running hash.
    sha256: Option<(String, Sha256)>,
}

impl LoaderCore {
    /// A loader onto `device`; with `sha256`, the file must hash to it.
    pub fn new(device: DeviceChoice, context_size: usize, sha256: Option<String>) -> Self {
        Self {
            load: StreamingLoad::new(&device.device),
            device,
            context_size,
            sha256: sha256.map(|want| (want.to_ascii_lowercase(), Sha256::new())),
        }
    }

    /// Takes the next piece; `progress(on_device, total)` in tensor bytes.
    pub fn push(&mut self, chunk: &[u8], progress: &mut dyn FnMut(usize, usize)) -> CoreResult<()> {
        if let Some((_, hash)) = &mut self.sha256 {
            hash.update(chunk);
        }
        self.load.push(chunk, progress).map_err(load_error)
    }

    /// The file's bytes so far.
    pub fn bytes_received(&self) -> u64 {
        self.load.bytes_received()
    }

    /// Ends the file: checks the checksum, then builds the engine.
    pub fn finish(self) -> CoreResult<EngineCore> {
        if let Some((want, hash)) = self.sha256 {
            let got: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
            if got != want {
                return Err((
                    ErrorCode::ChecksumMismatch,
                    format!("the file's sha256 is {got}, expected {want}"),
                ));
            }
        }
        let loaded = self.load.finish(self.context_size).map_err(load_error)?;
        Ok(EngineCore::new(loaded, self.device))
    }
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
        | EngineError::Load(_)
        | EngineError::Gguf(_) => ErrorCode::GenerationFailed,
        _ => ErrorCode::InvalidArgument,
    };
    (code, e.to_string())
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

/// The page's upload callback, when it gave one.
struct OnUpload(Option<js_sys::Function>);

impl OnUpload {
    fn call(&self, done: usize, total: usize) {
        if let Some(f) = &self.0 {
            // A progress callback that throws changes nothing about the load.
            let _ = f.call2(
                &JsValue::NULL,
                &(done as f64).into(),
                &(total as f64).into(),
            );
        }
    }
}

/// A model file arriving in pieces, each tensor going onto the device as soon as its bytes
/// are in: the file is never held whole, in JS or in the module. Made by `beginLoad`; feed it
/// with `push`, end it with `finish` (or `free` it to give up).
#[wasm_bindgen]
pub struct ModelLoader {
    core: LoaderCore,
    on_upload: OnUpload,
}

/// Starts loading a model onto `device` (`"auto"`, `"webgpu"` or `"cpu"`) with a KV cache of
/// `context_size` positions. `on_upload(loaded, total)`, when given, is called as the weights
/// go onto the device (in GGUF tensor bytes); with `sha256` (hex), `finish` refuses a file
/// that does not hash to it (code `checksum_mismatch`).
#[wasm_bindgen(js_name = beginLoad)]
pub async fn begin_load(
    context_size: usize,
    device: String,
    on_upload: Option<js_sys::Function>,
    sha256: Option<String>,
) -> Result<ModelLoader, JsValue> {
    let device = DeviceChoice::choose(&device)
        .await
        .map_err(|(code, message)| js_error(code, &message))?;
    Ok(ModelLoader {
        core: LoaderCore::new(device, context_size, sha256),
        on_upload: OnUpload(on_upload),
    })
}

#[wasm_bindgen]
impl ModelLoader {
    /// Takes the next piece of the file (copied into the module and dropped as its tensors
    /// go onto the device). A file that is not GGUF fails at its first piece (`gguf_invalid`).
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), JsValue> {
        let on_upload = &self.on_upload;
        self.core
            .push(chunk, &mut |done, total| on_upload.call(done, total))
            .map_err(|(code, message)| js_error(code, &message))
    }

    /// The file's bytes taken so far.
    #[wasm_bindgen(js_name = bytesReceived)]
    pub fn bytes_received(&self) -> f64 {
        self.core.bytes_received() as f64
    }

    /// Ends the file and makes the engine: `gguf_invalid` when it stopped short (naming the
    /// tensor), `checksum_mismatch`, or `model_invalid` when its tensors do not make a model.
    pub fn finish(self) -> Result<Engine, JsValue> {
        self.core
            .finish()
            .map(|core| Engine { core })
            .map_err(|(code, message)| js_error(code, &message))
    }
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

    /// Runs what a request runs through the model (on WebGPU a prompt and steps under masks;
    /// on the CPU one token) and forgets it, so the first request does not pay for compiling
    /// the device's kernels (WebGPU). Resolves when done.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu() -> DeviceChoice {
        DeviceChoice {
            device: DeviceKind::Cpu.device().expect("cpu device"),
            name: "cpu",
            fallback: None,
        }
    }

    /// The default model and its SHA-256 from `models/models.tsv`, or `None` when the model
    /// has not been fetched (`scripts/fetch-models.sh`) and `STAMPO_REQUIRE_FIXTURES` is not
    /// `1` (before, this test skipped in CI too when the model was absent).
    fn smollm2() -> Option<(Vec<u8>, String)> {
        let file = stampo_test_data::model_bytes(stampo_test_data::SMOLLM2)?;
        let table = include_str!("../../../models/models.tsv");
        let sha = table
            .lines()
            .find(|l| l.starts_with("smollm2\t"))
            .and_then(|l| l.split('\t').nth(2))
            .expect("models.tsv lists smollm2");
        Some((file, sha.to_string()))
    }

    fn stream(file: &[u8], sha256: Option<String>) -> CoreResult<EngineCore> {
        let mut loader = LoaderCore::new(cpu(), 256, sha256);
        for chunk in file.chunks(65_536) {
            loader.push(chunk, &mut |_, _| {})?;
        }
        loader.finish()
    }

    #[test]
    fn a_file_that_is_not_gguf_is_refused_at_its_first_piece() {
        let mut loader = LoaderCore::new(cpu(), 256, None);
        let (code, message) = loader
            .push(b"<html>404 not found</html>", &mut |_, _| {})
            .expect_err("refused");
        assert_eq!(code, ErrorCode::GgufInvalid, "{message}");
    }

    #[test]
    fn the_default_model_streams_in_checked_against_its_sha256() {
        let Some((file, sha)) = smollm2() else {
            return;
        };
        let core = stream(&file, Some(sha.to_uppercase())).expect("loads");
        assert_eq!(core.info()["architecture"], "llama");

        let mut wrong = sha.into_bytes();
        wrong[0] = if wrong[0] == b'0' { b'1' } else { b'0' };
        let wrong = String::from_utf8(wrong).expect("hex");
        let (code, message) = stream(&file, Some(wrong.clone())).err().expect("refused");
        assert_eq!(code, ErrorCode::ChecksumMismatch, "{message}");
        assert!(message.contains(&wrong), "{message}");

        let (code, message) = stream(&file[..file.len() / 2], None)
            .err()
            .expect("a half file is refused");
        assert_eq!(code, ErrorCode::GgufInvalid, "{message}");
        assert!(message.contains("tensor '"), "{message}");
    }
}
