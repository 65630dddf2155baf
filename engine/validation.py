"""Validation shared by the engine's public entry points."""
from __future__ import annotations

import numpy as np

from .errors import ShapeError


def real_matrix(A, name: str = "Y", columns: str = "D", allow_nan: bool = False) -> np.ndarray:
    """``A`` as a finite, C-contiguous float64 (N, columns) array with N >= 2, or ShapeError.

    ``name`` and ``columns`` only shape the messages ("X", "Q" for latents).
    With ``allow_nan``, NaN entries (missing values) pass; infinities never do.
    """
    arr = np.asarray(A)
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise ShapeError(f"Expected {name} to be a real numeric array, got dtype {arr.dtype} instead.")
    if arr.ndim != 2:
        raise ShapeError(f"Expected {name} to be 2-D with shape (N, {columns}), got shape {arr.shape} instead. "
                         f"Reshape a single column with {name}.reshape(-1, 1).")
    if arr.shape[0] < 2 or arr.shape[1] < 1:
        raise ShapeError(f"Expected {name} with shape (N, {columns}), N >= 2, {columns} >= 1 (at least 2 rows "
                         f"and 1 column), got shape {arr.shape} instead.")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if allow_nan:
        if np.isinf(arr).any():
            raise ShapeError(f"Expected {name} to be finite or NaN (missing), got infinite values instead.")
        return arr
    finite = np.isfinite(arr)
    if not finite.all():
        bad = int(finite.size - np.count_nonzero(finite))
        raise ShapeError(f"Expected {name} to be finite, got {bad} NaN or infinite value(s) instead. "
                         "Remove or impute them first, or use BayesianGPLVM or SparseGPLVM, which "
                         "train with NaN as missing values.")
    return arr
