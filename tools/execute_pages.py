"""Execute doc pages in place (their own folder as the working directory) and clean them, so that what they show is
what the code computes now: `python tools/execute_pages.py nbs/papers/*.ipynb` after the records, the study's rule or
the cost model change (tests/test_summaries.py fails until the paper pages show the current summaries)."""
import subprocess
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def quiet(nb) -> None:
    "Drop the progress-bar library's notice about a missing widget package: noise, not output."
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs = [o for o in c.outputs if not (o.output_type == "stream" and o.name == "stderr"
                                                       and "TqdmWarning" in o.text)]


def execute(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=1800, resources={"metadata": {"path": str(path.parent)}}).execute()
    quiet(nb)
    nbformat.write(nb, path)
    subprocess.run([str(Path(sys.executable).parent/"nbdev_clean"), "--fname", str(path)], check=True, cwd=ROOT)


if __name__ == "__main__":
    if len(sys.argv) < 2: sys.exit("usage: python tools/execute_pages.py NOTEBOOK [NOTEBOOK ...]")
    for arg in sys.argv[1:]:
        p = Path(arg)
        if not p.is_file(): sys.exit(f"{arg}: no such notebook")
        execute(p.resolve()); print(f"executed {arg}")
