"""Weighted sums of the psi statistics over the points (engine.psi.compute_grouped).

With missing outputs each column group needs the psi statistics of its
observed rows.  compute_grouped forms them from one pass over the rows
(every Psi2_n enters the sums of the groups observing row n), and
gradients_grouped forms one cotangent per row.  Checked here: equal to the
per-group passes (compute / gradients on each row subset, and the
full-minus-missing-rows form the models used), finite differences, the same
bits for any number of threads, the forward cache, and the model's bound and
gradients equal to the generic per-group path.
"""
from __future__ import annotations

import numba
import numpy as np
import pytest
from gradcheck import check_grad

import engine
import engine.psi as psi
from engine.errors import ShapeError, UnsupportedKernelError
from engine.kernels import RBF, Bias, Linear, White
from engine.models.collapsed import CollapsedModel
from engine.psi import rbf


def rel(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def problem(N, M, Q, K, seed=0, rate=0.2):
    """Z, mu, S and 0/1 memberships W (N, K) (each row set keeps at least one row)."""
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((M, Q))
    mu = rng.standard_normal((N, Q))
    S = rng.uniform(0.05, 1.0, (N, Q))
    W = (rng.random((N, K)) >= rate).astype(float)
    W[0] = 1.0
    return rng, Z, mu, S, W


def kernels(Q):
    rng = np.random.default_rng(3)
    return {
        "rbf-ard": RBF(Q, variance=1.3, lengthscales=rng.uniform(0.6, 1.8, Q)),
        "rbf-iso": RBF(Q, variance=0.8, lengthscales=1.1, ard=False),
        "rbf+bias+white": RBF(Q, variance=1.1, lengthscales=rng.uniform(0.6, 1.8, Q)) + Bias(Q, 0.4) + White(Q, 0.05),
        "bias+rbf+bias": Bias(Q, 0.3) + RBF(Q, variance=0.9, lengthscales=0.9, ard=False) + Bias(Q, 0.5),
        "bias": Bias(Q, 0.6),
        "white": White(Q, 0.2),
        "bias+white": Bias(Q, 0.7) + White(Q, 0.1),
    }


KERNELS = list(kernels(2))


def per_group(kernel, Z, mu, S, W, g0, G1, G2):
    """The statistics and gradients by one compute / gradients pass per row subset."""
    K = W.shape[1]
    M = Z.shape[0]
    psi0 = np.empty(K)
    Psi2 = np.empty((K, M, M))
    full = psi.compute(kernel, Z, mu, S)
    grads = psi.gradients(kernel, Z, mu, S, 0.0, G1, np.zeros((M, M)))
    params = {k: np.array(v, float) for k, v in grads.params.items()}
    dZ, dmu, dS = grads.Z.copy(), grads.mu.copy(), grads.S.copy()
    for k in range(K):
        rows = np.flatnonzero(W[:, k])
        st = psi.compute(kernel, Z, mu[rows], S[rows])
        psi0[k], Psi2[k] = st.psi0, st.Psi2
        g = psi.gradients(kernel, Z, mu[rows], S[rows], g0[k], np.zeros((rows.size, M)), G2[k])
        for name in params:
            params[name] = params[name] + g.params[name]
        dZ += g.Z
        dmu[rows] += g.mu
        dS[rows] += g.S
    return (psi0, full.Psi1, Psi2), psi.PsiGradients(params, dZ, dmu, dS)


def assert_grads_close(got, want, tol):
    assert set(got.params) == set(want.params)
    for name in want.params:
        assert np.shape(got.params[name]) == np.shape(want.params[name]), name
        assert rel(got.params[name], want.params[name]) < tol, name
    for name in ("Z", "mu", "S"):
        w = getattr(want, name)
        g = getattr(got, name)
        if np.any(w):
            assert rel(g, w) < tol, name
        else:
            assert np.max(np.abs(g)) < tol, name


# ---------------------------------------------------------------- equal to the per-group passes


@pytest.mark.parametrize("case", KERNELS)
@pytest.mark.parametrize("N, M, Q, K", [(150, 7, 2, 3), (40, 5, 3, 1), (200, 12, 4, 6)])
def test_grouped_equals_per_group_passes(case, N, M, Q, K):
    kernel = kernels(Q)[case]
    rng, Z, mu, S, W = problem(N, M, Q, K, seed=N + K)
    g0 = rng.standard_normal(K)
    G1 = rng.standard_normal((N, M))
    G2 = rng.standard_normal((K, M, M))  # not symmetric on purpose
    (want0, want1, want2), want_grads = per_group(kernel, Z, mu, S, W, g0, G1, G2)
    st = psi.compute_grouped(kernel, Z, mu, S, W)
    assert st.psi0.shape == (K,) and st.Psi1.shape == (N, M) and st.Psi2.shape == (K, M, M)
    assert rel(st.psi0, want0) < 1e-12
    assert rel(st.Psi1, want1) < 1e-12
    if np.any(want2):
        assert rel(st.Psi2, want2) < 1e-12
    else:
        assert not np.any(st.Psi2)
    assert np.array_equal(st.Psi2, np.swapaxes(st.Psi2, 1, 2))
    got = psi.gradients_grouped(kernel, Z, mu, S, W, g0, G1, G2)
    assert_grads_close(got, want_grads, 1e-12)


@pytest.mark.parametrize("N, M", [(1, 1), (63, 1), (64, 3), (65, 4), (130, 9), (1000, 20)])
def test_rbf_grouped_equals_full_minus_missing_rows(N, M):
    # the form the models used: the full sums minus each group's missing rows
    Q, K = 3, 4
    rng, Z, mu, S, W = problem(N, M, Q, K, seed=M)
    ell = np.array([0.7, 1.3, 1.9])
    _, _, full = rbf.psi_stats(1.2, ell, Z, mu, S)
    psi0, Psi1, Psi2 = rbf.psi_stats_weighted(1.2, ell, Z, mu, S, W)
    for k in range(K):
        missing = np.flatnonzero(W[:, k] == 0)
        want = full - (rbf.psi_stats(1.2, ell, Z, mu[missing], S[missing])[2] if missing.size else 0.0)
        assert rel(Psi2[k], want) < 1e-12
        assert psi0[k] == pytest.approx(1.2 * (N - missing.size), rel=1e-15)


@pytest.mark.parametrize("keep", [True, False])
def test_rbf_backward_with_kept_or_recomputed_values(keep, monkeypatch):
    # psi_stats_weighted keeps Psi2_n for the backward pass below _KEEP_LIMIT; above it they are recomputed
    if not keep:
        monkeypatch.setattr(rbf, "_KEEP_LIMIT", 0)
    N, M, Q, K = 150, 8, 3, 5
    rng, Z, mu, S, W = problem(N, M, Q, K, seed=9)
    ell = np.array([0.9, 1.1, 1.6])
    g0, G1, G2 = rng.standard_normal(K), rng.standard_normal((N, M)), rng.standard_normal((K, M, M))
    rbf.psi_stats_weighted(1.1, ell, Z, mu, S, W)
    assert (rbf._LAST.forward.kept is not None) == keep
    got = rbf.psi_gradients_weighted(g0, G1, G2, 1.1, ell, Z, mu, S, W)
    assert rbf._LAST.forward is None
    fresh = rbf.psi_gradients_weighted(g0, G1, G2, 1.1, ell, Z, mu, S, W)  # no cache: recomputed
    for key in ("variance", "lengthscales", "Z", "mu", "S"):
        assert np.array_equal(got[key], fresh[key]), key
    # the kept values of a weighted forward serve the plain backward pass too (they do not depend on W)
    rbf.psi_stats_weighted(1.1, ell, Z, mu, S, W)
    plain = rbf.psi_gradients(0.2, G1, G2[0], 1.1, ell, Z, mu, S)
    rbf._LAST.forward = None
    want = rbf.psi_gradients(0.2, G1, G2[0], 1.1, ell, Z, mu, S)
    for key in ("variance", "lengthscales", "Z", "mu", "S"):
        assert rel(plain[key], want[key]) < 1e-12, key


def test_weights_of_ones_give_the_complete_statistics():
    N, M, Q = 300, 10, 3
    rng, Z, mu, S, _ = problem(N, M, Q, 1, seed=4)
    kernel = kernels(Q)["rbf+bias+white"]
    full = psi.compute(kernel, Z, mu, S)
    st = psi.compute_grouped(kernel, Z, mu, S, np.ones((N, 2)))
    assert st.psi0 == pytest.approx([full.psi0, full.psi0], rel=1e-14)
    for k in range(2):
        assert rel(st.Psi2[k], full.Psi2) < 1e-13


# ---------------------------------------------------------------- finite differences


@pytest.mark.parametrize("case", KERNELS)
def test_gradients_grouped_finite_differences(case):
    N, M, Q, K = 8, 4, 2, 3
    kernel = kernels(Q)[case]
    rng, Z, mu, S, _ = problem(N, M, Q, K, seed=11)
    S = rng.uniform(0.2, 1.0, (N, Q))
    W = rng.uniform(-0.5, 1.5, (N, K))  # any real weights, not only memberships
    g0 = rng.standard_normal(K)
    G1 = rng.standard_normal((N, M))
    G2 = rng.standard_normal((K, M, M))
    base = dict(kernel.params, mu=mu, S=S, Z=Z)

    def L(values):
        k = kernel.copy()
        k.set_params(**{name: values[name] for name in kernel.params})
        st = psi.compute_grouped(k, values["Z"], values["mu"], values["S"], W)
        return float(g0 @ st.psi0 + np.sum(G1 * st.Psi1) + np.sum(G2 * st.Psi2))

    grads = psi.gradients_grouped(kernel, Z, mu, S, W, g0, G1, G2)
    analytic = dict(grads.params, mu=grads.mu, S=grads.S, Z=grads.Z)
    for block in ["mu", "S", "Z", *kernel.params]:
        assert np.shape(analytic[block]) == np.shape(base[block]), block

        def f(x, block=block):
            values = dict(base)
            values[block] = x if np.ndim(base[block]) else float(x)
            return L(values)

        err = check_grad(f, np.asarray(base[block], float), analytic[block])
        assert err < 1e-5, f"{case}: d/d{block} relative error {err:.2e}"


# ---------------------------------------------------------------- threads


@pytest.mark.parametrize("N, groups", [(300, None), (1000, None), (1000, 3)])
def test_rbf_grouped_bitwise_same_with_any_thread_count(N, groups, monkeypatch):
    if groups is not None:
        monkeypatch.setattr(rbf, "_GROUPS", groups)
    M, Q, K = 9, 3, 4
    rng, Z, mu, S, W = problem(N, M, Q, K, seed=5)
    ell = np.array([0.8, 1.1, 1.5])
    g0, G1, G2 = rng.standard_normal(K), rng.standard_normal((N, M)), rng.standard_normal((K, M, M))
    before = numba.get_num_threads()
    results = {}
    try:
        for n in sorted({1, 2, numba.config.NUMBA_NUM_THREADS}):
            if n > numba.config.NUMBA_NUM_THREADS:
                continue
            numba.set_num_threads(n)
            stats = rbf.psi_stats_weighted(1.2, ell, Z, mu, S, W)
            kept = rbf.psi_gradients_weighted(g0, G1, G2, 1.2, ell, Z, mu, S, W)
            fresh = rbf.psi_gradients_weighted(g0, G1, G2, 1.2, ell, Z, mu, S, W)
            results[n] = stats, kept, fresh
    finally:
        numba.set_num_threads(before)
    ref_stats, ref_kept, ref_fresh = results[1]
    for n, (stats, kept, fresh) in results.items():
        assert np.array_equal(stats[2], ref_stats[2]), n
        for key in ("Z", "mu", "S", "lengthscales", "variance"):
            assert np.array_equal(kept[key], ref_kept[key]), (n, key)
            assert np.array_equal(fresh[key], ref_fresh[key]), (n, key)


# ---------------------------------------------------------------- dispatch and errors


def test_supported_kernels_and_errors():
    Q = 2
    assert psi.supports_grouped(RBF(Q))
    assert psi.supports_grouped(RBF(Q) + Bias(Q) + White(Q))
    assert psi.supports_grouped(Bias(Q) + White(Q))
    assert not psi.supports_grouped(Linear(Q))
    assert not psi.supports_grouped(Linear(Q) + Bias(Q))
    _, Z, mu, S, W = problem(10, 3, Q, 2)
    with pytest.raises(UnsupportedKernelError, match="compute"):
        psi.compute_grouped(Linear(Q), Z, mu, S, W)
    with pytest.raises(ShapeError, match="weights"):
        psi.compute_grouped(RBF(Q), Z, mu, S, W[:5])
    with pytest.raises(ShapeError, match="weights"):
        psi.compute_grouped(RBF(Q), Z, mu, S, np.ones((10, 0)))
    with pytest.raises(ShapeError, match="dL_dPsi2"):
        psi.gradients_grouped(RBF(Q), Z, mu, S, W, np.zeros(2), np.zeros((10, 3)), np.zeros((3, 3)))
    with pytest.raises(ShapeError, match="dL_dpsi0"):
        psi.gradients_grouped(RBF(Q), Z, mu, S, W, 0.0, np.zeros((10, 3)), np.zeros((2, 3, 3)))


# ---------------------------------------------------------------- the models


def manifold(N, D, seed=0):
    rng = np.random.default_rng(seed)
    T = rng.uniform(-1.5, 1.5, size=(N, 2))
    return np.sin(T @ rng.normal(size=(2, D)) + rng.uniform(0, 6, D)) + 0.05 * rng.normal(size=(N, D))


def with_holes(Y, rate, seed=1):
    rng = np.random.default_rng(seed)
    holes = rng.random(Y.shape) < rate
    holes[np.arange(Y.shape[0]), rng.integers(0, Y.shape[1], Y.shape[0])] = False
    holes[:, 1] = holes[:, 0]  # two columns share a pattern
    Y = Y.copy()
    Y[holes] = np.nan
    return Y


def generic(model, x, monkeypatch):
    """Objective and gradient by the per-group passes (the generic path)."""
    with monkeypatch.context() as mp:
        mp.setattr(CollapsedModel, "_grouped_psi", lambda self, kern: False)
        return model.objective_and_gradient(np.array(x, dtype=float))


@pytest.mark.parametrize("kernel", ["default", "rbf+bias+white", "iso+bias"])
@pytest.mark.parametrize("rate", [0.1, 0.3, 0.6])
def test_bayesian_bound_and_gradients_equal_the_per_group_path(kernel, rate, monkeypatch):
    Y = with_holes(manifold(150, 7), rate)
    kern = {"default": None, "rbf+bias+white": RBF(2) + Bias(2, 0.5) + White(2, 0.01),
            "iso+bias": RBF(2, ard=False) + Bias(2, 0.3)}[kernel]
    model = engine.BayesianGPLVM(Y, 2, num_inducing=10, kernel=kern)
    rng = np.random.default_rng(2)
    v = model.parameters
    model.set_parameters(X_mean=v["X_mean"] + 0.3 * rng.normal(size=v["X_mean"].shape),
                         X_variance=rng.uniform(0.05, 0.6, size=v["X_variance"].shape), noise_variance=0.15)
    assert model._grouped_psi(model.kernel_at(model.parameters))
    x = model.get_free()
    f, g = model.objective_and_gradient(x)
    f_ref, g_ref = generic(model, x, monkeypatch)
    # both sum the same terms in other orders; the bound's Cholesky solves amplify the rounding
    # (how much depends on the processor's BLAS kernels: 1.2e-12 seen on a Haswell OpenBLAS)
    assert f == pytest.approx(f_ref, rel=1e-11)
    assert rel(g, g_ref) < 1e-10


def test_other_models_and_kernels_take_the_generic_path():
    Y = with_holes(manifold(60, 5), 0.2)
    linear = engine.BayesianGPLVM(Y, 2, num_inducing=6, kernel=Linear(2) + Bias(2))
    assert not linear._grouped_psi(linear.kernel_at(linear.parameters))
    sparse = engine.SparseGPLVM(Y, 2, num_inducing=6)
    assert not sparse._grouped_psi(sparse.kernel_at(sparse.parameters))
    assert np.isfinite(linear.objective()) and np.isfinite(sparse.objective())


def test_bayesian_missing_data_gradients_match_finite_differences():
    Y = with_holes(manifold(40, 5), 0.3)
    model = engine.BayesianGPLVM(Y, 2, num_inducing=6, kernel=RBF(2) + Bias(2, 0.2) + White(2, 0.01))
    assert model._grouped_psi(model.kernel_at(model.parameters))
    assert model.checkgrad() < 1e-4


def test_rbf_many_weight_columns_are_taken_in_chunks(monkeypatch):
    N, M, Q, K = 200, 6, 2, 7
    rng, Z, mu, S, W = problem(N, M, Q, K, seed=13)
    ell = np.array([0.8, 1.4])
    want = rbf.psi_stats_weighted(0.9, ell, Z, mu, S, W)
    g0, G1, G2 = rng.standard_normal(K), rng.standard_normal((N, M)), rng.standard_normal((K, M, M))
    want_grads = rbf.psi_gradients_weighted(g0, G1, G2, 0.9, ell, Z, mu, S, W)
    P = M * (M + 1) // 2
    ngroup = len(rbf._group_bounds(-(-N // rbf._BLOCK))) - 1
    monkeypatch.setattr(rbf, "_WEIGHTED_ACC_LIMIT", 3 * ngroup * P)  # chunks of 3, 3 and 1 columns
    got = rbf.psi_stats_weighted(0.9, ell, Z, mu, S, W)
    assert rbf._LAST.forward.kept is not None
    got_grads = rbf.psi_gradients_weighted(g0, G1, G2, 0.9, ell, Z, mu, S, W)
    # (a GEMM of another width may round differently: equal to rounding, not bitwise)
    for a, b in zip(got, want):
        assert rel(a, b) < 1e-14
    for key in ("variance", "lengthscales", "Z", "mu", "S"):
        assert rel(got_grads[key], want_grads[key]) < 1e-13, key


def test_missing_data_bound_bitwise_same_with_any_thread_count():
    # N = 300: five blocks of 64 rows, shared between the threads
    Y = with_holes(manifold(300, 6), 0.2)
    model = engine.BayesianGPLVM(Y, 3, num_inducing=12)
    assert model._grouped_psi(model.kernel_at(model.parameters))
    x = model.get_free() + 0.01
    before = numba.get_num_threads()
    results = {}
    try:
        for n in sorted({1, 2, numba.config.NUMBA_NUM_THREADS}):
            if n > numba.config.NUMBA_NUM_THREADS:
                continue
            numba.set_num_threads(n)
            results[n] = model.objective_and_gradient(x)
    finally:
        numba.set_num_threads(before)
    f1, g1 = results[1]
    for n, (f, g) in results.items():
        assert f == f1 and np.array_equal(g, g1), n
