"""The browser kit: serve the app, launch Chromium, open the page, probe and wait.

Used by the browser tests (``tests/e2e``; their fixtures in ``tests/e2e/conftest.py``
are thin wrappers of these), ``scripts/screenshot.py`` and ``benchmarks/bench_app.py``:

* servers -- :func:`serve_in_process` (``pn.serve`` of the app factory, threaded),
  :func:`serve_panel` (``python -m panel serve`` in its own process group),
  :func:`serve_cli` (``gplvm-explorer ARGS``), on a :func:`free_port` of
  127.0.0.1, each up once :func:`wait_http` sees its liveness URL answer;
  :func:`vm_rss_mb` reads a served process's memory;
* Chromium -- :func:`find_chromium`, :data:`CHROMIUM_ARGS` (Debian's Chromium,
  headless, no network chatter);
* the page -- :data:`READY` / :func:`wait_ready`, :data:`PROBES` (``window.__gk``:
  the page's Bokeh sources, columns and figures), :func:`column_length`,
  :func:`source_columns`, :func:`page_text`, :func:`wait_js`, :func:`poll`;
* steps -- :func:`open_page`, :func:`fill_numbers`, :func:`click_train`,
  :func:`train_to_end`, :func:`wait_loaded`.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

READY = "window.Bokeh && Bokeh.documents.length > 0 && Object.keys(Bokeh.index).length > 0"
DATA_SET = "Data set (bundled sample or your file)"

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
#: Chromium's flags here: headless, no sandbox (containers), and none of its calls home (which this
#: machine refuses, and Chromium then keeps retrying).
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]


def find_chromium(given: str | None = None) -> str | None:
    """The Chromium executable: ``given``, $GPLVM_EXPLORER_CHROMIUM, Debian's, or one on PATH; None if none."""
    for cand in (given, os.environ.get("GPLVM_EXPLORER_CHROMIUM"), *CHROMIUM_CANDIDATES,
                 shutil.which("chromium"), shutil.which("chromium-browser")):
        if cand and Path(cand).exists():
            return cand
    return None


# ---- servers --------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float) -> None:
    """Until ``url`` answers 200; RuntimeError (with the last failure) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except Exception as exc:  # noqa: BLE001 - refused, reset, timed out: not up yet
            last = exc
        time.sleep(0.25)
    raise RuntimeError(f"{url} did not answer within {timeout:.0f} s ({last})")


@contextmanager
def serve_in_process(factory=None, *, server_options: bool = True, warm: bool = True, timeout: float = 60):
    """The app served by ``pn.serve`` in this process (threaded); yields its URL (``.../app``).

    ``factory``: the page factory (default: the app's ``create_app``; pass your own to keep
    a handle on each session); ``server_options``: the CLI's server settings (message
    limits), else Bokeh's defaults; ``warm``: compile the numerical kernels first, so the
    first Train does not wait for numba.
    """
    import panel as pn

    from gplvm_explorer import warmup
    from gplvm_explorer.app import create_app
    from gplvm_explorer.serving import SERVER_OPTIONS

    if warm:
        warmup.start()
    port = free_port()
    server = pn.serve({"app": factory or create_app}, port=port, address="127.0.0.1",
                      websocket_origin=[f"127.0.0.1:{port}"], threaded=True, show=False, liveness=True,
                      **(SERVER_OPTIONS if server_options else {}))
    try:
        wait_http(f"http://127.0.0.1:{port}/liveness", timeout)
        if warm:
            warmup.wait(timeout=600)
        yield f"http://127.0.0.1:{port}/app"
    finally:
        server.stop()


def vm_rss_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of process ``pid`` in MB: its resident memory now and at its peak (Linux)."""
    values = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, kb = line.split()[:2]
                values[key] = int(kb) / 1024.0
    return values["VmRSS:"], values["VmHWM:"]


class ServedURL(str):
    """A served app's URL, carrying the server's process id (for CPU measurements)."""

    def __new__(cls, url: str, pid: int):
        self = super().__new__(cls, url)
        self.pid = pid
        return self


@contextmanager
def _process_group(cmd, log, url: str, timeout: float, env=None):
    """Run ``cmd`` in its own process group with its output to ``log``; yield once ``url`` answers."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_http(url, timeout)
        yield proc
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except Exception:  # noqa: BLE001 - already gone, or hanging: make sure
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@contextmanager
def serve_panel(log_path: Path, timeout: float = 90):
    """``python -m panel serve gplvm_explorer/app.py`` (the ``panel serve`` entry) on a free port;
    yields a :class:`ServedURL` of its page.  Its output goes to ``log_path``."""
    port = free_port()
    cmd = [sys.executable, "-m", "panel", "serve", "gplvm_explorer/app.py", "--port", str(port),
           "--address", "127.0.0.1", f"--allow-websocket-origin=127.0.0.1:{port}", "--liveness",
           "--check-unused-sessions", "2000", "--unused-session-lifetime", "5000"]
    with open(log_path, "wb") as log:  # a pipe nobody reads would block the server
        with _process_group(cmd, log, f"http://127.0.0.1:{port}/liveness", timeout) as proc:
            yield ServedURL(f"http://127.0.0.1:{port}/app", proc.pid)


@contextmanager
def serve_cli(args, log_dir: Path, timeout: float = 120):
    """``gplvm-explorer ARGS`` on a free port; yields a :class:`ServedURL` of the page.

    The server's output goes to ``log_dir/server.log``; when it does not come up, the
    RuntimeError carries the log's end.
    """
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "gplvm_explorer.cli", *map(str, args), "--port", str(port), "--address", "127.0.0.1"]
    with open(Path(log_dir) / "server.log", "w+") as log:
        try:
            with _process_group(cmd, log, f"http://127.0.0.1:{port}/liveness", timeout, env=env) as proc:
                yield ServedURL(f"http://127.0.0.1:{port}/", proc.pid)
        except RuntimeError as exc:
            log.seek(0)
            raise RuntimeError(f"the CLI did not serve ({exc}): {log.read()[-3000:]}") from None


# ---- the page -------------------------------------------------------------------------------

#: ``window.__gk``: the page's Bokeh models as the tests read them.  sources(col): the column data
#: sources with a column ``col``; column(m, col) (col: as an array) / has(m, col); len(col): the longest such column
#: (-1: none); table(col): every column of the first such source, as arrays (null: none);
#: walk(view) / figure(title) / named(prefix): the views of the page's figures.
PROBES = """
window.__gk = {
  get(m, c) { const d = m.data; return d instanceof Map ? d.get(c) : d[c]; },
  sources(col) {
    const out = [];
    for (const doc of Bokeh.documents) for (const m of doc.all_models) {
      if (!m.data || m.selected === undefined) continue;
      if (this.get(m, col) !== undefined) out.push(m);
    }
    return out;
  },
  column(m, col) { return this.get(m, col); },
  col(m, col) { return Array.from(this.get(m, col)); },
  has(m, col) { return this.get(m, col) !== undefined; },
  len(col) { const s = this.sources(col); return s.length ? Math.max(...s.map(m => this.get(m, col).length)) : -1; },
  table(col) {
    const s = this.sources(col); if (!s.length) return null;
    const d = s[0].data, names = d instanceof Map ? Array.from(d.keys()) : Object.keys(d), out = {};
    for (const c of names) out[c] = Array.from(this.get(s[0], c) || []);
    return out;
  },
  *walk(v) { yield v; if (v.children) { for (const c of v.children()) yield* this.walk(c); } },
  figure(title) {
    for (const root of Object.values(Bokeh.index)) for (const v of this.walk(root)) {
      const t = v.model && v.model.title;
      if (t && (t.text === title || t === title) && v.frame) return v;
    }
    return null;
  },
  named(prefix) {
    const out = [];
    for (const root of Object.values(Bokeh.index)) for (const v of this.walk(root))
      if (v.model && typeof v.model.name === 'string' && v.model.name.startsWith(prefix) && v.frame) out.push(v);
    return out;
  },
};
"""


#: All text shown in the page (document and shadow roots, tooltips, the values of inputs), one node a line.
PAGE_TEXT = """
() => {
  const parts = [];
  const visit = (root) => {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      const n = walker.currentNode, tag = n.parentNode && n.parentNode.nodeName;
      if (tag !== 'STYLE' && tag !== 'SCRIPT') parts.push(n.nodeValue);
    }
    for (const el of root.querySelectorAll('*')) {
      if (el.shadowRoot) visit(el.shadowRoot);
      if (el.tagName === 'TEXTAREA' || el.tagName === 'INPUT') parts.push(el.value || '');
    }
  };
  visit(document);
  return parts.join('\\n');
}
"""


def page_text(page) -> str:
    return page.evaluate(PAGE_TEXT)


def wait_ready(page, timeout: float = 120_000) -> None:
    """Until Bokeh has rendered the page's documents; then install :data:`PROBES`."""
    page.wait_for_function(READY, timeout=timeout)
    page.evaluate(PROBES)


def column_length(page, col: str) -> int:
    """The longest column ``col`` of the page's sources (-1: no source has it)."""
    return page.evaluate("(col) => __gk.len(col)", col)


def source_columns(page, col: str) -> dict | None:
    """Every column (as lists) of the first source with a column ``col``; None if none has it."""
    return page.evaluate("(col) => __gk.table(col)", col)


def poll(fn, timeout: float = 20.0, every: float = 0.25):
    """Call ``fn`` until it returns something truthy or ``timeout`` seconds pass; its last value."""
    deadline = time.monotonic() + timeout
    value = fn()
    while not value and time.monotonic() < deadline:
        time.sleep(every)
        value = fn()
    return value


# Text of the Data card's summary (written by the server once a data set is loaded): name, N, D, labels.
DATA_SUMMARY = """
() => {
  const out = [];
  const visit = (root) => {
    for (const el of root.querySelectorAll('*')) {
      if (el.classList.contains('gx-summary'))
        for (const n of (el.shadowRoot || el).querySelectorAll('p, li')) out.push(n.textContent);
      if (el.shadowRoot) visit(el.shadowRoot);
    }
  };
  visit(document);
  return out.join('\\n');
}
"""


def data_summary(page) -> str:
    return page.evaluate(DATA_SUMMARY)


def wait_js(page, predicate: str, arg=None, timeout: float = 60.0, every: float = 0.25):
    """Evaluate ``predicate`` (a JS function of ``arg``) until it returns something truthy; that value.

    A predicate that throws (a model, source or column not there yet) counts as "not yet":
    it is polled again instead of failing the test, until ``timeout`` seconds pass.
    """
    guarded = f"""(arg) => {{ try {{ return ({predicate})(arg); }} catch (e) {{ return null; }} }}"""
    return poll(lambda: page.evaluate(guarded, arg), timeout=timeout, every=every)


def wait_loaded(page, name: str, timeout: float = 60.0) -> str:
    """Wait until the Data card's summary names ``name``; the summary.

    The upload widget shows a file's name as soon as it is picked, so a
    name elsewhere in the page does not mean the server has loaded it.
    """
    summary = poll(lambda: (lambda s: s if name in s else "")(data_summary(page)), timeout=timeout)
    assert summary, f"{name!r} was not loaded (the Data card shows: {data_summary(page)!r})"
    return summary


def wait_text(page, text, timeout: float = 60_000) -> None:
    page.get_by_text(text).first.wait_for(state="visible", timeout=timeout)


def open_page(page, url: str, sample: str | None = None, model: str | None = None, js: str | None = None) -> None:
    """Load the app, wait for Bokeh, optionally install helper ``js`` and pick a sample and a model."""
    page.goto(url)
    wait_ready(page)
    if js:
        page.evaluate(js)
    if sample is not None:
        page.get_by_label(DATA_SET).select_option(label=sample)
    if model is not None:
        page.get_by_label("Model", exact=True).select_option(label=model)


SET_SLIDER = """([title, value]) => {
  for (const doc of Bokeh.documents) for (const m of doc.all_models) {
    if (m.title === title && m.value !== undefined) { m.value = value; return true; }
  }
  return false;
}"""


def set_slider(page, title: str, value) -> bool:
    """Set the slider titled ``title`` to ``value`` as a drag would (False: no such slider)."""
    return bool(page.evaluate(SET_SLIDER, [title, value]))


def fill_numbers(page, values: dict) -> None:
    """Type each ``{label: value}`` into its box and commit it with Enter."""
    for label, value in values.items():
        box = page.get_by_label(label)
        box.fill(str(value))
        box.press("Enter")


def click_train(page, timeout: float = 60.0) -> None:
    button = page.get_by_role("button", name="▶ Train", exact=True)
    assert poll(button.is_enabled, timeout=timeout), "Train stayed disabled"
    button.click()


RUN_ENDED = re.compile(r"(Finished|Converged) after")


def ended_status(page) -> str | None:
    """The status line's text when it reports a run's end ("Finished after ...", "Converged after ..."), else None."""
    found = page.get_by_text(RUN_ENDED)
    return found.first.inner_text() if found.count() else None


def train_to_end(page, timeout: float = 150_000) -> str:
    """Click Train and wait for *this* run's "Finished after ..." (the cap) or "Converged after ..."
    status; returns it.  A status still showing the previous run's end does not count: the new
    one differs from it (its objective, rate and time are in it)."""
    before = ended_status(page)
    click_train(page)
    ended = poll(lambda: (lambda now: now if now and now != before else None)(ended_status(page)),
                 timeout=timeout / 1000.0)
    assert ended, f"the run did not end within {timeout / 1000.0:.0f} s (the status: {ended_status(page)!r})"
    return ended
