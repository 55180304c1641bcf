"""sentcl.eval.plots in fresh processes: importing it changes no global matplotlib state, and headless runs need no display."""
import json
import os
import subprocess
import sys

import pytest

PROBE = r"""
import json, sys, matplotlib as mpl
before = {k: v for k, v in mpl.rcParams.copy().items() if k != "backend"}  # reading "backend" would resolve it
import sentcl.eval.plots as P
backend_chosen_at_import = mpl.rcParams._get_backend_or_none() is not None
same_rc = {k: v for k, v in mpl.rcParams.copy().items() if k != "backend"} == before
backend = P.headless_backend()
import numpy as np, pandas as pd
from pathlib import Path
out = Path(sys.argv[1])
res = P.sweep_chart(pd.DataFrame({"x": [1, 2, 3], "avg": [0.5, 0.7, 0.6]}), x="x", path=out/"sweep")
import matplotlib.pyplot as plt
print(json.dumps({"same_rc": same_rc, "backend_chosen_at_import": backend_chosen_at_import, "backend": backend,
                  "pyplot_figures": len(plt.get_fignums()), "files": sorted(p.name for p in out.iterdir())}))
"""

def _probe(tmp_path, **env_changes):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "MPLBACKEND")}
    env.update(env_changes, HF_HUB_OFFLINE="1")
    r = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])

@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="display detection is for Linux")
def test_headless_run_uses_agg_and_writes_both_formats(tmp_path):
    got = _probe(tmp_path)
    assert got["same_rc"] and not got["backend_chosen_at_import"]
    assert got["backend"].lower() == "agg"
    assert got["pyplot_figures"] == 0  # sentcl's figures never enter pyplot's registry
    assert got["files"] == ["sweep.png", "sweep.svg"]

def test_explicit_backend_is_respected(tmp_path):
    got = _probe(tmp_path, MPLBACKEND="svg")
    assert got["backend"].lower() == "svg"


def test_analysis_numbers_need_no_matplotlib():
    "sentcl.eval.analysis and sentcl.eval.error_analysis compute the figures' numbers without importing matplotlib or seaborn."
    code = ("import sys, numpy as np, pandas as pd, sentcl.eval.analysis as A, sentcl.eval.error_analysis as E; "
            "x = np.random.default_rng(0).normal(size=(20, 4)); "
            "A.alignment(x, x + 0.1); A.uniformity(x); E.rank_error_table(x[:, 0], x[:, 1]); "
            "print(sorted(m for m in ('matplotlib', 'seaborn') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[]"
