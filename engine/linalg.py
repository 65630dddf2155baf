"""Cholesky factorisation with the engine's one jitter policy, and solves built on it.

No explicit inverses: inverses that the gradients need (K^-1 in dL/dK) come
from the Cholesky factor through LAPACK's potri.  The LAPACK calls go through
:mod:`engine._lapack`, which releases the GIL (scipy's wrappers hold it for the
whole call, which froze the web server during a big exact model's evaluation).

Jitter (:func:`escalate_jitter`): a matrix is factorised with the jitter its
owner holds (a model chooses it once per fit: ``JITTER_RELATIVE`` times the
mean diagonal of the matrix, as GPy's 1e-8); only when that fails is it
raised tenfold, with a logged warning, up to ``JITTER_LIMIT`` times the mean
diagonal, beyond which a :class:`~engine.errors.NumericalError` says what to
try.  Every factorisation that may need jitter (the models' bounds, their
predictions and the projection of new rows) goes through it.
"""
from __future__ import annotations

import logging

import numpy as np

from ._jit import JIT, STRICT, njit
from ._lapack import potrf_lower, potri_lower, potrs_lower, trtrs
from .errors import NumericalError

logger = logging.getLogger(__name__)

#: Jitter of a fit's start, relative to the mean diagonal of the factorised matrix (as GPy's 1e-8).
JITTER_RELATIVE = 1e-8
#: Largest jitter the escalation tries, relative to the mean diagonal.
JITTER_LIMIT = 1e-2


class FactorisationError(NumericalError):
    """A matrix could not be factorised at the current jitter (:func:`escalate_jitter` raises it).

    ``matrix`` names the matrix that failed when it is not the one the jitter is added to
    (e.g. I + beta A of the collapsed bound, which fails when Kmm is ill-conditioned).
    """

    def __init__(self, message: str, matrix: str | None = None):
        super().__init__(message)
        self.matrix = matrix


def try_cholesky(A: np.ndarray):
    """Lower Cholesky factor of the symmetric (P, P) matrix A, or None if it is not positive definite."""
    L, info = potrf_lower(A)
    return L if info == 0 else None


def start_jitter(mean_diagonal: float) -> float:
    """The jitter a fit starts with for a matrix of this mean diagonal: ``JITTER_RELATIVE`` of it."""
    return JITTER_RELATIVE * max(float(mean_diagonal), 1e-300)


def cholesky(A: np.ndarray, jitter: float = 0.0, what: str = "matrix") -> np.ndarray:
    """Lower Cholesky factor of A + jitter I, (P, P); :class:`FactorisationError` if not positive definite."""
    L = try_cholesky(A + jitter * np.eye(A.shape[0]) if jitter else A)
    if L is None:
        raise FactorisationError(f"The {what} is not numerically positive definite.")
    return L


def escalate_jitter(factorise, jitter: float, scale: float, what: str, owner: str = ""):
    """``(factorise(jitter'), jitter')`` for the first jitter' from ``jitter`` on at which it succeeds.

    ``factorise(jitter)`` raises :class:`FactorisationError` on failure; ``scale`` is
    the mean diagonal of the matrix.  Each failure raises the jitter tenfold (at
    least to ``JITTER_RELATIVE * scale``) and logs a warning naming ``owner`` and
    ``what``; past ``JITTER_LIMIT * scale`` a :class:`NumericalError` is raised.
    """
    scale = scale if scale > 0 and np.isfinite(scale) else 1.0
    jitter = float(jitter or 0.0)
    while True:
        try:
            return factorise(jitter), jitter
        except FactorisationError as exc:
            failed = exc.matrix or what
            new = max(10.0 * jitter, JITTER_RELATIVE * scale)
            if new > JITTER_LIMIT * scale:
                where = "" if failed == what else f" added to the {what}"
                raise NumericalError(
                    f"The {failed} could not be factorised even with jitter {jitter:.3g}{where} "
                    f"({jitter / scale:.1e} of its mean diagonal). Try standardising the data, "
                    "fewer inducing points, or a larger noise variance.") from None
            logger.warning("%s: factorising the %s failed with jitter %.3g on the %s; raising it to %.3g "
                           "(the objective changes slightly from here on).", owner or "engine", failed, jitter,
                           what, new)
            jitter = new


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
    Ainv, info = potri_lower(L)
    if info != 0:
        raise NumericalError(f"dpotri failed with info={info}.")
    # potri fills the lower triangle of a Fortran-ordered array: the upper one of its C-ordered transpose
    At = Ainv.T if Ainv.flags.f_contiguous else np.ascontiguousarray(Ainv.T)
    _mirror_upper(At)
    return At


# The solves call LAPACK directly (engine._lapack): scipy's wrappers validate their arguments on
# every call (~30 us each at M = 50, ten solves per bound evaluation) and hold the GIL throughout;
# the factors here are the engine's own, finite and square.  The calls are those scipy makes, so
# the results are the same bits.


def chol_solve(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Solve (L L^T) X = B for X; L (P, P) lower-triangular, B (P,) or (P, K)."""
    X, info = potrs_lower(L, B)
    if info != 0:
        raise NumericalError(f"dpotrs failed with info={info}.")
    return X


def tri_solve(L: np.ndarray, B: np.ndarray, trans: bool = False) -> np.ndarray:
    """Solve L X = B (or L^T X = B with ``trans``) for lower-triangular L (P, P); B (P,) or (P, K)."""
    X, info = trtrs(L, B, lower=True, trans=trans)
    if info != 0:
        raise NumericalError(f"dtrtrs failed with info={info} (a zero on the diagonal of the factor).")
    return X


def logdet_from_chol(L: np.ndarray) -> float:
    """log |L L^T|."""
    return 2.0 * float(np.sum(np.log(np.diag(L))))


def lower_inverse(L: np.ndarray) -> np.ndarray:
    """L^-1 of a lower-triangular (M, M) L (for the many products of the batched projection)."""
    return tri_solve(L, np.eye(L.shape[0]))


# ---- batched over a leading axis of n rows or n small matrices ----------------------------
# Row by row: row i of each result depends on row i of the inputs alone, bit for bit, whatever
# the other rows are (one BLAS call per slice, of the same shape for every n; a GEMM over all
# rows would give a row other bits in another batch).  The projection of new data needs it: a
# row's iterates must not depend on the rows projected with it.


@njit(**STRICT)
def _rows_dot(A, B, out):
    """out[i] = A[i] @ B, summed over k in order for every row (no fast-math reordering)."""
    n, K = A.shape
    P = B.shape[1]
    for i in range(n):
        for p in range(P):
            out[i, p] = 0.0
        for k in range(K):
            a = A[i, k]
            for p in range(P):
                out[i, p] += a * B[k, p]


def rows_dot(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """A (n, K) @ B (K, P), (n, P), computed row by row (see above)."""
    A = np.ascontiguousarray(A, dtype=np.float64)
    B = np.ascontiguousarray(B, dtype=np.float64)
    out = np.empty((A.shape[0], B.shape[1]))
    _rows_dot(A, B, out)
    return out


def sandwich(Lt: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Lt X_n Lt^T for every symmetric (M, M) slice of X (n, M, M); Lt (M, M); slice by slice."""
    XLt = np.matmul(X, Lt.T)  # X_n Lt^T
    return np.matmul(XLt.transpose(0, 2, 1), Lt.T)  # (X_n Lt^T)^T Lt^T = Lt X_n Lt^T for symmetric X_n


def spd_inverses(B: np.ndarray):
    """(log|B_n| (n,), B_n^-1 (n, M, M)) of symmetric positive definite slices; NaN where not PD."""
    try:
        LB = np.linalg.cholesky(B)
        logdet = 2.0 * np.sum(np.log(np.diagonal(LB, axis1=1, axis2=2)), axis=1)
        E = np.linalg.inv(B)
    except np.linalg.LinAlgError:
        sign, logdet = np.linalg.slogdet(B)
        logdet = np.where(sign > 0, logdet, np.nan)
        E = np.full_like(B, np.nan)
        good = sign > 0
        if np.any(good):
            E[good] = np.linalg.inv(B[good])
    E = 0.5 * (E + E.transpose(0, 2, 1))
    return logdet, E


def spd_solves(B: np.ndarray, RHS: np.ndarray):
    """(log|B_n| (n,), B_n^-1 RHS_n) of symmetric positive definite slices; NaN where not PD."""
    try:
        LB = np.linalg.cholesky(B)
        logdet = 2.0 * np.sum(np.log(np.diagonal(LB, axis1=1, axis2=2)), axis=1)
    except np.linalg.LinAlgError:
        sign, logdet = np.linalg.slogdet(B)
        logdet = np.where(sign > 0, logdet, np.nan)
    return logdet, np.linalg.solve(B, RHS)
