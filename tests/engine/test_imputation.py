"""model.impute(): the mixture over the other rows' q(x_m), against a plain per-entry loop."""
import numpy as np
import pytest
from scipy.stats import norm

import engine
from engine.errors import ConfigurationError, ShapeError
from engine.imputation import candidate_rows, mixture_moments


def holed_data(N=30, D=5, rate=0.25, seed=0):
    """(Y (N, D) on a 2-D manifold with a fraction ``rate`` of entries NaN, every row observed somewhere)."""
    rng = np.random.default_rng(seed)
    T = rng.uniform(-1.5, 1.5, size=(N, 2))
    Y = np.sin(T @ rng.normal(size=(2, D)) + rng.uniform(0, 6, D)) + 0.05 * rng.normal(size=(N, D))
    holes = rng.random(Y.shape) < rate
    holes[np.arange(N), rng.integers(0, D, N)] = False
    return np.where(holes, np.nan, Y)


def reference_mixture(model, rows):
    """Plain loop: for each row and each other row m, the product over observed d of
    N(y_nd | mu_md, s_md) at q(x_m); the missing entries' mixture mean and variance."""
    Y, observed = model._Y_data, model.observed
    v = model.parameters
    S = v.get("X_variance")
    mu, s = model.predict(v["X_mean"], S, include_noise=True)
    out_mean, out_var = np.zeros((len(rows), Y.shape[1])), np.zeros((len(rows), Y.shape[1]))
    for i, n in enumerate(rows):
        obs = np.flatnonzero(observed[n])
        others = [m for m in range(Y.shape[0]) if m != n]
        log_w = np.array([sum(norm.logpdf(Y[n, d], mu[m, d], np.sqrt(s[m, d])) for d in obs) for m in others])
        w = np.exp(log_w - log_w.max())
        w /= w.sum()
        for d in range(Y.shape[1]):
            first = sum(w[k] * mu[m, d] for k, m in enumerate(others))
            second = sum(w[k] * (s[m, d] + mu[m, d] ** 2) for k, m in enumerate(others))
            out_mean[i, d], out_var[i, d] = first, second - first**2
    return out_mean, out_var


@pytest.fixture(scope="module", params=["bayesian", "sparse"])
def holed_model(request):
    Y_nan = holed_data()
    if request.param == "bayesian":
        model = engine.BayesianGPLVM(Y_nan, 2, num_inducing=6)
    else:
        model = engine.SparseGPLVM(Y_nan, 2, num_inducing=6)
    engine.fit(model, max_iters=30)
    return model


def test_mixture_equals_the_per_entry_loop(holed_model):
    model = holed_model
    missing = ~model.observed
    rows = np.flatnonzero(missing.any(axis=1))
    filled, std = model.impute()
    ref_mean, ref_var = reference_mixture(model, rows)
    np.testing.assert_allclose(filled[rows][missing[rows]], ref_mean[missing[rows]], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(std[rows][missing[rows]] ** 2, ref_var[missing[rows]], rtol=1e-8, atol=1e-12)
    np.testing.assert_array_equal(filled[~missing], model._Y_data[~missing])
    assert np.all(std[~missing] == 0.0)


def test_latent_method_predicts_at_each_rows_own_latent(holed_model):
    model = holed_model
    v = model.parameters
    missing = ~model.observed
    filled, std = model.impute(method="latent")
    mean, var = model.predict(v["X_mean"], v.get("X_variance"), include_noise=True)
    np.testing.assert_allclose(filled[missing], mean[missing], rtol=1e-12)
    np.testing.assert_allclose(std[missing], np.sqrt(var[missing]), rtol=1e-12)
    assert not np.allclose(filled[missing], model.impute()[0][missing])


def test_rows_give_the_same_values_as_the_whole_table(holed_model):
    model = holed_model
    rows = [4, 0, 17, 4]
    whole = model.impute()
    part = model.impute(rows=rows)
    np.testing.assert_allclose(part[0], whole[0][rows], rtol=1e-12)
    np.testing.assert_allclose(part[1], whole[1][rows], rtol=1e-12)
    with pytest.raises(ShapeError, match="row indices"):
        model.impute(rows=[30])
    with pytest.raises(ConfigurationError, match="method"):
        model.impute(method="knn")


def test_complete_data_is_returned_as_is():
    Y = np.nan_to_num(holed_data(N=20, D=4, rate=0.0))
    model = engine.BayesianGPLVM(Y, 2, num_inducing=5)
    filled, std = model.impute()
    np.testing.assert_array_equal(filled, Y)
    assert np.all(std == 0.0)


def test_a_candidate_subset_weights_only_those_rows():
    rng = np.random.default_rng(3)
    N, D = 12, 3
    Y = rng.normal(size=(N, D))
    observed = rng.random((N, D)) > 0.3
    mu, s = rng.normal(size=(N, D)), rng.uniform(0.2, 1.0, size=(N, D))
    cand = candidate_rows(N, max_candidates=5, seed=1)
    assert cand.size == 5 and np.all(np.diff(cand) > 0)
    np.testing.assert_array_equal(cand, candidate_rows(N, max_candidates=5, seed=1))
    rows = np.arange(N)
    mean, var = mixture_moments(Y, observed, rows, cand, mu[cand], s[cand])
    for n in rows:
        others = [m for m in cand if m != n]
        log_w = np.array([norm.logpdf(Y[n, observed[n]], mu[m, observed[n]],
                                      np.sqrt(s[m, observed[n]])).sum() for m in others])
        w = np.exp(log_w - log_w.max())
        w /= w.sum()
        np.testing.assert_allclose(mean[n], w @ mu[others], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(var[n], w @ (s[others] + mu[others] ** 2) - (w @ mu[others]) ** 2,
                                   rtol=1e-9, atol=1e-12)
    with pytest.raises(ConfigurationError):
        candidate_rows(N, max_candidates=1)


def test_an_ambiguous_row_gets_a_hedged_prediction():
    """Observed outputs t^2 and cos(2t) cannot tell t from -t; the missing output t can.

    The rows missing t start at -t, and nothing they observe moves them back:
    their own q(x_n) predicts the wrong sign.  The mixture leaves each row's
    own q(x_n) out and weighs both signs, so its error is smaller and its std
    covers the truth."""
    rng = np.random.default_rng(0)
    t = np.concatenate([rng.uniform(-2.0, -0.8, 40), rng.uniform(0.8, 2.0, 40)])
    Y = np.column_stack([t**2, np.cos(2 * t), t]) + 0.2 * rng.normal(size=(80, 3))
    hidden = rng.random(80) < 0.25
    Y_nan = Y.copy()
    Y_nan[hidden, 2] = np.nan
    model = engine.BayesianGPLVM(Y_nan, 1, num_inducing=12, X=np.where(hidden, -t, t)[:, None])
    engine.fit(model, max_iters=300)
    truth = Y[hidden, 2]
    mix, mix_std = model.impute()
    own, _ = model.impute(method="latent")
    err_mix = np.sqrt(np.mean((mix[hidden, 2] - truth) ** 2))
    err_own = np.sqrt(np.mean((own[hidden, 2] - truth) ** 2))
    assert err_mix < 0.8 * err_own
    assert np.mean(np.abs(mix[hidden, 2] - truth) < 2.0 * mix_std[hidden, 2]) > 0.9


def test_imputation_follows_a_change_of_parameters():
    model = engine.BayesianGPLVM(holed_data(), 2, num_inducing=6)
    missing = ~model.observed
    before = model.impute()
    assert model.impute()[0][missing].tolist() == before[0][missing].tolist()
    model.set_parameters(noise_variance=0.5)
    after = model.impute()
    expected = reference_mixture(model, np.flatnonzero(missing.any(axis=1)))[0]
    np.testing.assert_allclose(after[0][missing], expected[missing[missing.any(axis=1)]], rtol=1e-10)
    assert not np.allclose(after[0][missing], before[0][missing])
