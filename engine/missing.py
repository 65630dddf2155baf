"""Missing outputs: the observation mask and the column groups the bound is summed over.

With entries of Y missing, the collapsed bound is summed over output
dimensions d, each on the rows where d is observed (sharing Kmm, the kernel
and beta), minus the KL once -- the definition of GPy's
``BayesianGPLVMMiniBatch(missing_data=True)``.  Columns observed on the same
rows share one bound with several outputs, so the columns are grouped by
their observation pattern.  Each group needs the psi statistics summed over
its observed rows; they come from the full sums minus the group's missing
rows, or from its observed rows directly, whichever set is smaller.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .errors import ShapeError


class ObservationGroup(NamedTuple):
    """Columns ``cols`` (D_g,) observed on the rows ``rows`` (N,) bool.

    ``subset`` (int indices) are the rows whose psi statistics are computed for
    the group: its missing rows when ``complement`` (stats = full - subset),
    else its observed rows (stats = subset).
    """

    cols: np.ndarray
    rows: np.ndarray
    subset: np.ndarray
    complement: bool


def observation_mask(Y, observed=None):
    """(Y with missing entries set to 0, observed mask (N, D) or None when everything is observed).

    NaN entries of ``Y`` are missing; ``observed`` (a boolean array of Y's shape)
    marks further entries as missing.  Infinite observed values, a column or a
    row with nothing observed are :class:`ShapeError`.
    """
    Y = np.array(Y, dtype=np.float64, copy=True)
    mask = ~np.isnan(Y)
    if observed is not None:
        observed = np.asarray(observed)
        if observed.dtype != bool or observed.shape != Y.shape:
            raise ShapeError(f"Expected observed as a boolean mask of shape {Y.shape}, "
                             f"got {observed.dtype} of shape {observed.shape} instead.")
        mask &= observed
    if not np.all(np.isfinite(Y[mask])):
        raise ShapeError("Expected finite observed values, got infinite entries instead "
                         "(mark missing entries with NaN or the observed mask).")
    empty_cols = np.flatnonzero(~mask.any(axis=0))
    if empty_cols.size:
        raise ShapeError(f"Column(s) {empty_cols[:10].tolist()} have no observed entry; drop them first.")
    empty_rows = np.flatnonzero(~mask.any(axis=1))
    if empty_rows.size:
        raise ShapeError(f"Row(s) {empty_rows[:10].tolist()} have no observed entry; drop them first.")
    Y[~mask] = 0.0
    return Y, (None if mask.all() else mask)


def observation_groups(mask: np.ndarray) -> list[ObservationGroup]:
    """Group the columns of the (N, D) observed mask by identical observed-row sets.

    Groups come in order of their first column, so the summation order is fixed.
    """
    N, D = mask.shape
    keys = np.packbits(mask, axis=0).T  # (D, ceil(N/8)): one byte string per column
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    groups = []
    for g in np.argsort(first, kind="stable"):
        cols = np.flatnonzero(inverse.ravel() == g)
        rows = mask[:, cols[0]].copy()
        n_missing = int(N - rows.sum())
        complement = n_missing <= N - n_missing
        subset = np.flatnonzero(~rows if complement else rows)
        groups.append(ObservationGroup(cols, rows, subset, complement))
    return groups
