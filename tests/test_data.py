"Loaders against a full data directory (../shared/data layout) and its README row counts; skipped when absent."
import os, re
from pathlib import Path

import pytest

from sentcl.data.corpora import LABELS, load_corpus, load_documents, load_nli, load_nli_triplets, load_sentences
from sentcl.data.tasks import load_clustering, load_sts, load_transfer

ROOT = Path(os.environ.get("SENTCL_TEST_DATA", Path(__file__).resolve().parents[2]/"shared"/"data"))
pytestmark = pytest.mark.skipif(not (ROOT/"README.md").is_file(), reason=f"no data directory with README at {ROOT}")


def readme_counts():
    "{relative path: rows} from the README's file tables (documents: whitespace tokens)."
    rows = re.findall(r"^\| ((?:sts|transfer|clustering|nli|wiki|documents)/[^ |]+) \| (\d+) \|", (ROOT/"README.md").read_text(), re.M)
    return {f: int(n) for f, n in rows}


def count(rel: str) -> int:
    "Rows loaded by sentcl for one README file."
    parts = rel.split("/")
    stem = parts[-1].split(".")[0]
    if parts[0] == "sts": return len(load_sts(parts[1], stem, data_dir=ROOT))
    if parts[0] == "transfer": return len(load_transfer(parts[1], None if stem == "all" else stem, data_dir=ROOT))
    if parts[0] == "clustering": return len(load_clustering(parts[1], data_dir=ROOT))
    if parts[0] == "nli": return len(load_nli(parts[1], stem, data_dir=ROOT))
    if parts[0] == "wiki": return len(load_sentences("wiki1m", data_dir=ROOT))
    name = parts[-1].removesuffix(".gz").removesuffix(".txt")
    (doc,) = load_documents(ROOT, names=[name])
    return len(doc.split())


def test_every_readme_file_loads_with_its_row_count():
    expected = readme_counts()
    assert len(expected) >= 170, f"README table parse found only {len(expected)} files"
    got = {rel: count(rel) for rel in expected}
    bad = {rel: (got[rel], n) for rel, n in expected.items() if got[rel] != n}
    assert not bad, f"row counts differ (got, README): {bad}"


def test_corpus_specs_on_shared_data():
    nli = load_corpus("snli:dev+test", "nli", data_dir=ROOT)
    assert len(nli) == 19666 and set(nli.label) == set(LABELS)
    assert len(load_nli_triplets("snli", "dev", data_dir=ROOT)) > 3000
    sts12 = load_sts("sts12", data_dir=ROOT)
    assert set(sts12.source) == {"MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"}
    assert len(load_documents(ROOT)) == 136
