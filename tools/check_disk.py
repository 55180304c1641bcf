"""Say in one line, before `make test` starts, when the disk is too full for it.

The suite trains small models and writes checkpoints, executed notebooks and the docs site; on a disk
with less room than that, dozens of tests fail one by one with "N GB free, but this run needs ...".
This checks the two places the suite writes to, the temporary folder and the repository, up front.

    python tools/check_disk.py [GB]      # GB: the room the suite needs (default 4)
"""
from __future__ import annotations
import shutil, sys, tempfile
from pathlib import Path


def short_of(need_gb: float, places: list[Path]) -> str | None:
    "The one-line complaint for the first place in `places` with under `need_gb` GB free, else None."
    for place in places:
        free = shutil.disk_usage(place).free / 1e9
        if free < need_gb:
            return (f"make test: {place} has {free:.1f} GB free, but the suite needs about {need_gb:g} GB there "
                    f"(models, checkpoints, notebooks); free some space, or point TMPDIR at a roomier disk")
    return None


if __name__ == "__main__":
    try: need = float(sys.argv[1]) if len(sys.argv) > 1 else 4.0
    except ValueError: sys.exit(f"check_disk.py: {sys.argv[1]!r} is not a number of GB; give e.g. 4")
    if problem := short_of(need, [Path(tempfile.gettempdir()), Path.cwd()]): sys.exit(problem)
