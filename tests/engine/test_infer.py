"""Projection of new data (engine.infer): objectives, gradients, batching, missing entries, errors."""
import numpy as np
import pytest
from scipy import optimize, stats

import engine
from engine import infer, kernels, psi, row_optimize, single_blas_thread
from engine.models.projection import PointProjection
from engine.psi import point as point_psi
from engine.bound import collapsed_bound, gaussian_kl
from engine.transforms import POSITIVE
from gradcheck import check_grad



@pytest.fixture(autouse=True)
def _one_blas_thread():
    """Many tiny factorisations: BLAS threads only fight the numba threads (see engine._threads)."""
    with single_blas_thread():
        yield


BAYES_KERNELS = {
    "rbf-ard": (lambda Q: kernels.RBF(Q), 6),
    "rbf-iso+bias+white": (lambda Q: kernels.RBF(Q, ard=False) + kernels.Bias(Q) + kernels.White(Q, variance=0.05), 6),
    # a linear kernel over Q inputs has rank Q: keep M <= Q so that Kmm is invertible
    "linear+bias": (lambda Q: kernels.Linear(Q) + kernels.Bias(Q), 3),
}


def manifold_data(N=80, D=10, seed=0):
    """Outputs from a 2-D latent square through a smooth random map, plus small noise."""
    rng = np.random.default_rng(seed)
    T = rng.uniform(-1.5, 1.5, size=(N, 2))
    W = rng.normal(size=(2, D))
    b = rng.uniform(0, 2 * np.pi, D)
    return np.sin(T @ W + b) + 0.05 * rng.normal(size=(N, D))


def random_bayesian(kernel_name, N=20, D=5, Q=3, seed=0):
    make, M = BAYES_KERNELS[kernel_name]
    rng = np.random.default_rng(seed)
    Y = rng.normal(size=(N, D))
    model = engine.BayesianGPLVM(Y, Q, num_inducing=M, kernel=make(Q), init="random", seed=seed)
    model.set_parameters(X_variance=rng.uniform(0.1, 0.9, size=(N, Q)), Z=rng.normal(size=(M, Q)),
                         noise_variance=0.4)
    return model


def new_rows(model, n=4, seed=1):
    """n new rows with different observation patterns (NaN = unobserved)."""
    rng = np.random.default_rng(seed)
    Y = rng.normal(size=(n, model.output_dim)) + model.Y_mean
    Y[1, [0, 2]] = np.nan
    Y[2, 1:] = np.nan
    return Y


def checked(model, Ynew, observed=None):
    Y, mask = infer.check_new_data(model, Ynew, observed)
    return np.where(mask, Y - model.Y_mean, 0.0), mask


def reference_objective(model, y_centred, mask_row, mu, S, _cache={}):
    """F_O(X, x*) - F_O(X) - KL(q(x*)) for one row, from the collapsed bound with the row appended."""
    values = model.parameters
    kern = model.kernel_at(values)
    Z = values["Z"]
    beta = 1.0 / float(values["noise_variance"])
    key = (id(model), model.get_free().tobytes(), mask_row.tobytes())
    if key not in _cache:
        train = psi.compute(kern, Z, values["X_mean"], values["X_variance"])
        Kmm = kern.K(Z)
        Kmm[np.diag_indices_from(Kmm)] += model.jitter  # the jitter the model's own bound uses
        without = collapsed_bound(model.Y[:, mask_row], train.psi0, train.Psi1, train.Psi2, Kmm, beta).value
        _cache[key] = (train, Kmm, without)
    train, Kmm, without = _cache[key]
    new = psi.compute(kern, Z, mu[None, :], S[None, :])
    Y_O = model.Y[:, mask_row]
    with_row = collapsed_bound(np.vstack([Y_O, y_centred[None, mask_row]]), train.psi0 + new.psi0,
                               np.vstack([train.Psi1, new.Psi1]), train.Psi2 + new.Psi2, Kmm, beta).value
    return with_row - without - gaussian_kl(mu[None, :], S[None, :])


# ------------------------------------------------------------ per-point psi statistics


@pytest.mark.parametrize("kernel_name", sorted(BAYES_KERNELS))
def test_point_psi_statistics_sum_to_the_engine_psi_statistics(kernel_name):
    model = random_bayesian(kernel_name)
    values = model.parameters
    kern = model.kernel_at(values)
    rng = np.random.default_rng(3)
    mu = rng.normal(size=(5, 3))
    S = rng.uniform(0.05, 1.0, size=(5, 3))
    psi0, Psi1, Psi2 = point_psi.PointPsi(kern, values["Z"]).forward(mu, S)
    ref = psi.compute(kern, values["Z"], mu, S)
    np.testing.assert_allclose(psi0.sum(), ref.psi0, rtol=1e-12)
    np.testing.assert_allclose(Psi1, ref.Psi1, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(Psi2.sum(axis=0), ref.Psi2, rtol=1e-9, atol=1e-12)
    for i in range(5):  # each slice is that point's own statistic
        one = psi.compute(kern, values["Z"], mu[i:i + 1], S[i:i + 1])
        np.testing.assert_allclose(Psi2[i], one.Psi2, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kernel_name", sorted(BAYES_KERNELS))
def test_point_psi_gradients_match_the_generic_per_point_path(kernel_name, monkeypatch):
    model = random_bayesian(kernel_name)
    values = model.parameters
    kern = model.kernel_at(values)
    rng = np.random.default_rng(4)
    mu = rng.normal(size=(4, 3))
    S = rng.uniform(0.05, 1.0, size=(4, 3))
    G0 = rng.normal(size=4)
    G1 = rng.normal(size=(4, values["Z"].shape[0]))
    G2 = rng.normal(size=(4,) + (values["Z"].shape[0],) * 2)
    G2 = G2 + G2.transpose(0, 2, 1)
    fast = point_psi.PointPsi(kern, values["Z"])
    fast.forward(mu, S)
    dmu, dS = fast.backward(G0, G1, G2)
    monkeypatch.setattr(point_psi, "_POINT_FAMILIES", {})  # every family through engine.psi, one point at a time
    slow = point_psi.PointPsi(kern, values["Z"])
    p0, P1, P2 = slow.forward(mu, S)
    dmu_ref, dS_ref = slow.backward(G0, G1, G2)
    np.testing.assert_allclose(dmu, dmu_ref, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(dS, dS_ref, rtol=1e-8, atol=1e-10)


# ----------------------------------------------------------------- Bayesian objective


@pytest.mark.parametrize("kernel_name", sorted(BAYES_KERNELS))
def test_bayesian_objective_is_the_augmented_bound_minus_the_training_bound(kernel_name):
    model = random_bayesian(kernel_name)
    Yc, mask = checked(model, new_rows(model))
    problem = model.projection_problem(Yc, mask)
    rng = np.random.default_rng(5)
    mu = rng.normal(size=(4, 3))
    S = rng.uniform(0.05, 1.5, size=(4, 3))
    value, _ = problem.value_and_grad(np.arange(4), np.hstack([mu, POSITIVE.inverse(S)]))
    ref = [reference_objective(model, Yc[i], mask[i], mu[i], S[i]) for i in range(4)]
    np.testing.assert_allclose(value, ref, rtol=1e-6, atol=1e-6)
    # rows are independent: evaluating a subset (in another order) gives the same values
    sub, _ = problem.value_and_grad(np.array([3, 1]), np.hstack([mu, POSITIVE.inverse(S)])[[3, 1]])
    np.testing.assert_allclose(sub, value[[3, 1]], rtol=1e-10)


@pytest.mark.parametrize("kernel_name", sorted(BAYES_KERNELS))
def test_bayesian_objective_gradient_matches_finite_differences(kernel_name):
    model = random_bayesian(kernel_name)
    Yc, mask = checked(model, new_rows(model))
    problem = model.projection_problem(Yc, mask)
    rng = np.random.default_rng(6)
    theta = np.hstack([rng.normal(size=(4, 3)), rng.normal(size=(4, 3))])
    rows = np.arange(4)
    _, grad = problem.value_and_grad(rows, theta)
    err = check_grad(lambda t: problem.value_and_grad(rows, t)[0].sum(), theta, grad)
    assert err < 1e-5, err


# ---------------------------------------------------------------- point models' objective


def point_models():
    Y = manifold_data(N=40, D=6, seed=3)
    exact = engine.GPLVM(Y, 2, seed=0)
    exact.set_parameters(noise_variance=0.05)
    exact_mlp = engine.GPLVM(Y, 2, kernel=kernels.MLP(2) + kernels.Bias(2), seed=0)
    exact_mlp.set_parameters(noise_variance=0.1)
    sparse = engine.SparseGPLVM(Y, 2, num_inducing=8, seed=0)
    sparse.set_parameters(noise_variance=0.05)
    sparse_lin = engine.SparseGPLVM(Y, 2, num_inducing=2, kernel=kernels.Linear(2) + kernels.Bias(2), seed=0)
    return {"exact-rbf": exact, "exact-mlp+bias": exact_mlp, "sparse-rbf": sparse, "sparse-linear+bias": sparse_lin}


@pytest.fixture(scope="module")
def point_model_set():
    return point_models()


@pytest.mark.parametrize("name", ["exact-rbf", "exact-mlp+bias", "sparse-rbf", "sparse-linear+bias"])
def test_point_objective_is_the_predictive_density_plus_prior_and_its_gradient_is_right(name, point_model_set):
    model = point_model_set[name]
    Ynew = new_rows(model)
    Yc, mask = checked(model, Ynew)
    problem = model.projection_problem(Yc, mask)
    assert isinstance(problem, PointProjection)
    rng = np.random.default_rng(7)
    X = rng.normal(size=(4, 2))
    value, grad = problem.value_and_grad(np.arange(4), X)
    mean, var = model.predict(X, include_noise=True)
    var = np.broadcast_to(var[:, None] if np.ndim(var) == 1 else var, mean.shape)
    for i in range(4):
        O = mask[i]
        ref = (stats.norm.logpdf(Ynew[i, O], mean[i, O], np.sqrt(var[i, O])).sum()
               + stats.multivariate_normal(np.zeros(2), np.eye(2)).logpdf(X[i]))
        np.testing.assert_allclose(value[i], ref, rtol=1e-8)
    err = check_grad(lambda x: problem.value_and_grad(np.arange(4), x)[0].sum(), X, grad)
    assert err < 1e-5, err


# ------------------------------------------------------------------ batched optimiser


def test_minimize_rows_solves_each_row_as_if_alone():
    rng = np.random.default_rng(8)
    k, d = 5, 4
    scales = rng.uniform(0.5, 20.0, size=(k, d))
    shifts = rng.normal(size=(k, d))

    def rosen(rows, X):
        # a scaled Rosenbrock valley per row, shifted by a per-row offset
        Z = X - shifts[rows]
        a, b = Z[:, :-1], Z[:, 1:]
        f = np.sum(scales[rows, 1:] * (b - a * a) ** 2 + (1.0 - a) ** 2, axis=1)
        g = np.zeros_like(X)
        g[:, :-1] += -4.0 * scales[rows, 1:] * a * (b - a * a) - 2.0 * (1.0 - a)
        g[:, 1:] += 2.0 * scales[rows, 1:] * (b - a * a)
        return f, g

    x0 = rng.normal(size=(k, d)) * 0.5
    together = row_optimize.minimize_rows(rosen, x0, max_iters=500, gtol=1e-8)
    assert np.all(together.converged)
    np.testing.assert_allclose(together.x, shifts + 1.0, atol=1e-5)
    for i in range(k):
        alone = row_optimize.minimize_rows(lambda rows, X, i=i: rosen(rows + i, X), x0[i:i + 1], max_iters=500, gtol=1e-8)
        np.testing.assert_allclose(alone.x[0], together.x[i], atol=1e-10)
        assert alone.iterations[0] == together.iterations[i]


# ----------------------------------------------------------------- trained Bayesian model


@pytest.fixture(scope="module")
def trained_bayesian():
    data = manifold_data(N=86, D=10, seed=2)
    Y, test = data[:80], data[80:]  # the same map; the test rows come from unseen latent points
    model = engine.BayesianGPLVM(Y, 3, num_inducing=15, seed=0)
    model.fit(optimizer="lbfgs", max_iters=300)
    return model, Y, test


def relevant_dims(model):
    rel = model.relevance
    return rel > 0.01 * rel.max()


def partially_observed(Y, seed=9):
    Y = Y.copy()
    rng = np.random.default_rng(seed)
    for i in range(Y.shape[0]):
        Y[i, rng.choice(Y.shape[1], size=i % 5, replace=False)] = np.nan
    return Y


def test_batched_projection_equals_projecting_each_row_alone(trained_bayesian):
    model, _, test = trained_bayesian
    Ynew = partially_observed(test)
    together = infer.infer_latent(model, Ynew)
    dims = relevant_dims(model)
    assert together.mean.shape == (6, 3) and together.variance.shape == (6, 3)
    assert together.log_density.shape == (6,) and together.observed.shape == (6, 10)
    assert together.prediction.shape == (6, 10) and together.prediction_variance.shape == (6, 10)
    assert np.all(together.variance > 0) and np.all(together.prediction_variance > 0)
    for i in range(6):
        alone = infer.infer_latent(model, Ynew[i])
        assert alone.mean.shape == (1, 3)
        np.testing.assert_allclose(alone.mean[0, dims], together.mean[i, dims], atol=1e-2)
        np.testing.assert_allclose(alone.log_density[0], together.log_density[i], atol=1e-3)


def test_projection_maximises_the_independent_reference_bound(trained_bayesian):
    """Each row's optimum is that of the augmented bound built by engine.bound, optimised by scipy."""
    model, _, test = trained_bayesian
    Ynew = partially_observed(test, seed=10)[[0, 3, 4]]
    result = infer.infer_latent(model, Ynew, num_starts=5, num_optimised=5)
    Yc, mask = checked(model, Ynew)
    dims = relevant_dims(model)
    for i in range(Ynew.shape[0]):
        def negative(theta, i=i):
            return -reference_objective(model, Yc[i], mask[i], theta[:3], POSITIVE.forward(theta[3:]))

        theta0 = np.concatenate([result.mean[i], POSITIVE.inverse(result.variance[i])])
        ours = -negative(theta0)
        np.testing.assert_allclose(ours, result.log_density[i], atol=1e-5)  # eq. 20: KL of x* included
        # scipy from our optimum stays there; from the prior it finds nothing better
        ref = optimize.minimize(negative, theta0, method="L-BFGS-B")
        assert -ref.fun <= ours + 1e-4
        np.testing.assert_allclose(ref.x[:3][dims], result.mean[i, dims], atol=1e-2)
        ref = optimize.minimize(negative, np.concatenate([np.zeros(3), POSITIVE.inverse(np.ones(3))]),
                                method="L-BFGS-B", options={"maxiter": 200})
        assert -ref.fun <= ours + 1e-4


def test_nan_and_observed_mask_give_the_same_projection(trained_bayesian):
    model, _, test = trained_bayesian
    with_nan = partially_observed(test, seed=11)
    mask = ~np.isnan(with_nan)
    garbage = np.where(mask, with_nan, 1e6)  # unobserved entries are never read
    a = infer.infer_latent(model, with_nan)
    b = infer.infer_latent(model, garbage, observed=mask)
    np.testing.assert_array_equal(a.observed, b.observed)
    np.testing.assert_allclose(a.mean, b.mean, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(a.variance, b.variance, rtol=1e-10)
    np.testing.assert_allclose(a.log_density, b.log_density, rtol=1e-10)
    np.testing.assert_allclose(b.completed(garbage)[~mask], a.prediction[~mask])
    np.testing.assert_array_equal(b.completed(garbage)[mask], with_nan[mask])


def test_fully_observed_training_rows_project_near_their_own_latents(trained_bayesian):
    model, Y, _ = trained_bayesian
    result = infer.infer_latent(model, Y[:10])
    dims = relevant_dims(model)
    X = model.X_mean[:10]
    scale = np.sqrt(model.X_variance[:10])
    # within a few posterior standard deviations of q(x_n) in the relevant dimensions
    assert np.all(np.abs(result.mean[:, dims] - X[:, dims]) < 3 * scale[:, dims] + 0.05)
    np.testing.assert_allclose(result.prediction, Y[:10], atol=0.3)


def test_missing_entries_are_reconstructed_better_than_by_the_mean(trained_bayesian):
    model, Y, test = trained_bayesian
    rng = np.random.default_rng(7)
    Ynew = test.copy()
    hidden = np.zeros(Ynew.shape, bool)
    for i in range(Ynew.shape[0]):
        hidden[i, rng.choice(Ynew.shape[1], size=Ynew.shape[1] // 2, replace=False)] = True
    Ynew[hidden] = np.nan
    result = infer.infer_latent(model, Ynew)
    np.testing.assert_array_equal(result.observed, ~hidden)
    assert result.reconstruction.shape == (hidden.sum(),)
    assert np.all(result.reconstruction_variance > 0)
    err_model = np.mean((result.reconstruction - test[hidden]) ** 2)
    err_mean = np.mean((np.broadcast_to(Y.mean(0), test.shape)[hidden] - test[hidden]) ** 2)
    assert err_model < 0.5 * err_mean, (err_model, err_mean)


def test_log_density_prefers_data_like_rows(trained_bayesian):
    model, Y, _ = trained_bayesian
    dens = infer.log_density(model, np.vstack([Y[3], Y[3] + 3.0]))
    assert dens.shape == (2,) and np.all(np.isfinite(dens))
    assert dens[0] > dens[1] + 5


def test_more_optimised_starts_never_give_a_worse_optimum(trained_bayesian):
    model, _, test = trained_bayesian
    Ynew = partially_observed(test, seed=12)
    _, one = infer.infer_latent(model, Ynew, num_starts=5, num_optimised=1, return_details=True)
    _, all5 = infer.infer_latent(model, Ynew, num_starts=5, num_optimised=5, return_details=True)
    assert np.all(all5["objective"].max(axis=1) >= one["objective"].max(axis=1) - 1e-6)
    assert np.all(all5["converged"])


# ------------------------------------------------------------------- point models


@pytest.fixture(scope="module")
def trained_point_models():
    data = manifold_data(N=66, D=8, seed=4)
    Y, test = data[:60], data[60:]
    exact = engine.GPLVM(Y, 2, seed=0)
    exact.fit(optimizer="lbfgs", max_iters=150)
    sparse = engine.SparseGPLVM(Y, 2, num_inducing=12, seed=0)
    sparse.fit(optimizer="lbfgs", max_iters=150)
    return {"exact": exact, "sparse": sparse}, Y, test


@pytest.mark.parametrize("name", ["exact", "sparse"])
def test_point_model_projection_is_a_batched_map_estimate(name, trained_point_models):
    models, _, test = trained_point_models
    model = models[name]
    Ynew = partially_observed(test, seed=13)
    result = infer.infer_latent(model, Ynew)
    assert result.mean.shape == (6, 2) and result.log_density.shape == (6,)
    np.testing.assert_array_equal(result.variance, 0.0)
    # a stationary point of the MAP objective, at least as good as every start
    Yc, mask = checked(model, Ynew)
    problem = model.projection_problem(Yc, mask)
    value, grad = problem.value_and_grad(np.arange(6), result.mean)
    assert np.max(np.abs(grad)) < 1e-3
    starts = model.nearest_rows(Yc, mask, 5)
    for k in range(starts.shape[1]):
        at_start, _ = problem.value_and_grad(np.arange(6), model.X_mean[starts[:, k]])
        assert np.all(value >= at_start - 1e-8)
    # predictions are the model's at the MAP point; log_density is the plug-in predictive density
    mean, var = model.predict(result.mean, include_noise=True)
    var = np.broadcast_to(var[:, None] if np.ndim(var) == 1 else var, mean.shape)
    np.testing.assert_allclose(result.prediction, mean, rtol=1e-10)
    np.testing.assert_allclose(result.prediction_variance, var, rtol=1e-10)
    ref = [stats.norm.logpdf(Ynew[i, mask[i]], mean[i, mask[i]], np.sqrt(var[i, mask[i]])).sum() for i in range(6)]
    np.testing.assert_allclose(result.log_density, ref, rtol=1e-8)
    # batched == alone
    for i in range(6):
        alone = infer.infer_latent(model, Ynew[i])
        np.testing.assert_allclose(alone.mean[0], result.mean[i], atol=1e-2)


@pytest.mark.parametrize("name", ["exact", "sparse"])
def test_point_model_nan_and_mask_agree_and_training_rows_come_home(name, trained_point_models):
    models, Y, test = trained_point_models
    model = models[name]
    with_nan = partially_observed(test, seed=14)
    mask = ~np.isnan(with_nan)
    a = infer.infer_latent(model, with_nan)
    b = infer.infer_latent(model, np.where(mask, with_nan, -7.0), observed=mask)
    np.testing.assert_allclose(a.mean, b.mean, rtol=1e-10, atol=1e-12)
    home = infer.infer_latent(model, Y[:8])
    np.testing.assert_allclose(home.mean, model.X_mean[:8], atol=0.15)


# ------------------------------------------------------------------------ errors


@pytest.mark.parametrize("bad, observed, match", [
    (np.zeros(9), None, "shape"),
    (np.zeros((3, 11)), None, "shape"),
    (np.zeros((2, 3, 10)), None, "shape"),
    (np.zeros((0, 10)), None, "shape"),
    (np.array(["a"] * 10), None, "numeric"),
    (np.full((2, 10), np.nan), None, "at least one observed"),
    (np.where(np.arange(10) == 0, np.inf, 0.0), None, "infinite"),
    (np.zeros((2, 10)), np.zeros((2, 10), bool), "at least one observed"),
    (np.zeros((2, 10)), np.ones((2, 9), bool), "same shape"),
    (np.zeros((2, 10)), np.full((2, 10), 0.5), "boolean"),
    (np.where(np.arange(10) == 3, np.nan, 0.0), np.ones(10, bool), "finite"),
])
def test_bad_new_data_raises_shape_error(bad, observed, match, trained_bayesian):
    model = trained_bayesian[0]
    with pytest.raises(engine.ShapeError, match=match):
        infer.infer_latent(model, bad, observed=observed)
    with pytest.raises(engine.EngineError):
        infer.infer_latent(model, bad, observed=observed)


def test_integer_masks_and_single_rows_are_accepted(trained_bayesian):
    model, Y, _ = trained_bayesian
    mask = np.ones(10, int)
    mask[:3] = 0
    result = infer.infer_latent(model, Y[5], observed=mask)
    assert result.mean.shape == (1, 3) and result.observed.shape == (1, 10)
    assert len(result) == 1
    np.testing.assert_array_equal(result.observed[0], mask.astype(bool))


def test_objective_of_a_model_trained_with_missing_values_is_the_difference_of_model_bounds():
    """F(X, x*) - F(X) - KL(x*) equals the bound of the model with the new row appended minus the model's."""
    rng = np.random.default_rng(15)
    N, D, Q, M = 25, 6, 2, 5
    Y = manifold_data(N=N, D=D, seed=5)
    Y[rng.random((N, D)) < 0.2] = np.nan
    Y[:, 0] = manifold_data(N=N, D=D, seed=5)[:, 0]  # one complete column: two kinds of groups
    model = engine.BayesianGPLVM(Y, Q, num_inducing=M, seed=0)
    model.set_parameters(X_variance=rng.uniform(0.1, 0.5, size=(N, Q)), noise_variance=0.1)
    Ynew = manifold_data(N=N + 3, D=D, seed=5)[N:]
    Ynew[1, [1, 4]] = np.nan
    Yc, mask = checked(model, Ynew)
    problem = model.projection_problem(Yc, mask)
    mu = rng.normal(size=(3, Q))
    S = rng.uniform(0.05, 0.8, size=(3, Q))
    theta = np.hstack([mu, POSITIVE.inverse(S)])
    value, grad = problem.value_and_grad(np.arange(3), theta)
    p = model.parameters
    for i in range(3):
        aug = engine.BayesianGPLVM(np.vstack([Y, Ynew[i]]), Q, num_inducing=M, X=np.vstack([p["X_mean"], mu[i]]),
                                   X_variance=np.vstack([p["X_variance"], S[i]]), Z=p["Z"],
                                   noise_variance=p["noise_variance"], kernel=model.kernel)
        # the appended row changes the column means used for centring: keep the model's
        aug.Y_mean = model.Y_mean
        aug_Y = np.vstack([Y, Ynew[i]]) - model.Y_mean
        aug.Y = np.ascontiguousarray(np.where(np.isnan(aug_Y), 0.0, aug_Y))
        for kept in ("_group_consts", "_trYY_value"):  # what the model derived from its own centring
            aug.__dict__.pop(kept, None)
        aug._attach_backend(None)  # its row sums from the re-centred Y
        aug._cache = None
        np.testing.assert_allclose(value[i], aug.objective() - model.objective(), rtol=1e-6, atol=1e-6)
    err = check_grad(lambda t: problem.value_and_grad(np.arange(3), t)[0].sum(), theta, grad)
    assert err < 1e-5, err
    result = infer.infer_latent(model, Ynew)
    assert np.all(np.isfinite(result.mean)) and np.all(np.isfinite(result.log_density))
