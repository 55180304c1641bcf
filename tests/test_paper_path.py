"""The paper path before a GPU: a training over several processes (`gpus=N`, torchrun; gloo on this CPU) trains what
one process trains, and the rehearsal runs paper experiments end to end at the papers' shapes."""
import dataclasses
import json
from pathlib import Path

import torch
from safetensors.torch import load_file

from sentcl.catalog import get_experiment
from sentcl.experiments import plan_runs, train_run


def _weights(folder: Path) -> dict:
    files = sorted((folder/"model").rglob("model.safetensors"))
    assert files, f"no weights under {folder/'model'}"
    return load_file(files[0])


def test_a_training_runs_over_two_processes(tmp_path):
    "gpus=2 through torchrun (gloo here): the run trains to its end, and its model is the one-process run's shape."
    # that DDP's gradients equal one process's over the same global batch is tests/test_train.py's
    run = next(r for r in plan_runs(get_experiment("pairsupcon-table5"), "cpu-smoke", tmp_path/"x", steps=2,
                                    batch_size=8) if r.method == "pairsupcon")
    runs = {}
    for n in (1, 2):
        folder = tmp_path/f"p{n}"
        r = dataclasses.replace(run, train_folder=str(folder), options=dataclasses.replace(run.options, out=str(folder)))
        summary = train_run(r, log=print, processes=n)
        assert summary["finished"] and summary["step"] == 2, summary
        runs[n] = folder
    one, two = _weights(runs[1]), _weights(runs[2])
    assert one.keys() == two.keys() and all(torch.isfinite(two[k]).all() for k in two)
    # the first step's loss is the global batch's in both (same data, same start; only dropout draws differ): a rank
    # that contrasted its own 4 pairs against 7 sentences instead of the batch's 15 would log about log(7) vs log(15)
    first = {n: json.loads((f/"metrics.jsonl").read_text().splitlines()[0])["loss"] for n, f in runs.items()}
    assert abs(first[2] - first[1]) / first[1] < 0.05, first
