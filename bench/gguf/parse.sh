#!/usr/bin/env bash
# Time to open a GGUF file (header, metadata and tensor table) natively and in wasm (node),
# for each default model present. Native: the release build of
# crates/tokenizer/examples/bench_tokenize (best of 10); wasm: crates/gguf/examples/wasm_parse
# built for wasm32 with Debian's rustc-web (scripts/wasm/env.sh), run by node (best of 10).
#
# Usage: bench/gguf/parse.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=scripts/env.sh
. "$root/scripts/env.sh"
cd "$root"
wasm_target="$STAMPO_CACHE/target-wasm"
(
  # shellcheck source=scripts/wasm/env.sh
  . scripts/wasm/env.sh
  CARGO_TARGET_DIR="$wasm_target" cargo build --quiet --release -p stampo-gguf --example wasm_parse --target wasm32-unknown-unknown
)
cargo build --quiet --release -p stampo-tokenizer --example bench_tokenize
wasm="$wasm_target/wasm32-unknown-unknown/release/examples/wasm_parse.wasm"
native="${CARGO_TARGET_DIR}/release/examples/bench_tokenize"
printf '%-42s %12s %12s\n' model "native ms" "wasm ms"
for f in SmolLM2-135M-Instruct.Q4_1.gguf qwen2.5-coder-0.5b-instruct-q4_k_m.gguf gemma-3-270m-q4_k_m.gguf; do
  path="$STAMPO_MODELS/$f"
  [ -f "$path" ] || { echo "$f: not present (scripts/fetch-models.sh)"; continue; }
  echo "x" > /tmp/stampo-parse-bench.txt
  n=$("$native" "$path" /tmp/stampo-parse-bench.txt 1 /dev/null | python3 -c 'import json,sys; print("%.2f" % (json.load(sys.stdin)["parse_header_s"] * 1e3))')
  w=$(node "$root/bench/gguf/wasm-parse.mjs" "$wasm" "$path")
  printf '%-42s %12s %12s\n' "$f" "$n" "$w"
done
