"""Bayesian GP-LVMs trained on a dask.distributed cluster (``gplvm-explorer --dask-scheduler ADDRESS``).

`connect(address)` opens one ``distributed.Client`` for the process (or
raises `ClusterError` with a message for the terminal); `dask_builder(client)`
is a model builder for `gplvm_explorer.app.create_app(build=...)`: Bayesian
GP-LVMs on complete data get ``engine.DaskBackend(client)`` (their row sums
run on the cluster's workers), every other model is built as usual, in
process. dask is an optional extra: ``pip install 'gplvm-explorer[distributed]'``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["ClusterError", "connect", "dask_builder", "DASK_MODELS"]

#: Models whose fit the engine can spread over a cluster.
DASK_MODELS = ("bayesian",)


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
    """``build(Y, config)``: Bayesian GP-LVMs on complete data on the cluster, the rest in process."""

    def build(Y, config):
        if config.model in DASK_MODELS and not np.isnan(Y).any():
            import engine

            from .catalog import _build_kernel

            return engine.BayesianGPLVM(Y, int(config.latent_dim), kernel=_build_kernel(config),
                                        init=config.init, seed=int(config.seed),
                                        num_inducing=int(config.num_inducing),
                                        backend=engine.DaskBackend(client))
        return config.spec.build(Y, config)

    return build
