#!/usr/bin/env bash
# Builds the npm package into pkg/dist: the wasm runtime (scripts/build-wasm.sh) and the JS
# API from pkg/src; then packs it as a registry would serve it, pkg/stampo.tgz (`npm pack`: only
# what package.json's `files` lists), which the sample app's browser test installs.
#
# Usage: scripts/build-pkg.sh [--ship]   (--ship: the LTO build that is published)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/env.sh
. "$root/scripts/env.sh"
dist="$root/pkg/dist"
profile=release
[ "${1:-}" = --ship ] && profile=wasm-release
bash "$root/scripts/build-wasm.sh" "$@"
rm -rf "$dist"
mkdir -p "$dist/wasm"
cp "$STAMPO_CACHE/wasm/$profile/"stampo_{wasm,threads,webgpu}* "$dist/wasm/"
cp "$root"/pkg/src/*.js "$root"/pkg/src/*.d.ts "$dist/"
cp "$root"/pkg/README.md "$dist/"
tarball=$(cd "$root/pkg" && npm pack --silent --pack-destination "$root/pkg" | tail -n 1)
mv "$root/pkg/$tarball" "$root/pkg/stampo.tgz"
echo "build-pkg: $dist ($(du -sh "$dist" | cut -f1)), packed as pkg/stampo.tgz ($(du -h "$root/pkg/stampo.tgz" | cut -f1))"
