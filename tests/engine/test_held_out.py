"""Tests of engine.metrics.held_out: held-out log density and reconstruction RMSE, each
checked against a computation written here from the bound and the GP posterior."""
import numpy as np
import pytest
from scipy import optimize, stats

import engine
from engine import psi
from engine.bound import collapsed_bound, gaussian_kl
from engine.errors import ShapeError
from engine.metrics import half_observed, held_out
from engine.transforms import POSITIVE


def manifold_data(N, D, seed):
    """Rows from a 2-D latent square through a smooth random map, plus small noise."""
    rng = np.random.default_rng(seed)
    T = rng.uniform(-1.5, 1.5, size=(N, 2))
    W = rng.normal(size=(2, D))
    b = rng.uniform(0, 2 * np.pi, D)
    return np.sin(T @ W + b) + 0.05 * rng.normal(size=(N, D))


@pytest.fixture(scope="module")
def bayesian():
    data = manifold_data(N=58, D=10, seed=3)
    Y, test = data[:50], data[50:]
    model = engine.BayesianGPLVM(Y, 2, num_inducing=10, seed=0)
    engine.fit(model, optimizer="lbfgs", max_iters=150)
    return model, Y, test


@pytest.fixture(scope="module")
def exact():
    data = manifold_data(N=44, D=6, seed=5)
    Y, test = data[:40], data[40:]
    model = engine.GPLVM(Y, 2, seed=0)
    engine.fit(model, optimizer="lbfgs", max_iters=150)
    return model, Y, test


def augmented_bound_difference(model):
    """Eq. 20 for one whole row y (D,), as a function of (y, mu, S): the collapsed bound (engine.bound,
    dense) with the row and q(x*) = N(mu, diag S) appended, minus the training bound, minus
    KL(q(x*) || N(0, I))."""
    values = model.parameters
    kern = model.kernel_at(values)
    Z, beta = values["Z"], 1.0 / float(values["noise_variance"])
    Kmm = kern.K(Z)
    Kmm[np.diag_indices_from(Kmm)] += model.jitter
    train = psi.compute(kern, Z, values["X_mean"], values["X_variance"])
    without = collapsed_bound(model.Y, train.psi0, train.Psi1, train.Psi2, Kmm, beta).value

    def difference(y, mu, S):
        new = psi.compute(kern, Z, mu[None, :], S[None, :])
        with_row = collapsed_bound(np.vstack([model.Y, (y - model.Y_mean)[None, :]]), train.psi0 + new.psi0,
                                   np.vstack([train.Psi1, new.Psi1]), train.Psi2 + new.Psi2, Kmm, beta).value
        return with_row - without - gaussian_kl(mu[None, :], S[None, :])

    return difference


def test_bayesian_held_out_density_is_the_best_augmented_bound_difference(bayesian):
    """Each row's log density is eq. 20 at the row's q(x*), and scipy finds no better q(x*)."""
    model, _, test = bayesian
    score = held_out(model, test, seed=1)
    assert score.log_density.shape == (len(test),)
    q = model.infer_latent(test)
    difference = augmented_bound_difference(model)
    Q = model.latent_dim
    for i, y in enumerate(test):
        np.testing.assert_allclose(score.log_density[i], difference(y, q.mean[i], q.variance[i]), atol=1e-6)

        def negative(theta, y=y):
            return -difference(y, theta[:Q], POSITIVE.forward(theta[Q:]))

        ref = optimize.minimize(negative, np.concatenate([q.mean[i], POSITIVE.inverse(q.variance[i])]),
                                method="L-BFGS-B")
        assert -ref.fun <= score.log_density[i] + 1e-4
    assert score.mean_log_density == pytest.approx(np.mean(score.log_density))


def dense_map_reconstruction(model, y, seen):
    """The GP-LVM's MAP latent point of the observed entries (the dense predictive density of
    K + noise I plus the N(0, I) prior, maximised by scipy from every training latent) and the
    posterior mean of every entry there, data units."""
    values = model.parameters
    kern = model.kernel_at(values)
    X, noise = values["X_mean"], float(values["noise_variance"])
    Ky = kern.K(X) + (noise + model.jitter) * np.eye(len(X))
    alpha = np.linalg.solve(Ky, model.Y)                       # (N, D), centred outputs
    Kinv = np.linalg.inv(Ky)                                   # fine in a test: a small, well-posed reference

    def moments(x):
        k = kern.K(x[None, :], X)[0]
        mean = model.Y_mean + k @ alpha
        var = float(kern.K(x[None, :])[0, 0] - k @ Kinv @ k) + noise
        return mean, var

    def negative(x):
        mean, var = moments(x)
        return -(stats.norm.logpdf(y[seen], mean[seen], np.sqrt(var)).sum() - 0.5 * x @ x)

    fits = [optimize.minimize(negative, x0, method="Nelder-Mead", options={"xatol": 1e-8, "fatol": 1e-10,
                                                                           "maxiter": 4000}) for x0 in X]
    best = min(fits, key=lambda r: r.fun)
    return moments(best.x)[0]


def test_reconstruction_rmse_matches_a_dense_gp_reference(exact):
    model, _, test = exact
    score = held_out(model, test, seed=4)
    hidden = ~score.observed
    assert score.observed.sum(axis=1).tolist() == [3] * len(test)  # half of D = 6
    predictions = np.array([dense_map_reconstruction(model, y, score.observed[i]) for i, y in enumerate(test)])
    np.testing.assert_allclose(score.reconstruction[hidden], predictions[hidden], atol=1e-3)
    ref = np.sqrt(np.mean((predictions[hidden] - test[hidden]) ** 2))
    assert score.rmse == pytest.approx(ref, rel=1e-3)


def test_rmse_is_far_below_the_mean_predictor_and_density_prefers_real_rows(bayesian):
    model, Y, test = bayesian
    score = held_out(model, test, seed=2)
    hidden = ~score.observed
    by_mean = np.sqrt(np.mean((np.broadcast_to(Y.mean(axis=0), test.shape)[hidden] - test[hidden]) ** 2))
    assert score.rmse < 0.5 * by_mean
    shifted = held_out(model, test + 2.0, seed=2)
    assert np.all(shifted.log_density < score.log_density)
    assert shifted.rmse > score.rmse


def test_the_observed_half_is_seeded_and_missing_entries_are_never_scored(bayesian):
    model, _, test = bayesian
    a, b, c = half_observed(np.ones((5, 7), bool), 0), half_observed(np.ones((5, 7), bool), 0), \
        half_observed(np.ones((5, 7), bool), 1)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.sum(axis=1).tolist() == [4] * 5
    Y = test.copy()
    Y[0, [1, 4]] = np.nan
    score = held_out(model, Y, seed=3)
    assert not score.observed[0, [1, 4]].any()
    present_hidden = ~np.isnan(Y) & ~score.observed
    ref = np.sqrt(np.mean((score.reconstruction[present_hidden] - Y[present_hidden]) ** 2))
    assert np.isfinite(score.rmse) and score.rmse == pytest.approx(ref)
    # an explicit mask is used as given
    seen = np.zeros(test.shape, bool)
    seen[:, :2] = True
    fixed = held_out(model, test, observed=seen)
    np.testing.assert_array_equal(fixed.observed, seen)


@pytest.mark.parametrize("bad, match", [
    (np.zeros((2, 5)), "shape"),
    (np.array([[1.0] + [np.nan] * 9]), "at least two present"),
    (np.array([[np.inf] + [0.0] * 9]), "infinite"),
])
def test_bad_test_rows_raise_shape_error(bad, match, bayesian):
    model, _, _ = bayesian
    with pytest.raises(ShapeError, match=match):
        held_out(model, bad)
