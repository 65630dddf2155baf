"""engine.predictor: the one Predictor every GP-posterior model predicts through, against dense references."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import engine
from modelcheck import curved_data
from engine import psi

pytestmark = pytest.mark.timeout(300)


def data(n=120, d=6, seed=0):
    return curved_data(n, d, seed)


def points(Q, n=25, seed=1):
    return 1.3 * np.random.default_rng(seed).standard_normal((n, Q))


def dense_collapsed(model, Xnew):
    """Paper section 4 with explicit inverses (fine for a reference): mean beta k*M W^-1 Psi1^T Y,
    var k** - k*M (Kmm^-1 - W^-1) kM*, W = Kmm + beta Psi2, per column group's observed rows."""
    v = model.parameters
    kern = model.kernel_at(v)
    Z = v["Z"]
    beta = 1.0 / v["noise_variance"]
    Kmm = kern.K(Z) + model.jitter * np.eye(Z.shape[0])
    S = v.get("X_variance")
    Ks, kss = kern.K(Xnew, Z), kern.K_diag(Xnew)
    mean = np.empty((Xnew.shape[0], model.output_dim))
    var = np.empty_like(mean)
    groups = ([(np.arange(model.output_dim), np.ones(model.num_data, bool))] if model.observed is None
              else [(g.cols, g.rows) for g in model.observation_groups])
    for cols, rows in groups:
        if S is None:
            Psi1 = kern.K(v["X_mean"][rows], Z)
            Psi2 = Psi1.T @ Psi1
        else:
            st = psi.compute(kern, Z, v["X_mean"][rows], S[rows])
            Psi1, Psi2 = st.Psi1, st.Psi2
        W = Kmm + beta * Psi2
        mean[:, cols] = beta * Ks @ np.linalg.solve(W, Psi1.T @ model.Y[np.ix_(rows, cols)]) + model.Y_mean[cols]
        quad = np.einsum("nm,mk,nk->n", Ks, np.linalg.inv(Kmm) - np.linalg.inv(W), Ks)
        var[:, cols] = (kss - quad)[:, None]
    return mean, var


MODELS = {
    "bayesian": lambda: engine.BayesianGPLVM(data(), latent_dim=2, num_inducing=10),
    "sparse": lambda: engine.SparseGPLVM(data(), latent_dim=2, num_inducing=10),
    "bayesian-missing": lambda: engine.BayesianGPLVM(
        np.where(np.random.default_rng(3).random((120, 6)) < 0.15, np.nan, data()), latent_dim=2, num_inducing=10),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_collapsed_predictor_equals_the_dense_formulas_of_the_paper(name):
    model = MODELS[name]()
    engine.fit(model, max_iters=10)
    predictor = model.predictor()
    X = points(2)
    mean, var = predictor.predict(X)
    ref_mean, ref_var = dense_collapsed(model, X)
    # absolute tolerance on the outputs' scale: a mean near zero carries the rounding of terms ~|Y|
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-7, atol=1e-8 * np.max(np.abs(ref_mean)))
    np.testing.assert_allclose(var, ref_var, rtol=1e-6, atol=1e-8)
    assert np.ptp(var[:, 0]) > 1e-3  # the points differ enough for a wrong variance to show
    if "missing" in name:
        assert len(predictor.groups) > 1 and np.ptp(var[0]) > 1e-6  # each group has its own variance
    # model.predict is the predictor's, noise added on request
    m_mean, m_var = model.predict(X, include_noise=True)
    np.testing.assert_array_equal(m_mean, mean)
    np.testing.assert_allclose(m_var, var + model.parameters["noise_variance"], rtol=1e-14)


def test_exact_gplvm_predictor_equals_the_dense_gp_posterior():
    model = engine.GPLVM(data(n=40), latent_dim=2)
    engine.fit(model, max_iters=10)
    predictor = model.predictor()
    assert not predictor.inducing and predictor.centres.shape == (40, 2)
    v = model.parameters
    kern = model.kernel_at(v)
    X = points(2)
    K = kern.K(v["X_mean"]) + (v["noise_variance"] + model.jitter) * np.eye(40)
    Ks = kern.K(X, v["X_mean"])
    ref_mean = Ks @ np.linalg.solve(K, model.Y) + model.Y_mean
    ref_var = kern.K_diag(X) - np.einsum("nm,mk,nk->n", Ks, np.linalg.inv(K), Ks)
    mean, var = predictor.predict(X)
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(var, np.repeat(ref_var[:, None], model.output_dim, axis=1), rtol=1e-6, atol=1e-9)
    with pytest.raises(engine.UnsupportedOperationError, match="point inputs"):
        predictor.predict(X, np.full_like(X, 0.1))


def test_stochastic_predictor_equals_the_explicit_q_u_posterior():
    model = engine.StochasticBayesianGPLVM(data(n=200), latent_dim=2, num_inducing=8, batch_size=50)
    engine.fit(model, optimizer="svi", max_iters=30)
    v = model.parameters
    kern = model.kernel_at(v)
    Kmm = kern.K(v["Z"]) + model.jitter * np.eye(8)
    L = np.linalg.cholesky(Kmm)
    R = np.tril(v["q_sqrt"])
    # u = L v, q(v) = N(m, R R^T): q(u) = N(L m, L R R^T L^T); f* | u = k*M Kmm^-1 u
    X = points(2)
    Ks = kern.K(X, v["Z"])
    A = Ks @ np.linalg.inv(Kmm)
    Su = L @ R @ R.T @ L.T
    ref_mean = A @ (L @ v["q_mu"]) + model.Y_mean
    ref_var = kern.K_diag(X) - np.einsum("nm,mk,nk->n", A, Kmm, A) + np.einsum("nm,mk,nk->n", A, Su, A)
    mean, var = model.predictor().predict(X)
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(var[:, 0], ref_var, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", ["bayesian", "bayesian-missing"])
def test_uncertain_inputs_match_monte_carlo_over_q_x(name):
    model = MODELS[name]()
    engine.fit(model, max_iters=10)
    predictor = model.predictor()
    rng = np.random.default_rng(4)
    x, s = np.array([[0.3, -0.5]]), np.array([[0.04, 0.09]])
    mean, var = predictor.predict(x, s)
    draws = x + np.sqrt(s) * rng.standard_normal((40000, 2))
    m_d, v_d = predictor.predict(draws)
    mc_mean = m_d.mean(axis=0)
    mc_var = v_d.mean(axis=0) + m_d.var(axis=0)  # law of total variance
    np.testing.assert_allclose(mean[0], mc_mean, rtol=0, atol=0.02 * np.sqrt(mc_var).max())
    np.testing.assert_allclose(var[0], mc_var, rtol=0.05)


def test_whitened_factors_give_the_covariance_correction_for_every_kind():
    """The accessors w27 / w28 build on: B^T (Kmm^-1 - Sigma) B = a^T a - b^T b, and latent_moments + noise."""
    models = [MODELS["bayesian"](), engine.StochasticBayesianGPLVM(data(n=100), 2, num_inducing=6, batch_size=30),
              engine.GPLVM(data(n=30), latent_dim=2)]
    B = np.random.default_rng(6).standard_normal
    for model in models:
        predictor = model.predictor()
        for g in predictor.groups:
            cols = B((predictor.centres.shape[0], 3))
            a, b = predictor.whiten(g, cols)
            quad = a.T @ a - (0.0 if b is None else b.T @ b)
            np.testing.assert_allclose(cols.T @ predictor.covariance_correction(g) @ cols, quad, rtol=1e-7,
                                       atol=1e-9)
        X = points(2, n=4)
        f_mean, f_var = predictor.latent_moments(X)
        mean, var = predictor.predict(X, include_noise=True)
        np.testing.assert_allclose(mean, f_mean + model.Y_mean, rtol=1e-14)
        np.testing.assert_allclose(var, f_var + predictor.groups[0].noise_variance, rtol=1e-14)


def test_predictor_keeps_nothing_of_size_n_survives_the_model_and_is_read_only():
    n = 400
    model = engine.BayesianGPLVM(data(n=n), latent_dim=3, num_inducing=8)
    engine.fit(model, max_iters=5)
    X = points(3)
    expected = model.predict(X)
    predictor = model.predictor()
    assert model.predictor() is predictor  # cached until the parameters change
    ref = weakref.ref(model)
    del model
    gc.collect()
    assert ref() is None  # the predictor holds no reference to the model (nor to its X)
    arrays = [predictor.Z, predictor.Y_mean, *(a for g in predictor.groups for a in g[1:6] if a is not None)]
    assert max(a.shape[0] for a in arrays) < n and not any(a.flags.writeable for a in arrays)
    got = predictor.predict(X)
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])
    one = predictor.predict(X[7])  # one point, as a click asks
    np.testing.assert_allclose(one[0], expected[0][7:8], rtol=1e-13)
    with pytest.raises(engine.ShapeError, match="3 columns"):
        predictor.predict(np.zeros((2, 4)))
    with pytest.raises(engine.ShapeError, match="NaN or infinite"):
        predictor.predict(np.array([[0.0, np.nan, 0.0]]))


def test_a_new_parameter_value_gives_a_new_predictor():
    model = MODELS["sparse"]()
    first = model.predictor()
    model.set_parameters(noise_variance=0.5)
    second = model.predictor()
    assert second is not first and second.groups[0].noise_variance == pytest.approx(0.5)


def test_models_that_predict_by_other_means_have_no_predictor():
    mrd = engine.MRD([data(n=60)[:, :3], data(n=60)[:, 3:]], latent_dim=2, num_inducing=5)
    assert mrd.predictor() is None  # views with their own kernels: predict() stacks them
    view = mrd.predictor(view=1)
    np.testing.assert_array_equal(view.predict(points(2))[0], mrd.predict(points(2), view=1)[0])
    deep = engine.DeepGP(data(n=60), layer_dims=[2, 1], num_inducing=5)
    assert deep.predictor() is None
