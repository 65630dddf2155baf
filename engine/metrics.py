"""Quality measures of a latent space.

* :func:`one_nn_errors` / :func:`one_nn_error_rate`: leave-one-out
  1-nearest-neighbour classification errors in latent space, the measure of
  Lawrence 2005 (Table 3: oil data, PCA 162 errors, GP-LVM 1) and Titsias &
  Lawrence 2010 (section 5.1: Bayesian GP-LVM 3 errors, sparse GP-LVM 26).
* :func:`most_relevant_dims`: the latent dimensions to show first, by ARD
  relevance.
"""
from __future__ import annotations

import numbers

import numpy as np
from scipy.spatial.distance import cdist

from .errors import ConfigurationError, ShapeError
from .validation import real_matrix

__all__ = ["one_nn_errors", "one_nn_error_rate", "most_relevant_dims"]

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
