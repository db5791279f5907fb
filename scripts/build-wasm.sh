#!/usr/bin/env bash
# Builds crates/wasm for wasm32 with Debian's rustc-web (-Zbuild-std), then runs
# wasm-bindgen (--target web) and wasm-opt. Two runtimes: `stampo_wasm`, the CPU path (what
# every page loads), and `stampo_webgpu`, the same engine with burn's wgpu device, about three
# times larger, which the package fetches only when a model is loaded on WebGPU.
#
# Usage: scripts/build-wasm.sh [--ship] [--out DIR]
#   default  profile `release` (no LTO: the test build), wasm-opt -O1
#   --ship   profile `wasm-release` (fat LTO, one codegen unit, opt-level s), wasm-opt -Oz; the
#            WebGPU runtime with `wasm-release-small` (the same at opt-level z: 2.9 MB gzipped
#            instead of 3.3; its grammar masks run on the CPU while the GPU computes logits)
# Output: DIR/stampo_wasm{.js,_bg.wasm} and DIR/stampo_webgpu{.js,_bg.wasm}
#   (default DIR: $STAMPO_CACHE/wasm/<profile>)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/env.sh
. "$root/scripts/env.sh"

profile=release small_profile=release opt=-O1 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --ship) profile=wasm-release small_profile=wasm-release-small opt=-Oz ;;
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

mkdir -p "$out"
# build NAME PROFILE CARGO-FEATURE-ARGS...: one runtime, through cargo, wasm-bindgen and
# wasm-opt.
build() {
  local name=$1 profile=$2
  shift 2
  local t0 t1 t2 size gz
  t0=$(date +%s)
  (
    cd "$root"
    # shellcheck source=scripts/wasm/env.sh
    . scripts/wasm/env.sh
    CARGO_TARGET_DIR="$target_dir" cargo build --quiet -p stampo-wasm "$@" \
      --target wasm32-unknown-unknown --profile "$profile"
  )
  t1=$(date +%s)
  # Both runtimes come out of cargo under one name: keep a copy of what each was made from,
  # and skip wasm-bindgen and wasm-opt (a minute for the WebGPU one) when cargo changed nothing.
  local built="$target_dir/wasm32-unknown-unknown/$profile/stampo_wasm.wasm"
  if cmp -s "$built" "$out/.$name.cargo.wasm" && [ -f "$out/${name}_bg.wasm" ] && [ -f "$out/$name.js" ]; then
    echo "build-wasm: $name ($profile): cargo $((t1 - t0)) s, unchanged since the last build in $out"
    return
  fi
  rm -f "$out/.$name.cargo.wasm"
  wasm-bindgen --target web --out-dir "$out" --out-name "$name" "$built"
  wasm-opt "$opt" --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
    --enable-mutable-globals --enable-reference-types --enable-multivalue --enable-simd \
    "$out/${name}_bg.wasm" -o "$out/${name}_bg.wasm"
  cp "$built" "$out/.$name.cargo.wasm"
  t2=$(date +%s)
  size=$(stat -c %s "$out/${name}_bg.wasm")
  gz=$(gzip -9 -c "$out/${name}_bg.wasm" | wc -c)
  echo "build-wasm: $name ($profile): cargo $((t1 - t0)) s, bindgen+opt $((t2 - t1)) s; $size bytes ($gz gzipped) in $out"
}

build stampo_wasm "$profile" --no-default-features --features engine
build stampo_webgpu "$small_profile" --features webgpu
