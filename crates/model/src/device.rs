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
    /// now, so a machine without one gets an error here rather than a panic later. In a
    /// browser, use [`DeviceKind::device_async`]: WebGPU's adapter comes only asynchronously.
    pub fn device(self) -> Result<Device> {
        match self {
            DeviceKind::Cpu => Ok(Device::flex()),
            #[cfg(all(feature = "wgpu", not(target_family = "wasm")))]
            DeviceKind::Wgpu => wgpu_device(),
            #[cfg(all(feature = "wgpu", target_family = "wasm"))]
            DeviceKind::Wgpu => Err(ModelError::DeviceUnavailable(
                "WebGPU (its adapter comes only asynchronously: use device_async)".to_string(),
            )),
            #[cfg(not(feature = "wgpu"))]
            DeviceKind::Wgpu => Err(ModelError::DeviceUnavailable(
                "wgpu (built without the `wgpu` feature)".to_string(),
            )),
        }
    }

    /// As [`DeviceKind::device`], waiting for WebGPU's adapter and device without blocking.
    pub async fn device_async(self) -> Result<Device> {
        match self {
            #[cfg(all(feature = "wgpu", target_family = "wasm"))]
            DeviceKind::Wgpu => webgpu_device().await,
            _ => self.device(),
        }
    }
}

/// Whether `device` is burn's Flex CPU device.
pub fn is_cpu(device: &Device) -> bool {
    matches!(device.as_dispatch(), burn::backend::DispatchDevice::Flex(_))
}

/// The thread's WebGPU device, set up on first use (a wasm module lives in one thread: the
/// page's or a worker's). As natively, burn's runtime is initialised once, and a failure is
/// remembered: asking again gets the same answer.
#[cfg(all(feature = "wgpu", target_family = "wasm"))]
async fn webgpu_device() -> Result<Device> {
    use std::cell::RefCell;
    thread_local! {
        static DEVICE: RefCell<Option<std::result::Result<Device, String>>> =
            const { RefCell::new(None) };
    }
    let made = match DEVICE.with_borrow(Clone::clone) {
        Some(made) => made,
        None => {
            let made = Device::wgpu_options()
                .init_async()
                .await
                .map_err(|e| e.to_string());
            DEVICE.set(Some(made.clone()));
            made
        }
    };
    made.map_err(|e| ModelError::DeviceUnavailable(format!("WebGPU ({e})")))
}

/// The process's wgpu device, set up on first use. burn's wgpu runtime can be initialised once
/// per process; later callers (other models, parallel tests) share the device.
#[cfg(all(feature = "wgpu", not(target_family = "wasm")))]
fn wgpu_device() -> Result<Device> {
    static DEVICE: std::sync::OnceLock<std::result::Result<Device, String>> =
        std::sync::OnceLock::new();
    DEVICE
        .get_or_init(|| Device::wgpu_options().init().map_err(|e| e.to_string()))
        .clone()
        .map_err(|e| ModelError::DeviceUnavailable(format!("wgpu ({e})")))
}
