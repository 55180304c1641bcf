"""A batch plans each experiment once (issue 23 item 4): the runner plans and writes the plan file, the notebook's
session reads it and plans nothing; opened alone (no plan file) a session plans as before."""
import json
import sys
from pathlib import Path

import pytest

import sentcl.experiments.runner as runner
from sentcl.experiments.catalog.registry import get_experiment
from sentcl.core import SentclError
from sentcl.experiments.session import ExperimentSession
from sentcl.experiments.plan import plan_runs, read_plan
from sentcl.experiments.runner import PLAN_FILE, plan_experiment, run_batch

FAST = "sncse-figure4"  # the quickest experiment notebook under cpu-smoke
SESSION = sys.modules[ExperimentSession.__module__]  # the module whose plan_runs a session would call


def counting(monkeypatch, module, calls: list):
    "Count `module.plan_runs` calls (by experiment name), still planning."
    real = module.plan_runs
    def plan(exp, *a, **k):
        calls.append(exp.name)
        return real(exp, *a, **k)
    monkeypatch.setattr(module, "plan_runs", plan)


def test_the_runner_plans_each_experiment_once_and_hands_the_notebook_its_plan(tmp_path, monkeypatch):
    calls, injected = [], []
    counting(monkeypatch, runner, calls)
    class Papermill:  # no notebook runs: record the parameters papermill would inject; it "fails" at once
        pid, returncode = 0, 1
        def __init__(self, cmd, **kw): injected.append(json.loads(cmd[cmd.index("-y") + 1]))
        def wait(self): return self.returncode
        def terminate(self): pass
    monkeypatch.setattr(runner.subprocess, "Popen", Papermill)
    names = ["pairsupcon-table5", "liao-table2"]
    run_batch(names, "cpu-smoke", tmp_path/"batch", parameters={"steps": 2}, log=lambda m: None)
    assert calls == names  # once each, nothing else planned
    assert [p["plan"] for p in injected] == [f"{n}/{PLAN_FILE}" for n in names]
    for n in names:  # the file holds the plan the notebook would have made in its folder (cwd: the batch folder)
        assert read_plan(tmp_path/"batch"/n/PLAN_FILE, n, "cpu-smoke", n) == \
            plan_runs(get_experiment(n), "cpu-smoke", Path(n), steps=2)


def test_a_session_given_a_plan_plans_nothing(tmp_path, monkeypatch):
    plan_experiment(FAST, "cpu-smoke", tmp_path, {"steps": 2})
    monkeypatch.chdir(tmp_path)  # where the runner starts the notebook
    def plan(*a, **k): raise AssertionError("the session planned again")
    monkeypatch.setattr(SESSION, "plan_runs", plan)
    s = ExperimentSession(get_experiment(FAST), "cpu-smoke", out=FAST, plan=f"{FAST}/{PLAN_FILE}", log=lambda m: None)
    assert s.runs == read_plan(f"{FAST}/{PLAN_FILE}", FAST, "cpu-smoke", FAST) and len(s.runs) > 1
    assert s.parameters["plan"] == f"{FAST}/{PLAN_FILE}"  # results.json says where its plan came from
    with pytest.raises(SentclError, match="is for sncse-figure4 under cpu-smoke"):  # another preset's notebook
        ExperimentSession(get_experiment(FAST), "cpu", out=FAST, plan=f"{FAST}/{PLAN_FILE}", log=lambda m: None)


def test_a_session_alone_plans_once(tmp_path, monkeypatch):
    calls = []
    counting(monkeypatch, SESSION, calls)
    s = ExperimentSession(get_experiment(FAST), "cpu-smoke", out=str(tmp_path/FAST), steps=2, log=lambda m: None)
    assert calls == [FAST] and s.runs == plan_runs(get_experiment(FAST), "cpu-smoke", tmp_path/FAST, steps=2)


def test_a_whole_batch_runs_its_notebook_on_the_runners_plan(tmp_path, monkeypatch):
    "`sentcl experiments run` of one cpu-smoke experiment: planned once here, the notebook ran on that plan."
    calls = []
    counting(monkeypatch, runner, calls)
    result = run_batch([FAST], "cpu-smoke", tmp_path/"batch", log=lambda m: None)
    assert list(result["status"]) == ["done"], result.to_dict("records")
    assert calls == [FAST]
    doc = json.loads((tmp_path/"batch"/FAST/"results.json").read_text())
    assert doc["parameters"]["plan"] == f"{FAST}/{PLAN_FILE}" and doc["complete"]
    planned = read_plan(tmp_path/"batch"/FAST/PLAN_FILE, FAST, "cpu-smoke", FAST)
    assert [r["describe"] for r in doc["runs"]] == [r.describe() for r in planned]
