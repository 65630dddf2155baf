"""LAPACK's Cholesky and triangular routines, called from compiled code that releases the GIL.

scipy.linalg's wrappers (``lapack.dpotrf``, ``solve_triangular``, ``cho_solve``)
hold the GIL for the whole LAPACK call.  One session's exact GP-LVM at
N = 3,000 spends seconds in them per evaluation, and while it does no other
thread of the process runs Python: the web server stopped answering every
session for up to 3.8 s when such a model was opened.  The same routines of
the same library (scipy's LAPACK, through ``scipy.linalg.cython_lapack``, the
one numba's own linear algebra calls) are called here from ``nogil`` numba
functions.

The calls and layouts are those of scipy's wrappers, so the results are the
same bits: inputs are copied to Fortran order, results come back
Fortran-ordered, and ``info`` is returned for the caller to judge.  The
compiled functions call the routines by symbols registered at import, so they
are cached on disk like the engine's other kernels.
"""
from __future__ import annotations

import llvmlite.binding as llvm
import numpy as np
from numba import types
from numba.extending import get_cython_function_address

from ._jit import STRICT, njit


def _routine(name: str, nargs: int):
    """scipy's LAPACK routine ``name`` (every argument a pointer, Fortran convention), callable from
    compiled code by a symbol of its own, so that the functions calling it are cached on disk."""
    symbol = f"gplvm_explorer_{name}"
    llvm.add_symbol(symbol, get_cython_function_address("scipy.linalg.cython_lapack", name))
    return types.ExternalFunction(symbol, types.void(*([types.voidptr] * nargs)))


_dpotrf = _routine("dpotrf", 5)   # uplo, n, a, lda, info
_dpotri = _routine("dpotri", 5)   # uplo, n, a, lda, info
_dpotrs = _routine("dpotrs", 8)   # uplo, n, nrhs, a, lda, b, ldb, info
_dtrtrs = _routine("dtrtrs", 10)  # uplo, trans, diag, n, nrhs, a, lda, b, ldb, info

_LOWER, _UPPER, _NO, _YES = ord("L"), ord("U"), ord("N"), ord("T")


@njit(**STRICT)
def _fortran_copy(A):
    """A copy of the 2-D A in Fortran order."""
    out = np.empty((A.shape[1], A.shape[0])).T
    out[:, :] = A
    return out


@njit(**STRICT)
def _char(c):
    out = np.empty(1, np.uint8)
    out[0] = c
    return out


@njit(**STRICT)
def _int(i):
    out = np.empty(1, np.int32)
    out[0] = i
    return out


@njit(**STRICT)
def _potrf_lower(A):
    """(L, info): the lower Cholesky factor of the symmetric (n, n) A (its lower triangle read),
    Fortran-ordered with the strict upper triangle zeroed; info > 0: not positive definite."""
    a = _fortran_copy(A)
    n, lda = _int(a.shape[0]), _int(max(1, a.shape[0]))
    info = _int(0)
    _dpotrf(_char(_LOWER).ctypes, n.ctypes, a.ctypes, lda.ctypes, info.ctypes)
    for j in range(a.shape[0]):
        for i in range(j):
            a[i, j] = 0.0
    return a, info[0]


@njit(**STRICT)
def _potri_lower(L):
    """(C, info): the lower triangle of (L L^T)^-1 from the Fortran-ordered lower factor L, in a
    Fortran-ordered copy (its strict upper triangle is L's)."""
    a = _fortran_copy(L)
    n, lda = _int(a.shape[0]), _int(max(1, a.shape[0]))
    info = _int(0)
    _dpotri(_char(_LOWER).ctypes, n.ctypes, a.ctypes, lda.ctypes, info.ctypes)
    return a, info[0]


@njit(**STRICT)
def _potrs_lower(L, B):
    """(X, info): (L L^T) X = B for the Fortran-ordered lower factor L (n, n) and B (n, k)."""
    b = _fortran_copy(B)
    n, lda = _int(L.shape[0]), _int(max(1, L.shape[0]))
    k = _int(b.shape[1])
    info = _int(0)
    _dpotrs(_char(_LOWER).ctypes, n.ctypes, k.ctypes, L.ctypes, lda.ctypes, b.ctypes, lda.ctypes, info.ctypes)
    return b, info[0]


@njit(**STRICT)
def _trtrs(A, B, upper, trans):
    """(X, info): op(A) X = B for the Fortran-ordered triangular A (n, n) and B (n, k);
    info > 0: A[info-1, info-1] is zero."""
    b = _fortran_copy(B)
    n, lda = _int(A.shape[0]), _int(max(1, A.shape[0]))
    k = _int(b.shape[1])
    info = _int(0)
    _dtrtrs(_char(_UPPER if upper else _LOWER).ctypes, _char(_YES if trans else _NO).ctypes, _char(_NO).ctypes,
            n.ctypes, k.ctypes, A.ctypes, lda.ctypes, b.ctypes, lda.ctypes, info.ctypes)
    return b, info[0]


# ---- wrappers: the arguments of scipy's functions ---------------------------------------------


def _as_matrix(B: np.ndarray) -> tuple[np.ndarray, bool]:
    """(B as float64 (n, k), whether B was a vector)."""
    B = np.asarray(B, dtype=np.float64)
    if B.ndim not in (1, 2):
        raise ValueError(f"expected a vector or a matrix of right-hand sides, got shape {B.shape}")
    return (B.reshape(-1, 1), True) if B.ndim == 1 else (B, False)


def potrf_lower(A: np.ndarray) -> tuple[np.ndarray, int]:
    """As ``scipy.linalg.lapack.dpotrf(A, lower=1, clean=1)``: (L Fortran-ordered, info)."""
    return _potrf_lower(np.asarray(A, dtype=np.float64))


def potri_lower(L: np.ndarray) -> tuple[np.ndarray, int]:
    """As ``scipy.linalg.lapack.dpotri(L, lower=1)``: (lower triangle of the inverse, info)."""
    return _potri_lower(np.asarray(L, dtype=np.float64))


def potrs_lower(L: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, int]:
    """As ``scipy.linalg.lapack.dpotrs(L, B, lower=1)``: (X with (L L^T) X = B, info); B (n,) or (n, k)."""
    Bm, vector = _as_matrix(B)
    X, info = _potrs_lower(np.asfortranarray(L, dtype=np.float64), Bm)
    return (X[:, 0] if vector else X), info


def trtrs(L: np.ndarray, B: np.ndarray, lower: bool = True, trans: bool = False) -> tuple[np.ndarray, int]:
    """As ``scipy.linalg.solve_triangular(L, B, lower=lower, trans=trans)``: (X with op(L) X = B, info).

    A C-ordered L is solved as its Fortran-ordered transpose with the other triangle and the
    other op, as scipy does; info > 0: L[info-1, info-1] is zero.
    """
    L = np.asarray(L, dtype=np.float64)
    Bm, vector = _as_matrix(B)
    if L.flags.f_contiguous:
        X, info = _trtrs(L, Bm, not lower, bool(trans))
    else:
        X, info = _trtrs(np.asfortranarray(L.T), Bm, bool(lower), not trans)
    return (X[:, 0] if vector else X), info
