#!/usr/bin/env bash
# Builds crates/wasm for wasm32 with Debian's rustc-web (-Zbuild-std), then runs
# wasm-bindgen (--target web) and wasm-opt.
#
# Usage: scripts/build-wasm.sh [--ship] [--out DIR]
#   default  profile `release` (no LTO: the test build), wasm-opt -O1
#   --ship   profile `wasm-release` (fat LTO, one codegen unit, opt-level s), wasm-opt -Oz
# Output: DIR/stampo_wasm.js, DIR/stampo_wasm_bg.wasm (default DIR: $STAMPO_CACHE/wasm/<profile>)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/env.sh
. "$root/scripts/env.sh"

profile=release opt=-O1 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --ship) profile=wasm-release opt=-Oz ;;
    --out) out=$2; shift ;;
    *) echo "build-wasm: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
out=${out:-$STAMPO_CACHE/wasm/$profile}
target_dir="$STAMPO_CACHE/target-wasm"

for tool in /usr/bin/cargo wasm-ld-22 wasm-opt wasm-bindgen; do
  command -v "$tool" >/dev/null || { echo "build-wasm: $tool missing: run scripts/setup.sh" >&2; exit 1; }
done

t0=$(date +%s)
(
  cd "$root"
  # shellcheck source=scripts/wasm/env.sh
  . scripts/wasm/env.sh
  CARGO_TARGET_DIR="$target_dir" cargo build --quiet -p stampo-wasm \
    --target wasm32-unknown-unknown --profile "$profile"
)
t1=$(date +%s)
mkdir -p "$out"
wasm-bindgen --target web --out-dir "$out" --out-name stampo_wasm \
  "$target_dir/wasm32-unknown-unknown/$profile/stampo_wasm.wasm"
wasm-opt "$opt" --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
  --enable-mutable-globals --enable-reference-types --enable-multivalue --enable-simd \
  "$out/stampo_wasm_bg.wasm" -o "$out/stampo_wasm_bg.wasm"
t2=$(date +%s)
size=$(stat -c %s "$out/stampo_wasm_bg.wasm")
gz=$(gzip -9 -c "$out/stampo_wasm_bg.wasm" | wc -c)
echo "build-wasm: $profile: cargo $((t1 - t0)) s, bindgen+opt $((t2 - t1)) s; $size bytes ($gz gzipped) in $out"
