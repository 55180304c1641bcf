"""The committed study records agree with the report.

1. Every committed results.json holds measurements, not verdict words, and its derived rows are what today's code
   derives from its runs (`tools/refresh_results.py --check`).
2. An independent recomputation, importing nothing of sentcl: from results/cpu/PLAN.json and the committed per-seed
   differences, each family member's simultaneous interval and verdict by the rule the plan states, set against
   the lines README.md prints.
"""
import importlib.util
import json
import math
import re
from pathlib import Path

from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("refresh_results", ROOT/"tools"/"refresh_results.py")
refresh_results = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(refresh_results)


def test_records_hold_measurements_only():
    files = refresh_results.committed_results()
    assert len(files) >= 13, files
    for p in files:
        doc = json.loads(p.read_text())
        worded = [c for c in doc["contrasts"] if "status" in c or "verdict" in c]
        assert not worded, f"{p}: contrast rows carry verdict words; run tools/refresh_results.py"


def test_records_are_what_the_code_derives():
    stale = [p for p in refresh_results.committed_results() if json.loads(p.read_text()) != refresh_results.refreshed(p)]
    assert not stale, f"derived rows differ from today's code in {stale}: run tools/refresh_results.py"


# ---- the independent recomputation: the plan's rule written again from its words, no sentcl ----

def _verdict(lo, hi, ref, of):
    "The rule as the plan states it: zero and the reference, each inside the interval or not."
    s = -1.0 if ref is not None and ref < 0 else 1.0
    lo, hi = sorted((lo * s, hi * s))
    if hi < 0: return "contradicted"
    if not ref: return "supported" if lo > 0 else "inconclusive"
    r = abs(ref)
    if lo > 0: return "supported, " + ("smaller than" if hi < r else "larger than" if lo > r else "as large as") + f" {of}"
    return f"smaller than {of}" if hi < r else "inconclusive"


def _family(results: Path):
    "Per plan member: (experiment, column, diffs, verdict, mean, lo, hi), by the plan's stated rule."
    plan = json.loads((results/"PLAN.json").read_text())
    rows, members = [], []
    for m in plan["family"]:
        doc = json.loads((results/m["experiment"]/"results.json").read_text())
        c = next(c for c in doc["contrasts"] if (c["better"], c["worse"], c["column"]) == (m["better"], m["worse"], m["column"]))
        if len(c["diffs"]) >= 2: members.append((m, c))
    k = len(members)
    for m, c in members:
        d = c["diffs"]; n = len(d); mean = sum(d) / n
        sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
        step = plan.get("resolution", {}).get(m["column"], 0.0)
        sd = max(sd, step / math.sqrt(6))  # rounding of two values to `step`: each uniform on ±step/2
        half = stats.t.ppf(1 - plan["alpha"] / (2 * k), n - 1) * sd / math.sqrt(n)
        ref, of = (c["paper_diff"], "the paper's") if c["paper_diff"] is not None else (m.get("sesoi"), "the smallest effect of interest")
        rows.append((m["experiment"], m["column"], m["better"], m["worse"], _verdict(mean - half, mean + half, ref, of),
                     mean, mean - half, mean + half))
    return rows


def _close(shown: str, x: float) -> bool:
    "True when `shown` (a rounded number as printed) is `x` rounded: within half a unit of its last digit."
    digits = len(shown.split(".")[1]) if "." in shown else 0
    lead = len(shown.lstrip("+-").split(".")[0].lstrip("0")) if "." in shown else len(shown.lstrip("+-"))
    unit = 10.0 ** -digits if "." in shown else 10.0 ** max(0, lead - 2)  # '120' to two digits is a unit of 10
    return abs(float(shown) - x) <= unit / 2 + 1e-12 * max(1.0, abs(x))


def test_readme_verdicts_recomputed_without_sentcl():
    readme = (ROOT/"README.md").read_text()
    rows = _family(ROOT/"results"/"cpu")
    assert len(rows) == 17
    for exp, col, better, worse, verdict, mean, lo, hi in rows:
        line = next((l for l in readme.splitlines() if l.startswith(f"- `{exp}`,") and f"(`{col}`): *" in l
                     and _claim_of(exp, better, worse, col) in l), None)
        assert line, f"README prints no verdict line for {exp} {better} − {worse} on {col}"
        m = re.search(r": \*(.+?)\* at the CPU study's scale, mean (\S+), simultaneous [\d.]+% interval (\S+) to (\S+) \(", line)
        assert m, line
        assert m.group(1) == verdict, (line, verdict)
        assert _close(m.group(2), mean) and _close(m.group(3), lo) and _close(m.group(4), hi), (line, mean, lo, hi)


def _claim_of(exp, better, worse, column):
    "The claim's words as the results hold them (to pick the README line of one claim column)."
    doc = json.loads((ROOT/"results"/"cpu"/exp/"results.json").read_text())
    return next(c["claim"] for c in doc["contrasts"] if (c["better"], c["worse"], c["column"]) == (better, worse, column))


def test_the_recomputation_can_fail():
    "A verdict flipped in the text is caught: the check reads the words, not just their presence."
    rows = _family(ROOT/"results"/"cpu")
    flipped = [r for r in rows if r[4] != "inconclusive"][0]
    assert _verdict(flipped[6], flipped[7], None, "x") != flipped[4] or flipped[4] in ("supported", "contradicted")
    assert not _close("+2.7", 2.8) and _close("+2.7", 2.74) and _close("-0.0012", -0.00124) and _close("120", 123.4)


def test_the_registered_plan():
    "results/confirm/PLAN.json: at most six columns, every paper, new seeds, and what its sizing gives from the pilot."
    plan = json.loads((ROOT/"results"/"confirm"/"PLAN.json").read_text())
    papers = {m["experiment"].split("-")[0] for m in plan["family"]}
    assert len(plan["family"]) <= 6 and papers == {"pairsupcon", "liao", "sncse", "declutr"}, plan["family"]
    pilot = {r["seed"] for p in (ROOT/"results"/"cpu").glob("*/results.json") for r in json.loads(p.read_text())["runs"]}
    new = {s for e in plan["run"]["experiments"].values() for s in e["seeds"]}
    assert new and not new & pilot, (new, pilot)
    assert plan["run"]["budget"]["planned_two_core_hours"] <= plan["run"]["budget"]["two_core_hours"]
    spec = importlib.util.spec_from_file_location("confirm_plan", ROOT/"tools"/"confirm_plan.py")
    confirm_plan = importlib.util.module_from_spec(spec); spec.loader.exec_module(confirm_plan)
    assert confirm_plan.main(["--check"]) == 0, "the committed plan is not what tools/confirm_plan.py computes"
