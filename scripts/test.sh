#!/usr/bin/env bash
# Runs every test of stampo: set-up (skipped where done), the lint gates, the native test
# suite, the wasm32 build, and the browser tests in headless Chromium.
#
# Usage: scripts/test.sh
# Environment: STAMPO_CACHE / STAMPO_MODELS / CARGO_TARGET_DIR (scripts/env.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# shellcheck source=scripts/env.sh
. "$root/scripts/env.sh"
# Tests that need a model or ../shared data fail instead of skipping when it is absent.
export STAMPO_REQUIRE_FIXTURES=1
# The wgpu device's tests fail instead of skipping when no adapter comes up (the set-up installs
# lavapipe, Mesa's Vulkan on the CPU). The Vulkan loader wants a runtime directory.
export STAMPO_REQUIRE_WGPU=1
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}

step_start=0
step() { step_start=$(date +%s); printf '\n== %s\n' "$*"; }
done_step() { printf '== %s: %d s\n' "$1" "$(( $(date +%s) - step_start ))"; }

step "set-up"
scripts/setup.sh apt node bindgen trunk models fuzz
done_step "set-up"

step "cargo fmt --check"
cargo fmt --all --check
done_step "fmt"

step "cargo clippy (all targets, -D warnings)"
cargo clippy --quiet --workspace --all-targets -- -D warnings
done_step "clippy"

step "cargo test (native)"
cargo test --workspace
done_step "cargo test"

step "fuzz the GBNF parser, the schema and the regex compilers (briefly)"
# cargo-fuzz comes from the set-up; libFuzzer's instrumentation needs the nightly toolchain.
if command -v cargo-fuzz >/dev/null && rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  (cd crates/grammar/fuzz && python3 seed.py \
    && cargo +nightly fuzz run gbnf -- -max_total_time=30 -rss_limit_mb=2048 -timeout=10 \
    && cargo +nightly fuzz run json_schema -- -max_total_time=30 -rss_limit_mb=2048 -timeout=10 \
    && cargo +nightly fuzz run regex -- -max_total_time=30 -rss_limit_mb=2048 -timeout=10)
else
  echo "SKIPPED: cargo-fuzz or a nightly toolchain not installed (scripts/setup.sh fuzz)"
fi
done_step "fuzz"

step "kernel tests as wasm32 in Node (the simd128 kernels)"
scripts/test-wasm-kernels.sh
done_step "wasm kernel tests"

step "wasm32 build (the runtime and npm package, then the demo page with Trunk)"
scripts/build-pkg.sh
scripts/demo.sh --build-only
done_step "wasm32 build"

step "browser tests (headless Chromium)"
node --test tests/browser/
done_step "browser tests"
