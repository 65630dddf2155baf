"""Tables that are not text files: pandas DataFrames, NumPy arrays and Parquet.

    from_frame(df, label_column=None, *, name="DataFrame", ...) -> Dataset
    from_array(values, labels=None, *, name="array", ...) -> Dataset
    parse_parquet(data, *, label_column=None, limits) -> RawTable
    parquet_columns(data) -> list[str]
    label_candidates(df) -> list[str]

Numeric and boolean columns become features (nulls become NaN, i.e.
missing); a chosen label column is split off; category / dictionary-typed
columns are the natural label columns (`label_candidates`); other
non-numeric columns are excluded with a warning, as for CSV files.

Parquet is read with pyarrow (optional: ``pip install gplvm-explorer[parquet]``)
column by column into NumPy, without pandas metadata or Python objects, so
nothing in the file is ever unpickled. Every failure raises `DataError`.
"""

from __future__ import annotations

import io

import numpy as np

from ..text import plain, quote
from .errors import DataError
from .textfile import _parse_labels, _resolve_label
from .validation import Limits, RawTable, finish

PARQUET_MAGIC = b"PAR1"
PARQUET_FORMATS = ("parquet", "pq")


# ---- a column-wise table -> RawTable ------------------------------------------------------------
def _raw_table(names, numeric, label_cells, *, label_column, limits: Limits, what: str) -> RawTable:
    """Columns -> RawTable.

    ``numeric[j]`` is a float64 array (NaN = missing) or None for a
    non-numeric column; ``label_cells(j)`` gives column j as a list of
    strings ("" for a missing cell), read only for the label column.
    """
    names = [str(s) for s in names]
    if not names:
        raise DataError(f"{what} has no columns.")
    n_rows = len(next((c for c in numeric if c is not None), label_cells(0)))
    limits.check_shape(n_rows, len(names))
    if n_rows == 0:
        raise DataError(f"{what} has no rows. Give it rows of numbers.")
    label_idx = None if label_column is None else _resolve_label(label_column, names)
    labels, warnings = None, []
    if label_idx is not None:
        labels, label_warnings = _parse_labels(label_cells(label_idx))
        warnings.extend(label_warnings)
    keep, keep_names = [], []
    for j, (name, col) in enumerate(zip(names, numeric)):
        if j == label_idx:
            continue
        if col is None:
            hint = " (use it as the label column?)" if label_idx is None else ""
            warnings.append(f"Excluded non-numeric column {quote(name, 40)}{hint}")
            continue
        keep.append(col)
        keep_names.append(name)
    if not keep:
        raise DataError(f"No numeric columns: {what[:1].lower()}{what[1:]} has no column of numbers to model.")
    if len(keep) == 1:
        raise DataError(
            f"Only one numeric column ({quote(keep_names[0], 40)}) was found; a latent variable model "
            "needs at least 2 features."
        )
    return RawTable(values=np.column_stack(keep), feature_names=keep_names, labels=labels,
                    label_name=None if label_idx is None else names[label_idx], warnings=warnings)


def _finish(raw: RawTable, name: str, description: str, prepare_options: dict):
    from .prepare import prepare

    ds = finish(raw, name=plain(name, 120), description=description)
    return prepare(ds, **prepare_options)


# ---- pandas ---------------------------------------------------------------------------------------
def _is_frame(obj) -> bool:
    return type(obj).__module__.startswith("pandas") and hasattr(obj, "columns") and hasattr(obj, "dtypes")


def label_candidates(df) -> list[str]:
    """Columns of a DataFrame that hold categories (category dtype first, then text / boolean)."""
    import pandas as pd

    cats = [str(c) for c in df.columns if isinstance(df[c].dtype, pd.CategoricalDtype)]
    other = [str(c) for c in df.columns
             if str(c) not in cats and not pd.api.types.is_numeric_dtype(df[c].dtype)]
    return cats + other


def _frame_columns(df):
    import pandas as pd

    names, numeric = [], []
    for j in range(df.shape[1]):
        s = df.iloc[:, j]
        names.append(str(df.columns[j]))
        dt = s.dtype
        if isinstance(dt, pd.CategoricalDtype) or not pd.api.types.is_numeric_dtype(dt):
            numeric.append(None)
            continue
        try:
            numeric.append(s.astype("float64").to_numpy(dtype=np.float64, na_value=np.nan))
        except (TypeError, ValueError):
            numeric.append(None)

    def cells(j):
        s = df.iloc[:, j]
        return ["" if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA else str(v)
                for v in s.tolist()]

    return names, numeric, cells


def from_frame(df, label_column=None, *, name: str = "DataFrame", limits: Limits | None = None,
               **prepare_options):
    """A pandas DataFrame -> `Dataset` (label column by name or index; see module doc)."""
    if not _is_frame(df):
        raise DataError(f"Expected a pandas DataFrame, got {type(df).__name__} instead.")
    if df.columns.duplicated().any():
        dup = sorted({str(c) for c in df.columns[df.columns.duplicated()]})
        raise DataError("The DataFrame has duplicate column names: " + ", ".join(quote(s, 40) for s in dup[:8]))
    names, numeric, cells = _frame_columns(df)
    raw = _raw_table(names, numeric, cells, label_column=label_column,
                     limits=limits or Limits(upload=False), what="The DataFrame")
    return _finish(raw, name, f"A pandas DataFrame ({df.shape[0]} rows, {df.shape[1]} columns)", prepare_options)


def from_array(values, labels=None, *, name: str = "array", limits: Limits | None = None,
               image_shape: tuple[int, int] | None = None, **prepare_options):
    """A 2-D numeric array (rows = points) -> `Dataset`; ``labels`` one per row; ``image_shape`` (h, w)
    when each row is an image stored row by row."""
    from .dataset import normalize_labels

    arr = np.asarray(values)
    if arr.dtype.kind not in "biuf":
        raise DataError(f"Expected an array of numbers, got dtype {arr.dtype} instead.")
    if arr.ndim == 1:
        raise DataError(f"Expected a 2-D array (rows x features), got shape {arr.shape}. "
                        "Use values.reshape(-1, 1) for a single feature, or pass several features.")
    if arr.ndim != 2:
        raise DataError(f"Expected a 2-D array (rows x features), got shape {arr.shape} instead.")
    limits = limits or Limits(upload=False)
    limits.check_shape(*arr.shape)
    n, d = arr.shape
    if d < 2:
        raise DataError("The array has one feature; a latent variable model needs at least 2.")
    raw = RawTable(values=arr.astype(np.float64), feature_names=[f"x{j + 1}" for j in range(d)],
                   labels=normalize_labels(labels, n) if labels is not None else None,
                   label_name="label" if labels is not None else None,
                   image_shape=None if image_shape is None else tuple(image_shape))
    return _finish(raw, name, f"A NumPy array ({n} x {d})", prepare_options)


# ---- Parquet ----------------------------------------------------------------------------------------
def _pyarrow():
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError(
            "Reading Parquet files needs pyarrow: pip install 'gplvm-explorer[parquet]' (or pip install pyarrow)."
        ) from None
    return pa, pq


def _read_parquet(data: bytes, columns=None):
    pa, pq = _pyarrow()
    if not data.startswith(PARQUET_MAGIC):
        raise DataError("This is not a Parquet file (it does not start with PAR1).")
    try:
        return pq.read_table(io.BytesIO(data), columns=columns, use_pandas_metadata=False), pa
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise DataError(f"Cannot read the Parquet file: {plain(str(exc), 200)}") from None


def parquet_columns(data: bytes) -> list[str]:
    """Column names of a Parquet file, from its schema only."""
    _, pq = _pyarrow()
    pa = __import__("pyarrow")
    try:
        schema = pq.read_schema(io.BytesIO(data))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise DataError(f"Cannot read the Parquet file: {plain(str(exc), 200)}") from None
    return [str(n) for n in schema.names if not str(n).startswith("__index_level_")]


def parse_parquet(data: bytes, *, label_column=None, limits: Limits) -> RawTable:
    """Parquet bytes -> `RawTable` (numeric and boolean columns as features)."""
    table, pa = _read_parquet(data)
    import pyarrow.types as pt

    keep = [i for i, n in enumerate(table.column_names) if not str(n).startswith("__index_level_")]
    names = [str(table.column_names[i]) for i in keep]
    limits.check_shape(table.num_rows, len(names))
    numeric = []
    for i in keep:
        col = table.column(i)
        t = col.type
        if pt.is_integer(t) or pt.is_floating(t) or pt.is_boolean(t) or pt.is_decimal(t):
            try:
                numeric.append(np.asarray(col.cast(pa.float64()).to_numpy(), dtype=np.float64))
            except pa.ArrowException:
                numeric.append(None)
        else:
            numeric.append(None)

    def cells(j):
        col = table.column(keep[j])
        if pt.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        return ["" if v is None else str(v) for v in col.to_pylist()]

    return _raw_table(names, numeric, cells, label_column=label_column, limits=limits, what="The Parquet file")
