"""sentcl.st's modules in sentence-transformers' own trainer and against `sentcl eval`: each loss trains through
`SentenceTransformerTrainer` (its collator, prompts and optimiser), DeCLUTR's full objective equals sentcl's with the
same masks, and an evaluator returns the number `sentcl eval` writes. Tiny model, a few steps, seconds."""
import argparse
import json
import warnings

import numpy as np
import pytest
import torch

import sentcl.methods.declutr
from sentcl.st import datasets, evaluators, losses, models
from sentcl.cli import add_eval_arguments, run_eval
from sentcl.core import SentclError
from sentcl.st_modules import load_sentence_transformer
from sentcl.data.layout import SAMPLES_DIR
from sentcl.data.corpora import load_documents, load_nli
from sentcl.encoders import SentenceEncoder
from sentcl.methods import build_method
from sentcl.methods.sncse import SNCSEConfig
from sentcl.views import build_view

from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, SentenceTransformerTrainingArguments
from transformers import PrinterCallback


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SENTCL_CACHE_DIR", str(tmp_path/"cache"))


def train(model, loss, data, tmp_path, steps=2, batch=8, **extra):
    "A few steps of `SentenceTransformerTrainer`; the loss's own parameters before and after."
    args = SentenceTransformerTrainingArguments(
        output_dir=str(tmp_path/"out"), max_steps=steps, per_device_train_batch_size=batch, learning_rate=1e-3,
        optim="adamw_torch", lr_scheduler_type="constant", seed=0, logging_steps=1, save_strategy="no",
        report_to="none", disable_tqdm=True, use_cpu=True, **extra)
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=data, loss=loss)
    trainer.remove_callback(PrinterCallback)
    before = {n: p.detach().clone() for n, p in loss.named_parameters() if not n.startswith("model.")}
    trainer.train()
    return trainer, before, {n: p.detach() for n, p in loss.named_parameters() if n in before}


def changed(before, after): return {n for n in before if not torch.equal(before[n], after[n])}


def test_supcon_trains_in_order_and_its_classifier_learns(tmp_path):
    model = models.sentence_transformer("tiny", device="cpu", pooling="mean_no_cls_padded", max_length=32)
    loss = losses.SupConLoss(model)
    trainer, before, after = train(model, loss, datasets.nli_dataset("snli", data_dir=SAMPLES_DIR), tmp_path,
                                   batch_sampler=datasets.in_order)
    assert changed(before, after) == set(before) and before                      # every classifier weight moved
    logs = [l for l in trainer.state.log_history if "weighted_supcon" in l]
    assert len(logs) == 2 and all(np.isfinite(l["weighted_classification"]) for l in logs)


def test_sncse_trains_with_the_prompts_and_refuses_without(tmp_path):
    sentences = [s for s in load_nli("snli", "train", SAMPLES_DIR).premise.unique()[:16]]
    data = datasets.sncse_dataset(sentences)
    model = models.sentence_transformer("tiny", device="cpu", pooling="mask", template=SNCSEConfig.anchor_template,
                                    max_length=32)
    loss = losses.SNCSELoss(model)
    trainer, before, after = train(model, loss, data, tmp_path, prompts=loss.prompts)
    assert changed(before, after) == {"mlp.0.weight", "mlp.0.bias"}
    assert all("weighted_bml" in l and "info_nce" in l for l in trainer.state.log_history if "loss" in l)
    with pytest.raises(SentclError, match=r"column 1 \(positive\) was not tokenised inside its template"):
        train(model, loss, data, tmp_path/"again")                              # no prompts: template A everywhere; one line says how


def test_declutr_trains_and_equals_sentcl_with_the_same_masks(tmp_path, monkeypatch):
    docs = load_documents(SAMPLES_DIR)
    m = build_method("declutr", "tiny", max_length=64)
    m.eval()
    model = models.sentence_transformer(m.encoder, pooling="mean", max_length=64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                                          # tiny has no pretrained MLM head
        loss = losses.copy_heads(m, losses.DeCLUTRLoss(model)).eval()
    fixed = lambda seed, *parts: torch.Generator().manual_seed(seed)            # the same masks in both
    monkeypatch.setattr(sentcl.methods.declutr, "batch_generator", fixed)
    monkeypatch.setattr(losses, "batch_generator", fixed)
    batch = build_view("spans", docs, m.encoder.tokenizer, min_span=8, max_span=32).make_batch(
        np.arange(3), np.random.default_rng(0))
    columns = [batch["anchors"], batch["positives"][0::2], batch["positives"][1::2]]
    with torch.no_grad():
        ours, terms = m.loss(batch)
        theirs = loss([model.preprocess(c) for c in columns], None)
    # two codes in float32 (sentcl pads to 8s): 1e-4 relative, which other CPUs' kernels keep too
    assert abs(float(sum(theirs.values())) - float(ours)) < 1e-4 * max(1.0, abs(float(ours)))
    assert abs(float(theirs["mlm"]) - terms["mlm"]) < 1e-4 * max(1.0, abs(terms["mlm"]))
    data = datasets.declutr_dataset(docs, model, min_span=8, max_span=32)
    _, before, after = train(model, loss.train(), data, tmp_path, batch=6, batch_sampler=datasets.in_order)
    assert changed(before, after) == set(before) and "mlm_head.dense.weight" in before


def test_an_evaluator_returns_what_sentcl_eval_writes(tmp_path):
    folder = SentenceEncoder("tiny", device="cpu").save(tmp_path/"model")
    out = tmp_path/"results.json"
    args = add_eval_arguments(argparse.ArgumentParser()).parse_args(
        ["--model", str(folder), "--tasks", "stsb", "--data-dir", str(SAMPLES_DIR), "--out", str(out), "--no-cache"])
    assert run_eval(args) == 0
    written = json.loads(out.read_text())["tasks"]["stsb"]["spearman"]
    model = load_sentence_transformer(folder, device="cpu")  # sentcl's loader: no remote code
    # two codes (sentence-transformers' modules, sentcl's encoder) whose vectors agree to float32's last bits, which may
    # swap two nearly tied cosines (on another CPU too): one swap moves a Spearman x100 over n pairs by at most
    # 1200 / (n (n + 1)), 0.019 for these 250; 0.01 more for rounding to two decimals
    scores = evaluators.STSEvaluator("stsb", data_dir=SAMPLES_DIR)(model)
    n = json.loads(out.read_text())["tasks"]["stsb"]["n"]
    assert list(scores) == ["stsb_test_spearman"] and scores["stsb_test_spearman"] == pytest.approx(written, abs=0.01 + 1200 / (n * (n + 1)))


def test_bad_inputs_are_one_line():
    model = models.sentence_transformer("tiny", device="cpu", max_length=32)
    loss = losses.PairSupConLoss(model)
    feats = [model.preprocess(["a", "b"]), model.preprocess(["c", "d"])]
    with pytest.raises(SentclError, match="label'] != -1"): loss(feats, torch.tensor([0, -1]))
    with pytest.raises(SentclError, match="got 1 text columns, expected 2"): loss(feats[:1], torch.tensor([0, 2]))
    with pytest.raises(SentclError, match="pooling='mask'"): losses.SNCSELoss(model)


def test_pairsupcon_gradients_equal_sentcl():
    "Not only the value: the encoder's and the heads' gradients equal sentcl's on the same batch (dropout off)."
    m = build_method("pairsupcon", "tiny", max_length=32).eval()
    model = models.sentence_transformer(m.encoder, max_length=32).eval()
    loss = losses.copy_heads(m, losses.PairSupConLoss(model))
    batch = build_view("pairs", load_nli("snli", "train", SAMPLES_DIR)).make_batch(np.arange(16), None)
    m.loss(batch)[0].backward()
    labels = torch.where(batch["entailed"], 0, 2)
    sum(loss([model.preprocess(batch["premise"]), model.preprocess(batch["hypothesis"])], labels).values()).backward()
    ours = {"word": m.encoder.model.embeddings.word_embeddings.weight.grad, "head": m.contrast_head[0].weight.grad,
            "classifier": m.classifier.weight.grad}
    theirs = {"word": model[0].auto_model.embeddings.word_embeddings.weight.grad,
              "head": loss.contrast_head[0].weight.grad, "classifier": loss.classifier.weight.grad}
    # two codes in float32: 1e-4 relative, and 1e-5 absolute for entries near 0 (the rounding of activations of order 1
    # reaches every entry: here up to 0.3 of a 1e-6 floor, too close for other CPUs' kernels)
    for k in ours: torch.testing.assert_close(theirs[k], ours[k], atol=1e-5, rtol=1e-4)


def test_supcon_sampled_positives_and_negatives_equal_sentcl():
    "With n_pos/n_neg sampling the draws are seeded by (seed, labels, groups) in both, so the losses still agree."
    m = build_method("supcon", "tiny", max_length=32, n_pos=2, n_neg=3).eval()
    model = models.sentence_transformer(m.encoder, pooling=m.train_settings.pooling, max_length=32).eval()
    loss = losses.copy_heads(m, losses.SupConLoss(model, n_pos=2, n_neg=3)).eval()
    batch = build_view("premise_groups", load_nli("snli", "train", SAMPLES_DIR), shuffle=False).make_batch(
        np.arange(30), None)
    with torch.no_grad():
        ours = float(m.loss(batch)[0])
        theirs = loss([model.preprocess(batch["premise"]), model.preprocess(batch["hypothesis"])], batch["label"])
    assert abs(float(sum(theirs.values())) - ours) < 1e-4 * max(1.0, abs(ours))  # two codes, float32: 1e-4 relative
