"""The book: it builds warning-clean with every notebook executed, and every page works offline.

* The build. ``make book`` runs ``jupyter-book build . -W`` (every warning is an error, every
  notebook executed) and marks success with ``_build/html/.book-built``. ``make test`` builds the
  book from nbval's runs of the chapters (each chapter runs once) before these tests, which reuse
  that build; run on their own, they rebuild it (``make book``) whenever any source is newer than
  the mark.
* The browser. Each page is served from ``_build/html`` on 127.0.0.1 and opened in headless
  Chromium (Debian's ``chromium``), driven through the DevTools protocol over a pipe (no driver,
  no extra package). Every request a page makes is recorded; all must go to 127.0.0.1. Chromium's
  host resolver maps every other name to nothing, so even a regression cannot reach the network.
  On each page: images loaded (``naturalWidth > 0``), MathJax typeset the math, the widgets that a
  page embeds rendered, no script error.
"""

from __future__ import annotations

import base64
import fcntl
import functools
import html
import http.server
import itertools
import json
import os
import re
import select
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
BUILT = HTML / ".book-built"
SOURCES = ["_config.yml", "_toc.yml", "book", "notebooks", "src/gemm_course", "results", "scripts"]
SKIP_PARTS = {"_vendor", "__pycache__", ".ipynb_checkpoints"}

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--metrics-recording-only",
    "--mute-audio",
    "--hide-scrollbars",
    # Nothing but loopback resolves: a request for any other host fails inside the browser.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
    "--window-size=1280,900",
]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
LOCAL_SCHEMES = {"data", "blob", "about"}


# ---------------------------------------------------------------------------------------------
# the build
# ---------------------------------------------------------------------------------------------


def _newest_source_mtime() -> float:
    newest = 0.0
    for name in SOURCES:
        path = ROOT / name
        files = [path] if path.is_file() else (p for p in path.rglob("*") if p.is_file()) if path.exists() else []
        for f in files:
            if SKIP_PARTS.isdisjoint(f.relative_to(ROOT).parts):
                newest = max(newest, f.stat().st_mtime)
    return newest


@pytest.fixture(scope="session")
def book() -> Path:
    """``_build/html``, rebuilt with ``make book`` unless a successful build is newer than every source."""
    if not BUILT.exists() or BUILT.stat().st_mtime < _newest_source_mtime():
        out = subprocess.run(["make", "book"], cwd=ROOT, capture_output=True, text=True)
        assert out.returncode == 0, f"`make book` failed:\n{(out.stdout + out.stderr)[-6000:]}"
    assert BUILT.exists()
    return HTML


def _toc_docs() -> list:
    text = (ROOT / "_toc.yml").read_text()
    return re.findall(r"^root:\s*(\S+)", text, re.M) + re.findall(r"file:\s*(\S+)", text)


def _pages(html: Path) -> list:
    return sorted(p.relative_to(html).as_posix() for p in html.rglob("*.html")
                  if not p.relative_to(html).parts[0].startswith("_"))


def test_book_built_with_every_page(book):
    pages = set(_pages(book))
    missing = [d for d in _toc_docs() if f"{d}.html" not in pages]
    assert not missing, f"pages in _toc.yml that the build did not write: {missing}"


def _normal(text: str) -> str:
    """Whitespace collapsed, typographic quotes (Sphinx's smartquotes) made plain."""
    for fancy, plain in (("\u2019", "'"), ("\u2018", "'"), ("\u201c", '"'), ("\u201d", '"')):
        text = text.replace(fancy, plain)
    return " ".join(text.split())


def _text(page: Path) -> str:
    """A page's visible text, roughly: tags dropped, entities decoded."""
    return _normal(html.unescape(re.sub(r"<[^>]+>", " ", page.read_text())))


def test_generated_content_is_in_the_pages(book):
    """The notebooks really ran: the intro's ladder table and the results table come from code."""
    from gemm_course.measure import bench
    from gemm_course.runtime.ladder import steps

    intro = _text(book / "book" / "intro.html")
    for step in steps():
        assert _normal(step.title) in intro, f"ladder table lacks {step.key}: {step.title}"
    results = _text(book / "book" / "results.html")
    records = bench.load_records(kind=None)
    for rec in records:
        assert rec["_file"] in results, f"results page lacks the record file {rec['_file']}"
    if not records:
        assert "No records yet" in results


def _chapter_sources() -> list:
    return [ROOT / f"{d}.md" for d in _toc_docs() if d.startswith("notebooks/")]


def test_chapters_are_pages_from_their_markdown_sources(book):
    """Every chapter is one MyST Markdown notebook, and its page shows its cells' outputs (here:
    what its setup cell, ``chapter.setup()``, printed about this machine)."""
    from gemm_course.runtime import arch

    chapters = _chapter_sources()
    assert chapters and sorted(chapters) == sorted(ROOT.glob("notebooks/[0-9][0-9]_*.md")), \
        "_toc.yml must list every chapter source notebooks/NN_*.md, and only those"
    for md in chapters:
        assert "chapter.setup()" in md.read_text(), f"{md.name} has no setup cell"
        page = _text(book / md.relative_to(ROOT).with_suffix(".html"))
        assert _normal(arch.machine().describe()) in page, f"{md.name}: its page lacks its setup cell's output"


def _chapter_notebooks():
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    import chapter_notebooks

    return chapter_notebooks


@pytest.mark.skipif(os.environ.get("GEMM_COURSE_CHAPTERS_RAN") != "nbval",
                    reason="checks a book built by `make test` (which sets GEMM_COURSE_CHAPTERS_RAN=nbval)")
def test_chapters_ran_once_under_nbval(book):
    """`make test`: the chapter pages show nbval's runs, taken from the book's jupyter-cache.

    nbval stored them there (``--nb-cache``); had the book run a chapter again, its own run would
    have replaced nbval's record of the same notebook."""
    from jupyter_cache import get_cache

    cache = get_cache(str(ROOT / "_build" / ".jupyter_cache"))
    reader = _chapter_notebooks()
    for md in _chapter_sources():
        record = cache.match_cache_notebook(reader.read(md))
        assert record.data.get("executed_by") == "nbval", f"{md.name}: the book ran it again ({record.data})"


def test_results_page_runs_without_records(tmp_path):
    """The results page says so, rather than failing, when results/ holds nothing."""
    import nbclient
    from myst_nb.core.read import read_myst_markdown_notebook

    nb = read_myst_markdown_notebook((ROOT / "book" / "results.md").read_text())
    env = dict(os.environ, GEMM_COURSE_RESULTS=str(tmp_path))
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=120,
                                     resources={"metadata": {"path": str(ROOT / "book")}})
    client.execute(env=env)
    text = json.dumps([c.get("outputs", []) for c in nb.cells if c.cell_type == "code"])
    assert "No records yet" in text


def _run_page(name: str, **env) -> str:
    """Execute book/NAME.md as the book does (its cells in a kernel, from book/), with ``env`` added;
    its outputs as one JSON text."""
    import nbclient
    from myst_nb.core.read import read_myst_markdown_notebook

    nb = read_myst_markdown_notebook((ROOT / "book" / f"{name}.md").read_text())
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=300,
                                     resources={"metadata": {"path": str(ROOT / "book")}})
    client.execute(env=dict(os.environ, **env))
    return json.dumps([c.get("outputs", []) for c in nb.cells if c.cell_type == "code"])


def test_the_intro_box_follows_the_records(tmp_path):
    """The intro's first screen changes by itself when a B200 record lands (here: in a results folder
    of the test's own, with one B200 record of step 2)."""
    from synthetic import bench_record

    from gemm_course.measure import b200

    assert "none has run on a B200 yet" in _run_page("intro", GEMM_COURSE_RESULTS=str(tmp_path))
    folder = tmp_path / "nvidia-b200"
    folder.mkdir()
    record = bench_record("sm100/2", 300.0, 1500.0, "2027-01-02T00:00:00+00:00", gpu="NVIDIA B200")
    (folder / "20270102T000000Z_ladder.json").write_text(json.dumps({"schema": 1, "records": [record]}))
    shown = _run_page("intro", GEMM_COURSE_RESULTS=str(tmp_path))
    assert "step 2 measured on a B200 (records of 2027-01-02)" in shown and "none has run" not in shown
    assert b200.has_b200_record("sm100/2", [dict(record, _file="x")])


def test_the_model_page_runs_here():
    """book/linear.md on this machine: every refusal it lists says what to do; the plan for each
    architecture; without a course GPU, linear's own refusal, with one, the block against F.linear."""
    from gemm_course.runtime import ladder
    from gemm_course.teaching import chapter

    shown = _run_page("linear")
    assert shown.count("refused.") == 6 and "accepted, the GEMM 32x128x64" in shown
    assert "torch.nn.functional.linear" in shown
    for arch in ("sm100", "sm90"):
        assert f"-> {arch}/" in shown and ladder.ARCH_NAMES[arch] in shown
    if chapter.runnable_arch() is None:
        assert "No course GPU here, so linear refuses" in shown
    else:
        assert "patch_linears (" in shown and "us per forward" in shown


_EXTERNAL_REF = re.compile(
    r"<(?:script|link|img|iframe|source|video|audio|embed)\b[^>]*?\b(?:src|href)=\"((?:https?:)?//[^\"]+)\"", re.I
)


def test_no_page_references_a_remote_asset(book):
    """Static check: no tag that the browser fetches by itself points off the machine."""
    bad = {}
    for page in _pages(book):
        found = _EXTERNAL_REF.findall((book / page).read_text())
        if found:
            bad[page] = found
    assert not bad, f"pages that load remote assets: {bad}"


# ---------------------------------------------------------------------------------------------
# the browser
# ---------------------------------------------------------------------------------------------


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def server(book):
    handler = functools.partial(_Quiet, directory=str(book))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


class Chromium:
    """Headless Chromium driven through the DevTools protocol on a pipe (fds 3 and 4)."""

    def __init__(self, binary: str, profile: str):
        to_r, self._to = os.pipe()  # we write, Chromium reads on fd 3
        self._from, from_w = os.pipe()  # Chromium writes on fd 4, we read
        # Chromium's ends go to fds >= 10 first, so that moving them to 3 and 4 cannot clobber either.
        ends = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_r, from_w)]
        os.close(to_r)
        os.close(from_w)
        cmd = [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"]
        shell = f'exec "$@" 3<&{ends[0]} 4>&{ends[1]} {ends[0]}<&- {ends[1]}>&-'
        self.proc = subprocess.Popen(["bash", "-c", shell, "bash", *cmd], pass_fds=ends,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for fd in ends:
            os.close(fd)
        self._buf = b""
        self._id = 0
        self.events: list = []
        self.parent: dict = {}  # session of a worker or frame target -> session of its page

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self._from], [], [], timeout)
        if not ready:
            return False
        chunk = os.read(self._from, 1 << 20)
        if not chunk:
            raise RuntimeError(f"Chromium closed the pipe: {self.proc.stderr.read().decode(errors='replace')[-3000:]}")
        self._buf += chunk
        *messages, self._buf = self._buf.split(b"\0")
        for m in messages:
            self._pending.append(json.loads(m))
        return True

    _pending: list

    def _pump(self, timeout: float):
        """Read what has arrived (waiting at most ``timeout``); responses are returned, events kept."""
        self._pending = []
        self._read(timeout)
        while self._read(0):
            pass
        responses = {}
        for msg in self._pending:
            if "id" in msg:
                responses[msg["id"]] = msg
                continue
            if msg["method"] == "Target.attachedToTarget" and msg.get("sessionId"):
                # A worker or out-of-process frame of a page: record its requests too, then let it run.
                child = msg["params"]["sessionId"]
                self.parent[child] = self.parent.get(msg.get("sessionId"), msg.get("sessionId"))
                self._post("Network.enable", {}, child)
                self._post("Target.setAutoAttach", {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True}, child)
                self._post("Runtime.runIfWaitingForDebugger", {}, child)
            msg["page"] = self.parent.get(msg.get("sessionId"), msg.get("sessionId"))
            self.events.append(msg)
        return responses

    def _post(self, method: str, params: dict, session: str | None) -> int:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self._to, json.dumps(msg).encode() + b"\0")
        return self._id

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30):
        msg_id = self._post(method, params or {}, session)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self._pump(min(0.5, max(0.0, deadline - time.monotonic())))
            if msg_id in got:
                if "error" in got[msg_id]:
                    raise RuntimeError(f"{method}: {got[msg_id]['error']}")
                return got[msg_id].get("result", {})
        raise TimeoutError(f"{method}: no answer in {timeout} s")

    def wait_event(self, method: str, session: str, timeout: float):
        deadline = time.monotonic() + timeout
        while True:
            if any(e["method"] == method and e.get("sessionId") == session for e in self.events):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {method} in {timeout} s")
            self._pump(0.2)

    def settle(self, session: str, quiet: float = 0.5, timeout: float = 10):
        """Wait until the page has sent no request for ``quiet`` seconds."""
        deadline = time.monotonic() + timeout
        count = -1
        while time.monotonic() < deadline:
            now = sum(1 for e in self.events if e["method"] == "Network.requestWillBeSent" and e["page"] == session)
            if now == count:
                return
            count = now
            t_end = time.monotonic() + quiet
            while time.monotonic() < t_end:
                self._pump(0.1)

    def evaluate(self, expression: str, session: str, timeout: float = 40):
        res = self.send("Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True,
                                             "timeout": timeout * 1000}, session, timeout=timeout + 5)
        if "exceptionDetails" in res:
            raise RuntimeError(f"page script failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    def close(self):
        try:
            self.send("Browser.close", timeout=10)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to, self._from):
            try:
                os.close(fd)
            except OSError:
                pass


# Waits for MathJax and for the widget manager, then reports what the page shows.
_INSPECT = r"""
(async () => {
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  // html-manager renders each view into a div.widget-subarea inserted just before the view's script.
  const viewTags = [...document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]')];
  const views = viewTags.length;
  const rendered = () => viewTags.filter(s => {
    const area = s.previousElementSibling;
    return area && area.classList.contains('widget-subarea') && area.querySelector(':scope > .jupyter-widgets');
  }).length;
  for (const t0 = Date.now(); views && rendered() < views && Date.now() - t0 < 30000; ) { await sleep(100); }
  await Promise.all([...document.images].map(img => img.complete ? null :
      new Promise(r => { img.addEventListener('load', r); img.addEventListener('error', r); })));
  return {
    title: document.title,
    images: [...document.images].map(i => ({src: i.src.slice(0, 120), complete: i.complete, width: i.naturalWidth})),
    mathSource: document.querySelectorAll('.math, span.math, div.math').length,
    mathTypeset: document.querySelectorAll('mjx-container').length,
    mathErrors: document.querySelectorAll('mjx-merror').length,
    widgetViews: views,
    widgetsRendered: rendered(),
    widgetElements: document.querySelectorAll('.jupyter-widgets, [class*="widget-"]').length,
    staticExplorers: document.querySelectorAll('.gemm-explorer').length,
  };
})()
"""


def _is_local(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme in LOCAL_SCHEMES or (parts.scheme in ("http", "https", "ws") and parts.hostname in LOCAL_HOSTS)


@pytest.fixture(scope="session")
def chromium():
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        message = "Debian's chromium is not installed (make test installs it when run as root)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    with tempfile.TemporaryDirectory(prefix="gemm-course-chromium-") as profile:
        browser = Chromium(binary, profile)
        try:
            browser.send("Browser.getVersion", timeout=60)
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="session")
def visits(book, server, chromium):
    """Open every page once; for each, what it showed and every request it made."""
    out = {}
    for page in _pages(book):
        target = chromium.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = chromium.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Network", "Runtime"):
            chromium.send(f"{domain}.enable", session=session)
        chromium.send("Target.setAutoAttach", {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True},
                      session)
        chromium.send("Page.navigate", {"url": f"{server}/{page}"}, session)
        chromium.wait_event("Page.loadEventFired", session, timeout=60)
        shown = chromium.evaluate(_INSPECT, session)
        chromium.settle(session)
        mine = [e for e in chromium.events if e["page"] == session]
        shown["requests"] = [e["params"]["request"]["url"] for e in mine if e["method"] == "Network.requestWillBeSent"]
        urls = {e["params"]["requestId"]: e["params"]["request"]["url"] for e in mine
                if e["method"] == "Network.requestWillBeSent"}
        shown["failed"] = [(urls.get(e["params"]["requestId"]), e["params"].get("errorText")) for e in mine
                           if e["method"] == "Network.loadingFailed" and not e["params"].get("canceled")]
        shown["bad_status"] = [(e["params"]["response"]["url"], e["params"]["response"]["status"]) for e in mine
                               if e["method"] == "Network.responseReceived" and e["params"]["response"]["status"] >= 400]
        shown["exceptions"] = [e["params"]["exceptionDetails"].get("exception", {}).get("description")
                               or e["params"]["exceptionDetails"].get("text") for e in mine
                               if e["method"] == "Runtime.exceptionThrown"]
        chromium.send("Target.closeTarget", {"targetId": target})
        chromium.events = [e for e in chromium.events if e["page"] != session]
        out[page] = shown
    return out


def test_no_request_leaves_the_machine(visits):
    remote = {page: [u for u in v["requests"] if not _is_local(u)] for page, v in visits.items()}
    remote = {page: urls for page, urls in remote.items() if urls}
    assert not remote, f"requests to other hosts: {remote}"
    empty = [page for page, v in visits.items() if not v["requests"]]
    assert not empty, f"no request recorded for {empty}: the recorder is broken"


def test_every_request_succeeds(visits):
    """Every asset a page asks for exists (the browser's own favicon probe aside: the book has none)."""
    bad = {page: [s for s in v["bad_status"] if not s[0].endswith("/favicon.ico")] + v["failed"]
           for page, v in visits.items()}
    bad = {page: b for page, b in bad.items() if b}
    assert not bad, f"failed requests: {bad}"


def test_no_script_errors(visits):
    bad = {page: v["exceptions"] for page, v in visits.items() if v["exceptions"]}
    assert not bad, f"uncaught script errors: {bad}"


def test_images_load(visits):
    bad = {page: [i for i in v["images"] if not (i["complete"] and i["width"] > 0)] for page, v in visits.items()}
    bad = {page: imgs for page, imgs in bad.items() if imgs}
    assert not bad, f"images that did not load: {bad}"
    # The pages whose code cells draw plots do show them.
    for page in ("book/intro.html", "book/primer.html"):
        assert visits[page]["images"], f"{page} shows no image"


def test_math_is_typeset(visits):
    primer = visits["book/primer.html"]
    assert primer["mathSource"] > 0, "the primer has no math at all"
    assert primer["mathTypeset"] >= primer["mathSource"], primer
    for page, v in visits.items():
        assert v["mathErrors"] == 0, f"{page}: MathJax reported errors"
        assert v["mathTypeset"] >= v["mathSource"], f"{page}: math left untypeset ({v})"


_USES_WIDGETS = re.compile(r"\bipywidgets\b|gemm_course\.widgets\b|from gemm_course import [^\n]*\bwidgets\b")


def _pages_that_build_widgets() -> list:
    """Pages whose notebook code uses ipywidgets (directly or through gemm_course.teaching.widgets)."""
    pages = []
    for doc in _toc_docs():
        path = ROOT / f"{doc}.md"  # every page's source, chapters included, is MyST Markdown
        code = "\n".join(re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", path.read_text(), re.S))
        if _USES_WIDGETS.search(code):
            pages.append(f"{doc}.html")
    return pages


def test_widgets_render(visits):
    """Every page whose notebook builds widgets embeds them, and the vendored html-manager renders them all.
    A widget that brings a static rendering of its own (the tile explorer over its precomputed table,
    gemm_course.teaching.widgets.explorer_html) is shown as that rendering instead (_config.yml:
    nb_mime_priority_overrides): a page has no kernel behind a widget."""
    for page in _pages_that_build_widgets():
        assert visits[page]["widgetViews"] or visits[page]["staticExplorers"], \
            f"{page}: its notebook builds widgets but the page embeds none"
    for page, v in visits.items():
        assert v["widgetsRendered"] == v["widgetViews"], f"{page}: {v['widgetsRendered']} of {v['widgetViews']} widgets rendered"


# ---------------------------------------------------------------------------------------------
# figures: legible at the width they are shown, inside the content column; screenshots
# ---------------------------------------------------------------------------------------------

SCREENSHOTS = ROOT / "_build" / "screenshots"  # the browser test's artefacts: look at them
SCREENSHOT_PAGES = ("book/intro.html", "notebooks/03_swizzling.html", "book/results.html")
MAX_SCREENSHOT_PX = 16000  # Chromium's limit on one capture is about 16384 pixels a side
TEXT_PT = 9  # gemm_course.viz.TEXT_PT: the smallest text a figure may show
CSS_PX_PER_IN = 96

# Every figure the viz package drew (a <figure class="gemm-figure">): where it is shown and how
# wide, against the designed width and the smallest text it carries (data-width-in, data-min-pt).
_FIGURES = r"""
(() => {
  // the content column; a page without one (the root's redirect, genindex) has no figure either
  const column = document.querySelector('article.bd-article') || document.documentElement;
  const cs = getComputedStyle(column);
  const box = column.getBoundingClientRect();
  const left = box.left + parseFloat(cs.paddingLeft), right = box.right - parseFloat(cs.paddingRight);
  // a cell tagged full-width (sphinx-book-theme) may use the margin beside the column: its own box is the limit
  const limit = e => { const wide = e.closest('.tag_full-width'); return wide ? wide.getBoundingClientRect().right : right; };
  const figures = [...document.querySelectorAll('figure.gemm-figure')].map(f => {
    const img = f.querySelector('img');
    const r = img.getBoundingClientRect(), fr = f.getBoundingClientRect();
    const cap = f.querySelector('figcaption');
    return {alt: img.getAttribute('alt'), widthIn: parseFloat(img.dataset.widthIn), minPt: parseFloat(img.dataset.minPt),
            shown: r.width, left: r.left, right: r.right, figureRight: fr.right, limit: limit(f), top: fr.top + scrollY,
            height: fr.height, natural: img.naturalWidth, displayed: img.offsetParent !== null && r.width > 0,
            caption: cap ? cap.textContent.trim() : ''};
  });
  const bare = [...document.querySelectorAll('.cell_output img')].filter(i => !i.closest('figure.gemm-figure'))
    .map(i => i.getAttribute('src').slice(0, 60));
  // every block of code, output or table: its box inside the column, and content wider than the box
  // only where the box scrolls (overflow-x auto or scroll), never spilling out or cut off
  const blocks = [...document.querySelectorAll(BLOCKS)].filter(b => b.offsetParent !== null).map(b => {
    const r = b.getBoundingClientRect(), st = getComputedStyle(b);
    // inside a box that scrolls sideways and ends inside the column, a wider block is scrolled, not spilled
    let inScroller = false;
    for (let a = b.parentElement; !inScroller && a && a !== column; a = a.parentElement) {
      const ox = getComputedStyle(a).overflowX;
      if (['auto', 'scroll'].includes(ox) && a.getBoundingClientRect().right <= limit(b) + 0.5) { inScroller = true; }
    }
    const scrolls = inScroller || ['auto', 'scroll'].includes(st.overflowX);
    return {tag: b.tagName.toLowerCase() + (b.className ? '.' + String(b.className).split(' ')[0] : ''),
            left: r.left, right: r.right, limit: limit(b), width: r.width, content: b.scrollWidth, box: b.clientWidth, scrolls,
            inScroller,
            text: (b.textContent || '').trim().slice(0, 50)};
  }).filter(b => b.width > 0);
  return {column: {left, right}, figures, bare, blocks, pageWidth: document.documentElement.scrollWidth,
          window: window.innerWidth};
})()
"""


# The blocks whose width the browser test measures: code (inputs and outputs), outputs, tables.
BLOCKS = "pre, div.highlight, div.cell_input, div.cell_output, div.output, table, .pst-scrollable-table-container"


def _screenshot(browser, session, path: Path, clip: dict):
    shot = browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                    "clip": dict(clip, scale=1)}, session, timeout=60)
    path.write_bytes(base64.b64decode(shot["data"]))


@pytest.fixture(scope="session")
def figure_visits(book, server, chromium):
    """Open every page once more (as the reader's 1280-pixel window shows it): its figures as laid out,
    and screenshots of the pages in SCREENSHOT_PAGES and of each of their figures."""
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)
    SCREENSHOTS.mkdir(parents=True)
    out = {}
    for page in _pages(book):
        if 'http-equiv="Refresh"' in (book / page).read_text():  # the root's redirect to the intro
            continue
        target = chromium.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = chromium.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime"):
            chromium.send(f"{domain}.enable", session=session)
        chromium.send("Page.navigate", {"url": f"{server}/{page}"}, session)
        chromium.wait_event("Page.loadEventFired", session, timeout=60)
        chromium.evaluate(_INSPECT, session)  # MathJax typeset, widgets rendered, images loaded
        shown = chromium.evaluate(_FIGURES.replace("BLOCKS", json.dumps(BLOCKS)), session)
        if page in SCREENSHOT_PAGES:
            stem = page.replace("/", "_").removesuffix(".html")
            size = chromium.send("Page.getLayoutMetrics", session=session)["cssContentSize"]
            height = min(size["height"], MAX_SCREENSHOT_PX)
            _screenshot(chromium, session, SCREENSHOTS / f"{stem}.png", {"x": 0, "y": 0, "width": size["width"],
                                                                          "height": height})
            for i, f in enumerate(x for x in shown["figures"] if x["displayed"]):
                _screenshot(chromium, session, SCREENSHOTS / f"{stem}-figure-{i + 1}.png",
                            {"x": shown["column"]["left"], "y": f["top"], "width": shown["column"]["right"]
                             - shown["column"]["left"], "height": min(f["height"], MAX_SCREENSHOT_PX)})
        chromium.send("Target.closeTarget", {"targetId": target})
        chromium.events = [e for e in chromium.events if e["page"] != session]
        out[page] = shown
    return out


def test_figures_are_shown_legible_inside_the_column(figure_visits):
    """Each figure is shown at a width where its smallest text is 9 pt or more (the designed width in
    CSS pixels x its smallest size / 9 at most shrinks it that far), inside the content column (or
    the wider box of a cell tagged full-width), with
    an alt text and its caption under it; no page scrolls sideways, and no output shows a bare image."""
    problems = []
    for page, v in figure_visits.items():
        for f in (f for f in v["figures"] if f["displayed"]):
            designed = f["widthIn"] * CSS_PX_PER_IN
            pt = f["minPt"] * f["shown"] / designed  # the smallest text, in CSS points, as shown
            if pt < TEXT_PT - 0.05:
                problems.append(f"{page}: {f['alt'][:60]!r} shown {f['shown']:.0f} px of {designed:.0f}: text at {pt:.1f} pt")
            if f["right"] > f["limit"] + 0.5 or f["figureRight"] > f["limit"] + 0.5 or f["left"] < v["column"]["left"] - 0.5:
                problems.append(f"{page}: {f['alt'][:60]!r} overflows the column ({f['left']:.0f}-{f['right']:.0f} px, "
                                f"column {v['column']['left']:.0f}-{v['column']['right']:.0f})")
            if not f["alt"] or f["alt"].endswith(".png") or not f["caption"]:
                problems.append(f"{page}: a figure without alt text or caption ({f['alt'][:60]!r})")
            if f["natural"] < designed:
                problems.append(f"{page}: {f['alt'][:60]!r}: its PNG is {f['natural']} px for {designed:.0f} CSS px")
        if v["bare"]:
            problems.append(f"{page}: outputs showing a bare image, not a figure: {v['bare']}")
        if v["pageWidth"] > v["window"]:
            problems.append(f"{page}: the page is {v['pageWidth']} px wide in a {v['window']} px window")
    assert not problems, "\n".join(problems)
    for page in SCREENSHOT_PAGES:
        assert [f for f in figure_visits[page]["figures"] if f["displayed"]], f"{page} shows no figure"
        assert (SCREENSHOTS / f"{page.replace('/', '_').removesuffix('.html')}.png").stat().st_size > 0


def test_code_output_and_tables_stay_inside_the_column(figure_visits):
    """At the reader's width (a 1280-pixel window), every code block, output and table ends inside the
    content column (a cell tagged full-width: inside its own, wider box); a line longer than the
    column wraps or scrolls inside its block (the block, or a block around it inside the column,
    scrolls sideways), and is never cut off or spilled over."""
    problems = []
    for page, v in figure_visits.items():
        left, right = v["column"]["left"], v["column"]["right"]
        for b in v["blocks"]:
            if not b["inScroller"] and (b["right"] > b["limit"] + 0.5 or b["left"] < left - 0.5):
                problems.append(f"{page}: {b['tag']} {b['text']!r} at {b['left']:.0f}-{b['right']:.0f} px, "
                                f"column {left:.0f}-{right:.0f}")
            elif b["content"] > b["box"] + 1 and not b["scrolls"]:
                problems.append(f"{page}: {b['tag']} {b['text']!r}: {b['content']} px of content in {b['box']} px, "
                                "neither wrapped nor scrollable")
    assert not problems, "\n".join(problems[:40])


# Machine paths: an absolute path of the build machine (its home, work or temporary folders, a
# package's install folder; `.venv/bin/...` relative to the checkout is an instruction, not one);
# warnings: a Python warning's name and colon
# as `warnings` prints it (UserWarning:, DeprecationWarning: ...).
_MACHINE_PATH = re.compile(r"(?<![\w.:/])/(?:work|home|root|tmp|usr|opt|var|private|Users|mnt|srv)/[\w.+-]+"
                           r"|site-packages|dist-packages")
_WARNING = re.compile(r"\b[A-Z]\w*Warning:")


def test_no_page_shows_a_warning_or_a_machine_path(book):
    """The built pages (prose and every executed output) carry no Python warning and no path of the
    machine that built them: what a page prints must not depend on where it was built."""
    bad = {}
    for page in _pages(book):
        text = _text(book / page)
        found = sorted(set(_WARNING.findall(text)) | set(_MACHINE_PATH.findall(text)))
        if found:
            bad[page] = found[:8]
    assert not bad, f"pages with warnings or machine paths: {bad}"


def test_the_page_checks_catch_warnings_and_paths():
    """The two patterns match what a stray warning prints, and not the course's own relative paths."""
    stray = "/home/reader/course/src/gemm_course/viz/_style.py:168: UserWarning: constrained_layout not applied"
    assert _WARNING.findall(stray) == ["UserWarning:"] and _MACHINE_PATH.search(stray)
    assert _MACHINE_PATH.search("from /root/.venv/lib/python3.11/site-packages/cutlass")
    for fine in ("results/nvidia-h200/20261201T145305Z_ladder.json", "gemm_course/viz/_style.py", "a 128/256 split",
                 ".venv/bin/gemm-course doctor",
                 "see https://github.com/jakubcerveny/gilbert", "bar.sync 1/2"):
        assert not _MACHINE_PATH.search(fine) and not _WARNING.search(fine), fine


# ---------------------------------------------------------------------------------------------
# the intro's first screen: what runs where, and where to start (issues 33 and 42)
# ---------------------------------------------------------------------------------------------

_FIRST_BOX = r"""
(() => {
  const box = document.querySelector('main .admonition');
  if (!box) { return null; }
  const r = box.getBoundingClientRect();
  const link = [...box.querySelectorAll('a')].map(a => a.getAttribute('href'));
  return {top: r.top, bottom: r.bottom, height: window.innerHeight, text: box.innerText, links: link,
          before: [...document.querySelectorAll('section h2')].filter(h => h.getBoundingClientRect().top < r.top).length};
})()
"""


def test_the_intro_first_screen_says_what_runs_where(book, server, chromium):
    """In the reader's 1280 x 900 window, the intro's first box, before any section, lies wholly on
    the first screen and says what runs where (the records' status) and to start with Setup."""
    from gemm_course.measure import b200

    target = chromium.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = chromium.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    try:
        for domain in ("Page", "Runtime"):
            chromium.send(f"{domain}.enable", session=session)
        chromium.send("Page.navigate", {"url": f"{server}/book/intro.html"}, session)
        chromium.wait_event("Page.loadEventFired", session, timeout=60)
        box = chromium.evaluate(_FIRST_BOX, session)
    finally:
        chromium.send("Target.closeTarget", {"targetId": target})
        chromium.events = [e for e in chromium.events if e["page"] != session]
    assert box, "the intro shows no box"
    assert box["before"] == 0 and 0 <= box["top"] and box["bottom"] <= box["height"], box
    text = _normal(box["text"])
    assert "Blackwell" in text and "Hopper" in text and "Setup" in text
    assert ("none has run on a B200 yet" in text) == (not b200.has_b200_record()), text
    assert any(href and href.split("#")[0].endswith("setup.html") for href in box["links"]), box["links"]


# ---------------------------------------------------------------------------------------------
# the tile explorer in the static page (chapter 3): choosing changes what it shows
# ---------------------------------------------------------------------------------------------

EXPLORER_PAGE = "notebooks/03_swizzling.html"

# Waits for the explorer's script, then chooses each (step, {knob: value}) of PLAN as a reader
# would (the select's value set, its change event fired) and reads what the explorer shows after each.
_EXPLORER = r"""
(async () => {
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  for (const t0 = Date.now(); !document.querySelector('.gemm-explorer[data-ready]') && Date.now() - t0 < 20000; ) {
    await sleep(100);
  }
  const root = document.querySelector('.gemm-explorer[data-ready]');
  if (!root) { return null; }
  const stepBox = root.querySelector('select.gemm-explorer-step');
  const shown = () => {
    const facts = {};
    root.querySelectorAll('.gemm-explorer-facts [data-fact]').forEach(e => { facts[e.dataset.fact] = e.textContent; });
    const mix = {};
    root.querySelectorAll('.gemm-explorer-mix tr[data-class]').forEach(tr => {
      mix[tr.dataset.class] = Number(tr.cells[1].textContent);
    });
    const knobs = {};
    root.querySelectorAll('.gemm-explorer-knobs select').forEach(b => {
      knobs[b.name] = {value: JSON.parse(b.value), options: [...b.options].map(o => o.textContent)};
    });
    return {selected: root.dataset.selected, step: stepBox.value, knobs, facts, mix,
            measured: [...root.querySelectorAll('.gemm-explorer-measured tr[data-shape]')]
              .map(tr => [tr.dataset.shape, tr.querySelector('[data-fact=tflops]').textContent])};
  };
  const choose = (box, value) => { box.value = value; box.dispatchEvent(new Event('change', {bubbles: true})); };
  const states = [shown()];
  for (const [step, knobs] of PLAN) {
    if (stepBox.value !== step) { choose(stepBox, step); }
    for (const [name, value] of Object.entries(knobs)) {
      choose(root.querySelector('.gemm-explorer-knobs select[name="' + name + '"]'), JSON.stringify(value));
    }
    states.push(shown());
  }
  stepBox.focus();
  window.gemmExplorerShown = shown;
  return {data: JSON.parse(root.querySelector('script.gemm-explorer-data').textContent), states,
          explorers: document.querySelectorAll('.gemm-explorer').length,
          widgetViews: document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]').length};
})()
"""


def _explorer_plan() -> list:
    """What the test chooses: a Blackwell config other than the default, a Hopper combination its
    step refuses, a step with recorded TFLOP/s at its default, and the naive step resized."""
    from gemm_course.runtime import ladder
    from gemm_course.teaching import widgets

    def values(step, config):
        return dict(zip((n for n, _ in step.knobs), widgets.knob_values(step, config)))

    sm100 = ladder.get("sm100/6")
    other = [c for c in sm100.knob_grid() if c != sm100.default][-1]
    sm90 = ladder.get("sm90/4")
    names = [n for n, _ in sm90.knobs]
    bad = next(c for c in (sm90.config(**dict(zip(names, v))) for v in itertools.product(*(v for _, v in sm90.knobs)))
               if not sm90.check_config(c)[0])
    naive = ladder.get("sm90/1")
    return [("sm100/6", values(sm100, other)), ("sm90/4", values(sm90, bad)),
            ("sm90/10", values(ladder.get("sm90/10"), ladder.get("sm90/10").default)),
            ("sm90/1", values(naive, [c for c in naive.knob_grid() if c != naive.default][0]))]


@pytest.fixture(scope="session")
def explorer(book, server, chromium):
    """Chapter 3's static explorer, driven by _EXPLORER; then ArrowDown pressed on its step select."""
    plan = _explorer_plan()
    target = chromium.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = chromium.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    try:
        for domain in ("Page", "Network", "Runtime"):
            chromium.send(f"{domain}.enable", session=session)
        chromium.send("Page.navigate", {"url": f"{server}/{EXPLORER_PAGE}"}, session)
        chromium.wait_event("Page.loadEventFired", session, timeout=60)
        got = chromium.evaluate(_EXPLORER.replace("PLAN", json.dumps(plan)), session)
        assert got, f"{EXPLORER_PAGE}: no static explorer became ready"
        key = {"key": "ArrowDown", "code": "ArrowDown", "windowsVirtualKeyCode": 40, "nativeVirtualKeyCode": 40}
        for kind in ("keyDown", "keyUp"):
            chromium.send("Input.dispatchKeyEvent", dict(key, type=kind), session)
        got["after_key"] = chromium.evaluate("window.gemmExplorerShown()", session)
        got["plan"] = plan
        mine = [e for e in chromium.events if e["page"] == session]
        got["exceptions"] = [e["params"]["exceptionDetails"].get("text") for e in mine
                             if e["method"] == "Runtime.exceptionThrown"]
        got["requests"] = [e["params"]["request"]["url"] for e in mine if e["method"] == "Network.requestWillBeSent"]
        return got
    finally:
        chromium.send("Target.closeTarget", {"targetId": target})
        chromium.events = [e for e in chromium.events if e["page"] != session]


def _check_shown(state: dict, data: dict):
    """What the explorer shows is its table's row for the chosen configuration."""
    from gemm_course.runtime import ladder
    from gemm_course.teaching import widgets

    step = ladder.get(state["step"])
    values = [state["knobs"][n]["value"] for n, _ in step.knobs]
    key = widgets.config_key(step, values)
    assert state["selected"] == key
    row = data["rows"][key]
    f = state["facts"]
    if not row["ok"]:
        assert "invalid" in f and row["reason"] in f["invalid"], (key, f)
        assert not state["mix"] and not state["measured"]
        return row
    assert f["config"] == row["label"] and f["target"] == row["target"] == step.target
    assert f["registers"] == str(row["registers"])
    assert f["smem_bytes"].startswith(f"{row['smem_bytes']} B (")
    assert f["spills"] == ("no" if not row["spills"] else f"yes: {row['local_bytes']} B local, {row['stack_bytes']} B stack")
    assert f["threads"] == str(row["threads"])
    assert f["ctas_per_sm"].startswith(f"{row['ctas_per_sm']}, limited by {' and '.join(row['limiter'])}")
    assert ("tmem_columns" in f) == (step.arch == "sm100")
    if step.arch == "sm100":
        assert f["tmem_columns"].startswith(f"{row['tmem_columns']} columns")
    assert ("stages" in f) == bool(row["stages"])
    for name, count in row["stages"].items():
        assert f" {count}" in f["stages"], (name, f["stages"])
    assert state["mix"] == row["mix"]
    assert state["measured"] == [[m["shape"], f"{m['tflops']:.1f}"] for m in row["measured"]]
    if not row["measured"]:
        assert "No measurement" in f["measured"]
    return row


def test_static_explorer_shows_each_choice(explorer):
    """Choosing a step and knob values in the page changes what it shows, to the table's row of that
    configuration: resources, stages, CTAs per SM, instruction mix, recorded TFLOP/s."""
    from gemm_course.runtime import ladder

    assert explorer["explorers"] == 1 and explorer["widgetViews"] == 0, "chapter 3 shows the static explorer only"
    assert not explorer["exceptions"], explorer["exceptions"]
    assert all(_is_local(u) for u in explorer["requests"])
    data, states = explorer["data"], explorer["states"]
    first = states[0]
    assert first["step"] == "sm90/3" and _check_shown(first, data)["ok"]
    for (step, knobs), state in zip(explorer["plan"], states[1:]):
        assert state["step"] == step and {n: state["knobs"][n]["value"] for n in knobs} == knobs
        row = _check_shown(state, data)
        assert state["facts"] != first["facts"], f"choosing {step} {knobs} changed nothing"
        if not row["ok"]:  # a refused combination: the value chosen in each knob is marked
            for name, allowed in ladder.get(step).knobs:
                box = state["knobs"][name]
                assert box["options"][list(allowed).index(box["value"])].endswith("(invalid)"), (name, box)
    assert len({s["selected"] for s in states}) == len(states)
    assert [s["measured"] for s in states if s["step"] == "sm90/10"][0], "the recorded default of sm90/10 shows no TFLOP/s"
    # a key press on the step select: the next step, at its default configuration
    after = explorer["after_key"]
    keys = [s["key"] for s in data["steps"]]
    assert after["step"] == keys[keys.index(states[-1]["step"]) + 1]
    step = ladder.get(after["step"])
    assert [after["knobs"][n]["value"] for n, _ in step.knobs] == list(_default_values(step))
    _check_shown(after, data)


def _default_values(step):
    from gemm_course.teaching import widgets

    return widgets.knob_values(step, step.default)


def test_static_explorer_table_covers_both_ladders(explorer):
    """The page's table: every step of both ladders, every combination of its knobs (refused ones
    with the reason), and for each configuration the records of exactly that configuration."""
    from gemm_course.measure import records
    from gemm_course.runtime import ladder
    from gemm_course.teaching import widgets

    data = explorer["data"]
    assert [s["key"] for s in data["steps"]] == [s.key for s in ladder.steps()]
    recs = records.load_records()
    for step in ladder.steps():
        names = [n for n, _ in step.knobs]
        combos = list(itertools.product(*(v for _, v in step.knobs)))
        for values in combos:
            row = data["rows"][widgets.config_key(step, values)]
            config = step.config(**dict(zip(names, values)))
            assert row["ok"] == step.check_config(config)[0], row
            if row["ok"]:
                assert row["registers"] > 0 and row["threads"] > 0 and row["mix"] and row["ctas_per_sm"] >= 1
                assert row["measured"] == widgets.measured(recs, step, config)
            else:
                assert row["reason"]
        assert sum(data["rows"][widgets.config_key(step, v)]["ok"] for v in combos) == len(list(step.knob_grid()))
    assert len(data["rows"]) == sum(len(list(itertools.product(*(v for _, v in s.knobs)))) for s in ladder.steps())


@pytest.mark.compile
def test_static_explorer_facts_are_compiled_facts(explorer):
    """The table holds what the compiler makes of a configuration: one of the test's choices compiled
    again here gives the same row."""
    from gemm_course.runtime import ladder
    from gemm_course.teaching import widgets

    step_key, knobs = explorer["plan"][0]
    step = ladder.get(step_key)
    config = step.config(**knobs)
    row = widgets.compile_row(step, config, step.target)
    shown = explorer["data"]["rows"][widgets.config_key(step, widgets.knob_values(step, config))]
    assert {k: v for k, v in row.items() if k != "compile_s"} == \
        {k: v for k, v in shown.items() if k not in ("compile_s", "measured")}
