"""Benchmark sentcl training: step throughput against sentence-transformers, and gradient caching's memory saving.

1. Throughput. `simcse-sup` run by sentcl's `Trainer` against `SentenceTransformerTrainer` with
   `MultipleNegativesRankingLoss` (scale 20 = 1/tau with tau = 0.05, cosine similarity; the same loss
   as SimCSE's InfoNCE with (anchor, positive, hard negative) triplets). Both start from the same
   `default` weights (all-MiniLM-L6-v2), get the same batches in the same order (SNLI triplets drawn
   by sentcl's triplets view), the same max length, fp32, dropout on, AdamW at the same constant
   learning rate, no weight decay and no gradient clipping. Each round trains both from freshly
   loaded weights for 1 warm-up step plus `--steps` timed steps; a step's time runs from the moment
   one step ends to the moment the next ends, so it covers fetching and tokenising the batch,
   forward, backward, the optimiser update and each trainer's bookkeeping. Rounds alternate which
   framework goes first; the reported times are medians over all timed steps.
   By default sentcl's method uses mean pooling, as the sentence-transformers model does, so both do
   the same work and their losses can be checked to agree with dropout off; `--pooling cls` uses
   simcse-sup as configured for the paper (BERT pooler, re-initialised) against the model's own
   mean pooling.
2. Memory. Peak resident memory added by one forward + backward of `pairsupcon` at `--mem-batch`
   pairs (256 by default), without and with gradient caching (`--mini-batch-size`, 32 by default),
   each run in a fresh subprocess (`--mem-repeats` of each, medians). The peak is the kernel's
   high-water mark (VmHWM, reset just before the step through /proc/self/clear_refs) minus the
   resident size just before the step; where the reset is not allowed, ru_maxrss after the step
   minus the resident size before it is used instead (an overestimate if loading peaked higher).

    python benchmarks/bench_train.py [--data-dir DIR] [--batch-size 32] [--steps 5] [--rounds 3]
                                     [--mem-batch 256] [--mini-batch-size 32] [--mem-repeats 2]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")  # sentence-transformers' model-card bar; read when tqdm is imported

MB = 1024 * 1024


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=os.environ.get("SENTCL_DATA", "../shared/data"),
                    help="a data folder in sentcl's layout (SNLI test split used); the bundled sample when it is missing")
    ap.add_argument("--batch-size", type=int, default=32, help="throughput: triplets per step (3 sentences each)")
    ap.add_argument("--steps", type=int, default=5, help="throughput: timed steps per framework per round (after 1 warm-up step)")
    ap.add_argument("--rounds", type=int, default=3, help="throughput: rounds, alternating which framework goes first")
    ap.add_argument("--max-length", type=int, default=32, help="tokens per sentence, both frameworks and both parts")
    ap.add_argument("--lr", type=float, default=5e-5, help="AdamW learning rate (constant), both frameworks")
    ap.add_argument("--pooling", choices=("mean", "cls"), default="mean",
                    help="sentcl's simcse-sup pooling: mean (as the ST model) or cls (the paper's, BERT pooler)")
    ap.add_argument("--mem-batch", type=int, default=256, help="memory: pairsupcon pairs per step")
    ap.add_argument("--mini-batch-size", type=int, default=32, help="memory: gradient-caching chunk")
    ap.add_argument("--mem-repeats", type=int, default=2, help="memory: fresh subprocesses per setting")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                    help="throughput: both frameworks in this precision (bf16: autocast on CPU in both)")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--memory-child", action="store_true", help=argparse.SUPPRESS)  # one measurement; prints JSON
    ap.add_argument("--child-mini-batch", type=int, default=0, help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def data_source(args) -> tuple[str, str]:
    "(train_data spec, data_dir) for `load_training_data`: SNLI test from the data folder, else the bundled sample."
    from sentcl.data.layout import SAMPLES_DIR
    if os.path.isdir(os.path.join(args.data_dir, "nli", "snli")): return "snli:test", args.data_dir
    return "snli", str(SAMPLES_DIR)


def fixed_batches(method_name:str, view_name:str, args, batch_size:int, n:int) -> tuple[list[dict], int]:
    "`n` batches of `batch_size` rows made by sentcl's view for `method_name` (rows reused only when the data is short), and the view's size."
    import numpy as np
    from sentcl.train.trainer import RunOptions, load_training_data
    from sentcl.views import build_view
    spec, data_dir = data_source(args)
    view = build_view(view_name, load_training_data(view_name, RunOptions(train_data=spec, data_dir=data_dir)))
    rng = np.random.default_rng(args.seed)
    order = np.concatenate([rng.permutation(len(view)) for _ in range(-(-n * batch_size // len(view)))])
    return [view.make_batch(order[i * batch_size:(i + 1) * batch_size], rng) for i in range(n)], len(view)


def median(xs): return statistics.median(xs) if xs else float("nan")


# ---------------------------------------------------------------- throughput

def sentcl_steps(batches:list[dict], args, out_dir:str) -> tuple[list[float], float]:
    "Train simcse-sup with sentcl's Trainer on `batches` in order; (seconds of each step after the first, mean training loss)."
    import torch
    from sentcl.methods import build_method
    from sentcl.train.checkpoints import seed_everything
    from sentcl.train.trainer import RunOptions, Trainer, resolve
    from sentcl.views import View
    warnings.filterwarnings("ignore", message=".*using pooling 'cls' although the folder says 'mean'")  # --pooling cls: intended

    class Replay(View):
        "The given batches in order, stamping the time each is handed out (and when the last step is done)."
        def __init__(self, items):
            super().__init__(len(items) * args.batch_size); self.items, self.stamps = items, []
        def num_batches(self, batch_size, drop_last=True): return len(self.items)
        def batches(self, batch_size, seed=0, epoch=0, drop_last=True, start=0):
            for b in self.items[start:]:
                self.stamps.append(time.perf_counter()); yield b
            self.stamps.append(time.perf_counter())  # asked for one more: the last step has finished

    pooling = {"train_pooling": args.pooling, "eval_pooling": args.pooling, "reinit_pooler": args.pooling == "cls"}
    overrides = {**pooling, "model": "default", "batch_size": args.batch_size, "lr": args.lr, "seed": args.seed,
                 "max_length": args.max_length, "schedule": "constant", "warmup": 0.0, "weight_decay": 0.0,
                 "grad_clip": None, "eval_every": None, "select_on_dev": False}
    options = RunOptions(out=out_dir, preset="cpu-smoke", max_steps=len(batches), progress=False, precision=args.precision)
    cfg, options = resolve("simcse-sup", overrides, options)
    seed_everything(cfg.seed)
    method = build_method("simcse-sup", cfg.model, cfg)
    view = Replay(batches)
    trainer = Trainer(method, view, options)
    torch.manual_seed(args.seed)
    trainer.fit()
    t = view.stamps
    with open(os.path.join(out_dir, "metrics.jsonl")) as f: losses = [json.loads(l)["loss"] for l in f if '"loss"' in l]
    return [b - a for a, b in zip(t[1:], t[2:])], statistics.mean(losses)


def st_steps(batches:list[dict], args, out_dir:str) -> tuple[list[float], float]:
    "Train the ST model with MultipleNegativesRankingLoss on `batches` in order; (seconds of each step after the first, mean training loss)."
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.base.sampler import DefaultBatchSampler
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from torch.utils.data import SequentialSampler
    from transformers import PrinterCallback, TrainerCallback
    from sentcl.encoders import default_model_path

    class Stamps(TrainerCallback):
        def __init__(self): self.t = []
        def on_step_end(self, *a, **kw): self.t.append(time.perf_counter())

    def in_order(dataset, batch_size, drop_last, **kw):  # the rows as given: the batches are already made
        return DefaultBatchSampler(SequentialSampler(dataset), batch_size=batch_size, drop_last=drop_last)

    model = SentenceTransformer(str(default_model_path()), device="cpu")
    model.max_seq_length = args.max_length
    loss = MultipleNegativesRankingLoss(model, scale=20.0)  # cos_sim, query_to_doc, joint: InfoNCE with hard negatives
    data = Dataset.from_dict({"anchor": [s for b in batches for s in b["sentence"]],
                              "positive": [s for b in batches for s in b["positive"]],
                              "negative": [s for b in batches for s in b["hard_negative"]]})
    targs = SentenceTransformerTrainingArguments(
        output_dir=out_dir, max_steps=len(batches), per_device_train_batch_size=args.batch_size, learning_rate=args.lr,
        lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, max_grad_norm=0.0, optim="adamw_torch",
        adam_epsilon=1e-8, seed=args.seed, batch_sampler=in_order, dataloader_drop_last=True, dataloader_num_workers=0,
        logging_steps=10**6, save_strategy="no", report_to="none", disable_tqdm=True, use_cpu=True, bf16=args.precision == "bf16", fp16=False)
    stamps = Stamps()
    trainer = SentenceTransformerTrainer(model=model, args=targs, train_dataset=data, loss=loss, callbacks=[stamps])
    trainer.remove_callback(PrinterCallback)  # its end-of-run summary line; our own lines report the steps
    out = trainer.train()
    return [b - a for a, b in zip(stamps.t, stamps.t[1:])], float(out.training_loss)


def check_same_loss(batch:dict, args) -> tuple[float, float]:
    "Both frameworks' loss on one batch from the same fresh weights with dropout off (mean pooling only)."
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from sentcl.encoders import default_model_path
    from sentcl.methods import build_method
    method = build_method("simcse-sup", "default", train_pooling="mean", eval_pooling="mean", reinit_pooler=False, max_length=args.max_length).eval()
    model = SentenceTransformer(str(default_model_path()), device="cpu").eval()
    model.max_seq_length = args.max_length
    with torch.no_grad():
        ours = float(method.loss(batch)[0])
        emb = [model.encode(batch[c], batch_size=len(batch[c]), convert_to_tensor=True) for c in ("sentence", "positive", "hard_negative")]
        theirs = float(MultipleNegativesRankingLoss(model, scale=20.0).compute_loss_from_embeddings(emb, None))
    return ours, theirs


def throughput(args) -> dict:
    import importlib.util
    import datasets
    import torch
    import transformers
    if importlib.util.find_spec("accelerate") is None:
        raise SystemExit("bench_train: SentenceTransformerTrainer needs the accelerate package (sentence-transformers[train]); "
                         "run `.venv/bin/pip install 'accelerate>=1.1'`, or pass --skip-throughput")
    transformers.utils.logging.disable_progress_bar(); datasets.disable_progress_bars()  # weight-loading and model-card bars
    batches, n_rows = fixed_batches("simcse-sup", "triplets", args, args.batch_size, args.steps + 1)
    print(f"throughput: simcse-sup, {n_rows} triplets available, batch {args.batch_size} triplets = {3 * args.batch_size} sentences, "
          f"max_length {args.max_length}, lr {args.lr}, {args.precision}, 1 warm-up + {args.steps} timed steps x {args.rounds} rounds",
          flush=True)
    if args.pooling == "mean":
        ours, theirs = check_same_loss(batches[0], args)
        print(f"same loss check (batch 1, dropout off, same weights): sentcl {ours:.6f}, sentence-transformers MNRL {theirs:.6f}, "
              f"|diff| {abs(ours - theirs):.1e}", flush=True)
    else:
        print("pooling cls: sentcl trains [CLS] through the re-initialised BERT pooler (SimCSE), the ST model mean-pools; losses differ by design", flush=True)
    times = {"sentcl": [], "st": []}
    for r in range(args.rounds):
        order = ("sentcl", "st") if r % 2 == 0 else ("st", "sentcl")
        for who in order:
            with tempfile.TemporaryDirectory(prefix=f"sentcl-bench-{who}-") as out:
                steps, mean_loss = (sentcl_steps if who == "sentcl" else st_steps)(batches, args, out)
            if len(steps) != args.steps: raise RuntimeError(f"{who}: timed {len(steps)} steps, expected {args.steps}")
            times[who] += steps
            print(f"  round {r + 1} {who:>6}: median {median(steps):.3f} s/step  (steps: {', '.join(f'{s:.2f}' for s in steps)}; mean training loss {mean_loss:.4f})", flush=True)
    sentences = 3 * args.batch_size
    res = {w: {"s_per_step": median(t), "sentences_per_s": sentences / median(t), "min": min(t), "max": max(t)} for w, t in times.items()}
    res["ratio"] = res["sentcl"]["s_per_step"] / res["st"]["s_per_step"]
    res["threads"] = torch.get_num_threads()
    return res


# ---------------------------------------------------------------- memory

def _status_kb(field:str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"): return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def memory_child(args) -> int:
    "One pairsupcon forward + backward in this fresh process; prints its peak memory as JSON."
    import gc
    import resource
    from sentcl.methods import build_method
    from sentcl.train.checkpoints import seed_everything
    from sentcl.train.gradients import compute_gradients
    seed_everything(args.seed)
    batch = fixed_batches("pairsupcon", "pairs", args, args.mem_batch, 1)[0][0]
    method = build_method("pairsupcon", "default", max_length=args.max_length).train()
    gc.collect()
    rss_before, ru_before = _status_kb("VmRSS"), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        with open("/proc/self/clear_refs", "w") as f: f.write("5")  # reset the high-water mark to the current RSS
        hwm_reset = True
    except OSError: hwm_reset = False
    t0 = time.perf_counter()
    loss, _ = compute_gradients(method, batch, args.child_mini_batch or None)
    seconds = time.perf_counter() - t0
    peak = _status_kb("VmHWM") if hwm_reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    ru_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"growth_kb": peak - rss_before, "rss_before_kb": rss_before, "peak_kb": peak, "hwm_reset": hwm_reset,
                      "ru_maxrss_growth_kb": ru_after - ru_before, "seconds": seconds, "loss": float(loss)}))
    return 0


def memory(args) -> dict:
    spec, data_dir = data_source(args)
    print(f"memory: pairsupcon, {args.mem_batch} pairs = {2 * args.mem_batch} sentences, max_length {args.max_length}, "
          f"one forward + backward per fresh process, {args.mem_repeats} processes per setting", flush=True)
    settings = {"plain": 0, f"cached (mini-batch {args.mini_batch_size})": args.mini_batch_size}
    runs = {k: [] for k in settings}
    for r in range(args.mem_repeats):
        for name, m in (settings.items() if r % 2 == 0 else reversed(settings.items())):
            cmd = [sys.executable, os.path.abspath(__file__), "--memory-child", "--child-mini-batch", str(m), "--mem-batch", str(args.mem_batch),
                   "--max-length", str(args.max_length), "--data-dir", args.data_dir, "--seed", str(args.seed)]
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode: raise RuntimeError(f"memory child ({name}) failed:\n{p.stderr[-2000:]}")
            runs[name].append(json.loads(p.stdout.strip().splitlines()[-1]))
            x = runs[name][-1]
            print(f"  {name:>24}: +{x['growth_kb'] / 1024:.0f} MB peak over {x['rss_before_kb'] / 1024:.0f} MB, "
                  f"{x['seconds']:.1f} s, loss {x['loss']:.4f}", flush=True)
    res = {k: {"growth_mb": median([x["growth_kb"] for x in v]) / 1024, "seconds": median([x["seconds"] for x in v]),
               "loss": v[0]["loss"], "hwm_reset": all(x["hwm_reset"] for x in v)} for k, v in runs.items()}
    plain, cached = list(res.values())
    res["ratio"] = cached["growth_mb"] / plain["growth_mb"]
    return res


# ---------------------------------------------------------------- main

def main(argv=None) -> int:
    args = parse_args(argv)
    if args.memory_child: return memory_child(args)
    import sentence_transformers
    import torch
    import transformers
    spec, data_dir = data_source(args)
    print(f"torch {torch.__version__} ({torch.get_num_threads()} threads), transformers {transformers.__version__}, "
          f"sentence-transformers {sentence_transformers.__version__}; model all-MiniLM-L6-v2 (sentcl 'default'); "
          f"data {spec} from {data_dir}", flush=True)
    t_all = time.perf_counter()
    thr = None if args.skip_throughput else throughput(args)
    mem = None if args.skip_memory else memory(args)

    print("\n| measurement | sentcl | sentence-transformers | sentcl / ST |")
    print("|---|---:|---:|---:|")
    if thr:
        a, b = thr["sentcl"], thr["st"]
        print(f"| simcse-sup step, median s (batch {args.batch_size} triplets) | {a['s_per_step']:.3f} | {b['s_per_step']:.3f} | {thr['ratio']:.3f} |")
        print(f"| sentences/s | {a['sentences_per_s']:.0f} | {b['sentences_per_s']:.0f} | {a['sentences_per_s'] / b['sentences_per_s']:.3f} |")
    if mem:
        (pn, p), (cn, c) = [(k, v) for k, v in mem.items() if k != "ratio"]
        print(f"\n| pairsupcon, {args.mem_batch} pairs | peak RSS growth, median MB | forward+backward s (1st step, fresh process) | loss |")
        print("|---|---:|---:|---:|")
        for name, v in ((pn, p), (cn, c)):
            print(f"| {name} | {v['growth_mb']:.0f} | {v['seconds']:.1f} | {v['loss']:.4f} |")
    print()
    if thr:
        pool = ("mean pooling in both" if args.pooling == "mean"
                else "sentcl: cls (re-initialised BERT pooler, as SimCSE); ST: its own mean pooling")
        print(f"throughput ratio (sentcl time / ST time per step): {thr['ratio']:.3f}  [{pool}; "
              f"ST merges the three columns into one forward, sentcl encodes them in three]")
    if mem:
        how = "VmHWM reset before the step" if all(v["hwm_reset"] for k, v in mem.items() if k != "ratio") else "ru_maxrss (no reset possible)"
        print(f"memory ratio (cached / plain peak growth): {mem['ratio']:.3f}  [{how}; forward + backward only, "
              f"optimizer state not included]")
    print(f"total {time.perf_counter() - t_all:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
