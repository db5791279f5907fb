//! `STAMPO_WGPU_INLINE=0`: `device::on_device_thread` leaves the work on the caller's thread
//! (launches handed over to CubeCL's device thread one by one, CubeCL's own way), with the same
//! results. Its own test binary: the variable is read once per process.

mod common;

use burn::tensor::{Tensor, TensorData};
use common::wgpu_device;
use stampo_model::device::on_device_thread;
use stampo_model::to_vec;

#[test]
fn with_inline_off_the_work_stays_on_the_callers_thread() {
    // SAFETY: the only test of this binary, run before any thread reads the environment.
    unsafe { std::env::set_var("STAMPO_WGPU_INLINE", "0") };
    let Some(device) = wgpu_device() else { return };
    let (ran_on, out) = on_device_thread(&device, || {
        let a = Tensor::<2>::from_data(TensorData::new(vec![1.0f32, 2.0], [1, 2]), &device);
        Ok((std::thread::current().id(), a.clone() + a))
    })
    .expect("Ok");
    assert_eq!(ran_on, std::thread::current().id());
    assert_eq!(to_vec(out).expect("read back"), [2.0, 4.0]);
}
