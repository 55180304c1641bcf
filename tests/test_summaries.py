"""Each paper page ends with its reproduction summary, and the summary a page shows is the one
`sentcl.experiments.summary.paper_summary` computes now from the records: a typed or stale number fails, as the
README's study numbers do (`python tools/execute_pages.py nbs/papers/*.ipynb` brings the pages up to date)."""
import json
import re
from pathlib import Path

import pytest

from sentcl.data.paper_numbers import PAPERS
from sentcl.experiments.catalog.registry import EXPERIMENTS
from sentcl.experiments.report import SUMMARY_LINK
from sentcl.experiments.report_results import collect_results
from sentcl.experiments.summary import FOLLOWS, load_outside, page_choices, paper_summary

ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT/"nbs"/"papers"


def _cells(paper: str) -> list:
    return json.loads((PAGES/f"{paper}.ipynb").read_text())["cells"]


def _shown_summary(paper: str) -> str:
    "The Markdown the page's summary cell shows (the last code cell that calls paper_summary)."
    cell = [c for c in _cells(paper) if c["cell_type"] == "code" and "paper_summary(" in "".join(c["source"])][-1]
    return "\n".join("".join(o.get("data", {}).get("text/markdown", "")) for o in cell.get("outputs", []))


@pytest.fixture(scope="module")
def summaries():
    docs = collect_results(ROOT/"results"/"cpu")  # read once: every paper's summary uses the same study
    return {p: paper_summary(p, docs=docs) for p in PAPERS}


@pytest.mark.parametrize("paper", PAPERS)
def test_each_page_ends_with_its_computed_summary(paper, summaries):
    cells = _cells(paper)
    headings = [i for i, c in enumerate(cells) if "".join(c["source"]).startswith("## Reproduction summary")]
    assert headings and headings[-1] == len(cells) - 2, f"nbs/papers/{paper}.ipynb: the summary is not the page's end"
    assert "remove-input" in cells[-1]["metadata"].get("tags", []), "the summary cell's input shows on the site"
    assert _shown_summary(paper) == summaries[paper], \
        f"nbs/papers/{paper}.ipynb shows a summary other than the computed one: python tools/execute_pages.py nbs/papers/{paper}.ipynb"


def test_a_typed_number_is_caught(summaries):
    summary = summaries["sncse"]
    number = re.search(r"\d+\.\d+ GPU-hours", summary).group(0)
    typed = summary.replace(number, "12.3 GPU-hours" if number != "12.3 GPU-hours" else "45.6 GPU-hours", 1)
    assert typed != _shown_summary("sncse")


@pytest.mark.parametrize("paper", PAPERS)
def test_every_paper_and_code_choice_has_a_side(paper):
    section = next("".join(c["source"]) for c in _cells(paper)
                   if "".join(c["source"]).startswith("## Paper and released code"))
    assert page_choices(section) == list(FOLLOWS[paper]), \
        f"nbs/papers/{paper}.ipynb's paper-and-code bullets and sentcl.experiments.summary.FOLLOWS differ"


def test_the_report_links_each_experiment_to_its_summary():
    report = (ROOT/"reports"/"report.md").read_text()
    for name, exp in EXPERIMENTS.items():
        section = report[report.index(f'<a id="{name}"></a>'):]
        section = section[:section.find("<a id=", 1)]
        assert SUMMARY_LINK.format(paper=exp.paper) in section, f"reports/report.md: {name} does not link its summary"
        target = (ROOT/"reports"/SUMMARY_LINK.format(paper=exp.paper).split("#")[0]).resolve()
        assert target.is_file(), target


def test_the_home_page_lists_the_summaries():
    text = "\n".join("".join(c["source"]) for c in json.loads((ROOT/"nbs"/"index.ipynb").read_text())["cells"])
    for paper in PAPERS: assert f"(papers/{paper}.ipynb#reproduction-summary)" in text, paper


def test_every_outside_number_is_cited():
    doc = load_outside()
    assert doc["reports"] and doc["authors"]
    for r in doc["reports"]:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", r["repo"]) and r["issue"] > 0
        assert r["value"] is None or isinstance(r["value"], (int, float))
