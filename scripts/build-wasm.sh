#!/usr/bin/env bash
# Builds crates/wasm for wasm32 with Debian's rustc-web (-Zbuild-std), then runs
# wasm-bindgen (--target web) and wasm-opt. Three runtimes: `stampo_wasm`, the CPU path on one
# thread (and the grammar engine); `stampo_threads`, the same built with wasm threads (atomics
# and a shared memory: its products run on a pool of Web Workers, in cross-origin isolated
# pages); and `stampo_webgpu`, the same engine with burn's wgpu device, about three times
# larger. The package fetches each only when a model needs it.
#
# Usage: scripts/build-wasm.sh [--ship] [--out DIR] [--only wasm|threads|webgpu]
#   default  profile `release` (no LTO: the test build), wasm-opt -O1
#   --ship   profile `wasm-release` (fat LTO, one codegen unit, opt-level s but 3 for the
#            kernels', tensor ops' and grammar's crates: see Cargo.toml), wasm-opt -Oz; the
#            WebGPU runtime with `wasm-release-small` (the same at opt-level z: 2.9 MB gzipped
#            instead of 3.3; its grammar masks run on the CPU while the GPU computes logits)
#   --only   one runtime (while working on it; the package needs all three)
# Output: DIR/stampo_{wasm,threads,webgpu}{.js,_bg.wasm}
#   (default DIR: $STAMPO_CACHE/wasm/<profile>)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/env.sh
. "$root/scripts/env.sh"

profile=release small_profile=release opt=-O1 out="" only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --ship) profile=wasm-release small_profile=wasm-release-small opt=-Oz ;;
    --out) out=$2; shift ;;
    --only) only=$2; shift ;;
    *) echo "build-wasm: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
out=${out:-$STAMPO_CACHE/wasm/$profile}

for tool in /usr/bin/cargo wasm-ld-22 wasm-opt wasm-bindgen; do
  command -v "$tool" >/dev/null || { echo "build-wasm: $tool missing: run scripts/setup.sh" >&2; exit 1; }
done

# The threaded runtime's code generation and link: atomics (std's locks and parking become
# `memory.atomic.wait32`/`notify`), a memory imported from JS and shared, up to 4 GiB (wasm32's
# most; the glue makes it), and the thread-local storage symbols wasm-bindgen's thread support
# calls for each new thread. std is built with them too, so this runtime has a target
# directory of its own.
threads_flags="-C target-feature=+atomics,+bulk-memory,+mutable-globals \
-C link-arg=--shared-memory -C link-arg=--import-memory -C link-arg=--max-memory=4294967296 \
-C link-arg=--export=__wasm_init_tls -C link-arg=--export=__tls_size \
-C link-arg=--export=__tls_align -C link-arg=--export=__tls_base"

mkdir -p "$out"
# build NAME PROFILE TARGET-DIR EXTRA-RUSTFLAGS CARGO-FEATURE-ARGS...: one runtime, through
# cargo, wasm-bindgen and wasm-opt.
build() {
  local name=$1 profile=$2 target_dir=$3 extra_flags=$4
  shift 4
  if [ -n "$only" ] && [ "$name" != "stampo_$only" ]; then return; fi
  local t0 t1 t2 size gz
  t0=$(date +%s)
  (
    cd "$root"
    # shellcheck source=scripts/wasm/env.sh
    . scripts/wasm/env.sh
    if [ -n "$extra_flags" ]; then
      CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="$CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS $extra_flags"
    fi
    # rustc warns for every crate that `atomics` is an unstable target feature: said here once.
    CARGO_TARGET_DIR="$target_dir" cargo build --quiet -p stampo-wasm "$@" \
      --target wasm32-unknown-unknown --profile "$profile" 2> >(grep -v -e "unstable feature specified for \`-Ctarget-feature\`: \`atomics\`" -e "^  |$" -e "= note: this feature is not stably supported" -e "generated 1 warning" -e '^$' >&2)
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
  wasm-opt "$opt" --enable-threads --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
    --enable-mutable-globals --enable-reference-types --enable-multivalue --enable-simd \
    "$out/${name}_bg.wasm" -o "$out/${name}_bg.wasm"
  cp "$built" "$out/.$name.cargo.wasm"
  t2=$(date +%s)
  size=$(stat -c %s "$out/${name}_bg.wasm")
  gz=$(gzip -9 -c "$out/${name}_bg.wasm" | wc -c)
  echo "build-wasm: $name ($profile): cargo $((t1 - t0)) s, bindgen+opt $((t2 - t1)) s; $size bytes ($gz gzipped) in $out"
}

build stampo_wasm "$profile" "$STAMPO_CACHE/target-wasm" "" --no-default-features --features engine
build stampo_threads "$profile" "$STAMPO_CACHE/target-wasm-threads" "$threads_flags" --no-default-features --features engine
build stampo_webgpu "$small_profile" "$STAMPO_CACHE/target-wasm" "" --features webgpu
