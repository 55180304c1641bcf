"""Issues 35 and 45: the step waits on nothing. Batches made in DataLoader workers equal the inline ones; a step forces at
most one host-device sync per `log_every` steps, in every arm of every experiment under the paper preset, and makes no
tokenizer call on the main process with workers; the log read one window late writes the values an every-step read
writes; fp16's scaled update reads nothing back; resume stays exact with workers; padding is to multiples of 8 (the
bucket) except where a pooling averages over padding."""
import json
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from sentcl.batching import PreparedBatches, batch_loader
from sentcl.methods import METHODS, build_method
from sentcl.train.trainer import RunOptions, resolve, train, training_view

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT/"tools"))
import step_syncs  # noqa: E402

SMALL = {"model": "tiny", "eval_every": None, "select_on_dev": False}
VARIANTS = [(m, {}) for m in METHODS] + [("pairsupcon", {"one_forward": True}), ("simcse-unsup", {"one_forward": False})]


def same(a, b):
    "Batches equal field by field: tensors exactly (values, dtype, shape), everything else by ==."
    if isinstance(a, torch.Tensor): return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict): return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)): return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    return a == b


def prepared_batches(name, overrides=None):
    cfg, options = resolve(name, {**SMALL, "batch_size": 1 if name == "declutr" else 8, **(overrides or {})},
                           RunOptions(preset="cpu-smoke"))
    method = build_method(name, "tiny", cfg)
    return PreparedBatches(training_view(method, options), method.prepare_batch, cfg.batch_size, seed=3, epoch=1,
                           start=1)


@pytest.mark.parametrize("name,overrides", VARIANTS, ids=[f"{m}{'-' + str(o) if o else ''}" for m, o in VARIANTS])
def test_workers_make_the_inline_batches(name, overrides):
    ds = prepared_batches(name, overrides)
    inline = [ds[i] for i in range(len(ds))]
    assert len(inline) >= 1
    assert same(list(batch_loader(ds, workers=2)), inline)
    groups = inline[0]["_groups"]
    for key, meta in groups.items():  # every group tokenized, padded to the bucket unless its pooling needs the exact
        ids = inline[0][f"{key}.input_ids"]
        exact = meta["settings"].pooling == "mean_no_cls_padded"
        longest = int(inline[0][f"{key}.attention_mask"].sum(1).max())
        assert ids.shape[1] == longest if exact else ids.shape[1] % 8 == 0 or ids.shape[1] == meta["settings"].max_length


@pytest.mark.parametrize("name", list(METHODS))
def test_a_step_syncs_once_per_log_every_and_tokenizes_in_workers(name):
    """Counted over 4 steady-state steps with log_every 4 (one log window: a sync every step would be 4, every other step
    2): at most 1 sync; no tokenizer call on the main process."""
    r = step_syncs.count(name, steps=6, warm=2, workers=1, log_every=4)
    assert r["syncs_per_step"] * r["steps"] <= r["steps"] / 4, r
    assert r["tokenizer_calls_per_step"] == 0, r


ARMS = step_syncs.arm_classes()


@pytest.mark.parametrize("arm", ARMS, ids=[f"{c['method']}-{json.dumps(c['overrides'], sort_keys=True)}" for c in ARMS])
def test_every_paper_arm_syncs_at_most_once_per_log_every(arm):
    """Each step class of the paper preset's arms (`step_syncs.arm_classes`), on `tiny`: 4 steps after one warm-up,
    log_every 4, <= 1 sync. One log window is enough to tell a step that syncs (4) from one that does not (the step's
    Python dispatch under the counter is most of this suite's time, so no second window)."""
    r = step_syncs.count(arm["method"], steps=5, warm=1, workers=0, log_every=4, overrides=arm["overrides"])
    assert r["syncs_per_step"] * r["steps"] <= r["steps"] / 4, (r, arm["arms"][:3])


def test_the_arm_classes_cover_every_paper_arm():
    "Every arm the paper preset plans is in one class; the sampling and queue arms are classes of their own."
    from sentcl.experiments.catalog.registry import EXPERIMENTS, get_experiment
    arms = sorted(a for c in ARMS for a in c["arms"])
    paper = {f"{e}/{a.name}" for e in EXPERIMENTS for a in get_experiment(e).arms if a.method and "paper" in a.scales}
    assert len(arms) == len(set(arms)) and set(arms) == paper
    shapes = [(c["method"], c["overrides"].get("n_neg"), c["overrides"].get("memory_size")) for c in ARMS]
    assert ("supcon", 3, None) in shapes and ("declutr", None, 128) in shapes


@pytest.mark.parametrize("name,overrides", [("supcon", {"n_pos": 3, "n_neg": 3}), ("declutr", {"memory_size": 8})])
def test_a_late_log_read_writes_the_same_losses(tmp_path, name, overrides):
    "Read every step (log_every 1) or a window late (log_every 3): the same training, the same logged values."
    def losses(log_every):
        out = tmp_path/str(log_every)
        opts = RunOptions(out=str(out), preset="cpu-smoke", max_steps=4, progress=False, log_every=log_every,
                          loader_workers=0)
        train(name, {**step_syncs._view_kwargs(name, overrides), **SMALL}, opts)
        return [json.loads(line) for line in (out/"metrics.jsonl").read_text().splitlines()]
    every, late = losses(1), losses(3)  # 4 steps: one whole window of 3 read late, and the last, partial one
    assert [r["step"] for r in late] == list(range(1, 5))
    drop = lambda rows: [{k: v for k, v in r.items() if k != "sentences_per_s"} for r in rows]  # a timing
    assert drop(every) == drop(late)


def test_fp16s_scaled_update_reads_nothing_back():
    "The trainer's update under a GradScaler with sentcl's fused optimiser: no sync (an unfused one reads found_inf)."
    from types import SimpleNamespace
    from sentcl.precision import SyncCounter
    from sentcl.train.schedules import build_optimizer
    from sentcl.train.trainer import Trainer
    def update(fused):
        model = torch.nn.Linear(4, 4)
        opt = (build_optimizer("adamw", [{"params": list(model.parameters())}], 1e-3) if fused
               else torch.optim.AdamW(model.parameters(), fused=False))
        t = SimpleNamespace(scaler=torch.amp.GradScaler("cpu", enabled=True), optimizer=opt, method=model,
                            cfg=SimpleNamespace(grad_clip=1.0), scheduler=torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1))
        t.scaler.scale(model(torch.ones(2, 4)).sum()).backward()
        with SyncCounter() as c: Trainer._update(t)
        return c.total
    assert update(fused=True) == 0
    assert update(fused=False) > 0  # the counter sees the read the fused optimiser avoids


def weights(run):
    return load_file(str(next(Path(run, "model").rglob("model.safetensors"))))


def test_resume_is_exact_with_workers(tmp_path):
    "Eight steps inline, and four + resume + four with a loader worker, give bit-identical weights."
    def run(out, **kw):
        opts = RunOptions(out=str(out), preset="cpu-smoke", max_steps=8, save_every=2, progress=False, log_every=3, **kw)
        return train("simcse-unsup", {**SMALL, "batch_size": 8}, opts)
    straight = run(tmp_path/"a", loader_workers=0)
    assert run(tmp_path/"b", loader_workers=1, stop_after=4)["finished"] is False
    resumed = run(tmp_path/"b", loader_workers=1, resume=True)
    assert (straight["step"], resumed["step"]) == (8, 8)
    a, b = weights(tmp_path/"a"), weights(tmp_path/"b")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    steps = [line for line in (tmp_path/"b"/"metrics.jsonl").read_text().splitlines() if '"loss"' in line]
    assert len(steps) == 8  # every step logged once, read three at a time


@pytest.mark.parametrize("name", ("simcse-unsup", "sncse"))
def test_fixed_shapes_keep_one_sync_per_log_every(name):
    "Issue 45 item 3's options add no host sync (fixed shapes; CUDA graphs' step marker, compile not run): <= 1 in 4 steps."
    r = step_syncs.count(name, steps=5, warm=1, workers=0, log_every=4, options={"pad_to_max_length": True})
    assert r["syncs_per_step"] * r["steps"] <= r["steps"] / 4, r
    from unittest import mock
    with mock.patch("sentcl.train.trainer.compile_encoder", lambda m, mode=None: None):  # the graphs' step marker
        r = step_syncs.count(name, steps=5, warm=1, workers=0, log_every=4,
                             options={"pad_to_max_length": True, "compile": "reduce-overhead"})
    assert r["syncs_per_step"] * r["steps"] <= r["steps"] / 4, r
