"""Issue 45 item 3: shapes a GPU can capture, as options. `--pad-to-max-length` pads every group to the config's
max_length (one shape every step) and gives the per-batch padding's losses; `--compile reduce-overhead` (CUDA graphs)
needs it, with a capturable optimiser on CUDA and a new cudagraph step each step; without the options every plan and
record is what it was. A real torch.compile is not run here: compiling the tiny BERT took 145 s on this shared 2-core
machine, so the compile call is replaced by a recorder and the GPU check measures the compiled step (`graphs`)."""
import contextlib
import dataclasses
import io
import json
from pathlib import Path
from unittest import mock

import pytest
import torch

from sentcl.batching import PreparedBatches
from sentcl.core import SentclError
from sentcl.methods import build_method
from sentcl.train.options import RunOptions, resolve
from sentcl.train.trainer import train, training_view

SMALL = {"model": "tiny", "eval_every": None, "select_on_dev": False}
SHORT = ("simcse-unsup", "sncse")  # the short-sentence methods the option is for
SENTENCES = [f"a {who} is {what} {where}." for who in ("man", "woman", "child", "dog") for what, where in
             (("playing", "in the park"), ("eating", "at a small table near the window"), ("running", "outside"),
              ("sleeping", "on the old red sofa in the living room"))]  # 16 short sentences of several lengths


def test_plans_and_training_keys_are_unchanged_unless_the_option_is_chosen():
    "Every run of every experiment: no record of the option and the training key of the options before it existed."
    from sentcl.experiments.catalog.registry import EXPERIMENTS, get_experiment
    from sentcl.experiments.plan import plan_record, plan_runs
    from sentcl.train.options import WEIGHT_FREE_OPTIONS, training_key
    import hashlib
    for name in EXPERIMENTS:
        for run in (r for r in plan_runs(get_experiment(name), "paper", Path("/nonexistent")/name) if r.method):
            record = plan_record(run)
            assert "pad_to_max_length" not in record["options"], name
            before = {k: v for k, v in dataclasses.asdict(run.options).items()
                      if k not in WEIGHT_FREE_OPTIONS and k != "pad_to_max_length"}  # RunOptions without the new field
            blob = json.dumps([run.method, dataclasses.asdict(run.config), before], sort_keys=True, default=str)
            assert record["training_key"] == hashlib.sha256(blob.encode()).hexdigest()[:12], (name, run.arm)
    fixed = dataclasses.replace(run, options=dataclasses.replace(run.options, pad_to_max_length=True))
    assert plan_record(fixed)["options"]["pad_to_max_length"] is True
    assert training_key(fixed.method, fixed.config, fixed.options) != record["training_key"]  # another training


def _method_and_batches(name:str, fixed:bool, steps:int):
    "A tiny method without dropout (its masks would follow the tensors' shapes) and `steps` prepared batches of 4."
    config, options = resolve(name, {**SMALL, "batch_size": 4}, RunOptions(preset="cpu-smoke"))
    torch.manual_seed(0)
    method = build_method(name, "tiny", config)
    for m in method.modules():
        if isinstance(m, torch.nn.Dropout): m.p = 0.0
    method.pad_to_max_length = fixed
    ds = PreparedBatches(training_view(method, options, SENTENCES), method.prepare_batch, 4, seed=1)
    return method, [ds[i] for i in range(steps)]


@pytest.mark.parametrize("name", SHORT)
def test_fixed_padding_gives_the_per_batch_padding_losses(name):
    """Three AdamW steps on `tiny`, padded per batch and to max_length: the same losses. The padding is masked out of
    attention and pooling, so only the order of float sums differs (matrix products over 32 columns instead of the
    batch's own length): relative 1e-4 covers that after three steps on any CPU's kernels."""
    losses, widths = {}, {}
    for fixed in (False, True):
        method, batches = _method_and_batches(name, fixed, 3)
        opt = torch.optim.AdamW(method.parameters(), lr=1e-3)
        method.train()
        losses[fixed], widths[fixed] = [], set()
        for batch in batches:
            loss, _ = method.loss(batch)
            opt.zero_grad(); loss.backward(); opt.step()
            losses[fixed].append(loss.item())
            widths[fixed] |= {v.shape[1] for k, v in batch.items() if k.endswith(".input_ids")}
    max_length = method.train_settings.max_length
    assert widths[True] == {max_length} and min(widths[False]) < max_length  # one shape; per batch, shorter ones
    assert losses[True] == pytest.approx(losses[False], rel=1e-4), losses
    assert losses[True][0] != losses[True][-1]  # the weights moved: a real comparison of steps, not one forward


def test_cuda_graphs_need_a_fixed_shape_one_line_error(capsys):
    from sentcl.cli import main
    base = ["train", "simcse-unsup", "--model", "tiny", "--preset", "cpu-smoke", "--show-config"]
    assert main(base + ["--compile", "reduce-overhead"]) == 2
    err = capsys.readouterr().err.strip()
    assert "captures CUDA graphs" in err and "add --pad-to-max-length" in err and len(err.splitlines()) == 1, err
    assert main(base + ["--compile", "reduce-overhead", "--pad-to-max-length"]) == 0
    shown = json.loads(capsys.readouterr().out)["run"]
    assert (shown["compile"], shown["pad_to_max_length"]) == ("reduce-overhead", True)
    assert main(base + ["--compile"]) == 0 and json.loads(capsys.readouterr().out)["run"]["compile"] is True
    assert main(base) == 0 and "pad_to_max_length" not in json.loads(capsys.readouterr().out)["run"]  # unchanged record


@pytest.mark.parametrize("name,overrides,why", [("supcon", {}, "averages over the padding"),
                                                ("declutr", {}, "cannot fix the MLM anchors' length")])
def test_a_fixed_length_is_refused_where_it_would_change_the_loss(tmp_path, name, overrides, why):
    "Liao's released pooling averages over the padding; DeCLUTR's MLM masks are drawn over the padded length."
    opts = RunOptions(out=str(tmp_path/"run"), preset="cpu-smoke", max_steps=1, progress=False, pad_to_max_length=True)
    with pytest.raises(SentclError, match=why): train(name, {**SMALL, **overrides}, opts)


def test_reduce_overhead_wiring_on_the_cpu(tmp_path):
    "compile_encoder gets the mode, each step begins a cudagraph step, and a CPU's AdamW is not capturable."
    import sentcl.train.trainer as T
    calls, marks, optimizers = [], [], []
    build = T.build_optimizer
    def recorded_build(*a, **k): optimizers.append(k.get("capturable")); return build(*a, **k)
    opts = RunOptions(out=str(tmp_path/"run"), preset="cpu-smoke", max_steps=3, progress=False,
                      compile="reduce-overhead", pad_to_max_length=True)
    with mock.patch.object(T, "compile_encoder", lambda m, mode=None: calls.append(mode)), \
         mock.patch.object(T, "build_optimizer", recorded_build), \
         mock.patch("torch.compiler.cudagraph_mark_step_begin", lambda: marks.append(1)):
        summary = train("simcse-unsup", dict(SMALL), opts)
    assert summary["finished"] and calls == ["reduce-overhead"] and len(marks) == 3 and optimizers == [False]
