"""The house: sentcl's import graph has no cycle and no import against the layer order of DESIGN.md (imports inside
functions included), no module only re-exports, and each library notebook's module imports only modules made by
notebooks that sort before it."""
import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG, NBS = ROOT/"sentcl", ROOT/"nbs"
# DESIGN.md's layer table, top to bottom (a layer imports only from itself and the layers above it), with the modules
# of each; `ground` (core helpers, number formats, the package root) sits above them all.
LAYERS = [
    ("ground", ["sentcl", "sentcl.core", "sentcl.precision"]),
    ("data", ["sentcl.data"]),
    ("views", ["sentcl.negation", "sentcl.spans", "sentcl.views"]),
    ("encoders", ["sentcl.encoders", "sentcl.st_modules", "sentcl.batching"]),
    ("losses", ["sentcl.losses"]),
    # evaluation needs only encoders and data, so training calls it (the dev-set selection) directly
    ("evaluation", ["sentcl.eval", "sentcl.eval.common", "sentcl.eval.sts", "sentcl.eval.clustering",
                    "sentcl.eval.senteval", "sentcl.eval.tasks", "sentcl.eval.doctor"]),
    ("methods", ["sentcl.methods"]),
    ("training", ["sentcl.train"]),
    ("analysis", ["sentcl.eval.analysis", "sentcl.eval.error_analysis", "sentcl.eval.plots", "sentcl.eval.result_charts"]),
    ("experiments", ["sentcl.experiments", "sentcl.launch"]),
    ("interface", ["sentcl.st", "sentcl.cli"]),
]


def modules() -> dict:
    "{dotted module name: its file} for every module of the package."
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        if p.name == "_modidx.py": continue
        parts = p.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def imports(name:str, path:Path, known:set) -> set:
    "The sentcl modules `name` imports, anywhere in its file (a function's lazy imports too)."
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([node.module] if node.module else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        elif isinstance(node, ast.Import): targets = [a.name for a in node.names]
        else: continue
        found |= {t for t in targets if t in known and t != name}
    return found


def layer_of(name:str) -> int:
    "The index of the layer that holds `name`: the most specific entry of LAYERS that names it or a package above it."
    best = max(((len(m), i) for i, (_, ms) in enumerate(LAYERS) for m in ms if name == m or name.startswith(m + ".")),
               default=None)
    assert best is not None, f"{name} is in no layer of LAYERS: add it where DESIGN.md puts it"
    return best[1]


GRAPH = {n: imports(n, p, set(modules())) for n, p in modules().items()}


def test_the_layers_are_design_mds():
    design = ROOT.parent/"shared"/"DESIGN.md"
    if not design.is_file(): pytest.skip(f"no {design} (the layer order is transcribed in LAYERS)")
    text = design.read_text()
    table = text[text.index("## Layers"):].split("\n\n")[1]
    names = [row.split("|")[1].strip() for row in table.splitlines()[2:]]
    assert names == [n for n, _ in LAYERS[1:]]


def test_no_import_cycle():
    state, cycles = {}, []
    def visit(n, path):
        state[n] = "open"
        for m in sorted(GRAPH[n]):
            if state.get(m) == "open": cycles.append(path[path.index(m):] + [m])
            elif m not in state: visit(m, path + [m])
        state[n] = "done"
    for n in sorted(GRAPH):
        if n not in state: visit(n, [n])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_no_import_against_the_layer_order():
    upward = [f"{n} ({LAYERS[layer_of(n)][0]}) imports {m} ({LAYERS[layer_of(m)][0]})"
              for n, ms in GRAPH.items() for m in sorted(ms) if layer_of(m) > layer_of(n)]
    assert not upward, "imports against DESIGN.md's layer order:\n" + "\n".join(upward)


def test_the_checks_find_what_they_look_for(tmp_path):
    "The walk sees a lazy relative import, and the layer of a module is its most specific entry."
    f = tmp_path/"x.py"
    f.write_text("def f():\n    from ..eval.plots import tsne_map\n    import sentcl.core\n")
    known = {"sentcl.eval.plots", "sentcl.core", "sentcl.train.cards"}
    assert imports("sentcl.train.cards", f, known) == {"sentcl.eval.plots", "sentcl.core"}
    assert (layer_of("sentcl.eval.plots"), layer_of("sentcl.eval"), layer_of("sentcl.data.hub")) == (8, 5, 1)


def test_no_module_only_re_exports():
    "A module that defines nothing and imports names from sentcl is a facade; package faces define what they show."
    facades = []
    for n, p in modules().items():
        body = [s for s in ast.parse(p.read_text()).body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        own = [s for s in body if not isinstance(s, (ast.Import, ast.ImportFrom))
               and not (isinstance(s, ast.Assign) and all(getattr(t, "id", "") in ("__all__", "_all_") for t in s.targets))]
        if body and not own: facades.append(n)
    assert not facades, f"modules that only re-export: {facades}"


def notebook_modules() -> list:
    "[(notebook, the module it exports)] in the order the notebooks sort."
    out = []
    for nb in sorted(NBS.glob("*.ipynb")):
        for c in json.loads(nb.read_text())["cells"]:
            m = re.search(r"^#\|\s*default_exp\s+(\S+)", "".join(c["source"]), re.M) if c["cell_type"] == "code" else None
            if m:
                out.append((nb.name, "sentcl." + m[1].removesuffix(".__init__")))
                break
    return out


def test_notebooks_sort_in_the_order_they_build_on_each_other():
    order = notebook_modules()
    made_by = {m: nb for nb, m in order}
    exported = {n for n, p in modules().items() if "# AUTOGENERATED! DO NOT EDIT!" in p.read_text()[:1000]}
    assert set(made_by) == exported, "every exported module comes from one notebook"
    assert {n for n, p in modules().items() if n not in exported and p.name != "__init__.py"} == set(), \
        "only packages' __init__ files (the root's version, faceless packages' docstrings) are written by hand"
    early = [f"{nb} ({m}) imports {d}, made by the later {made_by[d]}" for nb, m in order for d in sorted(GRAPH[m])
             if d in made_by and made_by[d] > nb]
    assert not early, "\n".join(early)


def test_the_top_of_the_package_is_small():
    top = sorted(p.name for p in PKG.iterdir() if not p.name.startswith((".", "_")) and p.name not in ("published", "samples")
                 and (p.suffix == ".py" or (p/"__init__.py").is_file()))
    assert len(top) <= 17, top
