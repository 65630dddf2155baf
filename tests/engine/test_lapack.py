"""engine._lapack: scipy's LAPACK routines called without the GIL give scipy's wrappers' results, bit for
bit, and let other threads run while they work."""
from __future__ import annotations


import numpy as np
import pytest
import scipy.linalg as sla
from scipy.linalg import lapack

from engine import _lapack, linalg


def _spd(n: int, seed: int = 0) -> np.ndarray:
    A = np.random.default_rng(seed).normal(size=(n, n))
    return A @ A.T + n * np.eye(n) + np.eye(n)


@pytest.mark.parametrize("n", [1, 2, 7, 65, 200])
def test_the_factor_inverse_and_solves_equal_scipys_bit_for_bit(n):
    rng = np.random.default_rng(n)
    K = _spd(n, n)
    L_ref, info_ref = lapack.dpotrf(K, lower=1, clean=1, overwrite_a=0)
    L, info = _lapack.potrf_lower(K)
    assert info == info_ref == 0
    np.testing.assert_array_equal(L, L_ref)
    assert L.flags.f_contiguous
    C_ref, _ = lapack.dpotri(L_ref, lower=1)
    C, info = _lapack.potri_lower(L)
    assert info == 0
    np.testing.assert_array_equal(C, C_ref)
    for shape in [(n,), (n, 1), (n, 5)]:
        B = rng.normal(size=shape)
        X, info = _lapack.potrs_lower(L, B)
        assert info == 0
        np.testing.assert_array_equal(X, sla.cho_solve((L_ref, True), B))
        for Lx in (L, np.ascontiguousarray(L)):  # scipy solves a C-ordered factor as its transpose
            for trans in (False, True):
                X, info = _lapack.trtrs(Lx, B, lower=True, trans=trans)
                assert X.shape == shape and info == 0
                np.testing.assert_array_equal(X, sla.solve_triangular(Lx, B, lower=True, trans=int(trans)))


def test_the_factor_solves_the_system():
    K = _spd(30)
    L, _ = _lapack.potrf_lower(K)
    np.testing.assert_allclose(L @ L.T, K, rtol=1e-13, atol=1e-12)
    assert np.all(np.triu(L, 1) == 0)
    B = np.random.default_rng(1).normal(size=(30, 3))
    np.testing.assert_allclose(K @ _lapack.potrs_lower(L, B)[0], B, rtol=1e-10, atol=1e-10)


def test_failures_are_reported():
    K = np.diag([1.0, 2.0, -1.0])
    assert _lapack.potrf_lower(K)[1] == 3  # the order of the leading minor that is not positive
    assert _lapack.trtrs(np.diag([1.0, 0.0]), np.ones(2))[1] == 2  # the diagonal entry (1-based) that is zero
    with pytest.raises(ValueError, match="shape"):
        _lapack.trtrs(np.eye(2), np.ones((2, 2, 2)))


def test_the_input_is_not_overwritten():
    K = _spd(20)
    before = K.copy()
    L, _ = _lapack.potrf_lower(K)
    B = np.ones((20, 2))
    _lapack.potri_lower(L)
    L_before = L.copy()
    _lapack.potrs_lower(L, B)
    _lapack.trtrs(L, B)
    np.testing.assert_array_equal(K, before)
    np.testing.assert_array_equal(L, L_before)
    np.testing.assert_array_equal(B, 1.0)


def test_every_routine_runs_in_compiled_code_that_releases_the_gil():
    # Whether another thread runs during a call depends on the scheduler (on a loaded machine it can
    # be kept off the CPU for a whole call; benchmarks/bench_liveness.py measures the effect): what is
    # checked here is the mechanism, each LAPACK call made from a function compiled with nogil.
    compiled = [_lapack._potrf_lower, _lapack._potri_lower, _lapack._potrs_lower, _lapack._trtrs,
                _lapack._fortran_copy]
    for fn in compiled:
        assert fn.targetoptions.get("nogil") is True, fn


@pytest.mark.parametrize("call, routine", [
    (lambda L, B: linalg.try_cholesky(L @ L.T), "potrf_lower"),
    (lambda L, B: linalg.chol_inverse(L), "potri_lower"),
    (lambda L, B: linalg.chol_solve(L, B), "potrs_lower"),
    (lambda L, B: linalg.tri_solve(L, B), "trtrs"),
    (lambda L, B: linalg.tri_solve(L, B, trans=True), "trtrs"),
    (lambda L, B: linalg.lower_inverse(L), "trtrs"),
])
def test_the_engines_factorisations_and_solves_go_through_it(monkeypatch, call, routine):
    seen = []
    original = getattr(linalg, routine)

    def spy(*args, **kwargs):
        seen.append(routine)
        return original(*args, **kwargs)

    monkeypatch.setattr(linalg, routine, spy)
    L, _ = _lapack.potrf_lower(_spd(6))
    call(L, np.ones((6, 2)))
    assert seen == [routine]
