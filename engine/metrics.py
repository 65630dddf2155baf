"""Quality measures of a latent space.

* :func:`one_nn_errors` / :func:`one_nn_error_rate`: leave-one-out
  1-nearest-neighbour classification errors in latent space, the measure of
  Lawrence 2005 (Table 3: oil data, PCA 162 errors, GP-LVM 1) and Titsias &
  Lawrence 2010 (section 5.1: Bayesian GP-LVM 3 errors, sparse GP-LVM 26).
* :func:`most_relevant_dims`: the latent dimensions to show first, by ARD
  relevance.
* :func:`held_out`: scores of a trained model on rows it was not trained on:
  the log density of each whole row (Titsias & Lawrence 2010, eq. 20: the
  bound with the row added minus the training bound, i.e.
  ``model.infer_latent(Y_test).log_density``) and the reconstruction RMSE of
  half of each row's entries predicted from the other half (the papers' test
  sets with missing outputs).
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
from scipy.spatial.distance import cdist

from .errors import ConfigurationError, ShapeError
from .validation import real_array, real_matrix

__all__ = ["HeldOutScore", "held_out", "half_observed", "one_nn_errors", "one_nn_error_rate", "most_relevant_dims"]

# Distances are computed a block of rows at a time, at most this many entries
# (32 MB of float64), so memory stays O(N) rows of work for any N.
_BLOCK_ENTRIES = 1 << 22


def one_nn_errors(X, labels):
    """Leave-one-out 1-nearest-neighbour classification errors.

    Each point ``n`` is given the label of its nearest *other* point in ``X``
    (Euclidean distance); the result counts points whose predicted label
    differs from their own.  Ties between equally near points are broken by
    the lowest index.  Distances are evaluated directly as sums of squared
    differences, so exactly equal distances compare equal.

    Parameters
    ----------
    X : array_like, shape (N, Q)
        Finite latent positions (e.g. ``model.X_mean``), ``N >= 2``.
    labels : array_like, shape (N,)
        Class of each point: integers, strings, or any values comparable with
        ``==``.  Float labels must not be NaN.

    Returns
    -------
    int
        Number of misclassified points, in ``0 .. N``.
    """
    X = real_matrix(X, "X", "Q")
    labels = _check_labels(labels, X.shape[0])
    nearest = _nearest_other(X)
    return int(np.count_nonzero(labels[nearest] != labels))


def one_nn_error_rate(X, labels):
    """``one_nn_errors(X, labels) / N``, a float in [0, 1]."""
    X = real_matrix(X, "X", "Q")
    return one_nn_errors(X, labels) / X.shape[0]


def most_relevant_dims(relevance, k=2):
    """Indices of the ``k`` largest relevances, most relevant first.

    Parameters
    ----------
    relevance : array_like, shape (Q,)
        Finite ARD relevances (e.g. ``model.relevance``: 1/lengthscale^2).
    k : int
        How many dimensions, ``1 <= k <= Q``.

    Returns
    -------
    ndarray of int, shape (k,)
        Sorted by decreasing relevance; equal relevances keep index order.
    """
    r = np.asarray(relevance)
    if r.dtype == bool or not (
        np.issubdtype(r.dtype, np.integer) or np.issubdtype(r.dtype, np.floating)
    ):
        raise ShapeError(
            f"Expected relevance to be a real numeric array, got dtype "
            f"{r.dtype} instead."
        )
    if r.ndim != 1 or r.shape[0] < 1:
        raise ShapeError(
            f"Expected relevance with shape (Q,), Q >= 1, got shape {r.shape} instead."
        )
    r = r.astype(np.float64)
    if not np.all(np.isfinite(r)):
        raise ShapeError("Expected relevance to be finite, got NaN or infinite values instead.")
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, numbers.Integral):
        raise ConfigurationError(f"Expected k to be an integer, got {k!r} instead.")
    Q = r.shape[0]
    if not 1 <= k <= Q:
        raise ConfigurationError(
            f"Expected k between 1 and {Q} (the number of latent dimensions), "
            f"got {k} instead."
        )
    return np.argsort(-r, kind="stable")[: int(k)].astype(np.intp)


@dataclass(frozen=True)
class HeldOutScore:
    """Scores of :func:`held_out` on n test rows of D outputs.

    log_density: (n,) nats, each whole row's log density under the model
    (eq. 20 for the Bayesian models; the plug-in predictive density at the MAP
    latent point for the GP-LVM and the sparse GP-LVM).
    observed: (n, D) bool, the entries the reconstruction saw (NaN entries of
    Y_test are never among them nor scored).
    reconstruction: (n, D) the prediction of every entry from the observed
    ones (data units).
    rmse: float, root mean squared error of the reconstruction over the
    entries that were present in Y_test but hidden from it (data units).
    """

    log_density: np.ndarray
    observed: np.ndarray
    reconstruction: np.ndarray
    rmse: float

    @property
    def mean_log_density(self) -> float:
        """The average of ``log_density`` over the rows, nats per row."""
        return float(np.mean(self.log_density))


def half_observed(present, seed=0):
    """A mask that keeps about half of each row's present entries, chosen at random.

    Parameters
    ----------
    present : array_like of bool, shape (n, D)
        Entries that have a value; every row needs at least two.
    seed : int
        Seed of the choice (the same seed gives the same mask).

    Returns
    -------
    ndarray of bool, shape (n, D)
        True on ceil(k/2) of each row's k present entries, False elsewhere: the
        observed half; the other half (present, not observed) is predicted.
    """
    present = np.asarray(present, dtype=bool)
    counts = present.sum(axis=1)
    few = np.flatnonzero(counts < 2)
    if few.size:
        raise ShapeError(f"Expected at least two present entries in every row to hide half of them, got rows "
                         f"{few[:10].tolist()} with fewer instead.")
    rng = np.random.default_rng(seed)
    keys = np.where(present, rng.random(present.shape), np.inf)  # absent entries sort last
    rank = np.argsort(np.argsort(keys, axis=1, kind="stable"), axis=1, kind="stable")
    return rank < ((counts + 1) // 2)[:, None]


def held_out(model, Y_test, *, seed=0, observed=None, **infer_options):
    """Held-out scores of a trained ``model`` on rows ``Y_test`` it was not trained on.

    Parameters
    ----------
    model : a trained engine model with ``infer_latent`` (every model of API.md)
    Y_test : array_like, shape (n, D) or (D,)
        New rows in the units of the training data; NaN entries are missing
        (left out of the density and never scored).
    seed : int
        Seed of the observed half of each row (:func:`half_observed`).
    observed : array_like of bool, shape (n, D), optional
        The entries the reconstruction sees instead of a random half; the
        reconstruction is scored on the other present entries.
    infer_options
        Passed to ``model.infer_latent`` (``num_starts``, ``max_iters`` ...).

    Returns
    -------
    HeldOutScore
        ``log_density`` (n,) of each row from all its present entries,
        ``rmse`` of the hidden entries predicted from the observed ones.

    Raises ShapeError for a wrong shape, a row with fewer than two present
    entries (nothing to hide), or an ``observed`` mask that hides nothing or
    sees nothing of some row.
    """
    Y = np.array(real_array(Y_test, "Y_test"), dtype=np.float64)
    if Y.ndim == 1:
        Y = Y[None, :]
    if Y.ndim != 2 or Y.shape[0] < 1 or Y.shape[1] != model.output_dim:
        raise ShapeError(f"Expected Y_test of shape (n, {model.output_dim}) or ({model.output_dim},), got shape "
                         f"{np.shape(Y_test)} instead.")
    if np.isinf(Y).any():
        raise ShapeError("Y_test contains infinite values; mark missing entries with NaN.")
    present = ~np.isnan(Y)
    if observed is None:
        seen = half_observed(present, seed)
    else:
        seen = np.asarray(observed)
        if seen.dtype != bool or seen.shape != Y.shape:
            raise ShapeError(f"Expected `observed` as a boolean mask of shape {Y.shape}, got dtype {seen.dtype} "
                             f"and shape {seen.shape} instead.")
        seen = seen & present
    hidden = present & ~seen
    if not hidden.any(axis=1).all() or not seen.any(axis=1).all():
        bad = np.flatnonzero(~hidden.any(axis=1) | ~seen.any(axis=1))
        raise ShapeError(f"Expected every test row to have observed and hidden present entries, got rows "
                         f"{bad[:10].tolist()} without both instead.")
    density = model.infer_latent(Y, **infer_options).log_density
    partial = model.infer_latent(Y, observed=seen, **infer_options)
    error = partial.prediction[hidden] - Y[hidden]
    return HeldOutScore(log_density=np.asarray(density, dtype=float), observed=seen,
                        reconstruction=np.asarray(partial.prediction, dtype=float),
                        rmse=float(np.sqrt(np.mean(error ** 2))))


# ---------------------------------------------------------------- internals

def _nearest_other(X):
    """Index of each row's nearest other row (lowest index on ties), (N,)."""
    N = X.shape[0]
    out = np.empty(N, dtype=np.intp)
    step = max(1, _BLOCK_ENTRIES // N)
    for a in range(0, N, step):
        b = min(a + step, N)
        d = cdist(X[a:b], X, "sqeuclidean")
        d[np.arange(b - a), np.arange(a, b)] = np.inf
        out[a:b] = np.argmin(d, axis=1)          # first minimum = lowest index
    return out


def _check_labels(labels, N):
    lab = np.asarray(labels)
    if lab.ndim != 1 or lab.shape[0] != N:
        raise ShapeError(
            f"Expected labels with shape ({N},) to match X, got shape "
            f"{lab.shape} instead."
        )
    if np.issubdtype(lab.dtype, np.floating) and np.isnan(lab).any():
        raise ShapeError(
            "Expected every label to be set, got NaN labels instead. Drop the "
            "unlabelled points first."
        )
    return lab
