"""What sbatch reads from the files sentcl submits, checked against a copy of sbatch's own `#SBATCH` parser.

`sbatch_reads` below re-implements, step by step, how Slurm's sbatch takes options from a batch script
(`_opt_batch_script` and `get_argument` in src/sbatch/opt.c, read at SchedMD/slurm 284c3b95f0): options come from
lines that begin with `#SBATCH` (or `#SLURM`) up to the first line that is a command; on such a line whitespace
separates arguments, a single or double quote groups until the same quote, a backslash takes the next character
literally (inside quotes too), a `#` outside quotes starts a comment, an argument that collects no character ends the
line, and an unmatched quote or a leading `:` is fatal. The shell reads single quotes differently (no escapes inside),
which is how a value could close submitit's quoting and add options of its own.
"""
import os
import random
import shlex
import string
from pathlib import Path

import pytest

from sentcl.core import SentclError
from sentcl.launch.slurm import ClusterOptions, parse_mem, sbatch_arguments, sbatch_script

C_SPACE = b" \t\n\v\f\r"


class Fatal(Exception):
    "sbatch's fatal(): it refuses the script."


def get_argument(line: bytes, start: int):
    "(argument or None, index after it): one call of sbatch's get_argument from `start`."
    ptr = start
    while ptr < len(line) and line[ptr] in C_SPACE: ptr += 1
    for word in (b"packjob", b"hetjob"):  # a component separator is blanked out
        end = ptr + len(word)
        if line[ptr:end].lower() == word and (end == len(line) or line[end] in C_SPACE):
            line = line[:ptr] + b" " * len(word) + line[end:]
    if ptr < len(line) and line[ptr:ptr + 1] == b":": raise Fatal("Unexpected `:`")
    if ptr == len(line): return None, ptr, line
    argument, q_char, escape_flag, quoted = None, None, False, False
    while ptr < len(line) and (quoted or line[ptr] not in C_SPACE) and line[ptr:ptr + 1] != b"\n":
        ch = line[ptr:ptr + 1]
        if escape_flag:
            escape_flag = False
        elif ch == b"\\":
            ptr += 1
            if line[ptr:ptr + 1] == b" ":
                argument = (argument or b"") + b" "
                ptr += 1
                escape_flag = False
            else:
                escape_flag = True
            continue
        elif quoted:
            if ch == q_char:
                quoted = False
                ptr += 1
                continue
        elif ch in (b'"', b"'"):
            quoted, q_char = True, ch
            ptr += 1
            continue
        elif ch == b"#":
            break
        argument = (argument or b"") + ch
        ptr += 1
    if quoted: raise Fatal(f"Unmatched `{q_char.decode()}`")
    return argument, ptr, line


def sbatch_reads(script: str) -> list:
    "The argv sbatch builds from `script`'s directives (_opt_batch_script, one het job component)."
    argv = []
    for line in script.encode().split(b"\n"):
        if line.startswith(b"#SBATCH"): ptr = len(b"#SBATCH")
        elif line.startswith(b"#SLURM"): ptr = len(b"#SLURM")
        else:
            rest = line.lstrip(C_SPACE)
            if rest and not rest.startswith(b"#"): break  # the first command ends the options
            continue
        while True:
            option, ptr, line = get_argument(line, ptr)
            if option is None: break
            argv.append(option.decode())
    return argv


def test_the_copy_reads_as_sbatch_does():
    "Cases worked from opt.c: the copy differs from the shell where sbatch does."
    assert sbatch_reads("#SBATCH --a=1 --b='x y' # note\n#SBATCH --c=\"it's\"\necho hi\n#SBATCH --d") == [
        "--a=1", "--b=x y", "--c=it's"]
    assert sbatch_reads("#SBATCH --x='a\\' b'") == ["--x=a' b"]  # the shell: '--x=a\\' then an open quote
    assert shlex.split("--x='a\\' b") == ["--x=a\\", "b"]
    assert sbatch_reads("#SBATCH --x=a\\ b ''  --y") == ["--x=a b"]  # an empty argument ends the line
    assert sbatch_reads("  # comment\n\n#SBATCH --z") == ["--z"]
    for fatal in ("#SBATCH --x='a", "#SBATCH :x", "#SBATCH --x='a\\'"):
        with pytest.raises(Fatal): sbatch_reads(fatal)


def test_sentcl_reads_as_the_copy_reads():
    "sentcl's parser (what --dry-run prints and every sbatch file is checked with) agrees with the copy."
    rng = random.Random(0)
    alphabet = "ab=-'\"\\# \t:"
    for _ in range(3000):
        text = "#SBATCH " + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        try: expected = sbatch_reads(text)
        except Fatal: expected = Fatal
        try: got = sbatch_arguments(text)
        except SentclError: got = Fatal
        assert got == expected, text


def test_every_value_sentcl_accepts_reaches_sbatch_as_written(tmp_path):
    "Values with quotes, # and spaces, a folder with a space: each #SBATCH line is one option, its value intact."
    rng = random.Random(1)
    out = tmp_path/"my runs"/"batch #1"
    for _ in range(200):
        value = "".join(rng.choice(string.ascii_letters + " '\"#$;&|()`*?!=,:") for _ in range(rng.randint(1, 16)))
        o = ClusterOptions(partition="gpu", account="lab", additional={"comment": value})
        read = sbatch_reads(sbatch_script(o, out, "sentcl-b", 2))
        assert f"--comment={value}" in read, (value, read)
        assert f"--output={out.resolve()}/_submitit/%A_%a/%A_%a_0_log.out" in read
        assert all(a.startswith("--") for a in read) and len(read) == len(set(a.split("=")[0] for a in read))


ESCAPE = "x\\' --export=ALL,LD_PRELOAD=/tmp/evil.so '"  # closes the quote for sbatch, not for the shell


def _dry_run(capsys, out, *extra):
    from sentcl.cli import main
    capsys.readouterr()
    code = main(["experiments", "run", "liao-table2", "--preset", "cpu-smoke", "--launcher", "slurm", "--dry-run",
                 "--out", str(out), *map(str, extra)])
    said = capsys.readouterr()
    return code, said.out, said.err


@pytest.mark.parametrize("where", ["partition flag", "account variable", "qos file", "additional", "mem flag",
                                   "setup", "folder", "percent folder"])
def test_no_value_adds_an_option_of_its_own(tmp_path, capsys, monkeypatch, where):
    "A value sbatch would read otherwise (or a % Slurm would expand, or --mem=0) is refused in one line naming it."
    out, extra = tmp_path/"runs"/"batch", []
    out.parent.mkdir()
    toml = out.parent/"sentcl-slurm.toml"
    if where == "partition flag": extra = ["--partition", ESCAPE]
    if where == "account variable": monkeypatch.setenv("SENTCL_SLURM_ACCOUNT", "lab --export=ALL")
    if where == "qos file": toml.write_text(f"qos = {ESCAPE!r}\n")  # repr doubles the backslash, as TOML wants
    if where == "additional": toml.write_text('[additional]\ncomment = "' + ESCAPE.replace("\\", "\\\\") + '"\n')
    if where == "mem flag": extra = ["--mem", "512K"]
    if where == "setup": toml.write_text('setup = ["#SBATCH --export=ALL,LD_PRELOAD=/tmp/evil.so"]\n')
    if where == "folder": out = tmp_path/"runs"/ESCAPE.replace("/", "_")
    if where == "percent folder": out = tmp_path/"runs"/"50%j"
    if toml.exists(): toml.chmod(0o644)
    code, printed, err = _dry_run(capsys, out, *extra)
    named = {"partition flag": "--partition: ", "account variable": "SENTCL_SLURM_ACCOUNT: ", "qos file": ": qos: ",
             "additional": "additional.comment: ", "mem flag": "--mem: '512K' is less than the 1G",
             "setup": "setup[0]: '#SBATCH --export", "folder": "--out ", "percent folder": "--out "}[where]
    assert code == 2 and "LD_PRELOAD" not in printed and "#SBATCH" not in printed, printed
    assert named in err and len(err.strip().splitlines()) == 1, err


def test_the_dry_run_shows_what_sbatch_reads(tmp_path, capsys):
    "The dry run prints, after each sbatch file, the options the copy of sbatch's parser reads from it."
    out = tmp_path/"runs"/"batch"; out.parent.mkdir()
    (out.parent/"sentcl-slurm.toml").write_text('partition = "gpu,long"\n[additional]\ncomment = "it\'s #1 \\"a\\""\n')
    (out.parent/"sentcl-slurm.toml").chmod(0o644)
    code, printed, err = _dry_run(capsys, out, "--mem", "1500M")
    assert code == 0, err
    script = printed.split("job(s)\n", 1)[1].split("# what sbatch reads")[0]
    read = sbatch_reads(script)
    assert {"--partition=gpu,long", "--comment=it's #1 \"a\"", "--mem=1500MB", "--job-name=sentcl-batch"} <= set(read)
    shown = printed.split("parsed as sbatch parses them:\n", 1)[1].split("\n")
    assert [l[len("#   "):] for l in shown[:len(read)]] == read


def test_memory_below_the_minimum_never_becomes_the_whole_node():
    "512K became --mem=0MB (Slurm: all the node's memory); now anything under 1G is refused."
    for small in ("512K", "0.5M", "100M"):
        with pytest.raises(ValueError, match="less than the 1G"): parse_mem(small)
    assert parse_mem("1G") == 1 and parse_mem("1536M") == 1.5


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners")
def test_a_cluster_file_in_a_folder_anyone_can_change_is_not_obeyed(tmp_path, capsys):
    "Your own cluster file, but in a world-writable folder without the sticky bit: anyone could swap it."
    shared = tmp_path/"shared"; shared.mkdir()
    (shared/"sentcl-slurm.toml").write_text('partition = "gpu"\n'); (shared/"sentcl-slurm.toml").chmod(0o644)
    shared.chmod(0o777)
    code, printed, err = _dry_run(capsys, shared/"batch")
    assert code == 2 and "in a folder everyone can write to (and not sticky)" in err and len(err.splitlines()) == 1
    shared.chmod(0o1777)  # sticky, as /tmp: only the owner may rename or remove the file
    code, printed, err = _dry_run(capsys, shared/"batch")
    assert code == 0 and "#SBATCH --partition=gpu" in printed, err
