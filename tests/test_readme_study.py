"README's CPU-study numbers are the findings page's: both are `sentcl.experiments.report_results.study_summary` of results/."
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("make_readme", ROOT/"tools"/"make_readme.py")
make_readme = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(make_readme)


def _shown(notebook: Path) -> str:
    "Every Markdown output a notebook holds, joined."
    nb = json.loads(notebook.read_text())
    return "\n".join("".join(o.get("data", {}).get("text/markdown", "")) for c in nb["cells"] for o in c.get("outputs", []))


def test_readme_and_findings_print_the_computed_study():
    summary = make_readme.study_summary()  # cost, every claim column's verdict and interval, the rerun's count
    assert "**What it cost.**" in summary and "**Verdicts by the CPU study's pilot**" in summary and "**Rerun.**" in summary
    assert summary in (ROOT/"README.md").read_text(), "README.md's study numbers are not the library's: `make readme`"
    assert summary in _shown(ROOT/"nbs"/"findings.ipynb"), \
        "nbs/findings.ipynb's study numbers are not the library's: execute the page again"


def test_a_changed_number_is_caught():
    summary = make_readme.study_summary()
    typed = summary.replace("hours of two-core CPU", "hours of two-core CPU (about three)", 1)
    assert typed != summary and typed not in (ROOT/"README.md").read_text()
