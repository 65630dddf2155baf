"""NPY / NPZ reading without ever unpickling.

The NPY header is parsed first (numpy's own header reader, which evaluates
only literals) so that object dtypes, absurd shapes and truncated data are
refused before any memory is allocated. Arrays are read with
``np.frombuffer``; NPZ members are read through ``zipfile`` with their
declared uncompressed sizes checked against the limits (no zip bombs).
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

import numpy as np

from ..text import plain, quote
from .errors import DataError
from .validation import Limits, RawTable

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK\x03\x04"
_PICKLE_HINT = (
    "Python objects (pickled data) are never loaded from user files. "
    "Save a plain numeric array, e.g. np.save(path, Y.astype(float))."
)
# Errors a corrupt zip/npy can raise inside the standard library.
_CORRUPT = (
    zipfile.BadZipFile, zlib.error, EOFError, ValueError, OSError, KeyError,
    NotImplementedError, struct.error, UnicodeDecodeError, RuntimeError, OverflowError,
    SyntaxError, TypeError,
)


def _read_header(fp, what: str):
    try:
        version = np.lib.format.read_magic(fp)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fp)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fp)
        else:
            raise ValueError(f"unsupported NPY version {version}")
    except Exception as exc:  # numpy's header parser raises many types on garbage
        raise DataError(
            f"{what} is not a valid NPY array (unreadable header: {type(exc).__name__}). "
            "Save it again with np.save."
        ) from None
    return shape, fortran, dtype


def read_npy(data: bytes, *, what: str = "The file", limits: Limits, allow_text: bool = False) -> np.ndarray:
    """Parse one NPY array from bytes (numbers, or strings when allow_text)."""
    if not data.startswith(NPY_MAGIC):
        if data[:1] == b"\x80" or data.startswith(b"(dp") or data.startswith(b"cnumpy"):
            raise DataError(f"{what} looks like a Python pickle, not an NPY array. " + _PICKLE_HINT)
        raise DataError(
            f"{what} is not an NPY array (it does not start with the NPY signature). "
            "Save arrays with np.save, or upload a CSV file with a .csv extension."
        )
    fp = io.BytesIO(data)
    shape, fortran, dtype = _read_header(fp, what)
    if dtype.hasobject:
        raise DataError(f"{what} holds an object array. " + _PICKLE_HINT)
    if dtype.fields is not None or dtype.subdtype is not None:
        raise DataError(
            f"{what} holds a structured (record) array. Save a plain 2-D numeric array instead."
        )
    kind = dtype.kind
    if kind == "c":
        raise DataError(f"{what} holds complex numbers; only real numbers can be modelled.")
    allowed = "biuf" + ("US" if allow_text else "")
    if kind not in allowed:
        raise DataError(
            f"{what} has dtype {dtype}, which is not numeric. Save the array as float numbers."
        )
    count = 1
    for s in shape:
        count *= int(s)
    if count > limits.max_values:
        raise DataError(
            f"{what} holds an array of shape {shape}, more than the limit of "
            f"{limits.max_values:,} values. Use fewer rows or columns, or raise Limits.max_values."
        )
    offset = fp.tell()
    nbytes = count * dtype.itemsize
    if len(data) - offset != nbytes:
        raise DataError(
            f"{what} is truncated or corrupt: its header promises {nbytes:,} bytes of data "
            f"for shape {shape}, but {len(data) - offset:,} follow. Save it again with np.save."
        )
    arr = np.frombuffer(data, dtype=dtype, count=count, offset=offset)
    return arr.reshape(shape, order="F" if fortran else "C")


def _matrix(arr: np.ndarray, what: str) -> tuple[np.ndarray, tuple[int, int] | None]:
    """Numeric array -> (N, D) float64 plus an image shape for (N, h, w) stacks."""
    if arr.ndim == 0:
        raise DataError(f"{what} holds a single number; expected a 2-D array (rows x columns).")
    if arr.ndim == 1:
        raise DataError(
            f"{what} holds a 1-D array (a single column of {arr.shape[0]} values); a latent "
            "variable model needs at least 2 features. Save a 2-D (N, D) array."
        )
    if arr.ndim == 3:
        n, h, w = arr.shape
        return arr.reshape(n, h * w).astype(np.float64), (h, w)
    if arr.ndim > 3:
        raise DataError(
            f"{what} holds a {arr.ndim}-D array of shape {arr.shape}; expected (N, D), "
            "or (N, height, width) for images."
        )
    if arr.shape[1] == 1:
        raise DataError(
            f"{what} has a single column; a latent variable model needs at least 2 features. "
            "Save a 2-D (N, D) array with D >= 2."
        )
    return arr.astype(np.float64), None


def parse_npy(data: bytes, *, limits: Limits) -> RawTable:
    arr = read_npy(data, limits=limits)
    if arr.ndim >= 2:
        limits.check_shape(arr.shape[0], int(np.prod(arr.shape[1:])))
    values, image_shape = _matrix(arr, "The NPY file")
    d = values.shape[1]
    return RawTable(
        values=values,
        feature_names=[f"x{j + 1}" for j in range(d)],
        image_shape=image_shape,
    )


def parse_npz(data: bytes, *, limits: Limits) -> RawTable:
    """NPZ with arrays Y, optional labels, image_shape, feature_names and mask.

    Without Y, arrays ``view_0``, ``view_1``, ... (two or more, each (N, D_v),
    or (N, h, w) for images, same rows) are several views of the same rows:
    they are placed side by side and each becomes a column group
    (``Dataset.column_groups``), named by its array, with columns
    ``view_0.x1`` ... (or ``view_0.px_<row>_<col>`` for images).

    ``mask`` (bool, Y's shape, True = missing, numpy.ma's convention) marks
    missing cells; NaN in Y marks them too. ``np.savez`` of a masked array
    keeps only its data, so save ``Y=m.filled(np.nan)`` or ``mask=m.mask``.
    """
    if not data.startswith(ZIP_MAGIC):
        raise DataError(
            "The file is not an NPZ archive (it does not start with the zip signature). "
            "Save arrays with np.savez(path, Y=..., labels=...)."
        )
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = {i.filename: i for i in zf.infolist()}
    except _CORRUPT as exc:
        raise DataError(
            f"The NPZ archive is corrupt ({plain(exc, 120)}). Save it again with np.savez."
        ) from None
    arrays = {n[:-4]: i for n, i in infos.items() if n.endswith(".npy")}
    if not arrays:
        raise DataError(
            "The NPZ archive holds no arrays. Save it with np.savez(path, Y=..., labels=...)."
        )
    warnings: list[str] = []
    view_keys = _view_keys(arrays)
    if "Y" in arrays:
        key = "Y"
    elif view_keys:
        key = None
    elif len(arrays) == 1:
        key = next(iter(arrays))
        warnings.append(f"Used the only array in the NPZ, {quote(key, 40)}, as the data Y")
    else:
        raise DataError(
            "The NPZ archive has no array named 'Y'. Found: "
            + ", ".join(quote(a, 40) for a in sorted(arrays)[:20])
            + ". Save the data as np.savez(path, Y=data, labels=labels)."
        )
    member_limit = 16 * limits.max_values + 65536

    def load(name: str, allow_text: bool) -> np.ndarray:
        info = arrays[name]
        what = f"Array {quote(name, 40)} in the NPZ"
        if info.file_size > member_limit:
            raise DataError(
                f"{what} expands to {info.file_size:,} bytes, more than the limit. "
                "Use fewer rows or columns, or raise Limits.max_values."
            )
        try:
            with zf.open(info) as fh:
                raw = fh.read(member_limit + 1)
        except _CORRUPT as exc:
            raise DataError(f"{what} is corrupt ({plain(exc, 120)}). Save the file again with np.savez.") from None
        return read_npy(raw, what=what, limits=limits, allow_text=allow_text)

    groups = None
    if key is None:  # views view_0, view_1, ...: side by side, one column group each
        arr, values, groups = _load_views(view_keys, load, limits)
        image_shape = None
        key = "view_0"
    else:
        arr = load(key, allow_text=False)
        if arr.ndim >= 2:
            limits.check_shape(arr.shape[0], int(np.prod(arr.shape[1:])))
        values, image_shape = _matrix(arr, f"Array {quote(key, 40)} in the NPZ")
    n, d = values.shape

    labels = None
    if "labels" in arrays:
        labels = load("labels", allow_text=True)
        if labels.shape != (n,):
            raise DataError(
                f"Array 'labels' in the NPZ has shape {labels.shape}; expected ({n},), "
                "one label per row of Y."
            )
        if labels.dtype.kind == "f" and not np.all(np.isfinite(labels)):
            raise DataError("Array 'labels' in the NPZ contains NaN or infinite values; give every row a label.")

    if "image_shape" in arrays:
        shp = load("image_shape", allow_text=False)
        if shp.shape != (2,) or shp.dtype.kind not in "iu":
            raise DataError(
                f"Array 'image_shape' in the NPZ must hold two integers (height, width); "
                f"got shape {shp.shape} and dtype {shp.dtype}."
            )
        h, w = int(shp[0]), int(shp[1])
        if h < 1 or w < 1 or h * w != d:
            raise DataError(
                f"image_shape ({h}, {w}) in the NPZ does not match the {d} columns of Y; "
                "height x width must equal the number of columns."
            )
        image_shape = (h, w)

    if "mask" in arrays and groups is None:
        mask = load("mask", allow_text=False)
        if mask.shape != arr.shape or mask.dtype.kind not in "biu":
            raise DataError(
                f"Array 'mask' in the NPZ must be a boolean array of Y's shape {arr.shape} "
                f"(True = missing, as in numpy.ma); got shape {mask.shape} and dtype {mask.dtype}."
            )
        mask = mask.reshape(values.shape).astype(bool)
        if mask.any():
            values = values.copy()
            values[mask] = np.nan
            warnings.append(f"{int(mask.sum())} cell(s) marked missing by the NPZ's 'mask' array")

    names = [f"x{j + 1}" for j in range(d)]
    if groups is not None:
        names = [c for _, cols, _ in groups for c in cols]
    elif "feature_names" in arrays:
        fn = load("feature_names", allow_text=True)
        if fn.shape != (d,) or fn.dtype.kind not in "US":
            raise DataError(
                f"Array 'feature_names' in the NPZ must hold {d} strings (one per column of Y); "
                f"got shape {fn.shape} and dtype {fn.dtype}."
            )
        names = [str(s.decode("utf-8", "replace") if isinstance(s, bytes) else s) for s in fn]
        if len(set(names)) != len(names):
            raise DataError("Array 'feature_names' in the NPZ has repeated names; make them unique.")

    used = {key, "labels", "image_shape", "feature_names", "mask"} if groups is None else {"labels", *view_keys}
    extra = sorted(set(arrays) - used)
    if extra:
        warnings.append("Ignored NPZ array(s): " + ", ".join(quote(a, 40) for a in extra[:10]))
    return RawTable(
        values=values,
        feature_names=names,
        labels=labels,
        label_name="labels" if labels is not None else None,
        image_shape=image_shape,
        warnings=warnings,
        column_groups=groups,
    )


def _view_keys(arrays) -> list[str]:
    """``view_0``, ``view_1``, ... present without a gap (at least two), else []."""
    keys = []
    while f"view_{len(keys)}" in arrays:
        keys.append(f"view_{len(keys)}")
    return keys if len(keys) >= 2 else []


def _load_views(keys, load, limits: Limits):
    """Arrays view_0, view_1, ... (each (N, D_v) or (N, h, w)) side by side, and their column groups."""
    parts, groups, rows = [], [], None
    for key in keys:
        arr = load(key, allow_text=False)
        what = f"Array {quote(key, 40)} in the NPZ"
        if arr.ndim == 2 and arr.shape[1] == 1:
            block, shape = arr.astype(np.float64), None  # a one-column view is fine inside several
        else:
            block, shape = _matrix(arr, what)
        if rows is None:
            rows = block.shape[0]
        elif block.shape[0] != rows:
            raise DataError(
                f"{what} has {block.shape[0]} rows, but {quote(keys[0], 40)} has {rows}; "
                "every view must have one row per data point, in the same order."
            )
        if shape is not None:
            cols = tuple(f"{key}.px_{r}_{c}" for r in range(shape[0]) for c in range(shape[1]))
        else:
            cols = tuple(f"{key}.x{j + 1}" for j in range(block.shape[1]))
        parts.append(block)
        groups.append((key, cols, shape))
    values = np.hstack(parts)
    limits.check_shape(*values.shape)
    return values, values, tuple(groups)


def map_npy(path) -> np.memmap | None:
    """A 2-D array of real numbers in an ``.npy`` file, memory-mapped read-only (never copied).

    ``np.load(path, mmap_mode="r")``: rows are read from disk when they are
    used, so a minibatch model can train on a file larger than memory.  None
    when the file is not such an array (the normal loader says why).
    """
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError):
        return None
    if not isinstance(arr, np.memmap) or arr.ndim != 2 or arr.dtype.kind not in "biuf" or arr.shape[1] < 2:
        return None
    return arr


def map_npy_table(path, *, limits: Limits) -> RawTable | None:
    """An ``.npy`` file's (N, D) float32 / float64 array, memory-mapped read-only instead of read.

    For files on the server's disk (``gplvm-explorer big.npy``): the header is
    checked as `read_npy` checks it, the rows and columns against ``limits``
    (not ``max_values``, which bounds what is read into memory), and the
    values are left in the file; `validation.finish_mapped` checks them a
    block of rows at a time.  None when the array is not such a matrix
    (integers, another byte order, Fortran order, not 2-D, truncated): the
    reader of bytes then reads it, or says what is wrong with it.
    """
    try:
        with open(path, "rb") as fh:
            if fh.read(len(NPY_MAGIC)) != NPY_MAGIC:
                return None
            fh.seek(0)
            shape, fortran, dtype = _read_header(fh, "The NPY file")
            offset = fh.tell()
            fh.seek(0, io.SEEK_END)
            size = fh.tell()
    except (OSError, DataError):
        return None
    if (fortran or len(shape) != 2 or dtype.kind != "f" or dtype.itemsize not in (4, 8)
            or not dtype.isnative or dtype.fields is not None):
        return None
    n, d = (int(s) for s in shape)
    if n < 1 or d < 2 or size - offset != n * d * dtype.itemsize:
        return None
    limits.check_rows_cols(n, d)
    values = np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=(n, d))
    return RawTable(values=values, feature_names=[f"x{j + 1}" for j in range(d)])

