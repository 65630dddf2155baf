"""Finite-difference gradient checks shared by the engine tests.

Usage from any test file (tests/conftest.py puts this directory on sys.path)::

    from gradcheck import check_grad, fd_grad
    err = check_grad(lambda x: f(x), x0, analytic_gradient)
    assert err < 1e-5
"""
import numpy as np


def fd_grad(f, x, eps=1e-6):
    """Central-difference gradient of the scalar function ``f`` at ``x``.

    x: float or array of any shape; returns an array of the same shape
    (a 0-d array for a scalar x).  ``f`` receives a fresh array each call.
    """
    x = np.array(x, dtype=float)
    grad = np.empty_like(x)
    flat_x = x.reshape(-1)
    flat_g = grad.reshape(-1)
    for i in range(flat_x.size):
        xp = flat_x.copy()
        xm = flat_x.copy()
        xp[i] += eps
        xm[i] -= eps
        flat_g[i] = (float(f(xp.reshape(x.shape))) - float(f(xm.reshape(x.shape)))) / (2.0 * eps)
    return grad


def relative_error(numeric, analytic, floor=1e-3):
    """Max elementwise |numeric - analytic| / max(|numeric|, |analytic|, floor * scale).

    scale = max(1, max|numeric|, max|analytic|): entries much smaller than the
    largest one are compared in absolute terms, so central-difference round-off
    on a tiny (or exactly zero) entry does not read as a large relative error.
    """
    numeric = np.asarray(numeric, dtype=float)
    analytic = np.asarray(analytic, dtype=float)
    if numeric.shape != analytic.shape:
        raise ValueError(f"Expected gradients of the same shape, got {numeric.shape} and {analytic.shape} instead.")
    if numeric.size == 0:
        return 0.0
    scale = max(1.0, float(np.max(np.abs(numeric))), float(np.max(np.abs(analytic))))
    denom = np.maximum(np.maximum(np.abs(numeric), np.abs(analytic)), floor * scale)
    return float(np.max(np.abs(numeric - analytic) / denom))


def check_grad(f, x, analytic, eps=1e-6, floor=1e-3):
    """Max relative error between central differences of ``f`` at ``x`` and ``analytic``."""
    return relative_error(fd_grad(f, x, eps), np.asarray(analytic, dtype=float).reshape(np.shape(x)), floor)
