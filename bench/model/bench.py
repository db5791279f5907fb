#!/usr/bin/env python3
"""Prefill and decode tokens/s of stampo (CPU, Flex) beside llama.cpp (llama-cpp-python), same
GGUF, same thread count, same token ids, one run each; prints a table with the ratios.

Usage (from the repository root):
  cargo build --release -p stampo-model --example bench
  $HOME/.cache/stampo/venv/bin/python bench/model/bench.py [--threads 2] [--prefill 128] [--decode 64] [MODEL ...]

stampo's binary is $CARGO_TARGET_DIR/release/examples/bench (default target/). Models are found
in $STAMPO_MODELS (default $HOME/.cache/stampo/models).
"""
import argparse
import json
import os
import subprocess
import time
from pathlib import Path

import llama_cpp
import llama_cpp.llama
import llama_cpp.llama_cpp


def _without_extra_buffer_types():
    """Model parameters with llama.cpp's extra CPU buffer types (AMX and repacked weights) off.

    On this project's VMs the CPU advertises AMX but faults on it: with them on, llama.cpp
    crashes with a segmentation fault at the first evaluation. The high-level `Llama` class
    has no parameter for it, so its default parameters are patched.
    """
    params = _default_params()
    params.use_extra_bufts = False
    return params


_default_params = llama_cpp.llama_cpp.llama_model_default_params
llama_cpp.llama.llama_cpp.llama_model_default_params = _without_extra_buffer_types

MODELS = [
    "SmolLM2-135M-Instruct.Q4_1.gguf",
    "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "gemma-3-270m-q4_k_m.gguf",
]


def token(i: int, vocab: int) -> int:
    """The same deterministic ids as crates/model/examples/bench.rs."""
    return (i * 7919 + 13) % (min(vocab, 32000) - 100) + 100


def llama_cpp_run(path: Path, threads: int, prefill: int, decode: int) -> dict:
    # n_batch covers the whole context: `scores` has n_batch rows and is indexed by position.
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=prefill + decode + 8, n_batch=prefill + decode + 8,
                          n_threads=threads, n_threads_batch=threads, verbose=False)
    ids = [token(i, llm.n_vocab()) for i in range(prefill)]
    t0 = time.perf_counter()
    llm.eval(ids)
    prefill_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    for _ in range(decode):
        nxt = int(llm.scores[llm.n_tokens - 1].argmax())
        llm.eval([nxt])
    decode_s = time.perf_counter() - t1
    return {"prefill_tok_s": prefill / prefill_s, "decode_tok_s": decode / decode_s}


def stampo_run(binary: Path, path: Path, threads: int, prefill: int, decode: int) -> dict:
    env = dict(os.environ, STAMPO_THREADS=str(threads))
    out = subprocess.run([str(binary), str(path), str(prefill), str(decode), "cpu"],
                         env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prefill", type=int, default=128)
    ap.add_argument("--decode", type=int, default=64)
    ap.add_argument("models", nargs="*", default=MODELS)
    args = ap.parse_args()
    models = Path(os.environ.get("STAMPO_MODELS", Path.home() / ".cache/stampo/models"))
    target = Path(os.environ.get("CARGO_TARGET_DIR", "target"))
    binary = target / "release/examples/bench"
    print(f"threads {args.threads}, prefill {args.prefill} tokens, decode {args.decode} tokens, one run each")
    print(f"{'model':42} {'stampo pp':>10} {'llama pp':>10} {'ratio':>6} {'stampo tg':>10} {'llama tg':>10} {'ratio':>6}  weights/GGUF bytes")
    for name in args.models:
        path = models / name
        if not path.exists():
            print(f"SKIPPED: {name} not found at {path}")
            continue
        ours = stampo_run(binary, path, args.threads, args.prefill, args.decode)
        ref = llama_cpp_run(path, args.threads, args.prefill, args.decode)
        print(f"{name:42} {ours['prefill_tok_s']:10.1f} {ref['prefill_tok_s']:10.1f} "
              f"{ours['prefill_tok_s'] / ref['prefill_tok_s']:6.2f} {ours['decode_tok_s']:10.1f} "
              f"{ref['decode_tok_s']:10.1f} {ours['decode_tok_s'] / ref['decode_tok_s']:6.2f}  "
              f"{ours['weight_bytes']}/{ours['gguf_tensor_bytes']}")


if __name__ == "__main__":
    main()
