# Sourced by every script: where stampo keeps what lives outside the clone.
# STAMPO_ROOT    this clone
# STAMPO_CACHE   tools, the shared cargo target directory, the Python reference venv
# STAMPO_MODELS  the default models (the one documented variable tests read)
STAMPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export STAMPO_ROOT
export STAMPO_CACHE=${STAMPO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stampo}
export STAMPO_MODELS=${STAMPO_MODELS:-$STAMPO_CACHE/models}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$STAMPO_CACHE/target}
# wasm-bindgen and trunk from the set-up; wasm-opt from the npm package binaryen (Debian
# bookworm's binaryen 108 breaks the externref table wasm-bindgen emits).
export PATH="$STAMPO_CACHE/tools/bin:$STAMPO_ROOT/node_modules/.bin:$PATH"
