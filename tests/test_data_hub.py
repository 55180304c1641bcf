"Every hub-registered corpus goes through its public loader with a mocked `datasets.load_dataset`."
import os
from unittest import mock

import datasets
import pytest

from sentcl.core import SentclError
from sentcl.data.corpora import load_documents, load_nli, load_nli_triplets, load_sentences
from sentcl.data.hub import HUB
from sentcl.data.layout import SAMPLES_DIR
from sentcl.data.tasks import load_clustering, load_sts, load_transfer

DEFAULT_COLS = {"nli": {"premise": ["p", "p"], "hypothesis": ["a", "b"], "label": [0, -1]},
                "sentences": {"text": ["one .", "", "two ."]},
                "documents": {"text": [" = A = ", " x . ", " = B = ", " y . "]},
                "transfer": {"text": ["t"], "label": [1]}}


def fake_dataset(kind, src):
    if src.columns:
        cols = {theirs: ([0] if theirs.endswith("label") and src.label_names else ["x"] if not theirs in ("score", "label") else [1])
                for _, theirs in src.columns}
        ds = datasets.Dataset.from_dict(cols)
        if src.label_names:
            feats = ds.features.copy()
            for _, theirs in src.columns:
                if theirs.endswith("label"): feats[theirs] = datasets.ClassLabel(names=["ABBR", "ENTY"])
            ds = ds.cast(feats)
        return ds
    return datasets.Dataset.from_dict(DEFAULT_COLS[kind])


def call(kind, name):
    if kind == "nli": return load_nli(name, "train")
    if kind == "triplets": return load_nli_triplets(name)
    if kind == "sts": return load_sts(name, "test")
    if kind == "transfer": return load_transfer(name, "all" if "all" in dict(HUB[kind, name].splits) else "train")
    if kind == "sentences": return load_sentences(name)
    return load_documents() if name == "wikitext103" else load_documents(names=[name])


@pytest.mark.parametrize("kind,name", sorted(HUB))
def test_hub_loader(kind, name):
    src, seen = HUB[kind, name], []
    def fake(path, config=None, split=None, revision=None, data_files=None, streaming=False):
        seen.append((path, config, split, revision, data_files))
        if streaming: return iter([{"text": " ".join(["w"] * 2049)}, {"text": "short"}])  # OpenWebText is streamed
        return fake_dataset(kind, src)
    with mock.patch.dict(os.environ, {}, clear=True), mock.patch("datasets.load_dataset", fake):
        out = call(kind, name)
    assert seen and seen[0][0] == src.path and seen[0][3] == src.revision and seen[0][1] == src.config
    assert len(out) >= 1
    if kind == "nli": assert out.label.tolist() == ["entailment"] and out.attrs["dropped_unlabeled"] == 1
    if kind == "sts": assert out.columns.tolist() == ["sentence1", "sentence2", "score", "source"]
    if kind == "transfer" and name == "trec": assert out.label.tolist() == ["ABBR"]
    if kind == "sentences": assert out == ["one .", "two ."]
    if kind == "documents" and name == "wikitext103": assert out == ["A\n x .", "B\n y ."]
    if kind == "documents" and name == "openwebtext": assert len(out) == 1 and out.attrs["skipped_short"] == 1


def test_offline_hub_error_names_dataset_and_remedy():
    def offline(*a, **k): raise ConnectionError("offline")
    with mock.patch.dict(os.environ, {}, clear=True), mock.patch("datasets.load_dataset", offline):
        with pytest.raises(SentclError, match=r"NLI corpus snli:train not found \(looked in hub stanfordnlp/snli@.*SENTCL_DATA.*go online"):
            load_nli("snli")
    with mock.patch.dict(os.environ, {}, clear=True):
        with pytest.raises(SentclError, match="clustering sets are read from a data directory only"):
            load_clustering("agnews")


def test_samples_are_small_and_attributed():
    files = [p for p in SAMPLES_DIR.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) <= 300_000
    assert (SAMPLES_DIR/"ATTRIBUTION.md").is_file()
    for p in files:
        if p.suffix in (".tsv", ".txt") and "documents" not in p.parts:
            assert len(p.read_text().splitlines()) <= 501, p
