#!/usr/bin/env python3
"""The same constrained extraction through llama.cpp and through stampo, end to end.

For each model and case of `constrained.py`, the case's schema is compiled by
`stampo grammar` into GBNF; llama.cpp (llama-cpp-python's `create_chat_completion`, the
GGUF's own chat template, `temperature=0`, that GBNF as its grammar) and `stampo run --chat
--json-schema --temp 0 --stats` then generate under it. Printed per run: the output of each,
whether they are identical, and each side's time for prompt plus generation (llama.cpp: wall
clock of the call; stampo: its prompt and decode timings) with the ratio. Not a test.

    python3 bench/engine/vs_llama_cpp.py [--models smollm2,qwen] [--threads 2]

Gemma 3 is left out: its GGUF has no chat template, and llama-cpp-python would format the
prompt its own way. llama.cpp's extra CPU buffer types are turned off, as in
bench/model/bench.py (this VM faults on AMX).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import llama_cpp
import llama_cpp.llama
import llama_cpp.llama_cpp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from constrained import CASES, MODEL_FILES, MODELS, TARGET  # noqa: E402

_default_params = llama_cpp.llama_cpp.llama_model_default_params


def _without_extra_buffer_types():
    params = _default_params()
    params.use_extra_bufts = False
    return params


llama_cpp.llama.llama_cpp.llama_model_default_params = _without_extra_buffer_types

TIMES = re.compile(r"prompt: (\d+) tokens .* in (\d+) ms .*\ngenerated: (\d+) tokens in (\d+) ms")


def stampo_run(stampo, model, case, schema_file, threads):
    cmd = [str(stampo), "run", "-m", str(model), "--chat", "--system", case["system"], "-p", case["input"],
           "--json-schema", schema_file, "--temp", "0", "-n", "96", "--stats"]
    p = subprocess.run(cmd, capture_output=True, text=True, check=True,
                       env=dict(os.environ, STAMPO_THREADS=str(threads)))
    m = TIMES.search(p.stderr)
    if not m:
        sys.exit(f"no timings in {p.stderr}")
    return p.stdout.strip(), int(m[2]) + int(m[4]), int(m[3])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="smollm2,qwen")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    stampo = TARGET / "release" / "stampo"
    if not stampo.exists():
        sys.exit(f"{stampo} missing: cargo build --release -p stampo-cli")
    print("| model | case | identical | llama.cpp ms | stampo ms | stampo / llama.cpp | tokens (llama.cpp, stampo) | llama.cpp output | stampo output |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key in args.models.split(","):
        model = MODELS / MODEL_FILES[key]
        if not model.exists():
            print(f"SKIPPED {key}: {model} not found")
            continue
        llm = llama_cpp.Llama(model_path=str(model), n_ctx=1024, n_threads=args.threads,
                              n_threads_batch=args.threads, verbose=False)
        for case in CASES:
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                json.dump(case["schema"], f)
                schema_file = f.name
            gbnf = subprocess.run([str(stampo), "grammar", schema_file], capture_output=True, text=True,
                                  check=True).stdout
            gbnf = "\n".join(l for l in gbnf.splitlines() if not re.match(r"^(enforced|ignored|refused|narrowed|/)", l))
            grammar = llama_cpp.LlamaGrammar.from_string(gbnf, verbose=False)
            messages = [{"role": "system", "content": case["system"]}, {"role": "user", "content": case["input"]}]
            llm.reset()
            t = time.perf_counter()
            out = llm.create_chat_completion(messages=messages, grammar=grammar, temperature=0, max_tokens=96)
            ref_ms = (time.perf_counter() - t) * 1e3
            ref = out["choices"][0]["message"]["content"].strip()
            ours, ours_ms, ours_tokens = stampo_run(stampo, model, case, schema_file, args.threads)
            os.unlink(schema_file)
            flat = lambda s: " ".join(s.split())
            print(f"| {key} | {case['name']} | {'yes' if ref == ours else 'no'} | {ref_ms:.0f} | {ours_ms} | "
                  f"{ours_ms / ref_ms:.2f} | {out['usage']['completion_tokens']}, {ours_tokens} | {flat(ref)} | {flat(ours)} |")


if __name__ == "__main__":
    main()
