"""The committed study records agree with the report.

1. Every committed results.json holds measurements, not verdict words, and its derived rows are what today's code
   derives from its runs (`tools/refresh_results.py --check`).
2. An independent recomputation, importing nothing of sentcl: from results/cpu/PLAN.json and the committed per-seed
   differences, each family member's simultaneous interval and verdict by the rule the plan states, set against
   the lines README.md prints (the findings page prints the same lines: tests/test_readme_study.py); and the pilot's
   data read by the registered confirmatory family (results/confirm/PLAN.json), set against the findings page's table.
   Every word of the rule's vocabulary (supported, contradicted, smaller than / as large as / larger than the paper's
   or the smallest effect of interest, inconclusive) is exercised on made-up intervals.
   Tolerance: this recomputation and the library's are two computations of the same floats (scipy's t quantile, sums
   in another order, another CPU's kernels), which agree to about 1e-15 relative; a printed number is checked to half a
   unit of its last digit, and a verdict whose interval ends within 1e-9 (relative) of zero or of the reference may read
   either way, so either word is accepted there (`_verdicts_near`).
"""
import importlib.util
import json
import math
import re
from html import unescape
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


def _verdicts_near(lo, hi, ref, of):
    "The verdicts of the interval and of it moved by a hair (1e-9 relative) at either end: what another CPU may print."
    eps = 1e-9 * max(1.0, abs(lo), abs(hi), abs(ref or 0.0))
    return {_verdict(lo + a, hi + b, ref, of) for a in (-eps, 0.0, eps) for b in (-eps, 0.0, eps)}


def _family(results: Path, plan_file: Path | None = None):
    "Per plan member: (experiment, column, better, worse, verdict, mean, lo, hi, near), by the plan's stated rule."
    plan = json.loads((plan_file or results/"PLAN.json").read_text())
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
                     mean, mean - half, mean + half, _verdicts_near(mean - half, mean + half, ref, of)))
    return rows


def _close(shown: str, x: float) -> bool:
    "True when `shown` (a rounded number as printed) is `x` rounded: within half a unit of its last digit."
    digits = len(shown.split(".")[1]) if "." in shown else 0
    lead = len(shown.lstrip("+-").split(".")[0].lstrip("0")) if "." in shown else len(shown.lstrip("+-"))
    unit = 10.0 ** -digits if "." in shown else 10.0 ** max(0, lead - 2)  # '120' to two digits is a unit of 10
    return abs(float(shown) - x) <= unit / 2 + 1e-12 * max(1.0, abs(x))


def test_readme_and_findings_verdicts_recomputed_without_sentcl():
    "Every verdict line README and the findings page print (its summary and each experiment's lines), recomputed."
    texts = {"README.md": (ROOT/"README.md").read_text(), "nbs/findings.ipynb": _shown_markdown()}
    rows = _family(ROOT/"results"/"cpu")
    assert len(rows) == 17
    for where, text in texts.items():
        for exp, col, better, worse, verdict, mean, lo, hi, near in rows:
            lines = [l for l in text.splitlines() if l.startswith(f"- `{exp}`,") and f"(`{col}`): *" in l
                     and _claim_of(exp, better, worse, col) in l]
            assert lines, f"{where} prints no verdict line for {exp} {better} − {worse} on {col}"
            for line in lines:
                m = re.search(r": \*(.+?)\* at the CPU study's scale, mean (\S+), simultaneous [\d.]+% interval (\S+) to (\S+) \(", line)
                assert m, line
                assert m.group(1) in near, (where, line, verdict)
                assert _close(m.group(2), mean) and _close(m.group(3), lo) and _close(m.group(4), hi), (where, line, mean, lo, hi)
        shown = len([l for l in text.splitlines() if re.match(r"- `[\w-]+`, .*\* at the CPU study's scale", l)])
        assert shown >= len(rows), (where, shown)


def test_findings_claim_tables_recomputed_without_sentcl():
    "Each experiment's claims table on the findings page: the verdict and interval of every family column, recomputed."
    rows = {(f"{b} − {w}", c): (near, lo, hi) for e, c, b, w, v, m, lo, hi, near in _family(ROOT/"results"/"cpu")}
    alpha = json.loads((ROOT/"results"/"cpu"/"PLAN.json").read_text())["alpha"]
    seen = 0
    for table in _findings_tables("simultaneous interval"):
        for s in table:
            if s["verdict"] == "outside the plan": continue
            near, lo, hi = rows[(s["better − worse"], s["column"])]
            assert s["verdict"] in near, (s, near)
            a, b, level = re.fullmatch(r"(\S+) to (\S+) \(([\d.]+)%\)", s["simultaneous interval"]).groups()
            assert _close(a, lo) and _close(b, hi) and _close(level, 100 * (1 - alpha / len(rows))), (s, lo, hi)
            seen += 1
    assert seen >= len(rows), seen  # every family column appears in some claims table


def _shown_markdown() -> str:
    nb = json.loads((ROOT/"nbs"/"findings.ipynb").read_text())
    return "\n".join("".join(o.get("data", {}).get("text/markdown", "")) for c in nb["cells"] for o in c.get("outputs", []))


def _claim_of(exp, better, worse, column):
    "The claim's words as the results hold them (to pick the README line of one claim column)."
    doc = json.loads((ROOT/"results"/"cpu"/exp/"results.json").read_text())
    return next(c["claim"] for c in doc["contrasts"] if (c["better"], c["worse"], c["column"]) == (better, worse, column))


def _findings_tables(header: str) -> list[list[dict]]:
    "The findings page's shown tables (HTML outputs) whose header holds `header`: each a list of row dicts."
    nb = json.loads((ROOT/"nbs"/"findings.ipynb").read_text())
    out = []
    for c in nb["cells"]:
        for o in c.get("outputs", []):
            for html in re.findall(r"<table.*?</table>", "".join(o.get("data", {}).get("text/html", "")), re.S):
                rows = [[unescape(re.sub(r"<[^>]+>", "", x)).strip() for x in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r, re.S)]
                        for r in re.findall(r"<tr[^>]*>(.*?)</tr>", html, re.S)]
                if rows and header in rows[0]: out.append([dict(zip(rows[0], r)) for r in rows[1:]])
    return out


def _findings_table(header: str) -> list[dict]:
    "The one shown table whose header holds `header`."
    tables = _findings_tables(header)
    assert len(tables) == 1, (header, len(tables))
    return tables[0]


def test_findings_pilot_read_by_the_registered_family_recomputed_without_sentcl():
    "The findings page's table of the pilot's data read by the registered family and rule, recomputed here."
    rows = _family(ROOT/"results"/"cpu", ROOT/"results"/"confirm"/"PLAN.json")
    plan = json.loads((ROOT/"results"/"confirm"/"PLAN.json").read_text())
    assert len(rows) == len(plan["family"])  # every registered column has pilot data
    shown = _findings_table("pilot (its data, this family)")
    assert len(shown) == len(rows), shown
    for r, s in zip(rows, shown):
        exp, col, better, worse, verdict, *_, near = r
        assert (s["experiment"], s["column"], s["better − worse"]) == (exp, col, f"{better} − {worse}"), (s, r)
        assert s["pilot (its data, this family)"] in near, (s, verdict)
    words = {s["pilot (its data, this family)"] for s in shown}
    assert "contradicted" in words and any(w.startswith("supported") for w in words), words  # the words it holds now


def test_every_word_of_the_rule():
    "The rule's vocabulary on made-up intervals (the paper's difference +1, or a smallest effect of interest)."
    cases = [((0.2, 0.8, 1.0, "the paper's"), "supported, smaller than the paper's"),
             ((0.5, 1.5, 1.0, "the paper's"), "supported, as large as the paper's"),
             ((1.2, 1.5, 1.0, "the paper's"), "supported, larger than the paper's"),
             ((-0.8, -0.2, 1.0, "the paper's"), "contradicted"),
             ((-0.2, 0.5, 1.0, "the paper's"), "smaller than the paper's"),
             ((-0.2, 1.5, 1.0, "the paper's"), "inconclusive"),
             ((-1.5, 0.2, -1.0, "the paper's"), "inconclusive"),  # a negative claim: the paper's sign is the side
             ((-0.5, -0.2, -1.0, "the paper's"), "supported, smaller than the paper's"),
             ((-0.1, 0.1, 0.05, "the smallest effect of interest"), "inconclusive"),
             ((-0.01, 0.01, 0.05, "the smallest effect of interest"), "smaller than the smallest effect of interest"),
             ((0.1, 0.3, None, "x"), "supported"), ((-0.3, 0.1, None, "x"), "inconclusive")]
    for args, word in cases:
        assert _verdict(*args) == word, (args, _verdict(*args), word)
    assert _verdicts_near(-1e-12, 0.5, 1.0, "the paper's") == {"smaller than the paper's", "supported, smaller than the paper's"}


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
