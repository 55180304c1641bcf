"""Run the registered confirmatory run (results/confirm/PLAN.json), resumably, committing its records as it goes.

    nice -n 19 python tools/confirm_run.py --data-dir DATA [--no-commit] [--dry-run]

Each experiment of the plan runs as `sentcl experiments run --preset cpu EXP --out results/confirm` with the plan's
arms, seeds and training precision; an interrupted run resumes where it stopped (finished runs are kept, a training
resumes from its last checkpoint). Before it starts, it checks that the plan file is the committed one and that this
machine is the kind the run began on (CPU model and bf16 units, recorded in results/confirm/machine.json), so both
arms of every seed train and score at one precision on one kind of machine; a plan that trains in bf16 needs a CPU
with bf16 units (AVX-512 BF16 or AMX), the pace its budget was priced at (`sentcl.experiments.report_results.
native_precision`). Whenever a run is recorded (an experiment's results.json, rewritten atomically after each run), after
each experiment and at least every `--commit-every` minutes, it copies each training's loss log (every term, every log
read) to results/confirm/train_logs/ and commits results/confirm (never anything else) on the current branch; stopped
(SIGTERM, SIGINT: a session ending), it stops the experiment and commits what is recorded before it exits. So the run
can be split over sessions: each commits its records, and the next, started with the same command on the same kind of
machine, resumes (recorded runs are kept; a model that a figure's measurement needs and this checkout lacks, because
another session trained it, is trained again from its seed).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "confirm"
PLAN = OUT / "PLAN.json"


def _git(*args, check=True) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=check).stdout.strip()


def registered(plan: Path = PLAN) -> dict:
    "The plan, if committed and unmodified; else a one-line exit."
    if not plan.is_file(): sys.exit(f"{plan}: no plan; tools/confirm_plan.py writes it, and it is committed before any run")
    if _git("ls-files", "--", str(plan)) == "" or _git("status", "--porcelain", "--", str(plan)):
        sys.exit(f"{plan}: not the committed plan (uncommitted or modified); a registered run follows its committed plan")
    sys.path.insert(0, str(ROOT))
    from sentcl.core import SentclError
    from sentcl.experiments.report_results import REGISTRATION_FILE, plan_registration
    try: rec = plan_registration(plan.parent)
    except SentclError as e: sys.exit(str(e))
    record = plan.parent / REGISTRATION_FILE
    if rec is None or _git("ls-files", "--", str(record)) == "" or _git("status", "--porcelain", "--", str(record)):
        sys.exit(f"{record}: no committed registration record; run tools/confirm_plan.py --record-registration and "
                 "commit it before any run")
    return json.loads(plan.read_text())


def machine_check(plan: dict, out: Path = OUT) -> dict:
    "This machine's CPU and bf16 units; the first run records them, later ones must match; a bf16 plan needs bf16 units."
    sys.path.insert(0, str(ROOT))
    from sentcl.core import write_json
    from sentcl.experiments.report_results import native_precision
    from sentcl.precision import bf16_units, machine_facts
    facts = machine_facts()
    here = {"cpu": facts.get("cpu"), "bf16_units": bf16_units(facts)}
    if not native_precision(plan["run"]["precision"], facts):
        sys.exit(f"this machine ({here['bf16_units']}) has no bf16 units: the plan trains in bf16, as the pilot did, and "
                 "is priced at that pace; emulated bf16 runs several times slower. Run it on a CPU with AVX-512 BF16 or "
                 "AMX (the pilot's ran on one), or register a new plan before any run")
    path = out / "machine.json"
    if path.is_file():
        first = json.loads(path.read_text())
        if first != here:
            sys.exit(f"this machine ({here}) is not the kind the run began on ({first}); both arms of a seed must run on "
                     "one kind of machine at one precision: resume it there")
    else:
        write_json(path, here)
    return here


def copy_logs(out: Path = OUT) -> int:
    ("Copy each training's metrics.jsonl (loss terms at every log read) to train_logs/, atomically (a copy is whole or "
     "absent, never cut by a stop), whenever it differs from the copy; returns how many were copied.")
    sys.path.insert(0, str(ROOT))
    from sentcl.core import atomic_write
    dst, n = out / "train_logs", 0
    for src in sorted((out / "_train").glob("*/metrics.jsonl")):
        target, data = dst / f"{src.parent.name}.jsonl", src.read_bytes()
        if not target.is_file() or target.read_bytes() != data:
            with atomic_write(target, "wb") as f: f.write(data)
            n += 1
    return n


def records_state(out: Path = OUT) -> tuple:
    "(experiment folder, size, mtime) of every results.json in `out`: it changes whenever a run is recorded."
    return tuple((p.parent.name, p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(out.glob("*/results.json")))


def commit(message: str, out: Path = OUT) -> bool:
    "Commit results/confirm (only it) when it changed; True when made. A failed commit (a busy index) waits for the next."
    copy_logs(out)
    try:
        _git("add", "--", str(out))
        if not _git("diff", "--cached", "--name-only", "--", str(out)): return False
        subprocess.run(["git", "commit", "-q", "-m", message, "--", str(out)], cwd=ROOT, check=True)
        return True
    except subprocess.CalledProcessError as e:  # e.g. another git command holds index.lock: the records stay on disk
        print(f"commit skipped ({e}); the next one takes these records too", flush=True)
        return False


def command(exp: str, spec: dict, plan: dict, data_dir: str) -> list[str]:
    "The `sentcl experiments run` command of one experiment of the plan."
    params = [f"seeds={json.dumps(spec['seeds'])}", f"arms={json.dumps(spec['arms'])}",
              f"precision={plan['run']['precision']}"]
    return [sys.executable, "-c", "import sys; from sentcl.cli import main; sys.exit(main())", "experiments", "run", exp, "--preset", plan["run"]["preset"],
            "--data-dir", data_dir, "--out", str(OUT), *[a for p in params for a in ("-p", p)]]


class Stopped(Exception):
    "SIGTERM or SIGINT reached the run: stop the experiment, commit what is recorded, exit."


def _stop(signum, frame):
    for sig in (signal.SIGTERM, signal.SIGINT): signal.signal(sig, signal.SIG_IGN)  # one stop: its commit is not cut
    raise Stopped(signal.Signals(signum).name)


def run_experiment(cmd: list[str], env: dict, every: float, save, poll: float = 30.0, out: Path | None = None) -> int:
    ("Run one experiment's command; call `save(what)` whenever a run is recorded in `out` (default results/confirm) "
     "and at least every `every` minutes; stopped (`Stopped`), stop the command (the runner stops its notebook), save, "
     "and raise again.")
    out = OUT if out is None else out
    proc, last, seen = subprocess.Popen(cmd, cwd=ROOT, env=env), time.time(), records_state(out)
    try:
        while proc.poll() is None:
            time.sleep(poll)
            if (now := records_state(out)) != seen or time.time() - last > 60 * every:
                save("in progress"); last, seen = time.time(), now
        return proc.returncode
    except Stopped:
        proc.terminate()
        try: proc.wait(timeout=120)
        except subprocess.TimeoutExpired: proc.kill(); proc.wait()
        save("stopped")
        raise


def main(argv=None) -> int:
    sys.path.insert(0, str(ROOT))
    from sentcl.experiments.report_results import COMMIT_EVERY_MINUTES
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", required=True, help="the data folder (the study used the project's shared data)")
    ap.add_argument("--commit-every", type=float, default=COMMIT_EVERY_MINUTES,
                    help="the most minutes between two commits while an experiment runs")
    ap.add_argument("--no-commit", action="store_true", help="write the records, commit nothing")
    ap.add_argument("--dry-run", action="store_true", help="print the commands and stop")
    args = ap.parse_args(argv)
    plan = registered()
    sha = hashlib.sha256(PLAN.read_bytes()).hexdigest()
    cmds = {e: command(e, s, plan, args.data_dir) for e, s in plan["run"]["experiments"].items()}
    if args.dry_run:
        for c in cmds.values(): print(" ".join(c))
        return 0
    here = machine_check(plan)
    print(f"plan {sha[:12]} (registered at {json.loads((OUT / 'REGISTRATION.json').read_text())['commit'][:7]}); "
          f"machine {here}", flush=True)
    failed = 0
    for sig in (signal.SIGTERM, signal.SIGINT): signal.signal(sig, _stop)
    for exp, cmd in cmds.items():
        print(f"[{time.strftime('%H:%M:%S')}] {exp}: {' '.join(cmd[3:])}", flush=True)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's sentcl, the code the plan names
        save = lambda what, exp=exp: None if args.no_commit else commit(f"confirm (plan {sha[:12]}): {exp} {what}")
        try: rc = run_experiment(cmd, env, args.commit_every, save)
        except Stopped as e:
            print(f"[{time.strftime('%H:%M:%S')}] {e} during {exp}: records so far committed; rerun the same command "
                  "to resume", flush=True)
            return 1
        failed += rc != 0
        save("done" if rc == 0 else "failed")
    print(f"[{time.strftime('%H:%M:%S')}] finished; {failed} experiment(s) failed (rerun the same command to resume)")
    return failed


if __name__ == "__main__":
    sys.exit(main())
