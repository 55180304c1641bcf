"""Write README.md from nbs/index.ipynb (nbdev_readme needs Quarto, which is not installable offline)."""
import posixpath
import re
import sys
from pathlib import Path

import nbformat
from nbconvert import MarkdownExporter

ROOT = Path(__file__).resolve().parents[1]
HEADER = "<!-- WARNING: generated from nbs/index.ipynb by tools/make_readme.py; edit the notebook -->\n\n"


def root_relative(text: str) -> str:
    "Links and images written relative to nbs/ (where index.ipynb lives) -> relative to the root (README.md)."
    def sub(m):
        url = m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:|^/|^#", url): return m.group(0)  # absolute, or an anchor
        return f"{m.group(1)}({posixpath.normpath('nbs/' + url)})"
    return re.sub(r"(!?\[[^\]]*\])\(([^)\s]+)\)", sub, text)


STUDY_MARKER = "<!-- computed: study summary -->"


def study_summary() -> str:
    "The CPU study's cost, verdicts and rerun, computed by the library from results/ (what the findings page prints)."
    sys.path.insert(0, str(ROOT))
    from sentcl.experiments.catalog.registry import load_plan
    from sentcl.experiments.report_results import collect_results, study_summary as summary
    from sentcl.experiments.listing import select_experiments
    return summary(collect_results(ROOT / "results" / "cpu"), load_plan(ROOT / "results" / "cpu" / "PLAN.json"),
                   collect_results(ROOT / "results" / "rerun"), order=select_experiments(preset="cpu"))


CONFIRM_MARKER = "<!-- computed: confirmatory run -->"
START_MARKER = "<!-- computed: made start -->"


def confirm_summary() -> str:
    "What the registered confirmatory run waits for or how far it got (`confirm_status`), as the findings page says it."
    import hashlib
    sys.path.insert(0, str(ROOT))
    from sentcl.experiments.catalog.registry import load_plan
    from sentcl.experiments.report_results import collect_results, confirm_status, plan_registration
    out = ROOT / "results" / "confirm"
    docs = collect_results(out) if any(out.glob("*/results.json")) else {}
    rec = plan_registration(out)  # the registration record, not git's history: a shallow clone lacks it
    return confirm_status(load_plan(out / "PLAN.json"), docs, rec and rec["commit"],
                          hashlib.sha256((out / "PLAN.json").read_bytes()).hexdigest())


SCALE_MARKER = "<!-- computed: study scale -->"


def study_scale() -> str:
    "Seeds per arm and steps per run of the CPU study, from its runs' records."
    sys.path.insert(0, str(ROOT))
    from sentcl.experiments.report_results import collect_results
    docs = collect_results(ROOT / "results" / "cpu")
    seeds = [len({r["seed"] for r in d["runs"] if r["seed"] is not None}) for d in docs.values()]
    steps = sorted({r["train"]["step"] for d in docs.values() for r in d["runs"] if r.get("train")})
    n = f"{min(seeds)} to {max(seeds)}" if min(seeds) != max(seeds) else f"{min(seeds)}"
    return f"{n} seeds per arm, {' or '.join(map(str, steps))} steps each"


def made_start() -> str:
    "The made start's numbers from results/cpu-start/start_point.json (`made_start_line`)."
    import json
    sys.path.insert(0, str(ROOT))
    from sentcl.experiments.report_results import made_start_line
    return made_start_line(json.loads((ROOT / "results" / "cpu-start" / "start_point.json").read_text())) + "."


def render() -> str:
    nb = nbformat.read(ROOT / "nbs" / "index.ipynb", as_version=4)
    nb.cells = [c for c in nb.cells if not c.source.lstrip().startswith("#| hide")]
    body, _ = MarkdownExporter(exclude_output=True).from_notebook_node(nb)
    for marker in (STUDY_MARKER, CONFIRM_MARKER, START_MARKER, SCALE_MARKER):
        if marker not in body: sys.exit(f"nbs/index.ipynb: the marker {marker} is missing; put it back")
    out = root_relative(body.strip()).replace(STUDY_MARKER, study_summary())
    out = out.replace(CONFIRM_MARKER, confirm_summary()).replace(START_MARKER, made_start())
    return HEADER + out.replace(SCALE_MARKER, study_scale()) + "\n"


if __name__ == "__main__":
    out = render()
    if sys.argv[1:] == ["--check"]:
        sys.exit(0 if (ROOT / "README.md").read_text() == out else "README.md is stale: run `make readme`")
    (ROOT / "README.md").write_text(out)
