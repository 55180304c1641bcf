"""The experiments layer: notebooks and catalog agree, parameters cells are literals and survive nbdev_clean,
the paper preset's dry run is the method dataclasses, a batch runs every notebook under cpu-smoke, a failing
notebook leaves the batch running and shows in the report, and a finished batch is not run twice."""
import ast
import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from sentcl.experiments.catalog.registry import EXPERIMENTS, get_experiment
from sentcl.cli import main
from sentcl.experiments.results import RESULTS_SCHEMA
from sentcl.experiments.results import check_results
from sentcl.experiments.plan import plan_runs
from sentcl.methods import get_method
from sentcl.experiments.parameters import parameter_names, parameters_cell
from sentcl.experiments.report import write_report
from sentcl.experiments.runner import notebooks_dir, run_batch

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT/"nbs"/"experiments"
PARAMETERS = set(parameter_names())


def parameters_cells(path: Path) -> list:
    return [c for c in nbformat.read(path, 4).cells if "parameters" in c.get("metadata", {}).get("tags", [])]


def test_catalog_and_notebooks_match():
    names = {p.stem for p in NBS.glob("*.ipynb")}
    assert names == set(EXPERIMENTS), f"notebooks without experiment: {names - set(EXPERIMENTS)}; " \
                                      f"experiments without notebook: {set(EXPERIMENTS) - names}"
    assert notebooks_dir() == NBS


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_parameters_cell_holds_literals(name):
    cells = parameters_cells(NBS/f"{name}.ipynb")
    assert len(cells) == 1, f"{name}: {len(cells)} cells tagged 'parameters', expected one"
    tree = ast.parse(cells[0].source)
    names = set()
    for node in tree.body:
        assert isinstance(node, ast.Assign) and len(node.targets) == 1, f"{name}: only `name = literal` lines"
        ast.literal_eval(node.value)  # raises on anything but a literal
        names.add(node.targets[0].id)
    assert names == PARAMETERS, f"{name}: parameters {sorted(names)}"
    out = [n for n in tree.body if n.targets[0].id == "out"][0]
    assert ast.literal_eval(out.value) == f"runs/experiments/{name}"
    assert cells[0].source == parameters_cell(name), f"{name}: run tools/parameters_cells.py (sentcl.experiments.parameters changed)"
    source = "".join(c.source for c in nbformat.read(NBS/f"{name}.ipynb", 4).cells)
    assert f'experiment_session("{name}", **notebook_parameters(globals()))' in source and "session.save()" in source
    assert "from sentcl.experiments.parameters import notebook_parameters" in source


def test_parameters_cells_tool_catches_a_stale_cell():
    sys.path.insert(0, str(ROOT/"tools"))
    from parameters_cells import updated
    nb = nbformat.read(NBS/"liao-table2.ipynb", 4)
    assert not updated(nb, "liao-table2")  # as committed
    cell = parameters_cells(NBS/"liao-table2.ipynb")[0]
    stale = [c for c in nb.cells if c.source == cell.source][0]
    stale.source = "\n".join(l for l in stale.source.splitlines() if not l.startswith("arms ="))  # a field added later
    assert updated(nb, "liao-table2") and stale.source == parameters_cell("liao-table2")


def test_parameters_tag_survives_nbdev_clean(tmp_path):
    nbs = tmp_path/"nbs"; shutil.copytree(ROOT/"nbs", nbs, ignore=shutil.ignore_patterns("*.yml", "*.css"))
    shutil.copy(ROOT/"settings.ini", tmp_path)
    target = nbs/"experiments"/"pairsupcon-table5.ipynb"
    nb = nbformat.read(target, 4)
    nb.cells[2].outputs = [nbformat.v4.new_output("stream", text="noise")]  # something for clean to remove
    nbformat.write(nb, target)
    subprocess.run([str(Path(sys.executable).parent/"nbdev_clean"), "--fname", str(target)], cwd=tmp_path, check=True)
    assert len(parameters_cells(target)) == 1


def test_dry_run_of_paper_preset_is_the_method_dataclasses():
    for name in EXPERIMENTS:
        exp = get_experiment(name)
        for run in plan_runs(exp, "paper", out=Path("/tmp/x")/name):
            if run.method is None: continue
            arm = exp.arm(run.arm)
            paper = get_method(run.method).Config()
            model = arm.overrides.get("model", paper.model)
            by_model = paper.model_defaults(model) if hasattr(paper, "model_defaults") else {}  # released, per encoder
            for field in dataclasses.fields(paper):
                if field.name in arm.overrides: continue
                expected = model if field.name == "model" else by_model.get(field.name, getattr(paper, field.name))
                got = getattr(run.config, field.name)
                assert got == expected, f"{name}/{run.key}: {field.name} = {got!r}, the dataclass says {expected!r}"
            assert run.options.data_dir is None and run.options.max_steps is None  # the hub, the paper's epochs


def test_paper_dry_run_from_the_cli(capsys):
    assert main(["experiments", "run", "pairsupcon-table5", "--preset", "paper", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "bert-base-uncased" in out and "1024" in out and "3 epochs" in out and "nothing was executed" in out
    # results/gpu timed PairSupCon's step at commit 25e76d9, on older step code: shown beside an estimate, never as measured
    assert "timed on older step code: 0.914 s/step on NVIDIA H200" in out and "measured: 0.914" not in out
    assert "estimate: 3.14 s/step on NVIDIA A100 40GB, FLOPs at 55.0% of its fp32 peak (pairsupcon-table4 pairsupcon at " \
           "batch 1024, fp32, older step code); lower bound 1.73 s/step at 100%" in out
    lines = out.splitlines()  # the totals: the estimate with its source, the bound, the older rows named
    assert any(l.startswith("estimate: about ") and "(commit 25e76d9, older step code 1)" in l for l in lines)
    assert any(l.startswith("lower bound: at least ") and "for the 4 training(s) not measured" in l for l in lines)
    assert "2 training(s) have their shape timed on older step code (results/gpu/gpu_check.json)" in out


def test_gpu_prices_the_plan_on_a_card(capsys):
    "--gpu: each training's gradient-caching mini-batch and GPU-hours on the card; a bad card is a one-line error."
    assert main(["experiments", "run", "pairsupcon-table5", "--preset", "paper", "--dry-run", "--gpu", "RTX 3090 24GB"]) == 0
    out = capsys.readouterr().out
    assert "mini-batch on RTX 3090" in out and "GPU-h on RTX 3090" in out and " 512 " in out  # 1,024 pairs in 2 chunks
    assert "tests/test_methods_gradcache.py::test_gradient_caching_matches_full_batch" in out
    for bad, why in (("RTX 3090", "give a card's name and its memory"), ("GTX 1080 8GB", "no peak FLOP/s known")):
        assert main(["experiments", "run", "pairsupcon-table5", "--preset", "paper", "--dry-run", "--gpu", bad]) == 2
        err = capsys.readouterr().err
        assert why in err and len(err.strip().splitlines()) == 1, err
    assert main(["experiments", "run", "pairsupcon-table5", "--preset", "paper", "--gpu", "RTX 3090 24GB"]) == 2
    assert "use it with --dry-run" in capsys.readouterr().err


def test_bad_batch_inputs_are_one_line_errors(capsys, tmp_path):
    assert main(["experiments", "run", "no-such-table"]) == 2
    assert "unknown experiment" in capsys.readouterr().err
    assert main(["experiments", "run", "pairsupcon-table5", "--preset", "cpu"]) == 2  # cpu needs a data folder
    assert "data_dir" in capsys.readouterr().err
    assert main(["experiments", "run", "pairsupcon-table5", "-p", "lr=1"]) == 2
    assert "not an experiment parameter" in capsys.readouterr().err
    assert main(["experiments", "report", str(tmp_path/"missing"), "--out", str(tmp_path/"r")]) == 2


@pytest.fixture(scope="module")
def smoke_batch(tmp_path_factory):
    "Every experiment under cpu-smoke, two at a time (the CI check that each notebook runs end to end)."
    out = tmp_path_factory.mktemp("batch")
    table = run_batch(preset="cpu-smoke", out=out, jobs=2, log=print)
    return out, table


def test_every_experiment_runs_under_cpu_smoke(smoke_batch):
    out, table = smoke_batch
    failed = table[table.status != "done"]
    assert failed.empty, "\n" + "\n".join(f"{r.experiment}: {r.error} (see {out/r.experiment/'log.txt'})"
                                          for r in failed.itertuples())
    for name in EXPERIMENTS:
        doc = check_results(json.loads((out/name/"results.json").read_text()))
        assert doc["complete"] and doc["kind"] == "pipeline check"
        assert set(doc) >= set(RESULTS_SCHEMA)
        for f in doc["figures"]: assert (out/name/f).exists(), f"{name}: figure {f} missing"
    report = write_report(out, out/"report").read_text()
    for name, exp in EXPERIMENTS.items():
        assert f'<a id="{name}"></a>' in report
    assert "pipeline check" in report and "reproduced (within" not in report and "direction reproduced" not in report


def test_a_finished_batch_is_kept(smoke_batch, capsys):
    out, _ = smoke_batch
    table = run_batch(["pairsupcon-table5"], "cpu-smoke", out, log=print)
    assert list(table.status) == ["kept"]


def _shift_scores(x, by: float):
    "Every float in an evaluation moved by `by` (a rerun that did not reproduce)."
    if isinstance(x, dict): return {k: _shift_scores(v, by) for k, v in x.items()}
    if isinstance(x, list): return [_shift_scores(v, by) for v in x]
    return x + by if isinstance(x, float) else x


def test_compare_tells_a_reproduced_batch_from_a_moved_one(smoke_batch, capsys, tmp_path):
    out, _ = smoke_batch
    assert main(["experiments", "compare", str(out), str(out)]) == 0
    printed = capsys.readouterr().out
    assert "identical seed by seed" in printed and " 0 of " not in printed
    doc = json.loads((out/"liao-table2"/"results.json").read_text())
    for run in doc["runs"]: run["eval"] = _shift_scores(run["eval"], 1.0)
    (tmp_path/"liao-table2").mkdir()
    (tmp_path/"liao-table2"/"results.json").write_text(json.dumps(doc))
    assert main(["experiments", "compare", str(out), str(tmp_path)]) == 1
    table = capsys.readouterr().out
    assert "liao-table2" in table and "False" in table
    assert main(["experiments", "compare", str(out), str(tmp_path/"missing")]) == 2


def test_a_failing_notebook_leaves_the_batch_running(tmp_path):
    nbs = tmp_path/"nbs"; nbs.mkdir()
    shutil.copy(NBS/"pairsupcon-table5.ipynb", nbs)
    broken = nbformat.read(NBS/"pairsupcon-table4.ipynb", 4)
    broken.cells.insert(3, nbformat.v4.new_code_cell("raise RuntimeError('deliberate failure')"))
    nbformat.write(broken, nbs/"pairsupcon-table4.ipynb")
    out = tmp_path/"batch"
    code = main(["experiments", "run", "pairsupcon-table4", "pairsupcon-table5", "--out", str(out), "--notebooks", str(nbs)])
    assert code == 1  # one failure
    state = json.loads((out/"batch.json").read_text())["experiments"]
    assert state["pairsupcon-table4"]["status"] == "failed" and "deliberate failure" in state["pairsupcon-table4"]["error"]
    assert state["pairsupcon-table5"]["status"] == "done"
    assert (out/"pairsupcon-table4"/"pairsupcon-table4.ipynb").exists()  # the executed notebook is kept
    report = write_report(out, tmp_path/"report").read_text()
    line = next(l for l in report.splitlines() if l.startswith("| [pairsupcon-table4]"))
    assert "failed" in line


def test_one_batch_per_folder(tmp_path):
    "A second `sentcl experiments run` on a folder a batch works in says who holds it and stops; the first goes on."
    import os, signal, time
    sentcl = [str(Path(sys.executable).parent/"sentcl"), "experiments", "run", "sncse-figure4", "--preset",
              "cpu-smoke", "--out", str(tmp_path/"batch")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    first = subprocess.Popen(sentcl, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    try:
        t0 = time.time()
        while not (tmp_path/"batch"/".batch.lock").is_file():
            assert time.time() - t0 < 120 and first.poll() is None, "the first batch took no lock"
            time.sleep(0.1)
        second = subprocess.run(sentcl, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert second.returncode == 2, second.stdout + second.stderr
        assert f"another `sentcl experiments run` works in this batch folder (process {first.pid} on " in second.stderr
        assert "add --wait to wait for it" in second.stderr and len(second.stderr.strip().splitlines()) == 1
        assert first.poll() is None  # the first batch goes on, undisturbed
    finally:
        os.killpg(first.pid, signal.SIGKILL); first.wait()


def test_p_values_are_typed_by_their_fields(capsys):
    "A bare arm is one name (never its letters); malformed JSON is a one-line error naming the key."
    assert main(["experiments", "run", "liao-table2", "--preset", "cpu-smoke", "--dry-run", "-p", "arms=ce",
                 "-p", "seeds=1"]) == 0
    rows = [l.split() for l in capsys.readouterr().out.splitlines() if l.startswith("liao-table2")]
    assert {(r[1], r[2]) for r in rows} == {("ce", "1")}, rows
    assert main(["experiments", "run", "liao-table2", "--dry-run", "-p", "seeds=[0,1"]) == 2
    err = capsys.readouterr().err
    assert "-p seeds: '[0,1' is not a list of integers (not valid JSON" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("record, said", [
    ({"liao-table2": ["done"]}, "batch.json: experiments.liao-table2: should be an object, got a list"),
    ({"../../elsewhere": {"status": "done"}}, "experiments: '../../elsewhere' is not an experiment's folder name"),
    ({"liao-table2": {"status": "pending", "launcher": "slurm", "job_id": "../../x"}}, "job_id: '../../x' is not a job id"),
])
def test_a_batch_record_is_checked_before_it_is_trusted(tmp_path, capsys, record, said):
    (tmp_path/"batch.json").write_text(json.dumps({"experiments": record}))
    assert main(["experiments", "status", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert said in err and str(tmp_path/"batch.json") in err and len(err.strip().splitlines()) == 1, err


def test_a_result_naming_a_file_outside_its_folder_is_left_out(tmp_path, capsys):
    "A figure path out of the batch folder is never followed (the report would copy that file)."
    batch = tmp_path/"shared"/"batch"; (batch/"liao-table2").mkdir(parents=True)
    (tmp_path/"secret.png").write_bytes(b"\x89PNG not yours")
    doc = json.loads((ROOT/"results"/"cpu"/"liao-table2"/"results.json").read_text())
    doc["figures"] = ["../../../secret.png"]
    (batch/"liao-table2"/"results.json").write_text(json.dumps(doc))
    main(["experiments", "report", str(batch), "--out", str(tmp_path/"report")])
    assert not list((tmp_path/"report").rglob("secret.png"))
    report = (tmp_path/"report"/"report.md").read_text()
    assert "figures[0]: '../../../secret.png' is not a path inside the batch folder" in report
