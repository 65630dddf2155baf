"""Training data for minibatch models: the command-line ``.npy`` file memory-mapped, not copied.

A model trained by minibatches (``ModelSpec.minibatch``) reads a few hundred
rows per iteration.  When the data on show are exactly the ``.npy`` file given
on the command line (``gplvm-explorer big.npy``: same shape, nothing
standardised, filled in or dropped), it trains on the file itself, mapped
read-only with ``np.load(mmap_mode="r")``; the rows are read from disk as the
minibatches need them.  Anything else trains on the dataset's array as it is.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np

from .npfile import map_npy

logger = logging.getLogger(__name__)

__all__ = ["PRELOAD_ENV", "command_line_npy", "training_dataset"]

#: Set by ``gplvm-explorer FILE`` (the same variable as ``gplvm_explorer.serving.PRELOAD_ENV``).
PRELOAD_ENV = "GPLVM_EXPLORER_FILE"


def command_line_npy() -> Path | None:
    value = os.environ.get(PRELOAD_ENV, "").strip()
    path = Path(value) if value else None
    return path if path is not None and path.suffix.lower() == ".npy" and path.is_file() else None


def _same_rows(ds, mapped: np.ndarray) -> bool:
    """The dataset holds the file's values unchanged: same shape and equal sampled rows."""
    if ds.mean is not None or ds.scale is not None or ds.imputed is not None:
        return False
    if tuple(ds.values.shape) != tuple(mapped.shape):
        return False
    n = mapped.shape[0]
    rows = sorted({0, n // 3, n // 2, (2 * n) // 3, n - 1})
    ours = np.asarray(ds.values[rows], dtype=float)
    theirs = np.asarray(mapped[rows], dtype=float)
    return bool(np.array_equal(ours, theirs, equal_nan=True))


def training_dataset(ds, spec):
    """``ds``, with its values memory-mapped from the command-line ``.npy`` file when ``spec``
    trains by minibatches and ``ds`` is that file unchanged."""
    if ds is None or not getattr(spec, "minibatch", False) or isinstance(ds.values, np.memmap):
        return ds
    path = command_line_npy()
    if path is None:
        return ds
    mapped = map_npy(path)
    if mapped is None or not _same_rows(ds, mapped):
        return ds
    logger.info("Training on %s memory-mapped (%d x %d)", path.name, *mapped.shape)
    # Dataset() would turn the values into a plain in-memory array; they were validated when the
    # file was loaded and are the same numbers, so the copy takes the mapped file as it is
    out = ds.replace()
    object.__setattr__(out, "values", mapped)
    return out
