"""Issue 35: the step waits on nothing. Batches made in DataLoader workers equal the inline ones; a step forces at most
one host-device sync per `log_every` steps and makes no tokenizer call on the main process with workers; resume stays
exact with workers; padding is to multiples of 8 (the bucket) except where a pooling averages over padding."""
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
    "Counted over 8 steady-state steps with log_every 4: at most 2 syncs; no tokenizer call on the main process."
    r = step_syncs.count(name, steps=10, warm=2, workers=1, log_every=4)
    assert r["syncs_per_step"] * r["steps"] <= r["steps"] / 4, r
    assert r["tokenizer_calls_per_step"] == 0, r


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
