"""sentcl.report after its split: every public name of before still imports from it, and the names that moved to
sentcl.report_results are the same objects, not copies."""
import sentcl.report as report
import sentcl.report_results as report_results

BEFORE = ["REPRODUCED_WITHIN", "refresh_derived", "collect_results", "collect_failures", "row_status", "stand_ins_used",
          "experiment_section", "report_markdown", "write_report", "paper_experiments", "compare_results",
          "run_precision", "setting_differences"]  # `sentcl.report.__all__` before the split


def test_the_names_of_before_import_from_report():
    assert [n for n in BEFORE if n not in report.__all__ or not hasattr(report, n)] == []


def test_the_moved_names_are_the_same_objects():
    moved = [n for n in report_results.__all__ if n in BEFORE]  # names added since (study_cost) were never report's
    assert len(moved) >= 7, moved
    assert [n for n in moved if getattr(report, n) is not getattr(report_results, n)] == []
