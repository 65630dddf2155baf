"""`Dataset`: a validated data matrix plus the metadata the app shows."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

import numpy as np

from ..text import plain, quote
from .column_stats import ColumnStats, column_stats
from .errors import DataError

MIN_ROWS = 3
MIN_COLS = 2


def normalize_labels(labels, n: int) -> np.ndarray | None:
    """Return labels as a length-``n`` int64, float64 or str array (or None).

    Integral floats become int64; non-integral floats stay float64 (a
    continuous label, e.g. a measured quantity); bytes are decoded.
    """
    if labels is None:
        return None
    arr = np.asarray(labels)
    if arr.dtype.hasobject:
        if all(isinstance(v, str) for v in arr.ravel()):
            arr = arr.astype(str)
        else:
            raise DataError("Labels must be numbers or strings, got Python objects instead.")
    if arr.ndim != 1 or arr.shape[0] != n:
        raise DataError(
            f"Expected {n} labels (one per row), got an array of shape {arr.shape} instead."
        )
    kind = arr.dtype.kind
    if kind == "b":
        return arr.astype(np.int64)
    if kind in "iu":
        return arr.astype(np.int64)
    if kind == "f":
        if not np.all(np.isfinite(arr)):
            raise DataError("Labels contain NaN or infinite values; give every row a label.")
        if np.all(arr == np.round(arr)) and np.all(np.abs(arr) < 2**53):
            return arr.astype(np.int64)
        return arr.astype(np.float64)
    if kind == "S":
        return np.char.decode(arr, "utf-8", errors="replace").astype(str)
    if kind == "U":
        return arr
    raise DataError(f"Labels must be numbers or strings, got dtype {arr.dtype} instead.")


@dataclass(frozen=True, eq=False)
class Dataset:
    """A data matrix ready for the engine, with labels and display metadata.

    values        (N, D) float64, C-contiguous; N >= 3, D >= 2. Entries are
                  finite or NaN, and NaN means *missing* (`observed` is the
                  mask of the others). A numpy masked array is accepted: its
                  masked entries become NaN. Models that cannot handle
                  missing values get a complete copy from
                  ``prepare(ds, missing="drop-rows" | "impute-mean")``.
    labels        (N,) int64, str or float64 (continuous) array, or None.
    feature_names D column names.
    image_shape   (h, w) with h * w == D when each row is an image stored
                  row-major (row 0 at the top), else None.
    warnings      plain-text notes about what loading/preparing changed
                  (user strings in them are quoted, not escaped: escape them
                  where they are rendered, see gplvm_explorer.text).
    mean, scale   set by standardisation: original = values * scale + mean.
    imputed       (N, D) bool mask of the entries `prepare` filled in
                  (missing="impute-mean"), else None.
    file_columns  the number of feature columns read from the file, before
                  constant columns were dropped (the image shapes a user
                  may pick factor it), or None.
    column_groups ((group name, (feature names...), (h, w) or None), ...):
                  named groups of columns, e.g. the views of a multi-view
                  file (NPZ arrays view_0, view_1, ...), with an image shape
                  when a group's columns are an image; else None. Groups
                  refer to columns by name, so dropped columns simply leave
                  them (see `groups_present`).
    source_path   the file on the server's disk that ``values`` were read from
                  as they stand in it (same rows, columns and numbers: loaded
                  from a path, not standardised, filled in, subsampled or
                  trimmed), else None. Recorded at load; `replace` with other
                  values drops it. A minibatch model may then read the file
                  itself, memory-mapped (`data.mapped`): ``values`` is then
                  that read-only ``np.memmap`` (in the file's dtype), kept
                  as it is rather than copied into memory (its numbers were
                  checked when the file was read; only its shape is checked).
    """

    values: np.ndarray
    labels: np.ndarray | None = None
    feature_names: list[str] | None = None
    image_shape: tuple[int, int] | None = None
    name: str = "data"
    description: str = ""
    warnings: list[str] = field(default_factory=list)
    label_name: str | None = None
    mean: np.ndarray | None = None
    scale: np.ndarray | None = None
    imputed: np.ndarray | None = None
    column_groups: tuple | None = None
    file_columns: int | None = None
    source_path: str | None = None

    def __post_init__(self):
        values = self.values
        if isinstance(values, np.memmap) and not values.flags.writeable and self.source_path is not None:
            # the file itself, mapped read-only (data.mapped): its numbers were checked when it was
            # read; a scan here would read the whole file at every Train click
            self._check_shape(values)
            self._check_metadata(values.shape)
            return
        if np.ma.isMaskedArray(values):
            mask = np.ma.getmaskarray(values)
            values = np.asarray(np.ma.getdata(values))
            if mask.any():
                if values.dtype.kind not in "biuf" or values.dtype.hasobject:
                    raise DataError(f"Expected numeric values, got dtype {values.dtype} instead.")
                values = values.astype(np.float64, copy=True)
                values[mask] = np.nan
        values = np.asarray(values)
        self._check_shape(values)
        values = np.ascontiguousarray(values, dtype=np.float64)
        self._check_values(values)
        object.__setattr__(self, "values", values)
        self._check_metadata(values.shape)

    @staticmethod
    def _check_values(values) -> None:
        if np.isinf(values).any():
            raise DataError(
                "Values must be finite: found infinite entries. Replace them with finite "
                "numbers, or with NaN to mark them as missing."
            )
        if np.isnan(values).all():
            raise DataError("Every value is missing (NaN); there are no numbers to model.")

    @staticmethod
    def _check_shape(values) -> None:
        if values.dtype.hasobject or values.dtype.kind not in "biuf":
            raise DataError(f"Expected numeric values, got dtype {values.dtype} instead.")
        if values.ndim != 2:
            raise DataError(f"Expected a 2-D (N, D) array, got shape {values.shape} instead.")
        n, d = values.shape
        if n < MIN_ROWS:
            raise DataError(
                f"Need at least {MIN_ROWS} rows (data points), got {n}. "
                "Add more rows to the data."
            )
        if d < MIN_COLS:
            raise DataError(
                f"Need at least {MIN_COLS} numeric columns (features), got {d}. "
                "A latent variable model reduces several features; a single column has nothing to reduce."
            )

    def _check_metadata(self, shape) -> None:
        n, d = shape
        object.__setattr__(self, "labels", normalize_labels(self.labels, n))
        names = self.feature_names
        if names is None:
            names = [f"x{j + 1}" for j in range(d)]
        names = [str(s) for s in names]
        if len(names) != d:
            raise DataError(f"Expected {d} feature names, got {len(names)} instead.")
        object.__setattr__(self, "feature_names", names)
        if self.image_shape is not None:
            shape = tuple(int(s) for s in self.image_shape)
            if len(shape) != 2 or shape[0] < 1 or shape[1] < 1 or shape[0] * shape[1] != d:
                raise DataError(
                    f"Image shape {tuple(self.image_shape)} does not match the {d} columns; "
                    "height x width must equal the number of columns."
                )
            object.__setattr__(self, "image_shape", shape)
        object.__setattr__(self, "warnings", [str(w) for w in self.warnings])
        if self.column_groups is not None:
            groups = []
            for group in self.column_groups:
                gname, cols, shape = group if len(group) == 3 else (*group, None)
                shape = None if shape is None else (int(shape[0]), int(shape[1]))
                groups.append((str(gname), tuple(str(c) for c in cols), shape))
            object.__setattr__(self, "column_groups", tuple(groups) or None)
        if self.imputed is not None:
            imp = np.asarray(self.imputed, dtype=bool)
            if imp.shape != (n, d):
                raise DataError(f"Expected an imputed mask of shape {(n, d)}, got {imp.shape} instead.")
            object.__setattr__(self, "imputed", imp)
        for attr in ("mean", "scale"):
            vec = getattr(self, attr)
            if vec is not None:
                vec = np.asarray(vec, dtype=np.float64)
                if vec.shape != (d,):
                    raise DataError(f"Expected {attr} of shape ({d},), got {vec.shape} instead.")
                object.__setattr__(self, attr, vec)

    def groups_present(self) -> list[tuple[str, list[int], tuple | None]]:
        """``column_groups`` as (name, column indices, image shape) for the columns still present.

        A group that lost columns loses its image shape; empty groups are left out.
        """
        if not self.column_groups:
            return []
        where = {name: j for j, name in enumerate(self.feature_names)}
        out = []
        for gname, cols, shape in self.column_groups:
            idx = [where[c] for c in cols if c in where]
            if idx:
                out.append((gname, idx, shape if len(idx) == len(cols) else None))
        return out

    @property
    def n(self) -> int:
        return self.values.shape[0]

    @property
    def d(self) -> int:
        return self.values.shape[1]

    @property
    def shape(self) -> tuple[int, int]:
        return self.values.shape

    @property
    def observed(self) -> np.ndarray:
        """(N, D) bool: True where a value is present (the engine's ``observed=``)."""
        return ~np.isnan(self.values)

    @property
    def missing_mask(self) -> np.ndarray:
        """(N, D) bool: True where a value is missing (NaN in ``values``)."""
        return np.isnan(self.values)

    @functools.cached_property
    def column_stats(self) -> ColumnStats:
        """Per-column statistics of ``values`` (`column_stats`: read once, in blocks of rows)."""
        return column_stats(self.values)

    @property
    def has_missing(self) -> bool:
        return bool(self.column_stats.missing.any())

    @property
    def n_missing(self) -> int:
        """Number of missing cells."""
        return int(self.column_stats.missing.sum())

    @property
    def missing_counts(self) -> np.ndarray:
        """(D,) int64: missing cells per column."""
        return self.column_stats.missing.copy()

    def missing_by_column(self) -> list[tuple[str, int]]:
        """(feature name, missing cells) for the columns that have any."""
        counts = self.missing_counts
        return [(self.feature_names[j], int(counts[j])) for j in np.nonzero(counts)[0]]

    def missing_summary(self, limit: int = 6) -> str:
        """Plain text such as "12 cells missing (3 in 'a', 9 in 'b') in 10 rows", or ""."""
        if not self.has_missing:
            return ""
        per = [f"{c} in {quote(name, 40)}" for name, c in self.missing_by_column()]
        shown = ", ".join(per[:limit]) + (f", ... ({len(per)} columns)" if len(per) > limit else "")
        rows = int(np.isnan(self.values).any(axis=1).sum())
        return f"{self.n_missing} cell(s) missing ({shown}) in {rows} row(s)"

    @property
    def label_classes(self) -> np.ndarray | None:
        """Sorted distinct labels, or None when there are no labels."""
        return None if self.labels is None else np.unique(self.labels)

    @property
    def labels_continuous(self) -> bool:
        """True when the labels are non-integral numbers (colour on a scale)."""
        return self.labels is not None and self.labels.dtype.kind == "f"

    def unstandardize(self, Y: np.ndarray) -> np.ndarray:
        """Map rows in the units of ``values`` back to the original units."""
        Y = np.asarray(Y, dtype=np.float64)
        if self.scale is not None:
            Y = Y * self.scale
        if self.mean is not None:
            Y = Y + self.mean
        return Y

    def replace(self, **changes) -> "Dataset":
        """A copy with ``changes``; new ``values`` are no longer the file's (``source_path`` goes)."""
        if "values" in changes and changes["values"] is not self.values:
            changes.setdefault("source_path", None)
        return dataclasses.replace(self, **changes)

    def copy(self) -> "Dataset":
        """A deep copy with writable arrays."""
        return dataclasses.replace(
            self,
            values=self.values.copy(),
            labels=None if self.labels is None else self.labels.copy(),
            feature_names=list(self.feature_names),
            warnings=list(self.warnings),
            mean=None if self.mean is None else self.mean.copy(),
            scale=None if self.scale is None else self.scale.copy(),
            imputed=None if self.imputed is None else self.imputed.copy(),
        )

    def summary(self) -> str:
        """One line of plain text (user strings quoted, not escaped)."""
        parts = [f"{plain(self.name, 80)}: N={self.n} rows, D={self.d} features"]
        if self.labels is None:
            parts.append("no labels")
        else:
            what = f"labels {quote(self.label_name, 40)}" if self.label_name else "labels"
            if self.labels_continuous:
                parts.append(
                    f"{what}: continuous, {self.labels.min():.4g} to {self.labels.max():.4g}"
                )
            else:
                classes = self.label_classes
                shown = ", ".join(plain(c, 30) for c in classes[:10])
                more = ", ..." if len(classes) > 10 else ""
                parts.append(f"{what}: {len(classes)} classes ({shown}{more})")
        if self.image_shape is not None:
            parts.append(f"images {self.image_shape[0]}x{self.image_shape[1]}")
        if self.has_missing:
            parts.append(self.missing_summary())
        if self.imputed is not None and self.imputed.any():
            parts.append(f"{int(self.imputed.sum())} missing cell(s) filled with column means")
        if self.scale is not None:
            parts.append("standardised")
        return "; ".join(parts)


@dataclass(frozen=True)
class SampleInfo:
    """What `samples()` lists: enough to show a choice without loading."""

    name: str
    title: str
    description: str
    shape: tuple[int, int]
    image_shape: tuple[int, int] | None = None
    label_name: str | None = None
    # every column in one unit (pixels, marker coordinates): never standardised by default (data.units)
    shared_units: bool = True
    model: str | None = None  # the catalog key of the model the sample is made for (the page selects it)
