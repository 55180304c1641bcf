"""Bad input from the command line ends in one line and status 2; no run loses its work; resuming never unpickles."""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from sentcl.train.checkpoints import CHECKPOINT, CHECKSUMS, PREVIOUS, load_checkpoint
from sentcl.cli import main
from sentcl.core import SentclError
from sentcl.data.layout import SAMPLES_DIR
from sentcl.train.trainer import RunOptions, train

WIKI = str(SAMPLES_DIR / "wiki" / "wiki1m_sample_wikitext.txt")
TINY_RUN = ["--model", "tiny", "--preset", "cpu-smoke", "--train-data", WIKI, "--batch-size", "4", "--no-progress"]


def cli(capsys, *argv):
    """`sentcl ARGV` in this process: (exit status, stdout, stderr); argparse's exits count as statuses."""
    try:
        rc = main(list(argv))
    except SystemExit as e:
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


def one_line_error(rc, err, *fragments):
    """Status 2 and exactly one stderr line, an error that holds every fragment."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2, (rc, err[-2000:])
    assert len(lines) == 1 and "error:" in lines[0] and "Traceback" not in err, err[-2000:]
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def straight_run(tmp_path_factory):
    """The model folder of an uninterrupted 6-step run, which interrupted and damaged runs must reproduce."""
    out = tmp_path_factory.mktemp("straight") / "run"
    assert main(["train", "simcse-unsup", *TINY_RUN, "--max-steps", "6", "--out", str(out)]) == 0
    return out / "model"


def weights(folder):
    return load_file(str(Path(folder) / "model.safetensors"))


def same_weights(a, b):
    wa, wb = weights(a), weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


# --- the six cases of the issue ------------------------------------------------------------------------------------

def test_dev_set_missing_is_found_before_step_1(tmp_path, capsys, monkeypatch):
    """Case 1: SNCSE selects on STS-B dev; offline without --data-dir that set is missing: one line, nothing trained."""
    monkeypatch.delenv("SENTCL_DATA", raising=False)
    out = tmp_path / "run"
    rc, _, err = cli(capsys, "train", "sncse", "--model", "tiny", "--train-data", WIKI, "--max-steps", "3",
                     "--out", str(out), "--no-progress")
    one_line_error(rc, err, "the dev evaluation cannot run", "stsb:dev", "--data-dir", "eval_every=null")
    assert not out.exists()  # nothing written: the data check comes before the model and step 1


def test_a_failing_evaluation_keeps_the_trained_model(tmp_path):
    """Case 1: the evaluation after the last step fails; model/ holds the final weights and --resume finishes the run."""
    state = {"fail": True}

    def dev(encoder):
        if state["fail"]:
            raise RuntimeError("CUDA out of memory")
        return 1.0

    out = tmp_path / "run"
    opts = RunOptions(out=str(out), preset="cpu-smoke", train_data=WIKI, max_steps=2, progress=False)
    cfg = {"model": "tiny", "batch_size": 4, "eval_every": 5, "select_on_dev": True}
    with pytest.raises(SentclError, match="dev evaluation at step 2 failed .RuntimeError: CUDA out of memory.") as e:
        train("simcse-unsup", cfg, opts, dev_eval=dev)
    assert f"{out / 'model'}" in str(e.value) and "--resume" in str(e.value)
    assert (out / "model" / "model.safetensors").exists() and not (out / "summary.json").exists()
    from sentcl.encoders import SentenceEncoder
    assert SentenceEncoder(out / "model").encode(["a sentence"]).shape == (1, 128)
    state["fail"] = False
    import dataclasses
    summary = train("simcse-unsup", cfg, dataclasses.replace(opts, resume=True), dev_eval=dev)
    assert summary["finished"] and summary["step"] == 2 and summary["best_dev"] == 1.0


def test_set_values_are_checked_against_the_config_types(capsys):
    """Case 2: --set temperature=abc is refused, naming the field, the value and what is expected."""
    rc, out, err = cli(capsys, "train", "pairsupcon", "--set", "temperature=abc", "--show-config")
    one_line_error(rc, err, "temperature='abc'", "expected a finite number > 0")
    assert out == ""
    for bad, fragment in (("lr=0", "lr=0"), ("select_on_dev=maybe", "true or false"), ("eval_every=1.5", "integer"),
                          ("batch_size=-4", "≥ 1"), ("seed=-1", "seed=-1"), ("view_kwargs=[1]", "JSON object"),
                          ("temperature=NaN", "finite")):
        rc, _, err = cli(capsys, "train", "pairsupcon", "--set", bad, "--show-config")
        one_line_error(rc, err, fragment)
    rc, out, _ = cli(capsys, "train", "pairsupcon", "--set", "temperature=1", "--show-config")
    assert rc == 0 and json.loads(out)["method"]["temperature"] == 1.0


def test_batch_size_zero(tmp_path, capsys):
    """Case 3: --batch-size 0 (and other counts below 1) are one line, not a ZeroDivisionError."""
    out = str(tmp_path / "run")
    rc, _, err = cli(capsys, "train", "pairsupcon", "--model", "tiny", "--preset", "cpu-smoke", "--batch-size", "0",
                     "--out", out)
    one_line_error(rc, err, "batch_size=0", "≥ 1")
    for flag in ("--max-steps", "--save-every", "--stop-after", "--mini-batch-size", "--eval-every"):
        rc, _, err = cli(capsys, "train", "pairsupcon", "--model", "tiny", "--preset", "cpu-smoke", flag, "0",
                         "--out", out)
        one_line_error(rc, err, "=0", "≥ 1")
    src = tmp_path / "s.txt"
    src.write_text("a cat\n")
    rc, _, err = cli(capsys, "encode", "--model", "tiny", "--in", str(src), "--out", str(tmp_path / "e.npy"),
                     "--batch-size", "0")
    one_line_error(rc, err, "--batch-size", "≥ 1")


def test_model_folder_with_damaged_config(tmp_path, capsys):
    """Case 4: a model folder whose config.json is not JSON is one line naming that file."""
    from sentcl.encoders import SentenceEncoder
    folder = SentenceEncoder("tiny").save(tmp_path / "m")
    (folder / "config.json").write_text("{not json")
    src = tmp_path / "s.txt"
    src.write_text("a cat\n")
    rc, _, err = cli(capsys, "encode", "--model", str(folder), "--in", str(src), "--out", str(tmp_path / "e.npy"))
    one_line_error(rc, err, f"{folder / 'config.json'} is not valid JSON")
    assert not (tmp_path / "e.npy").exists()
    (folder / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (folder / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes()[:1000])  # a cut copy
    rc, _, err = cli(capsys, "encode", "--model", str(folder), "--in", str(src), "--out", str(tmp_path / "e.npy"))
    one_line_error(rc, err, f"cannot load the model folder {folder}")


def test_damaged_checkpoint_falls_back_to_the_previous_one(tmp_path, capsys, straight_run):
    """Case 5: a truncated checkpoint.pt: resume from checkpoint.prev.pt, saying so, and end as a straight run does."""
    broken = str(tmp_path / "broken")
    run = ["train", "simcse-unsup", *TINY_RUN, "--max-steps", "6"]
    rc, out, err = cli(capsys, *run, "--out", broken, "--save-every", "2", "--stop-after", "3")
    assert rc == 0 and '"finished": false' in out, err
    sums = json.loads(Path(broken, CHECKSUMS).read_text())
    assert (sums[CHECKPOINT]["step"], sums[PREVIOUS]["step"]) == (3, 2)
    ck = Path(broken, CHECKPOINT)
    ck.write_bytes(ck.read_bytes()[: ck.stat().st_size // 2])  # a kill during a copy, a full disk
    rc, out, err = cli(capsys, *run, "--out", broken, "--resume")
    assert rc == 0, err
    assert f"{ck} is damaged" in err and f"resuming from {Path(broken, PREVIOUS)} (step 2)" in err
    assert json.loads(out)["step"] == 6
    assert same_weights(straight_run, f"{broken}/model")  # the fallback loses nothing but time
    steps = [json.loads(line)["step"] for line in Path(broken, "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4, 5, 6]


def test_no_good_checkpoint_is_one_line(tmp_path, capsys):
    """Case 5: with every checkpoint damaged, one line names the file and says what to do."""
    out = str(tmp_path / "run")
    run = ["train", "simcse-unsup", *TINY_RUN, "--max-steps", "4", "--out", out]
    assert cli(capsys, *run, "--stop-after", "1")[0] == 0
    ck = Path(out, CHECKPOINT)
    ck.write_bytes(ck.read_bytes()[:-100])
    rc, _, err = cli(capsys, *run, "--resume")
    one_line_error(rc, err, f"{ck} is damaged", "without --resume")


class _Payload:
    def __reduce__(self):
        return (os.system, (f"touch {self.target}",))


def test_resume_never_unpickles(tmp_path, capsys):
    """Case 6: a checkpoint is tensors and plain data; one carrying a pickled object is refused before it can run."""
    out = Path(tmp_path / "run")
    run = ["train", "simcse-unsup", *TINY_RUN, "--max-steps", "4", "--out", str(out)]
    assert cli(capsys, *run, "--stop-after", "1")[0] == 0
    state = torch.load(out / CHECKPOINT, weights_only=True)  # raises if anything in it needs the unpickler
    assert state["step"] == 1 and isinstance(state["config"], str) and isinstance(state["rng"]["numpy"]["key"], torch.Tensor)
    payload = _Payload()
    payload.target = tmp_path / "pwned"
    state["rng"] = payload
    torch.save(state, out / CHECKPOINT)
    (out / CHECKSUMS).unlink()  # as a shared folder without the checksums would arrive
    rc, _, err = cli(capsys, *run, "--resume")
    one_line_error(rc, err, "pickled Python objects")
    assert not (tmp_path / "pwned").exists()


def test_no_code_path_unpickles():
    """Every loader in sentcl refuses pickles: torch.load only with weights_only=True, np.load never allows pickles."""
    import sentcl
    root = Path(sentcl.__file__).parent
    found, files = [], sorted(root.rglob("*.py"))  # the packages' modules too
    assert len(files) > 20
    for path in files:
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"torch\.load\(", line) and "weights_only=True" not in line:
                found.append(f"{path.relative_to(root)}:{i}: {line.strip()}")
            if re.search(r"np\.load\(", line) and "allow_pickle=False" not in line:
                found.append(f"{path.relative_to(root)}:{i}: {line.strip()}")
            if re.search(r"\bpickle\.loads?\(|\bjoblib\.load\(|read_pickle\(|allow_pickle=True|weights_only=False", line):
                found.append(f"{path.relative_to(root)}:{i}: {line.strip()}")
    assert not found, found


# --- the other entry points, as a careful user meets them ----------------------------------------------------------

def test_encode_bad_inputs(tmp_path, capsys):
    src, out = tmp_path / "s.txt", str(tmp_path / "e.npy")
    src.write_text("a cat\nthe dog\n")
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "bin.txt").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "nul.txt").write_bytes(b"a\x00b\n")
    (tmp_path / "afile").write_text("x")
    enc = ["encode", "--model", "tiny"]
    cases = [
        ([*enc, "--in", str(tmp_path / "missing.txt"), "--out", out], "no such file"),
        ([*enc, "--in", str(tmp_path), "--out", out], "no such file"),
        ([*enc, "--in", str(tmp_path / "empty.txt"), "--out", out], "the file is empty"),
        ([*enc, "--in", str(tmp_path / "bin.txt"), "--out", out], "not UTF-8"),
        ([*enc, "--in", str(tmp_path / "nul.txt"), "--out", out], "NUL bytes"),
        ([*enc, "--in", str(src), "--out", str(tmp_path / "e.txt")], "ending in .npy"),
        ([*enc, "--in", str(src), "--out", str(tmp_path / "d.npy")], "is a folder"),
        ([*enc, "--in", str(src), "--out", str(tmp_path / "afile" / "e.npy")], "cannot write in"),
        ([*enc, "--in", str(src), "--out", out, "--max-length", "0"], "--max-length"),
        ([*enc, "--in", str(src), "--out", out, "--batch-size", "many"], "'many'"),
        ([*enc, "--in", str(src), "--out", out, "--pooling", "max"], "unknown pooling 'max'"),
        ([*enc, "--in", str(src)], "--out"),
        (["encode", "--model", str(tmp_path / "afile"), "--in", str(src), "--out", out], "is a file"),
        (["encode", "--model", str(tmp_path), "--in", str(src), "--out", out], "holds neither"),
    ]
    (tmp_path / "d.npy").mkdir()
    for argv, fragment in cases:
        rc, _, err = cli(capsys, *argv)
        one_line_error(rc, err, fragment)
    assert not Path(out).exists()


def test_eval_bad_inputs(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    ev = ["eval", "--model", "tiny", "--tasks", "stsb", "--data-dir", str(SAMPLES_DIR), "--no-cache"]
    bad_tsv = tmp_path / "data" / "sts" / "stsb"
    bad_tsv.mkdir(parents=True)
    (bad_tsv / "test.tsv").write_text("sentence1\tsentence2\tscore\na\tb\thigh\n")
    cases = [
        ([*ev, "--out", str(tmp_path)], "is a folder"),
        ([*ev, "--out", str(tmp_path / "afile" / "r.json")], "cannot write in"),
        ([*ev, "--max-length", "0"], "--max-length"),
        ([*ev, "--kfold", "1"], "--kfold"),
        (["eval", "--model", "tiny", "--tasks", "nosuch", "--data-dir", str(SAMPLES_DIR)], "nosuch"),
        (["eval", "--model", "tiny", "--tasks", "stsb", "--data-dir", str(tmp_path / "data"), "--no-cache"],
         "score 'high' is not a finite number"),
        (["eval", "--model", "tiny", "--tasks", "stsb", "--data-dir", str(tmp_path / "none")], "does not exist"),
    ]
    for argv, fragment in cases:
        rc, _, err = cli(capsys, *argv)
        err = "\n".join(line for line in err.splitlines() if "error" in line or "Traceback" in line)
        one_line_error(rc, err, fragment)


def test_train_bad_inputs(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "bin.txt").write_bytes(bytes(range(256)) * 4)
    run = ["train", "simcse-unsup", "--model", "tiny", "--preset", "cpu-smoke", "--no-progress"]
    out = ["--out", str(tmp_path / "run")]
    cases = [
        ([*run, "--out", str(tmp_path / "afile")], "is a file"),
        ([*run, *out, "--resume"], "no checkpoint.pt"),
        ([*run, *out, "--train-data", str(tmp_path / "empty.txt")], "empty"),
        ([*run, *out, "--train-data", str(tmp_path / "bin.txt")], "UTF-8"),
        ([*run, *out, "--train-data", str(tmp_path / "missing.txt")], "does not exist"),
        ([*run, *out, "--set", 'view_kwargs={"shufle": false}'], "shufle is not an argument"),
        ([*run, *out, "--set", "schedule=cosine"], "unknown schedule 'cosine'"),
        ([*run, *out, "--set", "nosuch=1"], "nosuch"),
        ([*run, *out, "--set", "noequals"], "key=value"),
        ([*run, *out, "--precision", "fp8"], "fp8"),
        ([*run, *out, "--lr", "fast"], "--lr"),
        ([*run, *out, "--eval-every", "2", "--set", "eval_protocol=mine"], "unknown evaluation protocol 'mine'"),
    ]
    for argv, fragment in cases:
        rc, _, err = cli(capsys, *argv)
        one_line_error(rc, err, fragment)


def test_a_run_started_again_does_not_overwrite_a_resumable_one(tmp_path, capsys):
    out = str(tmp_path / "run")
    run = ["train", "simcse-unsup", *TINY_RUN, "--max-steps", "4", "--out", out]
    assert cli(capsys, *run, "--stop-after", "1")[0] == 0
    rc, _, err = cli(capsys, *run)
    one_line_error(rc, err, "holds the checkpoint of an earlier run", "--resume")
    assert json.loads(Path(out, CHECKSUMS).read_text())[CHECKPOINT]["step"] == 1


def test_demo_bad_inputs(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    rc, _, err = cli(capsys, "demo", "--steps", "0")
    one_line_error(rc, err, "--steps")
    rc, _, err = cli(capsys, "demo", "--out", str(tmp_path / "afile"), "--no-progress")
    one_line_error(rc, err, "is a file")


def test_kill_9_and_resume_is_bit_identical(tmp_path, capsys, straight_run):
    """SIGKILL in the middle of a run (even during a checkpoint write), then --resume: the same weights as straight."""
    killed = str(tmp_path / "killed")
    run = ["train", "simcse-unsup", *TINY_RUN, "--max-steps", "6"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([str(Path(sys.executable).parent / "sentcl"), *run, "--out", killed, "--save-every", "1"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    sums = Path(killed, CHECKSUMS)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if sums.exists() and '"step": 3' in sums.read_text():
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not Path(killed, "model").exists(), "the run ended before it was killed"
    before = load_checkpoint(killed)["seconds"]  # the killed attempt's training time, to its last checkpoint
    rc, _, err = cli(capsys, *run, "--out", killed, "--resume", "--save-every", "1")
    assert rc == 0, err
    assert same_weights(straight_run, f"{killed}/model")
    assert before > 0 and json.loads(Path(killed, "summary.json").read_text())["seconds"] > before  # wiring; 48_train_trainer tests the sum


def test_a_reader_that_stops_early_is_not_an_error():
    "`sentcl ... | head -1`: the closed pipe ends the command quietly (status 141, as a shell's SIGPIPE), no error."
    sentcl = Path(sys.executable).with_name("sentcl")
    r = subprocess.run(f"'{sentcl}' experiments run --preset paper --dry-run | head -1; exit ${{PIPESTATUS[0]}}",
                       shell=True, executable="/bin/bash", capture_output=True, text=True,
                       env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert r.stdout.split()[:2] == ["experiment", "arm"], r.stdout[:200]
    assert r.returncode == 141 and r.stderr == "", (r.returncode, r.stderr)


# --- issue 34: a selected model is never replaced; a finished run is never overwritten -----------------------------

class Killed(Exception):
    """A kill inside the finish (nothing in the finish catches it)."""


def scripted_dev(scores):
    """A dev evaluation giving each distinct weights the next of `scores`, and the same score when they come again."""
    seen = {}

    def dev(encoder):
        key = encoder.fingerprint()
        if key not in seen:
            seen[key] = scores[len(seen)]
        return seen[key]
    return dev


SELECT = {"model": "tiny", "batch_size": 4, "eval_every": 2, "select_on_dev": True}  # evaluated at steps 2, 4 and 5


def select_run(out, dev, resume=False):
    opts = RunOptions(out=str(out), preset="cpu-smoke", train_data=WIKI, max_steps=5, save_every=2, resume=resume,
                      progress=False)
    return train("simcse-unsup", SELECT, opts, dev_eval=dev)


def test_a_kill_before_the_summary_keeps_the_selected_model(tmp_path, monkeypatch):
    """The run selects step 4's model (dev 3.0 of 1.0, 3.0, 2.0); killed as its finish writes summary.json, then
    resumed: model/ holds step 4's weights, as an uninterrupted run's, not step 5's; a finished run resumed again
    keeps them too."""
    import sentcl.train.run_folder
    dev = scripted_dev([1.0, 3.0, 2.0])
    straight = select_run(tmp_path / "straight", dev)
    assert straight["best_dev"] == 3.0 and not (tmp_path / "straight" / "best").exists()
    write_json = sentcl.core.write_json

    def killed_at_summary(path, obj, **kw):
        if Path(path).name == "summary.json":
            raise Killed(path)
        return write_json(path, obj, **kw)
    monkeypatch.setattr(sentcl.train.run_folder, "write_json", killed_at_summary)
    with pytest.raises(Killed):
        select_run(tmp_path / "killed", dev)
    monkeypatch.setattr(sentcl.train.run_folder, "write_json", write_json)
    resumed = select_run(tmp_path / "killed", dev, resume=True)
    assert resumed["best_dev"] == 3.0 and resumed["step"] == 5
    assert same_weights(tmp_path / "straight" / "model", tmp_path / "killed" / "model")
    assert not (tmp_path / "killed" / "best").exists()
    again = select_run(tmp_path / "straight", dev, resume=True)  # --resume once more after the end: nothing changes
    assert again == straight and same_weights(tmp_path / "straight" / "model", tmp_path / "killed" / "model")


def test_a_log_cut_off_by_a_crash_never_blocks_a_resume(tmp_path, capsys):
    """metrics.jsonl ends in a cut-off line padded with NUL bytes (a crash while appending): --resume drops that line,
    says so once, and finishes with a clean log."""
    out = str(tmp_path / "run")
    run = ["train", "simcse-unsup", *TINY_RUN, "--max-steps", "4", "--save-every", "1", "--out", out]
    rc, _, err = cli(capsys, *run, "--stop-after", "2")
    assert rc == 0, err
    with open(Path(out, "metrics.jsonl"), "ab") as f:
        f.write(b'{"step": 3, "epoch": 0, "lo' + b"\0" * 4096)
    rc, _, err = cli(capsys, *run, "--resume")
    assert rc == 0, err[-2000:]
    said = [line for line in err.splitlines() if "metrics.jsonl" in line]
    assert len(said) == 1 and "dropped 1 damaged line(s)" in said[0], err
    log = [json.loads(line) for line in Path(out, "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3, 4]


def test_a_finished_run_is_kept_unless_forced(tmp_path, capsys):
    """`sentcl train` into a folder whose run finished refuses (its summary and model kept); --resume returns the
    summary; --force trains again."""
    out = str(tmp_path / "run")
    run = ["train", "simcse-unsup", *TINY_RUN, "--max-steps", "2", "--out", out]
    rc, _, err = cli(capsys, *run)
    assert rc == 0, err
    summary, model = Path(out, "summary.json").read_text(), weights(Path(out, "model"))
    rc, _, err = cli(capsys, *run)
    one_line_error(rc, err, f"{out} holds a finished run (step 2", "--force", "a new --out")
    assert Path(out, "summary.json").read_text() == summary and (Path(out) / "model" / "model.safetensors").exists()
    rc, printed, err = cli(capsys, *run, "--resume")
    assert rc == 0 and json.loads(printed) == json.loads(summary) and "nothing to resume" in err, err
    before = os.stat(Path(out, "model", "model.safetensors")).st_mtime_ns
    rc, _, err = cli(capsys, *run, "--force")
    assert rc == 0, err
    assert os.stat(Path(out, "model", "model.safetensors")).st_mtime_ns != before  # trained again
    assert all(torch.equal(a, b) for a, b in zip(model.values(), weights(Path(out, "model")).values()))  # same seed
    assert not Path(out, ".lock").exists()


def test_a_lock_taken_over_is_left_to_its_new_holder(tmp_path):
    """A holder whose lock was taken over leaves the new holder's lock on release; a refresh that fails is retried."""
    from sentcl.experiments.execute import TrainingLock
    successor = json.dumps({"host": "node7", "pid": 2, "token": "theirs"})
    lock = TrainingLock(tmp_path, beat=60)
    with pytest.raises(RuntimeError):
        with lock:
            (tmp_path / ".lock").write_text(successor)  # taken over (its heartbeat, every 60 s, has not seen it yet)
            raise RuntimeError("end of training")
    assert (tmp_path / ".lock").read_text() == successor
    (tmp_path / ".lock").unlink()
    utime, fails = os.utime, [OSError(5, "Input/output error")] * 2

    def flaky(*a, **k):
        if fails:
            raise fails.pop()
        return utime(*a, **k)
    import unittest.mock
    with unittest.mock.patch("os.utime", side_effect=flaky), TrainingLock(tmp_path, beat=0.05, stale=60) as held:
        time.sleep(0.3)
        utime(held.path, (1, 1))  # an old time: only a heartbeat still running refreshes it
        time.sleep(0.5)
        assert time.time() - held.path.stat().st_mtime < 5, "the heartbeat stopped at the first error"


HOLDER = """
import sys, time
from sentcl.core import SentclError
from sentcl.experiments.execute import TrainingLock
try:
    with TrainingLock(sys.argv[1], beat=0.2, stale=1.0):
        print("held", flush=True)
        for _ in range(400): time.sleep(0.05)  # "training" for 20 s
    print("trained on", flush=True)
except SentclError as e:
    print(f"error: {e}", file=sys.stderr); sys.exit(2)
"""


def test_a_suspended_holder_taken_over_stops(tmp_path):
    """A job suspended (SIGSTOP) past the stale time, whose run another process took over meanwhile, stops when it
    continues (SIGCONT), with one line, instead of training on beside the new holder."""
    from sentcl.experiments.execute import TrainingLock
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    try:
        assert proc.stdout.readline().strip() == "held"
        proc.send_signal(signal.SIGSTOP)
        time.sleep(1.5)  # longer than its stale time, without a refresh
        with TrainingLock(tmp_path, stale=1.0, poll=0.1, log=lambda m: None) as taker:
            proc.send_signal(signal.SIGCONT)
            out, err = proc.communicate(timeout=120)  # it stops within seconds; a loaded machine may be slow
            assert proc.returncode == 2 and "trained on" not in out, (out, err)
            lines = err.strip().splitlines()
            assert len(lines) == 1 and f"lost the training lock of {tmp_path}" in lines[0], err
            assert json.loads((tmp_path / ".lock").read_text())["token"] == taker.token  # the new holder's stays
    finally:
        proc.kill()
        proc.wait()


def test_sentcl_train_waits_for_the_run_folders_lock(tmp_path):
    """`sentcl train` takes its run folder's training lock: while another process trains the folder, it waits."""
    from sentcl.experiments.execute import TrainingLock
    out = tmp_path / "run"
    cmd = [str(Path(sys.executable).parent / "sentcl"), "train", "simcse-unsup", *TINY_RUN, "--max-steps", "2",
           "--out", str(out)]
    with TrainingLock(out, log=lambda m: None):
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "HF_HUB_OFFLINE": "1"})
        try:
            first = proc.stderr.readline()
            time.sleep(1.0)
            assert proc.poll() is None and f"waiting: process {os.getpid()} on" in first, first
            assert not (out / "config.json").exists()  # nothing written while another holds the folder
        finally:
            proc.kill()
            proc.wait()
