"""What sentcl writes travels: no committed file names a path of the machine that made it, a batch records its
folders relative to itself and its data folder by a label, damaged result files are named and redone, and a small
preset's own stand-ins stay visible beside a data folder the user adds."""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from sentcl.cli import main

ROOT = Path(__file__).resolve().parents[1]
# an absolute path of a home, work or temporary folder (not a URL's path: no word character, '.' or '/' before it)
MACHINE_PATH = re.compile(r"(?<![\w.~/-])/(?:home|root|work|tmp|var/tmp|var/folders|private/var|Users|scratch)/[\w.-]")


def machine_paths_in(text: str) -> list[str]:
    return [text[max(0, m.start() - 20):m.end() + 30].replace("\n", " ") for m in MACHINE_PATH.finditer(text)]


def test_the_pattern_tells_a_machine_path_from_what_is_not():
    assert machine_paths_in('out = "/work/main/results/cpu/liao-table2"') and machine_paths_in("at /tmp/rerun")
    assert machine_paths_in('"model": "/home/ann/runs/x"') and machine_paths_in("/Users/ann/data")
    assert not machine_paths_in("see https://example.org/home/x and docs/work/ and ~/tmp/x and <tmp>/x")
    assert not machine_paths_in('data_dir "$SENTCL_DATA", folder "liao-table2/runs/ce/seed0", "/nonexistent"')


def test_no_committed_file_holds_a_machine_path():
    tracked = subprocess.run(["git", "ls-files", "results", "reports", "sentcl/published", "nbs"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    assert len(tracked) > 50, "git ls-files found too little: is this a checkout?"
    found = {}
    for name in tracked:
        p = ROOT/name
        if p.suffix in (".png", ".svg", ".gz") or not p.is_file(): continue
        hits = machine_paths_in(p.read_text(encoding="utf-8", errors="replace"))
        if hits: found[name] = hits[:3]
    assert not found, "machine paths in committed files (record them relative or by label): " + json.dumps(found, indent=1)


@pytest.fixture(scope="module")
def small_batch(tmp_path_factory):
    "sncse-figure4 under cpu-smoke, once: the batch the damage tests spoil piece by piece."
    out = tmp_path_factory.mktemp("portable")/"batch"
    assert main(["experiments", "run", "sncse-figure4", "--preset", "cpu-smoke", "--out", str(out)]) == 0
    return out


def test_a_batch_records_relative_folders_and_labels(small_batch):
    doc = json.loads((small_batch/"sncse-figure4"/"results.json").read_text())
    assert doc["parameters"]["out"] == "sncse-figure4"
    trained = [r for r in doc["runs"] if r["method"]]
    assert trained and all(r["train_folder"].startswith("_train/") and r["folder"].startswith("sncse-figure4/runs/")
                           for r in trained)
    assert {r["describe"]["data_dir"] for r in doc["runs"]} == {"@samples"}
    assert doc["precision"] == {"training": "fp32", "evaluation": "fp32"} and "cpu_avx512_bf16" in doc["hardware"]
    for f in ("sncse-figure4/results.json", "sncse-figure4/sncse-figure4.ipynb", "sncse-figure4/log.txt"):
        assert not machine_paths_in((small_batch/f).read_text()), f


def _spoil(path: Path, text: str = '{"half": '):
    path.write_text(text)


def test_damaged_files_are_named_and_redone(small_batch, capsys):
    folder = small_batch/"sncse-figure4"
    doc = json.loads((folder/"results.json").read_text())
    run = next(r for r in doc["runs"] if r["method"])
    train = small_batch/run["train_folder"]
    _spoil(small_batch/"batch.json", "")
    _spoil(folder/"results.json")
    _spoil(small_batch/run["folder"]/"eval.json", "[1, 2")
    _spoil(train/"summary.json", "\x00\x00")
    capsys.readouterr()
    assert main(["experiments", "run", "sncse-figure4", "--preset", "cpu-smoke", "--out", str(small_batch)]) == 0
    said = capsys.readouterr().out
    assert "batch.json is damaged (empty)" in said and "results.json is damaged (not valid JSON" in said
    for p in (small_batch/"batch.json", folder/"results.json"): assert p.with_name(p.name + ".damaged").is_file()
    log = (folder/"log.txt").read_text()  # the notebook said what it redid, in its own log
    assert "eval.json is damaged" in log and "summary.json is damaged" in log
    new = json.loads((folder/"results.json").read_text())
    assert new["complete"] and json.loads((small_batch/"batch.json").read_text())["experiments"]["sncse-figure4"]["status"] == "done"
    assert json.loads((train/"summary.json").read_text())["finished"]


def test_a_data_folder_adds_to_the_smoke_presets_stand_ins(tmp_path):
    "cpu-smoke's 'topics' transfer sample lives in the package: a data folder without it must not hide it."
    data = tmp_path/"data"
    shutil.copytree(ROOT/"sentcl"/"samples"/"sts", data/"sts")  # a user's folder holding STS only
    out = tmp_path/"batch"
    assert main(["experiments", "run", "pairsupcon-table7", "--preset", "cpu-smoke", "--data-dir", str(data),
                 "--out", str(out)]) == 0
    doc = json.loads((out/"pairsupcon-table7"/"results.json").read_text())
    assert doc["complete"] and doc["parameters"]["data_dir"].startswith("$SENTCL_DATA")
    assert all(r["describe"]["data_dir"] == "$SENTCL_DATA:@samples" for r in doc["runs"] if r["method"])


def test_a_data_folder_with_part_of_a_corpus_does_not_hide_the_samples_other_part(tmp_path):
    "A folder holding SNLI's dev and test (no train) before @samples: train comes from the bundled sample."
    from sentcl.data.corpora import load_nli, load_nli_triplets
    snli = tmp_path/"data"/"nli"/"snli"; snli.mkdir(parents=True)
    sample = ROOT/"sentcl"/"samples"/"nli"/"snli"/"train.tsv"
    for split in ("dev", "test"): shutil.copy(sample, snli/f"{split}.tsv")
    spec = f"{tmp_path/'data'}{os.pathsep}@samples"  # what --data-dir DATA gives under cpu-smoke
    assert len(load_nli("snli", "train", spec)) == len(load_nli("snli", "train", "@samples"))
    assert load_nli("snli", "train", spec).attrs["source"] == str(sample)
    assert load_nli("snli", "dev", spec).attrs["source"] == str(snli/"dev.tsv")
    assert len(load_nli_triplets("snli", "train", spec)) > 0


def test_an_unknown_evaluation_task_is_named_with_the_valid_ones(capsys):
    assert main(["eval", "--model", "tiny", "--tasks", "stsb,bogus"]) == 2
    err = capsys.readouterr().err
    assert "unknown task(s) bogus; valid: the groups all, sts" in err and "stsb" in err and "mr" in err, err
    assert len(err.strip().splitlines()) == 1, err


def _files(root: Path) -> dict:
    "Every path under `root` with its bytes and modification time (folders: None)."
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns) if p.is_file() else None
            for p in sorted(root.rglob("*"))}


def test_status_report_and_compare_change_no_file(small_batch, tmp_path, capsys):
    "Reading is not writing: damaged files stay where they are, said, for the command that redoes them."
    base, other = tmp_path/"base", tmp_path/"other"
    shutil.copytree(small_batch, base); shutil.copytree(small_batch, other)
    (other/"liao-table2").mkdir(); _spoil(other/"liao-table2"/"results.json")
    _spoil(other/"batch.json", "[1, 2")
    before = _files(base), _files(other)
    assert main(["experiments", "status", str(other)]) == 0
    assert main(["experiments", "report", str(base), str(other), "--out", str(tmp_path/"report")]) == 0
    main(["experiments", "compare", str(base), str(other)])
    assert (_files(base), _files(other)) == before
    assert "unreadable, left out: " in capsys.readouterr().out


def test_a_transient_read_error_is_retried_never_taken_for_damage(tmp_path, monkeypatch):
    import errno
    from sentcl.core import read_json
    p = tmp_path/"results.json"; p.write_text('{"complete": true}')
    real_bytes, real_text, failed = Path.read_bytes, Path.read_text, []
    def once(real):
        def read(self, *a, **kw):
            if self == p and not failed: failed.append(1); raise OSError(errno.EIO, "Input/output error")
            return real(self, *a, **kw)
        return read
    monkeypatch.setattr(Path, "read_bytes", once(real_bytes)); monkeypatch.setattr(Path, "read_text", once(real_text))
    assert read_json(p, set_aside=True) == {"complete": True}
    assert [x.name for x in tmp_path.iterdir()] == ["results.json"]


def test_a_damaged_file_set_aside_never_overwrites_an_earlier_one(tmp_path):
    from sentcl.core import read_json
    p = tmp_path/"eval.json"
    for text in ("{first", "{second"):
        p.write_text(text); assert read_json(p, set_aside=True) is None
    assert sorted(x.read_text() for x in tmp_path.glob("eval.json.damaged*")) == ["{first", "{second"]
