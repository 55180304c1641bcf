"""Write every experiment notebook's `parameters` cell from `sentcl.experiments.parameters.ExperimentParameters`, and its session
call as `experiment_session(NAME, **notebook_parameters(globals()))`; `--check` only reports notebooks that differ.

    python tools/parameters_cells.py          # rewrite nbs/experiments/*.ipynb
    python tools/parameters_cells.py --check  # exit 1 when a notebook's cell is not the dataclass's
"""
import argparse
import re
import sys
from pathlib import Path

import nbformat

from sentcl.experiments.parameters import parameters_cell

NBS = Path(__file__).resolve().parents[1]/"nbs"/"experiments"
IMPORT = "from sentcl.experiments.parameters import notebook_parameters"


def updated(nb, name: str) -> bool:
    "Bring one notebook's parameters cell and session call in line; True when something changed."
    changed = False
    for cell in nb.cells:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            if cell.source != parameters_cell(name): cell.source, changed = parameters_cell(name), True
        elif cell.cell_type == "code" and f'experiment_session("{name}"' in cell.source:
            src = re.sub(rf'experiment_session\("{re.escape(name)}",(?![^)]*notebook_parameters)[^)]*\)',
                         f'experiment_session("{name}", **notebook_parameters(globals()))', cell.source)
            if IMPORT not in src:  # after the line that imports experiment_session (with whatever else it imports)
                src = re.sub(r"^(from sentcl\.catalog import [^\n]*experiment_session[^\n]*)$", rf"\1\n{IMPORT}", src,
                             count=1, flags=re.M)
            if src != cell.source: cell.source, changed = src, True
    return changed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only report notebooks that differ")
    args = p.parse_args(argv)
    stale = []
    for path in sorted(NBS.glob("*.ipynb")):
        nb = nbformat.read(path, 4)
        if updated(nb, path.stem):
            stale.append(path.name)
            if not args.check: nbformat.write(nb, path)
    verb = "differ from sentcl.experiments.parameters" if args.check else "rewritten"
    print(f"{len(stale)} notebook(s) {verb}" + (f": {', '.join(stale)}" if stale else ""))
    return int(bool(stale) and args.check)


if __name__ == "__main__":
    sys.exit(main())
