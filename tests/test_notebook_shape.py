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
    "Issue 24 item 9's four notebooks, the 02_data and 13d_launchers splits, and 13a-13h: median <= 12, >= 80% tested."
    names = ["01_encoders", "01a_st_modules", "07d_supcon", "02_data", "02a_data_layout", "02b_data_hub",
             "02c_data_tasks", "02d_data_corpora", "11_cli", "13d_launchers", "13d0_launcher_slurm",
             "13d1_launcher_jobs", "13d2_launcher_batch", "13d3_launcher_cli", "13e_power", "13f_costs",
             "13g_rehearsal_data", "13h_rehearsal", "13a_catalog", "13b_runner", "13c_report",
             "13c0_report_results"]
    for n in names:
        s = ns.shape(ROOT/"nbs"/f"{n}.ipynb")
        assert s["median"] <= ns.MEDIAN_BAR and s["share"] >= ns.TESTED_BAR, (n, s)
