"""Latent geometry of a trained GP mapping: the expected metric, magnification, geodesics.

Tosi, Hauberg, Vellido & Lawrence (2014), "Metrics for probabilistic
geometries": the Jacobian J(x) = df/dx (D, Q) of a GP mapping is Gaussian, and
the expected pull-back metric is

    G(x) = E[J^T J] = E[J]^T E[J] + sum_d cov(J_d)                     (Q, Q)

(Bishop, Svensen & Williams 1997: sqrt(det G) is the magnification factor).

Every model here predicts with one form.  Per *map* (a kernel k over inputs Z
(M, Q): inducing inputs, or the training latents of the exact GP-LVM) and per
column group g of its outputs (one group unless outputs are missing):

    mean   m_g(x) = k(x, Z) alpha_g                                      alpha_g (M, D_g)
    cov(f_d(a), f_d(b)) = k(a, b) - k(a, Z) Sigma_g k(Z, b)              Sigma_g (M, M), every d in g

(exact GP-LVM: Sigma = (K + sigma^2 I)^-1; sparse and Bayesian: Kmm^-1 - (Kmm
+ beta Psi2)^-1; stochastic: Kmm^-1 - L^-T S L^-1 of its explicit q(u)).  With
dK(x) = dk(x, Z)/dx (M, Q) and d2k(x) = d^2 k(x, x')/dx dx'^T at x' = x:

    E[J_g] = alpha_g^T dK(x),    cov(J_d) = d2k(x) - dK(x)^T Sigma_g dK(x),

so the metric needs one (M, M) matrix per map, formed once per model state:

    G(x) = D d2k(x) + dK(x)^T C dK(x),     C = sum_g (alpha_g alpha_g^T - D_g Sigma_g).

Geodesics.  The same posterior gives the expected squared distance between
the images of two latent points (a, b), with the smooth part of the kernel
(white noise is no part of f):

    E|f(a) - f(b)|^2 = (k_a - k_b)^T C (k_a - k_b) + D (k(a, a) + k(b, b) - 2 k(a, b)),

k_a = k(Z, a), which tends to (b - a)^T G(a) (b - a) as b -> a.  A curve's
discrete energy is the sum of this over its consecutive points; its gradient
needs only first derivatives of the kernel.  A local optimiser of the energy
alone gets trapped (Pouplin et al. 2023), so the search starts globally: a
shortest path on a grid over the shown plane (``dims=(i, j)``), or on a k-NN
graph over the training latents and the straight segment (all dims), with
edges weighted by their length under the metric; that path is then refined
by minimising the energy (L-BFGS).  Lengths are those of polylines under the
metric, sum_i integral sqrt(dx^T G(x) dx), evaluated at sub-segment midpoints;
they are in data units.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.optimize import minimize
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import dijkstra
from scipy.spatial import cKDTree

from ._geometry_loops import _pair_products
from .errors import ShapeError
from .kernels import Kernel, Sum, White
from .validation import latent_points

__all__ = ["Geodesic", "GeometryMap", "LatentGeometry", "PosteriorGroup", "explicit_q_groups", "smooth_kernel"]

#: Points per chunk of a metric evaluation (bounds the (chunk, q, M) derivative arrays).
_CHUNK_VALUES = 1 << 21
#: Grid nodes per side of the graph a geodesic in two dims starts from.
GRID_SIDE = 48
#: Training latents in the k-NN graph a geodesic in all dims starts from (a fixed subsample above).
GRAPH_NODES = 800
#: Neighbours per node of that graph.
GRAPH_K = 10
#: Sub-segments per polyline segment when a length is evaluated.
LENGTH_STEPS = 8


class PosteriorGroup(NamedTuple):
    """One column group of a map's posterior (see the module docstring)."""

    cols: object  # slice or (D_g,) indices of the outputs
    alpha: np.ndarray  # (M, D_g)
    Sigma: np.ndarray  # (M, M) symmetric


class GeometryMap(NamedTuple):
    """One GP map's share of the metric: G_map(x) = D d2k(x) + dK(x)^T C dK(x)."""

    kernel: Kernel  # the smooth part of the map's kernel (no white noise)
    Z: np.ndarray  # (M, Q)
    C: np.ndarray  # (M, M) symmetric
    output_dim: int  # D of this map
    groups: tuple  # the PosteriorGroups C was built from (Jacobian moments)


class Geodesic(NamedTuple):
    """A shortest path under the metric: ``path`` (num_points, Q) from start to end;
    ``length`` its length and ``straight_length`` the straight segment's, in data units."""

    path: np.ndarray
    length: float
    straight_length: float


class JacobianMoments(NamedTuple):
    """mean: (n, D, q) E[J] over all outputs; cov: [(cols, (n, q, q))] cov(J_d), shared by each group's outputs."""

    mean: np.ndarray
    cov: list


def smooth_kernel(kernel: Kernel) -> Kernel | None:
    """The kernel without its white-noise parts (None if nothing else is left)."""
    if isinstance(kernel, White):
        return None
    if isinstance(kernel, Sum):
        parts = [p for p in kernel.parts if not isinstance(p, White)]
        if not parts:
            return None
        return parts[0].copy() if len(parts) == 1 else Sum(parts)
    return kernel


def _sym(A):
    return 0.5 * (A + A.T)


def explicit_q_groups(L: np.ndarray, Mw: np.ndarray, R: np.ndarray) -> list:
    """[(cols, alpha, Sigma)] of an explicit whitened q(u): u = L v, q(v_d) = N(m_d, R R^T).

    L: (M, M) chol(Kmm + jitter I); Mw = L^-T m, (M, D), so the mean is k(x, Z) Mw; R: (M, M) lower
    triangular shared by all outputs (one group), or (D, M, M), one per output (D groups).  Then
    cov(f_d(a), f_d(b)) = k(a, b) - k(a, Z) L^-T (I - R_d R_d^T) L^-1 k(Z, b).
    """
    from .bound import _unwhiten_both

    eye = np.eye(L.shape[0])
    if R.ndim == 2:
        return [(slice(None), Mw, _unwhiten_both(L, eye - R @ R.T))]
    return [([d], Mw[:, d:d + 1], _unwhiten_both(L, eye - R[d] @ R[d].T)) for d in range(R.shape[0])]


class LatentGeometry:
    """The expected metric of a trained model's mapping, and what follows from it.

    Built once per model state from its posterior: ``maps`` is a list of
    (kernel, Z, [PosteriorGroup]) -- one map for most models, one per view
    for MRD (whose views share the latent space, so their metrics add).
    ``anchors`` (N, Q): the training latents, where the data are (the
    geodesic search's extent and graph).
    """

    def __init__(self, maps, anchors: np.ndarray):
        built = []
        for kernel, Z, groups in maps:
            groups = tuple(PosteriorGroup(*g) for g in groups)
            Z = np.ascontiguousarray(Z, dtype=float)
            C = np.zeros((Z.shape[0], Z.shape[0]))
            D = 0
            for g in groups:
                alpha = np.asarray(g.alpha, dtype=float)
                C += alpha @ alpha.T - alpha.shape[1] * np.asarray(g.Sigma, dtype=float)
                D += alpha.shape[1]
            smooth = smooth_kernel(kernel)
            if smooth is not None:
                built.append(GeometryMap(smooth, Z, _sym(C), D, groups))
        self.maps = built
        self.latent_dim = int(np.shape(anchors)[1])
        self.anchors = np.asarray(anchors, dtype=float)

    # ---- the metric ----------------------------------------------------------------------
    def _points(self, X, name="Xnew") -> np.ndarray:
        return latent_points(X, self.latent_dim, name)

    def _dims(self, dims) -> np.ndarray:
        if dims is None:
            return np.arange(self.latent_dim)
        d = np.array(dims, dtype=np.int64).reshape(-1) if np.ndim(dims) else None
        if (d is None or d.size != 2 or np.any(d < 0) or np.any(d >= self.latent_dim) or d[0] == d[1]):
            raise ShapeError(f"Expected dims as two different latent dimensions (i, j) between 0 and "
                             f"{self.latent_dim - 1}, or None for all, got {dims!r} instead.")
        return d

    def metric(self, Xnew, dims=None) -> np.ndarray:
        """G at each point of Xnew (n, Q): (n, Q, Q), or (n, 2, 2) in ``dims=(i, j)``."""
        X = self._points(Xnew)
        d = self._dims(dims)
        return self._metric(X, d)

    def _metric(self, X, d) -> np.ndarray:
        n, q = X.shape[0], d.size
        G = np.zeros((n, q, q))
        for gm in self.maps:
            M = gm.Z.shape[0]
            chunk = max(1, _CHUNK_VALUES // max(1, q * M))
            for lo in range(0, n, chunk):
                hi = min(n, lo + chunk)
                dK = gm.kernel.dK_dX(X[lo:hi], gm.Z, d)  # (r, q, M)
                T = (dK.reshape(-1, M) @ gm.C).reshape(dK.shape)
                _pair_products(T, dK, G[lo:hi])  # dK C dK^T, symmetric
                G[lo:hi] += gm.output_dim * gm.kernel.d2K_dXdX2_diag(X[lo:hi], d)
        return G

    def magnification(self, Xnew, dims=None) -> np.ndarray:
        """sqrt(det G) at each point of Xnew (n, Q), (n,) (0 where G is numerically singular)."""
        G = self.metric(Xnew, dims)
        if G.shape[1] == 2:
            det = G[:, 0, 0] * G[:, 1, 1] - G[:, 0, 1] * G[:, 1, 0]
        else:
            sign, logdet = np.linalg.slogdet(G)
            det = np.where(sign > 0, np.exp(logdet), 0.0)
        return np.sqrt(np.maximum(det, 0.0))

    def jacobian_moments(self, Xnew, dims=None) -> JacobianMoments:
        """E[J] (n, D, q) and, per column group, cov(J_d) (n, q, q) at points Xnew (n, Q).

        Outputs of several maps (MRD's views) lie side by side in map order.
        """
        X = self._points(Xnew)
        d = self._dims(dims)
        n, q = X.shape[0], d.size
        means, covs, offset = [], [], 0
        for gm in self.maps:
            dK = gm.kernel.dK_dX(X, gm.Z, d)  # (n, q, M)
            d2k = gm.kernel.d2K_dXdX2_diag(X, d)
            mean = np.empty((n, gm.output_dim, q))
            for g in gm.groups:
                cols = np.arange(gm.output_dim)[g.cols]
                mean[:, cols, :] = np.einsum("md,nqm->ndq", g.alpha, dK)
                Sd = np.einsum("nqm,mk,npk->nqp", dK, g.Sigma, dK)
                covs.append((cols + offset, d2k - Sd))
            means.append(mean)
            offset += gm.output_dim
        return JacobianMoments(np.concatenate(means, axis=1), covs)

    # ---- curves --------------------------------------------------------------------------
    def segment_lengths(self, path, dims=None, steps: int = LENGTH_STEPS) -> np.ndarray:
        """(T,) lengths under the metric of the T segments of a polyline ``path`` (T + 1, Q).

        Each segment is cut into ``steps`` pieces, each measured at its midpoint
        as sqrt(dx^T G dx).  With ``dims``, the path moves in those two dims only.
        """
        P = self._points(path, "path")
        d = self._dims(dims)
        delta = np.diff(P, axis=0)  # (T, Q)
        t = (np.arange(steps) + 0.5) / steps
        mids = P[:-1, None, :] + t[None, :, None] * delta[:, None, :]  # (T, steps, Q)
        G = self._metric(mids.reshape(-1, self.latent_dim), d).reshape(delta.shape[0], steps, d.size, d.size)
        piece = delta[:, d] / steps
        sq = np.einsum("ta,tsab,tb->ts", piece, G, piece)
        return np.sum(np.sqrt(np.maximum(sq, 0.0)), axis=1)

    def length(self, path, dims=None, steps: int = LENGTH_STEPS) -> float:
        """Length of a polyline (T + 1, Q) under the metric, data units."""
        return float(np.sum(self.segment_lengths(path, dims, steps)))

    def energy(self, path, with_grad: bool = False):
        """sum_i E|f(p_{i+1}) - f(p_i)|^2 of a polyline (T + 1, Q), and its gradient (T + 1, Q)."""
        P = self._points(path, "path")
        value, grad = 0.0, np.zeros_like(P) if with_grad else None
        for gm in self.maps:
            k = gm.kernel
            Kp = k.K(P, gm.Z)  # (T + 1, M)
            delta = np.diff(Kp, axis=0)
            W = delta @ gm.C
            value += float(np.sum(delta * W))
            D = gm.output_dim
            weights = np.full(P.shape[0], 2.0 * D)
            weights[[0, -1]] = D
            value += float(weights @ k.K_diag(P))
            cross = np.einsum("i,i->", k.K(P[:-1], P[1:]).diagonal(), np.full(P.shape[0] - 1, -2.0 * D))
            value += float(cross)
            if with_grad:
                dKp = np.zeros_like(Kp)
                dKp[1:] += 2.0 * W
                dKp[:-1] -= 2.0 * W
                grad += k.grad_X(dKp, P, gm.Z)
                grad += k.grad_X_diag(weights, P)
                dcross = np.zeros((P.shape[0], P.shape[0]))
                idx = np.arange(P.shape[0] - 1)
                dcross[idx, idx + 1] = -2.0 * D
                grad += k.grad_X(dcross, P)
        return (value, grad) if with_grad else value

    # ---- geodesics ----------------------------------------------------------------------------
    def geodesic(self, x_start, x_end, num_points: int = 64, dims=None) -> Geodesic:
        """The shortest path from x_start to x_end (Q,) under the metric: a graph's shortest path,
        refined by minimising the curve's energy; see the module docstring.

        With ``dims=(i, j)`` the two points must agree outside dims, and the path
        moves only in dims.
        """
        a = self._points(np.reshape(x_start, (1, -1)), "x_start")[0]
        b = self._points(np.reshape(x_end, (1, -1)), "x_end")[0]
        if isinstance(num_points, bool) or not isinstance(num_points, (int, np.integer)) or num_points < 2:
            raise ShapeError(f"Expected num_points as an integer of at least 2, got {num_points!r} instead.")
        num_points = int(num_points)
        d = self._dims(dims)
        if dims is not None:
            others = np.setdiff1d(np.arange(self.latent_dim), d)
            if not np.allclose(a[others], b[others]):
                raise ShapeError("Expected x_start and x_end to agree outside dims (the path moves only in dims).")
        straight = a + np.linspace(0.0, 1.0, num_points)[:, None] * (b - a)
        straight_length = self.length(straight, dims)
        if np.allclose(a, b) or not self.maps:
            return Geodesic(straight, straight_length, straight_length)
        start, start_length = self._graph_path(a, b, d, dims is not None, num_points)
        if start_length >= straight_length:
            start, start_length = straight, straight_length
        refined = self._refine(start, d)
        refined_length = self.length(refined, dims)
        if refined_length <= start_length:
            return Geodesic(refined, refined_length, straight_length)
        return Geodesic(start, start_length, straight_length)

    def _graph_path(self, a, b, d, planar: bool, num_points: int):
        """The graph's shortest path from a to b resampled to num_points (by length), and its length."""
        if planar:
            nodes = self._grid_nodes(a, b, d)
        else:
            nodes = self._cloud_nodes(a, b)
        # node 0 is a, node 1 is b
        edges = self._edges(nodes, d, planar)
        i, j = edges[:, 0], edges[:, 1]
        w = self._edge_lengths(nodes, i, j, d)
        n = nodes.shape[0]
        graph = coo_matrix((w, (i, j)), shape=(n, n)).tocsr()
        dist, pred = dijkstra(graph, directed=False, indices=0, return_predecessors=True)
        if not np.isfinite(dist[1]):
            return None, np.inf
        order = [1]
        while order[-1] != 0:
            order.append(int(pred[order[-1]]))
        poly = nodes[order[::-1]]
        seg = self.segment_lengths(poly, None if not planar else d, steps=2)
        return _resample(poly, seg, num_points), float(np.sum(seg))

    def _grid_nodes(self, a, b, d):
        """a, b, then a GRID_SIDE x GRID_SIDE grid over the data's (and a, b's) box in dims d."""
        box = np.vstack([_core_box(self.anchors[:, d]), a[d][None, :], b[d][None, :]])
        lo, hi = box.min(axis=0), box.max(axis=0)
        span = np.maximum(hi - lo, 1e-9)
        lo, hi = lo - 0.1 * span, hi + 0.1 * span
        gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], GRID_SIDE), np.linspace(lo[1], hi[1], GRID_SIDE))
        grid = np.tile(a, (GRID_SIDE * GRID_SIDE, 1))
        grid[:, d[0]], grid[:, d[1]] = gx.ravel(), gy.ravel()
        return np.vstack([a, b, grid])

    def _cloud_nodes(self, a, b):
        """a, b, the straight segment between them and a fixed subsample of the training latents."""
        X = self.anchors
        if X.shape[0] > GRAPH_NODES:
            X = X[np.random.default_rng(0).choice(X.shape[0], GRAPH_NODES, replace=False)]
        line = a + np.linspace(0.0, 1.0, 34)[1:-1, None] * (b - a)
        return np.vstack([a, b, line, X])

    @staticmethod
    def _edges(nodes, d, planar: bool) -> np.ndarray:
        """(E, 2) node pairs: 16-neighbourhood on the grid, k nearest neighbours elsewhere; a and b
        join their nearest nodes."""
        n = nodes.shape[0]
        if planar:
            idx = np.arange(GRID_SIDE * GRID_SIDE).reshape(GRID_SIDE, GRID_SIDE) + 2
            pairs = []
            for dy, dx in ((0, 1), (1, 0), (1, 1), (1, -1), (1, 2), (2, 1), (1, -2), (2, -1)):
                src = idx[max(0, -dy):GRID_SIDE - max(0, dy), max(0, -dx):GRID_SIDE - max(0, dx)]
                dst = idx[max(0, dy):GRID_SIDE + min(0, dy), max(0, dx):GRID_SIDE + min(0, dx)]
                pairs.append(np.stack([src.ravel(), dst.ravel()], axis=1))
            tree = cKDTree(nodes[2:][:, d])
            for end in (0, 1):
                _, near = tree.query(nodes[end, d], k=8)
                pairs.append(np.stack([np.full(8, end), np.asarray(near) + 2], axis=1))
            return np.vstack(pairs)
        k = min(GRAPH_K, n - 1)
        _, near = cKDTree(nodes).query(nodes, k=k + 1)
        pairs = np.stack([np.repeat(np.arange(n), k), near[:, 1:].ravel()], axis=1)
        chain = np.arange(2, 2 + 32)
        pairs = np.vstack([pairs, [[0, 2], [33, 1]], np.stack([chain[:-1], chain[1:]], axis=1)])
        pairs = np.sort(pairs, axis=1)
        return np.unique(pairs[pairs[:, 0] != pairs[:, 1]], axis=0)

    def _edge_lengths(self, nodes, i, j, d) -> np.ndarray:
        """Length of each straight edge under the metric: Simpson's rule on sqrt(dx^T G dx)."""
        ends = self._metric(nodes, d)  # (n, q, q)
        delta = (nodes[j] - nodes[i])[:, d]
        mid = self._metric(0.5 * (nodes[i] + nodes[j]), d)

        def speed(G):
            return np.sqrt(np.maximum(np.einsum("ea,eab,eb->e", delta, G, delta), 0.0))

        return (speed(ends[i]) + 4.0 * speed(mid) + speed(ends[j])) / 6.0 + 1e-300

    def _refine(self, path, d) -> np.ndarray:
        """Minimise the discrete energy over the interior points, moving only in dims d."""
        P0 = np.array(path, dtype=float)
        T = P0.shape[0]
        if T < 3:
            return P0
        scale = max(self.energy(P0), 1e-300)

        def fun(theta):
            P = P0.copy()
            P[1:-1][:, d] = theta.reshape(T - 2, d.size)
            value, grad = self.energy(P, with_grad=True)
            return value / scale, grad[1:-1][:, d].ravel() / scale

        res = minimize(fun, P0[1:-1][:, d].ravel(), jac=True, method="L-BFGS-B",
                       options={"maxiter": 300, "gtol": 1e-9})
        P = P0.copy()
        P[1:-1][:, d] = res.x.reshape(T - 2, d.size)
        return P


def _core_box(X2) -> np.ndarray:
    """(2, q) corners of the box holding the bulk of the points (0.5-99.5% quantiles above a thousand)."""
    if X2.shape[0] > 1000:
        return np.quantile(X2, [0.005, 0.995], axis=0)
    return np.vstack([X2.min(axis=0), X2.max(axis=0)])


def _resample(poly, seg, num_points: int) -> np.ndarray:
    """num_points along a polyline (T + 1, Q) at equal steps of the segment lengths ``seg`` (T,)."""
    cum = np.concatenate([[0.0], np.cumsum(seg)])
    if cum[-1] <= 0:
        return poly[0] + np.linspace(0.0, 1.0, num_points)[:, None] * (poly[-1] - poly[0])
    s = np.linspace(0.0, cum[-1], num_points)
    out = np.empty((num_points, poly.shape[1]))
    for q in range(poly.shape[1]):
        out[:, q] = np.interp(s, cum, poly[:, q])
    out[0], out[-1] = poly[0], poly[-1]
    return out
