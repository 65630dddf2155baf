"""The collapsed variational bound shared by the sparse and Bayesian GP-LVM.

Titsias & Lawrence (2010), eqs. 8 and 14, written with the psi statistics
(for the sparse GP-LVM the psi statistics are plain kernel matrices).  The KL
term of the Bayesian model is added by the model, not here.

With L = chol(Kmm), A = L^-1 Psi2 L^-T, B = I + beta A, L_B = chol(B),
W = Kmm + beta Psi2 = (L L_B)(L L_B)^T and C = L_B^-1 L^-1 Psi1^T Y::

    F = -N D/2 log(2 pi) + N D/2 log beta - D sum(log diag L_B)
        - beta/2 tr(Y^T Y) + beta^2/2 ||C||_F^2 - beta D/2 psi0 + beta D/2 tr(A)

The same factors give the predictive distribution (paper section 4), so both
come out of :func:`collapsed_bound` as one :class:`CollapsedPosterior`.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .linalg import check_finite, chol_inverse, cholesky_failure, jitter_levels, tri_solve, try_cholesky

LOG_2PI = np.log(2.0 * np.pi)


class CollapsedPosterior(NamedTuple):
    """Factors shared by the bound and the predictions.

    L: (M, M) chol(Kmm + jitter I); LW: (M, M) chol(Kmm + beta Psi2) = L L_B;
    alpha: (M, D) = beta W^-1 Psi1^T Y, so the predictive mean at x* is k*M alpha;
    beta: noise precision; jitter: what was added to Kmm's diagonal (0 if nothing).
    """

    L: np.ndarray
    LW: np.ndarray
    alpha: np.ndarray
    beta: float
    jitter: float


class CollapsedBound(NamedTuple):
    """Value of F (nats, without KL) and its gradients w.r.t. each input."""

    value: float
    dpsi0: float
    dPsi1: np.ndarray  # (N, M)
    dPsi2: np.ndarray  # (M, M), symmetric
    dKmm: np.ndarray  # (M, M), symmetric
    dbeta: float
    posterior: CollapsedPosterior


def collapsed_factors(Psi1TY: np.ndarray, Psi2: np.ndarray, Kmm: np.ndarray, beta: float):
    """Cholesky factors of Kmm and B, and C; see the module docstring.

    Returns (L, jitter, LB, LW, C, A) with shapes (M,M), float, (M,M), (M,M), (M,D), (M,M).
    Jitter is added to Kmm only when needed: when Kmm itself is not numerically
    positive definite, or when it is so ill-conditioned that A = L^-1 Psi2 L^-T
    comes out indefinite and B = I + beta A cannot be factorised.
    """
    Kmm = check_finite(Kmm, "inducing-point kernel matrix Kmm")
    eye = np.eye(Kmm.shape[0])
    for jitter in jitter_levels(Kmm):
        L = try_cholesky(Kmm + jitter * eye if jitter else Kmm)
        if L is None:
            continue
        A = tri_solve(L, tri_solve(L, Psi2).T).T
        A = 0.5 * (A + A.T)
        LB = try_cholesky(eye + beta * A)
        if LB is None:
            continue
        LW = L @ LB
        return L, jitter, LB, LW, tri_solve(LW, Psi1TY), A
    raise cholesky_failure("inducing-point kernel matrix Kmm (or I + beta A)")


def collapsed_bound(Y: np.ndarray, psi0: float, Psi1: np.ndarray, Psi2: np.ndarray,
                    Kmm: np.ndarray, beta: float) -> CollapsedBound:
    """The collapsed bound F and its gradients.

    Y: (N, D) centred outputs; psi0: scalar; Psi1: (N, M); Psi2: (M, M) summed over n;
    Kmm: (M, M); beta: noise precision (1 / noise variance).
    """
    N, D = Y.shape
    P = Psi1.T @ Y  # (M, D)
    L, jitter, LB, LW, C, A = collapsed_factors(P, Psi2, Kmm, beta)
    trYY = float(np.sum(Y * Y))
    trA = float(np.trace(A))
    CC = float(np.sum(C * C))
    value = (-0.5 * N * D * LOG_2PI + 0.5 * N * D * np.log(beta)
             - D * float(np.sum(np.log(np.diag(LB))))
             - 0.5 * beta * trYY + 0.5 * beta**2 * CC
             - 0.5 * beta * D * psi0 + 0.5 * beta * D * trA)

    Winv = chol_inverse(LW)
    Kinv = chol_inverse(L)
    WiP = tri_solve(LW, C, trans=True)  # W^-1 P, (M, D)
    E = WiP @ WiP.T
    KiPsi2Ki = Kinv @ Psi2 @ Kinv

    dpsi0 = -0.5 * beta * D
    dPsi1 = beta**2 * (Y @ WiP.T)
    dPsi2 = -0.5 * beta * D * Winv - 0.5 * beta**3 * E + 0.5 * beta * D * Kinv
    dKmm = -0.5 * D * Winv - 0.5 * beta**2 * E + 0.5 * D * Kinv - 0.5 * beta * D * KiPsi2Ki
    dbeta = (0.5 * N * D / beta - 0.5 * D * float(np.sum(Winv * Psi2)) - 0.5 * trYY
             + beta * CC - 0.5 * beta**2 * float(np.sum(E * Psi2)) - 0.5 * D * psi0 + 0.5 * D * trA)

    posterior = CollapsedPosterior(L=L, LW=LW, alpha=beta * WiP, beta=beta, jitter=jitter)
    return CollapsedBound(value, dpsi0, dPsi1, dPsi2, dKmm, dbeta, posterior)


def gaussian_kl(mu: np.ndarray, S: np.ndarray) -> float:
    """KL(q(X) || N(0, I)) for q(x_n) = N(mu_n, diag S_n); mu, S: (N, Q)."""
    return 0.5 * float(np.sum(mu * mu + S - np.log(S) - 1.0))
