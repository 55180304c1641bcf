"The rehearsal's stand-in data feeds every evaluation code path of the paper preset and every hub loader it trains on."
import math
from concurrent.futures import ProcessPoolExecutor

import datasets
import pytest

from sentcl.data.corpora import LABELS, TRIPLET_COLUMNS, load_nli, load_nli_triplets, load_openwebtext, load_sentences
from sentcl.data.hub import HUB
from sentcl.data.tasks import PROBING_TASKS, load_probing, load_sts, load_transfer
from sentcl.experiments.catalog.registry import EXPERIMENTS, paper_tasks
from sentcl.core import SentclError
from sentcl.data.corpora import sample_fraction
from sentcl.eval import STS_SUBSET_TASKS, TASK_GROUPS, evaluate, task_kind
from sentcl.experiments.plan import plan_runs
from sentcl.experiments.rehearsal_data import (CLUSTERING_K, HUB_CORPORA, MANIFEST, STAND_IN_NOTE, STS_SOURCES,
    write_hub_files, write_rehearsal_data)
from sentcl.data.hub import hub_builder, hub_file


@pytest.fixture(scope="module")
def eval_folder(tmp_path_factory):
    return write_rehearsal_data(tmp_path_factory.mktemp("rehearsal")/"eval", paper_tasks())


@pytest.fixture(scope="module")
def hub_folder(tmp_path_factory):
    return write_hub_files(tmp_path_factory.mktemp("rehearsal")/"hub")


def test_every_paper_task_gives_its_entry(eval_folder):
    "The tiny model evaluated on the union of the paper preset's task specs: each task, by its own protocol."
    specs = sorted({e.tasks["paper"] for e in EXPERIMENTS.values()})
    tasks = paper_tasks()
    assert len(tasks) >= 40 and {"stackoverflow", "sst5", "sicke", "sts14", "sickr", "mrpc_fewshot"} <= set(tasks)
    doc = evaluate("tiny", ",".join(specs), data_dir=eval_folder, cache=False, log=lambda m: None)
    assert doc["complete"] and sorted(doc["tasks"]) == sorted(tasks)
    for name, entry in doc["tasks"].items():
        kind = task_kind(name, eval_folder)
        if name in STS_SUBSET_TASKS:  # one Spearman per sub-file, so SentEval's mean and Liao's weighted mean exist
            assert list(entry["subsets"]) == list(STS_SOURCES[name]) and entry["mean"] is not None, name
        elif kind == "sts": assert entry["spearman"] == entry["spearman"] and entry["n"] >= 48, name  # not NaN
        elif kind == "clustering": assert entry["k"] == CLUSTERING_K[name] and len(entry["acc"]) == 10, name
        elif kind == "fewshot": assert entry["shots"] == 16 and len(entry["acc"]) == 5, name
        else: assert 0 <= entry["acc"] <= 100 and "devacc" in entry, name  # transfer and probing
    assert doc["tasks"]["mrpc"]["protocol"].startswith("10-fold") and "f1" in doc["tasks"]["mrpc"]
    assert doc["tasks"]["mr"]["protocol"] == "inner 10-fold"
    assert doc["tasks"]["sicke"]["n_dev"] >= 48 and doc["tasks"]["length"]["n_test"] >= 48
    assert {"sts", "sts_mean", "sts_wmean", "clustering_acc", "transfer", "fewshot"} <= set(doc["avg"])


def test_folder_says_what_it_is(eval_folder):
    assert STAND_IN_NOTE in (eval_folder/"README.md").read_text()
    assert sorted(p.name for p in (eval_folder/"probing").iterdir()) == sorted(PROBING_TASKS.values())
    assert load_probing("depth", "train", data_dir=eval_folder).label.nunique() > 2


def _write_small(folder):
    return str(write_rehearsal_data(folder, "stsb,trec", rows=24))


def test_concurrent_writers_agree(tmp_path):
    "Two processes asking for one folder at once both get it, complete, with no temporary folder left."
    target = tmp_path/"shared"
    with ProcessPoolExecutor(2) as pool: out = list(pool.map(_write_small, [target, target]))
    assert out == [str(target)] * 2 and (target/MANIFEST).is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shared"]
    assert len(load_transfer("trec", "train", data_dir=target)) == 120


def test_bad_requests_are_one_line_errors(tmp_path):
    (tmp_path/"notes.txt").write_text("someone's")
    with pytest.raises(SentclError, match="is not a rehearsal data folder"): write_rehearsal_data(tmp_path, "stsb")
    with pytest.raises(SentclError, match="no rehearsal stand-in"): write_rehearsal_data(tmp_path/"x", "stsb,topics")
    with pytest.raises(SentclError, match="at least 1"): write_hub_files(tmp_path/"h", rows=0)


@pytest.fixture
def hub_redirect(monkeypatch, hub_folder):
    "`datasets.load_dataset` of a `HUB` source answered from the local hub files, as `$SENTCL_HUB_FILES` will do."
    real = datasets.load_dataset
    sources = {(s.path, s.config, s.data_files): s for s in (HUB[k] for k in HUB_CORPORA)}

    def local(path, name=None, split=None, revision=None, data_files=None, streaming=False, **kw):
        source = sources[path, name, data_files]
        ours = next(s for s, theirs in (source.splits or (("train", "train"),)) if theirs == split)
        p = hub_file(source, ours, hub_folder)
        return real(hub_builder(p), data_files={split: str(p)}, split=split, streaming=streaming,
                    cache_dir=str(hub_folder.parent/"cache"))
    monkeypatch.setattr(datasets, "load_dataset", local)
    monkeypatch.delenv("SENTCL_DATA", raising=False)


def test_hub_loaders_read_the_hub_files(hub_redirect):
    "sentcl's own hub code path (column maps, ClassLabel ids, unlabelled rows, DeCLUTR's filter) on the local files."
    snli = load_nli("snli", "train")
    assert set(snli.label) == set(LABELS) and snli.attrs["dropped_unlabeled"] > 0
    assert len(load_nli("multi_nli", "dev_mismatched")) > 200
    triplets = load_nli_triplets("simcse")
    assert list(triplets.columns) == list(TRIPLET_COLUMNS) and len(triplets) >= 2 * 1024
    assert len(load_sentences("wiki1m")) >= 2 * 1024
    dev = load_sts("stsb", "dev")
    assert len(dev) == 250 and dev.score.between(0, 5).all()
    docs = load_openwebtext(limit=3)
    assert len(docs) == 3 and docs.attrs["skipped_short"] == 0


def test_hub_files_hold_two_paper_batches(hub_folder, tmp_path):
    "Every corpus the paper plan trains on holds two of its largest batches (rows may repeat), in the share it trains on."
    largest = {}  # rows a corpus needs: two batches of the largest, on the smallest training share (DeCLUTR Fig. 3)
    for exp in EXPERIMENTS.values():
        for run in plan_runs(exp, "paper", out=tmp_path/exp.name):
            if run.config is not None:
                corpus = run.describe()["data"]
                rows = len(sample_fraction(list(range(10_000)), run.config.train_fraction)) / 10_000
                largest[corpus] = max(largest.get(corpus, 0), math.ceil(run.config.batch_size / rows))
    assert set(largest) == {"simcse", "wiki1m", "snli", "snli+multi_nli", "openwebtext"}, largest
    sizes = {}
    for kind, name in HUB_CORPORA:
        p = hub_file(HUB[kind, name], "train", hub_folder)
        sizes[name] = len(datasets.load_dataset(hub_builder(p), data_files={"train": str(p)}, split="train",
                                                cache_dir=str(tmp_path/"cache")))
    for corpus, batch in largest.items():
        for name in corpus.split("+"):
            assert sizes[name] >= 2 * batch, (corpus, name, sizes[name], batch)
