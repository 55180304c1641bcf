"""The papers' published numbers (sentcl/published/*.json): schema, averages, cross-table repeats, spot checks.

The schema and average checks here are written independently of `sentcl.data.paper_numbers`, so a bug in the loader's
own checks cannot hide a transcription error.
"""
import json
import math
from pathlib import Path

import pytest

from sentcl.core import SentclError
from sentcl.data.paper_numbers import (PAPERS, average_mismatches, list_tables, load_published, published_table,
    published_value, validate_published)

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "sentcl" / "published"
STS_AGGREGATIONS = {None, "all", "mean", "wmean", "unknown"}


def _no_duplicate_keys(pairs):
    keys = [k for k, _ in pairs]
    dups = {k for k in keys if keys.count(k) > 1}
    assert not dups, f"duplicate JSON keys: {sorted(dups)}"
    return dict(pairs)


def raw(paper):
    "The file as written, refusing duplicate keys (json.load would keep the last one silently)."
    return json.loads((DATA / f"{paper}.json").read_text(encoding="utf-8"), object_pairs_hook=_no_duplicate_keys)


def rows_by_label(paper, table):
    return {r["row"]: r for r in raw(paper)["tables"][table]["rows"]}


def is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


# ---------------------------------------------------------------- files and packaging

def test_one_file_per_paper_and_packaged():
    # outside.json: what others reported when they reran the papers (sentcl.experiments.summary), not a paper's numbers
    assert sorted(p.stem for p in DATA.glob("*.json") if p.stem != "outside") == sorted(PAPERS)
    assert '"published/*"' in (ROOT / "setup.py").read_text()
    assert "recursive-include sentcl/published" in (ROOT / "MANIFEST.in").read_text()
    assert (DATA / "README.md").exists()
    assert not (DATA / "__init__.py").exists()  # data folder, not a module


# ---------------------------------------------------------------- schema

@pytest.mark.parametrize("paper", PAPERS)
def test_schema(paper):
    doc = raw(paper)  # also: table ids and every other key unique
    assert doc["paper"] == paper
    for k in ("title", "authors", "venue", "arxiv", "code"):
        assert isinstance(doc[k], str) and doc[k], k
    assert doc["tables"], "no tables"
    for tid, t in doc["tables"].items():
        assert tid.startswith(("table", "figure")), tid
        for k in ("ref", "what", "metric", "scale", "aggregation", "columns", "rows", "notes"):
            assert k in t, (tid, k)
        assert t["ref"].startswith(("Table", "Figure")), (tid, t["ref"])
        assert t["aggregation"] in STS_AGGREGATIONS, (tid, t["aggregation"])
        assert t["scale"] in (None, "x100", "x1"), tid
        assert len(set(t["columns"])) == len(t["columns"]), tid
        assert set(t.get("avg_of", [])) <= set(t["columns"]), tid
        if not any(r["values"] for r in t["rows"]):
            assert "figure only" in t["notes"] or t["metric"] == "qualitative", f"{tid}: no numbers and no reason given"
        labels = [r["row"] for r in t["rows"]]
        for r in t["rows"]:
            where = (paper, tid, r["row"])
            for k in ("row", "model", "method", "setting", "values"):
                assert k in r, (where, k)
            assert isinstance(r["row"], str) and r["row"], where
            assert isinstance(r["setting"], dict), where
            assert set(r["values"]) <= set(t["columns"]), (where, set(r["values"]) - set(t["columns"]))
            assert all(is_number(v) for v in r["values"].values()), where
            std = r.get("std", {})
            assert set(std) <= set(r["values"]) and all(is_number(v) and v >= 0 for v in std.values()), where
            if labels.count(r["row"]) > 1:
                assert "duplicate label" in r.get("note", ""), where
        validate_published(doc)


def test_columns_use_a_known_vocabulary():
    "sentcl's task names where sentcl has the task, SentEval's lower-cased otherwise, and a few derived columns."
    from sentcl.data.tasks import CLUSTERING_SETS, STS_TASKS, TRANSFER_SETS
    from sentcl.eval import FEWSHOT_TASKS
    senteval_only = {"sst5", "sicke", "snli", "imagecaptionretrieval", "mrpc_f1",
                     "length", "wordcontent", "depth", "topconstituents", "bigramshift", "tense", "subjnumber",
                     "objnumber", "oddmanout", "coordinationinversion"}
    derived = {"avg", "sts", "clustering_acc", "downstream", "probing", "delta", "downstream_wo_snli", "delta_wo_snli",
               "soft_negative_peak", "negative_peak", "r_g", "r_e", "n", "avg_words", "clusters", "largest", "smallest"}
    known = set(STS_TASKS) | set(CLUSTERING_SETS) | set(TRANSFER_SETS) | set(FEWSHOT_TASKS) | senteval_only | derived
    for paper in PAPERS:
        for tid, t in raw(paper)["tables"].items():
            assert set(t["columns"]) <= known, (paper, tid, set(t["columns"]) - known)


# ---------------------------------------------------------------- averages

@pytest.mark.parametrize("paper", PAPERS)
def test_averages_match_within_rounding_unless_a_documented_paper_typo(paper):
    checked = 0
    for tid, t in raw(paper)["tables"].items():
        if "avg" not in t["columns"] or t.get("decimals") is None:
            continue
        parts = t.get("avg_of") or [c for c in t["columns"] if c != "avg"]
        if not parts:
            continue
        tol = 10.0 ** -t["decimals"] + 1e-9
        for r in t["rows"]:
            v = r["values"]
            if "avg" not in v or any(c not in v for c in parts):
                continue
            mean = sum(v[c] for c in parts) / len(parts)
            typo = "paper typo" in r.get("note", "")
            off = abs(mean - v["avg"]) > tol
            where = f"{paper}/{tid} row {r['row']!r}: printed avg {v['avg']}, mean {mean:.4f} (tolerance {tol:g})"
            assert off == typo, where + ("; a transcription error?" if off else "; noted as a typo but consistent")
            checked += 1
    assert checked > 0
    assert [m for m in average_mismatches(paper) if not m["documented"]] == []


def test_the_paper_typos_found():
    found = {(p, m["table"], m["row"]) for p in PAPERS for m in average_mismatches(p)}
    assert found == {("liao", "table3_transfer", "SBERT baseline"),
                     ("liao", "table3_transfer", "3palln-lambda0.5-SCL"),
                     ("liao", "table3_transfer", "allpalln-lambda0.3-SCL"),
                     ("liao", "table4_lambda_transfer", "λ = 0.3")}


def test_declutr_summary_columns_follow_from_the_detailed_tables():
    t1 = rows_by_label("declutr", "table1_senteval")
    s3 = rows_by_label("declutr", "tableS3_downstream")
    s4 = rows_by_label("declutr", "tableS4_probing")
    base_avg = t1["DeCLUTR-base (ours)"]["values"]["avg"]
    for label, row in t1.items():
        v = row["values"]
        d = s3[label]["values"]  # Supplement §3.2: MRPC counts once, as (acc + F1) / 2; 18 tasks
        tasks = [k for k in d if k not in ("mrpc", "mrpc_f1")] + ["mrpc"]
        scores = [d[k] for k in tasks if k != "mrpc"] + [(d["mrpc"] + d["mrpc_f1"]) / 2]
        assert len(scores) == 18
        assert abs(sum(scores) / 18 - v["downstream"]) <= 0.01, label
        assert abs(sum(s4[label]["values"].values()) / 10 - v["probing"]) <= 0.01, label
        if "delta" in v:  # avg minus DeCLUTR-base's, from unrounded averages: both sides rounded
            assert abs((v["avg"] - base_avg) - v["delta"]) <= 0.015, label
    s5 = rows_by_label("declutr", "tableS5_sbert_probing")
    for m in ("BERT-base", "BERT-large", "RoBERTa-base", "RoBERTa-large"):
        before, after = s5[f"{m} (before fine-tuning)"]["values"], s5[f"{m} (after fine-tuning)"]["values"]
        assert abs(before["probing"] - after["probing"] - after["delta"]) <= 0.011, m
    s6 = rows_by_label("declutr", "tableS6_without_snli")
    ref = s6["DeCLUTR-base (ours)"]["values"]
    for label, row in s6.items():
        v = row["values"]
        if "delta" in v:
            assert abs(v["downstream"] - ref["downstream"] - v["delta"]) <= 0.011, label
            assert abs(v["downstream_wo_snli"] - ref["downstream_wo_snli"] - v["delta_wo_snli"]) <= 0.011, label


# ---------------------------------------------------------------- numbers the papers print twice

def _same(a, b, cols=None):
    cols = cols or sorted(set(a["values"]) | set(b["values"]))
    return all(a["values"].get(c) == b["values"].get(c) for c in cols)


def test_pairsupcon_repeats_agree():
    t1, t3 = rows_by_label("pairsupcon", "table1_clustering"), rows_by_label("pairsupcon", "table3_sts")
    t8 = rows_by_label("pairsupcon", "table8_stsb_dev")
    for block, label in (("distil-base", "DistilBase"), ("base", "BertBase"), ("large", "BertLarge")):
        assert _same(t8[f"{label} w/o STS-B"], t3[f"PairSupCon {block}"])
    t4 = raw("pairsupcon")["tables"]["table4_ablation"]["rows"]
    t5 = rows_by_label("pairsupcon", "table5_hard_negatives")
    beta1 = next(r for r in t4 if r["setting"].get("beta") == 1.0)["values"]
    assert beta1 == {"sts": t3["PairSupCon base"]["values"]["avg"],
                     "clustering_acc": t1["PairSupCon base"]["values"]["avg"]}
    assert beta1 == t5["PairSupCon w/ HardNegSample"]["values"]
    assert next(r for r in t4 if r["row"] == "InstanceDisc")["values"] == t5["InstanceDisc w/ HardNegSample"]["values"]


def test_sncse_repeats_agree():
    t2, t3 = rows_by_label("sncse", "table2_sts"), rows_by_label("sncse", "table3_negation_role")
    assert t3["SNCSE"]["values"]["avg"] == t2["SNCSE-BERT base"]["values"]["avg"] == 78.97
    assert t3["InfoNCE"]["values"]["avg"] == t2["SNCSE-BERT base w.o. BML Loss"]["values"]["avg"] == 78.21
    stats = rows_by_label("sncse", "table1_sts_statistics")["test"]["values"]
    for r in raw("sncse")["tables"]["table4_rank_errors"]["rows"]:
        n = stats[r["setting"]["task"]]
        assert 1 <= r["values"]["r_g"] <= n and 1 <= r["values"]["r_e"] <= n and len(r["texts"]) == 2, r["row"]


def test_liao_sweeps_repeat_the_main_tables():
    "The λ and τ sweeps share runs with Tables 2 and 3 (allpalln, τ = 1): those rows must be identical."
    t2, t3 = rows_by_label("liao", "table2_sts"), rows_by_label("liao", "table3_transfer")
    compared = 0
    for sweep, main in (("table6_lambda_sts", t2), ("table4_lambda_transfer", t3), ("table7_tau_sts", t2),
                        ("table5_tau_transfer", t3)):
        for r in raw("liao")["tables"][sweep]["rows"]:
            s = r["setting"]
            assert s["n_pos"] == s["n_neg"] == -1
            name = f"allpalln-lambda{s['lam']:g}-SCL"
            if s["temperature"] == 1.0 and name in main:
                assert _same(r, main[name]), (sweep, r["row"], name)
                compared += 1
    assert compared == 8  # λ 0.1, 0.3, 0.5 in both λ sweeps; τ 1.0 in both τ sweeps


# ---------------------------------------------------------------- spot checks, re-read from the texts

@pytest.mark.parametrize("paper, table, row, column, value", [
    ("pairsupcon", "table1_clustering", "PairSupCon large", "stackoverflow", 63.9),
    ("pairsupcon", "table1_clustering", "SimCSE large", "tweet", 57.9),
    ("pairsupcon", "table3_sts", "BERT base", "sts12", 30.9),
    ("pairsupcon", "table3_sts", "SBERT large", "sickr", 73.8),
    ("pairsupcon", "table6_fewshot", "BERT base", "mrpc_fewshot", 56.5),
    ("pairsupcon", "table7_transfer", "PairSupCon large", "trec", 92.4),
    ("pairsupcon", "table8_stsb_dev", "BertLarge w/ STS-B", "sickr", 80.2),
    ("pairsupcon", "table2_clustering_datasets", "SearchSnippets (SS)", "largest", 2660),
    ("liao", "table2_sts", "allpalln-lambda0.3-SCL", "avg", 70.44),
    ("liao", "table3_transfer", "Avg. GloVe embeddings", "mr", 51.14),
    ("liao", "table5_tau_transfer", "τ = 0.7", "mr", 58.0),
    ("liao", "table5_tau_transfer", "τ = 1.0", "mrpc", 73.1),
    ("liao", "table7_tau_sts", "τ = 0.9", "sts14", 69.2),
    ("sncse", "table2_sts", "SNCSE-RoBERTa large", "sickr", 77.43),
    ("sncse", "table2_sts", "ConSERT-BERT large", "sts15", 82.78),
    ("sncse", "table3_negation_role", "NL", "avg", 74.37),
    ("sncse", "table4_rank_errors", "SICK-R 2", "r_e", 4869),
    ("sncse", "figure4_similarity_peaks", "SNCSE without BML loss", "soft_negative_peak", 0.98),
    ("declutr", "tableS3_downstream", "USE", "trec", 95.0),
    ("declutr", "tableS3_downstream", "Sentence Transformers", "mrpc_f1", 84.06),
    ("declutr", "tableS3_downstream", "GloVe", "imagecaptionretrieval", 0.4),
    ("declutr", "tableS4_probing", "Transformer-small", "length", 89.16),
    ("declutr", "tableS1_pooling", "RoBERTa-base-CLS", "downstream", 68.04),
    ("declutr", "tableS6_without_snli", "USE", "delta_wo_snli", 1.03),
    ("declutr", "table1_senteval", "DeCLUTR-base (ours)", "avg", 75.98),
])
def test_spot_values(paper, table, row, column, value):
    assert published_value(paper, table, row, column) == value


def test_spot_std_and_missing():
    few = published_table("pairsupcon", "table6_fewshot")
    assert few.loc["SBERT large", "mr_fewshot_std"] == 0.9 and few.loc["BERT base", "mrpc_fewshot_std"] == 12.1
    assert published_value("pairsupcon", "table7_transfer", "SimCSE distil-base", "avg") is None
    assert published_value("pairsupcon", "figure3_components", "PairSupCon", "sts12") is None


# ---------------------------------------------------------------- loader behaviour

def test_list_tables_covers_every_table():
    df = list_tables()
    assert len(df) == sum(len(raw(p)["tables"]) for p in PAPERS)
    assert df.set_index(["paper", "table"]).loc[("declutr", "tableS3_downstream"), "numbers"] == 9 * 19


@pytest.mark.parametrize("call, expected", [
    (lambda: load_published("bert"), "valid: pairsupcon, liao, sncse, declutr"),
    (lambda: published_table("pairsupcon", "table9"), "valid: table1_clustering"),
    (lambda: published_value("liao", "table2_sts", "SBERT", "avg"), "valid: Avg. GloVe embeddings, SBERT baseline"),
    (lambda: published_value("liao", "table2_sts", "SBERT baseline", "stsb"), "valid: sts12, sts13"),
    (lambda: published_value("pairsupcon", "table4_ablation", "β = 4", "sts"), "ambiguous"),
])
def test_bad_names_give_one_line_errors(call, expected):
    with pytest.raises(SentclError) as e:
        call()
    assert expected in str(e.value) and len(str(e.value).splitlines()) == 1


def test_loader_returns_copies():
    doc = load_published("sncse")
    doc["tables"]["table2_sts"]["rows"][0]["values"]["avg"] = 0.0
    df = published_table("sncse", "table2_sts")
    df.iloc[0]["setting"]["x"] = 1
    assert published_value("sncse", "table2_sts", "ConSERT-BERT base", "avg") == 72.74
    assert raw("sncse") == load_published("sncse")
