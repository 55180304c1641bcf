"""Precision and the transfer classifier end to end: `sentcl train --precision auto`, `sentcl encode`/`eval` in bf16,
and `sentcl eval --classifier` recorded in the results JSON."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sentcl.data.layout import SAMPLES_DIR

SENTCL = str(Path(sys.executable).parent / "sentcl")


def sentcl(*args, cache=None, **extra_env):
    env = {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PATH": str(Path(sys.executable).parent), **extra_env}
    if cache: env["SENTCL_CACHE_DIR"] = str(cache)
    return subprocess.run([SENTCL, *map(str, args)], capture_output=True, text=True, env=env, timeout=600)


def test_train_with_precision_auto(tmp_path):
    out = tmp_path / "run"
    r = sentcl("train", "pairsupcon", "--model", "tiny", "--preset", "cpu-smoke", "--batch-size", "4", "--max-steps", "2",
               "--precision", "auto", "--out", out, "--no-progress")
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads((out / "config.json").read_text())["run.precision"] == "auto"
    log = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in log] == [1, 2] and all(np.isfinite(row["loss"]) for row in log)
    r = sentcl("train", "pairsupcon", "--model", "tiny", "--preset", "cpu-smoke", "--precision", "fp16", "--out", tmp_path / "h")
    assert r.returncode == 2 and "CUDA" in r.stderr  # fp16 autocast needs a GPU: one line, before any step


def test_encode_and_eval_in_bf16(tmp_path):
    src = tmp_path / "s.txt"
    src.write_text("a cat sits on the mat\nthe stock market fell sharply today\n")
    assert sentcl("encode", "--model", "tiny", "--in", src, "--out", tmp_path / "a.npy").returncode == 0
    assert sentcl("encode", "--model", "tiny", "--in", src, "--out", tmp_path / "b.npy", "--precision", "bf16").returncode == 0
    a, b = np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy")
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert not np.array_equal(a, b) and (1 - cos).max() < 1e-2
    cache = tmp_path / "cache"
    runs = {}  # both kinds of CPU, simulated: SENTCL_CPU_BF16=1 decides as with bf16 units, 0 as an AVX2-only CPU
    for units in ("1", "0"):
        for precision in ("fp32", "bf16", "auto"):
            out = tmp_path / f"{precision}-{units}.json"
            r = sentcl("eval", "--model", "tiny", "--tasks", "stsb", "--data-dir", SAMPLES_DIR, "--precision", precision,
                       "--out", out, cache=cache, SENTCL_CPU_BF16=units)
            assert r.returncode == 0, r.stderr[-2000:]
            runs[precision, units] = json.loads(out.read_text()), r.stderr
    recorded = {k: doc["settings"]["precision"] for k, (doc, _) in runs.items()}
    assert recorded == {("fp32", "1"): "fp32", ("bf16", "1"): "bf16", ("auto", "1"): "bf16",
                        ("fp32", "0"): "fp32", ("bf16", "0"): "bf16", ("auto", "0"): "fp32"}
    warned = {k for k, (_, err) in runs.items() if "bf16 is emulated on this CPU" in err}
    assert warned == {("bf16", "0")}  # asked-for bf16 without bf16 units: one warning line, and it still runs
    assert sum("bf16 is emulated" in l for l in runs["bf16", "0"][1].splitlines()) == 1
    hw = {k: doc["hardware"] for k, (doc, _) in runs.items()}
    assert hw["auto", "0"]["cpu_avx512_bf16"] is False and hw["auto", "0"]["cpu_bf16_override"] is False
    assert hw["auto", "1"]["cpu_avx512_bf16"] is True and hw["auto", "1"]["cpu_bf16_override"] is True
    fp32, bf16 = runs["fp32", "1"][0]["tasks"]["stsb"]["spearman"], runs["bf16", "1"][0]["tasks"]["stsb"]["spearman"]
    assert abs(bf16 - fp32) < 1.0
    assert len(list(cache.rglob("*.npy"))) == 2  # one entry per precision: bf16 vectors never stand in for fp32


@pytest.fixture
def mr_dir(tmp_path):
    "A made-up MR: 120 sentences whose sentiment word decides the label."
    rng = np.random.default_rng(0)
    good, bad = ["great", "wonderful", "moving", "superb"], ["awful", "boring", "dull", "terrible"]
    rows = [(f"a {rng.choice(good if y else bad)} film number {i}", "pos" if y else "neg") for i, y in enumerate([1, 0] * 60)]
    d = tmp_path / "data" / "transfer" / "mr"
    d.mkdir(parents=True)
    (d / "all.tsv").write_text("text\tlabel\n" + "".join(f"{t}\t{l}\n" for t, l in rows))
    return tmp_path / "data"


def test_eval_classifier_is_recorded(tmp_path, mr_dir):
    for classifier in ("senteval", "sklearn"):
        r = sentcl("eval", "--model", "tiny", "--tasks", "mr,mr_fewshot", "--kfold", "3", "--data-dir", mr_dir,
                   "--classifier", classifier, "--out", tmp_path / f"{classifier}.json", cache=tmp_path / "cache")
        assert r.returncode == 0, r.stderr[-2000:]
        doc = json.loads((tmp_path / f"{classifier}.json").read_text())
        assert doc["settings"]["classifier"] == classifier
        assert doc["tasks"]["mr"]["classifier"] == doc["tasks"]["mr_fewshot"]["classifier"] == classifier
        assert f"inner 3-fold ({classifier})" in r.stdout
    r = sentcl("eval", "--model", "tiny", "--tasks", "mr", "--data-dir", mr_dir, "--classifier", "svm")
    assert r.returncode == 2 and "--classifier" in r.stderr  # argparse names the choices
