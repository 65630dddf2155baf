"""Psi statistics of n single points, kept apart (not summed): psi0 (n,), Psi1 (n, M), Psi2 (n, M, M).

What the projection of new rows (one q(x*_n) per row) and predictions at
uncertain inputs need: per-point statistics and their gradients w.r.t. each
point's mean and variance, batched in numpy over the n points, row by row: a
point's statistics and gradients do not depend, bit for bit, on the other
points of the batch (:func:`engine.linalg.rows_dot`).  RBF, Linear,
Bias and White have vectorised forms here; any other family registered in
:mod:`engine.psi` is evaluated one point at a time through its own
``psi_stats`` / ``psi_gradients`` (the statistic of one point is the sum over
that point).  Sums of kernels add their Psi1 cross terms to Psi2, as
:mod:`engine.psi.sum` does for the sums over points.
"""
from __future__ import annotations

import numpy as np

from ..linalg import rows_dot
from . import _parts, bias, linear, rbf, white



def _rbf_forward(params, Z, mu, S):
    var = float(params["variance"])
    ell = np.asarray(params["lengthscales"], dtype=float)
    Q = Z.shape[1]
    l = np.broadcast_to(ell * ell, (Q,)).astype(float)
    shift = Z.mean(axis=0)
    Zc = Z - shift
    muc = mu - shift
    n = mu.shape[0]
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
    u = rows_dot(a * muc, Zc.T)  # (n, M)
    w = rows_dot(a, (Zc * Zc).T)  # (n, M)
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
    dmu = -b * (muc * w[:, None] - rows_dot(W1, Zc))
    dS = -0.5 * b * w[:, None] + 0.5 * b * b * np.einsum("nm,nmq->nq", W1, diff * diff)
    # Psi2: T = G2 * Psi2; dlog/dmu = -2 a (mu - zbar), dlog/dS = -a + 2 a^2 (mu - zbar)^2
    T = G2 * Psi2
    r = T.sum(axis=2)  # (n, M), T symmetric
    t = r.sum(axis=1)
    rZ = rows_dot(r, Zc)
    TZ = np.matmul(T, Zc)  # (n, M, Q)
    H = np.einsum("nmq,mq->nq", TZ, Zc)  # diag(Z^T T_n Z)
    sq = (muc * muc) * t[:, None] - 2.0 * muc * rZ + 0.5 * rows_dot(r, Zc * Zc) + 0.5 * H
    dmu += -2.0 * a * (muc * t[:, None] - rZ)
    dS += -a * t[:, None] + 2.0 * a * a * sq
    return dmu, dS


def _linear_forward(params, Z, mu, S):
    gamma = np.broadcast_to(np.asarray(params["variances"], dtype=float), (Z.shape[1],))
    A = Z * gamma
    psi0 = np.einsum("nq,q->n", mu * mu + S, gamma)
    Psi1 = rows_dot(mu, A.T)
    Psi2 = Psi1[:, :, None] * Psi1[:, None, :] + np.matmul(A[None, :, :] * S[:, None, :], A.T)
    return psi0, Psi1, Psi2, (gamma, A)


def _linear_backward(params, Z, mu, S, fw, G0, G1, G2):
    Psi1, _, (gamma, A) = fw
    dmu = 2.0 * G0[:, None] * mu * gamma + rows_dot(G1, A)
    dS = G0[:, None] * gamma
    dmu += 2.0 * rows_dot(np.einsum("nmk,nk->nm", G2, Psi1), A)
    GA = np.matmul(G2, A)  # (n, M, Q)
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
    rbf: (_rbf_forward, _rbf_backward),
    linear: (_linear_forward, _linear_backward),
    bias: (_bias_forward, _constant_backward),
    white: (_white_forward, _constant_backward),
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
        self.parts = [(family, params) for _, family, params in _parts(kernel)]
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
