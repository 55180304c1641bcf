"""Packaging and project-layout checks that notebooks cannot make."""
import configparser
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_is_generated_from_index():
    r = subprocess.run([sys.executable, "tools/make_readme.py", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_quarto_configs_are_one_file():
    assert (ROOT / "nbs" / "_quarto.yml").resolve() == (ROOT / "_quarto.yml").resolve()


def test_settings_keep_papermill_tags_and_console_script():
    cfg = configparser.ConfigParser(delimiters=["="])
    cfg.read(ROOT / "settings.ini")
    d = cfg["DEFAULT"]
    assert "tags" in d["allowed_cell_metadata_keys"].split()
    assert d["console_scripts"].startswith("sentcl=sentcl.cli:main")


def test_setup_py_does_not_use_pkg_resources():
    assert "pkg_resources" not in (ROOT / "setup.py").read_text()


def test_console_script_runs():
    r = subprocess.run([str(Path(sys.executable).parent / "sentcl"), "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "encode" in r.stdout


def test_encode_command_end_to_end(tmp_path):
    import numpy as np
    src = tmp_path / "s.txt"
    src.write_text("A man is playing a guitar.\nSomeone plays an instrument.\n")
    r = subprocess.run([str(Path(sys.executable).parent / "sentcl"), "encode", "--model", "default",
                        "--in", str(src), "--out", str(tmp_path / "e.npy")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    e = np.load(tmp_path / "e.npy")
    assert e.shape == (2, 384) and e.dtype == np.float32


def test_unknown_model_fails_in_one_line(tmp_path):
    src = tmp_path / "s.txt"
    src.write_text("x\n")
    r = subprocess.run([str(Path(sys.executable).parent / "sentcl"), "encode", "--model", "no-org/no-model",
                        "--in", str(src), "--out", str(tmp_path / "e.npy")], capture_output=True, text=True,
                       env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"}, timeout=60)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "default" in lines[0] and "HF_HUB_OFFLINE" in lines[0], r.stderr
