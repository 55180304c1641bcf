"""How closely library notebooks follow the `25_losses` model: per notebook, the exported cells, the median length of an
exported cell, and the share of exported cells followed by a test before the next export.

    python tools/notebook_shape.py                      # every library notebook (nbs/*.ipynb)
    python tools/notebook_shape.py nbs/25_losses.ipynb  # some

An exported cell is a code cell with an nbdev `export`/`exporti` directive; its length counts the lines of code, not
the directives or blank lines. A test is a code cell without an export directive that asserts: `assert`, or a
fastcore.test call (`test_eq`, `test_fail`, `test_close`, ...), comments aside. An exported cell is followed by a test
when such a cell comes after it and before the next exported cell (markdown between them is fine). The last column
An exported cell is *shown* when a code cell that is neither exported nor hidden (`#| hide`) comes after it and
before the next exported cell: a test or a worked example. The `bar` column says whether a notebook meets the bar every
library notebook keeps (issue 36): median ≤ 12 lines and ≥ 60% shown; the `model` column the stricter bar of the
model notebooks (issue 24): median ≤ 12 lines and ≥ 80% followed by a test.
"""
import argparse
import io
import json
import re
import statistics
import sys
import tokenize
from pathlib import Path

DIRECTIVE = re.compile(r"^\s*#\s*\|\s*(\w+)")
TEST = re.compile(r"(^|[^\w.])(assert\b|test_\w+\()", re.M)
MEDIAN_BAR, TESTED_BAR, SHOWN_BAR = 12, 0.8, 0.6


def directives(source:str) -> list[str]:
    "The nbdev directives of a cell (`#| export` -> 'export')."
    return [m.group(1) for line in source.splitlines() if (m := DIRECTIVE.match(line))]


def is_exported(cell:dict) -> bool:
    src = "".join(cell["source"])
    return cell["cell_type"] == "code" and any(d in ("export", "exporti") for d in directives(src))


def code_lines(source:str) -> int:
    "Lines of code: not blank, not a directive."
    return sum(1 for line in source.splitlines() if line.strip() and not DIRECTIVE.match(line))


def without_comments(source:str) -> str:
    "`source` with its comments dropped (the text as written when it does not tokenize)."
    try: toks = [t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type != tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError, IndentationError): return source
    return tokenize.untokenize(toks)


def is_test(cell:dict) -> bool:
    src = "".join(cell["source"])
    return cell["cell_type"] == "code" and not is_exported(cell) and bool(TEST.search(without_comments(src)))


def is_shown(cell:dict) -> bool:
    "A test or a worked example: a code cell that is neither exported nor hidden."
    src = "".join(cell["source"])
    return cell["cell_type"] == "code" and not is_exported(cell) and "hide" not in directives(src) and bool(src.strip())


def shape(path) -> dict:
    "The notebook's exported cells, their median length, and how many are followed by a test before the next export."
    cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    exported = [i for i, c in enumerate(cells) if is_exported(c)]
    lengths = [code_lines("".join(cells[i]["source"])) for i in exported]
    bounds = exported[1:] + [len(cells)]
    tested = sum(any(is_test(c) for c in cells[i + 1:end]) for i, end in zip(exported, bounds))
    shown = sum(any(is_shown(c) for c in cells[i + 1:end]) for i, end in zip(exported, bounds))
    return {"notebook": Path(path).name, "exported": len(exported), "lines": sum(lengths),
            "median": statistics.median(lengths) if lengths else 0, "tested": tested,
            "share": tested / len(exported) if exported else 1.0, "shown": shown,
            "shown_share": shown / len(exported) if exported else 1.0}


def meets_bar(s:dict) -> bool:
    "Issue 36's bar for every library notebook: median ≤ 12 lines, ≥ 60% of exported cells shown."
    return s["median"] <= MEDIAN_BAR and s["shown_share"] >= SHOWN_BAR


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("notebooks", nargs="*", help="notebooks to measure (default: nbs/*.ipynb)")
    args = p.parse_args(argv)
    paths = args.notebooks or sorted(str(n) for n in Path("nbs").glob("*.ipynb"))
    rows = [shape(n) for n in paths]
    rows = [r for r in rows if r["exported"]] if not args.notebooks else rows
    print(f"{'notebook':32s}{'exported':>9s}{'lines':>7s}{'median':>8s}{'tested':>8s}{'share':>7s}{'shown':>7s}"
          f"  bar  model")
    for r in rows:
        ok = r["median"] <= MEDIAN_BAR and r["share"] >= TESTED_BAR
        print(f"{r['notebook']:32s}{r['exported']:9d}{r['lines']:7d}{r['median']:8g}{r['tested']:8d}"
              f"{r['share']:7.0%}{r['shown_share']:7.0%}  {'yes' if meets_bar(r) else 'no ':3s}  {'yes' if ok else 'no'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
