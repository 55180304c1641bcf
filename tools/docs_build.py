"""Build the sentcl docs site offline: notebooks -> nbdev-processed notebooks -> Markdown -> mkdocs-material -> _site/.

    python tools/docs_build.py            # all stages; prints the page count and the time taken
    python tools/docs_build.py --no-proc  # reuse _proc/ from an earlier run

Stages (nothing here needs Quarto or the network, except the KaTeX tarball from the npm registry):

1. proc: nbdev's own notebook processing (`nbdev.serve.proc_nbs`, what `nbdev_proc_nbs` runs) into `_proc/`:
   front matter from the title cell, `show_doc` cells after every exported symbol, export cells removed,
   nbdev doc links in the prose. Two differences from `nbdev_proc_nbs`: it is called in-process, so nbdev
   never tries to install Quarto (and then `pip install -e .[dev]` with whatever pip is on PATH), and the
   `exec_show_docs` processor is left out: it runs every notebook cell that imports something, so one test
   cell that mixes an import with notebook-only state stops the whole build. The `show_doc` cells are
   rendered here instead, from the installed package, by nbdev's same `show_doc`.
2. prep: every processed notebook becomes a Markdown page named after its `output-file` (the page name
   nbdev's doc links use): `# title` and `> description` from the front matter, Quarto cell options
   honoured (`echo`, `output`, `include`, `code-fold`, `fig-cap`), outputs kept (PNG/SVG figures as files,
   tables as HTML, text as code blocks), nbdev's absolute doc links made relative, Pandoc link attributes
   dropped. Each library page ends with an API reference of everything its module's `__all__` exports
   from that notebook. Markdown and notebook pages under reports/ and benchmarks/, and the executed experiment
   notebooks under results/, join when they exist.
3. site: mkdocs-material with docs/mkdocs.yml (why mkdocs: see that file) and a generated nav -> `_site/`.

Notebooks are found, not listed: every nbs/**/*.ipynb except the folders in EXCLUDED_DIRS.
"""
from __future__ import annotations

import argparse
import ast
import configparser
import importlib
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
PROC = ROOT / "_proc"
BUILD = ROOT / "build" / "docs"
MD = BUILD / "md"                      # mkdocs docs_dir (generated)
SITE = ROOT / "_site"
DOCS = ROOT / "docs"                   # committed: mkdocs.yml, assets/
# Front-end files the site serves itself, from the npm registry (no CDN at view time):
NPM_PACKAGES = {"katex": "0.16.47",           # math typesetting
                "iframe-worker": "1.0.4"}     # lets material's search worker run from file:// (offline plugin)
NPM_CACHE = ROOT / "build" / "docs-cache"

EXCLUDED_DIRS = {"experiments"}        # nbs/ folders that are not docs pages (papermill runs; issue 13)
SECTION_TITLES = {"papers": "Papers", "experiments": "Experiments", "": "Guides"}
# Pages written by other work, included when present: (nav title, folder, file patterns).
EXTRA_SOURCES = [("Reports", "reports", ("*.md", "*.ipynb")), ("Reports", "report", ("*.md", "*.ipynb")),
                 ("Results", "results", ("*.ipynb",)),  # executed experiment notebooks (`sentcl experiments run`)
                 ("Benchmarks", "benchmarks", ("*.md", "*.ipynb"))]
ASSET_SUFFIXES = {".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp"}
# names nbdev links wherever they appear backticked, which prose mostly uses for something else: `default` is
# the offline model far more often than the `sentcl.core.default` helper (whose entry stays on its page)
UNLINKED = ("default",)
OUTPUT_ORDER = ("image/png", "image/svg+xml", "image/jpeg", "text/markdown", "text/html", "text/latex", "text/plain")


def log(msg: str): print(f"docs: {msg}", flush=True)


def settings() -> dict:
    cp = configparser.ConfigParser()
    cp.read(ROOT / "settings.ini")
    return dict(cp["DEFAULT"])


@dataclass
class Page:
    src: Path                 # the file the page comes from (nbs/..., reports/..., benchmarks/...)
    md: PurePosixPath         # its path inside the site's docs_dir, e.g. losses.md, papers/sncse.md
    title: str
    section: str              # nav section ("" for the home page)
    order: tuple = ()
    proc: Path | None = None  # nbdev-processed notebook, for nbs/ notebooks
    modules: list = field(default_factory=list)  # sentcl modules this notebook exports to
    api: list = field(default_factory=list)      # (module, name) pairs of __all__ defined in this notebook
    group: str = ""           # library pages: the package of the module, which groups them in the sidebar

    @property
    def html(self) -> str: return str(self.md.with_suffix(".html"))


# ---------------------------------------------------------------------------------------------------
# 1. nbdev processing

def proc_notebooks():
    "nbdev's `proc_nbs` into _proc/, in this process, without `exec_show_docs` (see the module docstring)."
    import nbdev.processors as P
    from nbdev.serve import proc_nbs
    base = P.FilterDefaults.base_procs
    P.FilterDefaults.base_procs = lambda self: [p for p in base(self) if p is not P.exec_show_docs]
    cwd = os.getcwd()
    os.chdir(ROOT)
    try: proc_nbs(path=str(ROOT / settings().get("nbs_path", "nbs")), n_workers=0, force=True)
    finally:
        os.chdir(cwd)
        P.FilterDefaults.base_procs = base


# ---------------------------------------------------------------------------------------------------
# 2a. which notebook defines which exported symbol

_CELL_MARK = re.compile(r"^# %% (?:\.\./)*(?P<nb>\S+\.ipynb)", re.M)


def _defined_names(node) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)): return [node.name]
    if isinstance(node, ast.Assign): return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name): return [node.target.id]
    if isinstance(node, (ast.Import, ast.ImportFrom)): return [(a.asname or a.name).split(".")[0] for a in node.names]
    return []


def module_symbols(lib: str, nbs: str) -> dict[str, list[tuple[str, str]]]:
    """{notebook path relative to nbs/: [(module, name), ...]} for every name in a module's `__all__`,
    assigned to the notebook whose exported cell defines it (the `# %% ../nbs/X.ipynb` markers)."""
    out: dict[str, list] = {}
    for py in sorted((ROOT / lib).rglob("*.py")):
        if py.name.startswith("_") and py.name != "__init__.py": continue  # a package's face is its __init__
        src = py.read_text()
        tree = ast.parse(src)
        names = next((ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                      and any(getattr(t, "id", None) == "__all__" for t in n.targets)), None)
        if not names: continue
        parts = py.relative_to(ROOT).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        marks = [(src.count("\n", 0, m.start()) + 1, m.group("nb")) for m in _CELL_MARK.finditer(src)]
        header = re.search(r"File to edit: (?:\.\./)*(\S+\.ipynb)", src)
        default_nb = header.group(1) if header else (marks[0][1] if marks else None)
        where = {}
        for node in tree.body:
            nb = next((n for line, n in reversed(marks) if line <= node.lineno), default_nb)
            for nm in _defined_names(node): where.setdefault(nm, nb)
        for nm in names:
            nb = where.get(nm, default_nb)
            if nb is None: continue
            rel = str(PurePosixPath(nb).relative_to(nbs)) if nb.startswith(nbs + "/") else nb
            out.setdefault(rel, []).append((module, nm))
    return out


# ---------------------------------------------------------------------------------------------------
# 2b. pages

def _natural(s: str): return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


def _front_matter(nb) -> dict:
    if nb.cells and nb.cells[0].cell_type == "raw" and nb.cells[0].source.lstrip().startswith("---"):
        return yaml.safe_load(nb.cells[0].source.strip().strip("-")) or {}
    return {}


def _default_exp(src: Path) -> str | None:
    "The module a notebook exports to (`#| default_exp name`), or None."
    for cell in nbformat.read(src, as_version=4).cells:
        m = re.search(r"^#\|\s*default_exp\s+(\S+)", cell.source, re.M) if cell.cell_type == "code" else None
        if m: return m.group(1).strip("\"'")
    return None


def package_of(lib: str, exp: str) -> str:
    "The sidebar group of a library page: its module's package (`data.layout` -> `sentcl.data`, `losses` -> `sentcl`)."
    parts = exp.removesuffix(".__init__").split(".")
    return ".".join([lib] + parts[:1]) if len(parts) > 1 or exp.endswith(".__init__") else lib


def notebook_pages(cfg: dict, symbols: dict) -> list[Page]:
    nbs = ROOT / cfg.get("nbs_path", "nbs")
    lib = cfg.get("lib_name", "sentcl")
    pages = []
    for proc in sorted(PROC.rglob("*.ipynb"), key=lambda p: _natural(str(p))):
        rel = proc.relative_to(PROC)
        if any(part in EXCLUDED_DIRS or part.startswith((".", "_")) for part in rel.parts): continue
        src = nbs / rel
        if not src.exists(): continue
        nb = nbformat.read(proc, as_version=4)
        fm = _front_matter(nb)
        if fm.get("draft"): continue
        out = fm.get("output-file") or re.sub(r"^\d+[a-z]?_", "", rel.stem) + ".html"
        md = PurePosixPath(*rel.parent.parts, out).with_suffix(".md")
        exp = _default_exp(src)
        section = "" if md == PurePosixPath("index.md") else (
            "Library" if exp else SECTION_TITLES.get(rel.parent.as_posix() if rel.parent.parts else "",
                                                     rel.parent.as_posix().replace("_", " ").title()))
        api = symbols.get(rel.as_posix(), [])
        modules = list(dict.fromkeys(([f"{lib}.{exp}"] if exp else []) + [m for m, _ in api]))
        pages.append(Page(src=src, md=md, title=str(fm.get("title") or rel.stem), proc=proc, section=section,
                          order=(fm.get("order", 1000), _natural(rel.name)), modules=modules, api=api,
                          group=package_of(lib, exp) if exp else ""))
    return pages


def _md_title(text: str, default: str) -> str:
    m = re.search(r"^#\s+(.+?)\s*$", text, re.M)
    return m.group(1).strip() if m else default


def extra_pages() -> list[Page]:
    pages = []
    for title, folder, patterns in EXTRA_SOURCES:
        base = ROOT / folder
        if not base.is_dir(): continue
        files = sorted({f for pat in patterns for f in base.rglob(pat)}, key=lambda p: _natural(str(p)))
        for f in files:
            rel = f.relative_to(ROOT)
            if any(p.startswith((".", "_")) for p in rel.parts) or ".ipynb_checkpoints" in rel.parts: continue
            name = "index" if f.stem.lower() in ("readme", "index") else f.stem
            md = PurePosixPath(*rel.parent.parts, name + ".md")
            nb = nbformat.read(f, as_version=4) if f.suffix == ".ipynb" else None
            text = f.read_text() if nb is None else "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
            default = title if name == "index" else f.stem.replace("_", " ").replace("-", " ").capitalize()
            page_title = str((_front_matter(nb) if nb is not None else {}).get("title") or _md_title(text, default))
            if folder == "results" and len(rel.parts) > 3: page_title += f" ({rel.parts[1]})"  # results/<preset>/...
            pages.append(Page(src=f, md=md, title=page_title, section=title,
                              order=(0 if name == "index" else 1, _natural(rel.name))))
    return pages


# ---------------------------------------------------------------------------------------------------
# 2c. Markdown fixes shared by every page

class Links:
    "Rewrite links that point at another page of this site into relative `.md` links mkdocs can check."
    def __init__(self, pages: list[Page], cfg: dict):
        host = cfg.get("doc_host", "").rstrip("/") + "/" + cfg.get("doc_baseurl", "").strip("/")
        self.prefix = host.rstrip("/") + "/"
        self.by_html = {p.html: p for p in pages}
        self.by_src = {p.src.resolve(): p for p in pages}
        self.doclinks = set()   # (page md, link) made from nbdev's doc links: anchors checked after rendering
        self.exports = {(m, n): p for p in pages for m, n in p.api}

    def target(self, url: str, page: Page) -> str | None:
        path, _, frag = url.partition("#")
        frag = "#" + frag if frag else ""
        hit = None
        doclink = url.startswith(self.prefix)
        if doclink:
            hit = self.by_html.get(path[len(self.prefix):] or "index.html")
        elif path and not re.match(r"^[a-z][a-z0-9+.-]*:|^/", path):
            resolved = (page.src.parent / path).resolve()
            hit = self.by_src.get(resolved)
            if hit is None and path.endswith(".html"):
                hit = self.by_html.get(str(PurePosixPath(*page.md.parent.parts, path)))
                if hit is None:
                    norm = os.path.normpath(str(PurePosixPath(*page.md.parent.parts, path)))
                    hit = self.by_html.get(norm)
        if hit is None: return None
        rel = PurePosixPath(os.path.relpath(str(hit.md), str(page.md.parent) or ".")).as_posix() + frag
        if doclink and frag: self.doclinks.add((page.md, rel))
        return rel

    def link_exports(self, text: str, page: Page) -> str:
        """Backticked `lib.module.NAME` that nbdev left unlinked (its index has no constants) -> the entry on
        the page that documents NAME."""
        def sub(m):
            hit = self.exports.get((m.group(1), m.group(2)))
            if hit is None: return m.group(0)
            rel = PurePosixPath(os.path.relpath(str(hit.md), str(page.md.parent) or ".")).as_posix()
            return f"[`{m.group(1)}.{m.group(2)}`]({rel}#{m.group(2).lower()})"
        return re.sub(r"(?<!\[)`(\w+(?:\.\w+)*)\.(\w+)`(?!\])", sub, text)

    def drop_dead_anchors(self, texts: dict) -> dict:
        """nbdev links every symbol it knows, private helpers too; a link to a symbol the target page does
        not document (no show_doc entry) becomes plain text instead of a dead anchor."""
        anchors = {md: _anchors(t) for md, t in texts.items()}
        def fix(md, m):
            link = m.group(2)
            if (md, link) not in self.doclinks: return m.group(0)
            target, _, frag = link.partition("#")
            tmd = PurePosixPath(os.path.normpath(str(PurePosixPath(*md.parent.parts, target)))) if target else md
            if frag in anchors.get(tmd, ()): return m.group(0)
            log(f"note: {md}: {m.group(1)} links to {link}, which documents no such entry; left unlinked")
            return m.group(1)
        return {md: re.sub(r"\[([^\]]*)\]\(([^)\s]+)\)", lambda m: fix(md, m), t) for md, t in texts.items()}

    def __call__(self, text: str, page: Page) -> str:
        def sub(m):
            new = self.target(m.group(2), page)
            return f"]({new if new is not None else m.group(2)}{m.group(3) or ''})"
        return re.sub(r"\]\((<?)([^)\s>]+)>?(\s+\"[^\"]*\")?\)", lambda m: sub(m), text)


def _anchors(text: str) -> set:
    "Ids a Markdown page will have: explicit `{ #id }` attributes and the toc slugs of its headings."
    from markdown.extensions.toc import slugify
    ids = set(re.findall(r"\{[^}\n]*#([^\s}]+)[^}\n]*\}", text))
    for h in re.findall(r"^#{1,6}\s+(.+?)\s*$", text, re.M):
        ids.add(slugify(re.sub(r"\{[^}]*\}\s*$", "", h).strip().replace("`", ""), "-"))
    return ids


def _indent(text: str) -> str: return "\n".join("    " + line for line in text.splitlines())


_CALLOUT = re.compile(r"^:::+\s*\{\.callout-(\w+)[^}]*\}\s*\n(.*?)^:::+\s*$", re.M | re.S)


def fix_markdown(text: str, page: Page, links: Links) -> str:
    text = re.sub(r"<!-- WARNING: THIS FILE WAS AUTOGENERATED! DO NOT EDIT! -->\s*", "", text)
    text = re.sub(r"\[`(%s)`\]\([^)\s]*#\1\)" % "|".join(UNLINKED), r"`\1`", text)
    text = links.link_exports(links(text, page), page)
    text = re.sub(r"(\]\([^)]*\))\{[^}\n]*\}", r"\1", text)       # Pandoc link attributes: plain links
    text = _CALLOUT.sub(lambda m: f"!!! {m.group(1)}\n\n" + _indent(m.group(2)) + "\n", text)  # Quarto callouts
    # display math on its own lines needs blank lines around it to be a block for arithmatex
    text = re.sub(r"(?m)(?<!\n\n)^(\s*\$\$)", r"\n\1", text)
    text = re.sub(r"(?ms)^(\s*\$\$.*?\$\$\s*)$(?!\n\n)", r"\1\n", text)
    return text


# ---------------------------------------------------------------------------------------------------
# 2d. notebook -> Markdown

def _directives(source: str) -> tuple[dict, str]:
    opts, body = {}, []
    for line in source.splitlines():
        m = re.match(r"^\s*#\|\s*([\w-]+)\s*:?\s*(.*)$", line)
        if m: opts[m.group(1).lower()] = m.group(2).strip().strip("\"'")
        else: body.append(line)
    return opts, "\n".join(body).strip("\n")


def _fence(text: str, lang: str = "", attrs: str = "") -> str:
    ticks = "`" * max(3, max((len(m) for m in re.findall(r"`{3,}", text)), default=0) + 1)
    head = f"{ticks} {{ .{lang} {attrs} }}" if attrs else f"{ticks}{lang}"
    return f"{head}\n{text.rstrip()}\n{ticks}"


def _false(v) -> bool: return str(v).lower() in ("false", "no", "0")


class ShowDoc:
    "Render nbdev `show_doc(...)` cells, and API entries, from the installed package."
    def __init__(self):
        from nbdev.showdoc import show_doc
        self.show_doc = show_doc

    def namespace(self, modules: list[str]) -> dict:
        ns = {}
        for m in reversed(modules): ns.update(vars(importlib.import_module(m)))
        ns["show_doc"] = self.show_doc
        return ns

    @staticmethod
    def is_show_doc(body: str) -> bool:
        try: tree = ast.parse(body)
        except SyntaxError: return False
        return bool(tree.body) and all(isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
                                       and getattr(s.value.func, "id", None) == "show_doc" for s in tree.body)

    def card(self, obj, md: str) -> tuple[str, str | None]:
        "nbdev's show_doc Markdown as a framed entry; the heading gets nbdev's anchor (lower-cased name)."
        anchor = None
        md = re.sub(r"^---\s*\n", "", md.lstrip())
        line = ""
        try: line = f"#L{inspect.getsourcelines(inspect.unwrap(obj))[1]}"
        except (TypeError, OSError): pass
        md = re.sub(r"\[source\]\(([^)#]*)(?:#L\w+)?\)\{[^}]*\}",
                    lambda m: f"[source]({m.group(1)}{line}){{ .sentcl-source }}", md)
        def head(m):
            nonlocal anchor
            anchor = anchor or m.group(2).strip().lower()
            return f"{m.group(1)} {m.group(2).strip()} {{ #{m.group(2).strip().lower()} }}"
        md = re.sub(r"^(#{2,6}) (\S+)\s*$", head, md, count=1, flags=re.M)
        if inspect.isclass(obj): md = re.sub(r"^def (\w+)\(", r"class \1(", md, count=1, flags=re.M)
        return f'<div class="sentcl-api" markdown>\n\n{md.strip()}\n\n</div>', anchor

    def render_cell(self, body: str, ns: dict) -> tuple[list[str], list[str]]:
        blocks, anchors = [], []
        for stmt in ast.parse(body).body:
            call = stmt.value
            obj = eval(compile(ast.Expression(call.args[0]), "<show_doc>", "eval"), ns) if call.args else None
            res = eval(compile(ast.Expression(call), "<show_doc>", "eval"), ns)
            block, anchor = self.card(obj, res._repr_markdown_())
            blocks.append(block)
            if anchor: anchors.append(anchor)
        return blocks, anchors

    def constant(self, module: str, name: str) -> str:
        "An exported value that is not a function or class: its assignment in the source, and its type."
        mod = importlib.import_module(module)
        obj = getattr(mod, name)
        if callable(obj) and not isinstance(obj, (dict, list, tuple)):
            return self.card(obj, self.show_doc(obj, name=name)._repr_markdown_())[0]
        src = inspect.getsource(mod)
        text = None
        for node in ast.parse(src).body:
            if name in _defined_names(node) and isinstance(node, (ast.Assign, ast.AnnAssign)):
                lines = src.splitlines()[node.lineno - 1:node.end_lineno]
                text = "\n".join(lines[:12] + (["..."] if len(lines) > 12 else []))
                break
        text = text or f"{name} = {obj!r}"[:600]
        return (f'<div class="sentcl-api" markdown>\n\n### {name} {{ #{name.lower()} }}\n\n'
                f'{_fence(text, "python")}\n\n*{type(obj).__name__}* exported by `{module}`.\n\n</div>')


def _summary(module: str, name: str) -> tuple[str, str]:
    "Kind and one-line summary: the docstring's first line, or a constant's trailing comment."
    mod = importlib.import_module(module)
    obj = getattr(mod, name)
    kind = "class" if inspect.isclass(obj) else "function" if callable(obj) else type(obj).__name__
    if kind in ("class", "function"): doc = (inspect.getdoc(obj) or "").strip().split("\n")[0]
    else:
        m = re.search(rf"^{re.escape(name)}\s*(?::[^=\n]*)?=.*?#\s*(.+)$", inspect.getsource(mod), re.M)
        doc = m.group(1).strip() if m else ""
    return kind, doc.replace("|", "\\|")


def convert_notebook(page: Page, links: Links, showdoc: ShowDoc) -> str:
    nb = nbformat.read(page.proc or page.src, as_version=4)
    fm = _front_matter(nb)
    ns = showdoc.namespace(page.modules) if page.modules else None
    out = [f"# {fm.get('title') or page.title}"]
    if fm.get("description"): out.append(f"> {fm['description']}")
    files_dir = PurePosixPath(page.md.stem + "_files")
    shown, n_img = [], 0
    for i, cell in enumerate(nb.cells):
        if i == 0 and fm: continue
        tags = set(cell.get("metadata", {}).get("tags", []))
        if "remove-cell" in tags or "remove_cell" in tags: continue
        if cell.cell_type == "markdown":
            text = cell.source
            for name, data in (cell.get("attachments") or {}).items():
                for mime, b64 in data.items():
                    if mime.startswith("image/"):
                        n_img += 1
                        target = files_dir / f"attachment_{n_img}_{name}"
                        _write_b64(MD / page.md.parent / target, b64)
                        text = text.replace(f"attachment:{name}", str(target))
            out.append(fix_markdown(text, page, links))
            continue
        if cell.cell_type == "raw":
            fmt = cell.get("metadata", {}).get("raw_mimetype", "") or cell.get("metadata", {}).get("format", "")
            if fmt in ("text/markdown", "text/html"): out.append(cell.source)
            continue
        opts, body = _directives(cell.source)
        if _false(opts.get("include", True)): continue
        echo = not (_false(opts.get("echo", True)) or tags & {"remove-input", "remove_input", "hide-input"})
        show_out = not (_false(opts.get("output", True)) or tags & {"remove-output", "remove_output"})
        if ns is not None and not cell.get("outputs") and ShowDoc.is_show_doc(body):
            try:
                blocks, anchors = showdoc.render_cell(body, ns)
                out.extend(blocks); shown.extend(anchors)
            except Exception as e:  # a show_doc of a notebook-only name: say so in the log, keep the page
                log(f"warning: {page.src.name}: could not render `{body}`: {type(e).__name__}: {e}")
            continue
        if echo and body.strip():
            lang = "sh" if body.lstrip().startswith(("!", "%%bash", "%%sh")) else "python"
            code = _fence(body, lang)
            if str(opts.get("code-fold", "")).lower() in ("true", "show"):
                code = '??? note "Code"\n\n' + _indent(code)
            out.append(code)
        if not show_out: continue
        stream = []
        for o in cell.get("outputs", []):
            if o.output_type == "stream":
                if o.name == "stdout": stream.append(o.text)
                continue
            if o.output_type == "error": continue
            if stream: out.append(_text_output("".join(stream))); stream = []
            data = o.get("data", {})
            mime = next((m for m in OUTPUT_ORDER if m in data), None)
            if mime is None: continue
            val = data[mime] if isinstance(data[mime], str) else "".join(data[mime])
            if mime.startswith("image/"):
                n_img += 1
                ext = {"image/png": "png", "image/svg+xml": "svg", "image/jpeg": "jpg"}[mime]
                target = files_dir / f"output_{i}_{n_img}.{ext}"
                dest = MD / page.md.parent / target
                if mime == "image/svg+xml":
                    dest.parent.mkdir(parents=True, exist_ok=True); dest.write_text(val)
                else: _write_b64(dest, val)
                cap = opts.get("fig-cap", "")
                out.append(f'<div class="sentcl-output" markdown>\n\n![{cap or "figure"}]({target})\n\n'
                           + (f"*{cap}*\n\n" if cap else "") + "</div>")
            elif mime == "text/markdown": out.append(fix_markdown(val, page, links))
            elif mime == "text/html": out.append(f'<div class="sentcl-output">\n{val.strip()}\n</div>')
            elif mime == "text/latex": out.append(val)
            else: out.append(_text_output(val))
        if stream: out.append(_text_output("".join(stream)))
    if page.api: out.append(api_section(page, set(shown), showdoc))
    return "\n\n".join(s.strip("\n") for s in out if s.strip()) + "\n"


def _text_output(text: str) -> str:
    return f'<div class="sentcl-output" markdown>\n\n{_fence(text, "text")}\n\n</div>'


def _write_b64(dest: Path, b64: str):
    import base64
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(base64.b64decode(b64 if isinstance(b64, str) else "".join(b64)))


def api_section(page: Page, shown: set, showdoc: ShowDoc) -> str:
    "The page's API reference: every `__all__` name this notebook defines, linked to its entry."
    mods = sorted({m for m, _ in page.api})
    lines = ["## API reference { #api-reference }", "",
             "Everything " + ", ".join(f"`{m}`" for m in mods) + " exports (`__all__`) from this notebook; "
             "entries not shown above follow the table.", "",
             "| name | kind | summary |", "|---|---|---|"]
    rest = []
    for module, name in page.api:
        kind, doc = _summary(module, name)
        lines.append(f"| [`{name}`](#{name.lower()}) | {kind} | {doc} |")
        if name.lower() not in shown: rest.append(showdoc.constant(module, name))
    return "\n".join(lines) + ("\n\n" + "\n\n".join(rest) if rest else "")


def convert_markdown(page: Page, links: Links) -> str:
    text = page.src.read_text()
    if not re.search(r"^#\s", text, re.M): text = f"# {page.title}\n\n{text}"
    return fix_markdown(text, page, links)


# ---------------------------------------------------------------------------------------------------
# 2e. assets, config, mkdocs

def npm_package(name: str, version: str) -> Path:
    "The files of an npm package (`npm pack`, then unpacked), cached under build/docs-cache/."
    dest = NPM_CACHE / f"{name}-{version}"
    if (dest / "package" / "package.json").exists(): return dest / "package"
    dest.mkdir(parents=True, exist_ok=True)
    npm = shutil.which("npm")
    if npm is None: sys.exit(f"docs: npm is needed once to fetch {name} (served by the site, not from a CDN)")
    tgz = subprocess.run([npm, "pack", f"{name}@{version}", "--silent", "--pack-destination", str(dest)],
                         check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    with tarfile.open(dest / tgz) as tf: tf.extractall(dest, filter="data")
    return dest / "package"


def copy_assets(pages: list[Page], cfg: dict):
    shutil.copytree(DOCS / "assets", MD / "assets", dirs_exist_ok=True)
    dist = npm_package("katex", NPM_PACKAGES["katex"]) / "dist"
    kdir = MD / "assets" / "katex"
    kdir.mkdir(parents=True, exist_ok=True)
    for f in ("katex.min.js", "katex.min.css"): shutil.copy2(dist / f, kdir / f)
    shutil.copytree(dist / "fonts", kdir / "fonts", dirs_exist_ok=True)
    shim = npm_package("iframe-worker", NPM_PACKAGES["iframe-worker"]) / "shim" / "index.js"
    (MD / "assets" / "iframe-worker").mkdir(parents=True, exist_ok=True)
    shutil.copy2(shim, MD / "assets" / "iframe-worker" / "shim.js")
    # images next to the notebooks (nbs/images/...) and next to report/benchmark pages
    nbs = ROOT / cfg.get("nbs_path", "nbs")
    roots = {nbs: Path()} | {ROOT / folder: Path(folder) for _, folder, _ in EXTRA_SOURCES}
    for src_root, dest in roots.items():
        if not src_root.is_dir(): continue
        for f in src_root.rglob("*"):
            rel = f.relative_to(src_root)
            if f.suffix.lower() in ASSET_SUFFIXES and not any(p.startswith((".", "_")) for p in rel.parts) \
                    and not (src_root == nbs and rel.parts[0] in EXCLUDED_DIRS):
                (MD / dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, MD / dest / rel)


def nav(pages: list[Page]) -> list:
    home = [p for p in pages if p.section == ""]
    order = ["Library", "Guides", "Papers"]
    sections: dict[str, list[Page]] = {}
    for p in pages:
        if p.section: sections.setdefault(p.section, []).append(p)
    names = [s for s in order if s in sections] + [s for s in sections if s not in order]
    out = [{"Home": str(home[0].md)}] if home else []
    for s in names:
        ordered = sorted(sections[s], key=lambda p: p.order)
        if not any(p.group for p in ordered):
            out.append({s: [{p.title: str(p.md)} for p in ordered]}); continue
        groups: dict[str, list] = {}  # library pages grouped by package, in the order the notebooks build on each other
        for p in ordered: groups.setdefault(p.group, []).append({p.title: str(p.md)})
        out.append({s: [{g: entries} for g, entries in groups.items()]})
    return out


def write_config(pages: list[Page]) -> Path:
    cfg = {"INHERIT": os.path.relpath(DOCS / "mkdocs.yml", BUILD), "docs_dir": os.path.relpath(MD, BUILD),
           "site_dir": os.path.relpath(SITE, BUILD), "nav": nav(pages)}
    path = BUILD / "mkdocs.yml"
    path.write_text("# generated by tools/docs_build.py; edit docs/mkdocs.yml\n" + yaml.safe_dump(cfg, sort_keys=False))
    return path


def manifest(pages: list[Page]) -> dict:
    return {"pages": [{"html": p.html, "title": p.title, "section": p.section,
                       "source": str(p.src.relative_to(ROOT)), "modules": p.modules,
                       "api": [name for _, name in p.api]} for p in pages],
            "all_exports": sorted({f"{m}.{n}" for p in pages for m, n in p.api})}


def build(proc: bool = True) -> dict:
    t0 = time.time()
    cfg = settings()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if proc or not PROC.exists():
        proc_notebooks()
        log(f"nbdev processing: {time.time() - t0:.1f} s")
    symbols = module_symbols(cfg.get("lib_path", "sentcl"), cfg.get("nbs_path", "nbs"))
    pages = notebook_pages(cfg, symbols) + extra_pages()
    seen = {}
    for p in pages:
        if p.md in seen: sys.exit(f"docs: {p.src} and {seen[p.md]} would both be {p.md}; rename one (output-file)")
        seen[p.md] = p.src
    shutil.rmtree(BUILD, ignore_errors=True)
    MD.mkdir(parents=True)
    copy_assets(pages, cfg)
    links, showdoc = Links(pages, cfg), ShowDoc()
    texts = {p.md: convert_notebook(p, links, showdoc) if p.src.suffix == ".ipynb" else convert_markdown(p, links)
             for p in pages}
    for md, text in links.drop_dead_anchors(texts).items():
        (MD / md).parent.mkdir(parents=True, exist_ok=True)
        (MD / md).write_text(text)
    t1 = time.time()
    log(f"{len(pages)} pages written to {MD.relative_to(ROOT)} ({t1 - t0:.1f} s so far)")
    shutil.rmtree(SITE, ignore_errors=True)
    mkdocs = Path(sys.executable).with_name("mkdocs")
    # not -q: mkdocs' strict mode only counts warnings it is allowed to log
    r = subprocess.run([str(mkdocs) if mkdocs.exists() else "mkdocs", "build", "--strict", "-f",
                        str(write_config(pages))], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    for line in (r.stdout + r.stderr).splitlines():
        if line.strip() and not line.startswith("INFO"): print(f"docs: mkdocs: {line}", flush=True)
    if r.returncode: sys.exit(f"docs: mkdocs build failed (exit {r.returncode}): a broken link or anchor above")
    info = manifest(pages)
    (SITE / "_docs_manifest.json").write_text(json.dumps(info, indent=1))
    log(f"{len(pages)} pages -> {SITE.relative_to(ROOT)}/ in {time.time() - t0:.1f} s "
        f"(mkdocs {time.time() - t1:.1f} s)")
    return info


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-proc", action="store_true", help="reuse _proc/ from an earlier run")
    ap.add_argument("--with-experiments", action="store_true", help="also make pages of nbs/experiments/ notebooks")
    args = ap.parse_args()
    if args.with_experiments: EXCLUDED_DIRS.discard("experiments")
    build(proc=not args.no_proc)
