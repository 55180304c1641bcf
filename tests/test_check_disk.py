"tools/check_disk.py: `make test` says up front, in one line, when the disk has too little room for it."
import subprocess, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]/"tools"))
from check_disk import short_of

TOOL = Path(__file__).parents[1]/"tools"/"check_disk.py"


def test_a_full_disk_is_one_line_naming_the_place(tmp_path):
    said = short_of(1e9, [tmp_path])  # a billion GB: no disk has that
    assert said.startswith(f"make test: {tmp_path} has ") and "needs about 1e+09 GB" in said and "\n" not in said
    assert short_of(0, [tmp_path]) is None


def test_the_command_line():
    assert subprocess.run([sys.executable, TOOL, "0"]).returncode == 0
    full = subprocess.run([sys.executable, TOOL, "1e9"], capture_output=True, text=True)
    assert full.returncode == 1 and full.stderr.count("\n") == 1 and "free some space" in full.stderr
    bad = subprocess.run([sys.executable, TOOL, "lots"], capture_output=True, text=True)
    assert bad.returncode == 1 and "'lots' is not a number of GB" in bad.stderr
