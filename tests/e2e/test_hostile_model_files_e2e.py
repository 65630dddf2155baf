"""Hostile model files uploaded in the browser: each refused with a message in the Data card, and the
data and the opened model on show stay as they were (the Data card's summary, the map's points)."""
from __future__ import annotations

import io

import numpy as np
import pytest

from browserkit import READY, data_summary, poll
from crafted_models import HOSTILE

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]

N = 47
# points on the latent map: the longest 'colour' column of the page's sources
MAP_POINTS = """() => {
  let n = -1;
  for (const doc of Bokeh.documents) for (const m of doc.all_models) {
    const d = m.data; if (!d || m.selected === undefined) continue;
    const v = d instanceof Map ? d.get('colour') : d['colour'];
    if (v !== undefined) n = Math.max(n, v.length);
  }
  return n;
}"""
# the Data card's error text ('' when hidden)
DATA_ERROR = """() => {
  const out = [];
  const visit = (root) => {
    for (const el of root.querySelectorAll('*')) {
      if (el.classList.contains('gx-data-error') && el.checkVisibility && el.checkVisibility())
        out.push((el.shadowRoot || el).textContent);
      if (el.shadowRoot) visit(el.shadowRoot);
    }
  };
  visit(document);
  return out.join(' ').trim();
}"""


def _good_model() -> bytes:
    import engine
    from engine.io import save_model

    rng = np.random.default_rng(4)
    t = rng.uniform(-2, 2, size=(N, 1))
    Y = np.hstack([np.sin(t * (j + 1)) for j in range(5)]) + 0.05 * rng.standard_normal((N, 5))
    model = engine.BayesianGPLVM(Y, 2, num_inducing=8)
    engine.fit(model, max_iters=10)
    buf = io.BytesIO()
    save_model(model, buf)
    return buf.getvalue()


def _upload(page, name: str, data: bytes) -> None:
    page.locator("input[type=file]").first.set_input_files(
        files=[{"name": name, "mimeType": "application/octet-stream", "buffer": data}])


@pytest.mark.timeout(600)
def test_hostile_model_uploads_say_why_and_keep_the_page(served_app, page, artifacts, monkeypatch):
    # the session budget of the sessions opened from here (a big machine would open more)
    monkeypatch.setenv("GPLVM_EXPLORER_SESSION_MEMORY", "2G")
    page.goto(served_app)
    page.wait_for_function(READY, timeout=90_000)
    _upload(page, "good.npz", _good_model())
    page.get_by_text("Saved model good.npz opened").first.wait_for(timeout=60_000)
    page.wait_for_function(f"({MAP_POINTS})() === {N}", timeout=60_000)
    summary = data_summary(page)
    assert "good.npz" in summary and f"N = {N} points" in summary
    for name, (make, phrase) in sorted(HOSTILE.items()):
        _upload(page, f"{name}.npz", make())
        shown = poll(lambda: (lambda text: text if phrase in text else "")(page.evaluate(DATA_ERROR)), timeout=90)
        if not shown:
            page.screenshot(path=str(artifacts / f"hostile_model_{name}_failed.png"), full_page=True)
        assert shown, f"{name}: the Data card shows {page.evaluate(DATA_ERROR)!r}"
        assert f"{name}.npz" in shown
        assert data_summary(page) == summary, name  # the data on show are the same
        assert page.evaluate(MAP_POINTS) == N, name  # and so is the opened model's map
        page.get_by_text("Saved model good.npz opened").first.wait_for(state="attached", timeout=10_000)
        if name == "exact-20k":
            page.screenshot(path=str(artifacts / "hostile_model_refused.png"), full_page=True)
    # the page still works: a good model opens after all of them
    _upload(page, "good again.npz", _good_model())
    page.get_by_text("Saved model good again.npz opened").first.wait_for(timeout=60_000)
    assert poll(lambda: page.evaluate(DATA_ERROR) == "", timeout=30)
