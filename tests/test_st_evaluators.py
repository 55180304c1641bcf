"""sentcl.st's evaluators encode what `sentcl eval` encodes for the same model, task by task, whatever
`max_seq_length` the sentence-transformers model carries.

The model is saved at 32 tokens (a training length), and the data are the bundled samples with some texts made
longer than 64 tokens and a few longer than 512, so that each task's limit (512 under the senteval protocol, 64 for
clustering) decides what is encoded. The vectors each evaluation hands its scorer are caught on both paths and
compared, with the settings they were encoded at: scores made from vectors that agree to the last bits can still
differ (a classifier's accuracy flips with one prediction), so the vectors are what is compared.
"""
import shutil

import numpy as np
import pandas as pd
import pytest

import sentcl.eval.clustering
import sentcl.eval.senteval
import sentcl.eval.sts
from sentcl.data.layout import SAMPLES_DIR
from sentcl.encoders import SentenceEncoder
from sentcl.eval import evaluate

st = pytest.importorskip("sentence_transformers")
from sentcl.st.evaluators import ClusteringEvaluator, STSEvaluator, TransferEvaluator  # noqa: E402

TRAINING_LENGTH = 32


def lengthen(texts):
    """Every third text about 10 times as long (past 64 tokens), every 16th about 60 times (past 512)."""
    return [" ".join([t] * (60 if i % 16 == 0 else 10 if i % 3 == 0 else 1)) for i, t in enumerate(texts)]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """A small data folder in sentcl's layout: 24 STS-B pairs, 40 topic texts to cluster, 48 to classify."""
    d = tmp_path_factory.mktemp("data")
    for rel, n, cols in (("sts/stsb/test.tsv", 24, ["sentence1", "sentence2"]),
                         ("clustering/wikitext_topics/all.tsv", 40, ["text"]),
                         ("transfer/topics/all.tsv", 48, ["text"])):
        df = pd.read_csv(SAMPLES_DIR / rel, sep="\t", quoting=3, keep_default_na=False)
        if "label" in df: df = df.groupby("label").head(n // df["label"].nunique()).reset_index(drop=True)  # each class
        else: df = df.head(n)
        for c in cols: df[c] = lengthen(df[c].tolist())
        (d / rel).parent.mkdir(parents=True)
        df.to_csv(d / rel, sep="\t", index=False, quoting=3)
    shutil.copy(SAMPLES_DIR / "sts/stsb/dev.tsv", d / "sts/stsb/dev.tsv")
    return d


@pytest.fixture
def caught(monkeypatch):
    """Each call of `embed_unique` inside the STS, clustering and transfer evaluations: its settings and vectors."""
    calls = []
    for module in (sentcl.eval.sts, sentcl.eval.clustering, sentcl.eval.senteval):
        real = module.embed_unique

        def spy(encoder, sentences, *args, real=real, **kw):
            emb, rows = real(encoder, sentences, *args, **kw)
            length = kw.get("max_length") or encoder.settings.max_length
            calls.append({"sentences": list(sentences), "max_length": length,
                          "normalize": kw.get("normalize", False), "vectors": emb[rows]})
            return emb, rows
        monkeypatch.setattr(module, "embed_unique", spy)
    return calls


EVALUATORS = {  # task, evaluator on the model, the same task through `sentcl eval`
    "stsb": (lambda d, p: STSEvaluator("stsb", data_dir=d, protocol=p), {}),
    "wikitext_topics": (lambda d, p: ClusteringEvaluator("wikitext_topics", data_dir=d, seeds=range(2), n_init=2,
                                                         protocol=p), {}),
    "topics": (lambda d, p: TransferEvaluator("topics", data_dir=d, kfold=2, classifier="sklearn", protocol=p),
               {"kfold": 2, "classifier": "sklearn"}),
}
CASES = [("tiny", "senteval"), ("tiny", "sncse"), ("default", "senteval")]


@pytest.mark.parametrize("task", EVALUATORS)
@pytest.mark.parametrize("model,protocol", CASES)
def test_an_evaluator_encodes_what_sentcl_eval_encodes(tmp_path, data_dir, caught, model, protocol, task):
    folder = SentenceEncoder(model, max_length=TRAINING_LENGTH, device="cpu").save(tmp_path / "model")
    make, options = EVALUATORS[task]
    if task == "wikitext_topics":  # sentcl eval clusters with ten seeds; the vectors are what is compared
        options = {}
    make(data_dir, protocol)(st.SentenceTransformer(str(folder), device="cpu", trust_remote_code=True))
    ours = list(caught)
    caught.clear()
    evaluate(str(folder), task, data_dir=str(data_dir), protocol=protocol, cache=False, log=lambda m: None, **options)
    theirs = list(caught)
    assert len(ours) == len(theirs) == 1
    ours, theirs = ours[0], theirs[0]
    assert ours["sentences"] == theirs["sentences"]
    assert (ours["max_length"], ours["normalize"]) == (theirs["max_length"], theirs["normalize"])
    assert ours["max_length"] == (64 if task == "wikitext_topics" else 512)
    a, b = ours["vectors"], theirs["vectors"]
    if task == "stsb":  # cosines: sentcl scores raw vectors, a model ending in Normalize hands over unit ones
        a, b = (v / np.linalg.norm(v, axis=1, keepdims=True) for v in (a, b))
    # The same fp32 weights through two codes (sentence-transformers' modules, sentcl's encoder): sums in another
    # order differ in the last bits, below 1e-6 on these vectors (norms up to about 10) here, more on other CPUs'
    # kernels: 1e-4 relative to the largest entry.
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * np.abs(b).max())


def test_the_models_own_length_would_not_be_the_protocol(tmp_path, data_dir):
    # What the evaluators must not do: encode at the 32 tokens the model was saved with. On these texts that
    # differs from the protocol's 512 tokens by far more than the tolerance above, so the test above would see it.
    enc = SentenceEncoder("tiny", max_length=TRAINING_LENGTH, device="cpu")
    texts = pd.read_csv(data_dir / "transfer/topics/all.tsv", sep="\t", quoting=3)["text"].tolist()
    gap = np.abs(enc.encode(texts) - enc.encode(texts, settings=enc.settings.replace(max_length=512))).max()
    assert gap > 0.05, gap
