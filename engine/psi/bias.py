"""Psi statistics of the bias kernel k(x, z) = variance (a constant).

psi0 = N variance, Psi1 = variance (N, M) of ones, Psi2 = N variance^2 (M, M) of ones.
"""
from __future__ import annotations

import numpy as np

#: Parameter names, in the order the array functions take them.
PARAMS = ("variance",)

#: Psi1 does not depend on x, so in a sum E[k_bias k_other] = Psi1_bias^T Psi1_other
#: exactly (see :mod:`.sum`).
CROSS = "constant"


def psi1(variance, Z, mu, S):
    """Psi1 (N, M) alone."""
    return np.full((np.shape(mu)[0], np.shape(Z)[0]), float(variance))


def psi_stats(variance, Z, mu, S):
    """(psi0: float, Psi1: (N, M), Psi2: (M, M)); variance: float; Z: (M, Q); mu, S: (N, Q)."""
    N, M = np.shape(mu)[0], np.shape(Z)[0]
    v = float(variance)
    return N * v, np.full((N, M), v), np.full((M, M), N * v * v)


def psi_gradients(dL_dpsi0, dL_dPsi1, dL_dPsi2, variance, Z, mu, S):
    """Gradients of L = dL_dpsi0 psi0 + sum(dL_dPsi1 Psi1) + sum(dL_dPsi2 Psi2).

    Returns dict(variance: float, Z: zeros (M, Q), mu: zeros (N, Q), S: zeros (N, Q)).
    """
    N = np.shape(mu)[0]
    v = float(variance)
    dv = float(dL_dpsi0) * N + float(np.sum(dL_dPsi1)) + 2.0 * N * v * float(np.sum(dL_dPsi2))
    return dict(variance=dv, Z=np.zeros(np.shape(Z)), mu=np.zeros(np.shape(mu)), S=np.zeros(np.shape(S)))
