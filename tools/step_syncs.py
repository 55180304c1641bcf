"""Host-device syncs and main-process tokenizer calls per training step, per method: `sentcl.train.trainer.train` on the `tiny`
model with the cpu-smoke data, counted on a CPU (`sentcl.precision.SyncCounter`) in the steady state.

A sync is an operator that makes the host wait for a GPU (an `.item()`, a boolean-mask index, a copy to the host...);
counted on a CPU it is what a GPU step would wait on. The optimiser's own step is left out: its step counters are host
tensors on a GPU too. Tokenizer calls are those the main process makes between one step's start and the next one's
(with loader workers, none: the workers tokenize). Runs on older sentcl checkouts too (no `log_every` there), to count
a baseline:  PYTHONPATH=<checkout> python tools/step_syncs.py

    python tools/step_syncs.py [--methods simcse-unsup sncse] [--workers 1] [--log-every 4] [--steps 12] [--json]
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


def count(method:str, steps:int=12, warm:int=4, workers:int=0, log_every:int=4) -> dict:
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
        opts = T.RunOptions(out=f"{d}/run", preset="cpu-smoke", max_steps=steps + 1, progress=False, **extra)
        PreTrainedTokenizerBase.__call__, T.Trainer.train_step = tokenizer_call, counted
        try: T.train(method, {"model": "tiny", **SMALL}, opts)
        finally: PreTrainedTokenizerBase.__call__, T.Trainer.train_step = call, step
    n = steps - warm
    return {"method": method, "steps": n, "syncs_per_step": sum(syncs[warm:steps]) / n,
            "tokenizer_calls_per_step": (tok_at[steps] - tok_at[warm]) / n, "workers": extra.get("loader_workers"),
            "log_every": extra.get("log_every")}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--methods", nargs="+", default=list(METHODS))
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--log-every", type=int, default=4)
    p.add_argument("--steps", type=int, default=12, help="steps counted after the warm-up (a multiple of --log-every)")
    p.add_argument("--warm", type=int, default=4)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    rows = [count(m, a.warm + a.steps, a.warm, a.workers, a.log_every) for m in a.methods]
    if a.json: print(json.dumps(rows, indent=2)); return
    print(f"{'method':<14} {'syncs/step':>10} {'tokenizer calls/step':>21}  (workers {a.workers}, log_every {a.log_every})")
    for r in rows: print(f"{r['method']:<14} {r['syncs_per_step']:>10.2f} {r['tokenizer_calls_per_step']:>21.2f}")


if __name__ == "__main__":
    sys.exit(main())
