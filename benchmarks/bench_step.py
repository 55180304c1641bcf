"""The training step on a CPU, method by method: batches built inline against in DataLoader workers, host syncs per
step, and the share of the step spent outside the model. Ratios against a peer trained in the same process.

For each method the papers train (SimCSE, PairSupCon, Liao's supervised contrastive SBERT, SNCSE, DeCLUTR), sentcl's
own `train` runs the `cpu-smoke` preset (the seeded random `tiny` BERT, the bundled samples) for `--steps` steps in
each variant, the variants taking turns over `--rounds` rounds so that a busy machine slows them alike:

- **inline**: `loader_workers=0`, every batch made and tokenized on the main process, between two steps;
- **workers**: `loader_workers=--workers` (2), batches made and tokenized ahead in DataLoader worker processes;
- **two forwards** (SimCSE, PairSupCon, SNCSE): inline with `one_forward` flipped from the method's default, the peer
  of one forward pass per step.

A step's time runs from the end of one `Trainer.train_step` to the end of the next, so it includes waiting for the
batch (made inline, or fetched from a worker) and reading the log every `log_every` steps; the first `--skip` steps
(warm-up, workers starting) are left out, and the median is reported. The model's time is the transformer's forward
calls plus `torch.autograd.backward`; the rest of the step (batches, tokenizing, copies, losses, the optimiser,
logging) is "outside the model". Syncs per step are counted once more, inline, with `sentcl.precision.SyncCounter`
(a TorchDispatchMode that counts the operators that would force a host-device sync on CUDA) over two `log_every`
windows of steady steps; tokenizer calls on the main process are counted in both variants.

    python benchmarks/bench_step.py [--steps 14] [--rounds 2] [--workers 2] [--threads 1] [--only simcse-unsup,declutr]
                                    [--json OUT]

The main process runs one torch thread by default (`--threads`): on a two-core machine shared with other work, two
OpenMP threads that spin waiting for each other made the tiny model's step 14 times slower (8.4 s against 0.6 s).

`make bench-step` runs it. It prints ratios, which are what carries from machine to machine; the seconds it also
prints are this machine's, at the moment it ran.

On a CUDA machine (or with `--device cuda`) it times the step on the GPU instead, method by method: sentcl's `train` on
`--model` (default: the offline `default` model; `tiny` says nothing on a GPU) at `--batch-size` and `--precision`,
batches from DataLoader workers (sentcl's choice for the device); the GPU is synchronised once before the first timed
step and once after the last (the pace includes waiting for batches and the log reads, nothing else waits). Printed
per method: ms per step, the step's FLOPs (counted once with `torch.utils.flop_counter.FlopCounterMode`, forward and
backward, the step before the timed ones), its share of the GPU's dense peak at that precision
(`sentcl.experiments.costs.GPU_PEAKS`; '-' for a device it does not list), and the median time the main process
waited between two steps for its batch. `--device cpu` runs the same measurement on a CPU (its test).

    python benchmarks/bench_step.py --device cuda [--model default] [--batch-size 64] [--precision bf16]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

METHODS = {"simcse-unsup": "SimCSE", "pairsupcon": "PairSupCon", "supcon": "Liao SupCon", "sncse": "SNCSE",
           "declutr": "DeCLUTR"}


@contextmanager
def step_clock():
    """While inside: the end time of every `Trainer.train_step`, and the seconds each step spent in the model (the
    transformer's forward calls and `torch.autograd.backward`), and tokenizer calls on this process, per step."""
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase
    from sentcl.train.trainer import Trainer
    rec = {"ends": [], "model": [0.0], "tokenize": [0]}
    step, backward, call, tok = Trainer.train_step, torch.autograd.backward, torch.nn.Module.__call__, PreTrainedTokenizerBase.__call__
    pid, depth = os.getpid(), [0]
    def timed_step(self, batch):
        out = step(self, batch)
        rec["ends"].append(time.perf_counter()); rec["model"].append(0.0); rec["tokenize"].append(0)
        return out
    def timed(fn):
        def run(*a, **k):
            if depth[0]: return fn(*a, **k)
            depth[0] += 1; t0 = time.perf_counter()
            try: return fn(*a, **k)
            finally: depth[0] -= 1; rec["model"][-1] += time.perf_counter() - t0
        return run
    timed_backward, timed_model = timed(backward), timed(call)
    def module_call(self, *a, **k):  # only a whole transformer counts, not each of its layers
        return (timed_model if isinstance(self, PreTrainedModel) else call)(self, *a, **k)
    def counted_tokenize(self, *a, **k):
        if os.getpid() == pid: rec["tokenize"][-1] += 1  # a worker's calls are its own
        return tok(self, *a, **k)
    Trainer.train_step, torch.autograd.backward, torch.nn.Module.__call__ = timed_step, timed_backward, module_call
    PreTrainedTokenizerBase.__call__ = counted_tokenize
    try: yield rec
    finally:
        Trainer.train_step, torch.autograd.backward, torch.nn.Module.__call__ = step, backward, call
        PreTrainedTokenizerBase.__call__ = tok


def overrides(method:str, args, flip_forward:bool=False) -> dict:
    "The method's cpu-smoke config for this benchmark: no dev evaluation, `--batch-size` for the sentence methods."
    from sentcl.methods import method_config
    over = {"model": "tiny", "eval_every": None, "select_on_dev": False}
    if method != "declutr" and args.batch_size: over["batch_size"] = args.batch_size
    if flip_forward: over["one_forward"] = not method_config(method).one_forward
    return over


def train_steps(method:str, over:dict, workers:int, steps:int, out:Path, count_syncs:bool=False) -> dict:
    "Train `steps` steps of `method` under cpu-smoke; per step its seconds, model seconds and tokenizer calls (syncs)."
    from sentcl.precision import SyncCounter
    from sentcl.train.trainer import RunOptions, train
    options = RunOptions(out=str(out), preset="cpu-smoke", max_steps=steps, loader_workers=workers, progress=False)
    counter = SyncCounter() if count_syncs else None
    with step_clock() as rec, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tiny model has no pretrained MLM head, and says so
        if counter is None: train(method, over, options)
        else:
            from sentcl.train.trainer import Trainer
            totals = []
            step = Trainer.train_step
            def counting(self, batch): out_ = step(self, batch); totals.append(dict(counter.counts)); return out_
            Trainer.train_step = counting
            try:
                with counter: train(method, over, options)
            finally: Trainer.train_step = step
            rec["sync_totals"] = totals
    ends = rec["ends"]
    return {"seconds": [b - a for a, b in zip(ends, ends[1:])], "model": rec["model"][1:len(ends)],
            "tokenize": rec["tokenize"][1:len(ends)], "sync_totals": rec.get("sync_totals", [])}


def bench(method:str, args, root:Path) -> dict:
    "The method's variants over `args.rounds` rounds, turn about; medians and ratios."
    from sentcl.methods import method_config
    peers = {"inline": (0, False), "workers": (args.workers, False)}
    if hasattr(method_config(method), "one_forward"): peers["two forwards" if method_config(method).one_forward
                                                            else "one forward"] = (0, True)
    got = {k: {"seconds": [], "model": [], "tokenize": []} for k in peers}
    for r in range(args.rounds):
        for name in (list(peers) if r % 2 == 0 else list(peers)[::-1]):
            workers, flip = peers[name]
            res = train_steps(method, overrides(method, args, flip), workers, args.steps,
                              root/f"{method}-{name.replace(' ', '-')}-{r}")
            for k in got[name]: got[name][k] += res[k][args.skip:]
    window = 2 * 10  # two log_every windows (RunOptions.log_every = 10) of steady steps
    syncs = train_steps(method, overrides(method, args), 0, args.skip + window, root/f"{method}-syncs", count_syncs=True)
    first, last = syncs["sync_totals"][args.skip - 1], syncs["sync_totals"][-1]
    reasons = {k: last[k] - first.get(k, 0) for k in last if last[k] - first.get(k, 0)}
    med = {k: statistics.median(v["seconds"]) for k, v in got.items()}
    outside = {k: statistics.median(1 - m / s for s, m in zip(v["seconds"], v["model"])) for k, v in got.items()}
    row = {"method": METHODS[method], "key": method, "inline s": med["inline"], "workers s": med["workers"],
           "inline / workers": med["inline"] / med["workers"],
           "syncs per step": sum(reasons.values()) / window, "sync reasons": reasons,
           "outside inline": outside["inline"], "outside workers": outside["workers"],
           "tokenizer calls (main) inline": statistics.mean(got["inline"]["tokenize"]),
           "tokenizer calls (main) workers": statistics.mean(got["workers"]["tokenize"])}
    other = next((k for k in peers if k.endswith("forward") or k.endswith("forwards")), None)
    if other: row[f"{other} / default"] = med[other] / med["inline"]
    return row


def table(rows:list, args) -> str:
    "The printed table: ratios first."
    head = ["method", "inline / workers", "syncs per step", "outside the model (inline)", "outside (workers)",
            "tokenizer calls on main (inline / workers)", "other forward layout / default", "step s (inline / workers)"]
    fmt = lambda r: [r["method"], f"{r['inline / workers']:.2f}", f"{r['syncs per step']:.2f}",
                     f"{r['outside inline']:.0%}", f"{r['outside workers']:.0%}",
                     f"{r['tokenizer calls (main) inline']:.1f} / {r['tokenizer calls (main) workers']:.1f}",
                     next((f"{v:.2f} ({k.split(' / ')[0]})" for k, v in r.items() if k.endswith("/ default")), "-"),
                     f"{r['inline s']:.3f} / {r['workers s']:.3f}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(fmt(r)) + " |" for r in rows]
    return "\n".join(lines)


def device_step(method:str, args, out:Path) -> dict:
    "On the training device: ms per step over a window synchronised at its ends, a step's FLOPs, the batch wait."
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    from sentcl.train.trainer import RunOptions, Trainer, train
    cuda = torch.cuda.is_available() and args.device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    rec, step = {"n": 0, "t0": None, "t1": None, "waits": [], "end": None, "flops": None}, Trainer.train_step
    def timed(self, batch):
        start = time.perf_counter()
        if rec["end"] is not None and rec["n"] >= args.skip: rec["waits"].append(start - rec["end"])
        if rec["n"] == args.skip - 1:  # the step before the window: counted, not timed (the counter slows it)
            with FlopCounterMode(display=False) as flops: result = step(self, batch)
            rec["flops"] = flops.get_total_flops()
        else: result = step(self, batch)
        rec["n"] += 1
        if rec["n"] == args.skip: sync(); rec["t0"] = time.perf_counter()
        if rec["n"] == args.steps: sync(); rec["t1"] = time.perf_counter()
        rec["end"] = time.perf_counter()
        return result
    over = {**overrides(method, args), "model": args.model}
    options = RunOptions(out=str(out), preset="cpu-smoke", max_steps=args.steps, progress=False, precision=args.precision)
    Trainer.train_step = timed
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            train(method, over, options)
    finally: Trainer.train_step = step
    seconds = (rec["t1"] - rec["t0"]) / (args.steps - args.skip)
    return {"method": METHODS[method], "key": method, "ms per step": 1e3 * seconds, "flops": rec["flops"],
            "batch wait ms": 1e3 * statistics.median(rec["waits"]) if rec["waits"] else None}


def device_table(rows:list, device:str, precision:str) -> str:
    "The GPU table: ms per step, TFLOP per step, share of the device's peak, batch wait."
    from sentcl.experiments.costs import gpu_peaks
    peaks = gpu_peaks(device)
    peak = peaks[1].get(precision) if peaks else None
    head = ["method", "ms per step", "TFLOP per step", f"share of {peaks[0] if peaks else device} {precision} peak",
            "batch wait ms"]
    fmt = lambda r: [r["method"], f"{r['ms per step']:.1f}", f"{r['flops'] / 1e12:.3f}",
                     f"{r['flops'] / (r['ms per step'] / 1e3) / peak:.1%}" if peak else "-",
                     "-" if r["batch wait ms"] is None else f"{r['batch wait ms']:.2f}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(fmt(r)) + " |" for r in rows]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=14, help="steps per training (the first --skip not timed)")
    ap.add_argument("--skip", type=int, default=4, help="warm-up steps left out of every median")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads of the main process (1: on a shared two-core machine, two threads that wait "
                         "on each other ran a step 14 times slower)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of every variant, taking turns")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers of the 'workers' variant")
    ap.add_argument("--batch-size", type=int, default=32, help="batch of the sentence methods (DeCLUTR: the preset's)")
    ap.add_argument("--only", default=None, help="comma-separated method keys: " + ", ".join(METHODS))
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                    help="cuda: time the step on the GPU (auto: where one is); cpu with --model: the same on a CPU")
    ap.add_argument("--model", default=None, help="with --device: the model (default: 'default', the offline MiniLM)")
    ap.add_argument("--precision", default="bf16", help="with --device cuda: fp32, bf16 or fp16")
    args = ap.parse_args(argv)
    only = args.only.split(",") if args.only else list(METHODS)
    unknown = sorted(set(only) - set(METHODS))
    if unknown: sys.exit(f"bench_step.py: unknown method(s) {unknown} in --only; choose from {', '.join(METHODS)}")
    if args.steps <= args.skip + 1: sys.exit(f"bench_step.py: --steps must be more than --skip + 1 ({args.skip + 1})")
    import torch
    if args.device == "auto": args.device = "cuda" if torch.cuda.is_available() else None
    if args.device == "cuda" and not torch.cuda.is_available(): sys.exit("bench_step.py: --device cuda, but no CUDA here")
    if args.device:  # the step on the device, timed there
        args.model, args.precision = args.model or "default", args.precision if args.device == "cuda" else "fp32"
        name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
        print(f"{name}, torch {torch.__version__}; {args.model} at batch {args.batch_size} (DeCLUTR: the preset's), "
              f"{args.precision}, {args.steps} steps, the last {args.steps - args.skip} timed", flush=True)
        with tempfile.TemporaryDirectory(prefix="bench-step-") as tmp:
            rows = [device_step(m, args, Path(tmp)/m) for m in only]
        print("\n" + device_table(rows, name, args.precision))
        if args.json: args.json.write_text(json.dumps(rows, indent=1))
        return 0
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} cores; cpu-smoke preset "
          f"(tiny model, bundled samples), batch {args.batch_size} (DeCLUTR: the preset's), {args.steps} steps x "
          f"{args.rounds} rounds per variant, first {args.skip} left out", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-step-") as tmp:
        for m in only:
            t0 = time.time(); rows.append(bench(m, args, Path(tmp)))
            print(f"{METHODS[m]}: done in {time.time() - t0:.0f} s", flush=True)
    print("\n" + table(rows, args))
    print("\nsyncs in the 20 steady steps counted: " + "; ".join(
        f"{r['method']}: " + (", ".join(f"{k} {v}" for k, v in r["sync reasons"].items()) or "none") for r in rows))
    print("\ninline / workers: a step with batches made inline over a step with them made in workers (above 1: workers "
          "faster). syncs per step: operators that would force a host-device sync on CUDA, per steady step (the log "
          "is read every 10). outside the model: the share of a step not in the transformer's forward or backward. "
          "other forward layout / default: the step with one_forward flipped over the method's default.")
    if args.json: args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
