"""Limits on user files and the step from a parsed table to a `Dataset`.

Parsers produce a `RawTable` (values may contain NaN for missing entries);
`finish` reports missing values per column, keeps the rows that have them
(NaN marks a missing cell) and builds the validated `Dataset`. What a model
that cannot use missing values does with them is `prepare`'s job.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .column_stats import blocks_of, column_stats
from .dataset import MIN_ROWS, Dataset
from .images import image_shape_from_names
from ..text import quote
from .errors import DataError

MAX_ABS = 1e150  # larger magnitudes overflow in variances and kernels


@dataclass(frozen=True)
class Limits:
    """Size limits for user files.

    max_bytes   largest accepted file in bytes (default 20 MB, the browser upload path).
    max_rows    most data rows a file may have (subsample larger data first).
    max_cols    most columns a file may have.
    max_values  most numbers (rows x columns) an NPY/NPZ array read into memory may hold;
                also bounds what a compressed NPZ may expand to.  A float ``.npy`` file
                on the server's disk is memory-mapped instead (`npfile.map_npy_table`):
                only max_rows and max_cols bound it.
    upload      True when the bytes came through the browser: a file over
                max_bytes is then refused with a hint to pass it on the
                command line instead.
    """

    max_bytes: int = 20_000_000
    max_rows: int = 100_000
    max_cols: int = 10_000
    max_values: int = 10_000_000
    upload: bool = True

    def check_shape(self, n_rows: int, n_cols: int) -> None:
        self.check_rows_cols(n_rows, n_cols)
        if n_rows * n_cols > self.max_values:
            raise DataError(
                f"The data has {n_rows:,} x {n_cols:,} values, more than the limit of "
                f"{self.max_values:,}. Use fewer rows or columns, or raise Limits.max_values."
            )

    def check_rows_cols(self, n_rows: int, n_cols: int) -> None:
        """The rows and columns against their limits (a memory-mapped file: not ``max_values``)."""
        if n_rows > self.max_rows:
            raise DataError(
                f"The file has {n_rows:,} rows, more than the limit of {self.max_rows:,}. "
                "Use a random subset of the rows, or raise Limits.max_rows."
            )
        if n_cols > self.max_cols:
            raise DataError(
                f"The file has {n_cols:,} columns, more than the limit of {self.max_cols:,}. "
                "Select fewer columns, or raise Limits.max_cols."
            )


@dataclass
class RawTable:
    """A parsed file before validation: NaN marks a missing entry."""

    values: np.ndarray  # (N, D) float64, NaN = missing
    feature_names: list[str]
    labels: np.ndarray | None = None
    label_name: str | None = None
    image_shape: tuple[int, int] | None = None
    warnings: list[str] = field(default_factory=list)
    column_groups: tuple | None = None  # ((name, (feature names...), (h, w) or None), ...)


def _names(names: list[str], limit: int = 8) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def _check_magnitudes(values: np.ndarray, names: list[str], first_row: int = 0) -> None:
    """DataError for infinite values or values too large to square in ``values`` (rows from ``first_row``)."""
    if np.isinf(values).any():
        rows, cols = np.nonzero(np.isinf(values))
        bad = [quote(names[c], 40) for c in sorted(set(cols.tolist()))]
        raise DataError(
            f"Infinite values found in column(s) {_names(bad)} (first at data row {first_row + rows[0] + 1}). "
            "Replace them with finite numbers, or leave the cells empty to mark them as missing."
        )
    with np.errstate(invalid="ignore"):
        huge = np.abs(values) > MAX_ABS
    if huge.any():
        rows, cols = np.nonzero(huge)
        raise DataError(
            f"Values as large as {np.nanmax(np.abs(values)):.3g} in column {quote(names[cols[0]], 40)} "
            f"(data row {first_row + rows[0] + 1}) cannot be modelled: their squares overflow. "
            "Rescale the column (e.g. change its units)."
        )


def finish_mapped(raw: RawTable, *, name: str, description: str, source_path: str) -> Dataset | None:
    """The `Dataset` of a memory-mapped file's table (`npfile.map_npy_table`), its values left in the file.

    The values are checked a block of rows at a time (`column_stats`), as `finish` checks them;
    None when some are missing (NaN): such a table goes through `finish`, in memory.
    """
    values, names = raw.values, list(raw.feature_names)
    stats = column_stats(values)
    if stats.infinite or (stats.scale > MAX_ABS).any():
        for block in blocks_of(values):
            _check_magnitudes(np.asarray(values[block], dtype=np.float64), names, block.start)
    if stats.missing.any():
        return None
    dataset = Dataset(values=values, feature_names=names, image_shape=raw.image_shape, name=name,
                      description=description, warnings=list(raw.warnings), file_columns=values.shape[1],
                      source_path=source_path)
    dataset.__dict__["column_stats"] = stats  # read once: Dataset.column_stats is a cached property
    return dataset


def finish(raw: RawTable, *, name: str, description: str, detect_images: bool = True,
           source_path: str | None = None) -> Dataset:
    """Validate a parsed table and build the `Dataset` (see module doc).

    Missing entries stay NaN in the Dataset and are reported per column;
    columns and rows with no value at all are dropped (with a note).
    Columns named after the pixels of images (`images.image_shape_from_names`)
    make the rows images, their columns put row by row, unless the table has
    an image shape already or ``detect_images`` is False.
    ``source_path`` (the file the table was read from) is recorded as the
    Dataset's when its values are the table as read (nothing dropped or reordered).
    """
    values = np.asarray(raw.values, dtype=np.float64)
    names = list(raw.feature_names)
    warnings = list(raw.warnings)
    labels = raw.labels
    image_shape = raw.image_shape
    if values.ndim != 2:
        raise DataError(f"Expected a table of rows and columns, got shape {values.shape} instead.")
    n, d = values.shape
    if n == 0 or d == 0:
        raise DataError("The file contains no numeric data. Check that it has rows of numbers.")
    _check_magnitudes(values, names)
    missing = np.isnan(values)
    if missing.all():
        raise DataError(
            "Every value is missing (empty or NaN). The file has no numbers to model; "
            "check the delimiter and that the columns hold numbers."
        )
    empty_cols = np.nonzero(missing.all(axis=0))[0]
    if len(empty_cols):
        dropped = [quote(names[c], 40) for c in empty_cols]
        keep = ~missing.all(axis=0)
        values, missing = values[:, keep], missing[:, keep]
        names = [s for s, k in zip(names, keep) if k]
        source_path = None
        warnings.append(f"Dropped {len(dropped)} column(s) with no values: {_names(dropped)}")
        if image_shape is not None:
            image_shape = None
            warnings.append("Images disabled: columns were removed, so the image shape no longer fits.")
    if image_shape is None and detect_images:
        found = image_shape_from_names(names)
        if found is not None:
            image_shape, order = found
            values, missing = values[:, order], missing[:, order]
            names = [names[j] for j in order]
            source_path = None
    empty_rows = missing.all(axis=1)
    if empty_rows.any():
        n_empty = int(empty_rows.sum())
        first = int(np.nonzero(empty_rows)[0][0]) + 1
        values, missing = values[~empty_rows], missing[~empty_rows]
        source_path = None
        if labels is not None:
            labels = np.asarray(labels)[~empty_rows]
        warnings.append(
            f"Dropped {n_empty} row(s) with no values at all (first: data row {first})"
        )
        if values.shape[0] < MIN_ROWS:
            raise DataError(
                f"Only {values.shape[0]} row(s) have any values; at least {MIN_ROWS} are needed."
            )
    if missing.any():
        counts = missing.sum(axis=0)
        per_col = [f"{counts[j]} in {quote(names[j], 40)}" for j in np.nonzero(counts)[0]]
        n_bad = int(missing.any(axis=1).sum())
        warnings.append(
            f"Missing values: {int(counts.sum())} cell(s) ({_names(per_col, 6)}) in {n_bad} "
            "row(s); the rows are kept"
        )
    return Dataset(
        values=values,
        labels=labels,
        feature_names=names,
        image_shape=image_shape,
        name=name,
        description=description,
        warnings=warnings,
        label_name=raw.label_name,
        column_groups=raw.column_groups,
        file_columns=values.shape[1],
        source_path=source_path,
    )
