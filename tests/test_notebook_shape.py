"""tools/notebook_shape.py: the median exported-cell length and the share of exported cells followed by a test, on a
notebook built here whose answer is known, and on the notebook every library notebook copies."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT/"tools"))
import notebook_shape as ns  # noqa: E402


def cell(kind, text): return {"cell_type": kind, "source": text.splitlines(keepends=True), "metadata": {}}


def test_a_notebook_with_a_known_shape(tmp_path):
    nb = {"cells": [
        cell("code", "#| default_exp x"),
        cell("code", "#| export\nimport os\n\nimport sys"),                # 2 lines; followed by a hide cell only
        cell("code", "#| hide\nfrom fastcore.test import test_eq"),
        cell("code", "#|export\ndef f():\n    return 1\n"),               # 2 lines; a test after a markdown cell
        cell("markdown", "`f` in use:"),
        cell("code", "test_eq(f(), 1)"),
        cell("code", "#| exporti\nA = 1\nB = 2\nC = 3\nD = 4"),            # 4 lines; shown, not asserted
        cell("code", "print(A)  # assert nothing"),
        cell("code", "#| export\ndef g(): pass"),                         # 1 line; asserted with a bare assert
        cell("code", "assert g() is None"),
    ]}
    p = tmp_path/"x.ipynb"
    p.write_text(json.dumps(nb))
    s = ns.shape(p)
    assert (s["exported"], s["lines"], s["median"], s["tested"]) == (4, 9, 2, 2)
    assert s["share"] == 0.5 and s["shown"] == 3 and s["shown_share"] == 0.75
    out = subprocess.run([sys.executable, str(ROOT/"tools"/"notebook_shape.py"), str(p)], capture_output=True,
                         text=True, check=True).stdout
    assert out.splitlines()[1].split() == ["x.ipynb", "4", "9", "2", "2", "50%", "75%", "yes", "no"]


def test_the_model_notebooks_meet_the_bar():
    "Issue 24 item 9's four notebooks, the data and launch splits, and the experiments pieces: median <= 12, >= 80% tested."
    names = ["20_encoders", "21_st_modules", "33_methods_supcon", "10_data_layout", "11_data_hub", "12_data_tasks",
             "13_data_corpora", "90_cli", "80_launch_slurm", "81_launch_jobs", "82_launch_batch", "83_launch_cli",
             "63_experiments_power", "61a_experiments_step_model", "62_experiments_costs", "70_experiments_rehearsal_data", "71_experiments_rehearsal",
             "69_catalog_registry", "76a_experiments_listing", "77_experiments_runner", "79_experiments_report", "78_experiments_report_results"]
    for n in names:
        s = ns.shape(ROOT/"nbs"/f"{n}.ipynb")
        assert s["median"] <= ns.MEDIAN_BAR and s["share"] >= ns.TESTED_BAR, (n, s)


def test_every_library_notebook_meets_the_bar():
    "Issue 36: every notebook that exports a module has a median exported cell of <= 12 lines, >= 60% of them shown."
    below = {}
    for n in sorted((ROOT/"nbs").glob("*.ipynb")):
        s = ns.shape(n)
        if s["exported"] and not ns.meets_bar(s): below[n.name] = (s["median"], f"{s['shown_share']:.0%}")
    assert not below, f"library notebooks below the bar (median, shown): {below}"
