"""A frozen result's predictions: the engine's Predictor, taken once; TrainedResult.from_model."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from modelcheck import curved_data
from gplvm_explorer.catalog import ModelConfig
from gplvm_explorer.training import TrainedResult
from gplvm_explorer.views.page_prediction import predictor_columns

pytestmark = pytest.mark.timeout(120)


def data(n=150, d=6, seed=0):
    return curved_data(n, d, seed)


def trained(model):
    engine.fit(model, optimizer="lbfgs", max_iters=5)
    return model


def query_points(Q, n=40, seed=1):
    return np.random.default_rng(seed).standard_normal((n, Q))


def test_result_predicts_through_the_models_predictor_without_unpacking_the_latents_again():
    model = trained(engine.BayesianGPLVM(data(), latent_dim=3, num_inducing=10))
    unpacks = []

    class Counting(type(model)):
        def _cache_values(self):
            unpacks.append(1)
            return super()._cache_values()

    model.__class__ = Counting
    result = TrainedResult.from_model(model, run_id=1, config=ModelConfig(model="bayesian", latent_dim=3))
    X = query_points(3)
    expected = model.predict(X)
    result.predict(X[:1])  # builds the factors once
    before = len(unpacks)
    for i in range(5):  # clicks: no parameter unpacking (O(N Q)) any more
        mean, var = result.predict(X[i])
        np.testing.assert_allclose(mean[0], expected[0][i], rtol=1e-13)
        np.testing.assert_allclose(var[0], expected[1][i], rtol=1e-13)
    assert len(unpacks) == before
    assert result.predictor is result.predictor is model.predictor()  # the model's own, built once


def test_the_exact_gplvm_predicts_on_the_server_and_models_without_a_predictor_through_predict():
    model = trained(engine.GPLVM(data(n=40), latent_dim=2))
    result = TrainedResult.from_model(model, run_id=1, config=ModelConfig(model="gplvm", latent_dim=2))
    assert result.predictor is not None and predictor_columns(result.predictor, None) is None  # N-sized factors
    deep = engine.DeepGP(data(n=40), layer_dims=[2, 1], num_inducing=5)
    result = TrainedResult.from_model(deep, run_id=2, config=ModelConfig(model="deep", latent_dim=1))
    X = query_points(1, n=3)
    assert result.predictor is None
    np.testing.assert_array_equal(result.predict(X)[0], deep.predict(X)[0])


def test_from_model_as_it_is_and_at_a_snapshot():
    model = engine.BayesianGPLVM(data(), latent_dim=3, num_inducing=10)
    snaps = []
    engine.fit(model, max_iters=3, callback=snaps.append)
    config = ModelConfig(model="bayesian", latent_dim=3)
    final = TrainedResult.from_model(model, run_id=4, config=config, dataset="ds")
    assert final.final and final.iteration == 0 and final.run_id == 4 and final.dataset == "ds"
    assert final.objective == pytest.approx(model.objective()) and final.objective_name == "ELBO"
    np.testing.assert_array_equal(final.X_mean, model.X_mean)
    np.testing.assert_array_equal(final.X_variance, model.X_variance)
    np.testing.assert_array_equal(final.relevance, model.relevance)
    assert "X_mean" not in final.parameters and "Z" in final.parameters and final.jitter == model.jitter
    assert not any(a.flags.writeable for a in (final.X_mean, final.X_variance, final.relevance))
    snap = snaps[1]
    live = TrainedResult.from_model(model, run_id=4, config=config, final=False, snapshot=snap)
    assert live.iteration == snap.iteration and live.objective == snap.objective and not live.final
    assert live.X_mean is snap.X_mean  # handed over as it is: nothing of size N copied
    assert not live.X_mean.flags.writeable


def test_from_model_keeps_each_views_relevance():
    views = [data(n=60)[:, :3], data(n=60, seed=1)[:, 3:]]
    model = engine.MRD(views, latent_dim=2, num_inducing=5)
    result = TrainedResult.from_model(model, run_id=1, config=ModelConfig(model="mrd", latent_dim=2))
    np.testing.assert_array_equal(result.view_relevance, model.relevance)
    np.testing.assert_array_equal(result.relevance, model.relevance.max(axis=0))
