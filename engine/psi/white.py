"""Psi statistics of the white-noise kernel: k(x, x) = variance, k(x, z) = 0 for x != z.

The inducing inputs are never data points, so only psi0 = N variance is non-zero.
"""
from __future__ import annotations

import numpy as np

#: Parameter names, in the order the array functions take them.
PARAMS = ("variance",)

#: Psi1 is zero and so is E[k_white(z, x) k_other(x, z')]: no cross term in a sum.
CROSS = "zero"


def psi1(variance, Z, mu, S):
    """Psi1 (N, M) alone: zeros."""
    return np.zeros((np.shape(mu)[0], np.shape(Z)[0]))


def psi_stats(variance, Z, mu, S):
    """(psi0: float, Psi1: zeros (N, M), Psi2: zeros (M, M))."""
    N, M = np.shape(mu)[0], np.shape(Z)[0]
    return N * float(variance), np.zeros((N, M)), np.zeros((M, M))


def psi_gradients(dL_dpsi0, dL_dPsi1, dL_dPsi2, variance, Z, mu, S):
    """Returns dict(variance: float, Z: zeros (M, Q), mu: zeros (N, Q), S: zeros (N, Q))."""
    N = np.shape(mu)[0]
    return dict(variance=float(dL_dpsi0) * N, Z=np.zeros(np.shape(Z)), mu=np.zeros(np.shape(mu)), S=np.zeros(np.shape(S)))
