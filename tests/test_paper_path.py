"""The paper path before a GPU: a training over several processes (`gpus=N`, torchrun; gloo on this CPU) trains what
one process trains, and the rehearsal runs paper experiments end to end at the papers' shapes."""
import dataclasses
import json
from pathlib import Path

import torch
from safetensors.torch import load_file

from sentcl.experiments.catalog.registry import get_experiment
from sentcl.experiments.plan import plan_runs
from sentcl.experiments.execute import train_run
from sentcl.experiments.rehearsal import REHEARSAL_LAYERS


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


REHEARSED = {  # one experiment per paper, through the batch runner and papermill: the paper models' shapes, the hub
    "liao-table2": ["pretrained", "ce"],  # loaders on local hub files, one training (batch 64, stopped and resumed)
    "pairsupcon-figure1": ["pretrained"],  # BERT-base's shape, STS and StackOverflow clustering at PairSupCon's protocol
    "sncse-table2": ["pretrained"],  # BERT-base through SNCSE's prompt
    "declutr-table1": ["pretrained-small"],  # DistilRoBERTa's shape (a stand-in tokenizer), SentEval transfer
}


def test_the_paper_path_rehearses_one_experiment_per_paper(tmp_path):
    from sentcl.experiments.report import write_report
    from sentcl.experiments.runner import experiment_done, run_batch
    out = tmp_path/"rehearsal"
    for name, arms in REHEARSED.items():
        table = run_batch([name], "paper", out, parameters={"rehearse": True, "arms": arms}, log=print)
        assert list(table.status) == ["done"], table.to_string()
    for name in REHEARSED:
        doc = json.loads((out/name/"results.json").read_text())
        assert doc["kind"] == "rehearsal" and doc["complete"] and doc["parameters"]["rehearse"] is True
        assert all(r["model"].startswith("_rehearsal/models/") for r in doc["runs"])
        assert not experiment_done(out/name, "paper")  # a rehearsal never stands in for a paper result
        assert experiment_done(out/name, "paper", rehearse=True)
    ce = next(r for r in json.loads((out/"liao-table2"/"results.json").read_text())["runs"] if r["arm"] == "ce")
    assert ce["train"]["finished"] and ce["train"]["step"] == 2
    assert not list((out/"_train").rglob("checkpoint*.pt"))  # a finished rehearsal drops its checkpoints
    log = (out/"liao-table2"/"log.txt").read_text()
    assert "stopped after step 1; resuming from its checkpoint" in log and "weights random" in log
    facts = json.loads((out/"_rehearsal"/"models"/"distilroberta-base"/"rehearsal.json").read_text())
    assert facts["layers"] == f"{REHEARSAL_LAYERS} of 6" and "stand-in" in facts["tokenizer"]
    report = write_report(out, tmp_path/"report").read_text()
    rows = [l for l in report.splitlines() if l.startswith("| ") and "rehearsed" in l]
    assert len(rows) >= len(REHEARSED) and "failed" not in report


def test_a_rehearsal_interrupts_an_experiments_first_training_and_steps_the_others_once(tmp_path):
    "Each training is rehearsed at the paper's shape; only the first is interrupted and resumed (2 steps)."
    runs = plan_runs(get_experiment("pairsupcon-table5"), "paper", tmp_path/"pairsupcon-table5", rehearse=True)
    trained = [r for r in runs if r.method is not None]
    assert len(trained) >= 2
    assert [r.options.max_steps for r in trained] == [2] + [1] * (len(trained) - 1)
    assert all(r.config.batch_size == 1024 and r.options.mini_batch_size for r in trained)  # the paper's batch, cached
