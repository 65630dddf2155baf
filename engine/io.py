"""Save and load trained models as .npz files (never pickles).

The file holds plain arrays: the data Y (uncentred), every named parameter
(``param/<name>``), the kernel as JSON text, and the model's class and sizes.
"""
from __future__ import annotations

import json
import zipfile

import numpy as np

from .errors import EngineError, ModelFileError
from .kernels import kernel_from_spec
from .model_file import (SavedDimensions, check_saved_parameters, member_headers, read_members, saved_dimensions,
                         spec_from_json)
from .models.bayesian import BayesianGPLVM
from .models.deep import DeepGP
from .models.dynamical import DynamicalBGPLVM
from .models.gplvm import GPLVM
from .models.mrd import MRD
from .models.sparse import SparseGPLVM
from .models.stochastic import StochasticBayesianGPLVM

FORMAT_VERSION = 1
MODEL_CLASSES = {cls.__name__: cls for cls in (GPLVM, SparseGPLVM, BayesianGPLVM, DeepGP, DynamicalBGPLVM, MRD,
                                                  StochasticBayesianGPLVM)}

__all__ = ["FORMAT_VERSION", "MODEL_CLASSES", "ModelFileError", "SavedDimensions", "load_model", "model_arrays",
           "save_model"]


def public_class_name(model) -> str:
    """The engine class a user builds ``model`` with, e.g. "BayesianGPLVM" also for the model that
    ``BayesianGPLVM(..., likelihood="bernoulli")`` returns (a subclass)."""
    for cls in type(model).__mro__:
        if MODEL_CLASSES.get(cls.__name__) is cls:
            return cls.__name__
    return type(model).__name__


def model_arrays(model) -> dict:
    """Everything needed to rebuild ``model``, as a dict of numpy arrays (``likelihood``: its noise model's name)."""
    arrays = {
        "format_version": np.array(FORMAT_VERSION),
        "model_class": np.array(public_class_name(model)),
        "likelihood": np.array(str(getattr(model, "likelihood", "gaussian"))),
        "kernel_spec": np.array(json.dumps(model._kernel.to_spec())),
        "Y": model._Y_data,  # as given, NaN where missing: the loaded model is built the same way
        "latent_dim": np.array(model.latent_dim),
        "jitter": np.array(float(model.jitter)),
        "fixed": np.array(sorted(model.fixed), dtype=str),
    }
    for name, value in model.parameters.items():
        arrays[f"param/{name}"] = np.asarray(value, dtype=float)
    # the unconstrained vector itself: re-packing the constrained values would round in the last bits
    arrays["free_vector"] = np.asarray(model._free, dtype=float)
    if hasattr(model, "_saved_arrays"):  # models with more than one kernel (DeepGP)
        arrays.update(model._saved_arrays())
    return arrays


def save_model(model, path) -> None:
    """Write ``model`` to ``path`` (.npz; a file-like object works too)."""
    np.savez_compressed(path, **model_arrays(model))


def read_model_file(path, *, max_bytes: float | None = None, check_size=None) -> tuple[dict, SavedDimensions]:
    """(arrays, dimensions) of a model file, every check of `engine.model_file` passed.

    ``max_bytes`` bounds what the arrays take once unpacked (checked from the
    headers, before reading); ``check_size(dimensions)`` is called with the
    model's N, D, Q, M before the data are read (it raises to refuse a model too
    big to build).  Raises `ModelFileError` for anything else wrong with the file.
    """
    try:
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile, EOFError, ValueError) as exc:
        raise ModelFileError(f"Could not read a model file: {exc}") from exc
    with zf:
        headers = member_headers(zf, max_bytes)
        small = {name: h for name, h in headers.items() if name in ("model_class", "latent_dim")}
        dims = saved_dimensions(headers, read_members(zf, small))
        if dims.model_class not in MODEL_CLASSES:
            raise ModelFileError(f"Not a GPLVM Explorer model file (unknown model class {dims.model_class[:60]!r}).")
        if check_size is not None:
            check_size(dims)
        arrays = read_members(zf, headers)
    check_saved_parameters(arrays, dims)
    return arrays, dims


def load_model(path, *, max_bytes: float | None = None, check_size=None):
    """Rebuild a model written by :func:`save_model`; raises ModelFileError on bad files.

    ``max_bytes`` and ``check_size``: see `read_model_file` (nothing is built before they pass).
    """
    arrays, dims = read_model_file(path, max_bytes=max_bytes, check_size=check_size)
    try:
        version = int(arrays["format_version"])
        cls = MODEL_CLASSES[dims.model_class]
        kernel = kernel_from_spec(spec_from_json(arrays["kernel_spec"]))
        params = {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith("param/")}
        Y = arrays["Y"]
        latent_dim = dims.Q
    except (KeyError, ValueError, TypeError) as exc:
        if isinstance(exc, ModelFileError):
            raise
        raise ModelFileError(f"Not a GPLVM Explorer model file (missing or bad entry: {exc}).") from exc
    if version > FORMAT_VERSION:
        raise ModelFileError(f"Model file format {version} is newer than this version supports ({FORMAT_VERSION}).")
    kwargs = {"X": params.get("X_mean")}
    if "Z" in params:
        kwargs["Z"] = params["Z"]
    likelihood = str(arrays["likelihood"]) if "likelihood" in arrays else "gaussian"  # older files: Gaussian
    if likelihood != "gaussian":
        kwargs["likelihood"] = likelihood
    try:
        if hasattr(cls, "_from_saved"):
            model = cls._from_saved(Y, arrays, params)
        else:
            model = cls(Y, latent_dim, kernel=kernel, **kwargs)
        model.set_parameters(**params)
        if "free_vector" in arrays and arrays["free_vector"].shape == model._free.shape:
            model._free = np.array(arrays["free_vector"], dtype=float)
            model._version += 1
        if "jitter" in arrays:  # part of the objective: the loaded model's bound equals the saved one's
            model.jitter = float(arrays["jitter"])
        if "fixed" in arrays and arrays["fixed"].size:
            model.fix(*[str(name) for name in arrays["fixed"]])
    except (EngineError, KeyError) as exc:
        if isinstance(exc, ModelFileError):
            raise
        raise ModelFileError(f"The model file's contents are inconsistent: {exc}") from exc
    return model
