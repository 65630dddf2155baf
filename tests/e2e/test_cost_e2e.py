"""A user's big file in a real browser: the stochastic model is proposed within seconds of loading, with
ETAs measured on the data (the page times the start it prepares); a small file gets no proposal, and its
run until converged is estimated too.

Screenshots: test-artifacts/e2e/cost-big-proposal.png, cost-small.png.
"""
from __future__ import annotations

import html
import io
import re
import time

import numpy as np
import pytest
from browserkit import poll

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]

READY = "window.Bokeh && Bokeh.documents.length > 0 && Object.keys(Bokeh.index).length > 0"


def generated(n: int, d: int = 20, seed: int = 0) -> bytes:
    """An .npy of n rows near a curved 3-D sheet in d columns (float32: 4 bytes a cell)."""
    rng = np.random.default_rng(seed)
    z = rng.uniform(-2, 2, size=(n, 3))
    feats = np.c_[z, np.sin(z[:, :1]), np.cos(z[:, 1:2]), z[:, :1] * z[:, 2:3]]
    Y = feats @ rng.standard_normal((6, d)) + 0.05 * rng.standard_normal((n, d))
    buf = io.BytesIO()
    np.save(buf, Y.astype(np.float32))
    return buf.getvalue()


def upload(page, name: str, content: bytes) -> None:
    page.locator("input[type=file]").first.set_input_files(
        files=[{"name": name, "mimeType": "application/octet-stream", "buffer": content}])


def proposal_text(page) -> str:
    """The proposal's text as shown ('' when there is none on show)."""
    loc = page.get_by_text(re.compile(r"^Big data: ")).first
    return html.unescape(loc.inner_text()) if loc.count() and loc.is_visible() else ""


def test_a_big_file_gets_the_stochastic_model_proposed_with_measured_etas(page, served_app, artifacts):
    page.goto(served_app)
    page.wait_for_function(READY, timeout=120_000)
    loaded = time.monotonic()
    upload(page, "mine.npy", generated(60_000))
    page.get_by_text("N = 60000 points").first.wait_for(timeout=90_000)
    proposal = page.locator(".gx-suggestion").first
    proposal.wait_for(state="visible", timeout=30_000)
    shown = time.monotonic() - loaded
    text = poll(lambda: proposal_text(page), timeout=30)
    assert "Big data: 60,000 rows" in text and "Bayesian GP-LVM until converged would take ≈" in text, text
    assert re.search(r"Stochastic \(SVI\): ≈ \d+ (s|min)", text), text
    # the page times the start it prepares (one evaluation on these rows): the proposal then says so
    measured = poll(lambda: "measured here" in proposal_text(page), timeout=90)
    text = proposal_text(page)
    assert measured, text
    seconds = float(re.search(r"\(([0-9.e+-]+) s per iteration, measured here\)", text).group(1))
    assert 1e-4 < seconds < 60, text
    # every model's run until converged is listed in the Model card, measured on these data
    notes = page.get_by_text(re.compile(r"A run until converged \(measured on these data\)")).first
    notes.wait_for(timeout=30_000)
    line = notes.inner_text()
    assert re.search(r"Bayesian GP-LVM ≈ \d", line) and re.search(r"Stochastic \(SVI\) ≈ \d", line), line
    # the status line at the top points at it (the Model card is below the sidebar's first screen)
    line = page.locator(".gx-proposal").first
    line.wait_for(state="visible", timeout=30_000)
    assert re.search(r"Big data: the Bayesian GP-LVM would take ≈ [\d.]+ (s|min|h) until converged; the Model card "
                     r"proposes Stochastic \(SVI\) \(≈ [\d.]+ (s|min|h)\)\.", line.inner_text()), line.inner_text()
    page.screenshot(path=str(artifacts / "cost-big-proposal.png"), full_page=True)
    print(f"proposal shown {shown:.1f} s after the upload began; {text}")

    # switching takes the proposal: the stochastic model is chosen, the proposal goes
    page.get_by_role("button", name="Use the proposed model").click()
    assert poll(lambda: not page.locator(".gx-suggestion").first.is_visible(), timeout=30)
    model = page.get_by_label("Model", exact=True)
    assert poll(lambda: "stochastic" in model.locator("option:checked").inner_text(), timeout=30)
    assert poll(lambda: page.locator(".gx-proposal").count() == 0, timeout=30)


def test_a_small_file_gets_no_proposal_and_an_estimate(page, served_app, artifacts):
    page.goto(served_app)
    page.wait_for_function(READY, timeout=120_000)
    upload(page, "small.npy", generated(800, d=8, seed=1))
    page.get_by_text("N = 800 points").first.wait_for(timeout=60_000)
    notes = page.get_by_text(re.compile(r"A run until converged \(measured on these data\)")).first
    notes.wait_for(timeout=60_000)
    assert not page.locator(".gx-suggestion").first.is_visible()
    page.screenshot(path=str(artifacts / "cost-small.png"), full_page=True)
