# Sourced by every wasm32 build (scripts/build-wasm.sh, the demo's trunk build): Debian's
# rustc-web has the WebAssembly backend but no prebuilt wasm32 standard library, so std is
# built from rust-web-src with -Zbuild-std, which RUSTC_BOOTSTRAP=1 allows on that stable
# compiler. Debian's cargo/rustc (1.96) go first on PATH (after wasm-opt from binaryen's npm
# package): the rustup proxies would win
# otherwise. Environment rather than a config file, so trunk's cargo sees it too.
export PATH="$STAMPO_ROOT/node_modules/.bin:/usr/bin:$PATH"
export RUSTC_BOOTSTRAP=1
export CARGO_UNSTABLE_BUILD_STD=std,panic_abort
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER=wasm-ld-22
# simd128 for the CPU kernels; getrandom's browser backend for crates that need randomness.
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS='-C target-feature=+simd128 --cfg getrandom_backend="wasm_js"'
