"""Measure a starting point without sentence training for the CPU study (issue 27, item 4).

The papers start from encoders pre-trained by masked-language modelling only; the study's `default` model has had a
billion sentence pairs. No package on the index ships an MLM-only encoder, so this script makes one offline and
measures whether it gives the study's claims room:

1. `random`: all-MiniLM-L6-v2's architecture and tokenizer with seeded random weights;
2. `mlm`: that model pre-trained by masked-language modelling (DeCLUTR's `objective=mlm`) on the offline documents;
3. `mlm+pairsupcon`: PairSupCon at the study's rate (lr 2e-5, seed 0) for one epoch of the offline NLI pairs
   (`sentcl train --preset cpu`: 206 steps of 64, fp32) from the `mlm` model, and the same from `default`, so the
   lift of one objective is measured from both starts the same way.

Each model is scored on the seven STS tasks with PairSupCon's protocol (the study's STS column, `all` aggregate).
Every stage is written as it finishes (`<out>/<stage>.json`), so a stopped run resumes; the summary goes to
`results/cpu-start/start_point.json` with the commands' settings and the seconds each stage took.

    python tools/start_point.py --data-dir /path/to/data [--mlm-steps 300] [--out runs/start]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from sentcl.core import write_json

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = ROOT/"results"/"cpu-start"/"start_point.json"


def random_model(folder: Path, seed: int = 0) -> Path:
    "all-MiniLM-L6-v2's architecture and tokenizer with seeded random weights, written once."
    import torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer
    from sentcl.encoders import default_model_path
    if (folder/"config.json").exists(): return folder
    src = default_model_path()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = AutoModel.from_config(AutoConfig.from_pretrained(src))
    tmp = folder.with_name(folder.name + ".tmp")
    net.save_pretrained(tmp); AutoTokenizer.from_pretrained(src).save_pretrained(tmp)
    tmp.rename(folder)
    return folder


def sentcl(*argv: str):
    "Run one `sentcl` command in this process; a failure stops the script with its status."
    from sentcl.cli import main
    status = main(list(argv))
    if status: sys.exit(f"start_point: `sentcl {' '.join(argv)}` failed with status {status}")


def sts(stage: str, model: str, out: Path, data_dir: str) -> dict:
    "The STS average (PairSupCon's protocol) of `model`, evaluated once and kept in `<out>/<stage>.json`."
    path = out/f"{stage}.json"
    if not path.exists():
        start = time.time()
        sentcl("eval", "--model", model, "--tasks", "sts", "--protocol", "pairsupcon", "--pooling", "mean",
               "--precision", "auto", "--data-dir", data_dir, "--out", str(out/f"{stage}.eval.json"))
        doc = json.loads((out/f"{stage}.eval.json").read_text())
        tasks = {t: v.get("all", v.get("spearman")) for t, v in doc["tasks"].items()}  # STS-B, SICK-R: one Spearman
        write_json(path, {"stage": stage, "sts": doc["avg"]["sts"], "tasks": tasks,
                          "eval_seconds": round(time.time() - start, 1)}, indent=1)
    return json.loads(path.read_text())


def train(stage: str, method: str, model: str, out: Path, data_dir: str, *extra: str) -> tuple[str, float]:
    ("Train `method` from `model` under the cpu preset into `<out>/<stage>` (resuming); its model folder and the "
     "seconds of the sitting that finished it.")
    folder, start = out/stage, time.time()
    if not (folder/"model"/"config.json").exists():
        resume = ("--resume",) if (folder/"checkpoint.pt").exists() else ()
        sentcl("train", method, "--model", model, "--preset", "cpu", "--data-dir", data_dir, "--out", str(folder),
               "--no-progress", *resume, *extra)
        (folder/"seconds.txt").write_text(f"{time.time() - start:.1f}\n")
    return str(folder/"model"), float((folder/"seconds.txt").read_text()) if (folder/"seconds.txt").exists() else None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", required=True, help="a data folder in sentcl's layout (the shared benchmark data)")
    ap.add_argument("--out", default="runs/start", help="where the models and per-stage results go")
    ap.add_argument("--mlm-steps", type=int, default=300, help="masked-language-modelling steps from random weights")
    ap.add_argument("--mlm-batch", type=int, default=16,
                    help="documents per MLM step (two anchor spans of at most 128 tokens each)")
    ap.add_argument("--mlm-lr", type=float, default=5e-4, help="MLM learning rate (from scratch, not DeCLUTR's 5e-5)")
    a = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    psc = ("--lr", "2e-5", "--seed", "0")  # the study's PairSupCon rate (STUDY_LR), its first seed
    stages, seconds = {}, {}
    stages["default"] = sts("default", "default", out, a.data_dir)
    rnd = str(random_model(out/"random-minilm"))
    stages["random"] = sts("random", rnd, out, a.data_dir)
    mlm_args = ("--set", 'objective="mlm"', "--max-steps", str(a.mlm_steps), "--batch-size", str(a.mlm_batch),
                "--lr", str(a.mlm_lr))
    mlm, seconds["mlm"] = train(f"mlm-{a.mlm_steps}", "declutr", rnd, out, a.data_dir, *mlm_args)
    stages["mlm"] = sts(f"mlm-{a.mlm_steps}", mlm, out, a.data_dir)
    for start, model in (("default", "default"), ("mlm", mlm)):
        trained, seconds[f"{start}+pairsupcon"] = train(f"{start}-pairsupcon", "pairsupcon", model, out, a.data_dir,
                                                         *psc)
        stages[f"{start}+pairsupcon"] = sts(f"{start}-pairsupcon", trained, out, a.data_dir)
    runs = {s: json.loads((out/f"{s}-pairsupcon"/"summary.json").read_text()) for s in ("default", "mlm")}
    summary = {"what": "STS (seven tasks, PairSupCon's protocol, `all` aggregate, x100) of each starting point, and "
                       "after one epoch of PairSupCon (lr 2e-5, seed 0) from it",
               "pairsupcon": {s: {k: r[k] for k in ("step", "examples", "precision")} for s, r in runs.items()},
               "mlm": {"steps": a.mlm_steps, "documents_per_step": a.mlm_batch, "lr": a.mlm_lr,
                       "how": "sentcl train declutr --set objective=\"mlm\" --preset cpu from random weights"},
               "sts": {k: v["sts"] for k, v in stages.items()}, "tasks": {k: v["tasks"] for k, v in stages.items()},
               "train_seconds": seconds, "lift": {s: round(stages[f"{s}+pairsupcon"]["sts"] - stages[s]["sts"], 2)
                                                  for s in ("default", "mlm")}}
    write_json(SUMMARY, summary, indent=1)
    print(json.dumps({k: summary[k] for k in ("sts", "lift", "train_seconds")}, indent=1))


if __name__ == "__main__":
    main()
