"""Rewrite the derived rows (`measured`, `contrasts`) of every committed results.json with today's code.

A results document's runs are its measurements; its `measured` and `contrasts` rows are computed from them
(`sentcl.experiments.report_results.refresh_derived`) and hold no verdict words. Run this after a change to how
rows are derived; tests/test_study_records.py fails while a committed file differs from what this writes.

    python tools/refresh_results.py [--check] [FOLDER ...]     # default: every results/*/ folder
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def committed_results(folders=None) -> list[Path]:
    "Every `<folder>/<experiment>/results.json` under the given folders (default: results/*)."
    folders = [Path(f).resolve() for f in folders] if folders else sorted(p for p in (ROOT / "results").iterdir() if p.is_dir())
    return sorted(p for f in folders for p in f.glob("*/results.json"))


def refreshed(path: Path) -> dict:
    "The document at `path` with its derived rows recomputed by the current code."
    sys.path.insert(0, str(ROOT))
    from sentcl.experiments.report_results import refresh_derived
    return refresh_derived(json.loads(path.read_text()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="*", help="batch folders (default: every folder under results/)")
    ap.add_argument("--check", action="store_true", help="only report files that differ; exit 1 if any")
    args = ap.parse_args(argv)
    from sentcl.core import write_json
    stale = []
    for p in committed_results(args.folders):
        doc, new = json.loads(p.read_text()), refreshed(p)
        if doc == new: continue
        stale.append(p)
        if not args.check: write_json(p, new); print(f"rewritten: {p.relative_to(ROOT)}")
    if args.check and stale: print("stale: " + ", ".join(str(p.relative_to(ROOT)) for p in stale)); return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
