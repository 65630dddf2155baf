"""Projection of new data into a trained model, many rows at once.

``infer_latent(model, Ynew, observed=None)`` finds, for every row y*_n of
``Ynew`` (n, D), the latent point that explains its observed entries O_n,
with the model's parameters fixed.  The rows are conditionally independent
given the trained model, so each row has its own objective; all n are
optimised together by one batched quasi-Newton loop (:func:`minimize_rows`)
whose per-row state (L-BFGS memory, line search, convergence) is the same as
if the row were projected alone, while every evaluation is batched numpy over
the rows still moving.

Bayesian GP-LVM (Titsias & Lawrence 2010, section 4).  For row n,
q(x*_n) = N(mu*, diag S*) maximises the augmented bound with only that row
added, minus the training bound:

    F_n(mu*, S*) = F_O(X, x*_n) - F_O(X) - KL(q(x*_n) || N(0, I)),

where F_O is the collapsed bound (eq. 14) restricted to the columns O_n that
the row observes (the other columns contribute the same to both terms).  The
difference approximates log p(y*_O | Y) (eq. 20) and is reported as
``log_density``.  With L = chol(Kmm), L_B = chol(I + beta L^-1 Psi2 L^-T) of
the training data and Lw = L L_B, the new point's statistics enter as
v = Lw^-1 psi1* and K = Lw^-1 Psi2* Lw^-T, B = I + beta K, E = B^-1, and

    F_O(X, x*) - F_O(X) = |O|/2 log(beta / 2 pi) - |O|/2 log|B| - beta/2 s
                          + beta^2/2 (tr(E Pi) - tr(G))
                          - beta |O|/2 (psi0* - tr(Kmm^-1 Psi2*)),

with P = Lw^-1 Psi1^T Y (training, M x D), G = P diag(o) P^T, h = P (o * y*),
s = sum_O y*^2 and Pi = G + h v^T + v h^T + s v v^T (o: the row's observed
mask).  G, h and s are fixed per row; each evaluation needs one batched
M x M Cholesky and inverse per row and the per-point psi statistics of the
new points, computed here in batched form (:func:`point_psi`).

GP-LVM and sparse GP-LVM.  Their latent points are point estimates, so the
projection is the MAP point

    x*_n = argmax  log p(y*_O | x, model) + log N(x | 0, I),

with p(y*_d | x, model) = N(mean_d(x), var(x)) the model's predictive
distribution (noise included; var shared by the outputs).  The latent
variance is then zero by the nature of these models, and ``log_density`` is
the plug-in log p(y*_O | x*_n, model) at the MAP point (no integration over
x*, so it is not comparable to the Bayesian bound).

Every row starts from the latent points of the training rows nearest to it
on its observed entries: ``num_starts`` candidates are scored by the row's
objective in one batched evaluation and the best ``num_optimised`` of them
are optimised (the best optimum is kept).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import linalg as sla

from . import psi
from ._threads import blas_pinned
from .errors import EngineError, NumericalError, ShapeError
from .transforms import POSITIVE

LOG_2PI = np.log(2.0 * np.pi)

#: Jitter tried on Kmm (relative to its mean diagonal) when the model's own does not factorise.
_JITTER_LADDER = (1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4)


@dataclass(frozen=True)
class LatentInference:
    """Result of :func:`infer_latent`, one row per new output vector.

    mean, variance: (n, Q) moments of q(x*_n) (variance is 0 for the GP-LVM
    and the sparse GP-LVM, whose latent points are point estimates);
    log_density: (n,) nats, F(X, x*) - F(X) for the Bayesian GP-LVM (eq. 20),
    log p(y*_O | x*, model) at the MAP point otherwise; observed: (n, D) bool
    mask; prediction, prediction_variance: (n, D) predictive moments of every
    output at x*_n (data units, noise included).  A single (D,) input gives
    n = 1: every array keeps its leading axis.
    """

    mean: np.ndarray
    variance: np.ndarray
    log_density: np.ndarray
    observed: np.ndarray
    prediction: np.ndarray
    prediction_variance: np.ndarray

    def __len__(self) -> int:
        return self.mean.shape[0]

    @property
    def reconstruction(self) -> np.ndarray:
        """Predicted values of the unobserved entries, row by row, flat (count of unobserved,)."""
        return self.prediction[~self.observed]

    @property
    def reconstruction_variance(self) -> np.ndarray:
        return self.prediction_variance[~self.observed]

    def completed(self, Ynew) -> np.ndarray:
        """``Ynew`` (n, D) or (D,) with its unobserved entries replaced by the prediction, (n, D)."""
        Y = np.array(np.atleast_2d(np.asarray(Ynew, dtype=float)))
        if Y.shape != self.prediction.shape:
            raise ShapeError(f"Expected Ynew of shape {self.prediction.shape}, got {np.shape(Ynew)} instead.")
        Y[~self.observed] = self.prediction[~self.observed]
        return Y


# --------------------------------------------------------------------- input checks


def check_new_data(model, Ynew, observed=None) -> tuple[np.ndarray, np.ndarray]:
    """(Y (n, D) with 0.0 at unobserved entries, mask (n, D) bool), or ShapeError.

    Unobserved entries are the NaN ones when ``observed`` is None, else where
    ``observed`` is False (their values are never read).
    """
    D = model.output_dim
    Y = np.asarray(Ynew)
    if Y.dtype == bool or not (np.issubdtype(Y.dtype, np.integer) or np.issubdtype(Y.dtype, np.floating)):
        raise ShapeError(f"Expected Ynew to be a real numeric array, got dtype {Y.dtype} instead.")
    if Y.ndim == 1:
        Y = Y[None, :]
    if Y.ndim != 2 or Y.shape[1] != D or Y.shape[0] < 1:
        raise ShapeError(f"Expected Ynew of shape (n, {D}) or ({D},), got shape {np.shape(Ynew)} instead.")
    Y = np.array(Y, dtype=np.float64)
    if observed is None:
        if np.any(np.isinf(Y)):
            raise ShapeError("Ynew contains infinite values; mark unobserved entries with NaN.")
        mask = ~np.isnan(Y)
    else:
        mask = np.asarray(observed)
        if mask.dtype != bool:
            if np.issubdtype(mask.dtype, np.integer) and np.all((mask == 0) | (mask == 1)):
                mask = mask.astype(bool)
            else:
                raise ShapeError(f"Expected `observed` as a boolean mask, got dtype {mask.dtype} instead.")
        if mask.ndim == 1:
            mask = mask[None, :]
        if mask.shape != Y.shape:
            raise ShapeError(f"Expected `observed` of the same shape as Ynew {np.shape(Ynew)}, "
                             f"got {np.shape(observed)} instead.")
        mask = mask.copy()
        if not np.all(np.isfinite(Y[mask])):
            raise ShapeError("The observed entries of Ynew must be finite (mark missing ones in `observed`).")
    empty = np.flatnonzero(~mask.any(axis=1))
    if empty.size:
        raise ShapeError(f"Every row of Ynew needs at least one observed entry; rows {empty[:10].tolist()} "
                         f"have none.")
    Y[~mask] = 0.0
    return Y, mask


# ----------------------------------------------------------- batched L-BFGS over rows


@dataclass(frozen=True)
class RowsResult:
    """x (k, d) minimisers, f (k,) values, iterations (k,), converged (k,) bool."""

    x: np.ndarray
    f: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    evaluations: int


def minimize_rows(fun, x0, max_iters=200, memory=10, gtol=1e-5, ftol=1e-12, max_backtracks=20):
    """Minimise k independent functions f_i(x_i), x_i in R^d, at once.

    ``fun(rows, X) -> (f (r,), g (r, d))`` evaluates the functions ``rows``
    (indices into 0..k-1) at X (r, d).  Each row runs its own L-BFGS (own
    memory, own backtracking Armijo line search, own stopping test), so a row's
    iterates are those of minimising it alone; every call evaluates all rows
    that still move, in one batch.  A row stops when max|g| <= gtol, when one
    step lowers f by less than ftol * max(|f|, 1), when its line search fails
    or after ``max_iters`` iterations.
    """
    x = np.array(x0, dtype=float)
    k, d = x.shape
    f, g = fun(np.arange(k), x)
    f = np.array(f, dtype=float)
    g = np.array(g, dtype=float)
    evaluations = 1
    m = max(1, int(memory))
    S = np.zeros((k, m, d))
    Yh = np.zeros((k, m, d))
    rho = np.zeros((k, m))
    iters = np.zeros(k, int)
    converged = np.max(np.abs(g), axis=1) <= gtol
    active = ~converged & np.isfinite(f)
    for _ in range(int(max_iters)):
        rows = np.flatnonzero(active)
        if rows.size == 0:
            break
        gr = g[rows]
        # two-loop recursion, newest pair last; empty slots have rho = 0
        q = gr.copy()
        alpha = np.zeros((rows.size, m))
        Sr, Yr, rr = S[rows], Yh[rows], rho[rows]
        for j in range(m - 1, -1, -1):
            alpha[:, j] = rr[:, j] * np.einsum("ij,ij->i", Sr[:, j], q)
            q -= alpha[:, j, None] * Yr[:, j]
        yy = np.einsum("ij,ij->i", Yr[:, -1], Yr[:, -1])
        has = rr[:, -1] > 0
        gamma = np.where(has, np.einsum("ij,ij->i", Sr[:, -1], Yr[:, -1]) / np.where(has, yy, 1.0),
                         1.0 / np.maximum(1.0, np.sqrt(np.einsum("ij,ij->i", gr, gr))))
        q *= gamma[:, None]
        for j in range(m):
            b = rr[:, j] * np.einsum("ij,ij->i", Yr[:, j], q)
            q += Sr[:, j] * (alpha[:, j] - b)[:, None]
        p = -q
        slope = np.einsum("ij,ij->i", gr, p)
        bad = ~(slope < 0) | ~np.all(np.isfinite(p), axis=1)
        if np.any(bad):  # not a descent direction: forget the memory, scaled steepest descent
            scale = 1.0 / np.maximum(1.0, np.sqrt(np.einsum("ij,ij->i", gr[bad], gr[bad])))
            p[bad] = -gr[bad] * scale[:, None]
            slope[bad] = np.einsum("ij,ij->i", gr[bad], p[bad])
            S[rows[bad]] = 0.0
            Yh[rows[bad]] = 0.0
            rho[rows[bad]] = 0.0
        # backtracking Armijo line search, per row
        t = np.ones(rows.size)
        f_new = np.full(rows.size, np.nan)
        g_new = np.zeros((rows.size, d))
        searching = np.ones(rows.size, bool)
        for _ in range(int(max_backtracks)):
            idx = np.flatnonzero(searching)
            if idx.size == 0:
                break
            ft, gt = fun(rows[idx], x[rows[idx]] + t[idx, None] * p[idx])
            evaluations += 1
            ft = np.asarray(ft, dtype=float)
            ok = np.isfinite(ft) & np.all(np.isfinite(gt), axis=1) & (
                ft <= f[rows[idx]] + 1e-4 * t[idx] * slope[idx])
            f_new[idx[ok]] = ft[ok]
            g_new[idx[ok]] = gt[ok]
            searching[idx[ok]] = False
            no = idx[~ok]
            if no.size:
                # minimiser of the quadratic through f(0), f'(0), f(t), kept within [0.1 t, 0.5 t]
                ftn = ft[~ok]
                tn = t[no]
                denom = 2.0 * (ftn - f[rows[no]] - slope[no] * tn)
                with np.errstate(invalid="ignore", divide="ignore"):
                    tq = -slope[no] * tn * tn / denom
                tq = np.where(np.isfinite(tq) & np.isfinite(ftn), tq, 0.1 * tn)
                t[no] = np.clip(tq, 0.1 * tn, 0.5 * tn)
        failed = searching
        moved = ~failed
        mr = rows[moved]
        s_vec = t[moved, None] * p[moved]
        y_vec = g_new[moved] - g[mr]
        sy = np.einsum("ij,ij->i", s_vec, y_vec)
        keep = sy > 1e-10 * np.einsum("ij,ij->i", y_vec, y_vec)
        upd = mr[keep]
        if upd.size:
            S[upd, :-1] = S[upd, 1:]
            Yh[upd, :-1] = Yh[upd, 1:]
            rho[upd, :-1] = rho[upd, 1:]
            S[upd, -1] = s_vec[keep]
            Yh[upd, -1] = y_vec[keep]
            rho[upd, -1] = 1.0 / sy[keep]
        decrease = f[mr] - f_new[moved]
        x[mr] += s_vec
        f[mr] = f_new[moved]
        g[mr] = g_new[moved]
        iters[rows] += 1
        done_g = np.max(np.abs(g[mr]), axis=1) <= gtol
        done_f = decrease <= ftol * np.maximum(np.abs(f[mr]), 1.0)
        converged[mr[done_g | done_f]] = True
        active[mr[done_g | done_f]] = False
        active[rows[failed]] = False
        converged[rows[failed]] = np.max(np.abs(g[rows[failed]]), axis=1) <= 1e3 * gtol
    return RowsResult(x=x, f=f, iterations=iters, converged=converged, evaluations=evaluations)


# -------------------------------------------------- psi statistics of single points


def _rbf_forward(params, Z, mu, S):
    var = float(params["variance"])
    ell = np.asarray(params["lengthscales"], dtype=float)
    Q = Z.shape[1]
    l = np.broadcast_to(ell * ell, (Q,)).astype(float)
    shift = Z.mean(axis=0)
    Zc = Z - shift
    muc = mu - shift
    n, M = mu.shape[0], Z.shape[0]
    # Psi1
    b = 1.0 / (l + S)
    diff = muc[:, None, :] - Zc[None, :, :]  # (n, M, Q)
    log1 = np.log(var) - 0.5 * np.sum(np.log1p(S / l), axis=1)
    Psi1 = np.exp(log1[:, None] - 0.5 * np.einsum("nmq,nq->nm", diff * diff, b))
    # Psi2_n[m, m'] = var^2 prod (1 + 2S/l)^-1/2 exp(-|z_m - z_m'|^2_{1/4l} - sum_q a (mu - zbar)^2)
    a = 1.0 / (l + 2.0 * S)
    Zl = Zc / np.sqrt(l)
    zz = np.sum(Zl * Zl, axis=1)
    Dz = 0.25 * (zz[:, None] + zz[None, :] - 2.0 * Zl @ Zl.T)
    u = (a * muc) @ Zc.T  # (n, M)
    w = a @ (Zc * Zc).T  # (n, M)
    c = np.sum(a * muc * muc, axis=1)
    log2 = 2.0 * np.log(var) - 0.5 * np.sum(np.log1p(2.0 * S / l), axis=1) - c
    edge = u - 0.25 * w  # (n, M)
    expo = np.matmul(Zc[None, :, :] * (-0.5 * a)[:, None, :], Zc.T)  # (n, M, M): -1/2 sum_q a z_mq z_m'q
    expo += edge[:, :, None]
    expo += (edge + log2[:, None])[:, None, :]
    expo -= Dz
    Psi2 = np.exp(expo, out=expo)
    psi0 = np.full(n, var)
    return psi0, Psi1, Psi2, (Zc, muc, b, diff, a)


def _rbf_backward(params, Z, mu, S, fw, G0, G1, G2):
    Psi1, Psi2, (Zc, muc, b, diff, a) = fw
    # Psi1: dlog/dmu = -b d, dlog/dS = -b/2 + b^2 d^2 / 2 with d = mu - z
    W1 = G1 * Psi1
    w = W1.sum(axis=1)
    dmu = -b * (muc * w[:, None] - W1 @ Zc)
    dS = -0.5 * b * w[:, None] + 0.5 * b * b * np.einsum("nm,nmq->nq", W1, diff * diff)
    # Psi2: T = G2 * Psi2; dlog/dmu = -2 a (mu - zbar), dlog/dS = -a + 2 a^2 (mu - zbar)^2
    T = G2 * Psi2
    r = T.sum(axis=2)  # (n, M), T symmetric
    t = r.sum(axis=1)
    rZ = r @ Zc
    n, M = T.shape[:2]
    TZ = (T.reshape(n * M, M) @ Zc).reshape(n, M, -1)
    H = np.einsum("nmq,mq->nq", TZ, Zc)  # diag(Z^T T_n Z)
    sq = (muc * muc) * t[:, None] - 2.0 * muc * rZ + 0.5 * (r @ (Zc * Zc)) + 0.5 * H
    dmu += -2.0 * a * (muc * t[:, None] - rZ)
    dS += -a * t[:, None] + 2.0 * a * a * sq
    return dmu, dS


def _linear_forward(params, Z, mu, S):
    gamma = np.broadcast_to(np.asarray(params["variances"], dtype=float), (Z.shape[1],))
    A = Z * gamma
    psi0 = (mu * mu + S) @ gamma
    Psi1 = mu @ A.T
    Psi2 = Psi1[:, :, None] * Psi1[:, None, :] + np.matmul(A[None, :, :] * S[:, None, :], A.T)
    return psi0, Psi1, Psi2, (gamma, A)


def _linear_backward(params, Z, mu, S, fw, G0, G1, G2):
    Psi1, _, (gamma, A) = fw
    n, M = G2.shape[:2]
    dmu = 2.0 * G0[:, None] * mu * gamma + G1 @ A
    dS = G0[:, None] * gamma
    dmu += 2.0 * np.einsum("nmk,nk->nm", G2, Psi1) @ A
    GA = (G2.reshape(n * M, M) @ A).reshape(n, M, -1)
    dS = dS + np.einsum("nmq,mq->nq", GA, A)
    return dmu, dS


def _bias_forward(params, Z, mu, S):
    v = float(params["variance"])
    n, M = mu.shape[0], Z.shape[0]
    return np.full(n, v), np.full((n, M), v), np.full((n, M, M), v * v), None


def _white_forward(params, Z, mu, S):
    n, M = mu.shape[0], Z.shape[0]
    return np.full(n, float(params["variance"])), np.zeros((n, M)), np.zeros((n, M, M)), None


def _constant_backward(params, Z, mu, S, fw, G0, G1, G2):
    return np.zeros_like(mu), np.zeros_like(S)


_POINT_FAMILIES = {
    psi.rbf: (_rbf_forward, _rbf_backward),
    psi.linear: (_linear_forward, _linear_backward),
    psi.bias: (_bias_forward, _constant_backward),
    psi.white: (_white_forward, _constant_backward),
}


def _generic_forward(family, params, Z, mu, S):
    """Any registered family, one point at a time (the sum over one point is that point's statistic)."""
    args = [params[k] for k in family.PARAMS]
    n, M = mu.shape[0], Z.shape[0]
    psi0 = np.empty(n)
    Psi1 = np.empty((n, M))
    Psi2 = np.empty((n, M, M))
    for i in range(n):
        p0, P1, P2 = family.psi_stats(*args, Z, mu[i:i + 1], S[i:i + 1])
        psi0[i], Psi1[i], Psi2[i] = p0, P1[0], P2
    return psi0, Psi1, Psi2, None


def _generic_backward(family, params, Z, mu, S, G0, G1, G2):
    args = [params[k] for k in family.PARAMS]
    dmu = np.empty_like(mu)
    dS = np.empty_like(S)
    for i in range(mu.shape[0]):
        family.psi_stats(*args, Z, mu[i:i + 1], S[i:i + 1])
        g = family.psi_gradients(float(G0[i]), G1[i:i + 1], G2[i], *args, Z, mu[i:i + 1], S[i:i + 1])
        dmu[i], dS[i] = g["mu"][0], g["S"][0]
    return dmu, dS


class PointPsi:
    """Psi statistics of n single points, kept apart: psi0 (n,), Psi1 (n, M), Psi2 (n, M, M).

    ``forward(mu, S)`` then ``backward(G0 (n,), G1 (n, M), G2 (n, M, M) symmetric)``
    -> (d/dmu, d/dS), each (n, Q), of sum_n G0 psi0_n + <G1_n, Psi1_n> + <G2_n, Psi2_n>.
    Supports the kernels of :mod:`engine.psi` (sums with their Psi1 cross terms).
    """

    def __init__(self, kernel, Z):
        self.parts = [(family, params) for _, family, params in psi._parts(kernel)]
        self.Z = np.ascontiguousarray(Z, dtype=float)

    def forward(self, mu, S):
        Z = self.Z
        outs = []
        psi0 = Psi1 = Psi2 = None
        for family, params in self.parts:
            fns = _POINT_FAMILIES.get(family)
            p0, P1, P2, fw = fns[0](params, Z, mu, S) if fns else _generic_forward(family, params, Z, mu, S)
            outs.append((P1, P2, fw))
            psi0 = p0 if psi0 is None else psi0 + p0
            Psi1 = P1.copy() if Psi1 is None else Psi1 + P1
            Psi2 = P2.copy() if Psi2 is None else Psi2 + P2
        for i in range(len(outs)):
            for j in range(i + 1, len(outs)):
                C = outs[i][0][:, :, None] * outs[j][0][:, None, :]
                Psi2 += C + C.transpose(0, 2, 1)
        self._state = (mu, S, outs)
        return psi0, Psi1, Psi2

    def backward(self, G0, G1, G2):
        mu, S, outs = self._state
        dmu = np.zeros_like(mu)
        dS = np.zeros_like(S)
        for i, (family, params) in enumerate(self.parts):
            G1i = G1
            for j, (P1j, _, _) in enumerate(outs):
                if j != i and np.any(P1j):
                    G1i = G1i + 2.0 * np.einsum("nmk,nk->nm", G2, P1j)
            fns = _POINT_FAMILIES.get(family)
            if fns:
                a, b = fns[1](params, self.Z, mu, S, outs[i], G0, G1i, G2)
            else:
                a, b = _generic_backward(family, params, self.Z, mu, S, G0, G1i, G2)
            dmu += a
            dS += b
        return dmu, dS


# ------------------------------------------------------------------ linear algebra


def _lower_inverse(L):
    return sla.solve_triangular(L, np.eye(L.shape[0]), lower=True, check_finite=False)


def _sandwich(Lt, X):
    """Lt X Lt^T for every symmetric (M, M) slice of X (n, M, M); Lt (M, M)."""
    n, M = X.shape[:2]
    XLt = (X.reshape(n * M, M) @ Lt.T).reshape(n, M, M)  # X_n Lt^T, one GEMM
    return np.matmul(XLt.transpose(0, 2, 1), Lt.T)  # (X_n Lt^T)^T Lt^T = Lt X_n Lt^T for symmetric X_n


def _spd_factors(B):
    """(log|B_n| (n,), B_n^-1 (n, M, M)) of symmetric positive definite slices; -inf / NaN where not PD."""
    try:
        LB = np.linalg.cholesky(B)
        logdet = 2.0 * np.sum(np.log(np.diagonal(LB, axis1=1, axis2=2)), axis=1)
        E = np.linalg.inv(B)
    except np.linalg.LinAlgError:
        sign, logdet = np.linalg.slogdet(B)
        logdet = np.where(sign > 0, logdet, np.nan)
        E = np.full_like(B, np.nan)
        good = sign > 0
        if np.any(good):
            E[good] = np.linalg.inv(B[good])
    E = 0.5 * (E + E.transpose(0, 2, 1))
    return logdet, E


def _spd_solve(B, RHS):
    """(log|B_n| (n,), B_n^-1 RHS_n) of symmetric positive definite slices; NaN where not PD."""
    try:
        LB = np.linalg.cholesky(B)
        logdet = 2.0 * np.sum(np.log(np.diagonal(LB, axis1=1, axis2=2)), axis=1)
    except np.linalg.LinAlgError:
        sign, logdet = np.linalg.slogdet(B)
        logdet = np.where(sign > 0, logdet, np.nan)
    return logdet, np.linalg.solve(B, RHS)


def _kmm_factor(Kmm, jitter, beta=None, Psi2=None):
    """chol(Kmm + jitter I) with the model's jitter, escalated like the model does when it fails.

    With ``Psi2`` also chol(I + beta L^-1 Psi2 L^-T) must succeed.  Returns (L, LB or None).
    """
    Kmm = np.asarray(Kmm, dtype=float)
    M = Kmm.shape[0]
    scale = float(np.mean(np.diag(Kmm)))
    scale = scale if scale > 0 else 1.0
    levels = [float(jitter or 0.0)] + [r * scale for r in _JITTER_LADDER if r * scale > (jitter or 0.0)]
    eye = np.eye(M)
    for jit in levels:
        try:
            L = np.linalg.cholesky(Kmm + jit * eye if jit else Kmm)
        except np.linalg.LinAlgError:
            continue
        if Psi2 is None:
            return L, None
        Li = _lower_inverse(L)
        A = Li @ Psi2 @ Li.T
        try:
            LB = np.linalg.cholesky(eye + beta * 0.5 * (A + A.T))
        except np.linalg.LinAlgError:
            continue
        return L, LB
    raise NumericalError("Cholesky factorisation of the inducing-point kernel matrix Kmm failed even with "
                         f"jitter {_JITTER_LADDER[-1]:g} x mean diagonal while projecting new data.")


# --------------------------------------------------------------------- objectives


def _kl_rows(mu, S):
    return 0.5 * np.sum(mu * mu + S - np.log(S) - 1.0, axis=1)


class _ColumnGroup:
    """The training side of the bound on one group of columns (all columns when Y was complete)."""

    def __init__(self, kern, Z, Kmm, jitter, beta, mu, S, Ytrain, cols, rows, mask):
        train = psi.compute(kern, Z, mu[rows], S[rows])
        L, LB = _kmm_factor(Kmm, jitter, beta, train.Psi2)
        Li = _lower_inverse(L)
        self.Kinv = Li.T @ Li
        self.Lwi = sla.solve_triangular(LB, Li, lower=True, check_finite=False)  # (L L_B)^-1
        D = Ytrain.shape[1]
        P = np.zeros((Z.shape[0], D))
        P[:, cols] = self.Lwi @ (train.Psi1.T @ Ytrain[np.ix_(rows, cols)])  # (M, D), 0 off the group
        colmask = np.zeros(D, bool)
        colmask[cols] = True
        mask_f = (mask & colmask).astype(float)
        self.Dn = mask_f.sum(axis=1)
        self.s = None  # set by the caller (needs the new rows)
        self.P, self.mask_f = P, mask_f
        M = P.shape[0]
        self.use_R = len(cols) < M  # G_n = R_n R_n^T with R_n = P diag(o_n), (M, |cols|)
        self.cols = np.asarray(cols)
        if not self.use_R:
            self.G = np.matmul(P[None, :, :] * mask_f[:, None, :], P.T)
        self.trG = mask_f @ np.sum(P * P, axis=0)


class BayesianProjection:
    """F_O(X, x*_n) - F_O(X) - KL(q(x*_n)) per row; see the module docstring.

    ``value_and_grad(rows, theta)``: theta (r, 2Q) = [mu*, unconstrained S*]
    of the problems ``rows`` (indices into the rows of Y); returns the values
    (r,) and gradients (r, 2Q) (to maximise).  A model trained with missing
    values has its bound summed over groups of columns with the same observed
    training rows; so has the difference, one term per group.
    """

    def __init__(self, model, Y, mask):
        values = model.parameters
        kern = model.kernel_at(values)
        self.Q = model.latent_dim
        Z = np.asarray(values["Z"], dtype=float)
        self.beta = beta = 1.0 / float(values["noise_variance"])
        mu, S = values["X_mean"], values["X_variance"]
        Kmm = kern.K(Z)
        jitter = getattr(model, "jitter", 0.0)
        train_mask = getattr(model, "observed", None)
        N, D = model.Y.shape
        if train_mask is None:
            parts = [(np.arange(D), np.arange(N))]
        else:
            from .missing import observation_groups

            parts = [(g.cols, np.flatnonzero(g.rows)) for g in observation_groups(np.asarray(train_mask, bool))]
        self.groups = []
        Yo = Y * mask
        for cols, rows in parts:
            g = _ColumnGroup(kern, Z, Kmm, jitter, beta, mu, S, model.Y, cols, rows, mask)
            Yg = Yo * g.mask_f
            g.s = np.sum(Yg * Yg, axis=1)
            g.h = Yg @ g.P.T
            if g.use_R:
                g.P_cols = np.ascontiguousarray(g.P[:, g.cols])
                g.mask_cols = np.ascontiguousarray(g.mask_f[:, g.cols])
            self.groups.append(g)
        self.Kinv = self.groups[0].Kinv
        self.point_psi = PointPsi(kern, Z)
        self.M = Z.shape[0]

    def value_and_grad(self, rows, theta, *, with_grad=True):
        Q, beta = self.Q, self.beta
        mu = np.ascontiguousarray(theta[:, :Q])
        S = POSITIVE.forward(theta[:, Q:])
        psi0, Psi1, Psi2 = self.point_psi.forward(mu, S)
        value = np.zeros(mu.shape[0])
        dpsi0 = np.zeros(mu.shape[0])
        dPsi1 = np.zeros_like(Psi1)
        dPsi2 = np.zeros_like(Psi2) if with_grad else None
        for g in self.groups:
            Dn = g.Dn[rows]
            if not np.any(Dn):
                continue
            v_, dp1, dp2 = self._group_terms(g, rows, psi0, Psi1, Psi2, with_grad)
            value += v_
            if with_grad:
                dpsi0 += -0.5 * beta * Dn
                dPsi1 += dp1
                dPsi2 += dp2
        self.last_density = value.copy()  # the data terms only: callers add the latent terms they need
        value = value - _kl_rows(mu, S)
        if not with_grad:
            return value, None
        dmu, dS = self.point_psi.backward(dpsi0, dPsi1, 0.5 * (dPsi2 + dPsi2.transpose(0, 2, 1)))
        dmu -= mu
        dS -= 0.5 * (1.0 - 1.0 / S)
        dS *= POSITIVE.grad_factor(theta[:, Q:])
        grad = np.concatenate([dmu, dS], axis=1)
        bad = ~np.isfinite(value)
        if np.any(bad):
            value[bad] = -np.inf
        return value, grad

    def _group_terms(self, g, rows, psi0, Psi1, Psi2, with_grad):
        """One column group's F_O(X, x*) - F_O(X) (r,), and its gradients w.r.t. Psi1 and Psi2."""
        M, beta = self.M, self.beta
        Dn, s, h = g.Dn[rows], g.s[rows], g.h[rows]
        v = Psi1 @ g.Lwi.T  # (r, M)
        B = beta * _sandwich(g.Lwi, Psi2)
        B[:, np.arange(M), np.arange(M)] += 1.0
        if g.use_R:
            R = g.P_cols[None, :, :] * g.mask_cols[rows][:, None, :]  # (r, M, |cols|)
        if with_grad or not g.use_R:
            logdet, E = _spd_factors(B)
            Ev = np.einsum("nmk,nk->nm", E, v)
            Eh = np.einsum("nmk,nk->nm", E, h)
            if g.use_R:
                ER = np.matmul(E, R)
                trEG = np.einsum("nmd,nmd->n", R, ER)
            else:
                G = g.G[rows]
                trEG = np.einsum("nmk,nmk->n", E, G)
        else:  # the value alone: solves instead of the inverse
            logdet, sol = _spd_solve(B, np.concatenate([R, v[:, :, None], h[:, :, None]], axis=2))
            ER, Ev, Eh = sol[:, :, :-2], sol[:, :, -2], sol[:, :, -1]
            trEG = np.einsum("nmd,nmd->n", R, ER)
        data = trEG - g.trG[rows] + 2.0 * np.einsum("nm,nm->n", v, Eh) + s * np.einsum("nm,nm->n", v, Ev)
        trKP = np.einsum("nmk,mk->n", Psi2, g.Kinv)
        value = (0.5 * Dn * (np.log(beta) - LOG_2PI) - 0.5 * Dn * logdet - 0.5 * beta * s
                 + 0.5 * beta**2 * data - 0.5 * beta * Dn * (psi0 - trKP))
        if not with_grad:
            return value, None, None
        # d/dK = -(beta |O| / 2) E - (beta^3 / 2) E Pi E
        if g.use_R:
            EPE = np.matmul(ER, ER.transpose(0, 2, 1))
        else:
            EPE = np.matmul(np.matmul(E, G), E)
        outer = Eh[:, :, None] * Ev[:, None, :]
        EPE += outer + outer.transpose(0, 2, 1) + s[:, None, None] * Ev[:, :, None] * Ev[:, None, :]
        dK = (-0.5 * beta * Dn)[:, None, None] * E - 0.5 * beta**3 * EPE
        dPsi2 = _sandwich(g.Lwi.T, dK) + (0.5 * beta * Dn)[:, None, None] * g.Kinv
        dPsi1 = (beta**2 * (Eh + s[:, None] * Ev)) @ g.Lwi
        return value, dPsi1, dPsi2

    def unpack(self, theta):
        return theta[:, :self.Q].copy(), POSITIVE.forward(theta[:, self.Q:])

    def scales(self, theta0):
        """Diagonal preconditioner: means in units of the starting standard deviation.

        The curvature of the bound in mu* is about 1 / S* (S* is close to the
        inverse curvature at the optimum), and in the softplus-transformed
        variances about 1/2; scaling the means by sqrt(S* at the start) makes
        the problem well conditioned (about 15 L-BFGS iterations on oil flow
        instead of about 150 unscaled).
        """
        S0 = POSITIVE.forward(theta0[:, self.Q:])
        return np.concatenate([np.sqrt(S0), np.ones_like(S0)], axis=1)

    def prior_start(self, n):
        return np.hstack([np.zeros((n, self.Q)), np.full((n, self.Q), float(POSITIVE.inverse(1.0)))])

    def starts(self, model, idx):
        values = model.parameters
        return np.concatenate([values["X_mean"][idx], POSITIVE.inverse(values["X_variance"][idx])], axis=1)


class PointProjection:
    """log p(y*_O | x, model) + log N(x | 0, I) per row, for the GP-LVM and the sparse GP-LVM.

    The predictive distribution at a point x: mean k(x)^T alpha (centred), variance
    k(x, x) - |L1^-1 k(x)|^2 + |L2^-1 k(x)|^2 + noise, with k(x) the kernel
    vector against the training latents (GP-LVM: L1 = chol(K + noise I), no L2)
    or against Z (sparse: L1 = chol(Kmm), L2 = chol(Kmm + beta Psi1^T Psi1)).
    """

    def __init__(self, model, Y, mask, sparse):
        values = model.parameters
        self.kern = kern = model.kernel_at(values)
        self.Q = model.latent_dim
        noise = float(values["noise_variance"])
        X = np.asarray(values["X_mean"], dtype=float)
        jitter = getattr(model, "jitter", 0.0)
        if sparse:
            Z = np.asarray(values["Z"], dtype=float)
            beta = 1.0 / noise
            Knm = kern.K(X, Z)
            L, LB = _kmm_factor(kern.K(Z), jitter, beta, Knm.T @ Knm)
            LW = L @ LB
            self.centres, self.L1, self.L2 = Z, L, LW
            self.alpha = beta * sla.cho_solve((LW, True), Knm.T @ model.Y, check_finite=False)
        else:
            Kn = kern.K(X)
            Kn[np.diag_indices_from(Kn)] += noise
            L, _ = _kmm_factor(Kn, jitter)
            self.centres, self.L1, self.L2 = X, L, None
            self.alpha = sla.cho_solve((L, True), model.Y, check_finite=False)
        self.noise = noise
        self.Y = Y
        self.mask_f = mask.astype(float)
        self.Dn = self.mask_f.sum(axis=1)

    def predictive(self, X):
        """Centred mean (r, D), variance (r,) with noise, and the pieces the gradient needs."""
        Ks = self.kern.K(X, self.centres)
        mean = Ks @ self.alpha
        a = sla.solve_triangular(self.L1, Ks.T, lower=True, check_finite=False)
        latent = self.kern.K_diag(X) - np.sum(a * a, axis=0)
        b = None
        if self.L2 is not None:
            b = sla.solve_triangular(self.L2, Ks.T, lower=True, check_finite=False)
            latent = latent + np.sum(b * b, axis=0)
        clipped = latent < 0
        var = np.where(clipped, 0.0, latent) + self.noise
        return mean, var, (Ks, a, b, clipped)

    #: With ``mean_only`` the variance is held at the noise: a first stage that finds the point
    #: reconstructing the row.  Far from the training latents the predictive variance grows,
    #: and with little noise a row explained poorly near the data (a residual of a few noise
    #: standard deviations) scores better far away, where everything is "explained" by variance.
    mean_only = False

    def value_and_grad(self, rows, X, *, with_grad=True):
        X = np.ascontiguousarray(X)
        mean, var, (Ks, a, b, clipped) = self.predictive(X)
        if self.mean_only:
            var = np.full_like(var, self.noise)
            clipped = np.ones_like(clipped)
        mf = self.mask_f[rows]
        Dn = self.Dn[rows]
        res = mf * (self.Y[rows] - mean)
        r2 = np.sum(res * res, axis=1)
        density = -0.5 * Dn * (LOG_2PI + np.log(var)) - 0.5 * r2 / var
        self.last_density = density.copy()
        value = density - 0.5 * np.sum(X * X, axis=1) - 0.5 * self.Q * LOG_2PI
        if not with_grad:
            return value, None
        dvar = np.where(clipped, 0.0, -0.5 * Dn / var + 0.5 * r2 / var**2)
        dmean = res / var[:, None]
        dvdk = -2.0 * sla.solve_triangular(self.L1, a, lower=True, trans=1, check_finite=False)
        if b is not None:
            dvdk += 2.0 * sla.solve_triangular(self.L2, b, lower=True, trans=1, check_finite=False)
        dKs = dmean @ self.alpha.T + dvar[:, None] * dvdk.T
        grad = self.kern.grad_X(dKs, X, self.centres) + self.kern.grad_X_diag(dvar, X) - X
        return value, grad

    def unpack(self, theta):
        return theta.copy(), np.zeros_like(theta)

    def scales(self, theta0):
        return np.ones_like(theta0)

    def prior_start(self, n):
        return np.zeros((n, self.Q))

    def starts(self, model, idx):
        return np.asarray(model.parameters["X_mean"], dtype=float)[idx]


# ---------------------------------------------------------------------- public


def projection_problem(model, Y, mask):
    """The per-row objective of ``model`` for checked new data (see :func:`check_new_data`)."""
    from .models.gplvm import GPLVM
    from .models.sparse import SparseGPLVM

    names = set(model.parameters)
    if {"X_mean", "X_variance", "Z"} <= names:
        return BayesianProjection(model, Y, mask)
    if isinstance(model, SparseGPLVM):
        return PointProjection(model, Y, mask, sparse=True)
    if isinstance(model, GPLVM):
        return PointProjection(model, Y, mask, sparse=False)
    raise EngineError(f"Projection of new data is not implemented for {type(model).__name__}.")


def _nearest_training_rows(model, Y, mask, count):
    """Indices (n, count) of the training rows nearest to each new row on its observed entries."""
    T = model.Y  # centred (0 where a training entry is missing)
    count = int(min(max(1, count), T.shape[0]))
    mf = mask.astype(float)
    train_mask = getattr(model, "observed", None)
    if train_mask is None:
        # sum_O (t - y)^2 = sum_O t^2 - 2 sum_O t y + sum_O y^2; the last term is constant per row
        dist = mf @ (T * T).T - 2.0 * (Y * mf) @ T.T
    else:  # mean squared difference over the entries observed in both rows
        To = np.asarray(train_mask, float)
        Ym = Y * mf
        both = mf @ To.T
        dist = (mf @ (T * T).T - 2.0 * Ym @ T.T + (Ym * Ym) @ To.T) / np.maximum(both, 1.0)
        dist[both == 0] = np.inf
    return np.argsort(dist, axis=1, kind="stable")[:, :count]


@blas_pinned
def best_starts(problem, theta_all: np.ndarray, n: int, K: int, keep: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``keep`` best of ``K`` starts per row by ``problem.value_and_grad`` (higher is better).

    ``theta_all`` (n*K, P) holds row i's starts at i*K .. i*K+K-1.  Returns
    ``rows`` (n*keep,), the new row each kept start belongs to, and the starts
    (n*keep, P), row-major as given.  A non-finite score ranks last.
    """
    rows_all = np.repeat(np.arange(n), K)
    if K <= keep:
        return rows_all, theta_all
    score, _ = problem.value_and_grad(rows_all, theta_all, with_grad=False)
    score = np.where(np.isfinite(score), score, -np.inf).reshape(n, K)
    best = np.argsort(-score, axis=1, kind="stable")[:, :keep]
    chosen = (np.arange(n)[:, None] * K + best).ravel()
    return rows_all[chosen], theta_all[chosen]


def best_of_optimised(res: "RowsResult", n: int, keep: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the index (into the n*keep problems) of the lowest final value, and the values (n, keep).

    Raises NumericalError when every start of some row ended non-finite.
    """
    fvals = np.where(np.isfinite(res.f), res.f, np.inf).reshape(n, keep)
    pick = np.argmin(fvals, axis=1)
    if not np.all(np.isfinite(fvals[np.arange(n), pick])):
        raise NumericalError("Projection failed: the objective is not finite at any start of some rows.")
    return np.arange(n) * keep + pick, fvals


def infer_latent(model, Ynew, observed=None, *, num_starts=5, num_optimised=2, max_iters=300,
                 prior_start=True, gtol=1e-5, ftol=2.2e-9, memory=10, return_details=False):
    """Project the rows of ``Ynew`` (n, D) or (D,) into the latent space of a trained ``model``.

    NaN entries of Ynew are unobserved, or pass ``observed``, a boolean mask of
    Ynew's shape (then the unobserved entries are never read).  Each row is
    projected independently given the model (module docstring); all rows are
    optimised together.  ``num_starts`` training points nearest to each row
    (on its observed entries) are scored and the best ``num_optimised`` are
    optimised with at most ``max_iters`` L-BFGS iterations each (stopping at
    max|gradient| <= ``gtol``); the best optimum is kept.

    Returns :class:`LatentInference` with arrays of n rows (n = 1 for a (D,)
    input).  ``return_details=True`` also returns a dict with the optimiser's
    iterations, convergence flags and evaluation count per problem.
    Raises ShapeError for a wrong shape, a row with nothing observed, or
    non-finite observed values.  BLAS is held to one thread meanwhile (many
    small factorisations; see engine._threads).
    """
    Y, mask = check_new_data(model, Ynew, observed)
    if callable(getattr(model, "copy", None)):
        model = model.copy()  # one consistent set of parameters, even while the original trains on
    Yc = np.where(mask, Y - model.Y_mean, 0.0)
    problem = projection_problem(model, Yc, mask)
    n = Y.shape[0]
    num_starts = int(max(1, num_starts))
    cand = _nearest_training_rows(model, Yc, mask, num_starts)  # (n, K)
    K = cand.shape[1]
    theta_all = problem.starts(model, cand.ravel())
    if prior_start:  # one more candidate per row: the prior N(0, I) (its mean for point models)
        theta_all = np.concatenate([theta_all.reshape(n, K, -1), problem.prior_start(n)[:, None, :]], axis=1)
        theta_all = theta_all.reshape(n * (K + 1), -1)
        K += 1
    keep = int(min(max(1, num_optimised), K))
    rows, theta0 = best_starts(problem, theta_all, n, K, keep)
    scale = problem.scales(theta0)

    if isinstance(problem, PointProjection):  # first reconstruct, then weigh the variance too
        problem.mean_only = True
        staged = minimize_rows(lambda idx, X: tuple(-v for v in problem.value_and_grad(rows[idx], X)),
                               theta0.copy(), max_iters=max_iters, memory=memory, gtol=gtol, ftol=ftol)
        problem.mean_only = False
        theta0 = np.where(np.isfinite(staged.f)[:, None], staged.x, theta0)

    def negative(idx, U):
        v, g = problem.value_and_grad(rows[idx], theta0[idx] + scale[idx] * U)
        return -v, -g * scale[idx]

    res = minimize_rows(negative, np.zeros_like(theta0), max_iters=max_iters, memory=memory, gtol=gtol, ftol=ftol)
    winners, fvals = best_of_optimised(res, n, keep)
    theta = (theta0 + scale * res.x)[winners]
    mean, variance = problem.unpack(theta)
    problem.value_and_grad(np.arange(n), theta, with_grad=False)
    density = problem.last_density
    if isinstance(problem, BayesianProjection):  # eq. 20: the augmented bound has the new point's KL too
        density = density - _kl_rows(mean, variance)
    pred, pred_var = model.predict(mean, variance if isinstance(problem, BayesianProjection) else None,
                                   include_noise=True)
    pred = np.asarray(pred, dtype=float)
    pred_var = np.asarray(pred_var, dtype=float)
    if pred_var.ndim == 1:
        pred_var = pred_var[:, None]
    pred_var = np.broadcast_to(pred_var, pred.shape).copy()
    out = LatentInference(mean=mean, variance=variance, log_density=density, observed=mask,
                          prediction=pred, prediction_variance=pred_var)
    if return_details:
        details = {"iterations": res.iterations.reshape(n, keep), "converged": res.converged.reshape(n, keep),
                   "evaluations": res.evaluations, "objective": -fvals, "start_index": cand}
        return out, details
    return out


def log_density(model, Ynew, observed=None, **options) -> np.ndarray:
    """(n,) log density of each row's observed entries at its projection, nats.

    Bayesian GP-LVM: F(X, x*) - F(X) (eq. 20), a lower bound on log p(y*_O | Y)
    up to the bound's own gap; point models: log p(y*_O | x*, model) at the MAP x*.
    """
    return infer_latent(model, Ynew, observed=observed, **options).log_density
