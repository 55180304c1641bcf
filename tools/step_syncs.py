"""Host-device syncs and main-process tokenizer calls per training step, per method: `sentcl.train.trainer.train` on the `tiny`
model with the cpu-smoke data, counted on a CPU (`sentcl.precision.SyncCounter`) in the steady state.

A sync is an operator that makes the host wait for a GPU (an `.item()`, a boolean-mask index, a copy to the host...);
counted on a CPU it is what a GPU step would wait on. The optimiser's own step is left out: its step counters are host
tensors on a GPU too. Tokenizer calls are those the main process makes between one step's start and the next one's
(with loader workers, none: the workers tokenize). Runs on older sentcl checkouts too (no `log_every` there), to count
a baseline:  PYTHONPATH=<checkout> python tools/step_syncs.py

    python tools/step_syncs.py [--methods simcse-unsup sncse] [--workers 1] [--log-every 4] [--steps 12] [--json]
    python tools/step_syncs.py --arms [--json]   # one arm of each step class of every experiment under --preset paper

`--arms` counts every arm the paper preset plans, one per step class (`arm_classes`): arms whose overrides differ only
in values that cannot change which operators a step runs (a temperature, a margin, a model: every arm runs on `tiny`)
are one class. Each class runs its representative arm's overrides on `tiny` with the cpu-smoke data.
"""
import argparse
import dataclasses
import json
import os
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")
import torch  # noqa: E402
from transformers import PreTrainedTokenizerBase  # noqa: E402

from sentcl.train import trainer as T
from sentcl.precision import SyncCounter  # noqa: E402

METHODS = ("simcse-unsup", "simcse-sup", "pairsupcon", "supcon", "sbert", "sncse", "declutr")
SMALL = {"eval_every": None, "select_on_dev": False}  # no dev evaluation: the step alone


def _paused_optimizer(trainer, counter):
    "Leave the optimiser's step out of the count (its counters are host tensors on a GPU as well)."
    step = trainer.optimizer.step
    def paused(*a, **k):
        with counter.paused(): return step(*a, **k)
    trainer.optimizer.step = paused
    return step


# overrides that never change a step's operators on `tiny`: the model (every class runs on `tiny`), the share of the
# corpus, and the dev evaluation (off in the count)
NOT_STEP = ("model", "train_fraction", "seed", "eval_every", "select_on_dev")


def _step_class(value):
    "What of an override value can choose a code path: ints -1/0/1 against larger, 0.0 against other floats, strings."
    if isinstance(value, dict): return {k: _step_class(v) for k, v in sorted(value.items())}
    if isinstance(value, bool) or value is None or isinstance(value, str): return value
    if isinstance(value, int): return value if value in (-1, 0, 1) else ">1"
    if isinstance(value, float): return 0.0 if value == 0 else "float"
    return type(value).__name__


def arm_classes(preset:str="paper") -> list[dict]:
    "Every arm of every experiment under `preset`, grouped by step class: [{method, overrides, arms, key}], one each."
    import tempfile
    from sentcl.experiments.catalog.registry import EXPERIMENTS, get_experiment
    from sentcl.experiments.plan import plan_runs
    classes = {}
    with tempfile.TemporaryDirectory() as d:
        for name in EXPERIMENTS:
            for r in plan_runs(get_experiment(name), preset, f"{d}/{name}"):
                if not r.method: continue
                kept = {k: v for k, v in r.overrides.items() if k not in NOT_STEP}
                shape = {k: c for k, c in _step_class(kept).items() if c != "float"}  # a float's value: no new path
                key = json.dumps([r.method, r.options.precision, r.options.mini_batch_size is not None, shape])
                c = classes.setdefault(key, {"key": key, "method": r.method, "overrides": kept, "arms": [],
                                             "precision": r.options.precision})
                if f"{name}/{r.arm}" not in c["arms"]: c["arms"].append(f"{name}/{r.arm}")  # once, whatever its seeds
    return list(classes.values())


def _view_kwargs(method:str, overrides:dict) -> dict:
    "An arm's `view_kwargs` laid over the cpu-smoke preset's (its short documents need its short spans)."
    if "view_kwargs" not in overrides: return overrides
    from sentcl.train.presets import training_preset
    base = training_preset("cpu-smoke").overrides_for(method).get("view_kwargs", {})
    return {**overrides, "view_kwargs": {**base, **overrides["view_kwargs"]}}


def count(method:str, steps:int=12, warm:int=4, workers:int=0, log_every:int=4, overrides:dict=None,
          options:dict=None, # run options beside the counted ones, e.g. {"pad_to_max_length": True}
         ) -> dict:
    "Per step in the steady state (after `warm` steps): syncs inside the step, main-process tokenizer calls."
    syncs, tok_at, calls = [], [], [0]
    call, step = PreTrainedTokenizerBase.__call__, T.Trainer.train_step
    def tokenizer_call(self, *a, **k): calls[0] += 1; return call(self, *a, **k)
    def counted(self, batch):
        tok_at.append(calls[0])
        with SyncCounter() as c:
            original = _paused_optimizer(self, c)
            try: step(self, batch)
            finally: self.optimizer.step = original
        syncs.append(c.total)
    fields = {f.name for f in dataclasses.fields(T.RunOptions)}
    extra = {k: v for k, v in (("loader_workers", workers), ("log_every", log_every)) if k in fields}
    with tempfile.TemporaryDirectory() as d:
        opts = T.RunOptions(out=f"{d}/run", preset="cpu-smoke", max_steps=steps + 1, progress=False, **extra, **(options or {}))
        PreTrainedTokenizerBase.__call__, T.Trainer.train_step = tokenizer_call, counted
        try: T.train(method, {**_view_kwargs(method, overrides or {}), "model": "tiny", **SMALL}, opts)
        finally: PreTrainedTokenizerBase.__call__, T.Trainer.train_step = call, step
        logged = [json.loads(line) for line in open(f"{d}/run/metrics.jsonl", encoding="utf-8")]
    n = steps - warm
    return {"method": method, "overrides": overrides or {}, "options": options or {}, "steps": n, "syncs_per_step": sum(syncs[warm:steps]) / n,
            "tokenizer_calls_per_step": (tok_at[steps] - tok_at[warm]) / n, "workers": extra.get("loader_workers"),
            "log_every": extra.get("log_every"), "losses": [r["loss"] for r in logged if "loss" in r]}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--methods", nargs="+", default=list(METHODS))
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--log-every", type=int, default=4)
    p.add_argument("--steps", type=int, default=12, help="steps counted after the warm-up (a multiple of --log-every)")
    p.add_argument("--warm", type=int, default=4)
    p.add_argument("--arms", action="store_true", help="every step class of the paper preset's arms, not --methods")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    if a.arms:
        rows = [{**count(c["method"], a.warm + a.steps, a.warm, a.workers, a.log_every, c["overrides"]),
                 "arms": c["arms"]} for c in arm_classes()]
        if a.json: print(json.dumps(rows, indent=2)); return
        print(f"{'syncs/step':>10}  {'method':<20} overrides (arms)  (workers {a.workers}, log_every {a.log_every})")
        for r in rows: print(f"{r['syncs_per_step']:>10.2f}  {r['method']:<20} {json.dumps(r['overrides'])} "
                             f"({len(r['arms'])}: {r['arms'][0]}...)")
        return
    rows = [count(m, a.warm + a.steps, a.warm, a.workers, a.log_every) for m in a.methods]
    if a.json: print(json.dumps(rows, indent=2)); return
    print(f"{'method':<14} {'syncs/step':>10} {'tokenizer calls/step':>21}  (workers {a.workers}, log_every {a.log_every})")
    for r in rows: print(f"{r['method']:<14} {r['syncs_per_step']:>10.2f} {r['tokenizer_calls_per_step']:>21.2f}")


if __name__ == "__main__":
    sys.exit(main())
