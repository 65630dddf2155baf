"""Psi statistics of a sum of kernels k = sum_a k_a.

psi0 and Psi1 add.  Psi2 of the sum is

    Psi2 = sum_a Psi2_a + sum_{a != b} sum_n <k_a(z_m, x_n) k_b(x_n, z_m')>,

and the cross expectation factorises, <k_a k_b> = Psi1_a[n, m] Psi1_b[n, m'],
whenever one of the two kernels does not depend on x (Bias: a constant) or
vanishes off the data (White: k(x, z) = 0 for the inducing inputs z).  Then

    Psi2 = sum_a Psi2_a + sum_{a != b} Psi1_a^T Psi1_b        (exact).

Other pairs (RBF x Linear, RBF x RBF, ...) are not Psi1-separable and are
refused by :func:`cross_term_ok`, so a sum has at most one x-dependent part d.

Closed form.  The families with a ``CROSS`` (Bias, White) have statistics
that do not depend on q(x_n): every point has the same psi0_a, Psi1 row p_a
(M,) and Psi2_n,a = p_a p_a^T, so nothing of size N x M is formed for them.
With s = Psi1_d^T 1 (M,), the column sums of the x-dependent part's Psi1,

    Psi1 = Psi1_d + 1 P^T,             P = sum_a p_a
    Psi2 = Psi2_d + N sum_a p_a p_a^T + sum_a (p_a s^T + s p_a^T)
           + N sum_{a < b} (p_a p_b^T + p_b p_a^T).

Gradients, with G2+ = dL_dPsi2 + dL_dPsi2^T: the x-dependent part receives
the Psi1 cotangent dL_dPsi1 + 1 (G2+ P)^T (the cross terms carry, e.g., the
Bias x RBF term into the RBF parameters, Z, mu and S), and an x-independent
part a is the one-point problem with dL_dpsi0 N, Psi1 cotangent

    dL/dp_a = 1^T dL_dPsi1 + G2+ s + N sum_{b != a} G2+ p_b          (1, M)

and Psi2 cotangent N dL_dPsi2.  The x-dependent part's Psi1 for s is its
forward pass's when the family keeps it (RBF), so the backward pass does
not recompute it.
"""
from __future__ import annotations

import numpy as np


def cross_term_ok(family_a, family_b) -> bool:
    """Whether <k_a k_b> = Psi1_a^T Psi1_b exactly (one of them is Bias or White)."""
    return getattr(family_a, "CROSS", None) is not None or getattr(family_b, "CROSS", None) is not None


def x_independent(family) -> bool:
    """Whether the family's psi statistics do not depend on q(x_n) (Bias, White: those with a CROSS)."""
    return getattr(family, "CROSS", None) is not None


def _args(family, params):
    return [params[name] for name in family.PARAMS]


def _one_point(mu, S):
    return mu[:1], S[:1]


def _rows(parts, Z, mu, S):
    """Per part: the Psi1 row p (M,) of an x-independent family, else None."""
    return [np.asarray(family.psi1(*_args(family, params), Z, *_one_point(mu, S))[0], dtype=np.float64)
            if x_independent(family) else None for family, params in parts]


def _const_cross(rows, N, M):
    """N sum_{a < b} (p_a p_b^T + p_b p_a^T) over the x-independent parts' rows (M, M), or None."""
    consts = [p for p in rows if p is not None and np.any(p)]
    if len(consts) < 2:
        return None
    out = np.zeros((M, M))
    for a in range(len(consts)):
        for b in range(a + 1, len(consts)):
            cross = np.outer(consts[a], consts[b])
            out += cross + cross.T
    return N * out


def psi_stats(parts, Z, mu, S):
    """(psi0, Psi1 (N, M), Psi2 (M, M)) of a sum.

    parts: list of (family, params) with ``family`` a module such as
    :mod:`engine.psi.rbf` and ``params`` a dict holding ``family.PARAMS``;
    at most one x-dependent family (:func:`cross_term_ok`).
    """
    N, M = np.shape(mu)[0], np.shape(Z)[0]
    psi0 = 0.0
    Psi2 = np.zeros((M, M))
    rows = []
    Psi1_d = None
    for family, params in parts:
        if x_independent(family):
            p0, P1, P2 = family.psi_stats(*_args(family, params), Z, *_one_point(mu, S))
            psi0 += N * p0
            Psi2 += N * P2
            rows.append(np.asarray(P1[0], dtype=np.float64))
        else:
            p0, P1, P2 = family.psi_stats(*_args(family, params), Z, mu, S)
            psi0 += p0
            Psi2 += P2
            rows.append(None)
            Psi1_d = np.asarray(P1, dtype=np.float64)  # the family's own new array: the rows are added in place
    P = sum((p for p in rows if p is not None), np.zeros(M))
    if Psi1_d is None:
        Psi1 = np.repeat(P[None, :], N, axis=0)
    else:
        Psi1 = Psi1_d
        s = Psi1_d.sum(axis=0)
        for p in rows:
            if p is not None and np.any(p):
                cross = np.outer(p, s)
                Psi2 += cross + cross.T
        if np.any(P):
            Psi1 += P
    cc = _const_cross(rows, N, M)
    if cc is not None:
        Psi2 += cc
    return float(psi0), Psi1, Psi2


def psi_gradients(dL_dpsi0, dL_dPsi1, dL_dPsi2, parts, Z, mu, S):
    """Per-part gradient dicts (each as returned by ``family.psi_gradients``; an x-independent
    part's mu and S entries are None: it has no gradient there), in order of ``parts``."""
    N, M = np.shape(mu)[0], np.shape(Z)[0]
    G1 = np.asarray(dL_dPsi1, dtype=np.float64)
    G2 = np.asarray(dL_dPsi2, dtype=np.float64)
    G2pT = G2 + G2.T
    rows = _rows(parts, Z, mu, S)
    P = sum((p for p in rows if p is not None), np.zeros(M))
    s = None
    if any(p is not None and np.any(p) for p in rows):
        for (family, params), p in zip(parts, rows):
            if p is None:
                s = np.asarray(family.psi1(*_args(family, params), Z, mu, S)).sum(axis=0)
    col_G1 = G1.sum(axis=0)
    out = []
    for a, ((family, params), p) in enumerate(zip(parts, rows)):
        if p is None:
            G1a = G1 + (G2pT @ P)[None, :] if np.any(P) else G1
            out.append(family.psi_gradients(dL_dpsi0, G1a, G2, *_args(family, params), Z, mu, S))
            continue
        dp = col_G1.copy()
        if s is not None:
            dp += G2pT @ s
        others = sum((q for b, q in enumerate(rows) if b != a and q is not None), np.zeros(M))
        if np.any(others):
            dp += N * (G2pT @ others)
        g = family.psi_gradients(float(dL_dpsi0) * N, dp[None, :], N * G2, *_args(family, params),
                                 Z, *_one_point(mu, S))
        out.append(dict(g, mu=None, S=None))
    return out


# ------------------------------------------------------------------ weighted sums over points
#
# K weighted sums over the points at once: psi0[k] = sum_n W[n, k] psi0_n and
# Psi2[k] = sum_n W[n, k] Psi2_n, W (N, K) (e.g. 0/1 memberships of the row
# sets of K column groups).  An x-dependent family provides
# ``psi_stats_weighted`` / ``psi_gradients_weighted``; the families with a
# ``CROSS`` (Bias, White) have statistics that do not depend on q(x_n) (the
# same psi0_n, Psi1[n] and Psi2_n for every n), so theirs are those of one
# point times sum_n W[n, k].  With Psi1_a[n] = p_a for such a family, the cross
# term of a pair is
#
#     sum_n W[n, k] (Psi1_a[n]^T Psi1_b[n] + transpose) = p_a^T u_k + u_k^T p_a,
#     u_k = sum_n W[n, k] Psi1_b[n]                    (a rank-2 update per k).


def weighted_ok(families) -> bool:
    """Whether :func:`psi_stats_weighted` handles a sum of these families (at most one
    x-dependent family, which must provide ``psi_stats_weighted``)."""
    dependent = [f for f in families if not x_independent(f)]
    return len(dependent) <= 1 and all(hasattr(f, "psi_stats_weighted") for f in dependent)


def psi_stats_weighted(parts, Z, mu, S, W):
    """(psi0 (K,), Psi1 (N, M), Psi2 (K, M, M)) of the weighted sums of a sum of kernels.

    parts: as in :func:`psi_stats`, accepted by :func:`weighted_ok`; W: (N, K).
    """
    N, M = np.shape(mu)[0], np.shape(Z)[0]
    W = np.asarray(W, dtype=np.float64)
    s = W.sum(axis=0)
    K = s.shape[0]
    psi0 = np.zeros(K)
    Psi2 = np.zeros((K, M, M))
    rows = []  # per part: Psi1 row p (M,) of an x-independent family, else None
    Psi1s = []  # per part: Psi1 (N, M) of an x-dependent family, else None
    for family, params in parts:
        if x_independent(family):
            p0, P1, P2 = family.psi_stats(*_args(family, params), Z, *_one_point(mu, S))
            psi0 += s * p0
            Psi2 += s[:, None, None] * P2
            rows.append(np.asarray(P1[0], dtype=np.float64))
            Psi1s.append(None)
        else:
            p0, P1, P2 = family.psi_stats_weighted(*_args(family, params), Z, mu, S, W)
            psi0 += p0
            Psi2 += P2
            rows.append(None)
            Psi1s.append(P1)
    Psi1 = np.zeros((N, M))
    for p, P1 in zip(rows, Psi1s):
        Psi1 += P1 if P1 is not None else p
    for a in range(len(parts)):
        for b in range(a + 1, len(parts)):
            i, j = (a, b) if rows[a] is not None else (b, a)  # i: x-independent
            p = rows[i]
            if not np.any(p):
                continue
            u = s[:, None] * rows[j] if rows[j] is not None else W.T @ Psi1s[j]  # (K, M)
            cross = p[None, :, None] * u[:, None, :]
            Psi2 += cross + np.swapaxes(cross, 1, 2)
    return psi0, Psi1, Psi2


def psi_gradients_weighted(dL_dpsi0, dL_dPsi1, dL_dPsi2, parts, Z, mu, S, W):
    """Per-part gradient dicts for L = sum_k (dL_dpsi0[k] psi0[k] + sum(dL_dPsi2[k] Psi2[k]))
    + sum(dL_dPsi1 Psi1) of :func:`psi_stats_weighted`, in order of ``parts``.

    dL_dpsi0: (K,); dL_dPsi1: (N, M); dL_dPsi2: (K, M, M), need not be symmetric.
    """
    W = np.asarray(W, dtype=np.float64)
    s = W.sum(axis=0)
    g0 = np.asarray(dL_dpsi0, dtype=np.float64)
    G1 = np.asarray(dL_dPsi1, dtype=np.float64)
    G2 = np.asarray(dL_dPsi2, dtype=np.float64)
    G2pT = G2 + np.swapaxes(G2, 1, 2)
    rows, Psi1s = [], []
    for family, params in parts:
        if x_independent(family):
            rows.append(np.asarray(family.psi1(*_args(family, params), Z, *_one_point(mu, S))[0], dtype=np.float64))
            Psi1s.append(None)
        else:
            rows.append(None)
            Psi1s.append(None)  # computed below only if a cross term needs it
    crossing = any(p is not None and np.any(p) for p in rows)
    for a, (family, params) in enumerate(parts):
        if rows[a] is None and crossing:
            Psi1s[a] = family.psi1(*_args(family, params), Z, mu, S)
    # Psi1 cotangents: (N, M) for an x-dependent part; the row sum (M,) for an x-independent one
    G1s = [G1.sum(axis=0) if p is not None else G1 for p in rows]
    for a in range(len(parts)):
        for b in range(a + 1, len(parts)):
            i, j = (a, b) if rows[a] is not None else (b, a)
            p = rows[i]
            # L_cross = sum_k p^T G2pT[k] u_k with u_k = sum_n W[n, k] Psi1_j[n]
            V = np.einsum("kmn,m->kn", G2pT, p)  # (K, M): d/du_k
            if rows[j] is not None:
                u = s[:, None] * rows[j]
                G1s[j] = G1s[j] + s @ V
            elif np.any(p):
                u = W.T @ Psi1s[j]
                G1s[j] = G1s[j] + W @ V
            else:  # p = 0 (White): no cross term
                continue
            G1s[i] = G1s[i] + np.einsum("kmn,kn->m", G2pT, u)
    out = []
    for (family, params), p, G1a in zip(parts, rows, G1s):
        if p is not None:
            g = family.psi_gradients(float(g0 @ s), G1a[None, :], np.einsum("k,kmn->mn", s, G2),
                                     *_args(family, params), Z, *_one_point(mu, S))
            g = dict(g, mu=None, S=None)
        else:
            g = family.psi_gradients_weighted(g0, G1a, G2, *_args(family, params), Z, mu, S, W)
        out.append(g)
    return out


# ------------------------------------------------------------------ per-point contractions
#
# T[n, k] = <Psi2_n, E_k> for every point n and K symmetric matrices E_k (what a
# non-Gaussian likelihood needs: each entry y_nd has its own marginal of f under
# q(x_n)).  Psi2_n of a sum is sum_a Psi2_n,a plus the cross terms
# p_a Psi1_b[n]^T + transpose for an x-independent family a (Psi1 row p_a), whose
# contraction is 2 Psi1_b[n] . (E_k p_a).


def psi_contract(parts, Z, mu, S, E, Ep):
    """(psi0_n (N,), Psi1 (N, M), T (N, K)) of a sum; parts as for :func:`psi_stats_weighted`.

    E: (K, M, M) symmetric; Ep: its packed form (:func:`engine.psi.rbf.packed_contraction`).
    """
    N, M = np.shape(mu)[0], np.shape(Z)[0]
    E = np.asarray(E, dtype=np.float64)
    K = E.shape[0]
    psi0 = np.zeros(N)
    T = np.zeros((N, K))
    rows, Psi1s = [], []
    for family, params in parts:
        if x_independent(family):
            p0, P1, P2 = family.psi_stats(*_args(family, params), Z, *_one_point(mu, S))
            psi0 += p0
            T += np.einsum("kmn,mn->k", E, P2)[None, :]
            rows.append(np.asarray(P1[0], dtype=np.float64))
            Psi1s.append(None)
        else:
            p0, P1, Tp = family.psi_contract(*_args(family, params), Z, mu, S, Ep)
            psi0 += p0
            T += Tp
            rows.append(None)
            Psi1s.append(P1)
    Psi1 = np.zeros((N, M))
    for p, P1 in zip(rows, Psi1s):
        Psi1 += P1 if P1 is not None else p
    for a in range(len(parts)):
        for b in range(a + 1, len(parts)):
            i, j = (a, b) if rows[a] is not None else (b, a)
            p = rows[i]
            if not np.any(p):
                continue
            Ep_ = 2.0 * np.einsum("kmn,n->mk", E, p)  # (M, K): 2 E_k p
            T += (np.broadcast_to(rows[j], (N, M)) if rows[j] is not None else Psi1s[j]) @ Ep_
    return psi0, Psi1, T
