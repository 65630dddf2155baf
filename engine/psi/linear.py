"""Psi statistics of the ARD linear kernel k(x, z) = sum_q variances_q x_q z_q.

Under q(x_n) = N(mu_n, diag S_n), with A = Z diag(variances) (M, Q):

    psi0 = sum_nq variances_q (mu_nq^2 + S_nq)
    Psi1 = mu A^T                                      (N, M)
    Psi2 = A (mu^T mu + diag(sum_n S_n)) A^T           (M, M)

All of it is BLAS on (N, Q), (Q, Q) and (M, Q) arrays; nothing to compile.
"""
from __future__ import annotations

import numpy as np

#: Parameter names, in the order the array functions take them.
PARAMS = ("variances",)

#: Psi1 depends on x: a cross term with another x-dependent kernel is not
#: Psi1-separable (see :mod:`.sum`).
CROSS = None


def _prepare(variances, Z, mu, S):
    Z = np.asarray(Z, dtype=np.float64)
    gamma = np.broadcast_to(np.asarray(variances, dtype=np.float64), (Z.shape[1],))
    return gamma, Z, np.asarray(mu, dtype=np.float64), np.asarray(S, dtype=np.float64)


def psi1(variances, Z, mu, S):
    """Psi1 (N, M) alone (used for the cross terms of sums)."""
    gamma, Z, mu, S = _prepare(variances, Z, mu, S)
    return mu @ (Z * gamma).T


def psi_stats(variances, Z, mu, S):
    """(psi0: float, Psi1: (N, M), Psi2: (M, M)) for the linear kernel.

    variances: (Q,) or () (shared); Z: (M, Q); mu, S: (N, Q).
    """
    gamma, Z, mu, S = _prepare(variances, Z, mu, S)
    A = Z * gamma
    psi0 = float(np.sum((mu * mu + S) @ gamma))
    Psi1 = mu @ A.T
    C = mu.T @ mu
    C[np.diag_indices_from(C)] += S.sum(axis=0)
    Psi2 = A @ C @ A.T
    Psi2 = 0.5 * (Psi2 + Psi2.T)
    return psi0, Psi1, Psi2


def psi_gradients(dL_dpsi0, dL_dPsi1, dL_dPsi2, variances, Z, mu, S):
    """Gradients of L = dL_dpsi0 psi0 + sum(dL_dPsi1 Psi1) + sum(dL_dPsi2 Psi2).

    dL_dPsi2 need not be symmetric.  Returns dict(variances: shape of
    ``variances``, Z: (M, Q), mu: (N, Q), S: (N, Q)).
    """
    var_shape = np.shape(variances)
    gamma, Z, mu, S = _prepare(variances, Z, mu, S)
    g0 = float(dL_dpsi0)
    G1 = np.asarray(dL_dPsi1, dtype=np.float64)
    G2 = np.asarray(dL_dPsi2, dtype=np.float64)
    Gs = 0.5 * (G2 + G2.T)
    A = Z * gamma

    # psi0
    dgamma = g0 * np.sum(mu * mu + S, axis=0)
    dmu = 2.0 * g0 * mu * gamma
    dS = np.broadcast_to(g0 * gamma, S.shape).copy()

    # Psi1 = mu A^T
    G1Z = G1 @ Z  # (N, Q)
    dmu += G1Z * gamma
    dA = G1.T @ mu  # (M, Q)

    # Psi2 = A C A^T with C = mu^T mu + diag(sum_n S_n)
    C = mu.T @ mu
    C[np.diag_indices_from(C)] += S.sum(axis=0)
    GA = Gs @ A  # (M, Q)
    dA += 2.0 * GA @ C
    dC = A.T @ GA  # (Q, Q), symmetric
    dmu += 2.0 * mu @ dC
    dS += np.diag(dC)

    dZ = dA * gamma
    dgamma += np.sum(dA * Z, axis=0)
    if var_shape == ():
        dgamma = np.asarray(dgamma.sum())
    return dict(variances=dgamma.reshape(var_shape), Z=dZ, mu=dmu, S=dS)
