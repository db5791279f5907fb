"""Seeds the fuzz corpora from the vendored JSON Schema Test Suite: every schema (for
`json_schema`) and every `pattern`/`patternProperties` regex (for `regex`, with the patterns
of the V8 fixtures in tests/fixtures/regex: anchors inside groups, escapes, look-ahead); and
from the vendored llama.cpp grammars (for `gbnf`).

Run from crates/grammar/fuzz: python3 seed.py
"""

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
SUITE = os.path.join(HERE, "..", "tests", "data", "json-schema-test-suite", "draft2020-12")
GRAMMARS = os.path.join(HERE, "..", "tests", "data", "llama.cpp-grammars")
REGEX_FIXTURES = os.path.join(HERE, "..", "tests", "fixtures", "regex")


def patterns(v, out):
    if isinstance(v, dict):
        for k, x in v.items():
            if k == "pattern" and isinstance(x, str):
                out.add(x)
            if k == "patternProperties" and isinstance(x, dict):
                out.update(x.keys())
            patterns(x, out)
    elif isinstance(v, list):
        for x in v:
            patterns(x, out)


def main():
    schemas, regexes = [], set()
    for root, _, files in os.walk(SUITE):
        for f in sorted(files):
            with open(os.path.join(root, f), encoding="utf-8") as fh:
                for group in json.load(fh):
                    schemas.append(json.dumps(group["schema"]))
                    patterns(group["schema"], regexes)
    for f in sorted(os.listdir(REGEX_FIXTURES)):
        if f.endswith(".json"):
            with open(os.path.join(REGEX_FIXTURES, f), encoding="utf-8") as fh:
                regexes.update(case[0] for case in json.load(fh)["cases"])
    grammars = []
    for f in sorted(os.listdir(GRAMMARS)):
        if f.endswith(".gbnf"):
            with open(os.path.join(GRAMMARS, f), encoding="utf-8") as fh:
                grammars.append(fh.read())
    corpora = (("json_schema", schemas), ("regex", sorted(regexes)), ("gbnf", grammars))
    for name, items in corpora:
        d = os.path.join(HERE, "corpus", name)
        os.makedirs(d, exist_ok=True)
        for i, text in enumerate(items):
            with open(os.path.join(d, f"seed-{i:04}"), "w", encoding="utf-8") as fh:
                fh.write(text)
    print(f"{len(schemas)} schemas, {len(regexes)} patterns, {len(grammars)} grammars")


if __name__ == "__main__":
    main()
