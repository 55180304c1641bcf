"""DeCLUTR's memory bank (supplement §6.2) across processes and runs: under DDP every rank keeps the queue a single
process keeps, with the same gradients; a run stopped and resumed from its checkpoint ends with the straight run's
weights, because the queue is saved with it."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import dataclasses
import socket
import warnings

import torch
from torch import nn

from sentcl.encoders import SentenceEncoder
from sentcl.train.gradients import compute_gradients
from sentcl.methods import build_method
from sentcl.train.trainer import RunOptions, train

DOC = "Document {} tells a long story about rivers, hills and the towns between them, with many small details."
BATCHES = [{"anchors": [DOC.format(i + 4 * s)[s:] for i in range(4)],
            "positives": [DOC.format(i + 4 * s)[j * 20:] for i in range(4) for j in range(2)], "num_positives": 2}
           for s in range(3)]
CONFIG = {"objective": "contrastive", "memory_size": 12}  # DDP averages MLM per rank (tests/test_train.py says why)


def _method():
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        method = build_method("declutr", SentenceEncoder("tiny", device="cpu"), **CONFIG)
    for m in method.modules():
        if isinstance(m, nn.Dropout): m.p = 0.0
    return method.train()


def _steps(method, batches, slicer=lambda b: b):
    "One gradient computation per batch (no update): the last one's gradients and the queue after it."
    for b in batches:
        method.zero_grad(set_to_none=True)
        loss, _ = compute_gradients(method, slicer(b))
    return float(loss), {n: p.grad.clone() for n, p in method.named_parameters() if p.grad is not None}, \
        method.memory.negatives()


def _ddp_worker(rank, world_size, port, out):
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    from sentcl.train.gradients import average_gradients, rank_slice
    method = _method()
    loss, _, queue = _steps(method, BATCHES, lambda b: rank_slice(b, rank, world_size))
    average_gradients(method)
    grads = {n: p.grad.clone() for n, p in method.named_parameters() if p.grad is not None}
    torch.save({"loss": loss, "grads": grads, "queue": queue}, f"{out}.{rank}")
    dist.destroy_process_group()


def test_ddp_ranks_keep_the_single_process_queue(tmp_path):
    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    loss, want, queue = _steps(_method(), BATCHES)
    assert queue.shape == (12, 128)  # three batches of 8 rows: the last 12
    mp.spawn(_ddp_worker, args=(2, port, str(tmp_path / "r")), nprocs=2, join=True)
    for rank in (0, 1):
        got = torch.load(tmp_path / f"r.{rank}")
        # each rank embeds its half of the batch: other matmul shapes than one process's, float32, so 1e-4 relative
        # (of the loss, of the queue's and of the gradients' largest entry, never below 1e-5 for gradients: the rounding
        # of activations of order 1 reaches every entry), which other CPUs' kernels keep too
        assert torch.allclose(got["queue"], queue, rtol=0, atol=1e-4 * float(queue.abs().max())), rank  # the gathered rows, in rank order
        assert abs(got["loss"] - loss) < 1e-4 * max(1.0, abs(loss))
        assert want.keys() == got["grads"].keys()
        tol = 1e-4 * max(0.1, max(float(g.abs().max()) for g in want.values()))
        assert max(float((want[k] - got["grads"][k]).abs().max()) for k in want) < tol


def _weights(folder):
    return SentenceEncoder(str(folder / "model"), device="cpu").model.state_dict()


def test_resume_continues_with_the_saved_queue(tmp_path):
    over = {"model": "tiny", "batch_size": 2, "memory_size": 12}
    opts = RunOptions(preset="cpu-smoke", max_steps=6, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        train("declutr", over, dataclasses.replace(opts, out=str(tmp_path / "straight")))
        stopped = train("declutr", over, dataclasses.replace(opts, out=str(tmp_path / "resumed"), stop_after=3))
        ck = torch.load(tmp_path / "resumed" / "checkpoint.pt", weights_only=True)
        train("declutr", over, dataclasses.replace(opts, out=str(tmp_path / "resumed"), resume=True))
    assert not stopped["finished"] and int(ck["method"]["memory.seen"]) == 3 * 8  # 2 documents x 2 anchors x 2 rows
    straight, resumed = _weights(tmp_path / "straight"), _weights(tmp_path / "resumed")
    assert all(torch.equal(straight[k], resumed[k]) for k in straight)
