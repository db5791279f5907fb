//! Writes a *miniature* model: SmolLM2-135M's structure (a `llama` of 30 layers, grouped
//! query attention, tied embeddings, every matrix in Q4_1) at tiny widths, so that a decoding
//! step launches the same kernels as SmolLM2's, each with almost nothing to compute.
//!
//! `cargo run --release -p stampo-model --example miniature -- OUT.gguf`, then
//! `cargo run --release -p stampo-model --features wgpu --example bench -- OUT.gguf 16 256 wgpu`:
//! what a step costs then is the host's work per launch (burn, CubeCL, wgpu) and the driver's,
//! which on the H200 run was about half of a token's time (bench/README.md). The weights are
//! arbitrary but finite; the output is not text.

#[path = "../tests/common/miniature.rs"]
mod miniature;

fn main() {
    let Some(out) = std::env::args().nth(1) else {
        eprintln!("usage: miniature OUT.gguf");
        std::process::exit(2);
    };
    if let Err(e) = std::fs::write(&out, miniature::miniature_gguf()) {
        eprintln!("{out}: {e}");
        std::process::exit(1);
    }
}
