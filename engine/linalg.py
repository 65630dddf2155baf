"""Cholesky factorisation with reported jitter, and solves built on it.

No explicit inverses: inverses that the gradients need (K^-1 in dL/dK) come
from the Cholesky factor through LAPACK's potri.
"""
from __future__ import annotations

import numpy as np
from scipy import linalg as sla
from scipy.linalg import lapack

from ._jit import JIT, njit
from .errors import NumericalError

#: Jitter tried, relative to the mean of the diagonal, when a plain Cholesky fails.
JITTER_LADDER = (1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4)


def try_cholesky(A: np.ndarray):
    """Lower Cholesky factor of the symmetric (P, P) matrix A, or None if it is not positive definite."""
    L, info = lapack.dpotrf(A, lower=1, clean=1, overwrite_a=0)
    return L if info == 0 else None


def jitter_levels(A: np.ndarray):
    """0, then the jitter ladder scaled by the mean of A's diagonal."""
    scale = float(np.mean(np.diag(A)))
    if not scale > 0:
        scale = 1.0
    return (0.0,) + tuple(rel * scale for rel in JITTER_LADDER)


def cholesky_failure(what: str) -> NumericalError:
    return NumericalError(
        f"Cholesky factorisation of the {what} failed even with jitter {JITTER_LADDER[-1]:g} x mean diagonal. "
        "Try standardising the data, fewer inducing points, or a larger noise variance."
    )


def check_finite(A: np.ndarray, what: str) -> np.ndarray:
    A = np.ascontiguousarray(A, dtype=float)
    if not np.all(np.isfinite(A)):
        raise NumericalError(f"The {what} contains NaN or infinite values; check the data and parameters.")
    return A


def jitchol(A: np.ndarray, what: str = "matrix") -> tuple[np.ndarray, float]:
    """Lower Cholesky factor of a symmetric (P, P) matrix, adding jitter only if needed.

    Returns ``(L, jitter)`` with ``L @ L.T == A + jitter * I``; ``jitter`` is 0.0
    when the plain factorisation succeeded.  Raises :class:`NumericalError`
    naming ``what`` when even the largest jitter fails.
    """
    A = check_finite(A, what)
    eye = np.eye(A.shape[0])
    for jitter in jitter_levels(A):
        L = try_cholesky(A + jitter * eye if jitter else A)
        if L is not None:
            return L, jitter
    raise cholesky_failure(what)


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
