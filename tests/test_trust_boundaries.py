"""Trust boundaries (issue 44): no folder is overwritten or shared by accident, no record or input gives a traceback or
silent nonsense, no model folder runs code. Each test failed before its fix."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import stand_in_notebook  # one stand-in notebook for the runner tests

ROOT = Path(__file__).resolve().parents[1]
SENTCL = str(Path(sys.executable).parent/"sentcl")


def sentcl(*args, **kw):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **kw.pop("env", {})}
    return subprocess.run([SENTCL, *map(str, args)], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600,
                          **kw)


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


TRAIN = ("train", "simcse-unsup", "--model", "tiny", "--preset", "cpu-smoke", "--max-steps", "1", "--batch-size", "4",
         "--no-progress")


def test_train_out_keeps_a_folder_that_is_not_this_run(tmp_path):
    "Files of no sentcl run, or another config's run, are refused; --force says what it deletes and deletes only that."
    out = tmp_path/"run"
    (out/"model").mkdir(parents=True); (out/"best").mkdir()
    (out/"model"/"weights.bin").write_text("someone's"); (out/"config.json").write_text('{"hidden_size": 8}')
    (out/"metrics.jsonl").write_text("{}\n"); (out/"notes.txt").write_text("mine")
    r = sentcl(*TRAIN, "--out", out)
    assert r.returncode == 2 and "holds files of no sentcl run (best/, config.json, metrics.jsonl, model/, notes.txt)" \
        in one_line(r.stderr), r.stderr
    assert (out/"model"/"weights.bin").read_text() == "someone's" and (out/"config.json").read_text() == '{"hidden_size": 8}'
    r = sentcl(*TRAIN, "--out", out, "--force")
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"--force: deleted best, model, config.json, metrics.jsonl in {out} (other files stay: notes.txt)" in r.stderr
    assert (out/"notes.txt").read_text() == "mine" and (out/"model"/"model.safetensors").is_file()
    mode = lambda f: f.stat().st_mode & 0o777  # the weights as readable as the run's other files (safetensors: 0600)
    assert mode(out/"model"/"model.safetensors") == mode(out/"model"/"config.json") == mode(out/"config.json")
    saved = json.loads((out/"config.json").read_text())  # now: another config's run that never finished
    (out/"config.json").write_text(json.dumps({**saved, "method.lr": 0.5}))
    (out/"summary.json").unlink()
    r = sentcl(*TRAIN, "--out", out)
    assert r.returncode == 2 and "holds a sentcl run of another config (method.lr: 0.5 there, " in one_line(r.stderr)
    (out/"config.json").write_text(json.dumps(saved))  # the same run, never finished: it starts again there
    r = sentcl(*TRAIN, "--out", out)
    assert r.returncode == 0, r.stderr[-2000:]




def wait_for(condition, timeout: float, what: str, step: float = 0.1):
    import time
    t0 = time.time()
    while time.time() - t0 < timeout:
        if value := condition(): return value
        time.sleep(step)
    raise AssertionError(f"gave up after {timeout:.0f} s waiting for {what}")


FAST = "sncse-figure4"


def _record(out: Path, name: str, **rec):
    (out/name).mkdir(parents=True, exist_ok=True)
    (out/"batch.json").write_text(json.dumps({"experiments": {name: rec}}))


def test_a_recorded_live_owner_blocks_a_second_start(tmp_path):
    "A local process or a scheduler job that batch.json records as running the experiment: the batch names it, stops."
    import psutil
    out = tmp_path/"batch"
    sleeper = subprocess.Popen(["sleep", "120"])
    try:
        _record(out, FAST, status="running", launcher="local", host=__import__("socket").gethostname(),
                pid=sleeper.pid, process_started=psutil.Process(sleeper.pid).create_time(), started="then")
        (out/FAST/"log.txt").write_text("being written")
        r = sentcl("experiments", "run", FAST, "--preset", "cpu-smoke", "--out", out)
        line = one_line(r.stderr)
        assert r.returncode == 2 and f"batch.json records it as run by process {sleeper.pid} on " in line, r.stderr
        assert (out/FAST/"log.txt").read_text() == "being written" and not (out/FAST/"log.1.txt").exists()  # not moved
    finally: sleeper.kill(); sleeper.wait()
    fake = tmp_path/"bin"; fake.mkdir()  # a stand-in sacct: job 100 runs
    (fake/"sacct").write_text('#!/bin/sh\necho "JobID|State|NodeList"; echo "100|RUNNING|n1"\n')
    (fake/"sacct").chmod(0o755)
    _record(out, FAST, status="running", launcher="slurm", job_id="100", submitted_at=0.0)
    r = sentcl("experiments", "run", FAST, "--preset", "cpu-smoke", "--out", out,
               env={"PATH": f"{fake}:{os.environ['PATH']}"})
    assert r.returncode == 2 and "batch.json records it as run by slurm job 100 (RUNNING)" in one_line(r.stderr)


def test_sigterm_stops_the_batch_and_its_notebook(tmp_path):
    "SIGTERM to `sentcl experiments run`: its papermill child (and kernel) stop too; batch.json says failed."
    import signal
    import psutil
    out, nbs = tmp_path/"batch", tmp_path/"nbs"
    nbs.mkdir()
    stand_in_notebook(nbs/f"{FAST}.ipynb", "import time\ntime.sleep(600)")
    batch = subprocess.Popen([SENTCL, "experiments", "run", FAST, "--preset", "cpu-smoke", "--out", str(out),
                              "--notebooks", str(nbs)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        child = wait_for(lambda: next((p for p in psutil.Process(batch.pid).children()
                                       if "papermill" in " ".join(p.cmdline())), None), 120, "papermill to start")
        wait_for(lambda: "Executing" in (out/FAST/"log.txt").read_text(errors="replace"), 120, "the notebook to run")
        batch.send_signal(signal.SIGTERM)
        batch.wait(timeout=60)
        wait_for(lambda: not child.is_running() or child.status() == psutil.STATUS_ZOMBIE, 20, "papermill to stop")
    finally:
        if batch.poll() is None: batch.kill()
        for p in psutil.Process().children(recursive=True):
            if p.pid != batch.pid: p.kill()
    rec = json.loads((out/"batch.json").read_text())["experiments"][FAST]
    assert rec["status"] == "failed" and not (out/".batch.lock").exists(), rec


def test_a_batch_lock_goes_stale_and_garbage_never_blocks(tmp_path):
    "Another host's lock whose heartbeat stopped, `{}`, garbage, a string or huge pid, a non-numeric start: taken over."
    import time
    from sentcl.experiments.runner import BATCH_LOCK, BatchLock
    from sentcl.experiments.execute import TrainingLock
    lock = tmp_path/BATCH_LOCK
    held = {"host": "another-node", "pid": 4242, "started": "then", "process_started": 1.0, "token": "theirs"}
    for stale in ({}, "garbage", {**held, "pid": "4242"}, {**held, "pid": 2**80}, {**held, "process_started": "noon"},
                  {**held, "host": __import__("socket").gethostname(), "pid": "12"}):
        lock.write_text(stale if isinstance(stale, str) else json.dumps(stale))
        with BatchLock(tmp_path) as mine: assert json.loads(lock.read_text())["token"] == mine.token
    lock.write_text(json.dumps(held))  # another host's, its heartbeat stopped 11 minutes ago
    os.utime(lock, (time.time() - 660, time.time() - 660))
    with BatchLock(tmp_path) as mine: assert json.loads(lock.read_text())["token"] == mine.token
    for garbage in ('{"host": "h", "pid": "12"}', '{"host": "h", "pid": 99999999999999999999}'):
        (tmp_path/".lock").write_text(garbage)  # the training lock reads records the same way
        with TrainingLock(tmp_path, log=lambda m: None): pass


def test_wait_says_why_and_for_how_long(tmp_path):
    "`--wait` names the holder, how fresh its lock is and when it would be taken over; then how long it has waited."
    import threading
    from sentcl.experiments.runner import BatchLock
    said = []
    with BatchLock(tmp_path, beat=0.05) as holder:
        threading.Timer(0.5, holder.__exit__).start()
        with BatchLock(tmp_path, wait=True, poll=0.05, log=said.append): pass
    assert said[0].startswith("waiting 0 s so far: process ") and "its lock refreshed 0 s ago; taken over once that " \
        "process ends, or after 600 s without a refresh" in said[0], said


def _planted(tmp_path) -> tuple:
    "A folder sentcl wrote (SNCSE's prompt and [MASK]) whose config.json names code outside it: (folder, marker)."
    from sentcl.encoders import SentenceEncoder
    evil, marker = tmp_path/"evil", tmp_path/"ran"
    evil.mkdir()
    (evil/"evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\nfrom transformers import BertConfig, BertModel\n"
                                "class C(BertConfig): pass\nclass M(BertModel): config_class = C\n")
    enc = SentenceEncoder("tiny", pooling="mask", template='This sentence : "{sentence}" means [MASK] .', device="cpu")
    folder = enc.save(tmp_path/"model")
    cfg = json.loads((folder/"config.json").read_text())
    cfg["auto_map"] = {"AutoConfig": f"{evil}--evil.C", "AutoModel": f"{evil}--evil.M"}
    (folder/"config.json").write_text(json.dumps(cfg))
    return folder, marker, enc


def test_a_planted_auto_map_never_runs(tmp_path):
    "sentcl's loaders (st's sentence_transformer, the card's load_sentence_transformer, the encoder) run no code it names."
    import numpy as np
    from sentcl.encoders import SentenceEncoder
    from sentcl.st.models import sentence_transformer
    from sentcl.st_modules import load_sentence_transformer
    folder, marker, enc = _planted(tmp_path)
    sents = ["A man is playing a guitar.", "Tom and Jerry became good friends."]
    want = enc.encode(sents)
    for load in (lambda: SentenceEncoder(folder, device="cpu"), lambda: load_sentence_transformer(folder, device="cpu"),
                 lambda: sentence_transformer(str(folder), device="cpu")):
        got = load().encode(sents)
        assert not marker.exists(), "a module the folder named was imported"
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())  # three codes, float32


@pytest.mark.parametrize("given, said", [
    ("precision=evil", "-p precision=evil: not one of fp32, bf16, fp16, auto"),
    ("report_to=x", "-p report_to=x: not one of none, tensorboard, trackio"),
    ("device=x", "-p device=x: not a device a notebook trains on"),
    ("gpus=-2", "-p gpus=-2: give at least 1"),
    ("seeds=[]", "-p seeds=[]: an empty list runs nothing"),
    ("seeds=" + "[" * 50000 + "]" * 50000, "-p seeds: the value is nested too deeply")])
def test_p_values_are_checked_against_what_they_may_be(given, said):
    "`-p` values outside what a notebook can run stop the dry run with one line (seeds=[] dropped every training)."
    r = sentcl("experiments", "run", FAST, "--preset", "cpu-smoke", "--dry-run", "-p", given)
    assert r.returncode == 2 and said in one_line(r.stderr), r.stderr[-500:]


def test_characters_outside_the_bmp_reach_papermill_whole():
    "A -p string with an emoji reaches the notebook as written (papermill reads -y as YAML: JSON's escapes split it)."
    import yaml
    from papermill.iorw import NoDatesSafeLoader
    from sentcl.experiments.runner import papermill_command
    params = {"model": "a\U0001F600b", "arms": ["ce\U00010348"]}
    cmd = papermill_command(Path("n.ipynb"), Path("o.ipynb"), params, Path("."))
    assert yaml.load(cmd[cmd.index("-y") + 1], Loader=NoDatesSafeLoader) == params


def _results_copy(tmp_path, change) -> Path:
    import shutil
    root = tmp_path/"batch"
    for name in ("liao-table2", FAST):
        shutil.copytree(ROOT/"results"/"cpu"/name, root/name)
    doc = json.loads((root/"liao-table2"/"results.json").read_text())
    change(doc)
    (root/"liao-table2"/"results.json").write_text(json.dumps(doc))
    return root


@pytest.mark.parametrize("what, change, said", [
    ("a number for git", lambda d: d.update(git=3), "'git' should be a string or null, got an integer"),
    ("a word for a score", lambda d: d["runs"][0]["eval"]["tasks"]["sts12"].update(wmean="high"),
     "runs[0].eval.tasks.sts12.wmean: 'high' is not a finite number"),
    ("one NaN", lambda d: d["runs"][0]["eval"]["tasks"]["sts12"].update(wmean=float("nan")),
     "runs[0].eval.tasks.sts12.wmean: nan is not a finite number")])
def test_a_bad_record_is_named_and_the_report_goes_on(tmp_path, what, change, said):
    "report and compare name the file and key of a bad results.json and go on with the other experiments."
    root = _results_copy(tmp_path, change)
    r = sentcl("experiments", "report", root, "--out", tmp_path/"report")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-1500:]
    report = (tmp_path/"report"/"report.md").read_text()
    assert said in report and f"{root/'liao-table2'/'results.json'}" in report, report[:3000]
    assert FAST in report
    r = sentcl("experiments", "compare", ROOT/"results"/"cpu", root)
    assert "Traceback" not in r.stderr and said in r.stdout, r.stdout[-1500:] + r.stderr[-1500:]


def test_status_says_a_damaged_batch_json_is_damaged(tmp_path):
    "A batch.json that does not parse is named as damaged, not read as 'pending'."
    import shutil
    shutil.copytree(ROOT/"results"/"cpu"/"liao-table2", tmp_path/"liao-table2")
    (tmp_path/"batch.json").write_text('{"experiments": {"sncse-figure4": {"status": "runn')
    r = sentcl("experiments", "status", tmp_path)
    assert r.returncode == 0 and r.stdout.startswith(f"{tmp_path/'batch.json'} is damaged (not valid JSON"), r.stdout


@pytest.mark.parametrize("score, said", [("nan", "test.tsv:3: score 'nan' is not a finite number"),
                                         ("inf", "test.tsv:3: score 'inf' is not a finite number"),
                                         ("3", "every gold score of stsb is 3; a correlation needs scores that vary")])
def test_sts_scores_that_give_nan_are_refused(tmp_path, score, said):
    "nan, inf or constant gold scores: a clear error naming the file, not NaN correlations."
    (tmp_path/"sts"/"stsb").mkdir(parents=True)
    (tmp_path/"sts"/"stsb"/"test.tsv").write_text(f"sentence1\tsentence2\tscore\na b\tc d\t3\ne f\tg h\t{score}\n")
    r = sentcl("eval", "--model", "tiny", "--tasks", "stsb", "--data-dir", tmp_path)
    assert r.returncode == 2 and said in r.stderr.strip().splitlines()[-1], r.stdout[-800:] + r.stderr[-800:]


def test_a_figure_that_links_out_of_the_batch_is_not_copied(tmp_path):
    "A results.json figure that is a symbolic link to a file outside the batch folder: named, never copied."
    root = _results_copy(tmp_path, lambda d: d.update(figures=["leak.png", *d["figures"]]))
    secret = tmp_path/"secret.png"; secret.write_bytes(b"not the batch's")
    (root/"liao-table2"/"leak.png").symlink_to(secret)
    r = sentcl("experiments", "report", root, "--out", tmp_path/"report")
    assert r.returncode == 0, r.stderr[-1500:]
    copied = [p for p in (tmp_path/"report").rglob("*.png") if p.read_bytes() == b"not the batch's"]
    report = (tmp_path/"report"/"report.md").read_text()
    assert not copied and f"figures[0]: 'liao-table2/leak.png' leads to {secret.resolve()}, outside" in report
