"""The page with a Bernoulli model: probability maps with their 0.5 contour, profiles as bars in [0, 1],
the latent map shaded by the latent functions' variance, imputed values as probabilities."""
from __future__ import annotations

import numpy as np
import pytest
from bokeh.events import Tap
from bokeh.models import Range1d

import engine
from gplvm_explorer import export
from gplvm_explorer.views import LatentMap, ReconstructionView

pytestmark = pytest.mark.timeout(300)


def bernoulli_build(Y, config):
    return engine.BayesianGPLVM(Y, config.latent_dim, num_inducing=8, likelihood="bernoulli", seed=0)


def train(make_explorer, pump, upload=None, sample=None, iters=15):
    ex = make_explorer(build=bernoulli_build, publish_interval=0.0)
    if upload is not None:
        assert ex.data.load_upload(*upload), ex.data.error
    if sample is not None:
        ex.data.sample = sample
    ex.settings.model, ex.settings.latent_dim, ex.settings.max_iters = "bayesian", 2, iters
    assert ex.train(), ex.training.message
    assert pump(ex, lambda: ex.training.status == "finished", timeout=240)
    ex.latent.wait()
    assert ex.latent.view is not None
    return ex


def click_on_a_row(latent, ex, row=0):
    """Click where training row ``row`` sits in the map."""
    x, y = ex.latent.view.points[row]
    latent._on_tap(Tap(latent.figure, x=float(x), y=float(y)))
    return ex.latent.reconstruction


def binary_csv(n=40, d=6, seed=0, missing=0.0):
    rng = np.random.default_rng(seed)
    t = rng.uniform(-2, 2, n)
    P = 1 / (1 + np.exp(-3 * np.sin(t[:, None] + np.arange(d))))
    Y = (rng.uniform(size=(n, d)) < P).astype(float)
    lines = [",".join(f"q{j}" for j in range(d))]
    for i in range(n):
        lines.append(",".join("" if rng.uniform() < missing else str(int(v)) for v in Y[i]))
    return ("\n".join(lines) + "\n").encode(), "answers.csv"


def test_a_bernoulli_image_reconstruction_is_a_probability_map_with_its_half_contour(make_explorer, pump):
    ex = train(make_explorer, pump, sample="binary-glyph", iters=40)
    recon = ReconstructionView.of(ex)
    latent = LatentMap.of(ex, reconstruction=recon)
    rec = click_on_a_row(latent, ex)
    assert rec.likelihood == "bernoulli" and rec.is_image and not rec.drawn_in_page
    image = recon.pred_source.data["image"][0]
    assert image.shape == (16, 16) and 0.0 <= image.min() and image.max() <= 1.0
    assert (recon.mapper.low, recon.mapper.high) == (0.0, 1.0)  # a fixed probability scale
    xs, ys = recon.contour_source.data["xs"], recon.contour_source.data["ys"]
    assert xs and len(xs) == len(ys)
    # every contour point lies between two pixel centres on either side of 0.5
    h, w = image.shape
    for sx, sy in zip(xs, ys):
        for x, y in zip(sx, sy):
            assert 0.5 <= x <= w - 0.5 and 0.5 <= y <= h - 0.5
    assert "P(y = 1)" in recon.pred_fig.title.text and "Bernoulli" in recon.text.object
    # the map is shaded by the latent functions' variance (not p (1 - p))
    v = ex.latent.view
    model = v.result.model
    corner = np.array(v.fixed, dtype=float)
    corner[list(v.dims)] = [v.grid.xs[0], v.grid.ys[0]]
    _, f_var = model.predict_f(corner[None, :])
    np.testing.assert_allclose(v.grid.values[0, 0], f_var.mean(), rtol=1e-4)


def test_a_bernoulli_profile_is_bars_in_zero_one(make_explorer, pump):
    ex = train(make_explorer, pump, upload=binary_csv())
    recon = ReconstructionView.of(ex)
    latent = LatentMap.of(ex, reconstruction=recon)
    rec = click_on_a_row(latent, ex)
    assert not rec.is_image and recon.profile.visible
    p = np.asarray(recon.probability_source.data["p"])
    assert p.size == 6 and np.all((p >= 0) & (p <= 1))
    np.testing.assert_allclose(p, rec.mean)
    assert recon._bars.visible and not recon._line.visible and not recon._band.visible
    assert isinstance(recon.profile_fig.y_range, Range1d) and recon.profile_fig.y_range.end == 1.05
    assert recon.profile_fig.yaxis.axis_label == "P(y = 1)"
    shown = [item.label["value"] for item in recon.profile_fig.legend[0].items if item.visible]
    assert shown == ["P(y = 1)", f"nearest #{rec.nearest_index}"], shown


def test_imputed_binary_cells_are_probabilities(make_explorer, pump):
    ex = train(make_explorer, pump, upload=binary_csv(missing=0.1))
    result = ex.training.result
    ds = result.dataset
    assert ds.has_missing
    table = export.imputed_csv(result).decode().strip().splitlines()
    header = table[0].split(",")
    assert header[:3] == ["index", "q0", "q0_std"]
    values = np.array([[float(c) for c in line.split(",")] for line in table[1:]])
    filled = values[:, 1::2][ds.missing_mask]
    std = values[:, 2::2][ds.missing_mask]
    assert np.all((filled > 0) & (filled < 1)) and not np.all(np.isin(filled, (0.0, 1.0)))
    np.testing.assert_allclose(std, np.sqrt(filled * (1 - filled)), rtol=1e-6)
    row = ex.imputation.imputation
    assert row is not None and np.all((row.values >= 0) & (row.values <= 1))
