"""The exact (MAP) GP-LVM: gradients, the objective against a dense reference, PCA and 1-NN behaviour."""
import numpy as np
import pytest

import engine
from engine import kernels
from engine.metrics import one_nn_errors
from modelcheck import exact_log_marginal, model_gradient_errors

KERNELS = {
    "rbf-ard": lambda Q: kernels.RBF(Q, ard=True),
    "rbf-iso+bias+white": lambda Q: kernels.RBF(Q, ard=False) + kernels.Bias(Q) + kernels.White(Q, variance=0.1),
    "linear": lambda Q: kernels.Linear(Q),
    "matern32": lambda Q: kernels.Matern32(Q),
    "matern52+bias": lambda Q: kernels.Matern52(Q) + kernels.Bias(Q),
    "mlp": lambda Q: kernels.MLP(Q),
}


def three_class_manifold(n_per_class=40, D=10, seed=0):
    """Three classes on arcs of one curved 1-D manifold in a 2-D latent space, pushed through a nonlinear map."""
    rng = np.random.default_rng(seed)
    t = np.concatenate([rng.uniform(k * 2.2, k * 2.2 + 1.6, n_per_class) for k in range(3)])
    labels = np.repeat(np.arange(3), n_per_class)
    latent = np.column_stack([np.cos(t) * (1 + 0.3 * t), np.sin(t) * (1 + 0.3 * t)])
    W = rng.normal(size=(2, D))
    b = rng.uniform(0, 2 * np.pi, D)
    Y = np.sin(latent @ W + b) + 0.05 * rng.normal(size=(t.size, D))
    return Y, labels


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_gradients_match_finite_differences(name):
    rng = np.random.default_rng(1)
    Y = rng.normal(size=(15, 4))
    model = engine.GPLVM(Y, 2, kernel=KERNELS[name](2), init="random", seed=3)
    errors = model_gradient_errors(model)
    assert set(errors) == set(model.parameter_names)
    assert max(errors.values()) < 1e-5, errors


def test_objective_equals_dense_gaussian_density_plus_prior():
    rng = np.random.default_rng(2)
    Y = rng.normal(size=(12, 3)) + 5.0
    model = engine.GPLVM(Y, 2, init="random", seed=0)
    model.set_parameters(noise_variance=0.3, lengthscales=[0.7, 1.9], variance=1.4)
    X = model.X_mean
    K = model.kernel.K(X)
    expected = exact_log_marginal(Y - Y.mean(0), K, 0.3) - 0.5 * np.sum(X**2) - 0.5 * X.size * np.log(2 * np.pi)
    assert model.objective() == pytest.approx(expected, rel=1e-10)
    assert model.log_likelihood() == pytest.approx(exact_log_marginal(Y - Y.mean(0), K, 0.3), rel=1e-10)


def test_linear_kernel_optimum_spans_principal_subspace():
    # Dual probabilistic PCA (Lawrence 2005, section 2.3): the MAP X spans the top-Q eigenvectors of Y Y^T.
    rng = np.random.default_rng(4)
    N, D, Q = 60, 8, 2
    Y = rng.normal(size=(N, Q)) @ rng.normal(size=(Q, D)) * np.array([3.0, 1.0])[:, None].sum() \
        + 0.3 * rng.normal(size=(N, D))
    model = engine.GPLVM(Y, Q, kernel=kernels.Linear(Q), init="random", seed=1)
    model.fit(optimizer="lbfgs", max_iters=2000)
    Yc = Y - Y.mean(0)
    evals, evecs = np.linalg.eigh(Yc @ Yc.T)
    U = evecs[:, -Q:]
    Xq, _ = np.linalg.qr(model.X_mean)
    # principal angles between span(X) and span(U): all cosines near 1
    cosines = np.linalg.svd(U.T @ Xq, compute_uv=False)
    assert cosines.min() > 0.999, cosines


def test_rbf_gplvm_beats_pca_in_one_nn_error():
    Y, labels = three_class_manifold()
    pca_errors = one_nn_errors(engine.init.initial_latents(Y, 2, "pca"), labels)
    model = engine.GPLVM(Y, 2, init="pca")
    model.fit(optimizer="lbfgs", max_iters=300)
    gplvm_errors = one_nn_errors(model.X_mean, labels)
    assert gplvm_errors < pca_errors, (gplvm_errors, pca_errors)


def test_predict_at_training_points_reconstructs_data_in_data_units():
    Y, _ = three_class_manifold(n_per_class=20)
    Y = Y * 3 + 10
    model = engine.GPLVM(Y, 2)
    model.fit(max_iters=100)
    mean, var = model.predict(model.X_mean)
    assert mean.shape == Y.shape and var.shape == Y.shape
    assert np.all(var >= 0)
    resid = np.mean((mean - Y) ** 2)
    assert resid < 0.5 * np.mean((Y - Y.mean(0)) ** 2)
    _, var_noisy = model.predict(model.X_mean, include_noise=True)
    np.testing.assert_allclose(var_noisy - var, model.noise_variance)
    # far from the data the variance returns to the prior variance of the kernel
    _, var_far = model.predict(np.full((1, 2), 50.0))
    assert var_far[0] == pytest.approx(model.kernel.K_diag(np.zeros((1, 2)))[0], rel=1e-6)


def test_jitter_is_added_only_when_needed_and_reported():
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(30, 3))
    model = engine.GPLVM(Y, 1, init="random")
    model.objective()
    assert model.jitter == 0.0
    # crowded latent points, a huge signal variance and a vanishing noise: K + noise I is
    # numerically singular, so the factorisation needs jitter, and says how much
    model.set_parameters(X_mean=np.linspace(0, 0.5, 30)[:, None], noise_variance=2e-8, variance=1e10)
    value = model.objective()
    assert np.isfinite(value)
    assert model.jitter > 0.0


def test_bad_inputs_raise_typed_errors():
    with pytest.raises(engine.ShapeError, match="2-D"):
        engine.GPLVM(np.ones(5), 1)
    with pytest.raises(engine.ShapeError, match="NaN"):
        engine.GPLVM(np.array([[1.0, np.nan], [2.0, 3.0], [1.0, 1.0]]), 1)
    with pytest.raises(engine.ShapeError, match="latent_dim"):
        engine.GPLVM(np.ones((5, 2)), 0)
    with pytest.raises(engine.ShapeError, match="kernel over 2"):
        engine.GPLVM(np.random.default_rng(0).normal(size=(5, 2)), 2, kernel=kernels.RBF(3))


def test_copy_is_independent_of_later_parameter_changes():
    Y, _ = three_class_manifold(n_per_class=10)
    model = engine.GPLVM(Y, 2)
    frozen = model.copy()
    grid = np.random.default_rng(0).normal(size=(5, 2))
    before = frozen.predict(grid)[0]
    model.fit(max_iters=5)
    assert not np.allclose(model.X_mean, frozen.X_mean)
    np.testing.assert_array_equal(frozen.predict(grid)[0], before)
    assert frozen.objective() != model.objective()
