"""Which vectors `sentcl eval` scores: `default` (the offline all-MiniLM-L6-v2 folder, whose pipeline ends in
`Normalize`) is scored on what it outputs, unit vectors, for transfer and clustering; `--no-normalize` /
`normalize=False` gives the raw pooled vectors sentcl scored before; STS is the same either way."""
import argparse
import json

import numpy as np
import pytest

import sentcl.eval.clustering
import sentcl.eval.senteval
from sentcl.cli import add_eval_arguments, run_eval
from sentcl.data.layout import SAMPLES_DIR
from sentcl.encoders import SentenceEncoder
from sentcl.eval import evaluate


def eval_cli(*argv) -> int:
    return run_eval(add_eval_arguments(argparse.ArgumentParser(prog="sentcl eval")).parse_args([str(a) for a in argv]))


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SENTCL_CACHE_DIR", str(tmp_path/"cache"))


@pytest.fixture(scope="module")
def mr_dir(tmp_path_factory):
    "A 60-sentence MR-style transfer set in sentcl's data layout."
    d = tmp_path_factory.mktemp("data")
    words = ["great", "awful", "moving", "dull", "superb", "boring"]
    rows = [(f"a {words[i % 6]} film, number {i}", "pos" if i % 2 == 0 else "neg") for i in range(60)]
    (d/"transfer"/"mr").mkdir(parents=True)
    (d/"transfer"/"mr"/"all.tsv").write_text("text\tlabel\n" + "".join(f"{t}\t{l}\n" for t, l in rows))
    return d


@pytest.fixture
def classifier_inputs(monkeypatch):
    "The feature matrices every transfer protocol hands its classifier (`fit_families`, the one door)."
    seen, real = [], sentcl.eval.senteval.fit_families
    def spy(X, *args, **kwargs):
        seen.append(np.array(X))
        return real(X, *args, **kwargs)
    monkeypatch.setattr(sentcl.eval.senteval, "fit_families", spy)
    return seen


def test_default_ends_in_normalize():
    assert SentenceEncoder("default").settings.normalize is True  # the premise of the tests below


def test_default_is_scored_on_its_unit_vectors(mr_dir, classifier_inputs):
    doc = evaluate("default", "mr", data_dir=mr_dir, kfold=2, log=lambda m: None)
    assert doc["settings"]["normalize"] is True
    assert classifier_inputs and all(X.shape == (60, 384) for X in classifier_inputs)
    np.testing.assert_allclose(np.linalg.norm(classifier_inputs[0], axis=1), 1, atol=1e-5)


def test_no_normalize_restores_the_raw_pooled_vectors(tmp_path, mr_dir, classifier_inputs):
    out = tmp_path/"raw.json"
    assert eval_cli("--model", "default", "--tasks", "mr", "--data-dir", mr_dir, "--kfold", 2, "--no-normalize",
                    "--out", out) == 0
    assert json.loads(out.read_text())["settings"]["normalize"] is False
    norms = np.linalg.norm(classifier_inputs[0], axis=1)
    assert norms.min() > 1.5  # raw MiniLM mean-pooled vectors are far from unit length
    raw = SentenceEncoder("default", normalize=False)
    text = (mr_dir/"transfer"/"mr"/"all.tsv").read_text().splitlines()[1:]
    expected = np.linalg.norm(raw.encode([line.split("\t")[0] for line in text]), axis=1)
    np.testing.assert_allclose(np.sort(norms), np.sort(expected), rtol=1e-4)  # the same vectors, SentEval's order
    assert eval_cli("--model", "default", "--tasks", "mr", "--data-dir", mr_dir, "--kfold", 2,
                    "--out", tmp_path/"own.json") == 0
    assert json.loads((tmp_path/"own.json").read_text())["settings"]["normalize"] is True


def test_clustering_follows_and_sts_does_not_change(monkeypatch):
    seen, real = [], sentcl.eval.clustering.kmeans_scores
    def spy(X, *args, **kwargs):
        seen.append(np.array(X))
        return real(X, *args, **kwargs)
    monkeypatch.setattr(sentcl.eval.clustering, "kmeans_scores", spy)  # where eval_clustering looks it up
    own, raw = (evaluate("default", "stsb,wikitext_topics", SAMPLES_DIR, normalize=n, log=lambda m: None)
                for n in (None, False))
    np.testing.assert_allclose(np.linalg.norm(seen[0], axis=1), 1, atol=1e-5)
    assert np.linalg.norm(seen[1], axis=1).min() > 1.5
    assert own["tasks"]["stsb"] == raw["tasks"]["stsb"]  # cosine: STS takes raw vectors either way
