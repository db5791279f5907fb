//! `device::on_device_thread`: where a forward pass's launches are made. On the wgpu device the
//! work runs on CubeCL's device thread (inline launches, no hand-over queue); on the CPU device
//! it runs on the caller's. Either way its result, its error or its panic comes back as if it had
//! run here, and the device goes on working after a panic.

// The panic test panics on purpose.
#![allow(clippy::panic)]

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::thread::{self, ThreadId};

use burn::tensor::{Tensor, TensorData};
use common::wgpu_device;
use stampo_model::device::on_device_thread;
use stampo_model::{Device, DeviceKind, ModelError, to_vec};

fn here() -> ThreadId {
    thread::current().id()
}

/// `a + b` computed inside `on_device_thread`, read back outside it.
fn sum_through(device: &Device) -> Vec<f32> {
    let out = on_device_thread(device, || {
        let a = Tensor::<2>::from_data(TensorData::new(vec![1.0f32, 2.0, 3.0], [1, 3]), device);
        let b = Tensor::<2>::from_data(TensorData::new(vec![0.5f32, 0.25, -3.0], [1, 3]), device);
        Ok(a + b)
    })
    .expect("the work returns Ok");
    to_vec(out).expect("read back")
}

#[test]
fn cpu_work_runs_on_the_callers_thread() {
    let device = DeviceKind::Cpu.device().expect("the CPU device");
    let ran_on = on_device_thread(&device, || Ok(here())).expect("Ok");
    assert_eq!(ran_on, here());
    assert_eq!(sum_through(&device), [1.5, 2.25, 0.0]);
}

#[test]
fn wgpu_work_runs_on_the_device_thread_and_nests_inline() {
    let Some(device) = wgpu_device() else { return };
    let (outer, inner) = on_device_thread(&device, || {
        // A second call from the device thread runs inline (queueing it there would wait on
        // itself forever).
        let inner = on_device_thread(&device, || Ok(here()))?;
        Ok((here(), inner))
    })
    .expect("Ok");
    assert_ne!(outer, here(), "the work ran on the caller's thread");
    assert_eq!(inner, outer);
    assert_eq!(sum_through(&device), [1.5, 2.25, 0.0]);
}

#[test]
fn an_error_comes_back_as_it_was() {
    let mut devices = vec![DeviceKind::Cpu.device().expect("the CPU device")];
    devices.extend(wgpu_device());
    for device in &devices {
        let result: stampo_model::Result<()> = on_device_thread(device, || {
            Err(ModelError::TokenOutOfRange { id: 7, vocab: 3 })
        });
        assert!(
            matches!(result, Err(ModelError::TokenOutOfRange { id: 7, vocab: 3 })),
            "{result:?}"
        );
    }
}

#[test]
fn a_panic_unwinds_in_the_caller_and_the_device_goes_on() {
    let Some(device) = wgpu_device() else { return };
    let caught = catch_unwind(AssertUnwindSafe(|| {
        on_device_thread(&device, || -> stampo_model::Result<()> {
            panic!("deliberate panic in the work")
        })
    }));
    let payload = caught.expect_err("the panic reaches the caller");
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    assert_eq!(message, "deliberate panic in the work");
    assert_eq!(sum_through(&device), [1.5, 2.25, 0.0]);
}
