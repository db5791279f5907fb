"""Grammar-engine benchmark: XGrammar, llguidance and outlines-core on the same schemas, tokenizer and
token sequences as stampo's Rust side (`cargo run -p stampo-grammar --release --example
bench_masks -- CASES.json`).

Steps:
1. Read the vocabulary of a GGUF model (token strings, types, merges, eos) with the `gguf`
   package. Byte-level BPE (`tokenizer.ggml.model` "gpt2": SmolLM2, Qwen2.5): rebuild the
   tokenizer with `tokenizers`. SentencePiece-style ("llama": Gemma 3): tokenize with
   llama.cpp itself (`llama_cpp`, vocabulary only), the reference for these GGUFs.
2. Pick MaskBench files (`{schema, tests: [{data, valid}]}`), serialise each instance
   compactly (`json.dumps(separators=(",", ":"))`, key order as given) and tokenize it. An
   instance whose tokens do not spell its bytes exactly is dropped and counted (printed, and
   `dropped_instances` in both output files), never benchmarked on wrong tokens.
3. Write CASES.json (vocabulary bytes + token sequences) for the Rust side.
4. For each engine: compile time per schema; per-token mask time while walking each valid
   instance (mask computed before every token, then the token committed); how many valid
   instances were rejected and invalid ones accepted. Write RESULTS.json.

Run (about 10 minutes on a loaded 2-core machine with the defaults):
    $HOME/.cache/stampo/venv/bin/python bench/grammar/peers.py \
        --model ~/.cache/stampo/models/SmolLM2-135M-Instruct.Q4_1.gguf \
        --maskbench ../shared/data/jsonschemabench/maskbench --per-subset 3 \
        --cases bench/grammar/out/cases-smollm2.json --out bench/grammar/out/peers-smollm2.json

Times are wall clock through each engine's Python binding (a call costs ~1 µs of Python on
top of the engine), one thread, masks for one sequence (batch 1).
"""

import argparse
import json
import pathlib
import re
import statistics
import time

import gguf
import numpy as np


def byte_decoder():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def load_vocab(path):
    r = gguf.GGUFReader(path)

    def field(name):
        return r.fields.get(name)

    def strings(f):
        return [bytes(f.parts[i]).decode("utf-8", "replace") for i in f.data]

    tokens = strings(field("tokenizer.ggml.tokens"))
    types = [int(field("tokenizer.ggml.token_type").parts[i][0]) for i in field("tokenizer.ggml.token_type").data]
    merges = strings(field("tokenizer.ggml.merges")) if field("tokenizer.ggml.merges") else []
    eos = int(field("tokenizer.ggml.eos_token_id").parts[-1][0])
    model = strings(field("tokenizer.ggml.model"))[0] if field("tokenizer.ggml.model") else "gpt2"
    # token_type 3 = control, 2 = unknown, 5 = unused: never text.
    special = [i for i, t in enumerate(types) if t in (2, 3, 5)]
    if model == "gpt2":
        dec = byte_decoder()
        raw = [bytes(dec.get(c, ord("?")) for c in t) if types[i] != 4 else t.encode() for i, t in enumerate(tokens)]
    elif model == "llama":
        # A space prefix would make a token sequence spell " " + text, not the text the
        # grammar sees; Gemma 3's GGUF sets it false. Refuse rather than bench skewed tokens.
        prefix = field("tokenizer.ggml.add_space_prefix")
        if prefix is not None and bool(prefix.parts[-1][0]):
            raise SystemExit(f"{path}: tokenizer.ggml.add_space_prefix is set; not supported here")
        raw = [spm_bytes(t, ty) for t, ty in zip(tokens, types)]
    else:
        raise SystemExit(f"only gpt2 (byte-level BPE) and llama (SentencePiece) vocabularies are supported, not {model}")
    return tokens, raw, special, merges, eos, model


def spm_bytes(text, ty):
    """The bytes a SentencePiece token stands for, as llama.cpp's token_to_piece gives them:
    byte tokens (type 6, `<0x0A>`) are that byte, user-defined ones (type 4) their text as
    is, normal ones their text with '▁' (U+2581) as a space. Special tokens keep their text
    (listed as special, so no engine treats it as text)."""
    if ty == 6:
        m = re.fullmatch(r"<0x([0-9A-Fa-f]{2})>", text)
        if not m:
            raise SystemExit(f"byte token {text!r} is not of the form <0xHH>")
        return bytes([int(m[1], 16)])
    if ty == 1:
        return text.replace("\u2581", " ").encode()
    return text.encode()


def hf_tokenizer(tokens, merges):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {t: i for i, t in enumerate(tokens)}
    pairs = [tuple(m.split(" ", 1)) for m in merges]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=pairs, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    return tok


def encoder(path, model, tokens, merges):
    """`str -> token ids` as the model tokenizes text (no BOS, special-token text as text)."""
    if model == "gpt2":
        tok = hf_tokenizer(tokens, merges)
        return lambda s: tok.encode(s).ids
    from llama_cpp import Llama

    llm = Llama(model_path=path, vocab_only=True, verbose=False)
    return lambda s: llm.tokenize(s.encode(), add_bos=False, special=False)


def pick_files(root, per_subset):
    files = []
    for sub in sorted(p for p in pathlib.Path(root).iterdir() if p.is_dir()):
        names = sorted(sub.glob("*.json"))
        step = max(1, len(names) // per_subset)
        files += names[::step][:per_subset]
    return files


def stats(xs):
    if not xs:
        return None
    s = sorted(xs)
    q = lambda p: s[min(len(s) - 1, int(round(p * (len(s) - 1))))]
    return {"n": len(s), "mean": statistics.fmean(s), "p50": q(0.5), "p99": q(0.99), "max": s[-1]}


def run_xgrammar(cases, raw, eos, n_vocab):
    import torch
    import xgrammar as xgr

    info = xgr.TokenizerInfo(raw, xgr.VocabType.RAW, vocab_size=n_vocab, stop_token_ids=[eos])
    compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    bitmask = xgr.allocate_token_bitmask(1, n_vocab)
    out = []
    for c in cases:
        rec = {"name": c["name"]}
        t0 = time.perf_counter()
        try:
            cg = compiler.compile_json_schema(c["schema"], any_whitespace=True, strict_mode=False)
        except Exception as e:  # a refusal, recorded as such
            rec["error"] = str(e)[:200]
            out.append(rec)
            continue
        rec["compile_ms"] = (time.perf_counter() - t0) * 1e3
        times, rejected, accepted_invalid = [], 0, 0
        for toks in c["valid"]:
            m = xgr.GrammarMatcher(cg)
            ok = True
            for t in toks:
                t0 = time.perf_counter()
                m.fill_next_token_bitmask(bitmask)
                times.append((time.perf_counter() - t0) * 1e6)
                if not m.accept_token(t):
                    ok = False
                    break
            if not (ok and m.accept_token(eos)):
                rejected += 1
        for toks in c["invalid"]:
            m = xgr.GrammarMatcher(cg)
            if all(m.accept_token(t) for t in toks) and m.accept_token(eos):
                accepted_invalid += 1
        rec.update(mask_us=stats(times), valid_rejected=rejected, invalid_accepted=accepted_invalid)
        out.append(rec)
    return out


def run_llguidance(cases, raw, special, eos, n_vocab, encode):
    import llguidance as llg

    class Wrap:
        eos_token_id = eos
        bos_token_id = None
        tokens = raw
        special_token_ids = special

        def __call__(self, s):
            return encode(s.decode("utf-8", "replace") if isinstance(s, bytes) else s)

    lt = llg.LLTokenizer(llg.TokenizerWrapper(Wrap()), n_vocab=n_vocab)
    buf = np.zeros((n_vocab + 31) // 32, dtype=np.uint32)
    ptr, size = buf.ctypes.data, buf.nbytes
    out = []
    for c in cases:
        rec = {"name": c["name"]}
        t0 = time.perf_counter()
        grammar = llg.grammar_from("json_schema", json.dumps(c["schema"]))
        m = llg.LLMatcher(lt, grammar, log_level=0)
        if m.is_error():
            rec["error"] = m.get_error()[:200]
            out.append(rec)
            continue
        rec["compile_ms"] = (time.perf_counter() - t0) * 1e3
        times, rejected, accepted_invalid = [], 0, 0
        for toks in c["valid"]:
            m.reset()
            ok = True
            for t in toks:
                t0 = time.perf_counter()
                m.unsafe_compute_mask_ptr(ptr, size)
                times.append((time.perf_counter() - t0) * 1e6)
                if not m.consume_token(t):
                    ok = False
                    break
            if not (ok and m.is_accepting()):
                rejected += 1
        for toks in c["invalid"]:
            m.reset()
            if all(m.consume_token(t) for t in toks) and m.is_accepting():
                accepted_invalid += 1
        rec.update(mask_us=stats(times), valid_rejected=rejected, invalid_accepted=accepted_invalid)
        out.append(rec)
    return out


def run_outlines(cases, raw, special, eos, n_vocab, timeout_s):
    """outlines-core: schema -> regex -> token index (the compile, often seconds), then a
    guide walked as the others are. Each schema runs in a forked child killed after
    `timeout_s` seconds (recorded as a refusal: compiles can take minutes)."""
    import multiprocessing as mp

    from outlines_core import Guide, Index, Vocabulary
    from outlines_core.json_schema import build_regex_from_schema

    skip = set(special) | {eos}
    by_bytes = {}
    for i, t in enumerate(raw):
        if i not in skip:
            by_bytes.setdefault(t, []).append(i)
    vocab = Vocabulary(eos, by_bytes)

    def one(c, conn):
        rec = {"name": c["name"]}
        t0 = time.perf_counter()
        try:
            guide = Guide(Index(build_regex_from_schema(json.dumps(c["schema"])), vocab))
        except Exception as e:  # a refusal, recorded as such
            rec["error"] = str(e)[:200]
            conn.send(rec)
            return
        rec["compile_ms"] = (time.perf_counter() - t0) * 1e3
        buf = np.zeros((n_vocab + 31) // 32, dtype=np.uint32)
        allowed = lambda t: (int(buf[t // 32]) >> (t % 32)) & 1

        def accepts(toks, times=None):
            """Walks an instance (timing each mask into `times`); whether it may end there."""
            guide.reset()
            for t in toks:
                t0 = time.perf_counter()
                guide.write_mask_into(buf.ctypes.data, buf.size, 4)
                if times is not None:
                    times.append((time.perf_counter() - t0) * 1e6)
                if not allowed(t):
                    return False
                guide.advance(t)
            guide.write_mask_into(buf.ctypes.data, buf.size, 4)
            return bool(allowed(eos))

        times = []
        rejected = sum(not accepts(toks, times) for toks in c["valid"])
        accepted_invalid = sum(accepts(toks) for toks in c["invalid"])
        rec.update(mask_us=stats(times), valid_rejected=rejected, invalid_accepted=accepted_invalid)
        conn.send(rec)

    ctx = mp.get_context("fork")
    out = []
    for c in cases:
        parent, child = ctx.Pipe(duplex=False)
        p = ctx.Process(target=one, args=(c, child))
        p.start()
        child.close()
        if parent.poll(timeout_s):
            out.append(parent.recv())
        else:
            out.append({"name": c["name"], "error": f"did not compile and walk within {timeout_s} s"})
        p.kill()
        p.join()
    return out


def summarise(recs):
    ok = [r for r in recs if "compile_ms" in r]
    all_p50 = [r["mask_us"]["p50"] for r in ok if r.get("mask_us")]
    return {
        "compiled": len(ok),
        "refused": len(recs) - len(ok),
        "compile_ms_p50": statistics.median([r["compile_ms"] for r in ok]) if ok else None,
        "mask_p50_us_median_over_schemas": statistics.median(all_p50) if all_p50 else None,
        "valid_rejected": sum(r.get("valid_rejected", 0) for r in ok),
        "invalid_accepted": sum(r.get("invalid_accepted", 0) for r in ok),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--maskbench", required=True)
    ap.add_argument("--per-subset", type=int, default=3)
    ap.add_argument("--cases", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--engines", default="xgrammar,llguidance,outlines")
    ap.add_argument("--outlines-timeout", type=float, default=30.0, help="seconds per schema")
    a = ap.parse_args()

    tokens, raw, special, merges, eos, model = load_vocab(a.model)
    encode = encoder(a.model, model, tokens, merges)

    def tokenize(data):
        """The instance's token ids, or None where they do not spell its UTF-8 bytes exactly
        (a tokenizer or vocabulary mismatch: such tokens would bench the wrong text)."""
        text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
        ids = encode(text)
        return ids if b"".join(raw[i] for i in ids) == text.encode() else None

    cases, dropped = [], 0
    for f in pick_files(a.maskbench, a.per_subset):
        d = json.loads(f.read_text())
        tests = [(t["valid"], tokenize(t["data"])) for t in d["tests"]]
        bad = sum(ids is None for _, ids in tests)
        if bad:
            print(f"WARNING: {f.parent.name}/{f.name}: {bad} instances dropped, their tokens do not spell them", flush=True)
        dropped += bad
        cases.append({
            "name": f"{f.parent.name}/{f.name}",
            "schema": d["schema"],
            "valid": [ids for valid, ids in tests if valid and ids is not None],
            "invalid": [ids for valid, ids in tests if not valid and ids is not None],
        })
    print(f"{len(cases)} files, {dropped} instances dropped (tokens not spelling the text)", flush=True)
    pathlib.Path(a.cases).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(a.cases).write_text(json.dumps({
        "model": pathlib.Path(a.model).name,
        "vocab_hex": [t.hex() for t in raw],
        "special": special,
        "eos": [eos],
        "dropped_instances": dropped,
        "cases": cases,
    }))
    result = {"model": pathlib.Path(a.model).name, "n_vocab": len(raw), "files": len(cases),
              "dropped_instances": dropped, "engines": {}}
    for engine in a.engines.split(","):
        t0 = time.perf_counter()
        if engine == "xgrammar":
            recs = run_xgrammar(cases, raw, eos, len(raw))
        elif engine == "llguidance":
            recs = run_llguidance(cases, raw, special, eos, len(raw), encode)
        elif engine == "outlines":
            recs = run_outlines(cases, raw, special, eos, len(raw), a.outlines_timeout)
        else:
            raise SystemExit(f"unknown engine {engine}")
        result["engines"][engine] = {"summary": summarise(recs), "files": recs}
        print(engine, json.dumps(result["engines"][engine]["summary"]), f"({time.perf_counter() - t0:.0f} s)", flush=True)
    pathlib.Path(a.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
