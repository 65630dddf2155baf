"""Predictions computed by the page (Chromium's JavaScript) equal the engine's, for every kernel the page knows.

The script of :mod:`gplvm_explorer.views.page_prediction` is loaded into an
empty page and fed the columns the server would send from the model's
:class:`engine.predictor.Predictor`; its mean and standard deviation are
compared, in file units, with that Predictor's and with ``model.predict``'s:
engine, page factors and model give one prediction.
"""
from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

import engine
from modelcheck import curved_data
from engine import kernels as K
from gplvm_explorer.views.page_prediction import CLICK_JS, PREDICT_JS, kernel_in_page, predictor_columns

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300),
              pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning")]

Q = 3


def data(n=90, d=5, seed=0):
    return curved_data(n, d, seed)


KERNELS = {
    "rbf-ard": lambda: K.RBF(Q, lengthscales=[0.7, 1.3, 2.5]),
    "rbf-shared": lambda: K.RBF(Q, variance=1.7, lengthscales=1.1, ard=False),
    "matern32": lambda: K.Matern32(Q, lengthscales=[0.9, 1.4, 3.0]),
    "matern52": lambda: K.Matern52(Q, variance=0.8, lengthscales=[1.2, 0.8, 2.0]),
    "linear-ard": lambda: K.Linear(Q, variances=[0.5, 1.5, 0.2]),
    "mlp": lambda: K.MLP(Q, variance=1.3, weight_variance=0.7, bias_variance=0.4),
    "rbf+bias+white": lambda: K.Sum([K.RBF(Q), K.Bias(Q, variance=0.3), K.White(Q, variance=0.05)]),
    "linear+matern32": lambda: K.Sum([K.Linear(Q, variances=0.4, ard=False), K.Matern32(Q)]),
}


def file_units(ds):
    return SimpleNamespace(scale=np.linspace(0.5, 2.0, ds), mean=np.linspace(-3.0, 4.0, ds), image_shape=None)


def plain_columns(columns) -> dict:
    return {k: [v[0] if isinstance(v[0], str) else np.asarray(v[0]).tolist()] for k, v in columns.items()}


def page_predict(page, columns, locs):
    """Mean and std (n, D) computed by the page's script from the server's columns."""
    plain = plain_columns(columns)
    out = page.evaluate("""([data, locs]) => { const P = gxPredictor(data);
        return locs.map(loc => { const r = gxPredict(P, loc); return [Array.from(r.mean), Array.from(r.std)]; }); }""",
                        [plain, np.asarray(locs).tolist()])
    return np.array([o[0] for o in out]), np.array([o[1] for o in out])


@pytest.fixture
def script_page(page):
    page.set_content("<html><body></body></html>")
    page.add_script_tag(content=PREDICT_JS)
    return page


def server_predict(predictor, units, locs):
    mean, var = predictor.predict(locs)
    return mean * units.scale + units.mean, np.sqrt(var) * units.scale


def assert_one_prediction(page, model, predictor, units, locs):
    """The page's script, the engine's Predictor and model.predict agree at ``locs``; the engine's (mean, std)."""
    mean, std = page_predict(page, predictor_columns(predictor, units), locs)
    want_mean, want_std = server_predict(predictor, units, locs)
    model_mean, model_std = server_predict(model, units, locs)
    np.testing.assert_allclose(mean, want_mean, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(std, want_std, rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(model_mean, want_mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(model_std, want_std, rtol=1e-12, atol=1e-12)
    return want_mean, want_std


@pytest.mark.parametrize("name", list(KERNELS))
def test_page_prediction_equals_the_servers_for_each_kernel(script_page, name):
    kernel = KERNELS[name]()
    # the Bayesian GP-LVM takes the kernels with closed-form psi statistics, the sparse GP-LVM any
    make = engine.BayesianGPLVM if engine.psi.supports(kernel) else engine.SparseGPLVM
    model = make(data(), latent_dim=Q, num_inducing=9, kernel=kernel)
    engine.fit(model, optimizer="lbfgs", max_iters=8)
    predictor = model.predictor()
    units = file_units(predictor.output_dim)
    columns = predictor_columns(predictor, units)
    assert columns is not None and json.loads(columns["kernel"][0]) == model.kernel.to_spec()
    locs = np.random.default_rng(1).standard_normal((6, Q)) * 1.5
    locs[0] = predictor.Z[2]  # at an inducing input: the variance nearly cancels
    _, want_std = assert_one_prediction(script_page, model, predictor, units, locs)
    assert np.ptp(want_std[1:, 0]) > 1e-3  # the locations differ enough for a wrong variance to show


def test_page_prediction_per_column_group_with_missing_outputs(script_page):
    Y = data(n=100, d=6)
    Y[np.random.default_rng(3).random(Y.shape) < 0.2] = np.nan
    model = engine.BayesianGPLVM(Y, latent_dim=Q, num_inducing=8)
    engine.fit(model, optimizer="lbfgs", max_iters=8)
    predictor = model.predictor()
    assert len(predictor.groups) > 1  # each group of outputs has its own variance
    units = file_units(predictor.output_dim)
    locs = np.random.default_rng(2).standard_normal((4, Q))
    _, want_std = assert_one_prediction(script_page, model, predictor, units, locs)
    assert np.ptp(want_std[0]) > 1e-6  # the groups' variances differ: a mixed-up group would show


def test_page_prediction_of_the_stochastic_models_dense_q_u(script_page):
    model = engine.StochasticBayesianGPLVM(data(n=150), latent_dim=Q, num_inducing=8, batch_size=40)
    engine.fit(model, optimizer="svi", max_iters=40)
    predictor = model.predictor()
    assert predictor.groups[0].Rw is not None  # q(u)'s covariance is dense: |Rw^T k|^2, no triangular solve
    units = file_units(predictor.output_dim)
    locs = np.random.default_rng(5).standard_normal((5, Q)) * 1.5
    _, want_std = assert_one_prediction(script_page, model, predictor, units, locs)
    assert np.ptp(want_std[:, 0]) > 1e-3


def test_no_factors_for_the_page_when_it_cannot_predict():
    assert predictor_columns(None, None) is None  # a model that predicts by other means: the server draws
    exact = engine.GPLVM(data(n=30), latent_dim=2)
    assert exact.predictor() is not None and predictor_columns(exact.predictor(), None) is None  # N-sized factors
    assert not kernel_in_page({"type": "periodic", "params": {}})
    assert not kernel_in_page({"type": "sum", "parts": [{"type": "rbf"}, {"type": "periodic"}]})
    assert all(kernel_in_page(make().to_spec()) for make in KERNELS.values())


# the click script run on plain objects standing in for the Bokeh models it is given
RUN_CLICK = """([code, columns, slice, x, y]) => {
  window.Bokeh = {require: () => ({ndarray: (buf, o) => ({values: Array.from(new Float64Array(buf)), ...o})})};
  const model = (data) => ({data});
  const m = {predictor: model(columns), slice: model(slice), image: model({}), std_image: model({}),
             profile: model({}), marker: model({})};
  new Function("cb_obj", "predictor", "slice", "image", "std_image", "profile", "marker", code)(
    {x, y}, m.predictor, m.slice, m.image, m.std_image, m.profile, m.marker);
  const arr = (v) => (v && v.length !== undefined && typeof v !== "string" ? Array.from(v) : v);
  const out = {};
  for (const k of ["image", "std_image", "profile", "marker"]) {
    out[k] = {};
    for (const [c, v] of Object.entries(m[k].data)) out[k][c] = Array.isArray(v) ? v.map(arr) : arr(v);
  }
  return out; }"""


@pytest.mark.parametrize("image_shape", [None, (2, 3)], ids=["profile", "image"])
def test_the_click_script_draws_the_prediction_at_the_clicked_point(script_page, image_shape):
    model = engine.BayesianGPLVM(data(d=6), latent_dim=Q, num_inducing=7)
    engine.fit(model, optimizer="lbfgs", max_iters=5)
    predictor = model.predictor()
    units = file_units(predictor.output_dim)
    units.image_shape = image_shape
    columns = plain_columns(predictor_columns(predictor, units))
    fixed = [0.3, -0.7, 1.1]
    out = script_page.evaluate(RUN_CLICK, [CLICK_JS, columns, {"dims": [[2, 0]], "fixed": [fixed]}, 0.4, -1.2])
    # the map shows dims 2 (horizontal) and 0 (vertical); dim 1 stays at its fixed value
    mean, std = server_predict(predictor, units, np.array([[-1.2, -0.7, 0.4]]))
    assert out["marker"] == {"x": [0.4], "y": [-1.2], "marker": ["x"], "colour": ["#d55e00"]}
    if image_shape is None:
        prof = out["profile"]
        np.testing.assert_allclose(prof["mean"], mean[0], rtol=1e-9)
        np.testing.assert_allclose(prof["upper"], mean[0] + 2 * std[0], rtol=1e-9)
        np.testing.assert_allclose(prof["lower"], mean[0] - 2 * std[0], rtol=1e-9)
        assert prof["x"] == list(range(6)) and out["image"] == {} and out["std_image"] == {}
    else:
        img = out["image"]
        (drawn,) = img["image"]
        assert drawn["shape"] == [2, 3] and img["dw"] == [3] and img["dh"] == [2]
        # row 0 of an image is its top row; Bokeh draws row 0 at the bottom
        np.testing.assert_allclose(np.reshape(drawn["values"], (2, 3)), mean[0].reshape(2, 3)[::-1], rtol=1e-9)
        (spread,) = out["std_image"]["image"]  # the ±2σ image: twice every pixel's std, drawn the same way up
        assert spread["shape"] == [2, 3] and out["std_image"]["dw"] == [3] and out["std_image"]["dh"] == [2]
        np.testing.assert_allclose(np.reshape(spread["values"], (2, 3)), 2 * std[0].reshape(2, 3)[::-1], rtol=1e-9)
        assert out["profile"] == {}
