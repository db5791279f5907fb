#!/usr/bin/env python3
"""A model's GGUF at its full size from a small "skeleton", for speed runs where the real file
cannot travel (the device machine takes 64 MiB; the default models are 94 to 469 MiB).

  skeleton.py shrink MODEL.gguf OUT.skel [--sample BYTES]
  skeleton.py expand IN.skel OUT.gguf

`shrink` keeps the GGUF's header (metadata, vocabulary, tensor table) byte for byte, and of
each tensor its first whole blocks up to --sample bytes (default 8 KiB: norms and biases are
kept whole). `expand` writes a file of the original size, each tensor filled by repeating its
own first blocks. Every shape, type, offset and byte count is the real model's, so a forward
pass does exactly the same work; the weights' values are not the model's, so its output is
not text and is not compared with anything. Only speed may be measured on an expanded file.

The skeleton is xz-compressed JSON index + bytes; expanding needs only the standard library.
"""
import argparse
import json
import lzma
import struct
import sys
from pathlib import Path


def shrink(model: Path, out: Path, sample: int) -> None:
    import gguf  # only here: the device machine has no gguf package, and expand needs none

    reader = gguf.GGUFReader(str(model))
    data = model.read_bytes()
    tensors = []
    for t in reader.tensors:
        block_elems, block_bytes = gguf.GGML_QUANT_SIZES[t.tensor_type]
        del block_elems
        n_bytes = int(t.n_bytes)
        keep = min(n_bytes, max(block_bytes, sample // block_bytes * block_bytes))
        tensors.append({"name": t.name, "offset": int(t.data_offset), "n_bytes": n_bytes, "keep": keep})
    header_len = min(t["offset"] for t in tensors)
    index = {"size": len(data), "header_len": header_len, "tensors": tensors}
    body = bytearray(data[:header_len])
    for t in tensors:
        body += data[t["offset"]:t["offset"] + t["keep"]]
    meta = json.dumps(index).encode()
    packed = struct.pack("<Q", len(meta)) + meta + bytes(body)
    out.write_bytes(lzma.compress(packed, preset=6))
    print(f"{model.name}: {len(data)} bytes -> skeleton {out.stat().st_size} bytes "
          f"({len(tensors)} tensors, header {header_len})")


def expand(skel: Path, out: Path) -> None:
    packed = lzma.decompress(skel.read_bytes())
    (meta_len,) = struct.unpack_from("<Q", packed)
    index = json.loads(packed[8:8 + meta_len])
    body = memoryview(packed)[8 + meta_len:]
    header_len = index["header_len"]
    with open(out, "wb") as f:
        f.truncate(index["size"])  # gaps between tensors (alignment) stay zero
        f.write(body[:header_len])
        at = header_len
        for t in index["tensors"]:
            sample = bytes(body[at:at + t["keep"]])
            at += t["keep"]
            reps, rest = divmod(t["n_bytes"], len(sample))
            f.seek(t["offset"])
            f.write(sample * reps + sample[:rest])
    print(f"{out}: {index['size']} bytes from {len(index['tensors'])} tensors")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("shrink")
    s.add_argument("model", type=Path)
    s.add_argument("out", type=Path)
    s.add_argument("--sample", type=int, default=8192)
    e = sub.add_parser("expand")
    e.add_argument("skel", type=Path)
    e.add_argument("out", type=Path)
    args = ap.parse_args()
    if args.cmd == "shrink":
        shrink(args.model, args.out, args.sample)
    else:
        expand(args.skel, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
