"""tools/confirm_run.py and the page's check of a registered run, without any real training.

1. A stand-in run record (the pilot's Liao records moved to the plan's seeds) in a temporary folder is set against
   the registered plan as the findings page does it (`run_matches_plan`): the plan's seeds and precision match; a pilot
   seed or another precision does not.
2. The host check: a bf16 plan refuses a machine without bf16 units, and a machine of another kind than the first.
3. Split over sessions: a stand-in experiment records runs one by one; the run is committed whenever a run is recorded,
   and a stop (SIGTERM, a session ending) stops the experiment and commits what is recorded; training logs are copied
   whole. The session-level resume (records kept, a lacking model trained again from its seed, on `tiny`) is tested in
   nbs/75_experiments_session.ipynb.
"""
import hashlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("confirm_run", ROOT/"tools"/"confirm_run.py")
confirm_run = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(confirm_run)
PLAN = ROOT/"results"/"confirm"/"PLAN.json"


def _stand_in(tmp: Path, seeds: dict, precision: str = "bf16") -> Path:
    "The pilot's liao-table2 record with its seeds renamed by `seeds` (others dropped) and `precision`: a stand-in run."
    doc = json.loads((ROOT/"results"/"cpu"/"liao-table2"/"results.json").read_text())
    doc["runs"] = [{**r, "seed": seeds.get(r["seed"], r["seed"])} for r in doc["runs"] if r["seed"] is None or r["seed"] in seeds]
    doc["parameters"] = {**doc["parameters"], "precision": precision, "seeds": sorted(seeds.values())}
    (tmp/"liao-table2").mkdir(parents=True, exist_ok=True)
    (tmp/"liao-table2"/"results.json").write_text(json.dumps(doc))
    return tmp


def test_a_stand_in_run_is_checked_against_the_registered_plan(tmp_path):
    from sentcl.experiments.catalog.registry import load_plan
    from sentcl.experiments.report_results import collect_results, confirm_status, run_matches_plan
    plan = load_plan(PLAN)
    want = plan.run["experiments"]["liao-table2"]["seeds"]
    docs = collect_results(_stand_in(tmp_path/"ok", {0: want[0], 1: want[1], 2: want[2]}))
    row = run_matches_plan(docs, plan).set_index("experiment").loc["liao-table2"]
    assert (row["matches"], row["seeds run"], row["precision"]) == (True, want[:3], "bf16"), row
    rest = run_matches_plan(docs, plan).set_index("experiment").drop("liao-table2")
    assert rest["matches"].all() and not rest["complete"].any()  # nothing of them run yet
    pilot_seed = collect_results(_stand_in(tmp_path/"pilot", {0: want[0], 1: 1}))  # seed 1 is the pilot's, not the plan's
    assert not run_matches_plan(pilot_seed, plan).set_index("experiment").loc["liao-table2", "matches"]
    fp32 = collect_results(_stand_in(tmp_path/"fp32", {0: want[0]}, precision="fp32"))
    assert not run_matches_plan(fp32, plan).set_index("experiment").loc["liao-table2", "matches"]
    status = confirm_status(plan, docs, "b2b8ff1", hashlib.sha256(PLAN.read_bytes()).hexdigest())
    assert "7 of the 69 runs" in status, status  # the untrained reference, CE and SCL + CE at three seeds each


def _facts(**kw):
    return {"cpu": "stand-in CPU", "cpu_avx512_bf16": False, "cpu_amx": False, **kw}


def test_the_host_check(tmp_path, monkeypatch):
    import sentcl.precision
    plan = json.loads(PLAN.read_text())
    assert plan["run"]["precision"] == "bf16"
    monkeypatch.setattr(sentcl.precision, "machine_facts", lambda: _facts())  # AVX2 only
    with pytest.raises(SystemExit, match="has no bf16 units: the plan trains in bf16"):
        confirm_run.machine_check(plan, tmp_path)
    assert not (tmp_path/"machine.json").exists()
    monkeypatch.setattr(sentcl.precision, "machine_facts", lambda: _facts(cpu_amx=True))
    first = confirm_run.machine_check(plan, tmp_path)
    assert json.loads((tmp_path/"machine.json").read_text()) == first
    assert confirm_run.machine_check(plan, tmp_path) == first  # the same kind resumes
    monkeypatch.setattr(sentcl.precision, "machine_facts", lambda: _facts(cpu="another CPU", cpu_avx512_bf16=True))
    with pytest.raises(SystemExit, match="is not the kind the run began on"):
        confirm_run.machine_check(plan, tmp_path)


def test_the_printed_command_is_the_tools(capsys):
    "The command the page and README print is one confirm_run accepts (a dry run prints each experiment's command)."
    from sentcl.experiments.report_results import CONFIRM_COMMAND
    args = CONFIRM_COMMAND.split()
    assert args[:4] == ["nice", "-n", "19", "python"] and args[4] == "tools/confirm_run.py"
    assert confirm_run.main([*args[5:], "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(json.loads(PLAN.read_text())["run"]["experiments"]) and all("--data-dir DATA" in l for l in out)


_EXPERIMENT = """
import json, os, sys, time
out = sys.argv[1]
os.makedirs(os.path.join(out, "exp"), exist_ok=True)
for k in range(1, 4):  # one run recorded after another, each rewriting results.json atomically, as the session does
    tmp = os.path.join(out, "exp", ".results.json.tmp")
    with open(tmp, "w") as f: json.dump({"runs": list(range(k))}, f)
    os.replace(tmp, os.path.join(out, "exp", "results.json"))
    time.sleep(1.0)
time.sleep(60)  # the last run trains on, until stopped
"""


def test_each_recorded_run_is_committed_and_a_stop_commits_what_is_recorded(tmp_path):
    saved = []
    def save(what):
        saved.append((what, json.loads((tmp_path/"exp"/"results.json").read_text())["runs"]))
        if saved[-1] == ("in progress", [0, 1, 2]): os.kill(os.getpid(), signal.SIGTERM)  # a session ending, mid-training
    old = {sig: signal.signal(sig, confirm_run._stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    t0 = time.time()
    try:
        with pytest.raises(confirm_run.Stopped):
            confirm_run.run_experiment([sys.executable, "-c", _EXPERIMENT, str(tmp_path)], dict(os.environ), 60.0, save,
                                       poll=0.05, out=tmp_path)
    finally:
        ignored = signal.getsignal(signal.SIGINT)
        for sig, handler in old.items(): signal.signal(sig, handler)
    assert time.time() - t0 < 50, "the stand-in experiment was not stopped"
    assert saved[-1] == ("stopped", [0, 1, 2]), saved  # the stop commits every recorded run
    assert ignored == signal.SIG_IGN  # a second signal does not cut the stop's commit
    progress = [runs for what, runs in saved if what == "in progress"]
    assert len(progress) >= 2 and progress[-1] == [0, 1, 2], saved  # committed as runs were recorded, not at the end


def test_training_logs_are_copied_whole_and_again_when_they_grow(tmp_path):
    log = tmp_path/"_train"/"abc123"/"metrics.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text('{"step": 1, "loss": 3.3}\n')
    assert confirm_run.copy_logs(tmp_path) == 1 and confirm_run.copy_logs(tmp_path) == 0
    log.write_text(log.read_text() + '{"step": 2, "loss": 2.9}\n')
    assert confirm_run.copy_logs(tmp_path) == 1
    assert (tmp_path/"train_logs"/"abc123.jsonl").read_text() == log.read_text()
    assert not list((tmp_path/"train_logs").glob(".*.tmp"))  # written through a temporary file, renamed whole
