"""Binary data through the page: a 0/1 file uploaded, the Bernoulli likelihood proposed on the
Model card with its reason, trained, and a click on the map showing probabilities P(y = 1)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from browserkit import fill_numbers, open_page, poll, train_to_end, wait_js, wait_loaded, wait_text

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(420),
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]

D = 8


def answers_csv(n=60, d=D, seed=3) -> bytes:
    """Yes/no answers (0/1) of ``n`` people to ``d`` questions, driven by one hidden attitude."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(-2, 2, n)
    P = 1 / (1 + np.exp(-3 * np.sin(t[:, None] + np.linspace(0, 3, d))))
    Y = (rng.uniform(size=(n, d)) < P).astype(int)
    lines = [",".join(f"question_{j + 1}" for j in range(d))] + [",".join(map(str, row)) for row in Y]
    return ("\n".join(lines) + "\n").encode()


# the latent map's first point, once the map has points
FIRST_POINT = """() => { const s = __gk.sources('x').filter(m => __gk.column(m, 'label') !== undefined
                                                    && __gk.column(m, 'y') !== undefined);
  if (!s.length || !__gk.column(s[0], 'x').length) return null;
  return [__gk.column(s[0], 'x')[0], __gk.column(s[0], 'y')[0]]; }"""

# pixel of data coordinates (x, y) on the latent map
MAP_PIXEL = """([x, y]) => { const v = __gk.figure('Latent space'); if (!v) return null;
  const r = v.canvas_view.el.getBoundingClientRect();
  return [r.left + v.frame.x_scale.compute(x), r.top + v.frame.y_scale.compute(y)]; }"""

# the probability bars of the reconstruction: P(y = 1) per feature
BARS = """() => { const s = __gk.sources('p').filter(m => __gk.column(m, 'p').length > 0);
  return s.length ? Array.from(__gk.column(s[0], 'p')) : null; }"""


def shots(artifacts) -> Path:
    """Where the screenshots go: the test artifacts, or SHOTS_DIR when set."""
    where = Path(os.environ.get("SHOTS_DIR") or artifacts)
    where.mkdir(parents=True, exist_ok=True)
    return where


def test_binary_upload_proposes_bernoulli_trains_and_a_click_shows_probabilities(page, served_app, tmp_path,
                                                                                 artifacts):
    path = tmp_path / "answers.csv"
    path.write_bytes(answers_csv())
    open_page(page, served_app)
    page.locator("input[type=file]").first.set_input_files(str(path))
    wait_loaded(page, "answers.csv")

    # the Model card proposes the Bernoulli likelihood, with one line saying why
    choice = page.get_by_label("Likelihood (noise model)")
    assert poll(lambda: choice.input_value() == "Bernoulli (binary 0/1)", timeout=30), choice.input_value()
    wait_text(page, "Every value is 0 or 1: a Bernoulli likelihood models binary data")
    out = shots(artifacts)
    page.screenshot(path=str(out / "binary-01-proposed.png"), full_page=True)

    fill_numbers(page, {"Iterations": 60})
    train_to_end(page)
    summary = poll(lambda: next((v for v in page.locator("textarea").evaluate_all("(els) => els.map(e => e.value)")
                                 if "model summary" in v), ""), timeout=60)
    assert "likelihood=Bernoulli" in summary, summary  # the run's summary names it

    point = wait_js(page, FIRST_POINT, timeout=60)
    assert point, "the latent map has no points"
    pos = page.evaluate(MAP_PIXEL, point)
    page.mouse.click(pos[0], pos[1])
    wait_text(page, "probabilities P(y = 1) (Bernoulli likelihood)")
    p = wait_js(page, BARS, timeout=60)
    assert p and len(p) == D, p
    assert all(0.0 <= v <= 1.0 for v in p), p
    assert len({round(v, 6) for v in p}) > 1  # a prediction, not one constant
    # the profile is the figure of probabilities: bars on a fixed [0, 1] axis
    axis = wait_js(page, """() => { const v = __gk.figure('P(y = 1) of every feature at the click');
                                    return v ? [v.model.y_range.start, v.model.y_range.end] : null; }""")
    assert axis == [-0.05, 1.05], axis
    page.screenshot(path=str(out / "binary-02-click.png"), full_page=True)
