#!/usr/bin/env python3
"""Constrained against unconstrained decoding, and what fast-forward gains, on live models.

For each model and extraction case, `stampo run --chat --temp 0 --stats` runs three ways:
  free    the same prompt with no constraint (the model is only asked for JSON);
  schema  under the case's JSON Schema (`--json-schema`);
  ff      under the schema with fast-forward (`--fast-forward`: forced text is appended as
          tokens without sampling, fed to the model in one batch).
It prints one row per run (tokens, forward passes, decode time, tokens/s, mask share and p99,
whether the output is JSON valid against the schema, checked with python-jsonschema) and,
per model, the ratios: schema/free decode speed (tokens/s) and ff/schema decode time per
output byte. Not a test: numbers depend on the machine and its load.

    python3 bench/engine/constrained.py [--models smollm2,qwen,gemma] [--repeat 2] [--json OUT]

Needs the release CLI (`cargo build --release -p stampo-cli`) and the models (scripts/setup.sh).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("STAMPO_CACHE", Path.home() / ".cache/stampo"))
MODELS = Path(os.environ.get("STAMPO_MODELS", CACHE / "models"))
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", CACHE / "target"))

MODEL_FILES = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "qwen": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "gemma": "gemma-3-270m-q4_k_m.gguf",
}

CASES = [
    {
        "name": "person",
        "system": "Extract the person as JSON with the keys nome, eta and citta.",
        "input": "Mi chiamo Giulia Rossi, ho 34 anni e vivo a Torino.",
        "schema": {
            "type": "object",
            "properties": {
                "nome": {"type": "string"},
                "eta": {"type": "integer"},
                "citta": {"type": "string"},
            },
            "required": ["nome", "eta", "citta"],
            "additionalProperties": False,
        },
    },
    {
        "name": "order",
        "system": "Extract the order as JSON: customer, items (name, quantity), total.",
        "input": "Anna ordered 2 notebooks and 3 pens; the total was 14.50 euros.",
        "schema": {
            "type": "object",
            "properties": {
                "customer": {"type": "string"},
                "items": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "quantity": {"type": "integer", "minimum": 1},
                        },
                        "required": ["name", "quantity"],
                        "additionalProperties": False,
                    },
                },
                "total": {"type": "number"},
            },
            "required": ["customer", "items", "total"],
            "additionalProperties": False,
        },
    },
    {
        "name": "listing",
        "system": "Extract the listing as JSON: city, rooms, price_eur, balcony (true/false).",
        "input": "Bright flat in Bologna, 3 rooms, balcony over the garden, 1,150 euros a month.",
        "schema": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 40},
                "rooms": {"type": "integer"},
                "price_eur": {"type": "number"},
                "balcony": {"type": "boolean"},
            },
            "required": ["city", "rooms", "price_eur", "balcony"],
            "additionalProperties": False,
        },
    },
]

GENERATED = re.compile(
    r"generated: (\d+) tokens in (\d+) ms \(([\d.]+) tokens/s\), (\d+) fast-forwarded, (\d+) forward passes"
)
MASK = re.compile(r"mask: (\d+) steps, mean ([\d.]+) µs, p99 ([\d.]+) µs, ([\d.]+)% of decode time")


def valid(text, schema):
    try:
        doc = json.loads(text)
    except ValueError:
        return "not JSON"
    try:
        import jsonschema
    except ImportError:
        return "JSON (jsonschema missing)"
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(doc))
    return "valid" if not errors else "invalid"


def run(stampo, model, case, mode, schema_file, n_predict, device="cpu"):
    cmd = [
        str(stampo), "run", "-m", str(model), "--chat", "--system", case["system"],
        "-p", case["input"], "--temp", "0", "-n", str(n_predict), "--stats",
        "--device", device,
    ]
    if mode != "free":
        cmd += ["--json-schema", schema_file]
    if mode == "ff":
        cmd.append("--fast-forward")
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: {p.stderr.strip()}")
    g = GENERATED.search(p.stderr)
    if not g:
        sys.exit(f"no stats in: {p.stderr}")
    m = MASK.search(p.stderr)
    text = p.stdout.strip()
    return {
        "mode": mode,
        "tokens": int(g[1]),
        "decode_ms": int(g[2]),
        "tok_s": float(g[3]),
        "fast_forwarded": int(g[4]),
        "forward_passes": int(g[5]),
        "mask_share_pct": float(m[4]) if m else None,
        "mask_p99_us": float(m[3]) if m else None,
        "bytes": len(text.encode()),
        "verdict": valid(text, case["schema"]),
        "text": text,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="smollm2,qwen,gemma")
    ap.add_argument("--repeat", type=int, default=2, help="runs per mode; the fastest is kept")
    ap.add_argument("-n", "--n-predict", type=int, default=96)
    ap.add_argument("--json", help="write every run here")
    args = ap.parse_args()
    stampo = TARGET / "release" / "stampo"
    if not stampo.exists():
        sys.exit(f"{stampo} missing: cargo build --release -p stampo-cli")
    results = []
    for key in args.models.split(","):
        model = MODELS / MODEL_FILES[key]
        if not model.exists():
            print(f"SKIPPED {key}: {model} not found")
            continue
        print(f"\n### {key} ({model.name}), STAMPO_THREADS={os.environ.get('STAMPO_THREADS', 'all')}\n")
        print("| case | mode | tokens | passes | decode ms | tok/s | ms per byte | mask % | mask p99 µs | output |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        ratios = {"speed": [], "ff": []}
        for case in CASES:
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                json.dump(case["schema"], f)
                schema_file = f.name
            by_mode = {}
            for mode in ("free", "schema", "ff"):
                runs = [run(stampo, model, case, mode, schema_file, args.n_predict) for _ in range(args.repeat)]
                best = min(runs, key=lambda r: r["decode_ms"])
                best["ms_per_byte"] = best["decode_ms"] / max(best["bytes"], 1)
                by_mode[mode] = best
                results.append({"model": key, "case": case["name"], **best})
                mask = "" if best["mask_share_pct"] is None else f"{best['mask_share_pct']:.2f}"
                p99 = "" if best["mask_p99_us"] is None else f"{best['mask_p99_us']:.0f}"
                print(
                    f"| {case['name']} | {mode} | {best['tokens']} | {best['forward_passes']} | {best['decode_ms']} "
                    f"| {best['tok_s']:.1f} | {best['ms_per_byte']:.1f} | {mask} | {p99} | {best['verdict']} |"
                )
            os.unlink(schema_file)
            ratios["speed"].append(by_mode["schema"]["tok_s"] / by_mode["free"]["tok_s"])
            ratios["ff"].append(by_mode["ff"]["ms_per_byte"] / by_mode["schema"]["ms_per_byte"])
        mean = lambda xs: sum(xs) / len(xs)
        print(
            f"\n{key}: constrained/free decode tokens/s {mean(ratios['speed']):.3f} (mean over cases); "
            f"fast-forward/schema decode ms per output byte {mean(ratios['ff']):.3f}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
