"""The docs site in a real browser: headless Chromium opens every page of _site/ served on localhost.

Checks per page: no broken internal link (file and anchor), no missing image, math typeset by KaTeX
(no raw `$$` or `\\(` left in the visible text, no KaTeX error), every API entry present on the
module pages, no browser console error; over the whole run: no request left localhost and no local
request failed. Screenshots of the home page (top and its figure), a module page and a paper page go to
_site/_screens/.

`make docs` builds _site/ (and installs Debian's chromium + chromium-driver when missing); this
test reuses it, or builds it when it is missing or older than its sources. Without a browser the test
is skipped, except in CI (CI=true) or with SENTCL_REQUIRE_BROWSER=1, where that is a failure.
"""
from __future__ import annotations

import functools
import html.parser
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_site"
SCREENS = SITE / "_screens"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
LOCAL_SCHEMES = {"data", "blob", "about", "file", "chrome", "devtools"}


def _need_browser():
    if Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists():
        try:
            import selenium  # noqa: F401
            return
        except ImportError: why = "selenium is not installed (pip install -e '.[dev]')"
    else: why = "chromium/chromedriver missing (make docs installs Debian's chromium and chromium-driver)"
    if os.environ.get("CI", "").lower() == "true" or os.environ.get("SENTCL_REQUIRE_BROWSER") == "1": pytest.fail(why)
    pytest.skip(why)


# ---------------------------------------------------------------------------------------------------
# fixtures: the built site, a localhost server, one browser

SOURCES = ("nbs", "sentcl", "docs", "reports", "report", "results", "benchmarks", "tools/docs_build.py", "settings.ini")


def _newest_source() -> float:
    "Newest mtime of the files and folders the site is built from (a folder's changes when a file goes)."
    times = []
    for name in SOURCES:
        p = ROOT / name
        if p.exists():
            times += [p.stat().st_mtime] + [q.stat().st_mtime for q in p.rglob("*") if "__pycache__" not in q.parts]
    return max(times)


@pytest.fixture(scope="module")
def site() -> dict:
    manifest = SITE / "_docs_manifest.json"
    if not manifest.exists() or manifest.stat().st_mtime < _newest_source():  # missing or stale: build it
        subprocess.run([sys.executable, str(ROOT / "tools" / "docs_build.py")], cwd=ROOT, check=True)
    return json.loads(manifest.read_text())


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *a): pass


@contextmanager
def serve(directory: Path):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(directory)))
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try: yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown(); httpd.server_close()


@contextmanager
def chromium():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    profile = tempfile.mkdtemp(prefix="sentcl-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-quic",
                 "--no-first-run", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                 "--no-proxy-server", "--disable-extensions", "--window-size=1280,1000", f"--user-data-dir={profile}",
                 # no name ever resolves except the local ones: a stray external URL is logged and fails here,
                 # and no DNS query or connection leaves the machine
                 "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1"):
        opts.add_argument(flag)
    opts.add_argument("--allow-file-access-from-files")
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(60)
    # The browser's own start-up tab (Debian's default search engine start page; its name does not
    # resolve, see --host-resolver-rules) is not the site's: drop its log entries before the checks.
    driver.get("about:blank")
    time.sleep(0.5)
    driver.get_log("performance"); driver.get_log("browser")
    try: yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    _need_browser()
    with chromium() as driver: yield driver


@pytest.fixture(scope="module")
def base_url(site):
    with serve(SITE) as url: yield url


# ---------------------------------------------------------------------------------------------------
# the checks, as functions that return a list of problems (so a broken site can be shown to fail)

class _Ids(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(); self.ids = set()
    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k in ("id", "name") and v: self.ids.add(v)


@functools.lru_cache(None)
def _ids(path: Path) -> frozenset:
    p = _Ids(); p.feed(path.read_text(errors="replace")); return frozenset(p.ids)


def _local_file(root: Path, base_url: str, url: str) -> Path | None:
    "The file under `root` that a same-site URL serves (None for other sites)."
    if not url.startswith(base_url): return None
    path = unquote(urlsplit(url).path)[len(urlsplit(base_url).path):]
    f = root / path
    return f / "index.html" if f.is_dir() else f


def wait_ready(driver, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        state = driver.execute_script(
            "return [document.readyState, document.querySelectorAll('.arithmatex').length,"
            " document.querySelectorAll('.arithmatex[data-katex=done]').length]")
        if state[0] == "complete" and state[1] == state[2]: return
        time.sleep(0.1)


VISIBLE_TEXT_JS = """
const skip = new Set(['PRE', 'CODE', 'SCRIPT', 'STYLE', 'TEXTAREA', 'NOSCRIPT']);
const out = [];
const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
while (walk.nextNode()) {
  let el = walk.currentNode.parentElement, hide = false;
  while (el) {
    if (skip.has(el.tagName) || el.classList.contains('katex')) { hide = true; break; }
    el = el.parentElement;
  }
  if (!hide) out.push(walk.currentNode.textContent);
}
return out.join(' ');
"""


def check_page(driver, root: Path, base_url: str, rel: str, api: list[str] = ()) -> list[str]:
    url = urljoin(base_url, rel)
    driver.get(url)
    wait_ready(driver)
    problems = []
    for href in driver.execute_script("return Array.from(document.querySelectorAll('a[href]')).map(a => a.href)"):
        f = _local_file(root, base_url, href)
        if f is None: continue
        frag = unquote(urlsplit(href).fragment)
        if not f.exists(): problems.append(f"{rel}: broken link {href}")
        elif frag and f.suffix == ".html" and frag not in _ids(f): problems.append(f"{rel}: missing anchor {href}")
    for src in driver.execute_script(
            "return Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0)"
            ".map(i => i.currentSrc || i.src)"):
        problems.append(f"{rel}: image not loaded {src}")
    math = driver.execute_script(
        "return [document.querySelectorAll('.arithmatex').length,"
        " document.querySelectorAll('.arithmatex .katex').length, document.querySelectorAll('.katex-error').length]")
    if math[0] != math[1]: problems.append(f"{rel}: {math[0] - math[1]} of {math[0]} formulas not typeset")
    if math[2]: problems.append(f"{rel}: {math[2]} KaTeX errors")
    text = driver.execute_script(VISIBLE_TEXT_JS)
    for raw in ("$$", "\\(", "\\[", "$\\"):
        if raw in text:
            i = text.index(raw)
            problems.append(f"{rel}: raw TeX {raw!r} in the visible text: ...{text[max(0, i - 60):i + 60]!r}...")
    for name in api:
        if not driver.execute_script("return !!document.getElementById(arguments[0])", name.lower()):
            problems.append(f"{rel}: no API entry for {name}")
    for entry in driver.get_log("browser"):
        if entry.get("level") == "SEVERE": problems.append(f"{rel}: console: {entry.get('message')}")
    return problems


def network_problems(driver, base_url: str) -> tuple[list[str], int]:
    "Every request the pages made since the last call: outside localhost, or failed on localhost."
    problems, n, urls = [], 0, {}
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        params = msg.get("params", {})
        if msg["method"] == "Network.requestWillBeSent":
            n += 1
            urls[params["requestId"]] = params["request"]["url"]
            u = urlsplit(params["request"]["url"])
            if u.scheme not in LOCAL_SCHEMES and u.hostname not in LOCAL_HOSTS:
                problems.append(f"request left localhost: {params['request']['url']}")
        elif msg["method"] == "Network.responseReceived" and params["response"]["status"] >= 400:
            problems.append(f"HTTP {params['response']['status']}: {params['response']['url']}")
        elif msg["method"] == "Network.loadingFailed" and not params.get("canceled"):
            problems.append(f"request failed ({params.get('errorText')}): "
                            f"{urls.get(params.get('requestId'), params)}")
    return problems, n


# ---------------------------------------------------------------------------------------------------
# tests

def test_manifest_covers_every_export(site):
    "Every name in every sentcl module's __all__ is assigned to exactly one docs page."
    import importlib, pkgutil
    import sentcl
    exports = set()
    for m in pkgutil.walk_packages(sentcl.__path__, "sentcl."):
        if m.name.split(".")[-1].startswith("_"): continue
        mod = importlib.import_module(m.name)
        exports |= {f"{m.name}.{n}" for n in getattr(mod, "__all__", [])}
    assert exports and set(site["all_exports"]) == exports
    htmls = [p["html"] for p in site["pages"]]
    assert len(htmls) == len(set(htmls)) and "index.html" in htmls
    assert any(p["section"] == "Papers" for p in site["pages"]), "no paper pages"


def test_every_page_in_the_browser(site, browser, base_url):
    pages = site["pages"]
    home = urljoin(base_url, "index.html")
    browser.get(home); wait_ready(browser)
    nav = {urlsplit(h).path.lstrip("/") for h in browser.execute_script(
        "return Array.from(document.querySelectorAll('nav.md-nav--primary a[href]')).map(a => a.href)")}
    missing_nav = [p["html"] for p in pages if p["html"] not in nav]
    assert not missing_nav, f"pages missing from the navigation: {missing_nav}"
    on_disk = {str(p.relative_to(SITE)) for p in SITE.rglob("*.html")} - {"404.html"}
    assert on_disk == {p["html"] for p in pages}, "pages on disk and in the manifest differ"

    problems = []
    for p in pages: problems += check_page(browser, SITE, base_url, p["html"], p["api"] if p["modules"] else [])
    net, n_requests = network_problems(browser, base_url)
    problems += net
    assert n_requests > len(pages), "the performance log saw no requests"
    assert not problems, "\n".join(problems)

    # the module pages really carry an API reference section
    for p in pages:
        if p["modules"] and p["api"]:
            assert "api-reference" in _ids(SITE / p["html"]), p["html"]

    SCREENS.mkdir(exist_ok=True)
    module = next((p for p in pages if p["html"] == "losses.html"), next(p for p in pages if p["modules"]))
    paper = next((p for p in pages if p["html"] == "papers/methods_pairsupcon.html"),
                 next(p for p in pages if p["section"] == "Papers"))
    for name, p in (("home", "index.html"), ("module", module["html"]), ("paper", paper["html"])):
        browser.get(urljoin(base_url, p)); wait_ready(browser)
        browser.save_screenshot(str(SCREENS / f"{name}.png"))
        assert (SCREENS / f"{name}.png").stat().st_size > 10_000
    browser.get(urljoin(base_url, "index.html")); wait_ready(browser)  # the home page's figure: loaded, in view
    width = browser.execute_script("const i = document.querySelector('img[src$=\"cpu_study.png\"]');"
                                   " if (!i) return -1;"
                                   " window.scrollTo(0, i.getBoundingClientRect().top + window.scrollY - 90);"
                                   " return i.naturalWidth")
    assert width > 0, f"the home page's CPU-study figure is {'missing' if width < 0 else 'not loaded'}"
    time.sleep(0.8)
    browser.save_screenshot(str(SCREENS / "home-figure.png"))
    browser.get(urljoin(base_url, module["html"])); wait_ready(browser)  # one API entry with its neighbours
    browser.execute_script("const e = document.querySelector('.sentcl-api');"
                           " if (e) window.scrollTo(0, e.getBoundingClientRect().top + window.scrollY - 90)")
    time.sleep(0.8)  # let the header's title swap finish
    browser.save_screenshot(str(SCREENS / "module-api.png"))


def search_hits(driver, term: str, timeout: float = 20) -> int:
    "Type `term` into material's search box and wait for results; the number of hits."
    from selenium.webdriver.common.by import By
    driver.find_element(By.CSS_SELECTOR, "label.md-search__icon, .md-search__input").click()
    driver.find_element(By.CSS_SELECTOR, "input.md-search__input").send_keys(term)
    end, hits = time.time() + timeout, 0
    while time.time() < end and not hits:
        hits = len(driver.find_elements(By.CSS_SELECTOR, ".md-search-result__item"))
        time.sleep(0.2)
    return hits


def test_search_works_offline(site, browser, base_url):
    browser.get(urljoin(base_url, "index.html")); wait_ready(browser)
    assert search_hits(browser, "margin") > 0, "offline search returned nothing for 'margin'"


def test_opens_from_file_url(site, browser):
    "No server at all: a module page from file:// still gets its CSS, its math, its images and search."
    page = next((p for p in site["pages"] if p["html"] == "losses.html"), site["pages"][0])
    base = SITE.as_uri() + "/"
    browser.get(base + page["html"]); wait_ready(browser)
    state = browser.execute_script(
        "return [document.styleSheets.length, getComputedStyle(document.querySelector('.md-header')).position,"
        " document.querySelectorAll('.arithmatex').length, document.querySelectorAll('.arithmatex .katex').length,"
        " Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0).length]")
    assert state[0] >= 2 and state[1] in ("sticky", "fixed") and state[2] == state[3] and state[4] == 0, state
    assert search_hits(browser, "temperature") > 0, "search from file:// returned nothing"


def test_the_checker_fails_on_a_broken_site(browser, tmp_path):
    "The checks above can fail: a page with a broken link, a missing image, raw TeX and an external request."
    (tmp_path / "ok.html").write_text("<html><body><p id='here'>fine</p></body></html>")
    (tmp_path / "bad.html").write_text(
        "<html><body><a href='ok.html#here'>good</a> <a href='gone.html'>broken</a> <a href='ok.html#nowhere'>x</a>"
        "<img src='missing.png'> <img src='http://docs-test.invalid/pixel.png'><p>$$x^2$$</p></body></html>")
    browser.get_log("performance")  # drop earlier entries
    with serve(tmp_path) as url:
        problems = check_page(browser, tmp_path, url, "bad.html", api=["info_nce"])
        time.sleep(0.5)
        net, _ = network_problems(browser, url)
    text = "\n".join(problems + net)
    for expected in ("broken link", "missing anchor", "image not loaded", "raw TeX", "no API entry",
                     "request left localhost: http://docs-test.invalid/pixel.png", "HTTP 404"):
        assert expected in text, f"{expected!r} not reported:\n{text}"
    assert "ok.html#here" not in text
