"""Validation shared by the engine's public entry points: one array check, one number check.

Messages follow one form, "Expected <what>, got <value> instead." plus the fix
where there is one; the exception type says who is at fault (ShapeError for
arrays, ConfigurationError for settings unless the caller names another).
"""
from __future__ import annotations

import numbers

import numpy as np

from .errors import ConfigurationError, ShapeError


# ---- numbers -----------------------------------------------------------------------------


def integer(value, name: str, minimum: int = 1, error=ConfigurationError) -> int:
    """``value`` as an int >= ``minimum`` (a bool is not an integer), else ``error``.

    The message says "a positive integer" for minimum 1 and "a non-negative
    integer" for minimum 0.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        what = {1: "a positive integer", 0: "a non-negative integer"}.get(minimum, f"an integer >= {minimum}")
        raise error(f"Expected {name} as {what}, got {value!r} instead.")
    return int(value)


def positive_number(value, name: str, error=ConfigurationError) -> float:
    """``value`` as a finite float > 0 (a bool is not a number), else ``error``."""
    if (isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(float(value))
            or not value > 0):
        raise error(f"Expected {name} > 0, got {value!r} instead.")
    return float(value)


def fraction(value, name: str, error=ConfigurationError) -> float:
    """``value`` as a float in (0, 1], else ``error`` (step sizes of natural-gradient updates)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 < float(value) <= 1.0:
        raise error(f"Expected {name} in (0, 1], got {value!r} instead.")
    return float(value)


# ---- arrays ------------------------------------------------------------------------------


def real_array(A, name: str = "Y") -> np.ndarray:
    """``A`` as a numpy array of real numbers (integers or floats, not bools), unconverted.

    A numpy array (a memmap too) is returned as it is, never copied or loaded.
    """
    arr = A if isinstance(A, np.ndarray) else np.asarray(A)
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise ShapeError(f"Expected {name} to be a real numeric array, got dtype {arr.dtype} instead.")
    return arr


def real_matrix(A, name: str = "Y", columns: str = "D", allow_nan: bool = False, load: bool = True) -> np.ndarray:
    """``A`` as a finite, C-contiguous float64 (N, columns) array with N >= 2, or ShapeError.

    ``name`` and ``columns`` only shape the messages ("X", "Q" for latents).
    With ``allow_nan``, NaN entries (missing values) pass; infinities never do.
    With ``load=False`` only the dtype and the shape are checked and ``A`` is
    returned as given (a memmap larger than memory stays on disk; its values
    are checked by whoever reads them, chunk by chunk).
    """
    arr = real_array(A, name)
    if arr.ndim != 2:
        raise ShapeError(f"Expected {name} to be 2-D with shape (N, {columns}), got shape {arr.shape} instead. "
                         f"Reshape a single column with {name}.reshape(-1, 1).")
    if arr.shape[0] < 2 or arr.shape[1] < 1:
        raise ShapeError(f"Expected {name} with shape (N, {columns}), N >= 2, {columns} >= 1 (at least 2 rows "
                         f"and 1 column), got shape {arr.shape} instead.")
    if not load:
        return arr
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if allow_nan:
        if np.isinf(arr).any():
            raise ShapeError(f"Expected {name} to be finite or NaN (missing), got infinite values instead.")
        return arr
    check_finite_rows(arr, name)
    return arr


#: What to do about NaN in Y, for the models that cannot train with missing values.
MISSING_ADVICE = ("Remove or impute them first, or use BayesianGPLVM or SparseGPLVM, which train with NaN as "
                  "missing values.")


def check_finite_rows(block: np.ndarray, name: str = "Y", first_row: int | None = None,
                      advice: str = MISSING_ADVICE) -> None:
    """ShapeError unless every entry of ``block`` is finite; ``first_row``: where a chunk of a larger Y starts."""
    finite = np.isfinite(block)
    if finite.all():
        return
    bad = int(finite.size - np.count_nonzero(finite))
    where = "" if first_row is None else f" in rows {first_row}..{first_row + block.shape[0] - 1}"
    raise ShapeError(f"Expected {name} to be finite, got {bad} NaN or infinite value(s){where} instead. {advice}")


def latent_points(X, Q: int, name: str = "Xnew") -> np.ndarray:
    """Points in a Q-dimensional latent space as a finite C-contiguous float64 (n, Q) array; (Q,) is one point."""
    X = np.atleast_2d(np.asarray(real_array(X, name), dtype=float))
    if X.ndim != 2 or X.shape[1] != Q:
        raise ShapeError(f"Expected {name} with {Q} columns, got shape {X.shape} instead.")
    if not np.all(np.isfinite(X)):
        raise ShapeError(f"{name} contains NaN or infinite values.")
    return np.ascontiguousarray(X)
