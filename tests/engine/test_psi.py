"""Psi statistics (engine.psi): slow references, gradients, Monte Carlo, limits, dispatch.

The slow references below are loops straight from Titsias & Lawrence (2010),
eqs. 15-17 and their closed forms (section 3.2); the fast code must match
them to 1e-10 relative.  Gradients are checked by central differences of
L = dL_dpsi0 psi0 + sum(G1 * Psi1) + sum(G2 * Psi2) with random G1 and a
random non-symmetric G2.
"""
import math

import numba
import numpy as np
import pytest
from gradcheck import check_grad

import engine.psi as psi
from engine.errors import ShapeError, UnsupportedKernelError
from engine.psi import linear, rbf
from engine.psi._exp import _exp_array

# ---------------------------------------------------------------- stand-ins


class FakeKernel:
    """Minimal object with the kernel interface engine.psi relies on
    (name, params, input_dim; parts and part_names for sums)."""

    def __init__(self, name, input_dim, **params):
        self.name = name
        self.input_dim = input_dim
        self._params = params

    @property
    def params(self):
        return dict(self._params)


class FakeSum:
    def __init__(self, *parts):
        self.name = "sum"
        self.parts = list(parts)
        self.input_dim = parts[0].input_dim
        names, seen = [], {}
        for p in parts:
            k = seen.get(p.name, 0)
            names.append(p.name if k == 0 else f"{p.name}_{k}")
            seen[p.name] = k + 1
        self.part_names = names

    @property
    def params(self):
        return {f"{pn}.{k}": v for pn, p in zip(self.part_names, self.parts) for k, v in p.params.items()}


def with_params(kernel, values):
    """A copy of a Fake kernel with the flat params dict ``values``."""
    if kernel.name == "sum":
        parts = []
        for pn, p in zip(kernel.part_names, kernel.parts):
            parts.append(FakeKernel(p.name, p.input_dim, **{k: values[f"{pn}.{k}"] for k in p.params}))
        return FakeSum(*parts)
    return FakeKernel(kernel.name, kernel.input_dim, **{k: values[k] for k in kernel.params})


# ---------------------------------------------------------------- references


def ref_rbf(variance, lengthscales, Z, mu, S):
    """Closed forms of the paper, one (n, m, m') at a time."""
    N, Q = mu.shape
    M = Z.shape[0]
    l = np.broadcast_to(np.asarray(lengthscales, float) ** 2, (Q,))
    psi0 = N * variance
    Psi1 = np.zeros((N, M))
    Psi2 = np.zeros((M, M))
    for n in range(N):
        for m in range(M):
            val = variance
            for q in range(Q):
                val *= (1.0 + S[n, q] / l[q]) ** -0.5 * math.exp(-0.5 * (mu[n, q] - Z[m, q]) ** 2 / (l[q] + S[n, q]))
            Psi1[n, m] = val
            for m2 in range(M):
                val = variance**2
                for q in range(Q):
                    zbar = 0.5 * (Z[m, q] + Z[m2, q])
                    val *= (1.0 + 2.0 * S[n, q] / l[q]) ** -0.5 * math.exp(
                        -((Z[m, q] - Z[m2, q]) ** 2) / (4.0 * l[q]) - (mu[n, q] - zbar) ** 2 / (l[q] + 2.0 * S[n, q])
                    )
                Psi2[m, m2] += val
    return psi0, Psi1, Psi2


def ref_linear(variances, Z, mu, S):
    """E[x] = mu, E[x_q x_q'] = mu_q mu_q' + delta_qq' S_q, one term at a time."""
    N, Q = mu.shape
    M = Z.shape[0]
    g = np.broadcast_to(np.asarray(variances, float), (Q,))
    psi0 = sum(g[q] * (mu[n, q] ** 2 + S[n, q]) for n in range(N) for q in range(Q))
    Psi1 = np.zeros((N, M))
    Psi2 = np.zeros((M, M))
    for n in range(N):
        for m in range(M):
            Psi1[n, m] = sum(g[q] * mu[n, q] * Z[m, q] for q in range(Q))
            for m2 in range(M):
                for q in range(Q):
                    for q2 in range(Q):
                        exx = mu[n, q] * mu[n, q2] + (S[n, q] if q == q2 else 0.0)
                        Psi2[m, m2] += g[q] * Z[m, q] * g[q2] * Z[m2, q2] * exx
    return psi0, Psi1, Psi2


def rel(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def problem(N, M, Q, seed=0, s_lo=0.05, s_hi=1.0):
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((M, Q))
    mu = rng.standard_normal((N, Q))
    S = rng.uniform(s_lo, s_hi, (N, Q))
    return rng, Z, mu, S


# ---------------------------------------------------------------- fast == slow

SHAPES = [(7, 5, 3), (1, 4, 2), (6, 1, 3), (5, 4, 1), (1, 1, 1), (70, 6, 2), (130, 3, 4), (9, 11, 5)]


@pytest.mark.parametrize("N,M,Q", SHAPES)
@pytest.mark.parametrize("ard", [True, False])
def test_rbf_matches_reference(N, M, Q, ard):
    rng, Z, mu, S = problem(N, M, Q, seed=N * 100 + M * 10 + Q)
    ell = rng.uniform(0.5, 2.0, Q) if ard else 1.3
    fast = rbf.psi_stats(1.7, ell, Z, mu, S)
    slow = ref_rbf(1.7, ell, Z, mu, S)
    assert fast[0] == pytest.approx(slow[0], rel=1e-12)
    assert fast[1].shape == (N, M) and fast[2].shape == (M, M)
    assert rel(fast[1], slow[1]) < 1e-10
    assert rel(fast[2], slow[2]) < 1e-10
    assert np.array_equal(fast[2], fast[2].T)


@pytest.mark.parametrize("N,M,Q", SHAPES)
@pytest.mark.parametrize("ard", [True, False])
def test_linear_matches_reference(N, M, Q, ard):
    rng, Z, mu, S = problem(N, M, Q, seed=N * 100 + M * 10 + Q + 1)
    g = rng.uniform(0.5, 2.0, Q) if ard else 0.8
    fast = linear.psi_stats(g, Z, mu, S)
    slow = ref_linear(g, Z, mu, S)
    assert fast[0] == pytest.approx(slow[0], rel=1e-12)
    assert rel(fast[1], slow[1]) < 1e-10
    assert rel(fast[2], slow[2]) < 1e-10


def test_rbf_tiny_variances_and_far_inputs():
    rng, Z, mu, S = problem(9, 4, 3, seed=3, s_lo=1e-14, s_hi=1e-12)
    ell = np.array([0.7, 1.0, 2.0])
    for shift in (0.0, 25.0):
        fast = rbf.psi_stats(0.9, ell, Z + shift, mu + shift, S)
        slow = ref_rbf(0.9, ell, Z + shift, mu + shift, S)
        assert rel(fast[1], slow[1]) < 1e-10
        assert rel(fast[2], slow[2]) < 1e-10


def test_rbf_underflow_is_zero_not_garbage():
    # points far from the inducing inputs: Psi2 entries underflow to 0
    Z = np.array([[0.0], [40.0]])
    mu = np.array([[0.0], [40.0], [200.0]])
    S = np.full((3, 1), 1e-3)
    fast = rbf.psi_stats(1.0, np.array([0.5]), Z, mu, S)
    slow = ref_rbf(1.0, np.array([0.5]), Z, mu, S)
    assert np.all(np.isfinite(fast[2]))
    assert rel(fast[2], slow[2]) < 1e-10
    assert fast[2][0, 1] == 0.0


@pytest.mark.parametrize("N, groups", [(300, None), (1000, None), (1000, 3), (1000, 1)])
def test_rbf_bitwise_same_with_any_thread_count(N, groups, monkeypatch):
    # fixed groups of row blocks, summed in a fixed order: the thread count
    # decides who computes a group, never the summation order.  N = 300 is five
    # blocks, a group each; N = 1000 is 16 blocks: 8 groups of 2 (default),
    # groups of 5, 5, 6, or one group of all.
    if groups is not None:
        monkeypatch.setattr(rbf, "_GROUPS", groups)
    _, Z, mu, S = problem(N, 7, 3, seed=5)
    ell = np.array([0.8, 1.1, 1.5])
    G1 = np.ones((N, 7))
    G2 = np.random.default_rng(1).standard_normal((7, 7))
    before = numba.get_num_threads()
    results = {}
    try:
        for n in sorted({1, 2, numba.config.NUMBA_NUM_THREADS}):
            if n > numba.config.NUMBA_NUM_THREADS:
                continue
            numba.set_num_threads(n)
            stats = rbf.psi_stats(1.2, ell, Z, mu, S)
            kept = rbf.psi_gradients(0.1, G1, G2, 1.2, ell, Z, mu, S)  # reuses the forward pass
            rbf._LAST.forward = None
            fresh = rbf.psi_gradients(0.1, G1, G2, 1.2, ell, Z, mu, S)  # recomputes Psi2_n
            results[n] = stats, kept, fresh
    finally:
        numba.set_num_threads(before)
    ref_stats, ref_kept, ref_fresh = results[1]
    assert rel(ref_stats[2], ref_rbf(1.2, ell, Z, mu, S)[2]) < 1e-10
    for n, (stats, kept, fresh) in results.items():
        assert np.array_equal(stats[2], ref_stats[2]), n
        for key in ("Z", "mu", "S", "lengthscales", "variance"):
            assert np.array_equal(kept[key], ref_kept[key]), (n, key)
            assert np.array_equal(fresh[key], ref_fresh[key]), (n, key)


def test_rbf_groups_depend_on_size_only():
    assert rbf._group_bounds(1).tolist() == [0, 1]
    assert rbf._group_bounds(5).tolist() == [0, 1, 2, 3, 4, 5]
    for nb in (rbf._GROUPS, rbf._GROUPS + 1, 16, 157, 1563):  # 1563 blocks: N = 100000
        bounds = rbf._group_bounds(nb)
        sizes = np.diff(bounds)
        assert bounds[0] == 0 and bounds[-1] == nb and len(sizes) == rbf._GROUPS
        assert sizes.min() >= 1 and sizes.max() - sizes.min() <= 1


def test_vectorised_exp_accuracy():
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [rng.uniform(-708.0, 709.0, 200_000), rng.uniform(-1.0, 1.0, 100_000), rng.uniform(-40.0, 0.0, 100_000),
         np.array([0.0, -708.0, 709.0, 1e-300, -1e-300, 0.5 * math.log(2.0)])]
    )
    got = _exp_array(x)
    want = np.exp(x)
    assert np.max(np.abs(got / want - 1.0)) < 1e-15
    assert np.all(_exp_array(np.array([-708.5, -745.0, -1e4, -1e300])) == 0.0)


# ---------------------------------------------------------------- gradients

# (kernel, parameter values); the sums go through the public dispatch.
def _cases(Q):
    rng = np.random.default_rng(42)
    return {
        "rbf-ard": FakeKernel("rbf", Q, variance=1.3, lengthscales=rng.uniform(0.6, 1.8, Q)),
        "rbf-iso": FakeKernel("rbf", Q, variance=0.8, lengthscales=np.asarray(1.1)),
        "linear-ard": FakeKernel("linear", Q, variances=rng.uniform(0.5, 1.5, Q)),
        "linear-iso": FakeKernel("linear", Q, variances=np.asarray(0.7)),
        "bias": FakeKernel("bias", Q, variance=0.6),
        "white": FakeKernel("white", Q, variance=0.2),
        "rbf+bias+white": FakeSum(
            FakeKernel("rbf", Q, variance=1.1, lengthscales=rng.uniform(0.6, 1.8, Q)),
            FakeKernel("bias", Q, variance=0.4),
            FakeKernel("white", Q, variance=0.05),
        ),
        "linear+bias": FakeSum(FakeKernel("linear", Q, variances=rng.uniform(0.5, 1.5, Q)), FakeKernel("bias", Q, variance=0.9)),
        "bias+rbf+bias": FakeSum(
            FakeKernel("bias", Q, variance=0.3),
            FakeKernel("rbf", Q, variance=0.9, lengthscales=np.asarray(0.9)),
            FakeKernel("bias", Q, variance=0.5),
        ),
        "bias+white": FakeSum(FakeKernel("bias", Q, variance=0.7), FakeKernel("white", Q, variance=0.3)),
        "white+bias+linear+bias": FakeSum(
            FakeKernel("white", Q, variance=0.1),
            FakeKernel("bias", Q, variance=0.45),
            FakeKernel("linear", Q, variances=rng.uniform(0.5, 1.5, Q)),
            FakeKernel("bias", Q, variance=0.25),
        ),
    }


GRAD_CASES = list(_cases(3))


def _blocks(kernel):
    return ["mu", "S", "Z"] + list(kernel.params)


@pytest.mark.parametrize("case", GRAD_CASES)
def test_gradients_finite_differences(case):
    N, M, Q = 6, 4, 3
    kernel = _cases(Q)[case]
    rng, Z, mu, S = problem(N, M, Q, seed=11, s_lo=0.2, s_hi=1.0)
    g0 = rng.standard_normal()
    G1 = rng.standard_normal((N, M))
    G2 = rng.standard_normal((M, M))  # not symmetric on purpose
    base = dict(kernel.params, mu=mu, S=S, Z=Z)

    def L(values):
        k = with_params(kernel, values)
        st = psi.compute(k, values["Z"], values["mu"], values["S"])
        return g0 * st.psi0 + np.sum(G1 * st.Psi1) + np.sum(G2 * st.Psi2)

    grads = psi.gradients(kernel, Z, mu, S, g0, G1, G2)
    assert set(grads.params) == set(kernel.params)
    analytic = dict(grads.params, mu=grads.mu, S=grads.S, Z=grads.Z)
    for block in _blocks(kernel):
        assert np.shape(analytic[block]) == np.shape(base[block]), block

        def f(x, block=block):
            values = dict(base)
            values[block] = x if np.ndim(base[block]) else float(x)
            return L(values)

        err = check_grad(f, np.asarray(base[block], float), analytic[block])
        assert err < 1e-5, f"{case}: d/d{block} relative error {err:.2e}"


SUM_CASES = [c for c in GRAD_CASES if "+" in c]


@pytest.mark.parametrize("case", SUM_CASES)
def test_sum_equals_its_parts_with_explicit_cross_terms(case):
    """A sum's statistics and gradients equal those assembled from its parts' own, each
    cross term formed as the dense product Psi1_a^T Psi1_b of the parts' (N, M) Psi1.

    The reference: Psi2 = sum_a Psi2_a + sum_{a != b} Psi1_a^T Psi1_b, and part a's
    gradients are its own at the Psi1 cotangent G1 + sum_{b != a} Psi1_b (G2 + G2^T);
    a wrong, missing or doubled cross term (a bias with the RBF, two biases, a white
    term that is not zero off the data) moves these far beyond 1e-10.
    """
    N, M, Q = 70, 6, 3  # N above one block of the compiled loops, not a multiple of it
    kernel = _cases(Q)[case]
    rng, Z, mu, S = problem(N, M, Q, seed=31, s_lo=0.1, s_hi=0.9)
    g0, G1, G2 = rng.standard_normal(), rng.standard_normal((N, M)), rng.standard_normal((M, M))
    leaves = [(pn, part, psi.compute(part, Z, mu, S)) for pn, part in zip(kernel.part_names, kernel.parts)]

    psi0 = sum(st.psi0 for _, _, st in leaves)
    Psi1 = sum(st.Psi1 for _, _, st in leaves)
    Psi2 = sum(st.Psi2 for _, _, st in leaves)
    for a, (_, _, sa) in enumerate(leaves):
        for b, (_, _, sb) in enumerate(leaves):
            if a != b:
                Psi2 = Psi2 + sa.Psi1.T @ sb.Psi1
    st = psi.compute(kernel, Z, mu, S)
    assert st.psi0 == pytest.approx(psi0, rel=1e-12)
    assert rel(st.Psi1, Psi1) < 1e-12
    assert rel(st.Psi2, Psi2) < 1e-12

    G2pT = G2 + G2.T
    want = {"mu": np.zeros_like(mu), "S": np.zeros_like(S), "Z": np.zeros_like(Z)}
    for a, (pn, part, _) in enumerate(leaves):
        G1a = G1 + sum(sb.Psi1 @ G2pT for b, (_, _, sb) in enumerate(leaves) if b != a)
        g = psi.gradients(part, Z, mu, S, g0, G1a, G2)
        want.update({f"{pn}.{k}": v for k, v in g.params.items()})
        want["mu"] += g.mu
        want["S"] += g.S
        want["Z"] += g.Z
    grads = psi.gradients(kernel, Z, mu, S, g0, G1, G2)
    got = dict(grads.params, mu=grads.mu, S=grads.S, Z=grads.Z)
    assert set(got) == set(want)
    for key in want:
        assert np.shape(got[key]) == np.shape(want[key]), key
        assert rel(np.asarray(got[key]), np.asarray(want[key])) < 1e-10, key


@pytest.mark.parametrize("N,M,Q", [(1, 1, 1), (1, 3, 2), (70, 2, 1), (5, 1, 4), (3, 9, 5)])
def test_rbf_gradients_edge_shapes(N, M, Q):
    rng, Z, mu, S = problem(N, M, Q, seed=7, s_lo=0.1)
    ell = rng.uniform(0.7, 1.5, Q)
    g0, G1, G2 = rng.standard_normal(), rng.standard_normal((N, M)), rng.standard_normal((M, M))
    grads = rbf.psi_gradients(g0, G1, G2, 1.4, ell, Z, mu, S)

    def L(v, e, Zx, mx, Sx):
        p0, P1, P2 = rbf.psi_stats(v, e, Zx, mx, Sx)
        return g0 * p0 + np.sum(G1 * P1) + np.sum(G2 * P2)

    assert check_grad(lambda x: L(float(x), ell, Z, mu, S), 1.4, grads["variance"]) < 1e-5
    assert check_grad(lambda x: L(1.4, x, Z, mu, S), ell, grads["lengthscales"]) < 1e-5
    assert check_grad(lambda x: L(1.4, ell, x, mu, S), Z, grads["Z"]) < 1e-5
    assert check_grad(lambda x: L(1.4, ell, Z, x, S), mu, grads["mu"]) < 1e-5
    assert check_grad(lambda x: L(1.4, ell, Z, mu, x), S, grads["S"]) < 1e-5


def test_rbf_gradients_match_slow_reference_finite_differences_tiny_S():
    # tiny S: the S-gradient is dominated by large curvature terms; check via FD
    rng, Z, mu, S = problem(4, 3, 2, seed=9, s_lo=1e-4, s_hi=2e-4)
    ell = np.array([0.9, 1.2])
    g0, G1, G2 = 0.3, rng.standard_normal((4, 3)), rng.standard_normal((3, 3))
    grads = rbf.psi_gradients(g0, G1, G2, 1.0, ell, Z, mu, S)

    def L(Sx):
        p0, P1, P2 = ref_rbf(1.0, ell, Z, mu, Sx)
        return g0 * p0 + np.sum(G1 * P1) + np.sum(G2 * P2)

    assert check_grad(L, S, grads["S"], eps=1e-8) < 1e-5


# ---------------------------------------------------------------- Monte Carlo


def _vector_kernel(kernel):
    """K(X (T, Q), Z (M, Q)) -> (T, M) for the cross covariance, and K_diag(X) -> (T,)."""
    if kernel.name == "sum":
        parts = [_vector_kernel(p) for p in kernel.parts]
        return (lambda X, Z: sum(p[0](X, Z) for p in parts)), (lambda X: sum(p[1](X) for p in parts))
    p = kernel.params
    if kernel.name == "rbf":
        l2 = np.asarray(p["lengthscales"]) ** 2

        def K(X, Z):
            d2 = np.sum((X[:, None, :] - Z[None, :, :]) ** 2 / l2, axis=-1)
            return p["variance"] * np.exp(-0.5 * d2)

        return K, lambda X: np.full(X.shape[0], p["variance"])
    if kernel.name == "linear":
        g = np.asarray(p["variances"])
        return (lambda X, Z: (X * g) @ Z.T), (lambda X: np.sum(X * X * g, axis=1))
    if kernel.name == "bias":
        return (lambda X, Z: np.full((X.shape[0], Z.shape[0]), p["variance"])), (lambda X: np.full(X.shape[0], p["variance"]))
    if kernel.name == "white":
        return (lambda X, Z: np.zeros((X.shape[0], Z.shape[0]))), (lambda X: np.full(X.shape[0], p["variance"]))
    raise AssertionError(kernel.name)


@pytest.mark.parametrize("case", ["rbf-ard", "linear-ard", "rbf+bias+white", "linear+bias"])
def test_monte_carlo_agreement(case):
    N, M, Q, T = 3, 4, 3, 40_000
    kernel = _cases(Q)[case]
    rng, Z, mu, S = problem(N, M, Q, seed=21, s_lo=0.1, s_hi=0.8)
    K, Kdiag = _vector_kernel(kernel)
    st = psi.compute(kernel, Z, mu, S)
    psi0 = np.zeros(2)  # (mean, variance of the mean)
    P1 = np.zeros((2, N, M))
    P2 = np.zeros((2, M, M))
    for n in range(N):
        X = mu[n] + np.sqrt(S[n]) * rng.standard_normal((T, Q))
        kd = Kdiag(X)
        Kx = K(X, Z)  # (T, M)
        psi0 += [kd.mean(), kd.var() / T]
        P1[:, n] = [Kx.mean(0), Kx.var(0) / T]
        prods = Kx[:, :, None] * Kx[:, None, :]
        P2 += [prods.mean(0), prods.var(0) / T]
    tol = 5.0
    assert abs(st.psi0 - psi0[0]) <= tol * np.sqrt(psi0[1]) + 1e-12
    assert np.all(np.abs(st.Psi1 - P1[0]) <= tol * np.sqrt(P1[1]) + 1e-12)
    assert np.all(np.abs(st.Psi2 - P2[0]) <= tol * np.sqrt(P2[1]) + 1e-12)


# ---------------------------------------------------------------- S -> 0


@pytest.mark.parametrize("case", ["rbf-ard", "rbf-iso", "linear-ard", "rbf+bias+white", "linear+bias"])
def test_zero_variance_limit_gives_kernel_matrices(case):
    N, M, Q = 8, 5, 3
    kernel = _cases(Q)[case]
    _, Z, mu, _ = problem(N, M, Q, seed=4)
    S = np.full((N, Q), 1e-13)
    st = psi.compute(kernel, Z, mu, S)
    K, Kdiag = _vector_kernel(kernel)
    Knm = K(mu, Z)
    assert st.psi0 == pytest.approx(np.sum(Kdiag(mu)), rel=1e-9)
    assert rel(st.Psi1, Knm) < 1e-9
    assert rel(st.Psi2, Knm.T @ Knm) < 1e-9


def _real_kernels():
    return pytest.importorskip("engine.kernels")


@pytest.mark.parametrize("build", ["rbf", "rbf-iso", "linear", "rbf+bias+white", "linear+bias"])
def test_zero_variance_limit_with_engine_kernels(build):
    kernels = _real_kernels()
    Q = 3
    rng = np.random.default_rng(8)
    make = {
        "rbf": lambda: kernels.RBF(Q, variance=1.3, lengthscales=rng.uniform(0.6, 1.8, Q)),
        "rbf-iso": lambda: kernels.RBF(Q, variance=0.7, lengthscales=1.2, ard=False),
        "linear": lambda: kernels.Linear(Q, variances=rng.uniform(0.5, 1.5, Q)),
        "rbf+bias+white": lambda: kernels.RBF(Q) + kernels.Bias(Q, variance=0.4) + kernels.White(Q, variance=0.1),
        "linear+bias": lambda: kernels.Linear(Q) + kernels.Bias(Q, variance=0.9),
    }
    kernel = make[build]()
    assert psi.supports(kernel)
    _, Z, mu, _ = problem(8, 5, Q, seed=4)
    S = np.full((8, Q), 1e-13)
    st = psi.compute(kernel, Z, mu, S)
    Knm = kernel.K(mu, Z)
    assert st.psi0 == pytest.approx(np.sum(kernel.K_diag(mu)), rel=1e-9)
    assert rel(st.Psi1, Knm) < 1e-9
    assert rel(st.Psi2, Knm.T @ Knm) < 1e-9
    # gradients come back keyed exactly like kernel.params, same shapes
    G1 = rng.standard_normal(Knm.shape)
    G2 = rng.standard_normal((5, 5))
    grads = psi.gradients(kernel, Z, mu, S + 0.1, 0.5, G1, G2)
    assert list(grads.params) == list(kernel.params)
    for key, value in kernel.params.items():
        assert np.shape(grads.params[key]) == np.shape(value), key


# ---------------------------------------------------------------- dispatch


def test_supported_kernels():
    Q = 2
    for kernel in _cases(Q).values():
        assert psi.supports(kernel)
        psi.check_supported(kernel)


@pytest.mark.parametrize(
    "kernel",
    [
        FakeKernel("matern32", 2, variance=1.0, lengthscales=np.ones(2)),
        FakeKernel("mlp", 2, variance=1.0, weight_variance=1.0, bias_variance=1.0),
        FakeSum(FakeKernel("rbf", 2, variance=1.0, lengthscales=np.ones(2)), FakeKernel("linear", 2, variances=np.ones(2))),
        FakeSum(FakeKernel("rbf", 2, variance=1.0, lengthscales=np.ones(2)), FakeKernel("rbf", 2, variance=1.0, lengthscales=np.ones(2))),
        FakeSum(FakeKernel("matern52", 2, variance=1.0, lengthscales=np.ones(2)), FakeKernel("bias", 2, variance=1.0)),
    ],
    ids=["matern32", "mlp", "rbf+linear", "rbf+rbf", "matern52+bias"],
)
def test_unsupported_kernel_is_refused_with_a_helpful_message(kernel):
    assert not psi.supports(kernel)
    with pytest.raises(UnsupportedKernelError) as info:
        psi.check_supported(kernel)
    msg = str(info.value)
    for name in ("RBF", "Linear", "Bias", "White"):
        assert name in msg
    with pytest.raises(UnsupportedKernelError):
        psi.compute(kernel, np.zeros((2, 2)), np.zeros((3, 2)), np.ones((3, 2)))


def test_unsupported_engine_kernels():
    kernels = _real_kernels()
    for kernel in (kernels.Matern32(2), kernels.MLP(2), kernels.RBF(2) + kernels.Linear(2)):
        assert not psi.supports(kernel)
        with pytest.raises(UnsupportedKernelError, match="RBF"):
            psi.check_supported(kernel)


def test_shape_errors():
    k = FakeKernel("rbf", 2, variance=1.0, lengthscales=np.ones(2))
    with pytest.raises(ShapeError):
        psi.compute(k, np.zeros((3, 3)), np.zeros((4, 3)), np.ones((4, 3)))
    with pytest.raises(ShapeError):
        psi.compute(k, np.zeros((3, 2)), np.zeros((4, 2)), np.ones((5, 2)))
    with pytest.raises(ShapeError):
        psi.compute(k, np.zeros((3, 2)), np.full((4, 2), np.nan), np.ones((4, 2)))
    with pytest.raises(ShapeError):
        psi.gradients(k, np.zeros((3, 2)), np.zeros((4, 2)), np.ones((4, 2)), 1.0, np.ones((4, 2)), np.ones((3, 3)))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("where", ["Z", "mu", "S"])
def test_a_single_non_finite_entry_is_refused_by_name(where, bad):
    k = FakeKernel("rbf", 2, variance=1.0, lengthscales=np.ones(2))
    args = dict(Z=np.zeros((3, 2)), mu=np.zeros((40, 2)), S=np.ones((40, 2)))
    args[where][-1, 1] = bad
    with pytest.raises(ShapeError, match=f"finite values in {where}"):
        psi.compute(k, args["Z"], args["mu"], args["S"])
    with pytest.raises(ShapeError, match=f"finite values in {where}"):
        psi.gradients(k, args["Z"], args["mu"], args["S"], 1.0, np.ones((40, 3)), np.ones((3, 3)))


def test_finite_entries_whose_sum_overflows_are_accepted_and_negative_variances_refused():
    k = FakeKernel("rbf", 2, variance=1.0, lengthscales=np.ones(2))
    mu = np.zeros((4, 2))
    mu[:, 0] = 1e308  # finite; their sum is inf
    S = np.ones((4, 2))
    stats = psi.compute(k, np.zeros((3, 2)), mu, S)
    assert np.all(np.isfinite(stats.Psi1))
    S[2, 1] = -1e-12
    with pytest.raises(ShapeError, match="non-negative variances"):
        psi.compute(k, np.zeros((3, 2)), np.zeros((4, 2)), S)


def test_registry_and_result_types():
    assert set(psi.REGISTRY) >= {"rbf", "linear", "bias", "white"}
    for name, family in psi.REGISTRY.items():
        assert callable(family.psi_stats) and callable(family.psi_gradients) and isinstance(family.PARAMS, tuple)
    k = FakeKernel("rbf", 2, variance=1.0, lengthscales=np.ones(2))
    _, Z, mu, S = problem(4, 3, 2)
    st = psi.compute(k, Z, mu, S)
    assert isinstance(st, psi.PsiStats) and isinstance(st.psi0, float)
    gr = psi.gradients(k, Z, mu, S, 1.0, np.ones((4, 3)), np.ones((3, 3)))
    assert isinstance(gr, psi.PsiGradients)
    assert gr.Z.shape == (3, 2) and gr.mu.shape == (4, 2) and gr.S.shape == (4, 2)
    assert isinstance(gr.params["variance"], float)


def test_concurrent_calls_from_two_threads_agree():
    # the compiled loops release the GIL and share a thread pool; two
    # training sessions may call them at the same time
    from concurrent.futures import ThreadPoolExecutor

    _, Z, mu, S = problem(200, 6, 3, seed=13)
    ell = np.array([0.9, 1.3, 1.1])
    G1 = np.ones((200, 6))
    G2 = np.random.default_rng(2).standard_normal((6, 6))
    want = rbf.psi_stats(1.1, ell, Z, mu, S)[2], rbf.psi_gradients(0.2, G1, G2, 1.1, ell, Z, mu, S)["Z"]
    with ThreadPoolExecutor(max_workers=3) as ex:
        futures = [ex.submit(lambda: (rbf.psi_stats(1.1, ell, Z, mu, S)[2], rbf.psi_gradients(0.2, G1, G2, 1.1, ell, Z, mu, S)["Z"])) for _ in range(6)]
        for f in futures:
            got = f.result()
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


# ---------------------------------------------------------------- forward cache and inlined exp


def _rbf_grads_without_cache(*args):
    rbf._LAST.forward = None
    return rbf.psi_gradients(*args)


@pytest.mark.parametrize("N, M", [(150, 7), (64, 1), (130, 12)])
def test_kept_forward_matches_recomputed_backward(N, M):
    # psi_stats keeps Psi2_n and its intermediates for the psi_gradients that follows
    _, Z, mu, S = problem(N, M, 3, seed=21)
    ell = np.array([0.7, 1.2, 1.6])
    rng = np.random.default_rng(4)
    G1, G2 = rng.standard_normal((N, M)), rng.standard_normal((M, M))
    args = (0.3, G1, G2, 1.4, ell, Z, mu, S)
    want = _rbf_grads_without_cache(*args)
    rbf.psi_stats(1.4, ell, Z, mu, S)
    assert rbf._LAST.forward is not None and rbf._LAST.forward.kept is not None
    got = rbf.psi_gradients(*args)
    assert rbf._LAST.forward is None
    for key in ("variance", "lengthscales", "Z", "mu", "S"):
        assert rel(got[key], want[key]) < 1e-12
    # slow reference of the statistics, for the same padded shapes
    assert rel(rbf.psi_stats(1.4, ell, Z, mu, S)[2], ref_rbf(1.4, ell, Z, mu, S)[2]) < 1e-10


def test_forward_cache_is_not_reused_for_other_arguments():
    _, Z, mu, S = problem(100, 5, 3, seed=22)
    ell = np.array([0.9, 1.0, 1.3])
    rng = np.random.default_rng(5)
    G1, G2 = rng.standard_normal((100, 5)), rng.standard_normal((5, 5))
    for change in ("mu_in_place", "S", "Z", "variance", "lengthscales"):
        mu2, S2, Z2, v2, ell2 = mu.copy(), S.copy(), Z.copy(), 1.1, ell.copy()
        rbf.psi_stats(1.1, ell2, Z2, mu2, S2)
        if change == "mu_in_place":
            mu2[3, 1] += 0.25  # same array object, new values
        elif change == "S":
            S2 = S2 * 1.5
        elif change == "Z":
            Z2 = Z2 + 0.1
        elif change == "variance":
            v2 = 1.3
        else:
            ell2 = ell2 * 1.2
        got = rbf.psi_gradients(0.2, G1, G2, v2, ell2, Z2, mu2, S2)
        want = _rbf_grads_without_cache(0.2, G1, G2, v2, ell2, Z2, mu2, S2)
        for key in ("variance", "lengthscales", "Z", "mu", "S"):
            assert rel(got[key], want[key]) < 1e-12, change


def test_psi2_kept_above_limit_is_recomputed(monkeypatch):
    _, Z, mu, S = problem(90, 6, 3, seed=23)
    ell = np.array([1.0, 0.8, 1.4])
    rng = np.random.default_rng(6)
    G1, G2 = rng.standard_normal((90, 6)), rng.standard_normal((6, 6))
    want_stats = rbf.psi_stats(0.9, ell, Z, mu, S)
    want = rbf.psi_gradients(0.1, G1, G2, 0.9, ell, Z, mu, S)
    monkeypatch.setattr(rbf, "_KEEP_LIMIT", 0)
    got_stats = rbf.psi_stats(0.9, ell, Z, mu, S)
    assert rbf._LAST.forward.kept is None
    got = rbf.psi_gradients(0.1, G1, G2, 0.9, ell, Z, mu, S)
    assert rel(got_stats[2], want_stats[2]) < 1e-14 and rel(got_stats[1], want_stats[1]) == 0.0
    for key in ("variance", "lengthscales", "Z", "mu", "S"):
        assert rel(got[key], want[key]) < 1e-12


def test_returned_psi1_is_not_the_cached_one():
    # a caller modifying the returned Psi1 in place must not change the gradients
    _, Z, mu, S = problem(70, 4, 2, seed=24)
    ell = np.array([1.1, 0.9])
    rng = np.random.default_rng(7)
    G1, G2 = rng.standard_normal((70, 4)), rng.standard_normal((4, 4))
    want = _rbf_grads_without_cache(0.0, G1, G2, 1.0, ell, Z, mu, S)
    _, Psi1, _ = rbf.psi_stats(1.0, ell, Z, mu, S)
    Psi1 *= 2.0
    got = rbf.psi_gradients(0.0, G1, G2, 1.0, ell, Z, mu, S)
    for key in ("variance", "lengthscales", "Z", "mu", "S"):
        assert rel(got[key], want[key]) < 1e-12
