"""The start of a full-batch fit: the model built with BLAS on one thread, falling back to other
starts when the numbers refuse the one asked for."""
from __future__ import annotations

import dataclasses
import logging
import threading

import numpy as np

from ..catalog import ModelConfig

logger = logging.getLogger(__name__)

__all__ = ["build_pinned", "check_start", "start_with_fallbacks"]


def build_pinned(build, Y, config):
    """``build(Y, config)`` with BLAS on one thread: the initialisation's few small products
    (PCA of an (N, D) matrix) took ~0.7 s at 20,000 rows with OpenBLAS's threads on a busy
    two-core machine, ~0.07 s on one."""
    import engine

    with engine.single_blas_thread():
        return build(Y, config)


def start_with_fallbacks(build, Y, config: ModelConfig, stop: threading.Event | None = None) -> tuple | None:
    """(model, objective at its start, config it was built with, note) of a full-batch model:
    when the numbers refuse the start asked for, ``engine.fit_start.start_model`` falls back to a
    random start, then fewer inducing points, and the note says so.  None when ``stop`` was set."""
    from engine.fit_start import start_model

    uses_inducing = config.spec.uses_inducing

    def make(init, num_inducing):
        changed = dataclasses.replace(config, init=init,
                                      num_inducing=num_inducing if uses_inducing else config.num_inducing)
        return build_pinned(build, Y, changed)

    start = start_model(make, config.init, int(config.num_inducing) if uses_inducing else None,
                        optimizer=config.optimizer, stop=stop)
    if start is None:
        return None
    if start.note:
        config = dataclasses.replace(config, init=start.init,
                                     num_inducing=start.num_inducing if uses_inducing else config.num_inducing)
        logger.warning("%s", start.note)
    return start.model, start.objective, config, start.note


def check_start(prepared: float, evaluated: float) -> None:
    """The prepared starting value against the fit's own first evaluation (equal: same model, same point)."""
    if not np.isclose(prepared, evaluated, rtol=1e-9, atol=0.0):
        logger.warning("The prepared starting objective %r differs from the fit's first evaluation %r",
                       prepared, evaluated)
