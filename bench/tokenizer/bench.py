#!/usr/bin/env python3
"""Tokenizer throughput, stampo beside llama.cpp in the same run.

Builds ~1 MiB of mixed text from the agreement corpus (English, Italian, Japanese,
Chinese, code, JSON, emoji, whitespace, numbers; deterministic), then for each default
model: the best of N llama_tokenize runs through llama-cpp-python (vocab only, no BOS, no
special parsing) and the best of N Tokenizer::encode runs of the release build, checks
that both produce the same ids, and prints MB/s and the ratio (stampo / llama.cpp). Also
prints stampo's time to parse the header and tensor table.

Needs: pip install llama-cpp-python==0.3.36; the models (scripts/fetch-models.sh).
Usage: python3 bench/tokenizer/bench.py [--runs N] [--json OUT.json]
"""

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures", "tokenizer"))
import corpus  # noqa: E402

MODELS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "qwen2.5": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "gemma3": "gemma-3-270m-q4_k_m.gguf",
}


def mixed_text(size=1 << 20):
    pieces = [t for topic, t, _, _ in corpus.cases() if topic not in ("special_text", "random_special", "long")]
    out, n, i = [], 0, 0
    while n < size:
        t = pieces[i % len(pieces)]
        out.append(t)
        n += len(t.encode()) + 1
        i += 1
    return "\n".join(out)


def chunks(data, size):
    """Pieces of at most `size` bytes cut just after their last newline (as bench_tokenize cuts them)."""
    out, start = [], 0
    while start < len(data):
        end = min(start + size, len(data))
        if end < len(data):
            nl = data.rfind(b"\n", start, end)
            if nl > start:
                end = nl + 1
            else:
                while end > start and (data[end] & 0xC0) == 0x80:
                    end -= 1
        out.append(data[start:end])
        start = end
    return out


def llama_cpp_tokenize(path, text, runs, chunk=None):
    import llama_cpp
    cb = llama_cpp.llama_log_callback(lambda level, text, user: None)
    llama_cpp.llama_log_set(cb, ctypes.c_void_p())
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(path.encode(), params)
    vocab = llama_cpp.llama_model_get_vocab(model)
    data = text.encode()
    pieces = chunks(data, chunk) if chunk else [data]
    n = len(data) + 16
    buf = (llama_cpp.llama_token * n)()
    best = float("inf")
    ids = []
    for _ in range(runs):
        ids = []
        t = time.perf_counter()
        for piece in pieces:
            got = llama_cpp.llama_tokenize(vocab, piece, len(piece), buf, n, False, False)
            ids.extend(buf[:got])
        best = min(best, time.perf_counter() - t)
        if best > 10:
            break  # one run is enough when a run takes this long
    llama_cpp.llama_model_free(model)
    return best, ids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json")
    ap.add_argument("--chunk", type=int, help="encode the text in pieces of at most this many bytes, "
                    "cut after a newline (as prompts come), instead of as one piece")
    args = ap.parse_args()
    models_dir = os.environ.get("STAMPO_MODELS", os.path.expanduser("~/.cache/stampo/models"))
    text = mixed_text()
    subprocess.run(["cargo", "build", "--quiet", "--release", "-p", "stampo-tokenizer", "--example", "bench_tokenize"],
                   cwd=ROOT, check=True)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    exe = os.path.join(target, "release", "examples", "bench_tokenize")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        text_path = os.path.join(tmp, "text.txt")
        with open(text_path, "w", encoding="utf-8") as f:
            f.write(text)
        mb = len(text.encode()) / 1e6
        how = f"in pieces of at most {args.chunk} bytes" if args.chunk else "as one piece"
        print(f"text: {len(text.encode())} bytes of mixed text, {how}; best of {args.runs} runs")
        print(f"{'model':10} {'llama.cpp MB/s':>15} {'stampo MB/s':>12} {'ratio':>6} {'same ids':>9} {'header parse':>13}")
        for name, file in MODELS.items():
            path = os.path.join(models_dir, file)
            if not os.path.exists(path):
                print(f"{name:10} skipped: {path} not present")
                continue
            ref_s, ref_ids = llama_cpp_tokenize(path, text, args.runs, args.chunk)
            ids_path = os.path.join(tmp, f"{name}.ids.json")
            extra = [str(args.chunk)] if args.chunk else []
            out = subprocess.run([exe, path, text_path, str(args.runs), ids_path, *extra], check=True,
                                 capture_output=True, text=True).stdout
            ours = json.loads(out)
            same = json.load(open(ids_path)) == ref_ids
            ratio = ref_s / ours["encode_s"]
            results[name] = {"llama_cpp_mb_s": mb / ref_s, "stampo_mb_s": mb / ours["encode_s"], "ratio": ratio,
                             "same_ids": same, "tokens": len(ref_ids), "parse_header_ms": ours["parse_header_s"] * 1e3,
                             "tokenizer_load_ms": ours["tokenizer_load_s"] * 1e3}
            print(f"{name:10} {mb / ref_s:15.2f} {mb / ours['encode_s']:12.2f} {ratio:6.2f} {str(same):>9} "
                  f"{ours['parse_header_s'] * 1e3:10.2f} ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"bytes": len(text.encode()), "runs": args.runs, "models": results}, f, indent=1)


if __name__ == "__main__":
    main()
