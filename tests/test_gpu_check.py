"""tools/gpu_check.py without a GPU: what it runs and in which order, how it times a window of steps, what its rows
give the cost plan. (The script end to end: `python tools/gpu_check.py --cpu-smoke`, minutes, not a test.)"""
import importlib.util
import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("gpu_check", ROOT/"tools"/"gpu_check.py")
gpu_check = importlib.util.module_from_spec(spec); spec.loader.exec_module(gpu_check)


def test_the_plan_puts_the_slow_compilations_last():
    order = gpu_check.plan(["bf16", "fp32"], spacy=False, compile_ok=True)
    variants = [v for *_, v in order]
    assert variants.index("compiled") > max(i for i, v in enumerate(variants) if v != "compiled")
    assert {(e, p) for e, _, p, v in order if v == "default"} == {(e, "fp32") for e, _ in
                                                                 (gpu_check.SIMCSE, gpu_check.PAIRSUPCON,
                                                                  gpu_check.LIAO, gpu_check.DECLUTR)}
    assert "compiled" not in {v for *_, v in gpu_check.plan(["fp32"], spacy=True, compile_ok=False)}  # a CPU
    assert gpu_check.SNCSE[0] in {e for e, a, *_ in gpu_check.plan(["bf16"], True, False) if a == "sncse"}


def test_variants_set_the_forward_layout_only_where_a_method_has_one():
    assert gpu_check.variant_settings("simcse-unsup", "eager") == ({"one_forward": False}, False)
    assert gpu_check.variant_settings("pairsupcon", "one forward") == ({"one_forward": True}, False)
    assert gpu_check.variant_settings("supcon", "one forward") == (None, False)  # no such choice: not run twice
    assert gpu_check.variant_settings("declutr", "compiled") == ({}, True)


def test_a_window_is_synchronised_only_at_its_ends(monkeypatch):
    from sentcl.train.trainer import Trainer
    monkeypatch.setattr(Trainer, "train_step", lambda self, batch: None)
    syncs = []
    monkeypatch.setattr("torch.cuda.synchronize", lambda: syncs.append(1))
    with gpu_check.step_window(warmup=2, steps=3, cuda=True) as w:
        for _ in range(6): Trainer.train_step(object(), {})
    assert len(syncs) == 2 and w["t1"] >= w["t0"] is not None  # after step 2 and after step 5, no others
    assert len(w["waits"]) == 4  # the gaps before steps 3 to 6


def test_a_row_gives_the_cost_plan_its_shape():
    from sentcl.experiments.costs import step_shape
    from sentcl.experiments.runner import gpu_check_run
    old = json.loads((ROOT/"results"/"gpu"/"gpu_check.json").read_text())["rows"][0]  # PairSupCon fp32, before issue 35
    row = gpu_check.with_estimates({**old, "variant": "one forward", "config": {"one_forward": True},
                                    "options": {"compile": False, "loader_workers": 4}}, "NVIDIA H100 80GB HBM3")
    assert 0 < row["share_of_peak"] < 1 and row["estimated_memory_gb"] > 16
    assert step_shape(gpu_check_run(row)) != step_shape(gpu_check_run(old))  # one forward is another shape
    compiled = gpu_check_run({**row, "options": {"compile": True}})
    assert compiled.options.compile and step_shape(compiled)[-1] is True
    assert "estimate_error" in gpu_check.with_estimates({**row, "experiment": "no-such-table"}, "NVIDIA H100")


def test_bad_arguments_are_one_line_errors(tmp_path):
    with pytest.raises(SystemExit, match="has no nli/ folder"): gpu_check.parse(["--data-dir", str(tmp_path), "--out", "x"])
    for sub in ("nli", "wiki", "documents"): (tmp_path/sub).mkdir()
    with pytest.raises(SystemExit, match="give --out"): gpu_check.parse(["--data-dir", str(tmp_path)])
    args = gpu_check.parse(["--data-dir", str(tmp_path), "--out", "x", "--cpu-smoke"])
    assert (args.layers, args.batch_cap, args.precisions) == (1, 4, "fp32")
