#!/usr/bin/env bash
# The main job: sets up what is missing, builds the demo page (web/, with Trunk) and serves it
# with the default model on 127.0.0.1, printing the address.
#
# Usage: scripts/demo.sh [--port N] [--build-only]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# shellcheck source=scripts/env.sh
. "$root/scripts/env.sh"

port=${STAMPO_PORT:-8080} build_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --port) port=$2; shift ;;
    --build-only) build_only=1 ;;
    *) echo "demo: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

scripts/setup.sh apt node bindgen trunk models

t0=$(date +%s)
# The runtime (the npm package's worker and wasm), then the page; the page loads the runtime
# from stampo/ beside it.
scripts/build-wasm.sh
(
  # shellcheck source=scripts/wasm/env.sh
  . scripts/wasm/env.sh
  CARGO_TARGET_DIR="$STAMPO_CACHE/target-wasm" trunk build --offline --config Trunk.toml
)
rm -rf web/dist/stampo
mkdir -p web/dist/stampo/wasm
cp pkg/src/*.js web/dist/stampo/
cp "$STAMPO_CACHE/wasm/release/"stampo_{wasm,threads,webgpu}* web/dist/stampo/wasm/
echo "demo: page built in $(( $(date +%s) - t0 )) s (web/dist)"
[ "$build_only" = 1 ] && exit 0
exec node scripts/lib/serve-demo.mjs web/dist "$STAMPO_MODELS" "$port"
