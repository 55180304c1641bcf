"The README's figure: every row it draws is a claim the catalogue makes and the committed study measured."
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("home_figure", ROOT/"tools"/"home_figure.py")
home_figure = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(home_figure)


def test_rows_are_catalogued_claims():
    from sentcl.experiments.catalog.registry import get_experiment
    for exp, better, worse, column, *_ in home_figure.ROWS:
        e = get_experiment(exp)
        claims = {(k.better, k.worse) for k in e.contrasts if column in k.columns}
        assert (better, worse) in claims, f"{exp}: no claim {better} > {worse} on {column}"


def test_every_row_measured_in_the_committed_study():
    "Every row whose two arms the committed study ran is drawn, with the plan's verdict and interval."
    from sentcl.experiments.report_results import collect_results
    docs = collect_results(ROOT/"results"/"cpu")
    ran = lambda exp, arm: exp in docs and any(r["arm"] == arm for r in docs[exp]["runs"])
    drawn = home_figure.study_contrasts(ROOT/"results"/"cpu")
    want = {(b, w) for exp, better, worse, _, b, w in home_figure.ROWS if ran(exp, better) and ran(exp, worse)}
    assert set(zip(drawn["better"], drawn["worse"])) == want and len(want) >= 7
    assert drawn["n"].min() >= 3 and drawn["status"].str.match(r"^(supported|contradicted|inconclusive|smaller than (the paper's|the smallest effect of interest)), ").all()
