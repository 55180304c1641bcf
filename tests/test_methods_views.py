"""Methods x views: every method takes one finite, differentiable step on a real batch of its view built from the bundled samples."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import warnings

import pytest
import torch

from sentcl.data.corpora import load_documents, load_nli, load_sentences
from sentcl.data.layout import SAMPLES_DIR
from sentcl import views
from sentcl.encoders import SentenceEncoder
from sentcl.methods import METHODS, build_method

# data for each view, from sentcl/samples (small view kwargs so the short sample documents qualify)
SMALL_SPANS = {"num_anchors": 2, "num_positives": 2, "min_span": 8, "max_span": 32}


def _view_data(view):
    if view in ("pairs", "premise_groups", "nli3", "triplets"): return load_nli("snli", "train", data_dir=SAMPLES_DIR)
    if view in ("dropout", "negation"): return load_sentences("wiki1m", data_dir=SAMPLES_DIR, limit=16)
    if view == "spans": return load_documents(data_dir=SAMPLES_DIR)
    raise AssertionError(view)


@pytest.mark.parametrize("name", sorted(METHODS))
def test_method_steps_on_its_view(name):
    cls = METHODS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        method = build_method(name, SentenceEncoder("tiny", pooling="cls" if name == "simcse-sup" else None, device="cpu"))
    kwargs = dict(method.config.view_kwargs)
    if cls.view == "spans": kwargs.update(SMALL_SPANS)
    view = views.build_view(cls.view, _view_data(cls.view), tokenizer=method.encoder.tokenizer, **kwargs)
    batch = next(iter(view.batches(2 if cls.view == "spans" else 8, seed=0)))
    opt = torch.optim.AdamW(method.param_groups())
    loss, terms = method.loss(batch)
    assert torch.isfinite(loss), terms
    assert abs(terms["loss"] - loss.item()) < 1e-5
    before = [p.detach().clone() for g in method.param_groups() for p in g["params"]]
    opt.zero_grad(); loss.backward(); opt.step()
    after = [p.detach() for g in method.param_groups() for p in g["params"]]
    assert any(not torch.equal(a, b) for a, b in zip(before, after))
