"""Where a model reads its training outputs Y (N, D): held in memory, or a memmap read by row chunks.

Every model's constructor hands its data to :class:`LatentVariableModel` through
one of these sources, which validate Y, centre it and answer what the model
needs of it before it has parameters (the column means, the data's variance
for the default noise, the PCA fractions for the default ARD lengthscales,
the initial latents):

* :class:`InMemoryRows` -- Y as a float64 array, centred once (``Y``); with
  missing values (models that train with them) the NaN entries or an
  ``observed`` mask give the column means over the observed entries and
  zeros at the missing ones; a non-Gaussian likelihood checks Y's support
  and may leave it uncentred (``Y_mean`` zero).
* :class:`ChunkedRows` -- Y as given (a numpy memmap stays on disk; a
  non-Gaussian likelihood checks every chunk's support and leaves Y uncentred): the mean
  and the centred scatter matrix come from one pass over fixed row chunks of
  ``chunk_size`` rows; :meth:`ChunkedRows.read` returns centred float64 rows
  (a chunk or sorted indices).  The PCA start is the chunked projection on
  the scatter matrix's top eigenvectors.

Both have ``num_data``, ``output_dim``, ``Y_mean`` (D,), ``observed`` (N, D) or
None, ``data`` (Y as given, NaN where missing: what model files save),
:meth:`read`, :meth:`chunks`,
:meth:`mean_variance`, :meth:`pca_fractions`, :meth:`initial_latents` and
:meth:`load`.
"""
from __future__ import annotations

import numpy as np

from ..backends._rows import ROW_CHUNK
from ..errors import ConfigurationError
from ..init import (ISOMAP_MAX_POINTS, METHODS, initial_latents, pca_variance_fractions, standardised_latents,
                    top_components)
from ..missing import observation_mask
from ..validation import check_finite_rows, integer, real_matrix


class InMemoryRows:
    """Y (N, D) in memory, centred (module docstring).

    ``missing``: whether NaN entries (or ``observed``) are missing values the
    model trains with; otherwise NaN is refused and ``observed`` must be None
    (``owner`` names the model in that message).
    """

    in_memory = True

    def __init__(self, Y, observed=None, missing=False, owner="The model", likelihood=None):
        if missing:
            Y, mask = observation_mask(real_matrix(Y, allow_nan=True), observed)
        else:
            if observed is not None:
                raise ConfigurationError(f"{owner} cannot train with missing values; use "
                                         "BayesianGPLVM or SparseGPLVM, or impute the data first.")
            Y, mask = real_matrix(Y).copy(), None
        centre = True
        if likelihood is not None:  # a non-Gaussian noise model: Y in its support, not centred
            likelihood.check(Y, mask)
            centre = likelihood.centres_data
        # the data as given (NaN where missing): what files save and impute() returns unchanged
        self.data = Y if mask is None else np.where(mask, Y, np.nan)
        self.data.flags.writeable = False
        #: (N, D) bool mask of the observed entries of Y, or None when all are observed.
        self.observed = mask
        if not centre:
            self.Y_mean = np.zeros(Y.shape[1])
            self.Y = np.ascontiguousarray(Y if mask is None else Y * mask)
        elif mask is None:
            self.Y_mean = Y.mean(axis=0)
            self.Y = np.ascontiguousarray(Y - self.Y_mean)
        else:  # column means over the observed entries; missing entries held at 0 (never read)
            self.Y_mean = Y.sum(axis=0) / mask.sum(axis=0)
            self.Y = np.ascontiguousarray((Y - self.Y_mean) * mask)
        self.num_data, self.output_dim = self.Y.shape

    def read(self, rows) -> np.ndarray:
        """Centred rows: a range (start, stop) or indices; 0 where missing."""
        return self.Y[rows[0]:rows[1]] if isinstance(rows, tuple) else self.Y[rows]

    def chunks(self, size: int | None = None) -> list:
        """Row ranges (start, stop) of ``size`` rows (all rows in one when None)."""
        size = self.num_data if size is None else size
        return [(a, min(a + size, self.num_data)) for a in range(0, self.num_data, size)]

    def mean_variance(self) -> float:
        """The mean over columns of the centred data's variance (what the default noise is a tenth of)."""
        return float(np.mean(self.Y.var(axis=0)))

    def pca_fractions(self, Q: int) -> np.ndarray:
        return pca_variance_fractions(self.Y, Q)

    def initial_latents(self, Q: int, init: str, seed) -> np.ndarray:
        return initial_latents(self.Y, Q, method=init, seed=seed)

    def load(self) -> np.ndarray:
        """Y as given (NaN where missing), float64."""
        return np.asarray(self.data, dtype=np.float64)


class ChunkedRows:
    """Y (N, D) as given, read by fixed chunks of ``chunk_size`` rows or by sorted row indices (module docstring).

    A numpy memmap is never copied nor loaded as a whole; Y must be finite (the
    models reading it this way do not train with missing values).
    """

    in_memory = False
    observed = None

    def __init__(self, Y, chunk_size: int = ROW_CHUNK, likelihood=None):
        #: Y as given; ``trYY``: the sum of the centred squares; ``scatter``: the centred Y^T Y (D, D).
        self.data = real_matrix(Y, load=False)
        self.num_data, self.output_dim = (int(s) for s in self.data.shape)
        self.chunk_size = integer(chunk_size, "chunk_size")
        self.Y_mean, self.scatter, self.trYY = self._moments(likelihood)
        if likelihood is not None and not likelihood.centres_data:
            # read() gives Y as it is; the scatter stays centred (the PCA start)
            self.Y_mean = np.zeros(self.output_dim)

    def chunks(self, size: int | None = None) -> list:
        """Row ranges (start, stop) of the fixed chunking (``chunk_size`` rows unless ``size``)."""
        N, c = self.num_data, self.chunk_size if size is None else size
        return [(a, min(a + c, N)) for a in range(0, N, c)]

    def read(self, rows) -> np.ndarray:
        """Centred float64 rows of Y: a range (start, stop) or sorted indices (B,)."""
        block = self.data[rows[0]:rows[1]] if isinstance(rows, tuple) else self.data[rows]
        return np.asarray(block, dtype=np.float64) - self.Y_mean

    def _moments(self, likelihood=None):
        """(mean (D,), centred scatter matrix (D, D), centred sum of squares) from one chunked pass
        (each chunk checked against a non-Gaussian ``likelihood``'s support)."""
        N, D = self.num_data, self.output_dim
        total = np.zeros(D)
        shift = None
        scatter = np.zeros((D, D))
        for a, b in self.chunks():
            block = np.asarray(self.data[a:b], dtype=np.float64)
            check_finite_rows(block, "Y", a, "This model does not handle missing values; remove or impute them "
                                             "first, or use BayesianGPLVM or SparseGPLVM.")
            if likelihood is not None:
                likelihood.check(block, None, "Y", row_offset=a)
            if shift is None:
                shift = block.mean(axis=0)
            centred = block - shift
            total += centred.sum(axis=0)
            scatter += centred.T @ centred
        offset = total / N
        mean = shift + offset
        scatter -= N * np.outer(offset, offset)
        scatter = 0.5 * (scatter + scatter.T)
        return mean, scatter, float(np.trace(scatter))

    def mean_variance(self) -> float:
        return float(np.trace(self.scatter)) / (self.num_data * self.output_dim)

    def _components(self, Q):
        return top_components(self.scatter, min(Q, self.num_data - 1, self.output_dim))

    def pca_fractions(self, Q: int) -> np.ndarray:
        """Each top principal component's variance over the largest, (Q,) (0 beyond the rank)."""
        w = self._components(Q)[0]
        fractions = np.zeros(Q)
        if w.size and w[0] > 0:
            fractions[:w.size] = w / w[0]
        return fractions

    def initial_latents(self, Q: int, init: str, seed) -> np.ndarray:
        """As :func:`engine.init.initial_latents`, PCA scores by one chunked pass; Isomap loads Y (small N only)."""
        N = self.num_data
        rng = np.random.default_rng(seed)
        if init == "pca":
            V = self._components(Q)[1]
            scores = np.empty((N, V.shape[1]))
            for a, b in self.chunks():
                scores[a:b] = self.read((a, b)) @ V
            return standardised_latents(scores, Q, rng)
        if init == "random":
            return rng.standard_normal((N, Q))
        if init == "isomap":
            if N > ISOMAP_MAX_POINTS:
                raise ConfigurationError(f"Expected init='pca' or 'random' for {N} rows; Isomap accepts at most "
                                         f"{ISOMAP_MAX_POINTS} rows.")
            return initial_latents(self.load(), Q, method="isomap", seed=seed)
        raise ConfigurationError(f"Expected init to be one of {METHODS}, got {init!r} instead.")

    def load(self) -> np.ndarray:
        """Y (N, D) as an in-memory float64 array (loads everything; used to save the model)."""
        return np.asarray(self.data, dtype=np.float64)


__all__ = ["ChunkedRows", "InMemoryRows"]
