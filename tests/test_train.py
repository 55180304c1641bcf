"""Training: gradient caching and DDP give the plain big-batch gradients; runs write loadable models."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from sentcl.train.gradients import compute_gradients
from sentcl.methods import METHODS, build_method
from sentcl.train.trainer import RunOptions, resolve, training_view

ROOT = Path(__file__).resolve().parents[1]
SENTCL = str(Path(sys.executable).parent / "sentcl")


def method_and_batch(name, batch_size=8, dropout=False, seed=0):
    """A method on the tiny encoder and one batch of its view from the bundled samples."""
    if name == "declutr":
        batch_size = 2  # documents: the bundled sample has three
    cfg, options = resolve(name, {"model": "tiny", "batch_size": batch_size}, RunOptions(preset="cpu-smoke"))
    torch.manual_seed(seed)
    method = build_method(name, "tiny", cfg)
    if not dropout:
        for m in method.modules():
            if isinstance(m, nn.Dropout):
                m.p = 0.0
    view = training_view(method, options)
    batch = next(iter(view.batches(cfg.batch_size, seed=0, epoch=0)))
    return method, batch


def grads(method):
    return {n: p.grad.detach().clone() for n, p in method.named_parameters() if p.grad is not None}


def max_gap(a, b):
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def close_to(got_loss, got_grads, want_loss, want_grads):
    """Loss and gradients of mini-batches or ranks against one pass over the whole batch: other matmul shapes in float32,
    so sums in another order, more apart on some CPUs' kernels than on others: 1e-4 relative, of the loss and of the
    largest gradient entry, and never below 1e-5 for the gradients (the rounding of activations of order 1 reaches every
    entry: 3e-8 to 3e-6 apart here, under the host's, older and one-thread kernels alike; a wrong gradient is off by
    far more)."""
    scale = max(0.1, max(float(g.abs().max()) for g in want_grads.values()))
    assert abs(float(got_loss) - float(want_loss)) < 1e-4 * max(1.0, abs(float(want_loss))), (float(got_loss), float(want_loss))
    assert max_gap(want_grads, got_grads) < 1e-4 * scale, (max_gap(want_grads, got_grads), scale)


CONTRASTIVE = ["pairsupcon", "pairsupcon-instdisc", "supcon", "sncse", "declutr", "simcse-unsup", "simcse-sup"]


@pytest.mark.parametrize("name", CONTRASTIVE + ["sbert", "pairsupcon-classification", "sbert-augment"])
def test_gradient_caching_equals_big_batch(name):
    method, batch = method_and_batch(name)
    method.train()
    torch.manual_seed(1)
    loss_plain, terms_plain = compute_gradients(method, batch)
    g_plain = grads(method)
    method.zero_grad(set_to_none=True)
    torch.manual_seed(1)
    loss_cached, terms_cached = compute_gradients(method, batch, mini_batch_size=3)
    g_cached = grads(method)
    close_to(loss_cached, g_cached, loss_plain, g_plain)
    assert any(k.startswith("encoder.") for k in g_cached)


def _ddp_worker(rank, world_size, port, name, out):
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    from sentcl.train.gradients import average_gradients, rank_slice
    method, batch = method_and_batch(name)
    method.train()
    torch.manual_seed(1)
    # the global batch is prepared (tokenized, padded) once, then sliced, as the Trainer does
    loss, _ = compute_gradients(method, rank_slice(method.prepare_batch(batch), rank, world_size))
    average_gradients(method)
    if rank == 0:
        torch.save({"loss": float(loss), "grads": grads(method)}, out)
    dist.destroy_process_group()


# DeCLUTR is left out on purpose: its MLM term is a mean over each rank's own masked tokens, so under
# DDP it becomes the mean of the ranks' means (as in the released AllenNLP runs), not the global mean.
@pytest.mark.parametrize("name", ["pairsupcon", "supcon", "sncse", "simcse-sup"])
def test_ddp_gradients_equal_single_process(tmp_path, name):
    import socket
    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    method, batch = method_and_batch(name)
    method.train()
    torch.manual_seed(1)
    loss, _ = compute_gradients(method, batch)
    want = grads(method)
    mp.spawn(_ddp_worker, args=(2, port, name, str(tmp_path / "r0.pt")), nprocs=2, join=True)
    got = torch.load(tmp_path / "r0.pt")
    close_to(got["loss"], got["grads"], loss, want)


def sentcl(*args, **kw):
    return subprocess.run([SENTCL, *args], capture_output=True, text=True, cwd=kw.get("cwd", ROOT),
                          env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=600)


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_trains_and_saves_a_loadable_model(tmp_path, name):
    r = sentcl("train", name, "--model", "tiny", "--preset", "cpu-smoke", "--max-steps", "2",
               "--batch-size", "2" if name == "declutr" else "4",
               "--out", str(tmp_path / "run"), "--no-progress")
    assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads(r.stdout[r.stdout.index("{"):])
    assert summary["finished"] and summary["step"] == 2
    log = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in log if "loss" in row] == [1, 2]
    cfg = json.loads((tmp_path / "run" / "config.json").read_text())
    assert cfg["run.method"] == name and cfg["versions"]["torch"] and "git_commit" in cfg
    from sentcl.encoders import SentenceEncoder
    enc = SentenceEncoder(tmp_path / "run" / "model")
    assert enc.encode(["a sentence"]).shape == (1, 128)


@pytest.mark.parametrize("name", ["pairsupcon", "sncse"])
def test_saved_model_matches_sentence_transformers(tmp_path, name):
    st = pytest.importorskip("sentence_transformers")
    import numpy as np
    from sentcl.encoders import SentenceEncoder
    r = sentcl("train", name, "--model", "tiny", "--preset", "cpu-smoke", "--max-steps", "1", "--batch-size", "2",
               "--out", str(tmp_path / "run"), "--no-progress")
    assert r.returncode == 0, r.stderr[-2000:]
    sents = ["A man is playing a guitar.", "Tom and Jerry became good friends."]
    ours = SentenceEncoder(tmp_path / "run" / "model").encode(sents)
    from sentcl.st_modules import load_sentence_transformer  # sentcl's module classes: no remote code
    theirs = load_sentence_transformer(tmp_path / "run" / "model", device="cpu").encode(sents)
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4 * np.abs(theirs).max())  # two codes, float32: 1e-4 relative


def test_cli_resume_and_bad_inputs(tmp_path):
    out = str(tmp_path / "run")
    base = ["train", "pairsupcon", "--model", "tiny", "--preset", "cpu-smoke", "--batch-size", "4", "--max-steps", "6",
            "--out", out, "--no-progress"]
    r = sentcl(*base, "--save-every", "2", "--stop-after", "3")
    assert r.returncode == 0 and '"finished": false' in r.stdout, r.stderr[-2000:]
    r = sentcl(*base, "--resume", "--lr", "1e-3")
    assert r.returncode == 2 and "method.lr" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = sentcl(*base, "--resume")
    assert r.returncode == 0 and '"step": 6' in r.stdout, r.stderr[-2000:]
    r = sentcl("train", "nosuch", "--model", "tiny")
    assert r.returncode == 2 and "pairsupcon" in r.stderr
    r = sentcl("train", "pairsupcon", "--model", "tiny", "--preset", "cpu-smoke", "--batch-size", "100000", "--out", out + "2")
    assert r.returncode == 2 and "larger than" in r.stderr
    r = sentcl("train", "pairsupcon", "--model", "tiny", "--preset", "cpu-smoke", "--set", "nosuch=1", "--out", out + "3")
    assert r.returncode == 2 and "nosuch" in r.stderr and "beta" in r.stderr


def test_torchrun_two_processes_on_cpu(tmp_path):
    torchrun = str(Path(sys.executable).parent / "torchrun")
    r = subprocess.run([torchrun, "--nproc_per_node", "2", "--standalone", SENTCL, "train", "pairsupcon", "--model", "tiny",
                        "--preset", "cpu-smoke", "--max-steps", "2", "--batch-size", "8", "--out", str(tmp_path / "run"),
                        "--no-progress"], capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    log = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in log] == [1, 2]  # rank 0 alone writes the log
    assert (tmp_path / "run" / "model" / "modules.json").exists()


def test_show_config_lists_the_paper_preset():
    "--show-config prints each preset's corpus, pooling and model-dependent values; --set and --train-data win."
    def show(*args):
        r = sentcl("train", *args, "--show-config")
        assert r.returncode == 0, r.stderr[-2000:]
        return json.loads(r.stdout)
    sncse = show("sncse", "--model", "roberta-base")
    assert (sncse["method"]["lam"], sncse["method"]["batch_size"], sncse["method"]["corpus"]) == (5e-4, 256, "wiki1m")
    assert show("sncse", "--model", "roberta-large", "--set", "lam=0.002")["method"]["lam"] == 0.002
    liao = show("supcon")["method"]
    assert (liao["train_pooling"], liao["eval_pooling"], liao["corpus"]) == ("mean_no_cls_padded",) * 2 + ("snli",)
    sbert = show("sbert")["method"]
    assert (sbert["grad_clip"], sbert["corpus"]) == (1.0, "snli+multi_nli")
    pair = show("pairsupcon", "--train-data", "snli+multi_nli")
    assert (pair["method"]["corpus"], pair["run"]["train_data"]) == ("simcse", "snli+multi_nli")
    assert show("declutr", "--set", "objective=mlm")["method"]["corpus"] == "openwebtext"


def test_report_to_tensorboard_writes_curves_read_back_from_the_event_files(tmp_path):
    """Issue 38 item 2: each loss term, the learning rate, throughput and dev scores, across a resume, read back from the
    event files as TensorBoard reads them."""
    from sentcl.train.curves import read_scalars
    out = tmp_path / "run"
    base = ["train", "pairsupcon", "--model", "tiny", "--preset", "cpu-smoke", "--batch-size", "4", "--max-steps", "4",
            "--eval-every", "2", "--out", str(out), "--no-progress", "--report-to", "tensorboard"]
    r = sentcl(*base, "--stop-after", "3")
    assert r.returncode == 0, r.stderr[-2000:]
    r = sentcl(*base, "--resume")  # resumes from step 3's checkpoint
    assert r.returncode == 0, r.stderr[-2000:]
    log = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train_rows, dev_rows = [row for row in log if "loss" in row], [row for row in log if "dev" in row]
    terms = [k for k in train_rows[0] if k not in ("step", "epoch")]
    assert {"loss", "lr", "sentences_per_s"} < set(terms) and len(terms) > 3  # pairsupcon's own terms too
    for key in terms:
        curve = read_scalars(out / "tensorboard", f"train/{key}")
        assert [s for s, _ in curve] == [1, 2, 3, 4], key
        assert [v for _, v in curve] == pytest.approx([row[key] for row in train_rows], rel=1e-6), key
    dev = read_scalars(out / "tensorboard", "dev/score")
    assert dev == [(row["step"], pytest.approx(row["dev"], rel=1e-6)) for row in dev_rows]
    assert [s for s, _ in dev] == [2, 4]
    r = sentcl(*base[:-1], "wandb")
    assert r.returncode == 2 and "invalid choice: 'wandb'" in r.stderr and len(r.stderr.strip().splitlines()) == 1
