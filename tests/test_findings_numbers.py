"""The numbers the findings page and README print in prose are their records' (issue 46 item 5).

Each check reads a number where the page or README shows it and sets it against the committed record it comes from,
read here with json only (no sentcl): the made start against results/cpu-start/start_point.json and PairSupCon's
published Table 3, the confirmatory run's paragraph against results/confirm/PLAN.json and its registration record, the
old control's paragraph against results/cpu/sncse-old-control.json, the rerun's and the budget's against results/.
Those two records are themselves checked against git's history where this clone has it (a shallow clone or an
archive does not: the page and these checks need only the committed files).
A shown number agrees when it is the record's number rounded as printed (half a unit of its last digit). Each check
is also run on a text with one number changed, which it must reject.
"""
import hashlib
import importlib.util
import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("make_readme", ROOT/"tools"/"make_readme.py")
make_readme = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(make_readme)
import pytest

OLD_CONTROL = ROOT/"results"/"cpu"/"sncse-old-control.json"  # the old control's records, from the commit that last held them
REGISTRATION = ROOT/"results"/"confirm"/"REGISTRATION.json"  # the commit that registered the confirmatory plan


def _shown(notebook: Path) -> str:
    nb = json.loads(notebook.read_text())
    return "\n".join("".join(o.get("data", {}).get("text/markdown", "")) for c in nb["cells"] for o in c.get("outputs", []))


def _git(*args) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def _agrees(shown: str, x: float) -> bool:
    "`shown` (as printed: '34.7', '+0.76', '37,700', '0.1%') is `x` rounded to its last digit."
    s = shown.replace(",", "").replace("−", "-")
    if s.endswith("%"): s, x = s[:-1], 100 * x
    digits = len(s.split(".")[1]) if "." in s else 0
    return abs(float(s) - x) <= 0.5 * 10.0 ** -digits + 1e-9 * max(1.0, abs(x))


def _find(pattern: str, text: str, what: str) -> re.Match:
    m = re.search(pattern, text, re.S)
    assert m, f"{what}: not found as expected ({pattern})"
    return m


# ---- each check returns the disagreements it finds in `text` ----

def made_start_errors(text: str) -> list:
    start = json.loads((ROOT/"results"/"cpu-start"/"start_point.json").read_text())
    bert = _bert_base(json.loads((ROOT/"sentcl"/"published"/"pairsupcon.json").read_text()))
    m = _find(r"random weights, (\d+) minutes of MLM: (\d+) steps of (\d+) documents\), scored ([\d.]+) on STS, \w+ "
              r"random weights \(([\d.]+)\) and \w+ BERT-base's ([\d.]+),", text, "the made start")
    want = [start["train_seconds"]["mlm"] / 60, start["mlm"]["steps"], start["mlm"]["documents_per_step"],
            start["sts"]["mlm"], start["sts"]["random"], bert]
    return [(g, w) for g, w in zip(m.groups(), want) if not _agrees(g, w)]


def _bert_base(pub) -> float:
    "BERT-base's STS average in PairSupCon's Table 3 (the published file, read as data)."
    def walk(x):
        if isinstance(x, dict):
            if x.get("row") == "BERT base" and "sts12" in x.get("values", {}): yield x["values"]["avg"]
            for v in x.values(): yield from walk(v)
        elif isinstance(x, list):
            for v in x: yield from walk(v)
    return next(walk(pub))


def confirm_errors(text: str) -> list:
    plan_file = ROOT/"results"/"confirm"/"PLAN.json"
    plan = json.loads(plan_file.read_text())
    m = _find(r"(\d+) of the (\d+) runs of its plan \(registered at commit `(\w+)`, sha256 `(\w+)…`\).*?trains in (\w+), "
              r"as the pilot did, and prices the ([\d.]+) two-core hours it needs \(of the ([\d.]+) declared\)",
              text, "the confirmatory run's paragraph")
    planned = sum(1 if arm == "pretrained" else len(e["seeds"]) for e in plan["run"]["experiments"].values() for arm in e["arms"])
    recorded = sum(len(json.loads(p.read_text())["runs"]) for p in (ROOT/"results"/"confirm").glob("*/results.json"))
    errors = [(g, w) for g, w in zip(m.group(1, 2, 6, 7), (recorded, planned, plan["run"]["budget"]["planned_two_core_hours"],
                                                       plan["run"]["budget"]["two_core_hours"])) if not _agrees(g, w)]
    sha, commit = hashlib.sha256(plan_file.read_bytes()).hexdigest(), json.loads(REGISTRATION.read_text())["commit"]
    errors += [(g, w) for g, w in ((m.group(3), commit), (m.group(4), sha)) if not w.startswith(g)]
    return errors + ([(m.group(5), plan["run"]["precision"])] if m.group(5) != plan["run"]["precision"] else [])


def old_control_from_git(commit: str) -> dict:
    "What results/cpu/sncse-old-control.json holds, read from `commit`'s results/cpu (the last to hold the old control)."
    old = {n: json.loads(_git("show", f"{commit}:results/cpu/{n}/results.json")) for n in ("sncse-table2", "sncse-figure4")}
    c = next(c for c in old["sncse-table2"]["contrasts"] if (c["better"], c["worse"], c["column"]) == ("sncse", "sncse-nobml", "avg"))
    return {"commit": _git("rev-parse", commit),
            "sncse-table2": {k: c[k] for k in ("better", "worse", "column", "diffs", "paper_diff")},
            "sncse-figure4": [{"seed": r["seed"], "arm": r["arm"], "negation_role": (r["config"] or {}).get("negation_role"),
                               "sts": r["eval"]["avg"]["sts"]} for r in old["sncse-figure4"]["runs"] if r["arm"] != "pretrained"]}


def old_control_errors(text: str) -> list:
    old = json.loads(OLD_CONTROL.read_text())
    c = old["sncse-table2"]
    sts = {}
    for r in old["sncse-figure4"]: sts.setdefault(r["seed"], {})[r["arm"]] = r["sts"]
    soft = {r["arm"] for r in old["sncse-figure4"] if r["negation_role"] == "soft"}
    above = [v["sncse-nobml"] - v[a] for v in sts.values() for a in soft]
    agree = max(max(v[a] for a in soft) - min(v[a] for a in soft) for v in sts.values())
    m = _find(r"every\s+seed \(([-+\d.]+) to ([-+\d.]+), mean ([-+\d.]+); the paper reports ([-+\d.]+)\).*?agreed with one "
              r"another within\s+([\d.]+) STS on every seed, while the control sat ([\d.]+) to ([\d.]+)\s+above them",
              text, "the old control's paragraph")
    d = c["diffs"]
    want = [min(d), max(d), sum(d) / len(d), c["paper_diff"], agree, min(above), max(above)]
    return [(g, w) for g, w in zip(m.groups(), want) if not _agrees(g, w)]


def rerun_errors(text: str) -> list:
    docs = {p.parent.name: json.loads(p.read_text()) for p in (ROOT/"results"/"rerun").glob("*/results.json")}
    trainings = {r["train_folder"] for d in docs.values() for r in d["runs"] if r.get("train_folder")}
    seeds = sorted({r["seed"] for d in docs.values() for r in d["runs"] if r["seed"] is not None})
    m = _find(r"trained and scored again: (.*?)\s+\(`declutr-figure3` after.*?at seeds (\d+) to (\d+); (\d+)\s+trainings in all",
              text, "the rerun's paragraph")
    errors = [(g, w) for g, w in zip(m.group(2, 3, 4), (seeds[0], seeds[-1], len(trainings))) if not _agrees(g, w)]
    for group in m.group(1).split("; "):
        names, commit = re.findall(r"`([\w-]+)`", group), group.rsplit("from commit ", 1)[1]
        errors += [(f"{n} {commit}", docs[n]["git"][:7]) for n in names if docs[n]["git"][:7] != commit]
    assert sum(len(re.findall(r"`([\w-]+)`", g)) for g in m.group(1).split("; ")) == len(docs), m.group(1)
    return errors


def budget_errors(text: str) -> list:
    doc = json.loads((ROOT/"results"/"cpu"/"sncse-table2"/"results.json").read_text())
    tasks = next(r for r in doc["runs"] if r["arm"] == "pretrained")["eval"]["tasks"]
    m = _find(r"scored on the\s+(\d+) full STS test sets \(([\d,]+) sentences", text, "the budget's paragraph")
    return [(g, w) for g, w in zip(m.groups(), (len(tasks), 2 * sum(t["n"] for t in tasks.values()))) if not _agrees(g, w)]


def settings_errors(text: str) -> list:
    "The settings table at the top of the findings page against the runs' records."
    docs = {p.parent.name: json.loads(p.read_text()) for p in (ROOT/"results"/"cpu").glob("*/results.json")}
    first = lambda n: next(r for r in docs[n]["runs"] if r.get("train"))
    trained = [r for d in docs.values() for r in d["runs"] if r.get("train")]
    m = _find(r"\(([\d,]+) training examples for PairSupCon, ([\d,]+) for Liao;.*?\), ([\d,]+) Wikipedia sentences for SNCSE, "
              r"([\d,]+) WikiText-2.*?\| length \| (\d+) steps per run, batch (\d+) \(DeCLUTR: (\d+) documents\)", text,
              "the settings table")
    want = [first("pairsupcon-table4")["train"]["examples"], first("liao-table2")["train"]["examples"],
            first("sncse-table2")["train"]["examples"], first("declutr-figure3")["train"]["examples"],
            first("liao-table2")["train"]["step"], first("liao-table2")["describe"]["batch"],
            first("declutr-figure3")["describe"]["batch"]]
    errors = [(g, w) for g, w in zip(m.groups(), want) if not _agrees(g, w)]
    steps = {r["train"]["step"] for r in trained}
    return errors + ([("steps", steps)] if steps != {want[4]} else [])


def scale_errors(text: str) -> list:
    "README's seeds per arm and steps per run against results/cpu's runs."
    docs = [json.loads(p.read_text()) for p in (ROOT/"results"/"cpu").glob("*/results.json")]
    seeds = [len({r["seed"] for r in d["runs"] if r["seed"] is not None}) for d in docs]
    steps = {r["train"]["step"] for d in docs for r in d["runs"] if r.get("train")}
    m = _find(r"`default` model, (\d+) to (\d+) seeds per arm, (\d+) steps each", text, "README's study scale")
    return [(g, w) for g, w in zip(m.groups(), (min(seeds), max(seeds), *steps)) if not _agrees(g, w)] + (
        [("steps", steps)] if len(steps) != 1 else [])


CHECKS = {"README": [made_start_errors, confirm_errors, scale_errors],
          "findings": [settings_errors, confirm_errors, old_control_errors, rerun_errors, budget_errors]}


def _texts() -> dict:
    return {"README": (ROOT/"README.md").read_text(), "findings": _shown(ROOT/"nbs"/"findings.ipynb")}


def test_shown_numbers_are_their_records():
    texts = _texts()
    for where, checks in CHECKS.items():
        for check in checks:
            assert check(texts[where]) == [], f"{where}: {check.__name__} (shown, record): execute the page / make readme"


def test_readme_and_findings_print_the_same_computed_paragraphs():
    texts, confirm = _texts(), make_readme.confirm_summary()
    assert confirm in texts["README"] and confirm in texts["findings"], "README or findings: not today's confirm_status"
    assert make_readme.made_start() in texts["README"]


def _bump(text: str, pattern: str) -> str:
    "`text` with the first number matched by `pattern`'s group 1 changed in its last digit."
    m = re.search(pattern, text, re.S)
    g = m.group(1); last = str((int(g[-1]) + 3) % 10) if g[-1].isdigit() else ("a" if g[-1] != "a" else "b")
    return text[:m.start(1)] + g[:-1] + last + text[m.end(1):]


def test_a_changed_number_is_rejected():
    texts = _texts()
    for check, where, pattern in [(made_start_errors, "README", r"scored ([\d.]+) on STS"),
                                  (made_start_errors, "README", r"BERT-base's ([\d.]+),"),
                                  (confirm_errors, "README", r"of the (\d+) runs of its plan"),
                                  (confirm_errors, "findings", r"prices the ([\d.]+) two-core"),
                                  (old_control_errors, "findings", r"mean ([-+\d.]+); the paper reports"),
                                  (old_control_errors, "findings", r"control sat [\d.]+ to ([\d.]+)"),
                                  (rerun_errors, "findings", r"(\d+)\s+trainings in all"),
                                  (rerun_errors, "findings", r"`declutr-figure3` from commit (\w+)"),
                                  (budget_errors, "findings", r"\(([\d,]+) sentences"),
                                  (settings_errors, "findings", r"([\d,]+) Wikipedia sentences for SNCSE"),
                                  (settings_errors, "findings", r"\(DeCLUTR: (\d+) documents"),
                                  (scale_errors, "README", r"(\d+) steps each")]:
        assert check(_bump(texts[where], pattern)), (check.__name__, pattern)
    assert _agrees("34.7", 34.69) and not _agrees("34.8", 34.69) and _agrees("37,700", 37700) and _agrees("0.1%", 0.001)


def _history_has(*commits) -> bool:
    "Whether this clone's history holds every commit (not a shallow clone, nor an archive without .git)."
    if not (ROOT/".git").exists() or _git("rev-parse", "--is-shallow-repository") == "true": return False
    return all(subprocess.run(["git", "cat-file", "-e", f"{c}^{{commit}}"], cwd=ROOT, capture_output=True).returncode == 0
               for c in commits)


def test_the_old_controls_record_is_that_commits_results():
    rec = json.loads(OLD_CONTROL.read_text())
    if not _history_has(rec["commit"]): pytest.skip(f"this clone lacks commit {rec['commit'][:7]} (shallow or archived)")
    assert {"why": rec["why"], **old_control_from_git(rec["commit"])} == rec


def test_the_registration_record_is_the_plans_history():
    rec, plan = json.loads(REGISTRATION.read_text()), ROOT/"results"/"confirm"/"PLAN.json"
    if not _history_has(*rec["commits"]): pytest.skip("this clone lacks the plan's history (shallow or archived)")
    commits = [line.split() for line in _git("log", "--format=%H %cI", "--", str(plan)).splitlines()]
    assert [c for c, _ in commits] == rec["commits"] and commits[0][1] == rec["committed"], "PLAN.json was committed again"
    registered = subprocess.run(["git", "show", f"{rec['commit']}:results/confirm/PLAN.json"], cwd=ROOT,
                                capture_output=True, check=True).stdout
    assert hashlib.sha256(registered).hexdigest() == rec["sha256"] == hashlib.sha256(plan.read_bytes()).hexdigest()
