#!/usr/bin/env python3
"""Renders templates/ into generated/ from the spec (codegen/kernels.toml).

Usage: gen.py --out DIR [--check]

Every output is a pure function of the spec and the templates: the same inputs give byte-identical
files. Files are only rewritten when their content changes, and files in generated/ that the spec no
longer produces are removed. With --check nothing is written; the exit status is 1 if anything would
change (CI uses this to catch a template edit whose output was not committed).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import kernels_gen  # noqa: E402
import unicode_gen  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GENERATORS = (kernels_gen, unicode_gen)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "generated"))
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()

    outputs = {}
    for gen in GENERATORS:
        for rel, text in gen.render(ROOT).items():
            assert rel not in outputs, f"two generators write {rel}"
            outputs[rel] = text

    changed = []
    for rel, text in sorted(outputs.items()):
        path = os.path.join(args.out, rel)
        old = None
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                old = f.read()
        if old != text:
            changed.append(rel)
            if not args.check:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
    for dirpath, _, files in os.walk(args.out):
        for name in files:
            rel = os.path.relpath(os.path.join(dirpath, name), args.out)
            if rel not in outputs:
                changed.append(rel + " (stale)")
                if not args.check:
                    os.remove(os.path.join(dirpath, name))

    if args.check and changed:
        print("codegen: generated/ is out of date:\n  " + "\n  ".join(changed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
