"""The collapsed models' row sums on a dask.distributed cluster (Gal, van der Wilk & Rasmussen 2014).

psi0, P = Psi1^T Y and Psi2 are sums over rows, and so are the gradients
of the bound w.r.t. the kernel parameters and Z; the gradients w.r.t. a
row's q(x_n) need only that row.  :class:`DaskBackend` therefore cuts the
rows into fixed chunks, keeps each chunk of Y on one worker (scattered once,
at :meth:`DaskBackend.setup`), and per evaluation

* forward: ships the globals (kernel, Z) and each chunk's (mu, S) to the
  worker holding the chunk's Y, which returns (psi0, P, Psi2) of its rows;
* backward: ships the cotangents (dF/dpsi0, dF/dP (M, D), dF/dPsi2 (M, M))
  too; the worker returns its rows' gradients w.r.t. mu and S and its sums
  of the kernel-parameter and Z gradients, reusing what the chunk's forward
  pass kept (as the local backend does) when the arguments are the same.

The same for the sparse GP-LVM's point latents (S None: tr Knn, Knm^T Y,
Knm^T Knm) and, with missing outputs, per column group: the groups' row
weights W (N, G) travel with Y at setup, psi0 and Psi2 and their cotangents
are then (G,) and (G, M, M) (:mod:`engine.backends._rows`).

Partial results are reduced here in chunk order by the same code as the
local backend's (:func:`engine.backends._rows.sum_forward`), and a chunk's
statistics are the same function of its rows on a worker as here (BLAS held
to one thread there too): with the same ``chunks`` the bound and every
gradient equal :class:`engine.backends.LocalBackend`'s bit for bit, whatever
the number of workers and whichever worker ran what.  The default chunking
is the local one (``engine.backends.ROW_CHUNK`` rows), so by default they
equal the model's without a backend; other chunks differ from it by the
rounding of another summation order (~1e-15 relative).  Per evaluation the traffic is O(N Q) for the latents plus
O(chunks (M^2 + M D)) for the partial sums; Y (N D) never travels again.

If a worker dies, the tasks on it are rerun elsewhere by the scheduler; a
chunk of Y that lived only on that worker is scattered again from this
process's copy and the evaluation is retried once.  Anything else (no
workers left, a task failing twice) raises :class:`DaskBackendError`, an
:class:`~engine.errors.EngineError`, naming the cause.

dask and distributed are an optional extra (``pip install .[distributed]``)
and are imported only when a DaskBackend is set up.
"""
from __future__ import annotations

import logging
import os

import numpy as np

from .. import psi
from .._threads import blas_pinned
from ..errors import ConfigurationError, EngineError
from ..validation import integer
from . import _rows

logger = logging.getLogger(__name__)


class DaskBackendError(EngineError, RuntimeError):
    """The cluster could not complete an evaluation (workers lost, tasks failed, timeout)."""


# ------------------------------------------------------------------ worker-side functions
# Plain module-level functions over arrays: pickled by reference, run in the workers.


def _aligned(a):
    """``a`` as aligned C-contiguous float64 (copied only if it is not; None stays None).

    An array unpickled on a worker may come out of a message buffer at any byte offset:
    numpy then hands it to its own loops instead of BLAS, which sum in another order, and
    the chunk's sums would differ in the last bits from the same chunk's here.
    """
    return None if a is None else np.require(a, dtype=np.float64, requirements=("C", "A"))


class _Block:
    """One chunk of rows as it lives on a worker: centred Y (n, D), the group weights (n, G) or None,
    and what its last forward pass kept for the backward pass (worker memory only, never pickled)."""

    __slots__ = ("Y", "W", "kept")

    def __init__(self, Y, W):
        self.Y = _aligned(Y)  # here and after unpickling on a worker
        self.W = _aligned(W)
        self.kept = None

    def __reduce__(self):
        return _Block, (self.Y, self.W)


@blas_pinned
def _chunk_forward(block, kernel, Z, mu, S):
    """(psi0, P (M, D), Psi2) of one chunk of rows (:func:`engine.backends._rows.forward`).

    The psi module keeps one forward pass per thread for the backward pass; a worker
    runs all its chunks' forward passes before their backward passes, so the chunk
    holds its own until its backward pass (O(n M) floats for its n rows, as the local
    backend holds for all N; a backward pass at other arguments recomputes it).
    """
    psi.restore_forward(None)
    stats = _rows.forward(block.Y, block.W, kernel, _aligned(Z), _aligned(mu), _aligned(S))
    block.kept = psi.take_forward()
    return stats


@blas_pinned
def _chunk_backward(block, kernel, Z, mu, S, dpsi0, dP, dPsi2):
    """engine.psi.PsiGradients of one chunk: per-row mu (and S) gradients, parameter and Z sums."""
    kept, block.kept = block.kept, None
    psi.restore_forward(kept)
    try:
        if np.ndim(dpsi0):
            dpsi0 = _aligned(dpsi0)
        return _rows.backward(block.Y, block.W, kernel, _aligned(Z), _aligned(mu), _aligned(S), dpsi0, _aligned(dP),
                              _aligned(dPsi2))
    finally:
        psi.restore_forward(None)


def _worker_pid():
    return os.getpid()


# ------------------------------------------------------------------ the backend


class DaskBackend:
    """Row sums of the bound computed over row chunks on a dask.distributed cluster.

    ``engine.BayesianGPLVM(Y, ..., backend=engine.DaskBackend(client))``.

    client : a ``distributed.Client``.
    chunks : rows per chunk (int), or None for the local backend's
        (``engine.backends.ROW_CHUNK``).  The chunking is fixed at setup and fixes the
        summation order (the chunks are spread over the workers present at
        :meth:`setup`; with fewer chunks than workers some workers hold none).
    timeout : seconds one evaluation may wait for the cluster before
        :class:`DaskBackendError` (None: no limit).
    retries : how many times an evaluation is retried after lost workers or
        lost data (the lost chunks of Y are scattered again first).
    """

    def __init__(self, client, chunks=None, timeout=None, retries=1):
        if chunks is not None:
            chunks = integer(chunks, "chunks (rows per chunk, or None)")
        if not hasattr(client, "scatter") or not hasattr(client, "submit"):
            raise ConfigurationError(f"Expected a dask.distributed Client, got {type(client).__name__} instead.")
        self.client = client
        self.chunks = None if chunks is None else int(chunks)
        self.timeout = timeout
        self.retries = int(retries)
        self._bounds = None
        self._Y = None
        self._W = None
        self._futures = None
        self._homes = None

    # ---- data placement ---------------------------------------------------------------
    def setup(self, Y: np.ndarray, weights: np.ndarray | None = None) -> None:
        """Cut the (N, D) centred outputs (and, with missing outputs, the (N, G) group weights) into
        row chunks and scatter each chunk to one worker, once."""
        Y = np.ascontiguousarray(Y, dtype=np.float64)
        if weights is not None:
            weights = np.ascontiguousarray(weights, dtype=np.float64)
            if weights.ndim != 2 or weights.shape[0] != Y.shape[0]:
                raise ConfigurationError(f"Expected weights of shape ({Y.shape[0]}, G), got {weights.shape} instead.")
        workers = self._workers()
        self._bounds = _rows.chunk_bounds(Y.shape[0], self.chunks)
        self._Y = Y
        self._W = weights
        self._homes = [workers[i % len(workers)] for i in range(len(self._bounds))]
        self._futures = [None] * len(self._bounds)
        self._scatter(range(len(self._bounds)))

    def _workers(self) -> list:
        try:
            # asked of the scheduler each time: Client.scheduler_info() returns a cache that the client's
            # own periodic refresh may have just replaced by one without per-worker entries
            workers = sorted(self.client.nthreads())
        except Exception as exc:  # noqa: BLE001 - any failure to reach the scheduler
            raise DaskBackendError(f"Could not reach the dask scheduler: {exc}") from exc
        if not workers:
            raise DaskBackendError("The dask cluster has no workers; start some (e.g. `dask worker ADDRESS`).")
        return workers

    def _scatter(self, indices) -> None:
        alive = set(self._workers())
        for i in indices:
            if self._homes[i] not in alive:
                self._homes[i] = sorted(alive)[i % len(alive)]
            a, b = self._bounds[i]
            block = _Block(self._Y[a:b], None if self._W is None else self._W[a:b])
            self._futures[i] = self.client.scatter(block, workers=[self._homes[i]], hash=False)

    @property
    def num_chunks(self) -> int:
        return 0 if self._bounds is None else len(self._bounds)

    def worker_pids(self) -> dict:
        """Process id of every worker, by address (for checking where work runs)."""
        return self.client.run(_worker_pid)

    # ---- evaluation -------------------------------------------------------------------
    def _map(self, fn, globals_, mu, S, *extra):
        """fn(Y_chunk, *globals_, mu_chunk, S_chunk, *extra) on every chunk; results in chunk order."""
        if self._bounds is None:
            raise ConfigurationError("DaskBackend.setup(Y) must be called first (the model does it).")
        mu = np.ascontiguousarray(mu, dtype=np.float64)
        S = None if S is None else np.ascontiguousarray(S, dtype=np.float64)
        if mu.shape[0] != self._Y.shape[0] or (S is not None and S.shape != mu.shape):
            raise ConfigurationError(f"Expected mu and S with {self._Y.shape[0]} rows, got {mu.shape} and "
                                     f"{None if S is None else S.shape} instead.")
        from distributed import wait

        attempt = 0
        while True:
            futures = [self.client.submit(fn, self._futures[i], *globals_, mu[a:b], None if S is None else S[a:b],
                                          *extra,
                                          workers=[self._homes[i]], allow_other_workers=True, pure=False)
                       for i, (a, b) in enumerate(self._bounds)]
            try:
                wait(futures, timeout=self.timeout)
                bad = [f for f in futures if f.status != "finished"]
                if not bad:
                    return self.client.gather(futures)
                cause = _describe_failure(bad[0])
            except Exception as exc:  # noqa: BLE001 - timeouts, lost connections, cancelled futures
                cause = f"{type(exc).__name__}: {exc}"
            finally:
                for f in futures:
                    f.release()
            lost = [i for i, f in enumerate(self._futures) if f.status != "finished"]
            if attempt >= self.retries:
                raise DaskBackendError(
                    f"The dask cluster failed to evaluate the psi statistics ({cause}); {len(lost)} chunk(s) of the "
                    f"data were lost. Check the workers (a worker may have died or run out of memory) and fit "
                    "again; the model keeps its last accepted parameters.")
            attempt += 1
            logger.warning("DaskBackend: evaluation failed (%s); scattering %d lost chunk(s) again and retrying.",
                           cause, len(lost))
            try:
                self._scatter(lost)
            except DaskBackendError:
                raise
            except Exception as exc:  # noqa: BLE001
                raise DaskBackendError(f"Could not scatter the data to the workers again: {exc}") from exc

    def forward(self, kernel, Z, mu, S):
        """(psi0, P = Psi1^T Y (M, D), Psi2 (M, M)), summed over the chunks in order; per column
        group (psi0 (G,), Psi2 (G, M, M)) when set up with weights; S None: points (sparse GP-LVM)."""
        Z = np.ascontiguousarray(Z, dtype=np.float64)
        return _rows.sum_forward(self._map(_chunk_forward, (kernel, Z), mu, S))

    def backward(self, kernel, Z, mu, S, dpsi0, dP, dPsi2):
        """engine.psi.PsiGradients of dpsi0 psi0 + <dP, Psi1^T Y> + <dPsi2, Psi2> (summed over the groups
        when set up with weights): per-row mu and S gradients concatenated (S: None for points),
        kernel-parameter and Z gradients summed in chunk order."""
        Z = np.ascontiguousarray(Z, dtype=np.float64)
        dpsi0 = float(dpsi0) if np.ndim(dpsi0) == 0 else np.ascontiguousarray(dpsi0, dtype=np.float64)
        return _rows.sum_backward(self._map(_chunk_backward, (kernel, Z), mu, S, dpsi0,
                                            np.ascontiguousarray(dP, dtype=np.float64),
                                            np.ascontiguousarray(dPsi2, dtype=np.float64)))

    def close(self) -> None:
        """Release the scattered data (the client stays open)."""
        for f in self._futures or ():
            if f is not None:
                f.release()
        self._futures = None
        self._bounds = None
        self._Y = self._W = None

    def __repr__(self):
        address = getattr(getattr(self.client, "scheduler", None), "address", "?")
        return f"DaskBackend(scheduler={address!r}, chunks={self.num_chunks})"


def _describe_failure(future) -> str:
    try:
        exc = future.exception(timeout=1)
    except Exception as inner:  # noqa: BLE001 - cancelled / lost futures have no exception object
        return f"task {future.status}: {type(inner).__name__}: {inner}"
    return f"{type(exc).__name__}: {exc}" if exc is not None else f"task {future.status}"


__all__ = ["DaskBackend", "DaskBackendError"]
