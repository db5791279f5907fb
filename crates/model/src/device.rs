//! Choosing where the model runs: the device is picked at run time, the code is the same.

use burn::tensor::Device;

use crate::error::{ModelError, Result};

/// The devices stampo runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceKind {
    /// burn's Flex backend: pure-Rust CPU (native, and wasm's fallback).
    #[default]
    Cpu,
    /// burn's wgpu backend: WebGPU in the browser, Vulkan/Metal natively.
    Wgpu,
}

impl DeviceKind {
    /// Parses `cpu` or `wgpu`.
    pub fn parse(name: &str) -> Result<DeviceKind> {
        match name {
            "cpu" | "flex" => Ok(DeviceKind::Cpu),
            "wgpu" | "gpu" => Ok(DeviceKind::Wgpu),
            other => Err(ModelError::DeviceUnavailable(other.to_string())),
        }
    }

    /// The burn device. The CPU path never initialises wgpu; the wgpu path asks for an adapter
    /// now, so a machine without one gets an error here rather than a panic later.
    pub fn device(self) -> Result<Device> {
        match self {
            DeviceKind::Cpu => Ok(Device::flex()),
            #[cfg(feature = "wgpu")]
            DeviceKind::Wgpu => wgpu_device(),
            #[cfg(not(feature = "wgpu"))]
            DeviceKind::Wgpu => Err(ModelError::DeviceUnavailable(
                "wgpu (built without the `wgpu` feature)".to_string(),
            )),
        }
    }
}

/// The process's wgpu device, set up on first use. burn's wgpu runtime can be initialised once
/// per process; later callers (other models, parallel tests) share the device.
#[cfg(feature = "wgpu")]
fn wgpu_device() -> Result<Device> {
    static DEVICE: std::sync::OnceLock<std::result::Result<Device, String>> =
        std::sync::OnceLock::new();
    DEVICE
        .get_or_init(|| Device::wgpu_options().init().map_err(|e| e.to_string()))
        .clone()
        .map_err(|e| ModelError::DeviceUnavailable(format!("wgpu ({e})")))
}
