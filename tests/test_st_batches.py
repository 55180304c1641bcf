"""sentcl.st's big batches and Matryoshka: the cached losses give the whole batch's loss and gradients, two gloo
processes gathering their halves give one process's whole batch, and MatryoshkaLoss trains each batch-level loss on
`tiny` with its truncated dimensions evaluated. Tiny model, small batches, seconds (the spawn: tens of seconds)."""
import os
import warnings

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from sentcl.data.corpora import load_nli
from sentcl.data.layout import SAMPLES_DIR
from sentcl.methods.sncse import SNCSEConfig
from sentcl.st import datasets, evaluators, losses, models

from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
from sentence_transformers.sentence_transformer.losses import MatryoshkaLoss
from transformers import PrinterCallback

NLI = load_nli("snli", "train", SAMPLES_DIR)
SENTENCES = list(NLI.premise.unique()[:8])


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SENTCL_CACHE_DIR", str(tmp_path/"cache"))


def case(name, **kw):
    "A loss on `tiny` with fixed heads (seeded), and one batch of its columns as the trainer's collator makes them."
    torch.manual_seed(0)
    if name == "sncse":
        model = models.sentence_transformer("tiny", device="cpu", pooling="mask",
                                            template=SNCSEConfig.anchor_template, max_length=32)
        loss = losses.SNCSELoss(model, **kw)
        data = datasets.sncse_dataset(SENTENCES, cache=False)
        texts, labels = [data["anchor"], data["positive"], data["negative"]], None
        prompts = list(loss.prompts.values())
    else:
        model = models.sentence_transformer("tiny", device="cpu", max_length=32)
        loss = (losses.PairSupConLoss if name == "pairsupcon" else losses.SupConLoss)(model, **kw)
        rows = NLI.iloc[:8]                                                     # premises shared across the halves
        texts = [list(rows.premise), list(rows.hypothesis)]
        labels = torch.tensor([["entailment", "neutral", "contradiction"].index(l) for l in rows.label])
        prompts = [None, None]
    return model.eval(), loss.eval(), texts, labels, prompts


def features(model, texts, prompts, rows=slice(None)):
    return [model.preprocess(t[rows], prompt=p) for t, p in zip(texts, prompts)]


def loss_and_grads(model, loss, feats, labels):
    "The summed loss terms and the gradients of an encoder weight and of every head parameter."
    model.zero_grad(); loss.zero_grad()
    total = sum(loss(feats, labels).values())
    total.backward()
    grads = {"word": model[0].auto_model.embeddings.word_embeddings.weight.grad.clone()}
    grads |= {n: p.grad.clone() for n, p in loss.named_parameters() if not n.startswith("model.") and p.grad is not None}
    return float(total.detach()), grads


@pytest.mark.parametrize("name", ["pairsupcon", "supcon", "sncse"])
def test_the_cached_loss_equals_the_whole_batch(name):
    """Loss and gradients of mini-batches of 3 rows (8 rows: 3 + 3 + 2) against one pass; dropout off, so the two see
    one network. Float32 sums in another order, more apart on some CPUs' kernels than on others: 1e-4 relative on the
    loss and on gradients of size ~1e-2, 1e-5 absolute for gradient entries near 0."""
    model, loss, texts, labels, prompts = case(name)
    feats = features(model, texts, prompts)
    whole = loss_and_grads(model, loss, feats, labels)
    loss.mini_batch_size = 3
    cached = loss_and_grads(model, loss, feats, labels)
    assert abs(cached[0] - whole[0]) <= 1e-4 * max(1.0, abs(whole[0]))
    assert set(cached[1]) == set(whole[1]) and len(whole[1]) >= 2
    for k in whole[1]:
        torch.testing.assert_close(cached[1][k], whole[1][k], atol=1e-5, rtol=1e-4, msg=f"{name}: {k}")
    assert whole[1]["word"].abs().sum() > 0


def test_the_cached_loss_scales_with_the_trainers_backward():
    "The replay starts from the gradient the outer backward brings (gradient accumulation divides the loss)."
    model, loss, texts, labels, prompts = case("pairsupcon", mini_batch_size=4)
    feats = features(model, texts, prompts)
    model.zero_grad(); loss.zero_grad()
    (sum(loss(feats, labels).values()) / 4).backward()
    quarter = model[0].auto_model.embeddings.word_embeddings.weight.grad.clone()
    _, full = loss_and_grads(model, loss, feats, labels)
    torch.testing.assert_close(quarter * 4, full["word"], atol=1e-7, rtol=1e-5)


def _gather_worker(rank, world, path, port):
    torch.set_num_threads(1)
    # Models first: once torch.distributed is initialised, transformers' save_pretrained writes on rank 0 only, and
    # `sentence_transformer` loads what it saved (under torchrun: build the model before the training arguments).
    cases = {n: case(n, gather_across_devices=True) for n in ("pairsupcon", "supcon", "sncse")}
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        out = {}
        for name, (model, loss, texts, labels, prompts) in cases.items():
            half = slice(4 * rank, 4 * rank + 4)
            value, grads = loss_and_grads(model, loss, features(model, texts, prompts, half),
                                          None if labels is None else labels[half])
            for g in grads.values():                                            # what DDP does: average over ranks
                dist.all_reduce(g); g /= world
            out[name] = (value, grads)
        if rank == 0: torch.save(out, path)
    finally: dist.destroy_process_group()


def test_two_processes_gathering_equal_one_process_with_the_whole_batch(tmp_path):
    """Each of two gloo processes embeds 4 of the 8 rows; gathered, each computes the whole batch's loss, and the
    averaged gradients equal one process's on all 8 rows (float32, rows padded per process: same tolerances)."""
    port = 29500 + os.getpid() % 1000
    mp.spawn(_gather_worker, args=(2, str(tmp_path/"ranks.pt"), port), nprocs=2, join=True)
    ranks = torch.load(tmp_path/"ranks.pt")
    for name, (value, grads) in ranks.items():
        model, loss, texts, labels, prompts = case(name)
        one = loss_and_grads(model, loss, features(model, texts, prompts), labels)
        assert abs(value - one[0]) <= 1e-4 * max(1.0, abs(one[0])), name
        assert set(grads) == set(one[1])
        for k in one[1]: torch.testing.assert_close(grads[k], one[1][k], atol=1e-5, rtol=1e-4, msg=f"{name}: {k}")


@pytest.mark.parametrize("name", ["pairsupcon", "supcon", "sncse"])
def test_matryoshka_trains_each_loss_and_its_dimensions_are_evaluated(name, tmp_path):
    model, loss, texts, _, prompts = case(name)
    dims = [128, 64, 32]
    data = (datasets.sncse_dataset(SENTENCES, cache=False) if name == "sncse"
            else datasets.nli_dataset(NLI.iloc[:32]))
    matryoshka = MatryoshkaLoss(model, loss, matryoshka_dims=dims)
    args = SentenceTransformerTrainingArguments(
        output_dir=str(tmp_path/"out"), max_steps=2, per_device_train_batch_size=8, learning_rate=1e-3,
        optim="adamw_torch", lr_scheduler_type="constant", seed=0, logging_steps=1, save_strategy="no",
        report_to="none", disable_tqdm=True, use_cpu=True, prompts=getattr(loss, "prompts", None))
    model.train()
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=data, loss=matryoshka)
    trainer.remove_callback(PrinterCallback)
    heads = {n: p.detach().clone() for n, p in loss.named_parameters() if not n.startswith("model.")}
    trainer.train()
    logs = [l for l in trainer.state.log_history if "loss" in l]
    assert len(logs) == 2 and all(np.isfinite(l["loss"]) for l in logs)
    assert any(k not in ("loss", "grad_norm", "learning_rate", "epoch", "step") for k in logs[0])   # terms logged
    assert all(not torch.equal(p, heads[n]) for n, p in loss.named_parameters() if n in heads)        # heads trained
    scores = {}
    for d in dims:                                                               # each truncated width, evaluated
        model.truncate_dim = d
        assert model.encode(["a cat"]).shape == (1, d)
        scores[d] = evaluators.STSEvaluator("stsb", data_dir=SAMPLES_DIR)(model)["stsb_test_spearman"]
    model.truncate_dim = None
    assert all(np.isfinite(s) for s in scores.values()) and len(set(scores.values())) > 1


def test_a_cached_loss_refuses_matryoshka_in_one_line():
    model, loss, texts, labels, prompts = case("pairsupcon", mini_batch_size=4)
    matryoshka = MatryoshkaLoss(model, loss, matryoshka_dims=[128, 32])
    from sentcl.core import SentclError
    with pytest.raises(SentclError, match="cannot replay a truncation"):
        matryoshka(features(model, texts, prompts), labels)


def test_every_name_an_error_message_names_is_importable():
    "A message that says `build it with sentcl.X.y(...)` names something a reader can import from there."
    import ast
    import importlib
    import re
    from pathlib import Path
    names = set()
    for p in sorted((Path(__file__).resolve().parents[1]/"sentcl"/"st").glob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                names |= set(re.findall(r"\bsentcl(?:\.\w+)+", node.value))
    assert {"sentcl.st.models.sentence_transformer", "sentcl.methods.sncse.SNCSEConfig.anchor_template"} <= names
    for name in sorted(names):
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):                     # the longest importable module, then attributes
            try: obj = importlib.import_module(".".join(parts[:cut]))
            except ImportError: continue
            for attr in parts[cut:]: obj = getattr(obj, attr)    # AttributeError: the message names nothing
            break
