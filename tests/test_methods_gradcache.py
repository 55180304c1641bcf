"""Methods x trainer: gradient caching (chunked re-encoding via slice_inputs/encode_inputs/loss_from_embeddings) gives the full-batch gradients."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import warnings

import pytest
import torch

from sentcl.encoders import SentenceEncoder
from sentcl.train.gradients import compute_gradients
from sentcl.methods import build_method

PREMISES = ["A man is playing a guitar on stage.", "Two dogs run through a field.", "A woman is cutting vegetables.", "Kids are swimming in a pool."]
HYPOTHESES = ["A man is performing music.", "The dogs are sleeping indoors.", "Someone is preparing food.", "Children are in the water."]
DOC = "Document {} tells a long story about rivers, hills and the towns between them, with many small details about each place."

BATCHES = {
    "pairsupcon": {"premise": PREMISES, "hypothesis": HYPOTHESES, "entailed": torch.tensor([True, False, True, True])},
    "supcon": {"premise": [PREMISES[0]] * 2 + PREMISES[1:3], "hypothesis": HYPOTHESES, "label": torch.tensor([0, 0, 2, 0]), "groups": torch.tensor([0, 0, 1, 2])},
    "sbert-augment": {"premise": [PREMISES[0]] * 2 + PREMISES[1:3], "hypothesis": HYPOTHESES, "label": torch.tensor([0, 1, 2, 0]), "groups": torch.tensor([0, 0, 1, 2])},
    "sncse": {"sentence": PREMISES, "negation": [p.replace(" is ", " is not ") for p in PREMISES]},
    "declutr": {"anchors": [DOC.format(i) for i in range(4)], "positives": [DOC.format(i)[j * 20:] for i in range(4) for j in range(2)], "num_positives": 2},
    "simcse-sup": {"sentence": PREMISES, "positive": HYPOTHESES, "hard_negative": HYPOTHESES[::-1]},
}


def _grads(method):
    return {n: p.grad.detach().clone() for n, p in method.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("name", sorted(BATCHES))
def test_gradient_caching_matches_full_batch(name):
    pooling = "cls" if name == "simcse-sup" else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # declutr: the tiny model has no pretrained MLM head
        method = build_method(name, SentenceEncoder("tiny", pooling=pooling, device="cpu"))
    method.eval()  # no dropout, so both paths see the same network
    batch = BATCHES[name]
    method.zero_grad(); full_loss, _ = method.loss(batch); full_loss.backward(); full = _grads(method)
    method.zero_grad(); cached_loss, _ = compute_gradients(method, batch, mini_batch_size=3); cached = _grads(method)
    # mini-batches of 3 against one pass: other matmul shapes, float32, so 1e-4 relative on any CPU's kernels
    assert torch.isclose(cached_loss, full_loss.detach(), rtol=1e-4, atol=1e-5), (cached_loss, full_loss)
    assert full.keys() == cached.keys()
    for n in full:
        assert torch.allclose(full[n], cached[n], atol=1e-5, rtol=1e-3), n

