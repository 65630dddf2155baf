"""`load_file` and `csv_columns`: from a path or uploaded bytes to a `Dataset`."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..text import plain, quote
from .dataset import Dataset
from .errors import DataError
from .frames import PARQUET_FORMATS, PARQUET_MAGIC, parquet_columns, parse_parquet
from .npfile import NPY_MAGIC, ZIP_MAGIC, map_npy_table, parse_npy, parse_npz
from .prepare import prepare
from .textfile import decode_text, parse_text, read_header
from .validation import Limits, finish, finish_mapped

CLI_HINT = "gplvm-explorer FILE"


def _mb(n: int) -> str:
    """Bytes as MB (or kB below 1 MB), decimal units as file managers show them."""
    value, unit = (n / 1e6, "MB") if n >= 1e6 else (n / 1e3, "kB")
    return f"{value:.1f}".rstrip("0").rstrip(".") + " " + unit


def too_big_message(size: int, limit: int, *, upload: bool = True) -> str:
    """The message for a file over the size limit: the limit and what to do."""
    if not upload:
        return (
            f"The file is {_mb(size)}, more than the {_mb(limit)} limit. Use a smaller file "
            "(e.g. a random subset of the rows)."
        )
    return (
        f"The file is {_mb(size)}, more than the {_mb(limit)} upload limit. Use a smaller "
        "file (e.g. a random subset of the rows), or start the app with the file on the "
        f"command line ({CLI_HINT}): it is then read from disk, not uploaded."
    )

TEXT_FORMATS = ("csv", "tsv", "txt")
FORMATS = TEXT_FORMATS + ("npy", "npz") + PARQUET_FORMATS


def _format(filename: str | None, data: bytes) -> str:
    if filename:
        ext = Path(str(filename)).suffix.lower().lstrip(".")
        if ext in FORMATS:
            return ext
        shown = quote("." + ext, 20) if ext else "no extension"
        raise DataError(
            f"Unsupported file type ({shown}) for {quote(Path(str(filename)).name)}. "
            "Use CSV, TSV, TXT, NPY, NPZ or Parquet (from a spreadsheet, save as CSV)."
        )
    if data.startswith(NPY_MAGIC):
        return "npy"
    if data.startswith(ZIP_MAGIC):
        return "npz"
    if data.startswith(PARQUET_MAGIC):
        return "parquet"
    return "csv"


#: What a path that is not a regular file is, by its stat mode.
_NOT_FILES = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
              (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"))


def regular_file_size(path) -> int:
    """Bytes in the file at ``path``, checked by ``stat`` alone to be a regular file.

    Devices (``/dev/zero`` never ends), named pipes, sockets and directories
    are refused with a `DataError` before anything is opened or read.
    """
    path = Path(path)
    shown = quote(path.name or str(path), 120)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise DataError(f"File not found: {shown}. Check the path.") from None
    except PermissionError:
        raise DataError(f"Cannot read {shown}: permission denied.") from None
    except OSError as exc:
        raise DataError(f"Cannot read {shown}: {plain(exc.strerror or exc)}.") from None
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for is_kind, name in _NOT_FILES if is_kind(st.st_mode)), "not a regular file")
        raise DataError(f"{shown} is {kind}, not a file. Choose a CSV, TSV, TXT, NPY, NPZ or Parquet file.")
    return int(st.st_size)


def _read_source(source, filename: str | None, limits: Limits, head: int | None = None):
    """Return (bytes, filename); checks the size limit before reading."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        size = len(data)
    elif isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if filename is None:
            filename = path.name
        size = regular_file_size(path)
        try:
            if size <= limits.max_bytes:
                with open(path, "rb") as fh:
                    data = fh.read(head if head is not None else limits.max_bytes + 1)
        except FileNotFoundError:  # removed since the stat
            raise DataError(f"File not found: {quote(path.name)}. Check the path.") from None
        except PermissionError:
            raise DataError(f"Cannot read {quote(path.name)}: permission denied.") from None
        except OSError as exc:
            raise DataError(f"Cannot read {quote(path.name)}: {plain(exc.strerror or exc)}.") from None
    else:
        raise DataError(
            f"Expected a file path or bytes, got {type(source).__name__} instead."
        )
    if size > limits.max_bytes:
        raise DataError(too_big_message(size, limits.max_bytes, upload=limits.upload))
    if size == 0 or not data.strip():
        raise DataError("The file is empty. Choose a file with rows of numbers.")
    return data, filename


def _load_mapped(source, filename, limits: Limits, label_column, image_shape) -> Dataset | None:
    """The `Dataset` of a float ``.npy`` file on the server's disk, memory-mapped (``values`` stay in
    the file), or None when the file is read into memory instead: an upload, another format, an
    array that cannot be mapped as it is, or missing cells."""
    if limits.upload or label_column is not None or not isinstance(source, (str, os.PathLike)):
        return None
    path = Path(source)
    name = Path(str(filename)).name if filename else path.name
    if Path(name).suffix.lower() != ".npy":
        return None
    size = regular_file_size(path)
    if size > limits.max_bytes:
        raise DataError(too_big_message(size, limits.max_bytes, upload=False))
    raw = map_npy_table(path, limits=limits)
    if raw is None:
        return None
    if image_shape is not None and image_shape is not True and image_shape is not False:
        raw.image_shape = tuple(image_shape)
    shown = plain(name, 120)
    return finish_mapped(raw, name=shown, description=f"Loaded from {quote(shown, 120)} (NPY, memory-mapped)",
                         source_path=str(source))


def load_file(
    source,
    filename: str | None = None,
    *,
    label_column: str | int | None = None,
    standardize: bool = False,
    drop_constant: bool = True,
    missing: str = "keep",
    max_rows: int | None = None,
    seed: int = 0,
    header: bool | None = None,
    image_shape: tuple[int, int] | bool | None = None,
    limits: Limits | None = None,
    drop_missing_rows: bool | None = None,
) -> Dataset:
    """Load a user file (path or bytes) into a validated `Dataset`.

    The format comes from ``filename``'s extension (csv, tsv, txt, npy, npz, parquet;
    for a path, its own name); bytes without a filename are sniffed.
    ``label_column`` (name or 0-based index, text files only) is split off as
    labels (also in Parquet files); ``header`` forces header detection on/off; ``image_shape`` marks
    rows as (h, w) images (None: when the column names say so, see `images`; False: never). Image
    rows keep their constant pixels. The remaining options are applied by `prepare`;
    by default rows with missing cells are kept (NaN, reported per column);
    ``missing="drop-rows"`` or ``"impute-mean"`` give a complete matrix
    (``drop_missing_rows=True`` is the older spelling of "drop-rows").
    Every failure raises `DataError`; its message is plain text.
    """
    if drop_missing_rows is not None:
        missing = "drop-rows" if drop_missing_rows else "keep"
    limits = Limits() if limits is None else limits
    dataset = _load_mapped(source, filename, limits, label_column, image_shape)
    if dataset is not None:
        return prepare(dataset, standardize=standardize, drop_constant=drop_constant, max_rows=max_rows,
                       seed=seed, missing=missing)
    data, filename = _read_source(source, filename, limits)
    fmt = _format(filename, data)
    if fmt in TEXT_FORMATS:
        raw = parse_text(data, fmt, label_column=label_column, header=header, limits=limits)
    elif fmt in PARQUET_FORMATS:
        raw = parse_parquet(data, label_column=label_column, limits=limits)
    else:
        if label_column is not None:
            raise DataError(
                "A label column can only be chosen in CSV/TSV/TXT/Parquet files; in an NPZ file, "
                "store the labels as an array named 'labels'."
            )
        raw = parse_npy(data, limits=limits) if fmt == "npy" else parse_npz(data, limits=limits)
    if image_shape is False:
        raw.image_shape = None
    elif image_shape is not None and image_shape is not True:
        raw.image_shape = tuple(image_shape)
    name = plain(Path(str(filename)).name, 120) if filename else "uploaded data"
    dataset = finish(
        raw,
        name=name,
        description=f"Loaded from {quote(name, 120)} ({fmt.upper()})",
        detect_images=image_shape is not False,
        source_path=str(source) if isinstance(source, (str, os.PathLike)) else None,
    )
    return prepare(
        dataset,
        standardize=standardize,
        drop_constant=drop_constant,
        max_rows=max_rows,
        seed=seed,
        missing=missing,
    )


def csv_columns(
    source, filename: str | None = None, *, header: bool | None = None, limits: Limits | None = None
) -> list[str]:
    """Column names of a CSV/TSV/TXT file, reading only its first lines.

    Meant for a label-column picker. Files without a detected header get
    names col1, col2, ...; NPY/NPZ files have no label column and give [].
    """
    limits = Limits() if limits is None else limits
    data, filename = _read_source(source, filename, limits, head=1 << 16)
    fmt = _format(filename, data)
    if fmt in PARQUET_FORMATS:  # the schema is at the end of the file: read it whole
        data, _ = _read_source(source, filename, limits)
        return parquet_columns(data)
    if fmt not in TEXT_FORMATS:
        return []
    text, _ = decode_text(data[: 1 << 16], partial=len(data) > 1 << 16)
    if len(data) > 1 << 16:  # drop a possibly cut last line
        text = text.rsplit("\n", 1)[0] if "\n" in text else text
    return read_header(text, fmt, header)
