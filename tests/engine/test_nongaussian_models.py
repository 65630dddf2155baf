"""Non-Gaussian likelihoods in the models: the explicit-q(u) bound of the Bayesian GP-LVM and the
Laplace approximation of the GP-LVM, against independent references."""
import numpy as np
import pytest
from scipy import special

import engine
from engine import kernels, likelihoods as lk
from engine.errors import ConfigurationError, ShapeError, UnsupportedKernelError
from engine.models.gplvm_laplace import laplace_mode


def _latent_data(N=40, D=6, Q=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, Q))
    F = 2.0 * np.sin(X @ rng.normal(size=(Q, D)))
    return rng, F


def binary_data(N=40, D=6, Q=2, seed=0, missing=0.0):
    rng, F = _latent_data(N, D, Q, seed)
    Y = (rng.uniform(size=F.shape) < special.ndtr(F)).astype(float)
    if missing:
        Y[rng.uniform(size=Y.shape) < missing] = np.nan
    return Y


def count_data(N=40, D=6, Q=2, seed=0, missing=0.0):
    rng, F = _latent_data(N, D, Q, seed)
    Y = rng.poisson(np.exp(0.5 * F + 0.5)).astype(float)
    if missing:
        Y[rng.uniform(size=Y.shape) < missing] = np.nan
    return Y


@pytest.mark.parametrize("likelihood, data", [("bernoulli", binary_data), ("poisson", count_data)])
def test_bayesian_gradients_match_finite_differences(likelihood, data):
    model = engine.BayesianGPLVM(data(missing=0.15), 2, num_inducing=6, likelihood=likelihood, seed=3)
    rng = np.random.default_rng(5)
    model.set_parameters(X_variance=rng.uniform(0.05, 0.8, size=model.X_variance.shape))
    errors = model.checkgrad(details=True)
    assert set(errors) >= {"X_mean", "X_variance", "Z", "q_mu", "q_sqrt", "rbf.lengthscales", "bias.variance"}
    assert max(e for _, _, e in errors.values()) < 1e-6, errors


def test_bayesian_bernoulli_model_predicts_probabilities_and_fits():
    Y = binary_data(N=50, D=8, missing=0.1)
    model = engine.BayesianGPLVM(Y, 2, num_inducing=8, likelihood="bernoulli")
    assert isinstance(model, engine.BayesianGPLVM) and model.likelihood == "bernoulli"
    assert "noise_variance" not in model.parameters
    np.testing.assert_array_equal(model.Y_mean, 0.0)  # not centred
    np.testing.assert_array_equal(model.Y[model.observed], np.nan_to_num(Y)[model.observed])
    before = model.objective()
    result = engine.fit(model, max_iters=150)
    assert result.objective > before + 10.0
    p, v = model.predict(model.X_mean[:10])
    assert np.all((p >= 0) & (p <= 1))
    np.testing.assert_allclose(v, p * (1 - p))
    observed = model.observed
    accuracy = np.mean((model.predict(model.X_mean, model.X_variance)[0] > 0.5)[observed] == (Y[observed] == 1))
    assert accuracy > 0.8
    filled, std = model.impute()
    miss = ~observed
    assert np.all((filled[miss] >= 0) & (filled[miss] <= 1)) and np.all(std[observed] == 0)
    np.testing.assert_array_equal(filled[observed], Y[observed])
    for method in ("latent", "mixture"):
        f, s = model.impute(method)
        np.testing.assert_allclose(s[miss], np.sqrt(f[miss] * (1 - f[miss])), atol=1e-12)


def test_poisson_model_predicts_count_moments():
    model = engine.BayesianGPLVM(count_data(N=40), 2, num_inducing=6, likelihood="poisson")
    engine.fit(model, max_iters=60)
    mean_f, var_f = model.predict_f(model.X_mean[:5])
    Ey, Vy = model.predict(model.X_mean[:5])
    np.testing.assert_allclose(Ey, np.exp(mean_f + var_f / 2))
    assert np.all(Vy >= Ey)


def test_data_outside_the_support_and_impossible_settings_are_refused():
    Y = binary_data()
    Y[3, 2] = 0.7
    with pytest.raises(ShapeError, match=r"row 3, column 2 holds 0\.7"):
        engine.BayesianGPLVM(Y, 2, num_inducing=5, likelihood="bernoulli")
    with pytest.raises(ShapeError, match=r"row 3, column 2 holds 0\.7"):
        engine.GPLVM(Y, 2, likelihood="bernoulli")
    C = count_data()
    C[0, 1] = -2
    with pytest.raises(ShapeError, match=r"row 0, column 1 holds -2\.0"):
        engine.BayesianGPLVM(C, 2, num_inducing=5, likelihood="poisson")
    B = binary_data()
    with pytest.raises(ConfigurationError, match="noise_variance"):
        engine.BayesianGPLVM(B, 2, num_inducing=5, likelihood="bernoulli", noise_variance=0.1)
    with pytest.raises(ConfigurationError, match="backend"):
        engine.BayesianGPLVM(B, 2, num_inducing=5, likelihood="bernoulli", backend=object())
    with pytest.raises(UnsupportedKernelError, match="RBF"):
        engine.BayesianGPLVM(B, 2, num_inducing=5, likelihood="bernoulli", kernel=kernels.Linear(2, ard=True))
    with pytest.raises(ConfigurationError, match="likelihood"):
        engine.BayesianGPLVM(B, 2, num_inducing=5, likelihood="student")


# ------------------------------------------------------------------ GP-LVM, Laplace


def _dense_laplace(lik, K, y):
    """Laplace's approximation of log p(y) for one output, with explicit inverses (a reference)."""
    f = np.zeros(y.size)
    Kinv = np.linalg.inv(K)
    for _ in range(200):
        _, g, d2, _ = lik.log_density_derivatives(y[:, None], f[:, None])
        W = -d2[:, 0]
        f_new = np.linalg.solve(Kinv + np.diag(W), W * f + g[:, 0])
        if np.max(np.abs(f_new - f)) < 1e-13:
            f = f_new
            break
        f = f_new
    logp, _, d2, _ = lik.log_density_derivatives(y[:, None], f[:, None])
    W = -d2[:, 0]
    _, logdet = np.linalg.slogdet(np.eye(y.size) + K @ np.diag(W))
    return float(logp.sum() - 0.5 * f @ Kinv @ f - 0.5 * logdet)


def test_laplace_equals_a_dense_reference_and_is_exact_for_a_gaussian():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(12, 2))
    K = kernels.RBF(2, ard=True).K(X) + 0.3 + 1e-6 * np.eye(12)
    Yb = (rng.uniform(size=(12, 3)) < 0.5).astype(float)
    mode = laplace_mode(lk.Bernoulli(), K, Yb, None)
    assert abs(mode.value - sum(_dense_laplace(lk.Bernoulli(), K, Yb[:, d]) for d in range(3))) < 1e-9
    Yc = rng.poisson(2.0, size=(12, 2)).astype(float)
    mode = laplace_mode(lk.Poisson(), K, Yc, None)
    assert abs(mode.value - sum(_dense_laplace(lk.Poisson(), K, Yc[:, d]) for d in range(2))) < 1e-9
    from scipy import stats

    Yg = rng.normal(size=(12, 2))
    exact = sum(stats.multivariate_normal(np.zeros(12), K + 0.2 * np.eye(12)).logpdf(Yg[:, d]) for d in range(2))
    assert abs(laplace_mode(lk.Gaussian(0.2), K, Yg, None).value - exact) < 1e-9


@pytest.mark.parametrize("likelihood, data", [("bernoulli", binary_data), ("poisson", count_data)])
def test_laplace_gplvm_gradients_match_finite_differences(likelihood, data):
    model = engine.GPLVM(data(N=30, missing=0.1), 2, likelihood=likelihood)
    assert isinstance(model, engine.GPLVM) and model.likelihood == likelihood
    assert set(model.parameters) == {"X_mean", "rbf.variance", "rbf.lengthscales", "bias.variance"}
    assert model.checkgrad() < 1e-6


def test_laplace_gplvm_fits_and_predicts_probabilities():
    Y = binary_data(N=40, D=8)
    model = engine.GPLVM(Y, 2, likelihood="bernoulli")
    before = model.objective()
    engine.fit(model, max_iters=100)
    assert model.objective() > before + 10.0
    p, v = model.predict(model.X_mean)
    np.testing.assert_allclose(v, p * (1 - p))
    assert np.mean((p > 0.5) == (Y == 1)) > 0.85
    with pytest.raises(engine.UnsupportedOperationError):
        model.predict(model.X_mean, np.ones_like(model.X_mean))


@pytest.mark.parametrize("cls", ["SparseGPLVM", "DynamicalBGPLVM", "MRD", "DeepGP"])
def test_models_without_likelihoods_refuse_them_by_name(cls):
    Y = binary_data(N=20)
    build = {
        "SparseGPLVM": lambda: engine.SparseGPLVM(Y, 2, num_inducing=5, likelihood="bernoulli"),
        "DynamicalBGPLVM": lambda: engine.DynamicalBGPLVM(Y, np.arange(20.0), 2, num_inducing=5,
                                                          likelihood="bernoulli"),
        "MRD": lambda: engine.MRD([Y, Y], 2, num_inducing=5, likelihood="bernoulli"),
        "DeepGP": lambda: engine.DeepGP(Y, [2], num_inducing=5, likelihood="bernoulli"),
    }[cls]
    with pytest.raises(ConfigurationError, match="BayesianGPLVM, StochasticBayesianGPLVM or GPLVM"):
        build()


# ------------------------------------------------------------------ projection and files


@pytest.mark.parametrize("cls", ["BayesianGPLVM", "GPLVM"])
def test_projection_uses_the_likelihood(cls):
    Y = binary_data(N=70, D=10, seed=2)
    train, new = Y[:60], Y[60:].copy()
    kwargs = {"num_inducing": 8} if cls == "BayesianGPLVM" else {}
    model = getattr(engine, cls)(train, 2, likelihood="bernoulli", **kwargs)
    engine.fit(model, max_iters=80)
    hide = np.random.default_rng(3).uniform(size=new.shape) < 0.25
    given = np.where(hide, np.nan, new)
    res = model.infer_latent(given)
    assert np.all((res.prediction >= 0) & (res.prediction <= 1))
    np.testing.assert_allclose(res.prediction_variance, res.prediction * (1 - res.prediction))
    assert np.all(res.log_density <= 0) and np.all(np.isfinite(res.log_density))
    # the hidden pixels are predicted better than by the training frequency of each column
    p, truth = np.clip(res.prediction[hide], 1e-9, 1 - 1e-9), new[hide]
    freq = np.clip(np.broadcast_to(train.mean(axis=0), new.shape)[hide], 1e-9, 1 - 1e-9)
    assert -np.mean(truth * np.log(p) + (1 - truth) * np.log(1 - p)) < \
        -np.mean(truth * np.log(freq) + (1 - truth) * np.log(1 - freq))
    # a training row projects near its own latent point (or an equally good one: same row, same data)
    own = model.infer_latent(train[:5])
    assert np.all(own.log_density >= model.infer_latent(train[5:10]).log_density.min() - 50)
    with pytest.raises(ShapeError, match="Ynew"):
        model.infer_latent(np.full(10, 0.5))


def test_poisson_projection_reports_a_log_density_of_the_counts():
    Y = count_data(N=50, seed=4)
    model = engine.BayesianGPLVM(Y[:40], 2, num_inducing=6, likelihood="poisson")
    engine.fit(model, max_iters=60)
    res = model.infer_latent(Y[40:])
    assert np.all(np.isfinite(res.log_density)) and np.all(res.prediction >= 0)
    with pytest.raises(ShapeError, match="count"):
        model.infer_latent(np.where(np.arange(6) == 2, -1.0, 1.0))


@pytest.mark.parametrize("cls, likelihood", [("BayesianGPLVM", "bernoulli"), ("GPLVM", "bernoulli"),
                                             ("BayesianGPLVM", "poisson")])
def test_saved_non_gaussian_models_load_with_their_likelihood(tmp_path, cls, likelihood):
    from engine.io import load_model, save_model

    Y = (binary_data if likelihood == "bernoulli" else count_data)(N=30, missing=0.1)
    kwargs = {"num_inducing": 5} if cls == "BayesianGPLVM" else {}
    model = getattr(engine, cls)(Y, 2, likelihood=likelihood, **kwargs)
    engine.fit(model, max_iters=20)
    save_model(model, tmp_path / "m.npz")
    loaded = load_model(tmp_path / "m.npz")
    assert isinstance(loaded, getattr(engine, cls)) and type(loaded) is type(model)
    assert loaded.likelihood == likelihood
    assert loaded.objective() == pytest.approx(model.objective(), rel=1e-12, abs=1e-9)
    X = model.X_mean[:4]
    np.testing.assert_allclose(loaded.predict(X)[0], model.predict(X)[0], rtol=1e-10)
    with np.load(tmp_path / "m.npz") as f:
        assert str(f["model_class"]) == cls and str(f["likelihood"]) == likelihood


def test_the_optimisers_never_move_the_upper_triangles_of_q_sqrt():
    model = engine.BayesianGPLVM(binary_data(N=30, D=4), 2, num_inducing=5, likelihood="bernoulli")
    N, Q, M, D = 30, 2, 5, 4
    upper = D * M * (M - 1) // 2
    assert model.get_free().size == model._packer.size - upper
    model.fix("Z")
    assert model.get_free().size == model._packer.size - upper - M * Q
    model.unfix()
    engine.fit(model, max_iters=5)
    assert np.all(np.triu(model.parameters["q_sqrt"], 1) == 0.0)


# ------------------------------------------------------------------ the stochastic model


def test_stochastic_model_with_a_likelihood_gradients_and_unbiased_minibatches():
    Y = binary_data(N=120, D=8, seed=5)
    model = engine.StochasticBayesianGPLVM(Y, 2, num_inducing=7, batch_size=24, likelihood="bernoulli")
    assert isinstance(model, engine.StochasticBayesianGPLVM) and model.likelihood == "bernoulli"
    assert "noise_variance" not in model.parameters and model.parameters["q_sqrt"].shape == (8, 7, 7)
    assert model.checkgrad() < 1e-6
    parts = np.split(np.random.default_rng(0).permutation(120), 5)
    estimates = [model.minibatch_objective(np.sort(p)) for p in parts]
    assert np.mean(estimates) == pytest.approx(model.objective(), rel=1e-12)
    # a minibatch's gradients are the full bound's when the minibatch is every row
    value, grads = model.minibatch_objective(np.arange(120), gradients=True)
    full = model.objective_gradients()
    for name in ("Z", "q_mu", "q_sqrt", "rbf.lengthscales", "X_mean"):
        np.testing.assert_allclose(grads[name], full[name], rtol=1e-9, atol=1e-9)


def test_stochastic_model_with_a_likelihood_trains_by_svi_from_a_memmap(tmp_path):
    Y = binary_data(N=200, D=10, seed=6)
    path = tmp_path / "y.npy"
    np.save(path, Y)
    data = np.load(path, mmap_mode="r")
    model = engine.StochasticBayesianGPLVM(data, 2, num_inducing=8, batch_size=40, chunk_size=64,
                                           likelihood="bernoulli")
    np.testing.assert_array_equal(model.Y_mean, 0.0)
    before = model.objective()
    result = engine.fit(model, max_iters=150)
    assert result.objective > before + 20.0
    p, v = model.predict(model.X_mean[:20])
    np.testing.assert_allclose(v, p * (1 - p))
    assert np.mean((p > 0.5) == (Y[:20] == 1)) > 0.75
    res = model.infer_latent(np.where(np.arange(10) < 3, np.nan, Y[0]))
    assert res.log_density[0] <= 0 and 0 <= res.prediction.min() and res.prediction.max() <= 1
    model.refine(passes=1)
    assert model.objective() >= result.objective - 1e-6 * abs(result.objective)


def test_stochastic_model_checks_every_chunk_against_the_support():
    Y = count_data(N=90, seed=7)
    Y[70, 3] = 2.5
    with pytest.raises(ShapeError, match=r"row 70, column 3 holds 2\.5"):
        engine.StochasticBayesianGPLVM(Y, 2, num_inducing=5, chunk_size=32, likelihood="poisson")
    with pytest.raises(ConfigurationError, match="noise_variance"):
        engine.StochasticBayesianGPLVM(np.abs(np.round(Y)), 2, num_inducing=5, likelihood="poisson",
                                       noise_variance=0.1)


@pytest.mark.parametrize("likelihood, data", [("bernoulli", binary_data), ("poisson", count_data)])
def test_stochastic_model_bound_is_the_full_batch_bound_at_the_same_parameters(likelihood, data):
    """The minibatched model's full bound and its gradients equal the full-batch non-Gaussian model's
    (an independent implementation of the same bound: whole-Y arrays, not row chunks) when both hold
    the same parameters, and its gradients match finite differences."""
    Y = data(N=70, D=5, seed=8, missing=0.0)
    svi = engine.StochasticBayesianGPLVM(Y, 2, num_inducing=6, batch_size=16, chunk_size=32, likelihood=likelihood)
    assert svi.checkgrad() < 1e-6
    rng = np.random.default_rng(1)
    params = svi.parameters
    params["q_mu"] = params["q_mu"] + 0.3 * rng.standard_normal(params["q_mu"].shape)
    params["q_sqrt"] = np.tril(params["q_sqrt"] + 0.1 * rng.standard_normal(params["q_sqrt"].shape))
    params["X_variance"] = params["X_variance"] * rng.uniform(0.5, 1.5, params["X_variance"].shape)
    svi.set_parameters(**params)
    full = engine.BayesianGPLVM(Y, 2, num_inducing=6, likelihood=likelihood)
    assert sorted(full.parameter_names) == sorted(svi.parameter_names)
    full.set_parameters(**params)
    assert svi.objective() == pytest.approx(full.objective(), rel=1e-10)
    g_svi, g_full = svi.objective_gradients(), full.objective_gradients()
    for name in full.parameter_names:
        np.testing.assert_allclose(np.tril(g_svi[name]) if name == "q_sqrt" else g_svi[name],
                                   np.tril(g_full[name]) if name == "q_sqrt" else g_full[name],
                                   rtol=1e-8, atol=1e-8 * max(1.0, abs(full.objective())), err_msg=name)


def test_the_factory_builds_the_stochastic_model_with_a_likelihood():
    from engine.build import Settings, build

    model = build(binary_data(N=50, D=5), Settings(model="svi", latent_dim=2, num_inducing=5, batch_size=10,
                                                   likelihood="bernoulli"))
    assert isinstance(model, engine.StochasticBayesianGPLVM) and model.likelihood == "bernoulli"
    with pytest.raises(ConfigurationError, match="svi"):
        build(binary_data(N=50, D=5), Settings(model="sparse", latent_dim=2, likelihood="bernoulli"))


def test_a_saved_stochastic_model_loads_with_its_likelihood(tmp_path):
    from engine.io import load_model, save_model

    Y = binary_data(N=60, D=5, seed=9)
    assert type(engine.StochasticBayesianGPLVM(Y, 2, num_inducing=5, likelihood="gaussian")) \
        is engine.StochasticBayesianGPLVM  # the Gaussian model, named explicitly
    model = engine.StochasticBayesianGPLVM(Y, 2, num_inducing=5, batch_size=15, likelihood="bernoulli")
    engine.fit(model, max_iters=20)
    save_model(model, tmp_path / "m.npz")
    loaded = load_model(tmp_path / "m.npz")
    assert isinstance(loaded, engine.StochasticBayesianGPLVM) and loaded.likelihood == "bernoulli"
    assert loaded.objective() == pytest.approx(model.objective(), rel=1e-12)
    X = model.X_mean[:4]
    np.testing.assert_allclose(loaded.predict(X)[0], model.predict(X)[0], rtol=1e-10)
    with np.load(tmp_path / "m.npz") as f:
        assert str(f["model_class"]) == "StochasticBayesianGPLVM"
