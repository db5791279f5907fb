#!/usr/bin/env bash
# Runs stampo-quant's kernel tests as wasm32 in Node, where dot products take the simd128
# kernels the browser build uses (the native run tests the AVX2 ones). Built like the shipped
# wasm (Debian rustc-web, -Zbuild-std, +simd128), run by wasm-bindgen-test-runner.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/env.sh
. "$root/scripts/env.sh"
for tool in /usr/bin/cargo wasm-ld-22 wasm-bindgen-test-runner node; do
  command -v "$tool" >/dev/null || { echo "test-wasm-kernels: $tool missing: run scripts/setup.sh" >&2; exit 1; }
done
cd "$root"
# shellcheck source=scripts/wasm/env.sh
. scripts/wasm/env.sh
CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
  CARGO_TARGET_DIR="$STAMPO_CACHE/target-wasm" \
  cargo test -p stampo-quant --test kernels --target wasm32-unknown-unknown --release
