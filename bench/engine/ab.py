#!/usr/bin/env python3
"""Two stampo builds on the same constrained requests, alternating: which decodes faster.

Runs `constrained.py`'s extraction cases under their schemas (greedy, `--stats`) with build A
and build B in turn, `--repeat` times each, and prints per model and case the decode tokens/s
of every run, the outputs' agreement and the ratio B / A of the medians. Alternating keeps a
drift of the machine's speed (a busy neighbour) from passing for a difference of the builds.
Not a test: numbers depend on the machine and its load.

    python3 bench/engine/ab.py A_BINARY B_BINARY [--models smollm2,qwen,gemma] [--repeat 3]
        [--device cpu|wgpu] [--cases person,order,listing] [--free]

`--free` runs the same prompts without their schemas (greedy, unconstrained).
"""

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import constrained  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a", help="the stampo binary before")
    ap.add_argument("b", help="the stampo binary after")
    ap.add_argument("--models", default="smollm2,qwen,gemma")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("-n", "--n-predict", type=int, default=96)
    ap.add_argument("--fast-forward", action="store_true", help="run with --fast-forward")
    ap.add_argument("--free", action="store_true", help="run without the schemas")
    ap.add_argument("--device", default="cpu", help="cpu or wgpu (lavapipe here: slow)")
    ap.add_argument("--cases", help="only these cases, by name (default: all)")
    args = ap.parse_args()
    mode = "free" if args.free else "ff" if args.fast_forward else "schema"
    print("| model | case | tokens | A tokens/s | B tokens/s | same output | B / A |")
    print("|---|---|---|---|---|---|---|")
    for key in args.models.split(","):
        model = constrained.MODELS / constrained.MODEL_FILES[key]
        if not model.exists():
            sys.exit(f"{model} is missing: run scripts/setup.sh")
        for case in constrained.CASES:
            if args.cases and case["name"] not in args.cases.split(","):
                continue
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                json.dump(case["schema"], f)
            runs = {"a": [], "b": []}
            for _ in range(args.repeat):
                for which in ("a", "b"):
                    runs[which].append(
                        constrained.run(
                            getattr(args, which), model, case, mode, f.name, args.n_predict,
                            args.device,
                        )
                    )
            Path(f.name).unlink()
            speed = {w: [r["tok_s"] for r in rs] for w, rs in runs.items()}
            same = len({r["text"] for r in runs["a"] + runs["b"]}) == 1
            ratio = statistics.median(speed["b"]) / statistics.median(speed["a"])
            fmt = lambda xs: ", ".join(f"{x:.1f}" for x in xs)  # noqa: E731
            print(
                f"| {key} | {case['name']} | {runs['a'][0]['tokens']} | {fmt(speed['a'])} | "
                f"{fmt(speed['b'])} | {'yes' if same else 'NO'} | {ratio:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
