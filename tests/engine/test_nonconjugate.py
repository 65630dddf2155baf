"""The explicit-q(u) bound of the Bayesian GP-LVM for any likelihood (engine.nonconjugate) and the
per-point psi contractions it reads, against independent references."""
import numpy as np
import pytest

import engine
from engine import kernels, likelihoods as lk, nonconjugate as nc
from engine.bound import gaussian_kl
from engine.errors import ShapeError, UnsupportedKernelError


def _point_psi(kern, Z, mu, S):
    """Per-point psi statistics (psi0 (n,), Psi1 (n, M), Psi2 (n, M, M)), any supported kernel."""
    try:
        from engine.psi.point import PointPsi
    except ImportError:
        from engine.infer import PointPsi
    return PointPsi(kern, Z).forward(mu, S)


def _optimal_gaussian_q(model):
    """The optimal q(v_d) of a Gaussian likelihood per output, densely: S_d = (I + beta A_d)^-1,
    m_d = beta S_d L^-1 Psi1_O^T y_O, with A_d = L^-1 Psi2_O L^-T over the rows O observing d."""
    values = model.parameters
    kern = model.kernel_at(values)
    Z, mu, S = values["Z"], values["X_mean"], values["X_variance"]
    M, D = Z.shape[0], model.output_dim
    L = np.linalg.cholesky(kern.K(Z) + model.jitter * np.eye(M))
    Li = np.linalg.inv(L)
    beta = 1.0 / values["noise_variance"]
    _, P1, P2 = _point_psi(kern, Z, mu, S)
    mask = np.ones(model.Y.shape, bool) if model.observed is None else model.observed
    q_mu, q_sqrt = np.zeros((M, D)), np.zeros((D, M, M))
    for d in range(D):
        o = mask[:, d]
        A = Li @ P2[o].sum(axis=0) @ Li.T
        Sd = np.linalg.inv(np.eye(M) + beta * A)
        q_sqrt[d] = np.linalg.cholesky(0.5 * (Sd + Sd.T))
        q_mu[:, d] = beta * Sd @ Li @ (P1[o].T @ model.Y[o, d])
    return L, q_mu, q_sqrt


def _explicit_bound(model, L, q_mu, q_sqrt, likelihood):
    values = model.parameters
    proj = nc.q_projections(L, q_mu, q_sqrt)
    rt = nc.data_term(likelihood, model.kernel_at(values), values["Z"], values["X_mean"], values["X_variance"],
                      model.Y, model.observed, proj, gradients=False)
    return rt.value - nc.whitened_kl(q_mu, q_sqrt)[0] - gaussian_kl(values["X_mean"], values["X_variance"])


@pytest.mark.parametrize("missing", [0.0, 0.25], ids=["complete", "missing"])
def test_gaussian_likelihood_equals_the_collapsed_bound_at_the_optimal_q(missing):
    rng = np.random.default_rng(1)
    Y = rng.normal(size=(35, 5))
    if missing:
        Y[rng.uniform(size=Y.shape) < missing] = np.nan
    model = engine.BayesianGPLVM(Y, 2, num_inducing=6, seed=2)
    model.set_parameters(X_variance=rng.uniform(0.05, 0.6, size=(35, 2)), noise_variance=0.3)
    L, q_mu, q_sqrt = _optimal_gaussian_q(model)
    explicit = _explicit_bound(model, L, q_mu, q_sqrt, lk.Gaussian(model.noise_variance))
    assert abs(explicit - model.objective()) < 1e-8
    # any other q(u) is worse
    assert _explicit_bound(model, L, 1.1 * q_mu, q_sqrt, lk.Gaussian(model.noise_variance)) < explicit - 1e-3


def test_one_natural_step_of_size_one_reaches_the_gaussian_optimum():
    rng = np.random.default_rng(3)
    Y = rng.normal(size=(30, 4))
    Y[rng.uniform(size=Y.shape) < 0.2] = np.nan
    model = engine.BayesianGPLVM(Y, 2, num_inducing=5, seed=1)
    values = model.parameters
    L, q_mu, q_sqrt = _optimal_gaussian_q(model)
    lik = lk.Gaussian(values["noise_variance"])
    M, D = q_mu.shape
    prior_mu, prior_sqrt = np.zeros((M, D)), np.broadcast_to(np.eye(M), (D, M, M)).copy()
    rt = nc.data_term(lik, model.kernel_at(values), values["Z"], values["X_mean"], values["X_variance"], model.Y,
                      model.observed, nc.q_projections(L, prior_mu, prior_sqrt), natural=True)
    new_mu, new_sqrt = nc.natural_step(L, prior_mu, prior_sqrt, rt.G_Mw, rt.G_E, 1.0)
    np.testing.assert_allclose(new_mu, q_mu, atol=1e-9)
    S_new = np.matmul(new_sqrt, np.swapaxes(new_sqrt, 1, 2))
    np.testing.assert_allclose(S_new, np.matmul(q_sqrt, np.swapaxes(q_sqrt, 1, 2)), atol=1e-9)


def test_marginals_of_f_under_q_x_agree_with_monte_carlo_over_x():
    rng = np.random.default_rng(4)
    Q, M, D = 2, 5, 3
    kern = kernels.RBF(Q, ard=True, lengthscales=np.array([0.8, 1.3]), variance=1.2) + kernels.Bias(Q, variance=0.4)
    Z = rng.normal(size=(M, Q))
    mu, S = rng.normal(size=(4, Q)), rng.uniform(0.1, 0.5, size=(4, Q))
    L = np.linalg.cholesky(kern.K(Z) + 1e-8 * np.eye(M))
    q_mu = rng.normal(size=(M, D))
    q_sqrt = np.tril(rng.normal(size=(D, M, M))) * 0.3 + np.eye(M) * 0.5
    mean, var, _, _ = nc.marginals(kern, Z, mu, S, nc.q_projections(L, q_mu, q_sqrt))
    # Monte Carlo: x ~ q(x), then f | x ~ N(k(x)^T L^-T m_d, k(x,x) - k^T L^-T (I - S_d) L^-1 k)
    Li = np.linalg.inv(L)
    for n in range(mu.shape[0]):
        x = mu[n] + np.sqrt(S[n]) * rng.standard_normal((200_000, Q))
        A = kern.K(x, Z) @ Li.T  # (s, M): L^-1 k(x)
        kxx = kern.K_diag(x)
        for d in range(D):
            Sd = q_sqrt[d] @ q_sqrt[d].T
            m_x = A @ q_mu[:, d]
            v_x = kxx - np.sum(A * A, axis=1) + np.einsum("sm,mk,sk->s", A, Sd, A)
            assert abs(mean[n, d] - m_x.mean()) < 5 * m_x.std() / np.sqrt(x.shape[0]) + 1e-9
            total = v_x.mean() + m_x.var()
            assert abs(var[n, d] - total) < 0.02 * total




# ------------------------------------------------------------------ per-point contractions


@pytest.mark.parametrize("N", [7, 150], ids=["one-block", "blocks"])
def test_contract_equals_each_point_psi2_contracted(N):
    rng = np.random.default_rng(8)
    Q, M, K = 3, 6, 4
    Z, mu, S = rng.normal(size=(M, Q)), rng.normal(size=(N, Q)), rng.uniform(0.05, 1.0, size=(N, Q))
    E = rng.normal(size=(K, M, M))
    E = E + np.swapaxes(E, 1, 2)
    for kern in (kernels.RBF(Q, ard=True, lengthscales=rng.uniform(0.5, 2, Q), variance=1.3),
                 kernels.RBF(Q, ard=True) + kernels.Bias(Q, variance=0.7) + kernels.White(Q, variance=0.1)):
        c = engine.psi.contract(kern, Z, mu, S, E)
        p0, P1, P2 = _point_psi(kern, Z, mu, S)
        np.testing.assert_allclose(c.T, np.einsum("nab,kab->nk", P2, E), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(c.Psi1, P1, rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(c.psi0, p0)


def test_contract_does_not_depend_on_the_thread_count():
    import numba

    rng = np.random.default_rng(9)
    Q, M, K, N = 2, 5, 3, 700
    kern = kernels.RBF(Q, ard=True)
    Z, mu, S = rng.normal(size=(M, Q)), rng.normal(size=(N, Q)), rng.uniform(0.05, 1.0, size=(N, Q))
    E = rng.normal(size=(K, M, M))
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = engine.psi.contract(kern, Z, mu, S, E).T
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        two = engine.psi.contract(kern, Z, mu, S, E).T
    finally:
        numba.set_num_threads(before)
    np.testing.assert_array_equal(one, two)


def test_contract_refuses_kernels_without_per_point_statistics():
    with pytest.raises(UnsupportedKernelError):
        engine.psi.contract(kernels.Linear(2), np.zeros((3, 2)), np.zeros((4, 2)), np.ones((4, 2)), np.zeros((1, 3, 3)))
    with pytest.raises(ShapeError):
        engine.psi.contract(kernels.RBF(2), np.zeros((3, 2)), np.zeros((4, 2)), np.ones((4, 2)), np.zeros((3, 3)))


# ------------------------------------------------------------------ the bound as a function of arrays


def test_functional_bound_gradients_match_finite_differences():
    """F(mu, S, Z, kernel, q_mu, q_sqrt) for a Bernoulli likelihood with missing entries, its gradients
    assembled from data_term, q_gradients and whitened_kl, against central differences per block."""
    from gradcheck import check_grad

    rng = np.random.default_rng(10)
    N, D, Q, M = 25, 4, 2, 5
    Y = (rng.uniform(size=(N, D)) < 0.4).astype(float)
    mask = rng.uniform(size=(N, D)) > 0.15
    lik = lk.Bernoulli()
    x0 = {"mu": rng.normal(size=(N, Q)), "S": rng.uniform(0.1, 0.7, size=(N, Q)), "Z": rng.normal(size=(M, Q)) * 1.5,
          "ell": np.array([0.9, 1.4]), "var": np.array(1.3), "bias": np.array(0.5),
          "q_mu": rng.normal(size=(M, D)), "q_sqrt": np.tril(0.3 * rng.normal(size=(D, M, M))) + 0.8 * np.eye(M)}

    def kernel(p):
        return kernels.RBF(Q, ard=True, lengthscales=p["ell"], variance=float(p["var"])) + \
            kernels.Bias(Q, variance=float(p["bias"]))

    def F(p, gradients=False):
        kern = kernel(p)
        L = np.linalg.cholesky(kern.K(p["Z"]) + 1e-8 * np.eye(M))
        proj = nc.q_projections(L, p["q_mu"], p["q_sqrt"])
        rt = nc.data_term(lik, kern, p["Z"], p["mu"], p["S"], Y, mask, proj, gradients=gradients)
        kl, dkl_mu, dkl_sqrt = nc.whitened_kl(p["q_mu"], p["q_sqrt"])
        value = rt.value - kl
        if not gradients:
            return value
        dKmm, dq_mu, dq_sqrt = nc.q_gradients(L, p["q_mu"], proj, rt.G_Mw, rt.G_E)
        dk, dZ = kern.grad_params_and_X(dKmm, p["Z"])
        return {"mu": rt.dmu, "S": rt.dS, "Z": rt.dZ + dZ, "q_mu": dq_mu - dkl_mu, "q_sqrt": dq_sqrt - dkl_sqrt,
                "ell": rt.dkernel["rbf.lengthscales"] + dk["rbf.lengthscales"],
                "var": rt.dkernel["rbf.variance"] + dk["rbf.variance"],
                "bias": rt.dkernel["bias.variance"] + dk["bias.variance"]}

    grads = F(x0, gradients=True)
    for name in x0:
        def f(v, name=name):
            return F({**x0, name: v})

        analytic = np.tril(grads[name]) if name == "q_sqrt" else grads[name]
        assert check_grad(f, np.array(x0[name], dtype=float), analytic, eps=1e-5) < 1e-6, name
