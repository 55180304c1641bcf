"""`sentcl eval` through its argparse hooks: bundled samples with the tiny model, small data folders
written here for the transfer and few-shot protocols, the embedding cache, and one-line errors."""
import argparse
import json
import os
from pathlib import Path

import numpy as np
import pytest

from sentcl.data.layout import SAMPLES_DIR
from sentcl.cli import add_eval_arguments, run_eval
from sentcl.eval import RESULTS_SCHEMA, STS_AGGREGATION_BY_PAPER, TASK_FIELDS

SHARED = Path(os.environ.get("SENTCL_SHARED_DATA", Path(__file__).resolve().parents[2]/"shared"/"data"))


def eval_cli(*argv) -> int:
    return run_eval(add_eval_arguments(argparse.ArgumentParser(prog="sentcl eval")).parse_args([str(a) for a in argv]))


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    cache = tmp_path/"cache"
    monkeypatch.setenv("SENTCL_CACHE_DIR", str(cache))
    return cache


def test_sts_and_clustering_on_samples(tmp_path, own_cache, capsys):
    out = tmp_path/"results.json"
    assert eval_cli("--model", "tiny", "--tasks", "stsb,wikitext_topics", "--data-dir", SAMPLES_DIR, "--out", out) == 0
    table = capsys.readouterr().out
    res = json.loads(out.read_text())
    assert set(res) == set(RESULTS_SCHEMA)
    assert res["model"] == "tiny" and res["versions"]["scikit-learn"]
    stsb = res["tasks"]["stsb"]
    assert stsb["n"] == 250 and stsb["split"] == "test" and -100 <= stsb["spearman"] <= 100
    clus = res["tasks"]["wikitext_topics"]
    assert clus["k"] == 8 and clus["n"] == 320 and len(clus["acc"]) == 10 and clus["seeds"] == list(range(10))
    assert 100 / 8 <= clus["acc_mean"] <= 100 and 0 <= clus["nmi_mean"] <= 100
    assert res["avg"] == {}  # incomplete groups get no average
    assert res["notes"] == STS_AGGREGATION_BY_PAPER
    assert "stsb" in table and "wikitext_topics" in table and f"{stsb['spearman']:.2f}" in table
    assert len(list(own_cache.rglob("*.npy"))) == 2  # one cache file per task


def test_cache_is_reused_and_bypassed(tmp_path, own_cache, monkeypatch):
    from sentcl.encoders import SentenceEncoder
    calls = []
    real = SentenceEncoder.encode
    def counting(self, sentences, *a, **k):
        calls.append(len(sentences))
        return real(self, sentences, *a, **k)
    monkeypatch.setattr(SentenceEncoder, "encode", counting)
    args = ("--model", "tiny", "--tasks", "stsb", "--data-dir", SAMPLES_DIR)
    assert eval_cli(*args, "--out", tmp_path/"a.json") == 0
    first = json.loads((tmp_path/"a.json").read_text())["tasks"]["stsb"]
    assert len(calls) == 1 and calls[0] < 2 * 250  # distinct sentences only: STS-B repeats some
    assert eval_cli(*args, "--out", tmp_path/"b.json") == 0
    assert len(calls) == 1  # served from the cache
    assert json.loads((tmp_path/"b.json").read_text())["tasks"]["stsb"] == first
    assert eval_cli(*args, "--no-cache") == 0
    assert len(calls) == 2


def _write(path: Path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\t".join(header) + "\n" + "".join("\t".join(map(str, r)) + "\n" for r in rows), encoding="utf-8")


@pytest.fixture
def transfer_dir(tmp_path):
    "A data folder with small made-up MR and MRPC sets (string labels for MR, to exercise remapping)."
    rng = np.random.default_rng(0)
    good, bad = ["great", "wonderful", "moving", "superb"], ["awful", "boring", "dull", "terrible"]
    nouns = ["film", "plot", "cast", "ending", "script", "score"]
    mr = [(f"a {rng.choice(good if y == 'pos' else bad)} {rng.choice(nouns)} number {i}", y)
          for i, y in enumerate(["pos", "neg"] * 30)]
    _write(tmp_path/"transfer"/"mr"/"all.tsv", ("text", "label"), mr)
    def pairs(n, offset):
        rows = []
        for i in range(n):
            s = f"the {nouns[i % 6]} was {good[i % 4]} in part {i + offset}"
            rows.append((s, s.replace("the", "this") if i % 2 == 0 else f"nothing about {bad[i % 4]} things {i}", int(i % 2 == 0)))
        return rows
    _write(tmp_path/"transfer"/"mrpc"/"train.tsv", ("sentence1", "sentence2", "label"), pairs(40, 0))
    _write(tmp_path/"transfer"/"mrpc"/"test.tsv", ("sentence1", "sentence2", "label"), pairs(20, 100))
    return tmp_path


def test_transfer_and_fewshot_protocols(transfer_dir, tmp_path):
    out = tmp_path/"t.json"
    assert eval_cli("--model", "tiny", "--tasks", "mr,mrpc,mr_fewshot,mrpc_fewshot", "--kfold", 3, "--data-dir", transfer_dir, "--out", out) == 0
    t = json.loads(out.read_text())["tasks"]
    assert set(t["mr"]) == set(TASK_FIELDS["mr, cr, subj, mpqa"]) and set(t["mrpc"]) == set(TASK_FIELDS["trec, mrpc"]) | {"f1"}
    assert set(t["mr_fewshot"]) == set(t["mrpc_fewshot"]) == set(TASK_FIELDS["fewshot"])
    assert t["mr"]["n"] == 60 and t["mr"]["protocol"] == "inner 3-fold" and 0 <= t["mr"]["acc"] <= 100
    assert (t["mrpc"]["n_train"], t["mrpc"]["n_test"]) == (40, 20) and "f1" in t["mrpc"] and t["mrpc"]["l2"] in (1e-5, 1e-4, 1e-3, 1e-2)
    for name in ("mr_fewshot", "mrpc_fewshot"):
        assert t[name]["shots"] == 16 and t[name]["seeds"] == [0, 1, 2, 3, 4] and len(t[name]["acc"]) == 5
        assert t[name]["acc_mean"] == pytest.approx(np.mean(t[name]["acc"]), abs=0.01)


def test_missing_dataset_is_one_line(capsys):
    assert eval_cli("--model", "tiny", "--tasks", "sts12", "--data-dir", SAMPLES_DIR) == 2
    err = [l for l in capsys.readouterr().err.splitlines() if l.startswith("sentcl eval: error")]
    assert len(err) == 1 and "sts12" in err[0] and "--data-dir" in err[0]


def test_unloadable_model_is_one_line(tmp_path, capsys):
    (tmp_path/"empty").mkdir()
    assert eval_cli("--model", tmp_path/"empty", "--tasks", "stsb", "--data-dir", SAMPLES_DIR) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sentcl eval: error") and "empty" in err[0]


def test_nan_embeddings_name_the_task(monkeypatch, capsys):
    from sentcl.encoders import SentenceEncoder
    monkeypatch.setattr(SentenceEncoder, "encode", lambda self, s, *a, **k: np.full((len(s), 4), np.nan, dtype=np.float32))
    assert eval_cli("--model", "tiny", "--tasks", "stsb", "--data-dir", SAMPLES_DIR) == 2
    err = capsys.readouterr().err
    assert "stsb: the model produced NaN" in err


# Published MTEB scores of sentence-transformers/all-MiniLM-L6-v2 (cosine Spearman x100, test split), from
# embeddings-benchmark/results (results/sentence-transformers__all-MiniLM-L6-v2/8b3219a9.../*.json). STS14 is not
# in the stored copy; 75.6 is the 3-digit value jina-embedding's model card tabulates from MTEB. MTEB's SICK-R is all
# 9,927 SICK pairs (train+trial+test), so it is compared against the three splits concatenated.
MTEB_ALL_MINILM_L6_V2 = {"sts12": 72.369, "sts13": 80.603, "sts14": 75.6, "sts15": 85.390, "sts16": 78.989,
                         "stsb": 82.032, "sickr_all_splits": 77.582}


@pytest.mark.skipif(os.environ.get("SENTCL_SLOW") != "1" or not (SHARED/"sts").is_dir(),
                    reason="slow check on the full STS data: set SENTCL_SLOW=1 (needs ../shared/data)")
def test_default_model_matches_published_mteb_sts(tmp_path):
    import pandas as pd
    from sentcl.data.tasks import load_sts
    from sentcl.eval import spearman100
    from sentcl.eval.common import as_encoder, cosine_rows, embed_unique
    out = tmp_path/"sts.json"
    assert eval_cli("--model", "default", "--tasks", "sts", "--data-dir", SHARED, "--out", out) == 0
    t = json.loads(out.read_text())["tasks"]
    for task in ("sts12", "sts13", "sts14", "sts15", "sts16"):
        assert t[task]["all"] == pytest.approx(MTEB_ALL_MINILM_L6_V2[task], abs=0.051), task
    assert t["stsb"]["spearman"] == pytest.approx(MTEB_ALL_MINILM_L6_V2["stsb"], abs=0.006)
    df = pd.concat([load_sts("sickr", s, SHARED) for s in ("train", "dev", "test")], ignore_index=True)
    emb, rows = embed_unique(as_encoder("default"), list(df.sentence1) + list(df.sentence2), task="sickr")
    n = len(df)
    assert spearman100(cosine_rows(emb[rows[:n]], emb[rows[n:]]), df.score) == pytest.approx(MTEB_ALL_MINILM_L6_V2["sickr_all_splits"], abs=0.006)


def test_evaluation_modules_load_no_torch_or_sklearn():
    "Importing the evaluation and analysis modules loads neither torch nor scikit-learn (they load when first used)."
    import subprocess, sys
    code = ("import sys, sentcl.eval, sentcl.eval.senteval, sentcl.eval.analysis, sentcl.eval.error_analysis; "
            "print(sorted(m for m in ('torch', 'transformers', 'sklearn') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[]"
