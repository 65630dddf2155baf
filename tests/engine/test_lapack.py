"""engine._lapack: scipy's LAPACK routines called without the GIL give scipy's wrappers' results, bit for
bit, and let other threads run while they work."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import scipy.linalg as sla
from scipy.linalg import lapack

from engine import _lapack


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


def _noted_inside(call, repeats: int = 5) -> list[int]:
    """How many times another thread noted the time in the middle 60% of each of ``repeats`` calls.

    The thread notes the time as fast as it can.  If ``call`` holds the GIL throughout (scipy's
    wrappers do), it can note only before the call starts or after it ends (by at most a switch
    interval): 0 in the middle of every call.
    """
    noted = []
    stop = threading.Event()

    def note():
        while not stop.is_set():
            noted.append(time.perf_counter())

    noter = threading.Thread(target=note)
    noter.start()
    try:
        calls = []
        for _ in range(repeats):
            began = time.perf_counter()
            call()
            calls.append((began, time.perf_counter()))
    finally:
        stop.set()
        noter.join()
    times = np.array(noted)
    return [int(np.sum((times > a + 0.2 * (b - a)) & (times < b - 0.2 * (b - a)))) for a, b in calls]


def test_other_threads_run_while_lapack_works():
    K = _spd(1500)
    L, _ = _lapack.potrf_lower(K)
    B = np.random.default_rng(2).normal(size=(1500, 1500))
    _lapack.trtrs(L[:2, :2], B[:2])  # compiled before the measurement
    assert max(_noted_inside(lambda: _lapack.potrf_lower(K))) > 0
    assert max(_noted_inside(lambda: _lapack.trtrs(L, B))) > 0
    # the measurement sees a call that holds the GIL
    assert max(_noted_inside(lambda: lapack.dpotrf(K, lower=1), repeats=2)) == 0
