"""PairSupCon at 1,024 pairs per step inside sentence-transformers' own trainer, on a CPU: the cached loss
(`mini_batch_size`) against the uncached one at the same batch, each in its own process, peak memory as the ratio.

Each arm runs `SentenceTransformerTrainer` with `sentcl.st.losses.PairSupConLoss` (the released defaults, heads at 100
times the encoder's learning rate) for `--steps` steps of `--batch` rows of the bundled SNLI sample (repeated to fill
the batches; the loss skips its neutral rows, as it does on the hub's SNLI), `--model` at `--max-length` tokens. The
arm's process is its own, so its peak resident memory (`ru_maxrss`, read by the parent with `os.wait4`) is that arm's
alone: the model, the optimiser state, and the activations the step keeps alive, which is what caching bounds.

    nice -n 5 python benchmarks/bench_st_cached.py [--model default] [--batch 1024] [--mini-batch-size 64]
                                                   [--steps 2] [--max-length 32] [--json OUT]

It prints each arm's losses, seconds per step and peak memory, and the ratio cached / uncached; the memory ratio is
what carries from machine to machine (the seconds are this machine's at that moment). The two arms start from the
same weights and batches; their losses agree up to the dropout masks, which mini-batches draw in another order.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def arm(args) -> dict:
    "One arm in this process: a few trainer steps; its losses and seconds per step."
    import torch
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from transformers import PrinterCallback, TrainerCallback
    from sentcl.data.corpora import load_nli
    from sentcl.data.layout import SAMPLES_DIR
    from sentcl.st.datasets import nli_dataset
    from sentcl.st.losses import PairSupConLoss
    from sentcl.st.models import sentence_transformer

    torch.manual_seed(0)
    nli = load_nli("snli", "train", SAMPLES_DIR)
    rows = nli.sample(args.batch * args.steps, replace=True, random_state=0).reset_index(drop=True)
    model = sentence_transformer(args.model, device="cpu", max_length=args.max_length)
    loss = PairSupConLoss(model, mini_batch_size=args.mini_batch_size or None)
    times = []
    class Clock(TrainerCallback):
        def on_step_begin(self, *a, **k): self.t = time.perf_counter()
        def on_step_end(self, *a, **k): times.append(time.perf_counter() - self.t)
    with tempfile.TemporaryDirectory() as out:
        targs = SentenceTransformerTrainingArguments(
            output_dir=out, max_steps=args.steps, per_device_train_batch_size=args.batch, learning_rate=5e-6,
            optim="adamw_torch", lr_scheduler_type="constant", learning_rate_mapping={"contrast_head|classifier": 5e-4},
            seed=0, logging_steps=1, save_strategy="no", report_to="none", disable_tqdm=True, use_cpu=True,
            dataloader_drop_last=True)
        trainer = SentenceTransformerTrainer(model=model, args=targs, train_dataset=nli_dataset(rows), loss=loss,
                                             callbacks=[Clock()])
        trainer.remove_callback(PrinterCallback)
        trainer.train()
    losses = [round(l["loss"], 4) for l in trainer.state.log_history if "loss" in l]
    return {"losses": losses, "s_per_step": sum(times) / len(times), "steps": len(times)}


def run_arm(args, mini_batch_size:int) -> dict:
    "An arm in a child process; its result and its peak resident memory in MiB."
    cmd = [sys.executable, __file__, "--child", "--model", args.model, "--batch", str(args.batch), "--steps",
           str(args.steps), "--max-length", str(args.max_length), "--mini-batch-size", str(mini_batch_size)]
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(cmd, stdout=out)
        _, status, usage = os.wait4(proc.pid, 0)
        out.seek(0)
        text = out.read()
    if status != 0: raise SystemExit(f"the arm with mini_batch_size={mini_batch_size} failed (status {status})")
    res = json.loads(text.strip().splitlines()[-1])
    return {**res, "peak_mib": round(usage.ru_maxrss / 1024, 1), "mini_batch_size": mini_batch_size or None}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="default")
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--mini-batch-size", type=int, default=64)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--max-length", type=int, default=32)
    p.add_argument("--json", default=None)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(arm(args)))
        return 0
    res = {"model": args.model, "batch": args.batch, "max_length": args.max_length, "steps": args.steps,
           "uncached": run_arm(args, 0), "cached": run_arm(args, args.mini_batch_size)}
    res["memory_ratio"] = round(res["cached"]["peak_mib"] / res["uncached"]["peak_mib"], 3)
    res["time_ratio"] = round(res["cached"]["s_per_step"] / res["uncached"]["s_per_step"], 3)
    for k in ("uncached", "cached"):
        r = res[k]
        print(f"{k:9s} mini_batch_size={r['mini_batch_size']}: peak {r['peak_mib']:.0f} MiB, "
              f"{r['s_per_step']:.1f} s/step, losses {r['losses']}")
    print(f"cached / uncached at {args.batch} pairs per step: memory {res['memory_ratio']:.3f}, "
          f"time {res['time_ratio']:.3f}")
    if args.json:
        with open(args.json, "w") as f: json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
