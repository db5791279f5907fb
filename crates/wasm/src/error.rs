//! Errors at the JS boundary: an `Error` whose `code` a caller can match on.

use wasm_bindgen::JsValue;

/// The stable codes a JS caller sees on `error.code`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    /// The argument is not valid JSON, or not the shape the call expects.
    InvalidArgument,
    /// The JSON Schema cannot be compiled (the message names the JSON pointer).
    SchemaRefused,
    /// The GBNF grammar does not parse or compile (the message names line:column).
    GrammarInvalid,
    /// The bytes are not a readable GGUF file (the message names the byte offset).
    GgufInvalid,
    /// The model file cannot be loaded (architecture, tensor or tokenizer problem).
    ModelInvalid,
    /// The model file does not hash to the SHA-256 the caller gave.
    ChecksumMismatch,
    /// Generation failed after the request was accepted (the model or the matcher).
    GenerationFailed,
    /// The caller stopped the request.
    Cancelled,
    /// The device asked for cannot start (no WebGPU adapter, or a module built without it).
    DeviceUnavailable,
    /// The device stopped working (WebGPU's device was lost); load the model again.
    DeviceLost,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidArgument => "invalid_argument",
            ErrorCode::SchemaRefused => "schema_refused",
            ErrorCode::GrammarInvalid => "grammar_invalid",
            ErrorCode::GgufInvalid => "gguf_invalid",
            ErrorCode::ModelInvalid => "model_invalid",
            ErrorCode::ChecksumMismatch => "checksum_mismatch",
            ErrorCode::GenerationFailed => "generation_failed",
            ErrorCode::Cancelled => "cancelled",
            ErrorCode::DeviceUnavailable => "device_unavailable",
            ErrorCode::DeviceLost => "device_lost",
        }
    }
}

/// A JS `Error` with `message` and `code`. Outside wasm (native tests) the JS value cannot
/// be built, so the caller gets the message only through [`error_message`].
pub(crate) fn js_error(code: ErrorCode, message: &str) -> JsValue {
    let error = js_sys::Error::new(message);
    // Reflect::set only fails on a frozen or non-object target, and `error` is neither.
    let _ = js_sys::Reflect::set(&error, &"code".into(), &code.as_str().into());
    error.into()
}

/// The text a failed call reports: `code: message`. Used by native tests.
pub fn error_message(code: ErrorCode, message: &str) -> String {
    format!("{}: {message}", code.as_str())
}
