"""Variational GPDS (DynamicalBGPLVM): gradients, dense references, the white-noise limit, new times, files."""
import io

import numpy as np
import pytest

import engine
from engine import kernels, psi
from engine.io import load_model, save_model
from gradcheck import check_grad
from modelcheck import dense_psi_bound


def series(N=16, D=3, seed=0, gap=None):
    """A smooth multi-output series at irregular times; ``gap`` (lo, hi) removes the times inside it."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0.0, 6.0, N))
    if gap is not None:
        t = t[(t < gap[0]) | (t > gap[1])]
    phases = rng.uniform(0, 2 * np.pi, D)
    Y = np.sin(1.3 * t[:, None] + phases) + 0.05 * rng.normal(size=(t.size, D))
    return t, Y


def random_model(time_kernel=None, N=12, Q=2, M=5, seed=0):
    t, Y = series(N, seed=seed)
    rng = np.random.default_rng(seed + 1)
    model = engine.DynamicalBGPLVM(Y, t, Q, num_inducing=M, time_kernel=time_kernel, init="random", seed=seed)
    model.set_parameters(mu_bar=0.5 * rng.normal(size=(t.size, Q)), lambdas=rng.uniform(0.3, 4.0, size=(t.size, Q)),
                         Z=rng.normal(size=(M, Q)), noise_variance=0.3)
    return model


def gradient_errors(model, eps=1e-4):
    """Relative error of each named block's gradient against central differences, entry by entry.

    eps = 1e-4: the bound is O(100) and some lambda entries of the gradient
    are O(1e-3), so smaller steps measure round-off rather than the gradient.
    """
    base = model.parameters
    grads = model.objective_gradients()
    errors = {}
    for name, value in base.items():
        def f(v, name=name):
            model.set_parameters(**{name: v})
            return model.objective()

        errors[name] = check_grad(f, np.array(value, dtype=float), grads[name], eps=eps)
        model.set_parameters(**{name: value})
    return errors


TIME_KERNELS = {
    "rbf": lambda: kernels.RBF(1, variance=1.2, lengthscales=1.5),
    "matern32": lambda: kernels.Matern32(1, variance=0.8, lengthscales=2.0),
    "rbf+white": lambda: kernels.RBF(1, lengthscales=1.0) + kernels.White(1, variance=0.1),
}


def dense_kl(K, mu_bar, lambdas):
    """sum_q KL(N(K mu_bar_q, (K^-1 + diag lambda_q)^-1) || N(0, K)) with dense inverses and slogdet."""
    N, Q = mu_bar.shape
    Kinv = np.linalg.inv(K)
    total = 0.0
    for q in range(Q):
        mu = K @ mu_bar[:, q]
        S = np.linalg.inv(Kinv + np.diag(lambdas[:, q]))
        total += 0.5 * (np.trace(np.linalg.solve(K, S)) + mu @ np.linalg.solve(K, mu) - N
                        + np.linalg.slogdet(K)[1] - np.linalg.slogdet(S)[1])
    return total


@pytest.mark.parametrize("name", sorted(TIME_KERNELS))
def test_gradients_match_finite_differences(name):
    model = random_model(TIME_KERNELS[name]())
    errors = gradient_errors(model)
    assert set(errors) == set(model.parameter_names)
    assert any(n.startswith("time.") for n in errors)
    assert max(errors.values()) < 1e-5, errors
    assert model.checkgrad() < 1e-5


@pytest.mark.parametrize("name", ["matern32", "rbf+white"])
def test_bound_matches_dense_reference(name):
    model = random_model(TIME_KERNELS[name](), seed=3)
    v = model.parameters
    K = model.time_kernel.K(model.t)
    mu = K @ v["mu_bar"]
    Kinv = np.linalg.inv(K)
    S = np.stack([np.diag(np.linalg.inv(Kinv + np.diag(v["lambdas"][:, q]))) for q in range(model.latent_dim)], 1)
    np.testing.assert_allclose(model.X_mean, mu, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(model.X_variance, S, rtol=1e-7)
    k = model.kernel
    stats = psi.compute(k, v["Z"], mu, S)
    Kmm = k.K(v["Z"]) + model.jitter * np.eye(model.num_inducing)
    data = dense_psi_bound(model.Y, *stats, Kmm, 1.0 / v["noise_variance"])
    kl = dense_kl(K, v["mu_bar"], v["lambdas"])
    assert model.kl() == pytest.approx(kl, rel=1e-8)
    assert model.objective() == pytest.approx(data - kl, rel=1e-8)


def test_white_noise_time_kernel_gives_the_bayesian_gplvm_bound():
    """K_t = I: mu = mu_bar, S = 1 / (1 + lambda) and the KL is the Bayesian GP-LVM's."""
    model = random_model(kernels.White(1, variance=1.0), seed=5)
    v = model.parameters
    bgp = engine.BayesianGPLVM(model.Y + model.Y_mean, model.latent_dim, kernel=model.kernel, X=v["mu_bar"],
                               X_variance=1.0 / (1.0 + v["lambdas"]), Z=v["Z"], noise_variance=v["noise_variance"])
    bgp.jitter = model.jitter
    assert model.objective() == pytest.approx(bgp.objective(), rel=1e-12)
    assert model.kl() == pytest.approx(bgp.kl(), rel=1e-12)
    g, gb = model.objective_gradients(), bgp.objective_gradients()
    np.testing.assert_allclose(g["mu_bar"], gb["X_mean"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(g["Z"], gb["Z"], rtol=1e-9, atol=1e-12)


def test_latent_at_training_times_are_the_marginals_and_variance_grows_away_from_data():
    t, Y = series(40, gap=(2.5, 3.7), seed=2)
    model = engine.DynamicalBGPLVM(Y, t, 2, num_inducing=8, time_kernel=kernels.RBF(1, lengthscales=0.4))
    mean, var = model.latent_at_times(t)
    np.testing.assert_allclose(mean, model.X_mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(var, model.X_variance, rtol=1e-6, atol=1e-12)
    # into the gap: the variance rises to its middle; beyond the end: it rises towards the prior's
    gap = np.linspace(2.5, 3.1, 7)
    _, vg = model.latent_at_times(gap)
    assert np.all(np.diff(vg, axis=0) > 0)
    assert np.all(vg[-1] > 10 * var.max(axis=0))
    ahead = t.max() + np.array([0.0, 0.2, 0.5, 1.0, 3.0])
    _, va = model.latent_at_times(ahead)
    assert np.all(np.diff(va, axis=0) >= -1e-12)
    prior = model.time_kernel.K_diag(ahead[-1:, None])[0]
    np.testing.assert_allclose(va[-1], prior, rtol=1e-3)
    # and so does the output's
    _, yv = model.predict_at_times(np.array([t[5], 3.1]))
    assert yv.shape == (2, Y.shape[1])
    assert np.all(yv[1] > yv[0])


def test_fit_fills_a_gap():
    t, Y = series(70, D=4, gap=(2.6, 3.6), seed=4)
    model = engine.DynamicalBGPLVM(Y, t, 2, num_inducing=10)
    before = model.objective()
    result = engine.fit(model, max_iters=150)
    assert result.objective > before
    tg = np.linspace(2.7, 3.5, 9)
    rng = np.random.default_rng(4)
    rng.uniform(0.0, 6.0, 70)
    truth = np.sin(1.3 * tg[:, None] + rng.uniform(0, 2 * np.pi, 4))  # the phases of series(seed=4)
    mean, var = model.predict_at_times(tg)
    assert mean.shape == var.shape == (9, 4)
    rmse = float(np.sqrt(np.mean((mean - truth) ** 2)))
    assert rmse < 0.25, rmse


def test_api_fix_predict_infer_and_errors():
    model = random_model(kernels.RBF(1))
    assert model.objective_name == "ELBO"
    model.fix("time.lengthscales", "time.variance")
    assert model.fixed == {"time.lengthscales", "time.variance"}
    before = model.parameters["time.lengthscales"].copy()
    engine.fit(model, max_iters=5)
    np.testing.assert_array_equal(model.parameters["time.lengthscales"], before)
    model.unfix()
    mean, var = model.predict(model.X_mean[:3])
    assert mean.shape == var.shape == (3, model.output_dim)
    res = model.infer_latent(model.Y[:2] + model.Y_mean)
    assert isinstance(res, engine.LatentInference)
    assert res.mean.shape == res.variance.shape == (2, model.latent_dim)
    snap = model.snapshot_state()
    assert snap["X_variance"].shape == (model.num_data, model.latent_dim)
    t, Y = series(10)
    with pytest.raises(engine.ShapeError):
        engine.DynamicalBGPLVM(Y, t[:-1], 2, num_inducing=3)
    with pytest.raises(engine.ShapeError):
        engine.DynamicalBGPLVM(Y, t, 2, num_inducing=3, time_kernel=kernels.RBF(2))
    with pytest.raises(engine.ShapeError):
        model.latent_at_times(np.array([[0.0, 1.0]]))


@pytest.mark.parametrize("make", [lambda Q: kernels.RBF(Q), lambda Q: kernels.Linear(Q) + kernels.Bias(Q)])
def test_static_model_and_projection_in_prior_units(make):
    """The static model carries the same data term in any latent units; projecting a training frame
    under the prior N(0, c^2 I) of an unknown time lands near that frame's q(x_n)."""
    t, Y = series(30, D=4, seed=6)
    model = engine.DynamicalBGPLVM(Y, t, 2, num_inducing=6 if make(2).name != "sum" else 2, kernel=make(2),
                                   time_kernel=kernels.RBF(1, variance=9.0, lengthscales=0.8))
    engine.fit(model, max_iters=60)
    data_term = model.objective() + model.kl()
    c = model.prior_scale()
    assert c == pytest.approx(np.sqrt(model.parameters["time.variance"]), rel=1e-12)
    for scale in (1.0, c):
        static = model.static_model(scale)
        assert static.objective() + static.kl() == pytest.approx(data_term, rel=1e-10)
    res = model.infer_latent(model.Y[10] + model.Y_mean)
    assert res.mean.shape == (1, 2)
    sd = np.sqrt(model.X_variance[10] + res.variance[0])
    assert np.all(np.abs(res.mean[0] - model.X_mean[10]) < 3 * sd + 0.1 * c)


def test_save_load_round_trip():
    model = random_model(kernels.Matern52(1) + kernels.White(1, variance=0.05), seed=7)
    model.fix("Z")
    buf = io.BytesIO()
    save_model(model, buf)
    buf.seek(0)
    loaded = load_model(buf)
    assert isinstance(loaded, engine.DynamicalBGPLVM)
    assert loaded.objective() == model.objective()
    assert loaded.fixed == {"Z"}
    np.testing.assert_array_equal(loaded.t, model.t)
    tn = np.array([1.0, 7.5])
    np.testing.assert_allclose(loaded.latent_at_times(tn)[1], model.latent_at_times(tn)[1], rtol=1e-12)
