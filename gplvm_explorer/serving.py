"""Server limits and the file given on the command line, read by the CLI and the app.

Everything here is immutable process-wide configuration (constants, a
read-only mapping, an environment variable read on demand, a cached
read-only dataset); nothing holds per-session state.

Uploads: Tornado closes the websocket, silently for the user, when a message
exceeds the server's ``websocket_max_message_size`` (Bokeh's default:
20 MiB). Panel's FileInput sends a file base64-encoded in *one* message (4/3
of its size), so it killed the page for files above ~15 MB. The app's upload
widget (`upload_widget`) refuses files over `UPLOAD_LIMIT_BYTES` in the
browser, before sending, and sends accepted ones in chunks; the server's
limit is still set explicitly, well above what an upload needs, and a file
over the limit that reaches the data layer some other way is refused with a
message naming the limit and the command-line alternative
(``gplvm-explorer FILE``).
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
from pathlib import Path
from types import MappingProxyType

from .data import Dataset, Limits, load_file
from .data.validation import Limits as _Limits

log = logging.getLogger(__name__)

MiB = 1024 * 1024

#: Largest file accepted through the browser (the data layer's default limit).
UPLOAD_LIMIT_BYTES: int = Limits().max_bytes

#: The websocket message limit the app's servers use. 64 MiB carries a
#: 48 MB file (base64), so files up to twice the upload limit reach the server
#: and get a clear refusal instead of a dead page.
WEBSOCKET_MAX_MESSAGE_SIZE: int = 64 * MiB

#: Options for ``pn.serve`` shared by the CLI and the browser tests.
SERVER_OPTIONS = MappingProxyType(
    {
        "websocket_max_message_size": WEBSOCKET_MAX_MESSAGE_SIZE,
        # a closed tab ends its session (and its training thread) within seconds
        "check_unused_sessions_milliseconds": 2000,
        "unused_session_lifetime_milliseconds": 5000,
    }
)

#: Environment variable naming a data file to offer in every session.
PRELOAD_ENV = "GPLVM_EXPLORER_FILE"

#: Environment variable holding the page settings given on the command line (JSON object).
SETTINGS_ENV = "GPLVM_EXPLORER_SETTINGS"

#: Limits for a file read from the server's disk (no upload involved); a float .npy file is memory-mapped,
#: so only its rows and columns are bounded (`data.npfile.map_npy_table`).
CLI_LIMITS = _Limits(max_bytes=1024 * MiB, max_rows=10_000_000, upload=False)


def upload_bytes_for_message(message_bytes: int) -> int:
    """Largest file whose base64 upload fits in a websocket message of this size."""
    return max(0, (int(message_bytes) - 64 * 1024) * 3 // 4)


def message_bytes_for_upload(file_bytes: int) -> int:
    """Websocket message size needed to upload a file of this size."""
    return 4 * math.ceil(int(file_bytes) / 3) + 64 * 1024


def upload_hint(limit: int = UPLOAD_LIMIT_BYTES) -> str:
    """Plain text for next to the upload widget."""
    return (
        f"Files up to {limit / 1e6:.0f} MB. For bigger files, start the app with the file: "
        "gplvm-explorer FILE"
    )


def preload_path() -> Path | None:
    """The file named by `PRELOAD_ENV` (set by ``gplvm-explorer FILE``), or None."""
    value = os.environ.get(PRELOAD_ENV, "").strip()
    return Path(value) if value else None


@functools.lru_cache(maxsize=8)
def _load_preloaded(path: str, mtime_ns: int, label_column, standardize: bool, missing: str) -> Dataset:
    ds = load_file(path, label_column=label_column, standardize=standardize, missing=missing,
                   limits=CLI_LIMITS)
    for arr in (ds.values, ds.labels, ds.mean, ds.scale, ds.imputed):
        if arr is not None:
            arr.setflags(write=False)
    return ds


def preloaded_dataset(*, label_column=None, standardize: bool = False, missing: str = "keep") -> Dataset | None:
    """The command-line file as a `Dataset` (parsed once per option set), or None.

    The arrays are read-only and shared between sessions: take ``.copy()``
    before changing them. Raises `DataError` when the file cannot be used.
    """
    path = preload_path()
    if path is None:
        return None
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        mtime = -1  # load_file reports the problem
    return _load_preloaded(str(path), mtime, label_column, bool(standardize), missing)


def preload_settings() -> MappingProxyType:
    """The settings given on the command line (`SETTINGS_ENV`: model, latent_dim, ..., label), read-only."""
    value = os.environ.get(SETTINGS_ENV, "").strip()
    if not value:
        return MappingProxyType({})
    try:
        settings = json.loads(value)
    except ValueError:
        log.warning("%s is not a JSON object; ignored", SETTINGS_ENV)
        return MappingProxyType({})
    return MappingProxyType(settings if isinstance(settings, dict) else {})


@functools.lru_cache(maxsize=8)
def _preload_columns(path: str, mtime_ns: int) -> tuple:
    from .data import DataError, csv_columns

    try:
        return tuple(csv_columns(path, limits=CLI_LIMITS))
    except DataError:
        return ()


def preload_columns() -> tuple:
    """Column names of the command-line file (label-column choices; () for arrays), read once."""
    path = preload_path()
    if path is None:
        return ()
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return ()
    return _preload_columns(str(path), mtime)


def session_websocket_limit() -> int | None:
    """The websocket message limit of the server running the current session, if known.

    Known once the session's websocket is connected (e.g. in a
    ``pn.state.onload`` callback); None outside a server or before that.
    Used to warn when a server was started (e.g. with plain ``panel serve``)
    with a limit too small for `UPLOAD_LIMIT_BYTES`.
    """
    try:
        import panel as pn

        doc = pn.state.curdoc
        ctx = getattr(doc, "session_context", None)
        session = getattr(ctx, "_session", None)
        for conn in list(getattr(session, "_subscribed_connections", ()) or ()):
            app = getattr(getattr(conn, "_socket", None), "application", None)
            size = getattr(app, "settings", {}).get("websocket_max_message_size")
            if size:
                return int(size)
    except Exception:  # pragma: no cover - private Bokeh structures changed
        log.debug("could not read the websocket limit", exc_info=True)
    return None


def effective_upload_limit() -> int:
    """`UPLOAD_LIMIT_BYTES`, lowered to what this session's websocket can carry."""
    ws = session_websocket_limit()
    if ws is None:
        return UPLOAD_LIMIT_BYTES
    fits = upload_bytes_for_message(ws)
    if fits < UPLOAD_LIMIT_BYTES:
        log.warning(
            "websocket_max_message_size is %d bytes: uploads above %.1f MB would close the "
            "connection. Serve with --websocket-max-message-size %d.",
            ws, fits / 1e6, WEBSOCKET_MAX_MESSAGE_SIZE,
        )
    return min(UPLOAD_LIMIT_BYTES, fits)


#: Extensions the app reads (the data layer's formats).
UPLOAD_EXTENSIONS = (".csv", ".tsv", ".txt", ".npy", ".npz", ".parquet", ".pq")
#: Bytes per websocket message of a chunked upload (base64: 4/3 of this).
UPLOAD_CHUNK_BYTES = 4_000_000


def upload_widget(**params):
    """A file picker that checks the size in the browser and uploads in chunks.

    Panel's ``FileDropper``: a file over `UPLOAD_LIMIT_BYTES` is refused in
    the browser before anything is sent ("File is too large / Maximum file
    size is 20 MB"); accepted files travel in chunks of `UPLOAD_CHUNK_BYTES`,
    so no websocket message comes near the server's limit (even Bokeh's
    default). Show `upload_hint()` beside it for what to do with bigger
    files. Its ``value`` is a dict {file name: bytes or str}; read it with
    `uploaded_file`.

    The dropper checks file types by the MIME type the browser reports,
    which is empty for ``.npy`` / ``.npz`` / ``.parquet`` and differs between
    systems for ``.csv`` (``application/vnd.ms-excel`` on Windows), so it
    would refuse good files: it is given no type list, and the data layer
    (which reads the extension and the content) refuses other files with a
    message. `UPLOAD_EXTENSIONS` lists what that layer reads.
    """
    import panel as pn

    options = dict(
        accepted_filetypes=[],
        max_file_size=f"{UPLOAD_LIMIT_BYTES // 1_000_000}MB",
        chunk_size=UPLOAD_CHUNK_BYTES,
        multiple=False,
    )
    options.update(params)
    return pn.widgets.FileDropper(**options)


def uploaded_file(value) -> tuple[str, bytes] | None:
    """(file name, bytes) from a FileDropper / FileInput value, or None when empty.

    A FileDropper reports {} when its file is removed (or replaced); that is
    not an upload.
    """
    if not value:
        return None
    if isinstance(value, dict):
        name, content = next(reversed(value.items()))  # the newest file
        if isinstance(content, str):  # text files may arrive decoded
            content = content.encode("utf-8")
        return str(name), bytes(content)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "upload", bytes(value)
    return None
