"""Where a training step's time goes: sentcl's Trainer on simcse-sup (all-MiniLM-L6-v2, mean pooling), step by step.

The Trainer runs unchanged; timers wrap the functions it calls: fetching the batch (the view), tokenising
(`SentenceEncoder.tokenize`), the transformer forward (`SentenceEncoder.forward`), the loss on the embeddings
(`loss_from_embeddings`), backward, the optimiser (zero_grad, step, schedule) and the rest of the step (logging,
checks, progress). Prints the median seconds of each part per step, for fp32 and bf16.

    python benchmarks/profile_step.py [--data-dir DIR] [--batch-size 32] [--steps 8] [--precision fp32,bf16]
"""
from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
HERE = os.path.dirname(os.path.abspath(__file__))
PARTS = ("batch", "tokenize", "forward", "loss", "backward", "optimizer", "other")


def profile(precision:str, args) -> dict:
    "Median seconds per step of each part, over `args.steps` steps after one warm-up step."
    import torch
    from sentcl.encoders import SentenceEncoder
    from sentcl.methods import build_method
    from sentcl.train.trainer import RunOptions, Trainer, resolve, training_view
    spent = collections.defaultdict(float)
    def timer(part, fn):
        def wrapped(*a, **k):
            t0 = time.perf_counter()
            try: return fn(*a, **k)
            finally: spent[part] += time.perf_counter() - t0
        return wrapped
    overrides = {"model": "default", "batch_size": args.batch_size, "max_length": 32, "train_pooling": "mean",
                 "eval_pooling": "mean", "reinit_pooler": False, "schedule": "constant", "warmup": 0.0, "grad_clip": None,
                 "eval_every": None, "select_on_dev": False}
    data = args.data_dir if os.path.isdir(os.path.join(args.data_dir, "nli", "snli")) else None
    with tempfile.TemporaryDirectory() as out:
        cfg, options = resolve("simcse-sup", overrides, RunOptions(
            out=out, preset="cpu-smoke", max_steps=args.steps + 1, progress=False, precision=precision,
            **({"train_data": "snli:test", "data_dir": data} if data else {})))
        method = build_method("simcse-sup", cfg.model, cfg)
        view, fetch = training_view(method, options), []
        make = view.make_batch
        def timed_make(*a, **k):
            t0 = time.perf_counter(); out_ = make(*a, **k); fetch.append(time.perf_counter() - t0); return out_
        view.make_batch = timed_make
        trainer = Trainer(method, view, options)
        patches = [(SentenceEncoder, "tokenize"), (SentenceEncoder, "forward"), (type(method), "loss_from_embeddings")]
        saved = [(cls, name, getattr(cls, name)) for cls, name in patches]
        for (cls, name), part in zip(patches, ("tokenize", "forward", "loss")): setattr(cls, name, timer(part, getattr(cls, name)))
        backward = torch.Tensor.backward
        torch.Tensor.backward = timer("backward", backward)
        upd = trainer._update
        trainer._update = timer("optimizer", upd)
        steps, step = [], trainer.train_step
        def timed_step(batch):
            spent.clear(); t0 = time.perf_counter(); step(batch)
            total = time.perf_counter() - t0
            steps.append({**{p: spent[p] for p in PARTS if p not in ("other", "batch")}, "batch": fetch[-1], "total": total + fetch[-1]})
        trainer.train_step = timed_step
        try: trainer.fit()
        finally:
            for cls, name, fn in saved: setattr(cls, name, fn)
            torch.Tensor.backward = backward
    steps = steps[1:]
    for s in steps: s["other"] = s["total"] - sum(s[p] for p in PARTS if p != "other")
    return {k: statistics.median(s[k] for s in steps) for k in (*PARTS, "total")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=os.environ.get("SENTCL_DATA", "../shared/data"))
    ap.add_argument("--batch-size", type=int, default=32, help="triplets per step (3 sentences each)")
    ap.add_argument("--steps", type=int, default=8, help="timed steps after one warm-up step")
    ap.add_argument("--precision", default="fp32,bf16")
    args = ap.parse_args(argv)
    import torch
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; simcse-sup, {args.batch_size} triplets, max length 32")
    rows = {p: profile(p, args) for p in args.precision.split(",")}
    print("\n| part of a step (median s) | " + " | ".join(rows) + " |")
    print("|---|" + "---:|" * len(rows))
    for part in (*PARTS, "total"):
        print(f"| {part} | " + " | ".join(f"{r[part]:.3f} ({100 * r[part] / r['total']:.0f}%)" if part != "total" else
                                         f"{r[part]:.3f}" for r in rows.values()) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
