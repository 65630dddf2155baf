"""Latent geometry (engine.geometry and the models' metric / magnification / geodesic).

The metric is checked against an independent dense reference: the posterior of
the latent function written from the textbook formulas with dense solves
(exact GP; q(u) of the collapsed and stochastic models), its mean Jacobian and
the covariance of its Jacobian taken by finite differences of the predictive
mean and of the predictive cross-covariance, then E[J]^T E[J] + sum_d cov(J_d).
(GPy's predict_wishart_embedding agrees with the metric to ~1e-7 at equal
parameters; scripts/check_geometry_gpy.py compares them where GPy is installed.)
With a Bernoulli likelihood the metric is that of the latent functions f, one
posterior per output.
Geodesics: on a circle embedded nonlinearly in 16 dimensions, the geodesic
follows the circle with the data's arc length, and the straight segment across
the empty middle is much longer.
"""
import numpy as np
import pytest
from gradcheck import check_grad

import engine
from engine import kernels as K
from engine import psi
from engine.errors import ShapeError, UnsupportedOperationError
from engine.geometry import Geodesic, LatentGeometry, smooth_kernel

Q = 3


def curved(N=40, D=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, Q))
    Y = np.tanh(X @ rng.standard_normal((Q, D))) + 0.3 * np.sin(2 * X[:, :1]) + 0.05 * rng.standard_normal((N, D))
    return X, Y


# ---- dense references of the latent function's posterior: (mean(A) (n, D), cov(A, B) (n, m)) ------------
def exact_reference(model):
    v = model.parameters
    k, X = model.kernel, v["X_mean"]
    Kn = k.K(X) + (v["noise_variance"] + model.jitter) * np.eye(X.shape[0])
    alpha = np.linalg.solve(Kn, model.Y)
    return (lambda A: k.K(A, X) @ alpha,
            lambda A, B: k.K(A, B) - k.K(A, X) @ np.linalg.solve(Kn, k.K(X, B)))


def qu_reference(k, Z, jitter, m_u, S_u):
    """f(a) = k(a, Z) Kmm^-1 u, u ~ N(m_u, S_u)."""
    Kmm = k.K(Z) + jitter * np.eye(Z.shape[0])

    def mean(A):
        return k.K(A, Z) @ np.linalg.solve(Kmm, m_u)

    def cov(A, B):
        KA, KB = np.linalg.solve(Kmm, k.K(Z, A)), np.linalg.solve(Kmm, k.K(Z, B))
        return k.K(A, B) - k.K(A, Z) @ KB + KA.T @ S_u @ KB

    return mean, cov


def collapsed_reference(k, Z, jitter, beta, psi1, Psi2, Y):
    """The optimal q(u) of the collapsed bound: S_u = Kmm W^-1 Kmm, m_u = beta Kmm W^-1 Psi1^T Y."""
    Kmm = k.K(Z) + jitter * np.eye(Z.shape[0])
    W = Kmm + beta * Psi2
    return qu_reference(k, Z, jitter, beta * Kmm @ np.linalg.solve(W, psi1.T @ Y), Kmm @ np.linalg.solve(W, Kmm))


def model_reference(model):
    v = model.parameters
    if isinstance(model, engine.GPLVM):
        return exact_reference(model)
    k, Z = model.kernel, v["Z"]
    if isinstance(model, engine.StochasticBayesianGPLVM):
        L = np.linalg.cholesky(k.K(Z) + model.jitter * np.eye(Z.shape[0]))
        R = np.tril(v["q_sqrt"])
        return qu_reference(k, Z, model.jitter, L @ v["q_mu"], L @ R @ R.T @ L.T)
    if model.X_variance is not None:  # q(X) (a dynamical model derives it from its time prior)
        _, psi1, Psi2 = psi.compute(k, Z, model.X_mean, model.X_variance)
    else:
        psi1 = k.K(v["X_mean"], Z)
        Psi2 = psi1.T @ psi1
    return collapsed_reference(k, Z, model.jitter, 1.0 / v["noise_variance"], psi1, Psi2, model.Y)


def reference_metric(mean, cov, X, D, h_mean=1e-5, h_cov=1e-4):
    """E[J]^T E[J] + D cov(J) by central differences of the mean and mixed differences of the cross-covariance."""
    n = X.shape[0]
    G = np.zeros((n, Q, Q))
    E = np.eye(Q)
    for i in range(n):
        x = X[i:i + 1]
        J = np.stack([(mean(x + h_mean * E[q]) - mean(x - h_mean * E[q]))[0] / (2 * h_mean) for q in range(Q)], 1)
        C = np.empty((Q, Q))
        for a in range(Q):
            for b in range(Q):
                ea, eb = h_cov * E[a], h_cov * E[b]
                C[a, b] = (cov(x + ea, x + eb) - cov(x + ea, x - eb) - cov(x - ea, x + eb)
                           + cov(x - ea, x - eb))[0, 0] / (4 * h_cov**2)
        G[i] = J.T @ J + D * C
    return G


def assert_metric_close(G, G_ref, rtol):
    scale = np.max(np.abs(G_ref).reshape(len(G_ref), -1), axis=1)
    err = np.max(np.abs(G - G_ref).reshape(len(G_ref), -1), axis=1) / scale
    assert np.all(err < rtol), err


def probe_points():
    rng = np.random.default_rng(3)
    X, _ = curved()
    return np.vstack([X[:3] + 0.1 * rng.standard_normal((3, Q)), 2.5 * rng.standard_normal((2, Q))])


KERNELS = {
    "rbf+linear+bias+white": lambda: (K.RBF(Q, 1.3, [0.9, 1.6, 3.0]) + K.Linear(Q, [0.2, 0.5, 0.1])
                                      + K.Bias(Q, 0.4) + K.White(Q, 0.01)),
    "matern32": lambda: K.Matern32(Q, 1.1, [1.0, 1.5, 2.0]),
    "matern52": lambda: K.Matern52(Q, 0.9, 1.2, ard=False),
    "mlp": lambda: K.MLP(Q, 1.2, 0.8, 0.5),
}


def moved(model, iters=8):
    """The model after a few optimiser steps (parameters away from their start)."""
    model.fit(max_iters=iters)
    return model


@pytest.mark.parametrize("kernel", sorted(KERNELS))
@pytest.mark.parametrize("kind", ["gplvm", "sparse"])
def test_metric_matches_dense_reference(kind, kernel):
    X, Y = curved()
    k = KERNELS[kernel]()
    if kind == "gplvm":
        m = engine.GPLVM(Y, Q, X=X, kernel=k, noise_variance=0.05)
    else:
        m = engine.SparseGPLVM(Y, Q, num_inducing=12, X=X, kernel=k, noise_variance=0.05)
    moved(m)
    Xt = probe_points()
    G = m.metric(Xt)
    assert G.shape == (len(Xt), Q, Q)
    np.testing.assert_allclose(G, G.transpose(0, 2, 1), rtol=0, atol=1e-12 * np.abs(G).max())
    # Matern 3/2's mixed differences converge as O(h) (k has an r^3 term at r = 0)
    assert_metric_close(G, reference_metric(*model_reference(m), Xt, m.output_dim),
                        2e-3 if kernel == "matern32" else 2e-5)


@pytest.mark.parametrize("kernel", ["rbf+bias+white", "linear"])
def test_bayesian_metric_matches_dense_reference(kernel):
    X, Y = curved()
    k = (K.RBF(Q, 1.3, [0.9, 1.6, 3.0]) + K.Bias(Q, 0.4) + K.White(Q, 0.01) if kernel != "linear"
         else K.Linear(Q, [0.7, 0.5, 0.1]))
    m = moved(engine.BayesianGPLVM(Y, Q, num_inducing=12, X=X, X_variance=0.2, kernel=k, noise_variance=0.05))
    Xt = probe_points()
    assert_metric_close(m.metric(Xt), reference_metric(*model_reference(m), Xt, m.output_dim), 2e-5)


def test_stochastic_metric_matches_dense_reference_of_its_explicit_q_u():
    X, Y = curved()
    m = engine.StochasticBayesianGPLVM(Y, Q, num_inducing=10, X=X)
    rng = np.random.default_rng(5)
    M = 10
    q_sqrt = np.tril(0.3 * rng.standard_normal((M, M)), -1) + np.diag(rng.uniform(0.2, 0.9, M))
    m.set_parameters(q_mu=rng.standard_normal((M, Y.shape[1])), q_sqrt=q_sqrt)
    Xt = probe_points()
    assert_metric_close(m.metric(Xt), reference_metric(*model_reference(m), Xt, m.output_dim), 2e-5)


@pytest.mark.parametrize("kind", ["stochastic", "bayesian"])
def test_the_metric_factors_are_kept_until_the_parameters_change(kind):
    X, Y = curved()
    cls = engine.StochasticBayesianGPLVM if kind == "stochastic" else engine.BayesianGPLVM
    m = cls(Y, Q, num_inducing=10, X=X)
    geo = m.geometry()
    assert m.geometry() is geo
    before = m.metric(X[:2])
    m.set_parameters(Z=m.parameters["Z"] + 0.1)
    assert m.geometry() is not geo and not np.allclose(m.metric(X[:2]), before)


def test_dynamical_metric_matches_dense_reference():
    X, Y = curved(N=30)
    m = moved(engine.DynamicalBGPLVM(Y, np.linspace(0.0, 3.0, 30), Q, num_inducing=8))
    Xt = points_near(m.X_mean)
    assert_metric_close(m.metric(Xt), reference_metric(*model_reference(m), Xt, m.output_dim), 2e-5)
    g = m.geodesic(m.X_mean[0], m.X_mean[-1], num_points=12)
    assert g.length <= g.straight_length + 1e-12


def points_near(X):
    return np.vstack([X[:3] + 0.05, X[-2:] - 0.05])


def test_bernoulli_bayesian_metric_is_that_of_the_latent_functions():
    """One explicit q(v_d) per output: the metric sums each output's own E[J_d] E[J_d]^T + cov(J_d)."""
    X, Y = curved()
    m = moved(engine.BayesianGPLVM((Y > 0).astype(float), Q, num_inducing=10, X=X, likelihood="bernoulli"), 5)
    v, k = m.parameters, m.kernel
    L = np.linalg.cholesky(k.K(v["Z"]) + m.jitter * np.eye(v["Z"].shape[0]))
    Xt = probe_points()
    G_ref = np.zeros((len(Xt), Q, Q))
    for d in range(m.output_dim):
        R = np.tril(v["q_sqrt"][d])
        ref = qu_reference(k, v["Z"], m.jitter, L @ v["q_mu"][:, d:d + 1], L @ R @ R.T @ L.T)
        G_ref += reference_metric(*ref, Xt, 1)
    assert_metric_close(m.metric(Xt), G_ref, 2e-5)


def test_laplace_gplvm_metric_is_that_of_the_latent_functions():
    """f_d | Y ~ N(k(x, X) g_d, k(x, x') - k(x, X) (K + W_d^-1)^-1 k(X, x')) at the mode of each output."""
    X, Y = curved(N=30)
    m = moved(engine.GPLVM((Y > 0).astype(float), Q, X=X, likelihood="bernoulli"), 5)
    k, (_, Xm, mode) = m.kernel, m.posterior()
    Kx = k.K(Xm)
    Xt = probe_points()
    G_ref = np.zeros((len(Xt), Q, Q))
    for d in range(m.output_dim):
        sW = mode.sW[:, d]
        Sigma = sW[:, None] * np.linalg.solve(np.eye(len(sW)) + sW[:, None] * Kx * sW[None, :], np.diag(sW))
        g = mode.g[:, d:d + 1]
        G_ref += reference_metric(lambda A, g=g: k.K(A, Xm) @ g,
                                  lambda A, B, S=Sigma: k.K(A, B) - k.K(A, Xm) @ S @ k.K(Xm, B), Xt, 1)
    assert_metric_close(m.metric(Xt), G_ref, 2e-5)


def test_missing_outputs_sum_the_metrics_of_the_column_groups():
    X, Y = curved(N=40, D=6)
    rng = np.random.default_rng(2)
    Y = Y.copy()
    Y[rng.random(Y.shape) < 0.15] = np.nan
    m = moved(engine.BayesianGPLVM(Y, Q, num_inducing=10, X=X, X_variance=0.2, noise_variance=0.05))
    groups = m.observation_groups
    assert len(groups) > 1
    v, k = m.parameters, m.kernel
    beta = 1.0 / v["noise_variance"]
    Xt = probe_points()
    G_ref = np.zeros((len(Xt), Q, Q))
    for g in groups:
        rows = np.flatnonzero(g.rows)
        _, psi1, Psi2 = psi.compute(k, v["Z"], v["X_mean"][rows], v["X_variance"][rows])
        ref = collapsed_reference(k, v["Z"], m.jitter, beta, psi1, Psi2, m.Y[np.ix_(rows, g.cols)])
        G_ref += reference_metric(*ref, Xt, len(g.cols))
    assert_metric_close(m.metric(Xt), G_ref, 2e-5)


def test_mrd_metric_is_the_sum_over_views():
    X, Y = curved(N=30, D=6)
    m = engine.MRD([Y[:, :3], Y[:, 3:]], Q, num_inducing=8, X=X)
    Xt = probe_points()
    total = sum(m.view_model(v).metric(Xt) for v in range(2))
    np.testing.assert_allclose(m.metric(Xt), total, rtol=1e-12)


def test_jacobian_moments_are_the_derivatives_of_the_prediction_and_give_the_metric():
    X, Y = curved()
    m = moved(engine.BayesianGPLVM(Y, Q, num_inducing=12, X=X, X_variance=0.2))
    Xt = probe_points()
    mom = m.geometry().jacobian_moments(Xt)
    h = 1e-5
    E = np.eye(Q)
    J_fd = np.stack([(m.predict(Xt + h * E[q])[0] - m.predict(Xt - h * E[q])[0]) / (2 * h) for q in range(Q)], 2)
    np.testing.assert_allclose(mom.mean, J_fd, rtol=1e-6, atol=1e-8)
    (cols, cov), = mom.cov
    np.testing.assert_array_equal(cols, np.arange(m.output_dim))
    G = np.einsum("ndq,ndp->nqp", mom.mean, mom.mean) + m.output_dim * cov
    np.testing.assert_allclose(m.metric(Xt), G, rtol=1e-9, atol=1e-12 * np.abs(G).max())
    # d2k - dK^T Sigma dK is a covariance: symmetric, positive semi-definite
    assert np.all(np.linalg.eigvalsh(cov) > -1e-10 * np.abs(cov).max())


def test_dims_take_the_block_of_the_metric_and_magnification_is_its_root_determinant():
    X, Y = curved()
    m = moved(engine.SparseGPLVM(Y, Q, num_inducing=12, X=X))
    Xt = probe_points()
    G = m.metric(Xt)
    np.testing.assert_allclose(m.metric(Xt, dims=(2, 0)), G[:, [2, 0]][:, :, [2, 0]], rtol=1e-12)
    np.testing.assert_allclose(m.magnification(Xt), np.sqrt(np.linalg.det(G)), rtol=1e-9)
    np.testing.assert_allclose(m.magnification(Xt, dims=(0, 1)), np.sqrt(np.linalg.det(G[:, :2, :2])), rtol=1e-9)
    for bad in ((0, 0), (0, 5), (1,), (0, 1, 2)):
        with pytest.raises(ShapeError, match="dims"):
            m.metric(Xt, dims=bad)
    with pytest.raises(ShapeError, match="columns"):
        m.magnification(Xt[:, :2])


def test_far_from_data_a_stationary_metric_returns_to_its_prior_level():
    """D sigma^2 / l^2 on the diagonal: the mean's Jacobian and the data's pull vanish."""
    X, Y = curved()
    m = moved(engine.BayesianGPLVM(Y, Q, num_inducing=10, X=X, X_variance=0.2))
    v = m.parameters
    G = m.metric(np.full((1, Q), 60.0))[0]
    prior = np.diag(m.output_dim * v["variance"] / v["lengthscales"]**2)
    # the data's pull underflows to denormals (~1e-306) or exactly 0, depending on the parameters reached
    np.testing.assert_allclose(G, prior, rtol=1e-10, atol=1e-12 * np.max(prior))


def test_models_without_a_metric_say_so():
    X, Y = curved(N=20)
    deep = engine.DeepGP(Y, layer_dims=[2, 2], num_inducing=5)
    with pytest.raises(UnsupportedOperationError, match="metric"):
        deep.metric(np.zeros((1, 2)))


def test_smooth_kernel_drops_white_noise():
    assert smooth_kernel(K.White(Q)) is None
    s = smooth_kernel(K.RBF(Q) + K.White(Q) + K.Bias(Q))
    assert [p.name for p in s.parts] == ["rbf", "bias"]
    assert smooth_kernel(K.Linear(Q) + K.White(Q)).name == "linear"


# ---- curves ---------------------------------------------------------------------------------------
def circle_model(N=120, D=16, H=6):
    """A circle of latent points mapped to D dims by H harmonics (a nonlinear embedding of known speed).

    The kernel's parameters are set, not fitted: a fit on noise-free data picks a longer lengthscale
    whose map is slightly compressive just inside the circle (benchmarks/bench_geometry.py reports it).
    """
    t = np.linspace(0.0, 2 * np.pi, N, endpoint=False)
    amps = np.ones(H) / np.sqrt(H)
    F = np.hstack([np.c_[a * np.cos((k + 1) * t), a * np.sin((k + 1) * t)] for k, a in enumerate(amps)])
    R = np.linalg.qr(np.random.default_rng(0).standard_normal((D, D)))[0][:, :2 * H]
    speed = float(np.sqrt(np.sum((amps * np.arange(1, H + 1)) ** 2)))  # |dY/dt|
    m = engine.GPLVM(F @ R.T, 2, X=np.c_[np.cos(t), np.sin(t)], kernel=K.RBF(2, 4.0, 0.5), noise_variance=1e-6)
    return m, speed


def on_circle(t):
    return np.array([np.cos(t), np.sin(t)])


@pytest.fixture(scope="module")
def circle():
    return circle_model()


@pytest.mark.parametrize("ta, tb", [(0.0, 2 * np.pi / 3), (0.3, 0.3 + np.pi)])
def test_geodesic_follows_the_circle_with_its_arc_length(circle, ta, tb):
    m, speed = circle
    g = m.geodesic(on_circle(ta), on_circle(tb), num_points=64)
    assert isinstance(g, Geodesic) and g.path.shape == (64, 2)
    np.testing.assert_array_equal(g.path[0], on_circle(ta))
    np.testing.assert_array_equal(g.path[-1], on_circle(tb))
    arc = speed * abs(tb - ta)
    assert abs(g.length / arc - 1.0) < 0.05
    # the straight segment crosses the empty middle (for opposite points right through the centre, where a
    # local optimiser started on it would stay by symmetry): the global start goes round
    assert g.straight_length > 2.0 * arc
    radius = np.linalg.norm(g.path, axis=1)
    assert radius.min() > 0.9 and radius.max() < 1.05
    assert g.length == pytest.approx(m.geometry().length(g.path), rel=1e-12)


def test_length_under_the_metric_is_the_data_arc_length_along_the_data(circle):
    m, speed = circle
    t = np.linspace(0.0, 2.0, 200)
    assert m.geometry().length(on_circle(t).T) == pytest.approx(2.0 * speed, rel=1e-3)


def test_energy_gradient_matches_finite_differences():
    X, Y = curved()
    m = moved(engine.SparseGPLVM(Y, Q, num_inducing=12, X=X, kernel=KERNELS["rbf+linear+bias+white"]()))
    geo = m.geometry()
    P = np.linspace(X[0], X[5], 7) + 0.1 * np.random.default_rng(1).standard_normal((7, Q))
    value, grad = geo.energy(P, with_grad=True)
    assert value == pytest.approx(geo.energy(P))
    # a step of 1e-5: at 1e-6 the differences' rounding error alone is ~5e-7 to 1e-6 (the model after
    # 8 steps changes with the last bits of its fit); at 1e-5 they agree with the gradient to ~7e-8
    assert check_grad(lambda p: geo.energy(p), P, grad, eps=1e-5) < 1e-6


def test_energy_of_short_steps_is_the_squared_metric_length():
    """E|f(b) - f(a)|^2 -> (b - a)^T G (b - a): a fine polyline's sum of sqrt(energy) is its length."""
    X, Y = curved()
    m = moved(engine.BayesianGPLVM(Y, Q, num_inducing=12, X=X, X_variance=0.2))
    geo = m.geometry()
    P = np.linspace(X[0], X[7], 400)
    steps = np.array([geo.energy(P[i:i + 2]) for i in range(len(P) - 1)])
    assert np.sum(np.sqrt(steps)) == pytest.approx(geo.length(P), rel=1e-3)


def test_geodesic_in_two_dims_moves_only_in_them_and_is_never_longer_than_the_straight_segment():
    X, Y = curved()
    m = moved(engine.BayesianGPLVM(Y, Q, num_inducing=12, X=X, X_variance=0.2))
    a, b = X[0].copy(), X[9].copy()
    b[2] = a[2]
    g = m.geodesic(a, b, num_points=20, dims=(0, 1))
    assert g.path.shape == (20, Q)
    np.testing.assert_array_equal(g.path[:, 2], a[2])
    assert g.length <= g.straight_length + 1e-12
    assert g.straight_length == pytest.approx(m.geometry().length(np.linspace(a, b, 20), dims=(0, 1)))
    full = m.geodesic(X[0], X[9], num_points=20)
    assert full.length <= full.straight_length + 1e-12
    with pytest.raises(ShapeError, match="agree outside dims"):
        m.geodesic(X[0], X[9], dims=(0, 1))
    with pytest.raises(ShapeError, match="num_points"):
        m.geodesic(a, b, num_points=1)
    with pytest.raises(ShapeError, match="x_end"):
        m.geodesic(a, b[:2])
    same = m.geodesic(a, a, num_points=5)
    assert same.length == 0.0 and same.straight_length == 0.0


def test_geometry_of_a_white_noise_kernel_is_flat():
    X, Y = curved(N=20)
    geo = LatentGeometry([(K.White(Q), X, [(slice(None), np.zeros((20, 2)), np.eye(20))])], X)
    assert geo.maps == []
    np.testing.assert_array_equal(geo.metric(X[:2]), np.zeros((2, Q, Q)))
    assert geo.geodesic(X[0], X[1], num_points=4).length == 0.0
