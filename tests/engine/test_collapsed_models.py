"""Sparse and Bayesian GP-LVM: gradients, dense references, tightness, ARD, prediction, new data, files."""
import io

import numpy as np
import pytest

import engine
from engine import kernels, psi
from engine.io import ModelFileError, load_model, save_model
from engine.models.gplvm import log_prior
from modelcheck import dense_psi_bound, exact_log_marginal, model_gradient_errors, titsias_sparse_bound

BAYES_KERNELS = {
    "rbf-ard": (lambda Q: kernels.RBF(Q), 6),
    "rbf-iso": (lambda Q: kernels.RBF(Q, ard=False), 6),
    "rbf+bias+white": (lambda Q: kernels.RBF(Q) + kernels.Bias(Q) + kernels.White(Q, variance=0.05), 6),
    # a linear kernel over Q inputs has rank Q: keep M <= Q so that Kmm is invertible
    "linear+bias": (lambda Q: kernels.Linear(Q) + kernels.Bias(Q), 3),
}


def random_bayesian(kernel_name, N=18, D=4, Q=3, seed=0):
    make, M = BAYES_KERNELS[kernel_name]
    rng = np.random.default_rng(seed)
    Y = rng.normal(size=(N, D))
    model = engine.BayesianGPLVM(Y, Q, num_inducing=M, kernel=make(Q), init="random", seed=seed)
    model.set_parameters(X_variance=rng.uniform(0.1, 0.9, size=(N, Q)), Z=rng.normal(size=(M, Q)),
                         noise_variance=0.4)
    return model


def manifold_data(N=80, D=10, seed=0):
    """Outputs from a 2-D latent square through a smooth random map, plus small noise."""
    rng = np.random.default_rng(seed)
    T = rng.uniform(-1.5, 1.5, size=(N, 2))
    W = rng.normal(size=(2, D))
    b = rng.uniform(0, 2 * np.pi, D)
    return np.sin(T @ W + b) + 0.05 * rng.normal(size=(N, D))


@pytest.mark.parametrize("name", sorted(BAYES_KERNELS))
def test_bayesian_gradients_match_finite_differences(name):
    model = random_bayesian(name)
    jitter = model.jitter
    errors = model_gradient_errors(model)
    assert set(errors) == set(model.parameter_names)
    # entry-by-entry central differences; a small entry's round-off reaches ~1e-5 of the block's scale
    assert max(errors.values()) < 1e-4, errors
    assert model.jitter == jitter > 0.0  # one fixed jitter, never raised during the checks


# With a linear kernel and M = Q the bound does not depend on Z at all (its gradient is exactly
# zero and finite differences see only round-off), so the linear case uses M = 1 < Q.
@pytest.mark.parametrize("make, M", [(lambda Q: kernels.RBF(Q), 3),
                                     (lambda Q: kernels.RBF(Q) + kernels.Bias(Q) + kernels.White(Q), 3),
                                     (lambda Q: kernels.Matern32(Q), 3), (lambda Q: kernels.Linear(Q), 1)])
def test_sparse_gradients_match_finite_differences(make, M):
    rng = np.random.default_rng(1)
    model = engine.SparseGPLVM(rng.normal(size=(16, 4)), 2, num_inducing=M, kernel=make(2), init="random")
    model.set_parameters(Z=rng.normal(size=(M, 2)), noise_variance=0.3)
    errors = model_gradient_errors(model)
    assert max(errors.values()) < 1e-5, errors


@pytest.mark.parametrize("name", sorted(BAYES_KERNELS))
def test_bayesian_bound_matches_dense_reference(name):
    model = random_bayesian(name, seed=3)
    v = model.parameters
    k = model.kernel
    stats = psi.compute(k, v["Z"], v["X_mean"], v["X_variance"])
    Kmm = k.K(v["Z"]) + model.jitter * np.eye(model.num_inducing)  # the fixed jitter is part of the bound
    expected = dense_psi_bound(model.Y, *stats, Kmm, 1.0 / v["noise_variance"]) - model.kl()
    assert model.elbo() == pytest.approx(expected, rel=1e-10)
    # the KL term, independently
    mu, S = v["X_mean"], v["X_variance"]
    assert model.kl() == pytest.approx(0.5 * np.sum(mu**2 + S - np.log(S) - 1), rel=1e-12)


def test_sparse_bound_matches_titsias_dense_form():
    rng = np.random.default_rng(5)
    model = engine.SparseGPLVM(rng.normal(size=(20, 3)), 2, num_inducing=5, init="random")
    model.set_parameters(noise_variance=0.2, lengthscales=[0.8, 1.3])
    v = model.parameters
    k = model.kernel
    X, Z = v["X_mean"], v["Z"]
    Kmm = k.K(Z) + model.jitter * np.eye(5)
    expected = titsias_sparse_bound(model.Y, k.K(X), k.K(X, Z), Kmm, 0.2) + log_prior(X)[0]
    assert model.objective() == pytest.approx(expected, rel=1e-10)


def test_bayesian_bound_is_tight_at_zero_variance_with_inducing_points_at_the_data():
    # X_variance -> 0 and Z = X_mean (M = N): F + KL equals log N(Y | 0, K + s I) at X_mean.
    rng = np.random.default_rng(2)
    N, Q = 8, 2
    X = rng.uniform(-2, 2, size=(N, Q)) * 1.5
    Y = rng.normal(size=(N, 3))
    model = engine.BayesianGPLVM(Y, Q, num_inducing=N, X=X, Z=X, X_variance=2e-8)
    model.set_parameters(noise_variance=0.25, lengthscales=[0.9, 1.1])
    exact = exact_log_marginal(model.Y, model.kernel.K(X), 0.25)
    assert model.jitter == pytest.approx(1e-8 * np.mean(model.kernel.K_diag(X)))
    assert model.elbo() + model.kl() == pytest.approx(exact, rel=1e-6)


@pytest.mark.parametrize("seed", range(5))
def test_sparse_bound_never_exceeds_exact_log_marginal(seed):
    rng = np.random.default_rng(seed)
    N, Q = 15, 2
    model = engine.SparseGPLVM(rng.normal(size=(N, 3)), Q, num_inducing=int(rng.integers(1, 8)), init="random",
                               seed=seed)
    model.set_parameters(Z=rng.normal(size=model.Z.shape) * 2, noise_variance=float(rng.uniform(0.05, 1.0)),
                         lengthscales=rng.uniform(0.3, 3.0, size=Q), variance=float(rng.uniform(0.5, 2.0)))
    v = model.parameters
    bound = model.objective() - log_prior(v["X_mean"])[0]
    exact = exact_log_marginal(model.Y, model.kernel.K(v["X_mean"]), v["noise_variance"])
    assert bound <= exact + 1e-9


def test_bayesian_default_setup_is_the_papers():
    Y = manifold_data(N=60)
    model = engine.BayesianGPLVM(Y, latent_dim=10, num_inducing=20)
    assert model.kernel.name == "rbf" and model.kernel.params["lengthscales"].shape == (10,)
    np.testing.assert_allclose(model.X_variance, 0.5)
    np.testing.assert_allclose(model.X_mean, engine.init.initial_latents(model.Y, 10, "pca"))
    # Z is a subset of the initial means
    assert all(np.any(np.all(np.isclose(model.X_mean, z), axis=1)) for z in model.Z)
    assert model.objective_name == "ELBO"


@pytest.mark.slow
def test_ard_switches_off_surplus_dimensions():
    Y = manifold_data(N=100, D=10, seed=1)
    model = engine.BayesianGPLVM(Y, 8, num_inducing=15, seed=0)
    model.fit(optimizer="lbfgs", max_iters=400)
    rel = model.relevance
    off = np.sum(rel < 0.01 * rel.max())
    assert off >= 5, rel


@pytest.fixture(scope="module")
def trained_bayesian():
    Y = manifold_data(N=80, D=12, seed=2)
    model = engine.BayesianGPLVM(Y, 3, num_inducing=15, seed=0)
    model.fit(optimizer="lbfgs", max_iters=300)
    return model, Y


def test_partially_observed_vector_is_reconstructed_better_than_mean_imputation(trained_bayesian):
    model, Y = trained_bayesian
    rng = np.random.default_rng(7)
    errors_model, errors_mean = [], []
    for n in rng.choice(Y.shape[0], size=6, replace=False):
        observed = np.zeros(Y.shape[1], bool)
        observed[rng.choice(Y.shape[1], size=Y.shape[1] // 2, replace=False)] = True
        y = Y[n].copy()
        y_hidden = y[~observed]
        y[~observed] = np.nan  # hidden entries are never read
        result = model.infer_latent(y, observed=observed)
        assert result.mean.shape == (1, 3) and np.all(result.variance > 0)
        assert result.reconstruction.shape == y_hidden.shape
        assert np.all(result.reconstruction_variance > 0)
        errors_model.append(np.mean((result.reconstruction - y_hidden) ** 2))
        errors_mean.append(np.mean((Y.mean(0)[~observed] - y_hidden) ** 2))
    assert np.mean(errors_model) < 0.5 * np.mean(errors_mean), (errors_model, errors_mean)


def test_log_density_prefers_data_like_vectors(trained_bayesian):
    model, Y = trained_bayesian
    typical = model.log_density(Y[3])
    outlier = model.log_density(Y[3] + 3.0)
    assert np.isfinite(typical) and typical > outlier + 5


def test_uncertain_prediction_reduces_to_point_prediction_and_matches_monte_carlo(trained_bayesian):
    model, _ = trained_bayesian
    x = model.X_mean[:2]
    m_point, v_point = model.predict(x)
    m_tiny, v_tiny = model.predict(x, np.full_like(x, 1e-7))
    np.testing.assert_allclose(m_tiny, m_point, rtol=1e-4, atol=1e-5)
    assert v_point.shape == v_tiny.shape == (2, model.output_dim)
    np.testing.assert_allclose(v_tiny, v_point, rtol=1e-3, atol=1e-5)
    # moments under q(x*) = N(x, 0.1 I) against sampling point predictions
    S = np.full((1, 3), 0.1)
    m_unc, v_unc = model.predict(x[:1], S)
    rng = np.random.default_rng(0)
    samples = x[:1] + np.sqrt(0.1) * rng.normal(size=(20000, 3))
    means, variances = model.predict(samples)
    mc_mean = means.mean(0)
    mc_var = variances.mean() + means.var(0)
    se = means.std(0) / np.sqrt(samples.shape[0])
    assert np.all(np.abs(m_unc[0] - mc_mean) < 5 * se + 1e-9)
    np.testing.assert_allclose(v_unc[0], mc_var, rtol=0.05)


@pytest.mark.parametrize("cls", ["GPLVM", "SparseGPLVM", "BayesianGPLVM"])
def test_model_file_round_trip(cls, tmp_path):
    Y = manifold_data(N=30, D=5)
    kwargs = {} if cls == "GPLVM" else {"num_inducing": 6}
    model = getattr(engine, cls)(Y, 2, kernel=kernels.RBF(2) + kernels.Bias(2), **kwargs)
    model.fit(max_iters=15)
    path = tmp_path / "model.npz"
    save_model(model, path)
    loaded = load_model(path)
    assert type(loaded) is type(model)
    assert loaded.objective() == pytest.approx(model.objective(), rel=1e-12)
    grid = np.random.default_rng(0).normal(size=(7, 2))
    np.testing.assert_allclose(loaded.predict(grid)[0], model.predict(grid)[0], rtol=1e-10)
    np.testing.assert_allclose(loaded.predict(grid)[1], model.predict(grid)[1], rtol=1e-10)


def test_model_files_refuse_garbage_and_pickles(tmp_path):
    with pytest.raises(ModelFileError):
        load_model(io.BytesIO(b"not a zip file at all"))
    bad = tmp_path / "pickled.npz"
    np.savez(bad, model_class=np.array([{"evil": 1}], dtype=object))
    with pytest.raises(ModelFileError):
        load_model(bad)
    empty = tmp_path / "empty.npz"
    np.savez(empty, Y=np.ones((3, 2)))
    with pytest.raises(ModelFileError, match="missing"):
        load_model(empty)


def test_unsupported_kernel_is_refused_with_the_working_kernels_named():
    Y = manifold_data(N=20)
    with pytest.raises(engine.UnsupportedKernelError, match="(?i)rbf.*linear|linear.*rbf"):
        engine.BayesianGPLVM(Y, 2, num_inducing=5, kernel=kernels.Matern32(2))


def test_too_many_inducing_points_is_a_shape_error():
    with pytest.raises(engine.ShapeError, match="inducing"):
        engine.BayesianGPLVM(manifold_data(N=10), 2, num_inducing=11)


def test_crowded_inducing_points_give_a_finite_bound_with_exact_gradients():
    # 80 inducing points crowded into a 2-D square: Kmm factorises, but so badly that
    # without care A = L^-1 Psi2 L^-T comes out indefinite.  With the fixed jitter the
    # bound is finite and its gradients are those of the reported function.
    from engine.linalg import try_cholesky

    rng = np.random.default_rng(0)
    T = rng.uniform(-1, 1, size=(300, 2))
    Y = np.sin(T @ rng.normal(size=(2, 8)) * 2) + 0.01 * rng.normal(size=(300, 8))
    model = engine.SparseGPLVM(Y, 2, num_inducing=80, noise_variance=1e-3)
    v = model.parameters
    Kmm = model.kernel.K(v["Z"])
    assert try_cholesky(Kmm) is not None  # Kmm alone looks fine ...
    value = model.objective()
    assert np.isfinite(value)
    assert model.jitter > 0.0  # the fixed jitter is part of the objective and reported
    # At this conditioning the objective itself carries ~1e-8 relative round-off, so
    # central differences need a larger step; the textbook gradient was off by orders of magnitude.
    assert model.checkgrad(eps=1e-4) < 2e-3


@pytest.mark.parametrize("missing", [False, True], ids=["complete", "missing"])
def test_posteriors_reuse_the_last_evaluation_at_the_same_parameters(missing):
    rng = np.random.default_rng(4)
    Y = np.c_[np.sin(np.linspace(0, 6, 60)), np.cos(np.linspace(0, 6, 60))] @ rng.standard_normal((2, 5))
    Y += 0.05 * rng.standard_normal(Y.shape)
    if missing:
        Y[rng.random(Y.shape) < 0.15] = np.nan
    m = engine.BayesianGPLVM(Y, latent_dim=2, num_inducing=6)
    engine.fit(m, optimizer="lbfgs", max_iters=5)
    fresh = engine.BayesianGPLVM(Y, latent_dim=2, num_inducing=6)
    fresh.set_parameters(**m.parameters)  # the same point, never evaluated: factors from a pass over the rows
    m.objective()  # evaluated at the current point: its factors are kept

    def no_pass(values):
        raise AssertionError("posteriors() made a pass over the rows")

    snapshot = m.copy()
    snapshot._bounds = no_pass  # a copy taken after the evaluation predicts from its factors
    for (cols, got), (want_cols, want) in zip(snapshot.posteriors(), fresh.posteriors(), strict=True):
        np.testing.assert_array_equal(cols, want_cols)
        for name in ("L", "LW", "alpha"):
            np.testing.assert_allclose(getattr(got, name), getattr(want, name), rtol=1e-10, atol=1e-12)
    moved = m.copy()
    moved.set_parameters(noise_variance=float(m.parameters["noise_variance"]) * 1.5)
    moved._bounds = no_pass
    with pytest.raises(AssertionError, match="a pass over the rows"):  # other parameters: computed afresh
        moved.posteriors()
