"""Cholesky factorisation, and solves built on it (jitter is the models' business).

No explicit inverses: inverses that the gradients need (K^-1 in dL/dK) come
from the Cholesky factor through LAPACK's potri.
"""
from __future__ import annotations

import numpy as np
from scipy import linalg as sla
from scipy.linalg import lapack

from ._jit import JIT, njit
from .errors import NumericalError


def try_cholesky(A: np.ndarray):
    """Lower Cholesky factor of the symmetric (P, P) matrix A, or None if it is not positive definite."""
    L, info = lapack.dpotrf(A, lower=1, clean=1, overwrite_a=0)
    return L if info == 0 else None


def check_finite(A: np.ndarray, what: str) -> np.ndarray:
    A = np.ascontiguousarray(A, dtype=float)
    if not np.all(np.isfinite(A)):
        raise NumericalError(f"The {what} contains NaN or infinite values; check the data and parameters.")
    return A


@njit(**JIT)
def _mirror_upper(A):
    """Copy the strict upper triangle of the square C-ordered A onto its lower triangle, in place."""
    n = A.shape[0]
    for i in range(n):
        for j in range(i + 1, n):
            A[j, i] = A[i, j]


def chol_inverse(L: np.ndarray) -> np.ndarray:
    """(L L^T)^-1 from its lower Cholesky factor, via LAPACK dpotri (symmetric result)."""
    Ainv, info = lapack.dpotri(L, lower=1)
    if info != 0:
        raise NumericalError(f"dpotri failed with info={info}.")
    # potri fills the lower triangle of a Fortran-ordered array: the upper one of its C-ordered transpose
    At = Ainv.T if Ainv.flags.f_contiguous else np.ascontiguousarray(Ainv.T)
    _mirror_upper(At)
    return At


def chol_solve(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Solve (L L^T) X = B for X."""
    return sla.cho_solve((L, True), B, check_finite=False)


def tri_solve(L: np.ndarray, B: np.ndarray, trans: bool = False) -> np.ndarray:
    """Solve L X = B (or L^T X = B with ``trans``) for lower-triangular L."""
    return sla.solve_triangular(L, B, lower=True, trans=1 if trans else 0, check_finite=False)


def logdet_from_chol(L: np.ndarray) -> float:
    """log |L L^T|."""
    return 2.0 * float(np.sum(np.log(np.diag(L))))
