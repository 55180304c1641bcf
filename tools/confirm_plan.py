"""Size and register the CPU study's confirmatory run: write results/confirm/PLAN.json from the pilot.

The family (at most six claim columns, at least one per paper) is declared here, before any confirmatory training.
For each column the pilot's committed paired differences (results/cpu) give a mean and a spread; the seeds per arm
are the fewest whose simultaneous interval would decide the column at the family's level
(`sentcl.experiments.power.seeds_to_decide`: exclude zero or the reference), raised to the seeds that would also
exclude zero where that is affordable, so that the run can say which way an effect goes. The budget is priced from
the seconds the pilot's runs recorded: each training at its method's fastest recorded pace, each evaluation at its
experiment's median fresh evaluation. Seeds are new (the pilot used 0 to 4).

    python tools/confirm_plan.py [--check]     # --check: recompute and compare with the committed plan, write nothing
    python tools/confirm_plan.py --record-registration

The plan names the analysis code's commit: commit the code first, then run this, then commit the plan alone; then
`--record-registration` writes results/confirm/REGISTRATION.json (the commit that registered the plan, its time, the
plan file's sha256 and every commit of it) from git, to be committed too: the findings page, README and
tools/confirm_run.py read the registration from it, so a clone without the history (shallow, or an archive) knows it.
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLAN = ROOT / "results" / "confirm" / "PLAN.json"

# (experiment, better arm, worse arm, column, smallest effect of interest where the paper printed no difference)
FAMILY = [
    ("pairsupcon-table4", "pairsupcon-lr2e-05", "classification-lr2e-05", "sts", None),
    ("liao-table2", "scl-allpalln-0.3", "ce", "avg", None),
    ("sncse-figure4", "sncse", "sncse-lam0", "negation_separation", 0.01),  # BML's mechanism, continuous: -Δ
    ("sncse-table2", "sncse", "sncse-lam0", "avg", None),
    ("declutr-figure3", "both-100", "contrastive-100", "sts", 0.5),
    ("declutr-figure3", "both-100", "mlm-100", "sts", 0.5),
]
SESOI_WHY = {
    "negation_separation": "0.01: an eighth of the shift SNCSE's Figure 4 shows for the soft-negative peak (0.98 to "
                           "0.90), the smallest change of a sentence's negation against its positive view worth a claim",
    "sts": "0.5 points on the ×100 scale: below the smallest difference any paper of the study prints (PairSupCon's +0.6)",
}
FIRST_SEED = 100  # new seeds: the pilot ran 0 to 4
MIN_SEEDS = 3
BUDGET_HOURS = 10.0  # two-core CPU hours at the pilot's recorded pace
ALPHA = 0.05


def _git(*args) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def arms_of(family) -> dict:
    "{experiment: arms to run}: the untrained reference and both arms of each member, in catalog order."
    from sentcl.experiments.catalog.registry import get_experiment
    want = {}
    for e, b, w, *_ in family: want.setdefault(e, {"pretrained"}).update((b, w))
    return {e: [a.name for a in get_experiment(e).arms if a.name in arms] for e, arms in want.items()}


def pace(docs: dict) -> tuple[dict, dict]:
    "({method: fastest recorded training seconds}, {(experiment, arm): median fresh evaluation seconds}) of the pilot."
    from sentcl.experiments.report_results import CACHED_SECONDS, _run_parts
    train, evals = {}, {}
    for n, d in docs.items():
        for r in d["runs"]:
            t, ev = _run_parts(r)
            if r.get("train_folder"): train[r["method"]] = min(train.get(r["method"], math.inf), t)
            if ev >= CACHED_SECONDS: evals.setdefault((n, r["arm"]), []).append(ev)
    med = lambda v: sorted(v)[len(v) // 2]
    per_exp = {n: med([e for (m, _), v in evals.items() if m == n for e in v]) for n in docs}
    return train, {(n, r["arm"]): med(evals.get((n, r["arm"]), [per_exp[n]])) for n, d in docs.items() for r in d["runs"]}


def seed_cost(docs: dict, arms: dict) -> dict:
    "{experiment: seconds one more seed costs}: each trained arm's training once (shared trainings counted once)."
    from sentcl.experiments.catalog.registry import get_experiment
    train, evals = pace(docs)
    seen, out = set(), {}
    for e, names in arms.items():
        exp, s = get_experiment(e), 0.0
        for a in (exp.arm(n) for n in names if n != "pretrained"):
            key = (a.method, json.dumps(a.overrides, sort_keys=True, default=str))  # one training, whichever experiment
            if key not in seen: seen.add(key); s += train[a.method]
            s += evals[(e, a.name)]
        out[e] = s
    return out


def size(docs: dict) -> tuple[list, dict, dict]:
    "Per member its pilot statistics and seeds; per experiment the seeds it runs; the budget's arithmetic."
    from sentcl.experiments.power import seeds_to_decide
    m, rows = len(FAMILY), []
    for e, b, w, col, sesoi in FAMILY:
        c = next(c for c in docs[e]["contrasts"] if (c["better"], c["worse"], c["column"]) == (b, w, col))
        d = c["diffs"]; n = len(d); mean = sum(d) / n; sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
        ref = c["paper_diff"] if c["paper_diff"] is not None else sesoi
        rows.append({"experiment": e, "better": b, "worse": w, "column": col, "pilot_seeds": n, "pilot_mean": mean,
                     "pilot_sd": sd, "reference": ref, "reference_of": "paper" if c["paper_diff"] is not None else "sesoi",
                     "seeds_to_decide": seeds_to_decide(mean, sd, ref, m, ALPHA),
                     "seeds_to_exclude_zero": seeds_to_decide(mean, sd, None, m, ALPHA)})
    arms = arms_of(FAMILY)
    cost = seed_cost(docs, arms)
    cap = int(BUDGET_HOURS * 3600 // sum(cost.values()))  # seeds of every experiment the budget buys
    for r in rows:
        zero = r["seeds_to_exclude_zero"]
        r["seeds"] = max(MIN_SEEDS, r["seeds_to_decide"] or cap, zero if zero is not None and zero <= cap else 0)
    shared = {"sncse-figure4": "sncse-table2", "sncse-table2": "sncse-figure4"}  # one set of trainings
    per_exp = {}
    for r in rows:
        for e in (r["experiment"], shared.get(r["experiment"])):
            if e: per_exp[e] = max(per_exp.get(e, 0), min(r["seeds"], cap))
    planned = sum(per_exp[e] * cost[e] for e in per_exp) / 3600
    budget = {"two_core_hours": BUDGET_HOURS, "seconds_per_seed": {e: round(s) for e, s in cost.items()},
              "seeds_the_budget_buys": cap, "planned_two_core_hours": round(planned, 2),
              "priced_as": "each training at its method's fastest pace recorded in results/cpu, each evaluation at "
                           "the median of its experiment and arm's fresh evaluations there; the untrained reference's "
                           "evaluations (a minute or two in all) not counted"}
    return rows, {e: list(range(FIRST_SEED, FIRST_SEED + k)) for e, k in per_exp.items()}, budget


def plan(docs: dict, commit: str) -> dict:
    from sentcl.experiments.catalog.registry import AnalysisPlan, plan_dict
    rows, seeds, budget = size(docs)
    arms = arms_of(FAMILY)
    p = AnalysisPlan(family=tuple(f[:4] for f in FAMILY), name="the CPU study's confirmatory run",
                     status="registered", alpha=ALPHA, sesoi={f[:4]: f[4] for f in FAMILY if f[4] is not None},
                     resolution={}, note="committed before any of its trainings; sized from the pilot in results/cpu",
                     run={"preset": "cpu", "experiments": {e: {"arms": arms[e], "seeds": seeds[e]} for e in arms},
                          "precision": "bf16", "precision_rule": "training pinned to bf16 (-p precision=bf16); "
                          "evaluation is the preset's auto, bf16 on a CPU with bf16 units: tools/confirm_run.py refuses "
                          "a machine whose CPU or bf16 units differ from the first run's, so both arms of every seed "
                          "run on one kind of machine at one precision",
                          "scores": "stored unrounded (rounded only where printed)", "analysis_commit": commit,
                          "sizing": rows, "budget": budget, "sesoi_why": SESOI_WHY})
    return plan_dict(p)


def registration() -> dict:
    "The committed plan's registration record, from git: the newest commit of PLAN.json, its time, sha256, every commit."
    import hashlib
    if _git("rev-parse", "--is-shallow-repository") == "true":
        sys.exit("this clone is shallow: its history cannot tell which commit registered the plan; "
                 "`git fetch --unshallow` first")
    if _git("ls-files", "--", str(PLAN)) == "" or _git("status", "--porcelain", "--", str(PLAN)):
        sys.exit(f"{PLAN.relative_to(ROOT)}: not committed, or modified since; commit the plan alone first")
    commits = [line.split() for line in _git("log", "--format=%H %cI", "--", str(PLAN)).splitlines()]
    return {"plan": str(PLAN.relative_to(ROOT)), "commit": commits[0][0], "committed": commits[0][1],
            "sha256": hashlib.sha256(PLAN.read_bytes()).hexdigest(), "commits": [c for c, _ in commits]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="recompute the sizing and compare with the committed plan")
    ap.add_argument("--record-registration", action="store_true",
                    help="write results/confirm/REGISTRATION.json from git, after the plan's commit")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from sentcl.core import write_json
    if args.record_registration:
        from sentcl.experiments.report_results import REGISTRATION_FILE
        rec = registration()
        write_json(PLAN.parent / REGISTRATION_FILE, rec)
        print(f"written: {(PLAN.parent / REGISTRATION_FILE).relative_to(ROOT)} (registered at {rec['commit'][:7]}); "
              "commit it before any confirmatory training")
        return 0
    from sentcl.experiments.report_results import collect_results
    docs = collect_results(ROOT / "results" / "cpu")
    if args.check:
        old = json.loads(PLAN.read_text())
        new = plan(docs, old["run"]["analysis_commit"])
        same = json.loads(json.dumps(new)) == old
        print("the committed plan is what its sizing gives" if same else "the committed plan differs from its sizing")
        return 0 if same else 1
    if _git("status", "--porcelain", "--", "sentcl", "tools", "nbs"):
        sys.exit("commit the analysis code first: the plan names the commit it will be judged by")
    PLAN.parent.mkdir(parents=True, exist_ok=True)
    write_json(PLAN, plan(docs, _git("rev-parse", "HEAD")))
    print(f"written: {PLAN.relative_to(ROOT)}; commit it alone, before any confirmatory training")
    return 0


if __name__ == "__main__":
    sys.exit(main())
