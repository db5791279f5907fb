//! The skip-or-fail rule for tests on the wgpu device, shared by the model's and the engine's
//! tests (the engine's include this file by path).

/// The wgpu device, or `None` (after printing `SKIPPED`) where this build or machine has none;
/// `STAMPO_REQUIRE_WGPU=1` (set by `scripts/test.sh`, whose set-up installs lavapipe) makes a
/// missing adapter a failure.
pub fn wgpu_device() -> Option<stampo_model::Device> {
    or_skip(stampo_model::DeviceKind::Wgpu.device())
}

/// A wgpu device set up by `made`, or a skip, by [`wgpu_device`]'s rule.
pub fn or_skip(made: stampo_model::Result<stampo_model::Device>) -> Option<stampo_model::Device> {
    match made {
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
