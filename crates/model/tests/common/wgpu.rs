//! The skip-or-fail rule for tests on the wgpu device, shared by the model's and the engine's
//! tests (the engine's include this file by path).

/// The wgpu device, or `None` (after printing `SKIPPED`) where this build or machine has none;
/// `STAMPO_REQUIRE_WGPU=1` (set by `scripts/test.sh`, whose set-up installs lavapipe) makes a
/// missing adapter a failure.
pub fn wgpu_device() -> Option<stampo_model::Device> {
    match stampo_model::DeviceKind::Wgpu.device() {
        Ok(device) => Some(device),
        Err(e) => {
            assert!(
                std::env::var("STAMPO_REQUIRE_WGPU").as_deref() != Ok("1"),
                "STAMPO_REQUIRE_WGPU=1 but {e}"
            );
            println!("SKIPPED the wgpu device: {e}");
            None
        }
    }
}
