"""What the app saves beside a model's arrays, so that a saved model reopens as it was.

`engine.io.save_model` writes what rebuilds the model (Y in the units it was
trained in, the parameters, the kernel).  The app adds, in entries under
``app/`` that the engine's loader ignores, everything the page showed about
it: the data's column names and labels, the image shape, the standardisation
(``original = Y * scale + mean``), the objective trace, the iterations trained
and the settings.  Every entry is a plain array or JSON text (files are read
with ``allow_pickle=False``); every one is optional, so files written before
any of them existed still open.

`context_arrays` turns a `SavedContext` into those entries; `read_context`
reads them back, checked against the model's shape: an entry that does not fit
is left out (logged), never trusted.
"""
from __future__ import annotations

import dataclasses
import io
import json
import logging
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

__all__ = ["ENTRIES", "SavedContext", "context_arrays", "context_of", "read_context"]

#: Entry names (without ``.npy``); the first two predate the others and keep their names.
ENTRIES = {
    "labels": "app/labels",
    "label_name": "app/label_name",
    "feature_names": "app/feature_names",
    "image_shape": "app/image_shape",
    "mean": "app/mean",
    "scale": "app/scale",
    "trace_iteration": "app/trace_iteration",
    "trace_objective": "app/trace_objective",
    "iterations": "app/iterations",
    "settings": "app/settings",
}
#: Longest text read from a saved settings entry (JSON of plain values).
MAX_SETTINGS_CHARS = 1_000_000


@dataclass(frozen=True, eq=False)
class SavedContext:
    """The page's view of a saved model's data and run (every field optional).

    feature_names   (D,) column names.
    labels          (N,) one label per row; label_name their column's name.
    image_shape     (h, w) when each row is an h x w image stored row by row.
    mean, scale     (D,) the standardisation: original = Y * scale + mean.
    trace_iteration, trace_objective   (k,) the objective after each recorded iteration.
    iterations      iterations the model was trained for.
    settings        the `catalog.ModelConfig` it was trained with, as a dict of plain values.
    """

    feature_names: tuple | None = None
    labels: np.ndarray | None = None
    label_name: str | None = None
    image_shape: tuple | None = None
    mean: np.ndarray | None = None
    scale: np.ndarray | None = None
    trace_iteration: np.ndarray | None = None
    trace_objective: np.ndarray | None = None
    iterations: int | None = None
    settings: dict | None = None


def context_of(result, trace=None) -> SavedContext:
    """The context of a `TrainedResult` (its data set, settings, iterations) and its run's ``trace``
    (a DataFrame or mapping with ``iteration`` and ``objective`` columns, or None)."""
    ds = result.dataset
    n = int(result.X_mean.shape[0])
    labels = getattr(ds, "labels", None)
    if labels is not None and len(labels) != n:
        labels = None
    iters = objs = None
    if trace is not None and len(trace["iteration"]):
        iters = np.asarray(trace["iteration"], dtype=float)
        objs = np.asarray(trace["objective"], dtype=float)
    config = result.config
    return SavedContext(
        feature_names=None if ds is None else tuple(ds.feature_names),
        labels=labels, label_name=None if labels is None else (getattr(ds, "label_name", None) or "label"),
        image_shape=None if ds is None else ds.image_shape,
        mean=None if ds is None else ds.mean, scale=None if ds is None else ds.scale,
        trace_iteration=iters, trace_objective=objs, iterations=int(result.iteration),
        settings=None if config is None else settings_dict(config),
    )


def settings_dict(config) -> dict:
    """A `ModelConfig` as JSON-ready plain values (tuples become lists)."""
    return json.loads(json.dumps(dataclasses.asdict(config)))


def context_arrays(ctx: SavedContext) -> dict:
    """The ``app/...`` entries of ``ctx`` (only the fields it has)."""
    out = {}
    if ctx.labels is not None:
        labels = np.asarray(ctx.labels)
        out[ENTRIES["labels"]] = labels.astype(str) if labels.dtype.hasobject else labels
        out[ENTRIES["label_name"]] = np.array(str(ctx.label_name or "label"))
    if ctx.feature_names is not None:
        out[ENTRIES["feature_names"]] = np.array([str(n) for n in ctx.feature_names], dtype=str)
    if ctx.image_shape is not None:
        out[ENTRIES["image_shape"]] = np.array(ctx.image_shape, dtype=np.int64)
    for name in ("mean", "scale", "trace_iteration", "trace_objective"):
        value = getattr(ctx, name)
        if value is not None:
            out[ENTRIES[name]] = np.asarray(value, dtype=np.float64)
    if ctx.iterations is not None:
        out[ENTRIES["iterations"]] = np.array(int(ctx.iterations), dtype=np.int64)
    if ctx.settings is not None:
        out[ENTRIES["settings"]] = np.array(json.dumps(ctx.settings))
    return out


def _source(source):
    return io.BytesIO(source) if isinstance(source, (bytes, bytearray, memoryview)) else Path(source).expanduser()


# ---- reading: each entry checked on its own; one that does not fit is left out ----------------------------
def _labels(f, n):
    from .data.dataset import normalize_labels

    labels = normalize_labels(f[ENTRIES["labels"]], n)
    name = str(f[ENTRIES["label_name"]]) if ENTRIES["label_name"] in f.files else "label"
    return {"labels": labels, "label_name": name}


def _feature_names(f, n, d):
    names = np.asarray(f[ENTRIES["feature_names"]])
    if names.dtype.kind != "U" or names.shape != (d,):
        raise ValueError(f"expected {d} column names, got an array of shape {names.shape} ({names.dtype})")
    return {"feature_names": tuple(str(s) for s in names)}


def _image_shape(f, n, d):
    shape = np.asarray(f[ENTRIES["image_shape"]])
    if shape.dtype.kind not in "iu" or shape.shape != (2,) or min(shape) < 1 or int(shape[0]) * int(shape[1]) != d:
        raise ValueError(f"image shape {shape.tolist()} does not fit {d} columns")
    return {"image_shape": (int(shape[0]), int(shape[1]))}


def _vector(f, key, d):
    value = np.asarray(f[ENTRIES[key]])
    if value.dtype.kind != "f" or value.shape != (d,) or not np.all(np.isfinite(value)):
        raise ValueError(f"expected {d} finite numbers, got an array of shape {value.shape} ({value.dtype})")
    return value.astype(np.float64)


def _standardisation(f, n, d):
    mean, scale = _vector(f, "mean", d), _vector(f, "scale", d)
    if np.any(scale <= 0):
        raise ValueError("a standardisation scale is not positive")
    return {"mean": mean, "scale": scale}


def _trace(f, n, d):
    it = np.asarray(f[ENTRIES["trace_iteration"]])
    obj = np.asarray(f[ENTRIES["trace_objective"]])
    if it.dtype.kind != "f" or obj.dtype.kind != "f" or it.ndim != 1 or it.shape != obj.shape:
        raise ValueError(f"trace arrays of shapes {it.shape} and {obj.shape}")
    return {"trace_iteration": it.astype(np.float64), "trace_objective": obj.astype(np.float64)}


def _iterations(f, n, d):
    value = np.asarray(f[ENTRIES["iterations"]])
    if value.dtype.kind not in "iu" or value.shape != () or int(value) < 0:
        raise ValueError(f"iterations {value!r}")
    return {"iterations": int(value)}


def _settings(f, n, d):
    text = np.asarray(f[ENTRIES["settings"]])
    if text.dtype.kind != "U" or text.shape != () or len(str(text)) > MAX_SETTINGS_CHARS:
        raise ValueError("settings are not one JSON text")
    settings = json.loads(str(text))
    if not isinstance(settings, dict):
        raise ValueError("settings are not a JSON object")
    return {"settings": settings}


_READERS = (
    ("labels", lambda f, n, d: _labels(f, n)),
    ("feature_names", _feature_names),
    ("image_shape", _image_shape),
    ("mean", _standardisation),
    ("trace_iteration", _trace),
    ("iterations", _iterations),
    ("settings", _settings),
)


def read_context(source, n: int, d: int | None) -> SavedContext:
    """The `SavedContext` saved in ``source`` (a path or bytes) for a model of ``n`` rows and ``d`` columns
    (``d`` None: the labels only).

    Entries that are absent give None; entries that are damaged or do not fit
    the model's shape are left out with a warning in the log.
    """
    found = {}
    try:
        with np.load(_source(source), allow_pickle=False) as f:
            for key, reader in _READERS:
                if ENTRIES[key] not in f.files or (d is None and key != "labels"):
                    continue
                try:
                    found.update(reader(f, n, d))
                except Exception as exc:  # noqa: BLE001 - any bad entry is left out, never trusted
                    logger.warning("Saved model: %s not used (%s)", ENTRIES[key], exc)
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        logger.warning("Saved model: the app's entries could not be read (%s)", exc)
    return SavedContext(**found)
