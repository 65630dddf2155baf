"""Checks of a saved model file, made before anything it describes is allocated or built.

A model file (:func:`engine.io.save_model`) is a zip of ``.npy`` members.  A
small file can still describe something huge: an ``.npy`` header may promise
an array of 10^6 x 10^6 values, a kernel spec may be JSON nested thousands
deep, the parameters may be NaN or of shapes that do not fit together, and
the data and inducing points may describe a model that needs more memory than
the machine has.  These functions read and check, in that order:

1. `member_headers`: every member's header (shape, dtype), checked against the
   member's real size in the archive and against a byte budget, before any
   array is read;
2. `read_members`: the arrays themselves (at most the checked sizes);
3. `spec_from_json`: kernel specs, checked for size and depth before parsing;
4. `saved_dimensions` / `check_saved_parameters`: N, D, Q, M of the model and
   its parameters (finite, shapes consistent with each other).

The caller sizes the model from `saved_dimensions` (the app with its cost
estimates) before building it.  Every refusal is a :class:`ModelFileError`
whose message names the entry and says what is wrong.
"""
from __future__ import annotations

import io
import json
import struct
import zipfile
import zlib
from typing import NamedTuple

import numpy as np

from .errors import ModelFileError

__all__ = ["MAX_SPEC_CHARS", "MAX_SPEC_DEPTH", "MemberHeader", "SavedDimensions", "check_saved_parameters",
           "member_headers", "read_members", "saved_dimensions", "spec_from_json"]

#: Longest kernel spec (JSON characters) a file may hold: a sum of many kernels is a few kB.
MAX_SPEC_CHARS = 200_000
#: Deepest nesting of brackets in a kernel spec (a sum of kernels nests 4 deep; stacks of layers a few more).
MAX_SPEC_DEPTH = 32
#: Largest .npy header read (numpy's own limit for headers it parses safely).
_MAX_HEADER_BYTES = 10_000

# what a damaged zip or .npy header can raise inside the standard library and numpy
_DAMAGED = (zipfile.BadZipFile, zlib.error, EOFError, ValueError, OSError, KeyError, NotImplementedError,
            struct.error, UnicodeDecodeError, RuntimeError, OverflowError, SyntaxError, TypeError)


class MemberHeader(NamedTuple):
    """What one ``.npy`` member of the archive says about its array, and what it really holds."""

    shape: tuple
    dtype: np.dtype
    header_bytes: int  # magic and header, before the data
    stored_bytes: int  # the member's uncompressed size in the archive

    @property
    def nbytes(self) -> int:
        """Bytes the header promises (what reading it would allocate)."""
        count = 1
        for s in self.shape:
            count *= int(s)
        return count * self.dtype.itemsize


def _shape_text(shape) -> str:
    return " x ".join(f"{int(s):,}" for s in shape) if shape else "a single value"


def _read_header(fh):
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(fh, max_header_size=_MAX_HEADER_BYTES)
    if version in ((2, 0), (3, 0)):
        return np.lib.format.read_array_header_2_0(fh, max_header_size=_MAX_HEADER_BYTES)
    raise ValueError(f"unsupported .npy version {version}")


def member_headers(zf: zipfile.ZipFile, max_bytes: float | None = None) -> dict:
    """{entry name: `MemberHeader`} of every ``.npy`` member of ``zf``, checked, nothing else read.

    Refused (`ModelFileError`): an unreadable header, an object dtype (pickles
    are never loaded), a header whose promised size differs from what the
    member holds, and members that together promise more than ``max_bytes``.
    """
    headers = {}
    total = 0
    try:
        infos = zf.infolist()
    except _DAMAGED as exc:
        raise ModelFileError(f"The model file is damaged ({exc}).") from None
    for info in infos:
        if not info.filename.endswith(".npy"):
            continue
        name = info.filename[:-4]
        try:
            with zf.open(info) as fh:
                head = io.BytesIO(fh.read(_MAX_HEADER_BYTES + 64))
            shape, _, dtype = _read_header(head)
        except _DAMAGED as exc:
            raise ModelFileError(f"Entry {name!r} of the model file is not a readable array ({exc}).") from None
        if dtype.hasobject:
            raise ModelFileError(f"Entry {name!r} of the model file holds Python objects; model files hold only "
                                 "numbers and text, and pickles are never loaded.")
        header = MemberHeader(tuple(int(s) for s in shape), dtype, head.tell(), int(info.file_size))
        if header.header_bytes + header.nbytes != header.stored_bytes:
            raise ModelFileError(
                f"Entry {name!r} of the model file is damaged: its header promises an array of "
                f"{_shape_text(header.shape)} ({header.nbytes:,} bytes) but the entry holds "
                f"{max(header.stored_bytes - header.header_bytes, 0):,} bytes.")
        total += header.nbytes
        headers[name] = header
    if max_bytes is not None and total > max_bytes:
        raise ModelFileError(f"The model file unpacks to {total / 1e6:,.0f} MB of arrays, more than the "
                             f"{max_bytes / 1e6:,.0f} MB allowed here.")
    return headers


def read_members(zf: zipfile.ZipFile, headers: dict) -> dict:
    """{entry name: array} of the members in ``headers`` (checked by `member_headers`)."""
    arrays = {}
    for name in headers:
        try:
            with zf.open(name + ".npy") as fh:
                arrays[name] = np.lib.format.read_array(fh, allow_pickle=False)
        except _DAMAGED as exc:
            raise ModelFileError(f"Entry {name!r} of the model file could not be read ({exc}).") from None
    return arrays


def _nesting_depth(text: str) -> int:
    """Deepest nesting of JSON brackets in ``text`` (brackets inside strings not counted)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def spec_from_json(value, what: str = "kernel spec"):
    """The JSON in ``value`` (a string or 0-d string array), parsed once checked for size and depth."""
    text = str(value.item() if isinstance(value, np.ndarray) and value.ndim == 0 else value)
    if len(text) > MAX_SPEC_CHARS:
        raise ModelFileError(f"The model file's {what} is {len(text):,} characters long, more than the "
                             f"{MAX_SPEC_CHARS:,} a kernel description needs.")
    depth = _nesting_depth(text)
    if depth > MAX_SPEC_DEPTH:
        raise ModelFileError(f"The model file's {what} is nested {depth:,} levels deep; kernel descriptions "
                             f"nest at most {MAX_SPEC_DEPTH}.")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ModelFileError(f"The model file's {what} is not valid JSON ({exc}).") from None


class SavedDimensions(NamedTuple):
    """The sizes of a saved model: what its cost is estimated from before it is built."""

    model_class: str
    N: int  # data rows
    D: int  # data columns
    Q: int  # latent dimensions (of the top layer for stacked models)
    M: int  # inducing points (the most of any view or layer; 0 without)


def _scalar(arrays: dict, name: str, kind: type):
    value = arrays.get(name)
    if value is None:
        raise ModelFileError(f"Not a GPLVM Explorer model file (the entry {name!r} is missing).")
    if value.ndim != 0:
        raise ModelFileError(f"The model file's entry {name!r} should be a single value, got an array of "
                             f"{_shape_text(value.shape)}.")
    try:
        return kind(value.item())
    except (TypeError, ValueError):
        raise ModelFileError(f"The model file's entry {name!r} is not a {kind.__name__}.") from None


def _is_inducing(entry: str) -> bool:
    """``param/Z``, ``param/view0.Z``, ``param/layer1.Z``: inducing points of a model, a view or a layer."""
    return entry.startswith("param/") and (entry == "param/Z" or entry.endswith(".Z"))


def saved_dimensions(headers: dict, arrays: dict) -> SavedDimensions:
    """N, D, Q, M of the model in a file, from its headers and small entries (the big ones unread)."""
    model_class = _scalar(arrays, "model_class", str)
    latent_dim = _scalar(arrays, "latent_dim", int)
    Y = headers.get("Y")
    if Y is None:
        raise ModelFileError("Not a GPLVM Explorer model file (the entry 'Y' is missing).")
    if len(Y.shape) != 2 or Y.shape[0] < 2 or Y.shape[1] < 1:
        raise ModelFileError(f"The model file's data Y should be a table of at least 2 rows and 1 column, got "
                             f"{_shape_text(Y.shape)}.")
    if latent_dim < 1:
        raise ModelFileError(f"The model file's latent dimensionality should be at least 1, got {latent_dim}.")
    inducing = [h.shape[0] for name, h in headers.items() if _is_inducing(name) and h.shape]
    return SavedDimensions(model_class, int(Y.shape[0]), int(Y.shape[1]), latent_dim, max(inducing, default=0))


def _check_shape(name: str, value: np.ndarray, expected: tuple, meaning: str) -> None:
    if value.shape != expected:
        raise ModelFileError(f"The model file's {name} should have shape {expected} ({meaning}), got "
                             f"{value.shape}.")


def check_saved_parameters(arrays: dict, dims: SavedDimensions) -> None:
    """Every saved parameter finite and real, and the shapes of the latent points and inducing
    points consistent with the data and the latent dimensionality (``ModelFileError`` otherwise).

    Models with several latent spaces (stacked layers) are checked for finiteness only here; their
    own constructors check the shapes of each layer.
    """
    for name, value in arrays.items():
        if not (name.startswith("param/") or name == "free_vector"):
            continue
        if value.dtype.kind not in "biuf":
            raise ModelFileError(f"The model file's {name} should hold real numbers, got dtype {value.dtype}.")
        finite = np.isfinite(value)
        if not finite.all():
            bad = int(value.size - np.count_nonzero(finite))
            raise ModelFileError(f"The model file's {name} holds {bad:,} NaN or infinite value(s) of {value.size:,}; "
                                 "a saved model's parameters are finite numbers.")
    params = {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith("param/")}
    if dims.model_class != "DeepGP":
        _check_latent_shapes(params, dims)
    free = arrays.get("free_vector")
    if free is not None:
        size = sum(int(v.size) for v in params.values())
        if free.shape != (size,):
            raise ModelFileError(f"The model file's free_vector should hold the {size:,} parameter values, got "
                                 f"shape {free.shape}.")


def _check_latent_shapes(params: dict, dims: SavedDimensions) -> None:
    """X_mean, X_variance (N, Q) and every inducing-point matrix (M, Q) of a model with one latent space."""
    N, Q = dims.N, dims.Q
    for name in ("X_mean", "X_variance"):
        if name in params:
            _check_shape(name, params[name], (N, Q), f"{N} data rows by Q={Q} latent dimensions")
    if "X_variance" in params and np.any(params["X_variance"] <= 0):
        raise ModelFileError("The model file's X_variance holds values that are not positive; variances are "
                             "positive.")
    for name, value in params.items():
        if _is_inducing("param/" + name):
            if value.ndim != 2 or value.shape[1] != Q:
                raise ModelFileError(f"The model file's inducing points {name} should have Q={Q} columns "
                                     f"(M rows by Q latent dimensions), got shape {value.shape}.")
