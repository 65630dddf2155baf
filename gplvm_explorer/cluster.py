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

import asyncio
import logging
import socket
import threading
import time

__all__ = ["ClusterError", "connect", "dask_builder", "scheduler_host_port"]

logger = logging.getLogger(__name__)


class ClusterError(RuntimeError):
    """The cluster cannot be used (dask missing, scheduler unreachable)."""


def scheduler_host_port(address: str) -> tuple[str, int]:
    """(host, port) of a dask scheduler address (``tcp://host:8786``, ``host:8786``, ``tls://...``);
    ClusterError saying what is wrong with it otherwise, before any connection is tried."""
    from distributed.comm.addressing import get_address_host_port

    try:
        host, port = get_address_host_port(str(address).strip())
    except ValueError as exc:
        raise ClusterError(f"{address!r} is not a dask scheduler address ({exc}); give one such as "
                           "tcp://host:8786.") from None
    if not 1 <= int(port) <= 65535:
        raise ClusterError(f"{address!r} is not a dask scheduler address (port {port} is outside 1-65535).")
    return host, int(port)


def _reachable(host: str, port: int, timeout: float) -> None:
    """Open and close a TCP connection to (host, port); ClusterError with the reason if it fails."""
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except socket.gaierror:
        raise ClusterError(f"unknown host {host!r}") from None
    except ConnectionRefusedError:
        raise ClusterError(f"nothing listens on port {port} of {host} (is the scheduler running?)") from None
    except (TimeoutError, socket.timeout):
        raise ClusterError(f"no answer within {timeout:.0f} s") from None
    except OSError as exc:
        raise ClusterError(exc.strerror or str(exc)) from None


async def _identity(address: str, timeout: float) -> dict:
    """The answer of whatever listens at ``address`` to dask's "identity" request."""
    from distributed.comm import connect as open_comm

    comm = await open_comm(address, timeout=timeout)
    try:
        await comm.write({"op": "identity", "reply": True})
        return await comm.read()
    finally:
        await comm.close()


def _is_scheduler(address: str, timeout: float) -> None:
    """ClusterError unless a dask scheduler answers at ``address`` within ``timeout`` seconds."""
    try:
        answer = asyncio.run(asyncio.wait_for(_identity(address, timeout), timeout))
    except (asyncio.TimeoutError, TimeoutError):
        raise ClusterError(f"no answer within {timeout:.0f} s") from None
    except Exception:  # noqa: BLE001 - a peer that speaks another protocol makes dask's reader fail in many ways
        answer = None
    if not isinstance(answer, dict) or answer.get("type") != "Scheduler":
        raise ClusterError("what answers there is not a dask scheduler") from None


def connect(address: str, timeout: float = 10.0):
    """A ``distributed.Client`` connected to the scheduler at ``address``, within ``timeout`` seconds.

    ClusterError (one line for the terminal) when dask is missing, the address is
    malformed, nothing answers there, or what answers is not a scheduler.  The
    connection is made on a daemon thread and given up after ``timeout`` (dask's own
    timeout does not cover a peer that accepts and then stays silent).
    """
    try:
        from distributed import Client
    except ImportError:
        raise ClusterError(
            "--dask-scheduler needs dask.distributed: pip install 'gplvm-explorer[distributed]'."
        ) from None
    host, port = scheduler_host_port(address)
    deadline = time.monotonic() + timeout
    outcome: dict = {}

    def attempt():
        try:
            _reachable(host, port, timeout)
            _is_scheduler(address, max(deadline - time.monotonic(), 0.5))
            # only now a Client: one that fails half-built hangs the interpreter's exit for 20 s
            outcome["client"] = Client(address, timeout=max(deadline - time.monotonic(), 1.0), set_as_default=False)
        except Exception as exc:  # noqa: BLE001 - reported to the caller below
            outcome["error"] = exc

    thread = threading.Thread(target=attempt, name="gplvm-dask-connect", daemon=True)
    thread.start()
    thread.join(max(deadline - time.monotonic(), 0.0) + 0.5)
    if thread.is_alive():
        raise ClusterError(f"Cannot reach the dask scheduler at {address}: no answer within {timeout:.0f} s.")
    if "error" in outcome:
        reason = str(outcome["error"]) or type(outcome["error"]).__name__
        raise ClusterError(f"Cannot reach the dask scheduler at {address}: {reason.rstrip('.')}.")
    return outcome["client"]


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
