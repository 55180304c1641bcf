"""Rewrite a batch folder made before sentcl recorded portable paths: the paths of the machine that made it become
what a batch records now (folders relative to the batch folder, the data folder as $SENTCL_DATA, the checkout, the
virtual environment, the home and temporary folders by label). Text-only: numbers are left exactly as they were.

    python tools/portable_results.py results/cpu --was /work/main/results/cpu --data-was /work/shared/data
"""
import argparse
from pathlib import Path

from sentcl.core import atomic_write
from sentcl.experiments.runner import machine_paths, portable_text


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("batch", help="the batch folder to rewrite (results.json, executed notebooks, log.txt, README.md)")
    p.add_argument("--was", required=True, help="the absolute path the batch folder had when it was made")
    p.add_argument("--data-was", action="append", default=[], help="the absolute data folder it was given (repeatable)")
    p.add_argument("--checkout-was", action="append", default=[], help="other sentcl checkouts it ran from")
    args = p.parse_args(argv)
    was = args.was.rstrip("/")
    paths = {was + "/": "", was: ".", **{d.rstrip("/"): "$SENTCL_DATA" for d in args.data_was},
             **{c.rstrip("/"): "<sentcl>" for c in args.checkout_was}}
    paths.update({k: v for k, v in machine_paths(Path(args.batch)).items() if k not in paths})
    paths = dict(sorted(paths.items(), key=lambda kv: -len(kv[0])))
    changed = 0
    for f in sorted(Path(args.batch).rglob("*")):
        if f.suffix not in (".json", ".ipynb", ".txt", ".md") or "_train" in f.parts: continue
        text = f.read_text(encoding="utf-8")
        if (new := portable_text(text, paths)) != text:
            with atomic_write(f) as g: g.write(new)
            changed += 1
    print(f"{args.batch}: {changed} file(s) rewritten")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
