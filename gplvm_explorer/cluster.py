"""Models trained on a dask.distributed cluster (``gplvm-explorer --dask-scheduler ADDRESS``).

`connect(address)` opens one ``distributed.Client`` for the process (or
raises `ClusterError` with a message for the terminal); `dask_builder(client)`
is a model builder for `gplvm_explorer.app.create_app(build=...)`: the models
whose catalog entry is ``distributable`` (Bayesian and sparse GP-LVM, with
complete or missing data) get ``engine.DaskBackend(client)`` (their row sums
run on the cluster's workers); every other model, and a configuration the
backend cannot take, is built as usual, in process. dask is an optional
extra: ``pip install 'gplvm-explorer[distributed]'``.
"""
from __future__ import annotations

import logging

__all__ = ["ClusterError", "connect", "dask_builder"]

logger = logging.getLogger(__name__)


class ClusterError(RuntimeError):
    """The cluster cannot be used (dask missing, scheduler unreachable)."""


def connect(address: str, timeout: float = 10.0):
    """A ``distributed.Client`` connected to the scheduler at ``address``."""
    try:
        from distributed import Client
    except ImportError:
        raise ClusterError(
            "--dask-scheduler needs dask.distributed: pip install 'gplvm-explorer[distributed]'."
        ) from None
    try:
        return Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise ClusterError(f"Cannot reach the dask scheduler at {address}: {exc}") from None


def dask_builder(client):
    """``build(Y, config)``: distributable models on the cluster, the rest in process."""

    def build(Y, config):
        spec = config.spec
        if spec.distributable:
            import engine

            try:
                return spec.build(Y, config, backend=engine.DaskBackend(client))
            except engine.errors.ConfigurationError as exc:  # e.g. missing data with a linear kernel
                logger.warning("Training %s in process, not on the cluster: %s", spec.display_name, exc)
        return spec.build(Y, config)

    return build
