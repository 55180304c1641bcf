"""tools/gpu_check.py without a GPU: what it runs and in which order, how it times a window of steps, what its rows
give the cost plan, its preflight, and the command `--stage` prints, run on a CPU (`--cpu-smoke`) into a temporary $OUT."""
import importlib.util
import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("gpu_check", ROOT/"tools"/"gpu_check.py")
gpu_check = importlib.util.module_from_spec(spec); spec.loader.exec_module(gpu_check)


def test_the_plan_puts_the_slow_compilations_last():
    order = gpu_check.plan(["bf16", "fp32"], spacy=False, compile_ok=True)
    variants = [v for *_, v in order]
    assert variants.index("compiled") > max(i for i, v in enumerate(variants) if v != "compiled")
    assert {(e, p) for e, _, p, v in order if v == "default"} == {(e, "fp32") for e, _ in
                                                                 (gpu_check.SIMCSE, gpu_check.PAIRSUPCON,
                                                                  gpu_check.LIAO, gpu_check.DECLUTR)}
    assert "compiled" not in {v for *_, v in gpu_check.plan(["fp32"], spacy=True, compile_ok=False)}  # a CPU
    assert gpu_check.SNCSE[0] in {e for e, a, *_ in gpu_check.plan(["bf16"], True, False) if a == "sncse"}
    # the fixed shapes (SimCSE's and SNCSE's 32 tokens) run in the first precision, their CUDA graphs before the compiled
    full = gpu_check.plan(["bf16", "fp32"], spacy=True, compile_ok=True)
    assert {(a, p) for e, a, p, v in full if v in ("fixed", "graphs")} == {("simcse", "bf16"), ("sncse", "bf16")}
    kinds = [v for *_, v in full]
    assert kinds.index("fixed") < kinds.index("default") and max(i for i, v in enumerate(kinds) if v == "graphs") < kinds.index("compiled")
    assert "graphs" not in {v for *_, v in gpu_check.plan(["fp32"], spacy=True, compile_ok=False)}


def test_variants_set_the_forward_layout_only_where_a_method_has_one():
    assert gpu_check.variant_settings("simcse-unsup", "eager") == ({"one_forward": False}, {})
    assert gpu_check.variant_settings("pairsupcon", "one forward") == ({"one_forward": True}, {})
    assert gpu_check.variant_settings("supcon", "one forward") == (None, {})  # no such choice: not run twice
    assert gpu_check.variant_settings("declutr", "compiled") == ({}, {"compile": True})
    assert gpu_check.variant_settings("simcse-unsup", "fixed") == ({}, {"pad_to_max_length": True})
    assert gpu_check.variant_settings("sncse", "graphs") == ({}, {"pad_to_max_length": True, "compile": "reduce-overhead"})


def test_a_window_is_synchronised_only_at_its_ends(monkeypatch):
    from sentcl.train.trainer import Trainer
    monkeypatch.setattr(Trainer, "train_step", lambda self, batch: None)
    syncs = []
    monkeypatch.setattr("torch.cuda.synchronize", lambda: syncs.append(1))
    with gpu_check.step_window(warmup=2, steps=3, cuda=True) as w:
        for _ in range(6): Trainer.train_step(object(), {})
    assert len(syncs) == 2 and w["t1"] >= w["t0"] is not None  # after step 2 and after step 5, no others
    assert len(w["waits"]) == 3  # the gaps before steps 3 to 5, the timed ones
    assert w["graphs"] == 0      # nothing compiled inside the window


def test_a_row_gives_the_cost_plan_its_shape():
    from sentcl.experiments.costs import step_shape
    from sentcl.experiments.listing import gpu_check_run
    old = json.loads((ROOT/"results"/"gpu"/"gpu_check.json").read_text())["rows"][0]  # PairSupCon fp32, before issue 35
    row = gpu_check.with_estimates({**old, "variant": "one forward", "config": {"one_forward": True},
                                    "options": {"compile": False, "loader_workers": 4}}, "NVIDIA H100 80GB HBM3")
    assert 0 < row["share_of_peak"] < 1 and row["estimated_memory_gb"] > 16
    assert step_shape(gpu_check_run(row)) != step_shape(gpu_check_run(old))  # one forward is another shape
    compiled = gpu_check_run({**row, "options": {"compile": True}})
    assert compiled.options.compile and step_shape(compiled)[9] is True
    graphs = gpu_check_run({**row, "options": {"compile": "reduce-overhead", "pad_to_max_length": True}})
    assert graphs.options.pad_to_max_length and step_shape(graphs)[9] == "reduce-overhead" and step_shape(graphs)[-1]
    assert "estimate_error" in gpu_check.with_estimates({**row, "experiment": "no-such-table"}, "NVIDIA H100")


def test_bad_arguments_are_one_line_errors(tmp_path):
    with pytest.raises(SystemExit, match="has no nli/ folder"): gpu_check.parse(["--data-dir", str(tmp_path), "--out", "x"])
    for sub in ("nli", "wiki", "documents"): (tmp_path/sub).mkdir()
    with pytest.raises(SystemExit, match="give --out"): gpu_check.parse(["--data-dir", str(tmp_path)])
    args = gpu_check.parse(["--data-dir", str(tmp_path), "--out", "x", "--cpu-smoke"])
    assert (args.layers, args.batch_cap, args.precisions) == (1, 4, "fp32")
    with pytest.raises(SystemExit, match="not a staged folder"): gpu_check.parse(["--stage-dir", str(tmp_path), "--out", "x"])
    with pytest.raises(SystemExit, match="give --data-dir"): gpu_check.parse(["--out", "x"])


def test_the_transformers_range_is_read_from_settings_and_refused_in_one_line(monkeypatch, tmp_path):
    ini = tmp_path/"settings.ini"
    ini.write_text("[DEFAULT]\nrequirements = torch>=2.1 transformers>=5.0,<6 sentence-transformers>=3.0 pandas>=2.0\n")
    pairs = gpu_check.declared_range("transformers", ini)
    assert pairs == [(">=", "5.0"), ("<", "6")]                    # not sentence-transformers' range
    assert gpu_check.in_range("5.17.0", pairs) and not gpu_check.in_range("4.57.1", pairs)
    assert not gpu_check.in_range("6.0.0rc1", pairs)
    monkeypatch.setattr(gpu_check, "declared_range", lambda package: [(">=", "999")])
    facts, refusal = gpu_check.preflight(cuda_needed=False, want_compile=False)
    assert refusal.startswith("transformers ") and "outside the tested range >=999" in refusal and "\n" not in refusal
    assert facts["torch"] and facts["missing"] == [] and facts["compile"] is False
    facts, refusal = gpu_check.preflight(cuda_needed=True, want_compile=False)
    if not facts["cuda"]: assert "no CUDA device" in refusal  # a CUDA machine passes this one


def test_a_stage_outside_the_checkout_is_refused_and_one_inside_named_from_the_checkout(tmp_path):
    with pytest.raises(SystemExit, match="outside the checkout"): gpu_check.device_command(tmp_path/"stage")
    command, carry = gpu_check.device_command(ROOT/"runs"/"gpu-stage")      # an absolute folder inside it
    assert carry == "runs/gpu-stage" and "--stage-dir runs/gpu-stage --out \"$OUT\"" in command
    assert command.split()[0].startswith("SENTCL_COMMIT=") and " python3 tools/gpu_check.py" in command


def test_a_training_past_its_time_stops():
    import time
    with pytest.raises(TimeoutError, match="past its 0.2 s"):
        with gpu_check.time_limit(0.2, "x"): time.sleep(3)
    with gpu_check.time_limit(None, "x"): pass
    assert gpu_check.compiled_graphs() >= 0


def test_the_staged_command_runs_on_a_cpu_and_returns_results_only(tmp_path):
    "Stage from the bundled samples, run the printed command with --cpu-smoke into a temporary $OUT: what comes back."
    import re, shutil, subprocess, sys, uuid
    stage = ROOT/"runs"/f"test-stage-{uuid.uuid4().hex[:8]}"                # inside the checkout, as the tool asks
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OUT": str(tmp_path/"out")}
    try:
        printed = subprocess.run([sys.executable, "tools/gpu_check.py", "--stage", str(stage),
                                  "--data-dir", str(ROOT/"sentcl"/"samples")], cwd=ROOT, env=env, capture_output=True,
                                 text=True, check=True).stdout
        command = re.search(r"^  (SENTCL_COMMIT=\S+ .*)$", printed, re.M).group(1)
        assert command.endswith(f'--stage-dir {stage.relative_to(ROOT).as_posix()} --out "$OUT"')
        sha = command.split()[0].split("=", 1)[1]
        run = subprocess.run(["bash", "-c", command.replace("python3", sys.executable, 1)
                              + " --cpu-smoke --only sncse-table2 --negations staged"],
                             cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        assert run.returncode == 0, (run.stdout[-3000:], run.stderr[-1000:])
    finally: shutil.rmtree(stage, ignore_errors=True)
    out = tmp_path/"out"
    result, pre = json.loads((out/"gpu_check.json").read_text()), json.loads((out/"preflight.json").read_text())
    assert pre["refused"] is None and pre["commit"] == sha == result["commit"] and result["negations"] == "staged"
    from sentcl.experiments.costs import STEP_CODE
    assert result["step_code"] == STEP_CODE  # the cost plan uses its rows as measured only for today's step code
    rows = result["rows"]
    assert {(r["arm"], r["variant"]) for r in rows} == {("simcse", "eager"), ("simcse", "one forward"), ("simcse", "fixed"),
                                                        ("sncse", "eager"), ("sncse", "one forward"), ("sncse", "fixed")}
    fixed = [r for r in rows if r["variant"] == "fixed"]
    assert all(r["options"]["pad_to_max_length"] for r in fixed) and "pad_to_max_length" not in rows[0]["options"]
    assert all(r["seconds_per_step"] > 0 and r["graphs_compiled_in_window"] == 0 and len(r["losses"]) == r["steps"]
               for r in rows)
    assert [r["steps"] for r in rows] == [4, 3, 3, 3, 3, 3]  # warm-up 1 + timed 2, and the first training's profiled step
    files = [p for p in out.rglob("*") if p.is_file()]
    assert not [p for p in files if p.suffix in (".safetensors", ".bin", ".pt", ".pth")]   # no model comes back
    assert sum(p.stat().st_size for p in files) < 2**20                                     # results only: under 1 MB
    assert {"gpu_check.md", "gpu_check.log", "profile.txt"} <= {p.name for p in files}
    assert len(list((out/"logs").glob("*/metrics.jsonl"))) == 6


def test_bench_step_on_a_gpu_prints_ms_share_of_peak_and_batch_wait():
    "The GPU table of `make bench-step`: a step's FLOPs over its seconds, over the card's peak (a known card's)."
    spec = importlib.util.spec_from_file_location("bench_step", ROOT/"benchmarks"/"bench_step.py")
    bench = importlib.util.module_from_spec(spec); spec.loader.exec_module(bench)
    from sentcl.experiments.costs import gpu_peaks
    row = {"method": "SimCSE", "ms per step": 20.0, "flops": 2.1e12, "batch wait ms": 0.4}
    text = bench.device_table([row], "NVIDIA H100 80GB HBM3", "bf16")
    share = 2.1e12 / 0.020 / gpu_peaks("NVIDIA H100 80GB HBM3")[1]["bf16"]
    assert f"| SimCSE | 20.0 | 2.100 | {share:.1%} | 0.40 |" in text
    assert "| SimCSE | 20.0 | 2.100 | - | 0.40 |" in bench.device_table([row], "cpu", "fp32")  # no listed peak
