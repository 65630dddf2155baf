"""Training data for minibatch models: an ``.npy`` file on the server's disk memory-mapped, not copied.

A model trained by minibatches (``ModelSpec.minibatch``) reads a few hundred
rows per iteration.  When the data to train on are exactly an ``.npy`` file's
array (``Dataset.source_path``, recorded when the file was loaded from a path,
e.g. ``gplvm-explorer big.npy``: nothing standardised, filled in or dropped),
it trains on the file itself, mapped read-only with ``np.load(mmap_mode="r")``;
the rows are read from disk as the minibatches need them.  Anything else
trains on the dataset's array as it is.
"""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from .npfile import map_npy

logger = logging.getLogger(__name__)

__all__ = ["training_dataset"]


def training_dataset(ds, spec):
    """``ds``, with its values memory-mapped from its ``.npy`` file when ``spec`` trains by
    minibatches and ``ds`` holds that file's array as it is (``ds.source_path``)."""
    if ds is None or not getattr(spec, "minibatch", False) or isinstance(ds.values, np.memmap):
        return ds
    path = Path(ds.source_path) if ds.source_path else None
    if path is None or path.suffix.lower() != ".npy":
        return ds
    mapped = map_npy(path)
    if mapped is None or tuple(mapped.shape) != tuple(ds.shape):  # the file changed since it was read
        return ds
    logger.info("Training on %s memory-mapped (%d x %d)", path.name, *mapped.shape)
    return ds.replace(values=mapped, source_path=ds.source_path)
