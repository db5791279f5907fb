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

/// A wgpu device on the machine's own adapter granting only WebGPU's default limits (8
/// storage buffers a shader stage, 128 MiB a binding), the least a browser's device may
/// grant: a kernel that binds one buffer too many fails a test here
/// (`tests/webgpu_limits.rs`) rather than in a user's browser. It has the adapter's features
/// (CubeCL compiles for those). Like [`DeviceKind::device`], one per process; an error
/// without the `wgpu` feature.
#[cfg(not(target_family = "wasm"))]
pub fn minimal_webgpu_device() -> Result<Device> {
    #[cfg(feature = "wgpu")]
    {
        static DEVICE: std::sync::OnceLock<std::result::Result<Device, String>> =
            std::sync::OnceLock::new();
        DEVICE
            .get_or_init(minimal_webgpu)
            .clone()
            .map_err(|e| ModelError::DeviceUnavailable(format!("wgpu at WebGPU's limits ({e})")))
    }
    #[cfg(not(feature = "wgpu"))]
    Err(ModelError::DeviceUnavailable(
        "wgpu (built without the `wgpu` feature)".to_string(),
    ))
}

/// See [`minimal_webgpu_device`].
#[cfg(all(feature = "wgpu", not(target_family = "wasm")))]
fn minimal_webgpu() -> std::result::Result<Device, String> {
    use burn::tensor::wgpu::wgpu;
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::PRIMARY;
    device_granting(desc, "stampo minimal WebGPU")
}

/// A wgpu device on wgpu's *noop* backend, for measuring the host's share of a step: every
/// kernel launch goes through burn, CubeCL and wgpu-core as on a GPU (pipelines, bind groups,
/// the memory pool, submissions), but no kernel runs; buffers are host memory, so reads come
/// back (as zeros or whatever was written) and nothing waits on a device. A decoding step's
/// time there is the launch floor a GPU cannot go below, less the driver's own work.
///
/// The adapter states WebGPU's default limits, as the least browser device grants, and no
/// optional features, as Chrome on Linux (no `shader-f16`). Outputs are not a model's: use it
/// for timing only. Like [`DeviceKind::device`], one per process.
#[cfg(all(feature = "noop", not(target_family = "wasm")))]
pub fn noop_wgpu_device() -> Result<Device> {
    use burn::tensor::wgpu::wgpu;
    static DEVICE: std::sync::OnceLock<std::result::Result<Device, String>> =
        std::sync::OnceLock::new();
    let make = || {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = wgpu::Backends::NOOP;
        desc.backend_options.noop = wgpu::NoopBackendOptions {
            enable: true,
            limits: Some(wgpu::Limits::default()),
            features: Some(wgpu::Features::empty()),
            ..Default::default()
        };
        device_granting(desc, "stampo noop")
    };
    DEVICE
        .get_or_init(make)
        .clone()
        .map_err(|e| ModelError::DeviceUnavailable(format!("wgpu noop ({e})")))
}

/// burn's device on the first adapter of an instance made from `desc`, asked for WebGPU's
/// default limits and the adapter's features.
#[cfg(all(feature = "wgpu", not(target_family = "wasm")))]
fn device_granting(
    desc: burn::tensor::wgpu::wgpu::InstanceDescriptor,
    label: &str,
) -> std::result::Result<Device, String> {
    use burn::tensor::wgpu::{WgpuSetup, wgpu};
    let instance = wgpu::Instance::new(desc);
    let adapter = ready_now(instance.request_adapter(&wgpu::RequestAdapterOptions::default()))?
        .map_err(|e| e.to_string())?;
    let (device, queue) = ready_now(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some(label),
        required_features: adapter.features(),
        required_limits: wgpu::Limits::default(),
        ..Default::default()
    }))?
    .map_err(|e| e.to_string())?;
    let backend = adapter.get_info().backend;
    let setup = WgpuSetup {
        instance,
        adapter,
        device,
        queue,
        backend,
    };
    Device::wgpu_options()
        .setup(setup)
        .init()
        .map_err(|e| e.to_string())
}

/// The output of a future that native wgpu resolves at once (adapter and device requests):
/// polled once, with no executor.
#[cfg(all(feature = "wgpu", not(target_family = "wasm")))]
fn ready_now<F: std::future::IntoFuture>(future: F) -> std::result::Result<F::Output, String> {
    let mut future = std::pin::pin!(future.into_future());
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(out) => Ok(out),
        std::task::Poll::Pending => Err("a wgpu request did not resolve at once".to_string()),
    }
}

/// Runs `work` (a forward pass: many kernel launches) where the device's launches are
/// cheapest, and returns its result.
///
/// Natively, CubeCL serves a wgpu device from a thread of its own, and every launch from
/// another thread is a task handed over through a queue of 32 whose sender spins (up to half
/// a million turns) while the queue is full. A decoding step launches hundreds of kernels, so
/// the caller spun through most of the step, on a core the device thread needed whenever the
/// cores were busy: on two cores with a build beside it the host's work of a step took up to
/// 32 times as long (bench/README.md, "Launches from the device's own thread"). On that
/// thread the launches run inline, with no hand-over and no spinning; CubeCL's `exclusive`
/// runs `work` there. With a core to spare the hand-over overlaps the caller's share of a
/// launch with the device thread's, and was 4-10% faster on an idle machine;
/// `STAMPO_WGPU_INLINE=0` keeps it, to measure both on a GPU's host. On the CPU device, and
/// in wasm (where CubeCL has no device thread), `work` runs here. A panic in `work` goes on
/// unwinding here.
#[cfg(not(target_family = "wasm"))]
pub fn on_device_thread<R: Send + 'static>(
    device: &Device,
    work: impl FnOnce() -> Result<R> + Send,
) -> Result<R> {
    #[cfg(feature = "wgpu")]
    if let burn::backend::DispatchDevice::Cube(cube) = device.as_dispatch()
        && inline_launches()
    {
        use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
        return match cube
            .client()
            .exclusive(move || catch_unwind(AssertUnwindSafe(work)))
        {
            Ok(Ok(result)) => result,
            Ok(Err(panic)) => resume_unwind(panic),
            Err(e) => Err(ModelError::DeviceLost {
                reason: match e {
                    cubecl::server::ServerError::Generic { reason, .. } => reason,
                    other => other.to_string(),
                },
            }),
        };
    }
    let _ = device;
    work()
}

/// Whether [`on_device_thread`] moves work to the device's thread: unless
/// `STAMPO_WGPU_INLINE=0`, read once.
#[cfg(all(feature = "wgpu", not(target_family = "wasm")))]
fn inline_launches() -> bool {
    static INLINE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *INLINE.get_or_init(|| std::env::var("STAMPO_WGPU_INLINE").as_deref() != Ok("0"))
}

/// See the native [`on_device_thread`]: in wasm, `work` runs here.
#[cfg(target_family = "wasm")]
pub fn on_device_thread<R>(_device: &Device, work: impl FnOnce() -> Result<R>) -> Result<R> {
    work()
}
