"""Draw the home page's figure (nbs/images/cpu_study.png) from the committed CPU study in results/cpu.

One row per central claim, all on STS (Spearman x100, the paper's average or its stand-in): the paired difference
of each seed (dots), their mean (bar; green when every seed goes the paper's way), the paper's difference (diamond).
Each row's verdict is the study's analysis plan's (results/cpu/PLAN.json, the pilot's, applied by
`sentcl.experiments.report_results.family_verdicts`: simultaneous t-intervals over the family of claim columns, read
against zero and against the paper's difference), with
that interval, recomputed from the per-seed differences, not read from the status stored with the results.
Run it after `sentcl experiments run --preset cpu --out results/cpu`:

    python tools/home_figure.py [--results results/cpu] [--out nbs/images/cpu_study]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]

# (experiment, better arm, worse arm, measured column, the row's label: better, worse)
ROWS = [
    # PairSupCon's claims at the study's rate, 2e-5 (the paper's 5e-6 barely moves the model in 100 steps)
    ("pairsupcon-table4", "pairsupcon-lr2e-05", "classification-lr2e-05", "sts", "PairSupCon (lr 2e-5): full objective",
     "classification only"),
    ("pairsupcon-table4", "pairsupcon-lr2e-05", "instdisc-lr2e-05", "sts", "PairSupCon (lr 2e-5): full objective",
     "instance discrim. only"),
    ("pairsupcon-table5", "instdisc-lr2e-05", "instdisc-nohn-lr2e-05", "sts", "PairSupCon (lr 2e-5): hard negatives",
     "none"),
    ("pairsupcon-table5", "pairsupcon-lr2e-05", "pairsupcon-nohn-lr2e-05", "sts",
     "PairSupCon (lr 2e-5): full, hard negatives", "none"),
    ("liao-table2", "scl-allpalln-0.3", "ce", "avg", "Liao: SCL + CE", "CE"),
    ("sncse-table2", "sncse", "sncse-lam0", "avg", "SNCSE: BML at λ = 1e-3", "λ = 0"),
    ("declutr-figure3", "both-100", "contrastive-100", "sts", "DeCLUTR: both objectives", "contrastive"),
    ("declutr-figure3", "both-100", "mlm-100", "sts", "DeCLUTR: both objectives", "MLM"),
]


def study_contrasts(results: Path) -> pd.DataFrame:
    "The rows of ROWS that the study measured, relabelled for the chart; a one-line error when none was."
    from sentcl.experiments.catalog.registry import load_plan
    from sentcl.experiments.power import _signed
    from sentcl.experiments.report_results import collect_results
    from sentcl.experiments.report_results import family_verdicts
    docs = collect_results(results)
    family, rows = family_verdicts(docs, load_plan(Path(results) / "PLAN.json")), []
    for exp, better, worse, column, b_label, w_label in ROWS:
        if exp not in docs: continue
        c = pd.DataFrame(docs[exp]["contrasts"])
        hit = c[(c["better"] == better) & (c["worse"] == worse) & (c["column"] == column) & (c["n"] > 0)]
        f = family[(family["experiment"] == exp) & (family["better"] == better) & (family["worse"] == worse)
                   & (family["column"] == column)].iloc[0]
        for r in hit.to_dict("records"):
            verdict = f"{f['verdict']}, {_signed(f['lo'])} to {_signed(f['hi'])}"  # the plan's, with its interval
            rows.append({**r, "better": b_label, "worse": w_label, "column": "STS", "status": verdict})
    if not rows:
        raise SystemExit(f"home_figure: no measured claim in {results}; run `sentcl experiments run --preset cpu "
                         f"--data-dir DATA --out {results}` first")
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=str(ROOT / "results" / "cpu"), help="a `sentcl experiments run` folder")
    ap.add_argument("--out", default=str(ROOT / "nbs" / "images" / "cpu_study"), help="path without the suffix")
    args = ap.parse_args(argv)
    from sentcl.eval.plots import headless_backend
    from sentcl.eval.result_charts import contrast_chart
    headless_backend()
    chart = contrast_chart(study_contrasts(Path(args.results)),
                           title="CPU study (a pilot): paired STS differences, verdicts at this scale")
    for p in chart.save(args.out, formats=("png",)): print(f"written: {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
