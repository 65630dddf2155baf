"""Big uploads never kill the page, and the previous data stays loaded.

The upload widget checks the size in the browser: a file over the upload
limit is refused there, before anything is sent, with the limit on the
file's row and the command-line alternative (``gplvm-explorer FILE``) under
the widget. Accepted files travel in chunks far below the websocket's
message limit. Before, the browser sent a file base64-encoded in one
websocket message; a file too big for the server's limit closed the
connection and the page went dead without a word. The tests serve the app
with its own options (`gplvm_explorer.serving.SERVER_OPTIONS`, as the CLI
does), or with Bokeh's default limit as plain ``panel serve`` does, and
watch the bytes the page sends on its websocket.
"""
from __future__ import annotations

import time

import numpy as np
import pytest
from browserkit import data_summary, page_text, serve_in_process, wait_loaded, wait_ready

from gplvm_explorer.serving import UPLOAD_LIMIT_BYTES, WEBSOCKET_MAX_MESSAGE_SIZE

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(600),
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]


@pytest.fixture(scope="module")
def upload_app(chromium_path):
    with serve_in_process(warm=False) as url:
        yield url


LIMIT_MB = f"{UPLOAD_LIMIT_BYTES / 1e6:.0f} MB"


def _open_counting_sent_bytes(page, url) -> list:
    """Open the app; the returned list grows by the size of every websocket frame the page sends."""
    sent: list[int] = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda payload: sent.append(len(payload))))
    page.goto(url)
    wait_ready(page)
    return sent


def _refused_in_browser(text: str, name: str) -> bool:
    return name in text and "File is too large" in text and f"Maximum file size is {LIMIT_MB}" in text


@pytest.fixture(scope="module")
def default_limits_app(chromium_path):
    """The app served with Bokeh's default websocket message limit (20 MiB), as plain `panel serve`."""
    with serve_in_process(server_options=False, warm=False) as url:
        yield url


def _text(page) -> str:
    return page_text(page)


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
    sent = _open_counting_sent_bytes(page, upload_app)
    file_input = page.locator("input[type=file]").first

    before = tmp_path / "before-upload.csv"
    _small_csv(before)
    file_input.set_input_files(str(before))
    wait_loaded(page, "before-upload.csv")

    big = tmp_path / "forty-megabytes.csv"
    _big_csv(big)
    assert big.stat().st_size >= 40_000_000
    sent_before = sum(sent)
    t0 = time.monotonic()
    file_input.set_input_files(str(big))
    text = _wait_for(page, lambda t: _refused_in_browser(t, big.name), 60,
                     "the browser did not refuse the 40 MB file naming the limit")
    elapsed = time.monotonic() - t0
    page.screenshot(path=str(artifacts / "upload-40mb.png"), full_page=True)
    assert sum(sent) - sent_before < 1_000_000, "the refused file was sent anyway"
    assert "gplvm-explorer FILE" in text, "the page does not say what to do with a big file"
    assert "before-upload.csv" in data_summary(page), "the previous data was dropped"

    # the page is alive: another upload makes the round trip
    after = tmp_path / "after-upload.csv"
    _small_csv(after, rows=30, seed=2)
    file_input.set_input_files(str(after))
    assert "N = 30 points" in wait_loaded(page, "after-upload.csv"), \
        f"the page stopped answering after the 40 MB upload ({elapsed:.1f} s)"


def test_upload_over_the_websocket_limit_is_refused_in_the_browser(page, upload_app, tmp_path, artifacts):
    """A file whose upload would not fit one websocket message: refused before sending, page alive."""
    sent = _open_counting_sent_bytes(page, upload_app)
    file_input = page.locator("input[type=file]").first
    before = tmp_path / "kept.csv"
    _small_csv(before, rows=40, seed=3)
    file_input.set_input_files(str(before))
    assert "N = 40 points" in wait_loaded(page, "kept.csv")

    huge = tmp_path / "seventy-megabytes.csv"
    with open(huge, "wb") as fh:  # sparse: quick to write, the size is the point
        fh.write(b"a,b\n")
        fh.seek(70_000_000)
        fh.write(b"1,2\n")
    assert huge.stat().st_size > WEBSOCKET_MAX_MESSAGE_SIZE
    sent_before = sum(sent)
    file_input.set_input_files(str(huge))
    _wait_for(page, lambda t: _refused_in_browser(t, huge.name), 60,
              "the browser did not refuse the 70 MB file naming the limit")
    # the refusal is on screen, next to what to do instead
    page.get_by_text(f"Maximum file size is {LIMIT_MB}", exact=True).first.wait_for(state="visible")
    hint = page.get_by_text("gplvm-explorer FILE").first
    assert hint.is_visible() and LIMIT_MB in hint.inner_text(), hint.inner_text()
    page.screenshot(path=str(artifacts / "upload-70mb-refused.png"), full_page=True)
    assert sum(sent) - sent_before < 1_000_000, "the refused file was sent anyway"
    summary = data_summary(page)
    assert "kept.csv" in summary and "N = 40 points" in summary, "the previous data was dropped"

    # the session is alive: the server answers a change of data set
    page.get_by_label("Data set (bundled sample or your file)").select_option(label="Swiss roll (3-D)")
    wait_loaded(page, "swiss-roll")  # the page still answers


def test_upload_near_the_limit_travels_in_chunks_under_the_default_websocket_limit(page, default_limits_app,
                                                                                    tmp_path):
    """19 MB as one base64 message (25 MB) would close a 20 MiB websocket; in chunks it loads."""
    frames: list[int] = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda payload: frames.append(len(payload))))
    page.goto(default_limits_app)
    wait_ready(page)
    path = tmp_path / "nineteen-megabytes.npy"
    np.save(path, np.random.default_rng(4).normal(size=(5000, 470)))
    assert 18_000_000 < path.stat().st_size <= UPLOAD_LIMIT_BYTES
    page.locator("input[type=file]").first.set_input_files(str(path))
    assert "N = 5000 points, D = 470 features" in wait_loaded(page, path.name, timeout=120)
    assert sum(frames) > path.stat().st_size  # the file was sent ...
    assert max(frames) < 8 * 2**20  # ... in messages far below the 20 MiB limit
