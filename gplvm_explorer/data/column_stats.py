"""Per-column statistics of a data matrix, read in blocks of rows (never a whole-matrix temporary).

One `column_stats` pass gives what loading, preparing and the units note ask
of the columns: the largest magnitude, the mean and spread of the observed
values, the missing cells and whether any value is infinite.  The matrix is
read a block of rows at a time (`VALUES_PER_BLOCK` values), so a memory-mapped
file of a million rows costs a few MB of temporaries, not copies of itself.

Means and spreads are computed on each column divided by its own largest
magnitude and scaled back, so that columns of tiny (1e-300) or huge
magnitude neither underflow nor overflow when squared; the blocks' means and
sums of squared deviations are merged exactly (Chan, Golub & LeVeque's
pairwise update), so the result is numpy's two-pass ``nanmean`` /
``nanstd`` up to rounding.
"""

from __future__ import annotations

import warnings as _warnings
from dataclasses import dataclass

import numpy as np

__all__ = ["VALUES_PER_BLOCK", "ColumnStats", "block_rows", "blocks_of", "column_stats", "row_blocks"]

#: Values read at a time (1 MB of float64): 4,369 rows of 30 columns.
VALUES_PER_BLOCK = 131_072


def block_rows(d: int) -> int:
    """Rows per block of a matrix with ``d`` columns (`VALUES_PER_BLOCK` values, at least 64 rows)."""
    return max(64, VALUES_PER_BLOCK // max(1, int(d)))


def row_blocks(n: int, rows: int):
    """``slice`` objects covering ``range(n)`` in blocks of ``rows``."""
    for start in range(0, n, rows):
        yield slice(start, min(n, start + rows))


def blocks_of(values):
    """``slice`` objects covering the rows of the (N, D) ``values`` in blocks of `block_rows`."""
    n, d = values.shape
    return row_blocks(n, block_rows(d))


@dataclass(frozen=True)
class ColumnStats:
    """Statistics of the observed (non-NaN) values of each column of an (N, D) matrix.

    scale     (D,) largest absolute observed value (0 for an all-zero or all-missing column)
    mean      (D,) mean of the observed values (0 for an all-missing column)
    std       (D,) their standard deviation (ddof 0; 0 for an all-missing column)
    unit_std  (D,) the standard deviation of the column divided by its ``scale`` (constancy is
              judged on it: it is relative to the column's own magnitude)
    missing   (D,) int64 missing (NaN) cells
    infinite  True when some value is +-inf
    """

    scale: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    unit_std: np.ndarray
    missing: np.ndarray
    infinite: bool

    def take(self, columns) -> "ColumnStats":
        """The statistics of the columns ``columns`` (a boolean mask or indices)."""
        return ColumnStats(self.scale[columns], self.mean[columns], self.std[columns],
                           self.unit_std[columns], self.missing[columns], self.infinite)


def column_stats(values, rows: int | None = None) -> ColumnStats:
    """`ColumnStats` of ``values`` (N, D), read ``rows`` rows at a time (default: `block_rows`).

    ``values`` may be any array-like indexable by row slices (e.g. a read-only
    ``np.memmap`` in float32); each block is converted to float64 on its own.
    """
    n, d = values.shape
    rows = block_rows(d) if rows is None else int(rows)
    scale = np.zeros(d)
    missing = np.zeros(d, dtype=np.int64)
    infinite = False
    with np.errstate(invalid="ignore"), _warnings.catch_warnings():
        _warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN blocks
        for block in row_blocks(n, rows):
            part = np.asarray(values[block], dtype=np.float64)
            nan = np.isnan(part)
            missing += nan.sum(axis=0)
            mag = np.abs(part)
            if not infinite and np.isinf(mag).any():
                infinite = True
            np.fmax(scale, np.nanmax(mag, axis=0) if part.shape[0] else 0.0, out=scale)
        scale = np.nan_to_num(scale, nan=0.0, posinf=np.inf)
        safe = np.where((scale > 0) & np.isfinite(scale), scale, 1.0)
        count = np.zeros(d)
        unit_mean = np.zeros(d)
        m2 = np.zeros(d)
        for block in row_blocks(n, rows):
            unit = np.asarray(values[block], dtype=np.float64) / safe
            k = (~np.isnan(unit)).sum(axis=0).astype(np.float64)
            if not k.any():
                continue
            b_mean = np.nan_to_num(np.nansum(unit, axis=0) / np.where(k > 0, k, 1.0))
            b_m2 = np.nansum((unit - b_mean) ** 2, axis=0)
            total = count + k
            has = total > 0
            delta = b_mean - unit_mean
            w = np.divide(k, total, out=np.zeros(d), where=has)
            unit_mean = unit_mean + delta * w
            m2 = m2 + b_m2 + delta ** 2 * count * w
            count = total
    unit_std = np.sqrt(np.divide(m2, count, out=np.zeros(d), where=count > 0))
    unit_mean = np.where(count > 0, unit_mean, 0.0)
    return ColumnStats(scale=scale, mean=unit_mean * safe, std=unit_std * safe, unit_std=unit_std,
                       missing=missing, infinite=bool(infinite))
