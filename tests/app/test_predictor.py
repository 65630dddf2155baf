"""The cached predictor of a frozen result: the model's predictions, without the N rows."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import engine
from gplvm_explorer.catalog import ModelConfig
from gplvm_explorer.training import TrainedResult
from gplvm_explorer.training.predictor import CachedPredictor

pytestmark = pytest.mark.timeout(120)


def data(n=150, d=6, seed=0):
    rng = np.random.default_rng(seed)
    t = rng.uniform(-2, 2, size=(n, 2))
    W = rng.standard_normal((4, d))
    Y = np.c_[t, np.sin(t[:, :1]), t[:, 1:] ** 2] @ W + 0.1 * rng.standard_normal((n, d)) + 3.0
    return Y


def trained(model):
    engine.fit(model, optimizer="lbfgs", max_iters=5)
    return model


def query_points(Q, n=40, seed=1):
    return np.random.default_rng(seed).standard_normal((n, Q))


@pytest.mark.parametrize("make", [
    lambda Y: engine.BayesianGPLVM(Y, latent_dim=3, num_inducing=12),
    lambda Y: engine.SparseGPLVM(Y, latent_dim=3, num_inducing=12),
], ids=["bayesian", "sparse"])
def test_cached_predict_equals_model_predict(make):
    model = trained(make(data()))
    pred = CachedPredictor.from_model(model)
    X = query_points(3)
    mean, var = model.predict(X)
    cmean, cvar = pred.predict(X)
    np.testing.assert_allclose(cmean, mean, rtol=0, atol=1e-10)
    np.testing.assert_allclose(cvar, var, rtol=0, atol=1e-10)
    one_mean, one_var = pred.predict(X[7])  # one point, as a click asks
    np.testing.assert_allclose(one_mean, mean[7:8], rtol=0, atol=1e-10)
    np.testing.assert_allclose(one_var, var[7:8], rtol=0, atol=1e-10)


def test_cached_predict_of_the_stochastic_model_equals_its_predict():
    model = engine.StochasticBayesianGPLVM(data(n=200), latent_dim=3, num_inducing=10, batch_size=50)
    engine.fit(model, optimizer="svi", max_iters=30)
    pred = CachedPredictor.from_model(model)
    assert pred is not None and pred.groups[0].LW is None and pred.groups[0].Rw.shape == (10, 10)
    X = query_points(3)
    mean, var = model.predict(X)
    cmean, cvar = pred.predict(X)
    np.testing.assert_allclose(cmean, mean, rtol=0, atol=1e-10)
    np.testing.assert_allclose(cvar, var, rtol=0, atol=1e-10)
    assert np.ptp(var[:, 0]) > 1e-4  # the points differ enough for a wrong variance term to show


def test_cached_predict_per_column_group_with_missing_outputs():
    Y = data(n=120)
    Y[np.random.default_rng(3).random(Y.shape) < 0.15] = np.nan
    model = trained(engine.BayesianGPLVM(Y, latent_dim=2, num_inducing=10))
    assert len(model.posteriors()) > 1  # several column groups: a separate variance per group
    X = query_points(2)
    mean, var = model.predict(X)
    cmean, cvar = CachedPredictor.from_model(model).predict(X)
    np.testing.assert_allclose(cmean, mean, rtol=0, atol=1e-10)
    np.testing.assert_allclose(cvar, var, rtol=0, atol=1e-10)


def test_predictor_keeps_nothing_of_size_n_and_survives_the_model():
    n = 400
    model = trained(engine.BayesianGPLVM(data(n=n), latent_dim=3, num_inducing=8))
    X = query_points(3)
    expected = model.predict(X)
    pred = CachedPredictor.from_model(model)
    ref = weakref.ref(model)
    del model
    gc.collect()
    assert ref() is None  # the predictor holds no reference to the model (nor to its X)
    arrays = [pred.Z, pred.Y_mean, *(a for g in pred.groups for a in g[1:] if a is not None)]
    assert max(a.shape[0] for a in arrays) < n
    got = pred.predict(X)
    np.testing.assert_allclose(got[0], expected[0], rtol=0, atol=1e-10)
    np.testing.assert_allclose(got[1], expected[1], rtol=0, atol=1e-10)
    with pytest.raises(ValueError, match="3 columns"):
        pred.predict(np.zeros((2, 4)))
    with pytest.raises(ValueError, match="finite"):
        pred.predict(np.array([[0.0, np.nan, 0.0]]))


def test_result_predicts_without_unpacking_the_latents_after_the_first_call():
    model = trained(engine.BayesianGPLVM(data(), latent_dim=3, num_inducing=10))
    unpacks = []

    class Counting(type(model)):
        @property
        def parameters(self):
            unpacks.append(1)
            return super().parameters

    model.__class__ = Counting
    result = TrainedResult(run_id=1, iteration=5, objective=0.0, objective_name="ELBO", model=model,
                           X_mean=model.X_mean, X_variance=model.X_variance, relevance=model.relevance,
                           parameters={}, config=ModelConfig(model="bayesian", latent_dim=3))
    X = query_points(3)
    expected = model.predict(X)
    result.predict(X[:1])  # builds the factors once
    before = len(unpacks)
    for i in range(5):  # clicks: no parameter unpacking (O(N Q)) any more
        mean, var = result.predict(X[i])
        np.testing.assert_allclose(mean[0], expected[0][i], rtol=0, atol=1e-10)
        np.testing.assert_allclose(var[0], expected[1][i], rtol=0, atol=1e-10)
    assert len(unpacks) == before
    assert result.predictor is result.predictor  # built once


def test_models_with_their_own_predict_keep_it():
    model = engine.GPLVM(data(n=40), latent_dim=2)
    assert CachedPredictor.from_model(model) is None
