"""Open a saved model on the page: explore it without training again.

A model file is the .npz `engine.io.save_model` writes (``gplvm-explorer fit
... -o model.npz``, the page's "Trained model (NPZ)" export). Opened with
``gplvm-explorer model.npz`` (or ``Explorer.open_saved`` from code), the page shows the
model's own data as "your data", its settings on the model card (so Train fits
again from scratch with them), and the model itself as a finished result: the
latent map, its variance shading, the ARD bars and the reconstruction come
straight from the saved parameters. Files are read with ``allow_pickle=False``.

A file written by `write` (the command line's fit, the page's export) also
holds what the page showed about the model (`gplvm_explorer.saved_context`,
entries the engine ignores): the column names, the labels, the image shape,
the standardisation, the objective trace, the iterations and the settings, so
the opened model comes back as it was.  Files without them still open (with
the data's columns called x1, x2, ... and no trace).

Models with inputs besides the data matrix (the dynamical GP-LVM's times, MRD's
views, the deep GP's layers) are refused with a message: load them with
``engine.io.load_model`` instead.
"""
from __future__ import annotations

import dataclasses
import io
import logging
import zipfile
from pathlib import Path

import numpy as np

from engine.errors import EngineError

from .catalog import CATALOG, KERNELS, Budget, ModelConfig, ModelSpec, open_excess
from .data import DataError, Dataset
from .saved_context import ENTRIES, SavedContext, context_arrays, read_context
from .text import plain, quote
from .training.result import TrainedResult

logger = logging.getLogger(__name__)

__all__ = ["is_model_file", "load", "write", "read_labels", "read_context", "config_for", "dataset_for",
           "prepare_opening"]

#: Entries every file written by engine.io.save_model holds.
MODEL_ENTRIES = ("format_version.npy", "model_class.npy")
#: Entries the app adds (the engine's loader ignores them): one label per row, and the labels' name.
LABELS_ENTRY, LABEL_NAME_ENTRY = ENTRIES["labels"], ENTRIES["label_name"]


def _source(source):
    return io.BytesIO(source) if isinstance(source, (bytes, bytearray, memoryview)) else Path(source).expanduser()


def is_model_file(source) -> bool:
    """True when ``source`` (a path or a file's bytes) is an .npz written by `engine.io.save_model`."""
    try:
        with zipfile.ZipFile(_source(source)) as z:
            names = set(z.namelist())
    except (OSError, zipfile.BadZipFile, ValueError):
        return False
    return all(entry in names for entry in MODEL_ENTRIES)


def write(model, target, labels=None, label_name: str | None = None, context: SavedContext | None = None) -> None:
    """`engine.io.save_model`'s file plus the app's ``context`` (`saved_context`), or just one label per
    row (``labels``, ``label_name``); ``target`` is a path or a file object."""
    from engine.io import model_arrays

    arrays = model_arrays(model)
    if context is None and labels is not None:
        context = SavedContext(labels=np.asarray(labels), label_name=label_name)
    if context is not None:
        arrays.update(context_arrays(context))
    np.savez_compressed(target, **arrays)


def read_labels(source, n: int) -> tuple:
    """(labels (n,), name) saved by `write` in ``source``, or (None, None) when there are none (or bad ones)."""
    ctx = read_context(source, n, None)
    return ctx.labels, ctx.label_name


def spec_for(model) -> ModelSpec:
    """The catalog entry of ``model``'s class (or of the class it specialises: a non-Gaussian
    ``BayesianGPLVM(..., likelihood="bernoulli")`` is a subclass); DataError for the models the page cannot open."""
    from engine.io import public_class_name

    return spec_for_class(public_class_name(model))


def spec_for_class(name: str) -> ModelSpec:
    """The catalog entry of the engine class ``name``; DataError for the models the page cannot open."""
    for spec in CATALOG.values():
        if spec.engine_class == name:
            if spec.inputs:
                raise DataError(f"A saved {spec.display_name} cannot be opened in the app yet (it needs its "
                                f"{', '.join(spec.inputs)} as well); load it with engine.io.load_model.")
            return spec
    raise DataError(f"The app cannot show a saved {plain(name, 60)}; load it with engine.io.load_model.")


#: Largest total size of the arrays in a model file, uncompressed (a small file may unpack to a lot).
MAX_UNPACKED_BYTES = 2 * 1024 ** 3


def size_guard(name: str, budget: Budget | None = None):
    """``check_size(dimensions)`` for `engine.io.load_model`: the training's size guard
    (`catalog.open_excess`) on the saved model's N, D, Q, M, before it is built (DataError)."""

    def check_size(dims) -> None:
        spec = spec_for_class(dims.model_class)
        excess = open_excess(spec.key, dims.N, dims.D, dims.Q, dims.M, budget)
        if excess:
            raise DataError(f"{quote(name)} is too big to open here: {excess}.")

    return check_size


def load(source, name: str = "model.npz", max_unpacked: int = MAX_UNPACKED_BYTES, budget: Budget | None = None):
    """The engine model saved in ``source`` (path or bytes), checked to be one the page can show.

    Raises `DataError` with a message for people when the file is damaged, not a
    model, its arrays would take more than ``max_unpacked`` bytes, or the model
    would not fit the session's ``budget`` (checked before it is built, as training is).
    """
    from engine.io import load_model

    try:
        return load_model(_source(source), max_bytes=max_unpacked, check_size=size_guard(name, budget))
    except EngineError as exc:
        raise DataError(f"{quote(name)} is not a model the app can open: {exc}") from None


def _kernel_settings(model) -> dict:
    """kernel family, bias, white of ``model``'s kernel, as the model card names them."""
    spec = model._kernel.to_spec()
    parts = spec.get("parts", [spec]) if spec.get("type") == "sum" else [spec]
    types = [p.get("type") for p in parts]
    family = next((t for t in types if t in KERNELS), "rbf")
    return {"kernel": family, "bias": "bias" in types, "white": "white" in types}


#: Settings a saved file may give (each checked against the model itself or the catalog).
_SAVED_SETTINGS = ("init", "optimizer", "max_iters", "seed", "batch_size")


def config_for(model, max_iters: int = 300, settings: dict | None = None) -> ModelConfig:
    """The settings that build a model like ``model`` (for Train, the summary and the views): its kind,
    kernel and sizes read from the model; the rest from the ``settings`` it was saved with, when they fit."""
    spec = spec_for(model)
    kwargs = dict(model=spec.key, latent_dim=int(model.latent_dim), max_iters=int(max_iters),
                  **_kernel_settings(model))
    likelihood = str(getattr(model, "likelihood", "gaussian"))
    if likelihood != "gaussian":
        if likelihood not in spec.likelihoods:
            raise DataError(f"The app trains the {spec.display_name} with the Gaussian likelihood only, not "
                            f"likelihood={plain(likelihood, 30)!r}; load it with engine.io.load_model.")
        kwargs["likelihood"] = likelihood
    if spec.uses_inducing:
        kwargs["num_inducing"] = int(model.num_inducing)
    if spec.minibatch:
        kwargs["batch_size"] = int(getattr(model, "batch_size", ModelConfig.batch_size))
        kwargs["optimizer"] = spec.optimizers[0]
    saved = {k: v for k, v in (settings or {}).items() if k in _SAVED_SETTINGS}
    for key, value in saved.items():
        default = getattr(ModelConfig, key)
        if type(value) is not type(default) or (key == "optimizer" and value not in spec.optimizers):
            logger.warning("Saved model: setting %s=%r not used", key, value)
            continue
        if key == "batch_size" and spec.minibatch:
            continue  # the model's own
        kwargs[key] = value
    return ModelConfig(**kwargs)


def dataset_for(model, name: str, labels=None, label_name: str | None = None,
                context: SavedContext | None = None) -> Dataset:
    """The data ``model`` was trained on, as the page's `Dataset` (nothing dropped or scaled again): in the
    units it was trained in, with the column names, image shape and standardisation of ``context``."""
    import dataclasses

    from .data.frames import from_array
    from .text import plain

    ctx = context or SavedContext()
    if labels is None:
        labels, label_name = ctx.labels, ctx.label_name
    Y = np.asarray(model._Y_data, dtype=float)
    ds = from_array(Y, labels, name=name, standardize=False, drop_constant=False)
    changes = {}
    if labels is not None and label_name:
        changes["label_name"] = plain(label_name, 120)
    if ctx.feature_names is not None:
        changes["feature_names"] = list(ctx.feature_names)
    if ctx.image_shape is not None:
        changes["image_shape"] = tuple(ctx.image_shape)
    if ctx.scale is not None:
        changes["mean"], changes["scale"] = ctx.mean, ctx.scale
    return dataclasses.replace(ds, **changes) if changes else ds


def prepare_opening(model, name: str, labels=None, label_name: str | None = None, max_iters: int = 300,
                    run_id: int = 0, context: SavedContext | None = None):
    """(config, dataset, result) that show ``model`` on a page, all computed (the objective too)
    before the page changes; DataError, or the engine's error, says why it cannot be shown.
    ``context`` (from `read_context`) brings back the data's names, labels, image shape and
    standardisation, the iterations and the settings."""
    ctx = context or SavedContext()
    config = config_for(model, max_iters=max_iters, settings=ctx.settings)
    dataset = dataset_for(model, name, labels, label_name, ctx)
    return config, dataset, TrainedResult.from_model(model, run_id=run_id, config=config, dataset=dataset,
                                                     iteration=ctx.iterations or 0)
