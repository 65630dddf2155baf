"""Initial latent positions for the GP-LVM family: PCA, random or Isomap.

The GP-LVM objective is not convex; where the optimiser starts matters
(Lawrence 2005 initialises with PCA; Titsias & Lawrence 2010 too).  This
module turns data ``Y (N, D)`` into a starting ``X (N, Q)``.

Conventions shared by the "pca" and "isomap" methods:

* **Standardised scores.**  Each latent column is centred and scaled to unit
  variance (population variance, ``ddof=0``), as GPy does with its PCA
  initialisation.  The columns are mutually orthogonal, so ``X.T @ X / N`` is
  the identity.  The relative size of the components is thus *not* kept: with
  an ARD kernel the lengthscales, not the latent scale, decide which
  dimensions matter.
* **Deterministic signs.**  Eigenvectors are defined up to sign; each column
  is flipped so that its entry of largest magnitude is positive (the first
  such entry on a tie).
* **More dimensions than the data support.**  When ``Q`` exceeds the number
  of usable components (the rank of the centred data, at most
  ``min(N - 1, D)``, or the number of positive MDS eigenvalues for Isomap;
  a component whose eigenvalue is below 1e-10 of the total (PCA) or of the
  largest (Isomap) counts as absent),
  the surplus columns are filled with small seeded Gaussian noise of standard
  deviation :data:`EXTRA_DIM_STD` instead of failing.  The Bayesian GP-LVM is
  often run with ``Q`` larger than needed and lets ARD switch the surplus off.
  These noise columns are not orthogonal to the others.

Isomap (Tenenbaum et al. 2000): Euclidean ``n_neighbors``-nearest-neighbour
graph, made symmetric; geodesic distances by Dijkstra
(:func:`scipy.sparse.csgraph.dijkstra`); classical MDS of those distances.
Up to ``N = ISOMAP_EXACT_MAX`` all ``N x N`` geodesic distances are used
(exact Isomap).  Above that, all-pairs Dijkstra grows as N^2 log N and takes several
seconds (N = 5000: about 8 s), so landmark Isomap (de Silva &
Tenenbaum 2004) is used instead: geodesics from ``ISOMAP_LANDMARKS``
landmarks drawn with ``seed``, MDS of the landmarks, every point placed by
distance-based triangulation, the result rotated onto its principal axes
(orthogonal columns).  Isomap accepts at most ``N = ISOMAP_MAX_POINTS``;
beyond that a :class:`~engine.errors.ShapeError` suggests subsampling.  If
the graph is disconnected, its components are joined by the edges of a
minimum spanning tree over the components (each edge links the closest pair
of points between two components) and a :class:`IsomapConnectivityWarning`
says so.
"""
from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg
import scipy.sparse
import scipy.sparse.csgraph
import scipy.sparse.linalg
from scipy.spatial.distance import cdist

from ._threads import blas_pinned
from .errors import ConfigurationError, ShapeError
from .validation import integer, real_matrix

__all__ = [
    "METHODS",
    "EXTRA_DIM_STD",
    "ISOMAP_MAX_POINTS",
    "ISOMAP_EXACT_MAX",
    "ISOMAP_LANDMARKS",
    "IsomapConnectivityWarning",
    "initial_latents",
]

#: Valid values of ``method``.
METHODS = ("pca", "random", "isomap")

#: Standard deviation of the noise columns used when ``Q`` exceeds the number
#: of components the data support.
EXTRA_DIM_STD = 1e-2

#: Largest ``N`` Isomap accepts.
ISOMAP_MAX_POINTS = 5000

#: Largest ``N`` for exact Isomap (all N x N geodesic distances); above it,
#: landmark Isomap with :data:`ISOMAP_LANDMARKS` landmarks.
ISOMAP_EXACT_MAX = 2000

#: Number of seeded random landmarks for landmark Isomap.
ISOMAP_LANDMARKS = 1000

# Distance blocks are computed a few rows at a time, at most this many entries.
_BLOCK_ENTRIES = 1 << 22


class IsomapConnectivityWarning(UserWarning):
    """The Isomap neighbour graph was disconnected and has been joined."""


@blas_pinned
def initial_latents(Y, latent_dim, method="pca", seed=0, n_neighbors=10):
    """Initial latent positions ``X (N, Q)`` for data ``Y (N, D)``.

    Parameters
    ----------
    Y : array_like, shape (N, D)
        Finite real data, ``N >= 2``.  Not modified; centred internally.
    latent_dim : int
        ``Q >= 1``, the number of latent dimensions.
    method : {"pca", "random", "isomap"}
        "pca": standardised principal-component scores (see module docs).
        "random": independent standard normal draws.
        "isomap": standardised Isomap coordinates (see module docs).
    seed : int
        Seed of ``np.random.default_rng`` for "random", for the noise
        columns added when ``Q`` exceeds the usable components, and for the
        landmarks of landmark Isomap.  Otherwise the result does not depend
        on it.
    n_neighbors : int
        Neighbours per point in the Isomap graph (capped at ``N - 1``).
        Ignored by the other methods.

    Returns
    -------
    X : ndarray, shape (N, Q), float64

    Raises
    ------
    ShapeError
        ``Y`` is not a 2-D finite real array with ``N >= 2``, or Isomap is
        asked for more than :data:`ISOMAP_MAX_POINTS` points.
    ValueError
        Unknown ``method``, ``latent_dim < 1`` or ``n_neighbors < 1``.
    TypeError
        ``latent_dim`` or ``n_neighbors`` is not an integer.
    """
    Y = real_matrix(Y)
    Q = integer(latent_dim, "latent_dim")
    if not isinstance(method, str) or method not in METHODS:
        raise ConfigurationError(
            f"Expected method in {METHODS}, got {method!r} instead."
        )
    rng = np.random.default_rng(seed)
    N = Y.shape[0]
    if method == "random":
        return rng.standard_normal((N, Q))
    if method == "pca":
        scores = _pca_scores(Y, Q)
    else:
        k = integer(n_neighbors, "n_neighbors")
        if N > ISOMAP_MAX_POINTS:
            raise ShapeError(
                f"Expected at most {ISOMAP_MAX_POINTS} points for Isomap "
                f"initialisation, got {N} instead. Subsample the data, or "
                f"use method='pca'."
            )
        scores = _isomap_scores(Y, Q, min(k, N - 1), rng)
    return _finish(scores, Q, rng)


@blas_pinned
def pca_variance_fractions(Y, latent_dim):
    """Variance of each of the top ``latent_dim`` principal components over the largest one, (Q,).

    Components beyond the rank of the centred data get 0.  Models use these to
    start ARD lengthscales as GPy and the papers do: dimensions that PCA finds
    unimportant start (nearly) switched off.
    """
    Y = real_matrix(Y)
    Q = integer(latent_dim, "latent_dim")
    scores = _pca_scores(Y, Q)
    fractions = np.zeros(Q)
    if scores.shape[1]:
        var = scores.var(axis=0)
        fractions[:var.size] = var / var.max()
    return fractions


def top_components(scatter, q):
    """The usable top ``q`` eigenpairs (w (r,), V (D, r)), r <= q, of a centred scatter matrix (D, D):
    the principal components of data known only through Yc^T Yc (e.g. summed over row chunks)."""
    w, V = _top_eigh(scatter, q)
    r = _usable(w, float(np.trace(scatter)))
    return w[:r], V[:, :r]


def standardised_latents(scores, Q, rng):
    """Latents (N, Q) from scores (N, r), r <= Q: columns standardised with fixed signs, the surplus
    columns seeded noise of std :data:`EXTRA_DIM_STD` (the module's conventions)."""
    return _finish(scores, Q, rng)


# ----------------------------------------------------------------- the maths

def _top_eigh(A, q):
    """Top ``q`` eigenpairs of symmetric ``A`` (n, n), in decreasing order."""
    n = A.shape[0]
    q = min(q, n)
    if n > 500 and q < n // 10:
        # Only a few of many eigenpairs: ARPACK needs O(n^2) per step, far
        # cheaper than a dense O(n^3) decomposition at n in the thousands.
        # A fixed start vector keeps the result independent of ``seed``.
        v0 = np.random.default_rng(0).standard_normal(n)
        w, V = scipy.sparse.linalg.eigsh(A, k=q, which="LA", v0=v0)
    else:
        w, V = scipy.linalg.eigh(A, subset_by_index=[n - q, n - 1])
    order = np.argsort(w)[::-1]
    return w[order], V[:, order]


def _usable(w, scale):
    """Number of leading eigenvalues ``w`` (decreasing) that are real signal."""
    tol = max(scale, 1e-300) * 1e-10
    return int(np.count_nonzero(w > tol))


def _pca_scores(Y, Q):
    """Principal-component scores (N, r), r <= Q, via the smaller Gram matrix."""
    N, D = Y.shape
    Yc = Y - Y.mean(axis=0)
    q = min(Q, N - 1, D)
    if N <= D:
        G = Yc @ Yc.T                              # (N, N), eigvals = s^2
        w, U = _top_eigh(G, q)
        r = _usable(w, np.trace(G))
        return U[:, :r] * np.sqrt(w[:r])           # = Yc V
    C = Yc.T @ Yc                                  # (D, D)
    w, V = _top_eigh(C, q)
    r = _usable(w, np.trace(C))
    return Yc @ V[:, :r]


def _isomap_scores(Y, Q, k, rng):
    """Classical MDS of kNN-graph geodesic distances: (N, r), r <= Q."""
    N = Y.shape[0]
    graph = _knn_graph(Y, k)
    n_comp, comp = scipy.sparse.csgraph.connected_components(graph, directed=False)
    if n_comp > 1:
        graph, n_edges = _join_components(Y, graph, n_comp, comp)
        warnings.warn(
            f"Isomap: the {k}-nearest-neighbour graph has {n_comp} "
            f"disconnected components; joined them with {n_edges} edge(s) "
            f"between their closest points. Distances between components are "
            f"then straight lines; a larger n_neighbors may give a better map.",
            IsomapConnectivityWarning,
            stacklevel=3,
        )
    # The graph is symmetric already: directed=True skips a symmetrising copy.
    if N <= ISOMAP_EXACT_MAX:
        G = scipy.sparse.csgraph.dijkstra(graph, directed=True)
        return _classical_mds(G, min(Q, N - 1))
    # Landmark Isomap (de Silva & Tenenbaum 2004): MDS of the landmarks, then
    # every point placed by distance-based triangulation.
    landmarks = np.sort(rng.choice(N, size=ISOMAP_LANDMARKS, replace=False))
    G = scipy.sparse.csgraph.dijkstra(graph, directed=True, indices=landmarks)  # (L, N)
    np.square(G, out=G)
    D_land = G[:, landmarks]                                 # (L, L) squared
    mean_land = D_land.mean(axis=0)                          # (L,)
    w, V, r = _mds_eigen(D_land.copy(), min(Q, ISOMAP_LANDMARKS - 1))
    # x_n = -1/2 diag(1/sqrt(w)) V^T (delta_n - mean_land)
    G -= mean_land[:, None]
    X = -0.5 * (G.T @ (V[:, :r] / np.sqrt(w[:r])))           # (N, r)
    # Triangulated columns are only nearly orthogonal: rotate onto their own
    # principal axes so that, like PCA, the result has orthogonal columns.
    X -= X.mean(axis=0)
    _, _, Vt = np.linalg.svd(X, full_matrices=False)
    return X @ Vt.T


def _mds_eigen(D2, q):
    """Top eigenpairs of B = -1/2 J D2 J (D2 squared distances, overwritten)."""
    row = D2.mean(axis=1)
    D2 -= row[:, None]
    D2 -= row[None, :]
    D2 += row.mean()
    D2 *= -0.5
    w, V = _top_eigh(D2, q)
    r = _usable(w, np.abs(w).max(initial=0.0))
    return w, V, r


def _classical_mds(G, q):
    """Classical MDS coordinates (n, r) of distances G (n, n), overwritten."""
    np.square(G, out=G)
    w, V, r = _mds_eigen(G, q)
    return V[:, :r] * np.sqrt(w[:r])


def _row_blocks(n_rows, n_cols):
    step = max(1, _BLOCK_ENTRIES // max(n_cols, 1))
    for start in range(0, n_rows, step):
        yield start, min(start + step, n_rows)


def _knn_graph(Y, k):
    """Symmetric sparse graph: an edge (weight = distance) to each of the k nearest."""
    N = Y.shape[0]
    rows = np.repeat(np.arange(N), k)
    cols = np.empty(N * k, dtype=np.intp)
    for a, b in _row_blocks(N, N):
        d = cdist(Y[a:b], Y, "sqeuclidean")
        d[np.arange(b - a), np.arange(a, b)] = np.inf     # not its own neighbour
        nn = np.argpartition(d, k - 1, axis=1)[:, :k]
        cols[a * k:b * k] = nn.ravel()
    dist = np.sqrt(np.sum((Y[rows] - Y[cols]) ** 2, axis=1))
    # Duplicate points are 0 apart; keep them as edges (csgraph may drop zeros).
    dist = np.maximum(dist, np.finfo(float).tiny)
    W = scipy.sparse.csr_matrix((dist, (rows, cols)), shape=(N, N))
    return W.maximum(W.T).tocsr()


def _join_components(Y, graph, n_comp, comp):
    """Add a minimum spanning tree of closest-pair edges between components."""
    N = Y.shape[0]
    members = [np.flatnonzero(comp == c) for c in range(n_comp)]
    best = np.full((n_comp, n_comp), np.inf)
    pair = np.zeros((n_comp, n_comp, 2), dtype=np.intp)
    for a, b in _row_blocks(N, N):
        d = cdist(Y[a:b], Y, "sqeuclidean")
        ca = comp[a:b]
        for c, idx in enumerate(members):
            sub = d[:, idx]
            j = np.argmin(sub, axis=1)                     # nearest member of c
            val = sub[np.arange(b - a), j]
            # For each component of these rows, its row closest to c.
            order = np.lexsort((val, ca))
            src, first = np.unique(ca[order], return_index=True)
            rows_best = order[first]
            keep = (src != c) & (val[rows_best] < best[src, c])
            src, rows_best = src[keep], rows_best[keep]
            best[src, c] = val[rows_best]
            pair[src, c, 0] = a + rows_best
            pair[src, c, 1] = idx[j[rows_best]]
    weights = np.maximum(np.sqrt(best), np.finfo(float).tiny)
    np.fill_diagonal(weights, 0.0)
    tree = scipy.sparse.csgraph.minimum_spanning_tree(weights).tocoo()
    ii = pair[tree.row, tree.col, 0]
    jj = pair[tree.row, tree.col, 1]
    w = tree.data
    extra = scipy.sparse.csr_matrix(
        (np.concatenate([w, w]), (np.concatenate([ii, jj]), np.concatenate([jj, ii]))),
        shape=(N, N),
    )
    return graph.maximum(extra).tocsr(), int(tree.nnz)


def _finish(scores, Q, rng):
    """Standardise columns, fix signs, and pad with noise columns up to Q."""
    N, r = scores.shape
    X = np.empty((N, Q))
    if r:
        S = scores - scores.mean(axis=0)
        S /= S.std(axis=0)
        flip = S[np.argmax(np.abs(S), axis=0), np.arange(r)] < 0
        S[:, flip] *= -1.0
        X[:, :r] = S
    if r < Q:
        X[:, r:] = EXTRA_DIM_STD * rng.standard_normal((N, Q - r))
    return X
