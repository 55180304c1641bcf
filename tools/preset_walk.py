"""Follow a preset from `sentcl experiments run` to a training (issue 36 item 4), in this process.

`sentcl experiments run liao-table2 --preset cpu-smoke -p arms=["ce"] -p steps=1` is run through `sentcl.cli.main`, its
notebook (papermill, a subprocess) replaced by what the notebook does, here: open the session on the batch's plan and
run it, which trains the one planned run. Under `sys.setprofile` every call of a sentcl function given a preset (an
argument that is a `Preset` or a `TrainingPreset`, or a preset's name given to a parameter
named `name` or for a preset, so that "cpu" given as a device is not one) is recorded with the sentcl module that called
it. Printed: the calls in order, the distinct modules entered, and the climbs back: calls into a module of a higher
layer (a lower index in tests/test_layers.py's LAYERS) than the caller's, counted per call and as distinct edges.

    PYTHONPATH=$PWD HF_HUB_OFFLINE=1 python tools/preset_walk.py [--experiment liao-table2] [--arm ce] [--json FILE]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT/"tests"))
from test_layers import layer_of  # the layer order the import-graph test holds the package to

def _arguments(frame) -> list:
    "(parameter name, value) of what a call was given: its named parameters, then what **kwargs holds."
    code, loc = frame.f_code, frame.f_locals
    n = code.co_argcount + code.co_kwonlyargcount
    out = [(x, loc.get(x)) for x in code.co_varnames[:n]]
    if code.co_flags & 0x08:  # CO_VARKEYWORDS
        kw = loc.get(code.co_varnames[n + bool(code.co_flags & 0x04)])
        if isinstance(kw, dict): out += list(kw.items())
    return out


def _sentcl_module(frame) -> str|None:
    name = frame.f_globals.get("__name__", "") if frame is not None else ""
    return name if name == "sentcl" or name.startswith("sentcl.") else None


def recorder(calls:list):
    "A profile function appending (caller module, module, function) for each sentcl call given a preset."
    from sentcl.experiments.presets import Preset
    from sentcl.train.presets import ALL_PRESETS, TrainingPreset
    def is_preset(k, v):  # a name counts where it is passed as a preset or a name (`get_preset`), not "cpu" as a device
        return (isinstance(v, (Preset, TrainingPreset))  # an experiment's preset, or the training preset it holds
                or (isinstance(v, str) and v in ALL_PRESETS and ("preset" in str(k) or k == "name")))
    def profile(frame, event, arg):
        if event != "call" or (mod := _sentcl_module(frame)) is None: return
        try: given = any(is_preset(k, v) for k, v in _arguments(frame))
        except Exception: return
        if not given: return
        caller = frame.f_back
        while caller is not None and _sentcl_module(caller) is None: caller = caller.f_back
        calls.append((_sentcl_module(caller), mod, frame.f_code.co_name))
    return profile


def in_process_notebook(name, preset, out, parameters, notebooks=None, env=None, started=None) -> dict:
    "What `runner.run_one` has papermill do, here: the notebook's session on the batch's plan, run."
    from sentcl.experiments import runner
    from sentcl.experiments.catalog.registry import get_experiment
    from sentcl.experiments.session import ExperimentSession
    out = Path(out)
    params = {**parameters, "preset": preset, "out": name}
    if (out/name/runner.PLAN_FILE).is_file(): params["plan"] = str(Path(name)/runner.PLAN_FILE)
    cwd = os.getcwd()
    os.chdir(out)  # where the runner starts the notebook
    try:
        s = ExperimentSession(get_experiment(name), log=lambda m: None, **params)  # `experiment_session`
        s.run()
    finally: os.chdir(cwd)
    return {"status": "done", "seconds": 0.0}


def walk(experiment:str="liao-table2", arm:str="ce", preset:str="cpu-smoke") -> list:
    "The preset-carrying calls of `sentcl experiments run EXPERIMENT --preset PRESET -p arms=[ARM] -p steps=1`."
    from sentcl import cli
    from sentcl.experiments import runner
    calls = []
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(sys.stderr):
        real, runner.run_one = runner.run_one, in_process_notebook
        profile = recorder(calls)
        sys.setprofile(profile); threading.setprofile(profile)
        try: status = cli.main(["experiments", "run", experiment, "--preset", preset, "--out", f"{tmp}/batch",
                                "-p", f'arms=["{arm}"]', "-p", "steps=1"])
        finally:
            sys.setprofile(None); threading.setprofile(None)
            runner.run_one = real
    if status: raise SystemExit(f"the batch failed (status {status})")
    return calls


def summary(calls:list) -> dict:
    "Distinct modules entered (in order of first entry) and the climbs back, per call and as distinct edges."
    entered = list(dict.fromkeys(m for _, m, _ in calls))
    climbs = [(c, m, f) for c, m, f in calls if c is not None and layer_of(m) < layer_of(c)]
    return {"calls": len(calls), "modules": entered, "climbs": len(climbs),
            "climb_edges": sorted({(c, m) for c, m, _ in climbs}), "climb_calls": climbs}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--experiment", default="liao-table2")
    ap.add_argument("--arm", default="ce")
    ap.add_argument("--json", default=None, help="also write the calls and the summary here")
    args = ap.parse_args(argv)
    calls = walk(args.experiment, args.arm)
    s = summary(calls)
    print(f"preset walk: sentcl experiments run {args.experiment} --preset cpu-smoke -p arms=[{args.arm}] -p steps=1")
    for c, m, f in calls: print(f"  {c or '-'} -> {m}.{f}{'   (climbs back)' if (c, m, f) in s['climb_calls'] else ''}")
    print(f"modules entered: {len(s['modules'])}")
    for m in s["modules"]: print(f"  {m}")
    print(f"climbs back: {s['climbs']} calls, {len(s['climb_edges'])} distinct edges")
    for c, m in s["climb_edges"]: print(f"  {c} -> {m}")
    if args.json: Path(args.json).write_text(json.dumps({"calls": calls, **s}, indent=1))


if __name__ == "__main__": main()
