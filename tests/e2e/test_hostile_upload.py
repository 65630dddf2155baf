"""A 40 MB upload never kills the page, and the previous data stays loaded.

The browser sends an uploaded file base64-encoded in one websocket message;
with Bokeh's default message limit (20 MiB) a file above ~15 MB closed the
connection and the page went dead without a word. Served with the app's own
options (`gplvm_explorer.serving.SERVER_OPTIONS`, as the CLI does), a 40 MB
CSV is either loaded or refused with a message naming the limit and the
command-line alternative; either way the page keeps answering.
"""
from __future__ import annotations

import re
import socket
import time
import urllib.request

import numpy as np
import pytest

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(600),
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]

READY = "window.Bokeh && Bokeh.documents.length > 0 && Object.keys(Bokeh.index).length > 0"

ALL_TEXT = """
() => {
  const parts = [];
  const visit = (root) => {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      const n = walker.currentNode, tag = n.parentNode && n.parentNode.nodeName;
      if (tag !== 'STYLE' && tag !== 'SCRIPT') parts.push(n.nodeValue);
    }
    for (const el of root.querySelectorAll('*')) if (el.shadowRoot) visit(el.shadowRoot);
  };
  visit(document);
  return parts.join('\\n');
}
"""


def _wait_http(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:  # noqa: BLE001
            pass
        time.sleep(0.25)
    raise RuntimeError(f"{url} did not answer within {timeout:.0f} s")


@pytest.fixture(scope="module")
def upload_app(chromium_path):
    import panel as pn

    from gplvm_explorer.app import create_app
    from gplvm_explorer.serving import SERVER_OPTIONS

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = pn.serve({"app": create_app}, port=port, address="127.0.0.1",
                      websocket_origin=[f"127.0.0.1:{port}"], threaded=True, show=False,
                      liveness=True, **SERVER_OPTIONS)
    try:
        _wait_http(f"http://127.0.0.1:{port}/liveness", 30)
        yield f"http://127.0.0.1:{port}/app"
    finally:
        server.stop()


def _text(page) -> str:
    return page.evaluate(ALL_TEXT)


def _wait_for(page, predicate, timeout: float, what: str) -> str:
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = _text(page)
        if predicate(text):
            return text
        time.sleep(0.3)
    raise AssertionError(f"{what} (page text ends: {text[-600:]!r})")


def _small_csv(path, rows=40, seed=0):
    rng = np.random.default_rng(seed)
    Y = rng.normal(size=(rows, 6))
    header = "a,b,c,d,e,f"
    np.savetxt(path, Y, delimiter=",", header=header, comments="", fmt="%.5f")


def _big_csv(path, target_bytes=40_000_000):
    rng = np.random.default_rng(1)
    block = rng.normal(size=(2000, 8))
    lines = "\n".join(",".join(f"{v:.6f}" for v in row) for row in block) + "\n"
    chunk = lines.encode()
    with open(path, "wb") as fh:
        fh.write(b"c1,c2,c3,c4,c5,c6,c7,c8\n")
        written = 0
        while written < target_bytes:
            fh.write(chunk)
            written += len(chunk)


def test_40mb_csv_upload_keeps_the_page_alive(page, upload_app, tmp_path, artifacts):
    page.goto(upload_app)
    page.wait_for_function(READY, timeout=120_000)
    file_input = page.locator("input[type=file]").first

    before = tmp_path / "before-upload.csv"
    _small_csv(before)
    file_input.set_input_files(str(before))
    _wait_for(page, lambda t: "before-upload.csv" in t, 30, "the small file was not loaded")

    big = tmp_path / "forty-megabytes.csv"
    _big_csv(big)
    assert big.stat().st_size >= 40_000_000
    t0 = time.monotonic()
    file_input.set_input_files(str(big))
    refusal = re.compile(r"(\d+(\.\d+)?) MB upload limit")
    text = _wait_for(
        page,
        lambda t: bool(refusal.search(t)) or re.search(r"forty-megabytes\.csv.*\n?.*N\W*=", t) is not None,
        120,
        "neither a refusal naming the limit nor the loaded 40 MB file appeared",
    )
    elapsed = time.monotonic() - t0
    page.screenshot(path=str(artifacts / "upload-40mb.png"), full_page=True)
    if refusal.search(text):
        assert "gplvm-explorer FILE" in text, "the refusal does not say what to do"
        # the previous data stays loaded
        assert "before-upload.csv" in text, "the previous data was dropped"

    # the page is alive: another upload makes the round trip
    after = tmp_path / "after-upload.csv"
    _small_csv(after, rows=30, seed=2)
    file_input.set_input_files(str(after))
    _wait_for(page, lambda t: "after-upload.csv" in t and "30" in t, 30,
              f"the page stopped answering after the 40 MB upload ({elapsed:.1f} s)")
