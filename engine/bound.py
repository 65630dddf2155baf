"""The collapsed variational bound shared by the sparse and Bayesian GP-LVM.

Titsias & Lawrence (2010), eqs. 8 and 14, written with the psi statistics
(for the sparse GP-LVM the psi statistics are plain kernel matrices).  The KL
term of the Bayesian model is added by the model, not here.

With Kmm the inducing kernel matrix *including* the model's fixed jitter,
L = chol(Kmm), A = L^-1 Psi2 L^-T, B = I + beta A, L_B = chol(B),
V = L^-1 Psi1^T Y and C = L_B^-1 V::

    F = -N D/2 log(2 pi) + N D/2 log beta - D sum(log diag L_B)
        - beta/2 tr(Y^T Y) + beta^2/2 ||C||_F^2 - beta D/2 psi0 + beta D/2 tr(A)

Gradients go through whitened quantities only (triangular solves with L and
L_B, and B^-1, whose entries are at most 1).  The textbook form
dF/dKmm = ... + D/2 Kmm^-1 - beta D/2 Kmm^-1 Psi2 Kmm^-1 - D/2 W^-1 ... sums
terms of size cond(Kmm)^2 that cancel, and is useless when Kmm is
near-singular (a linear kernel with M > Q makes it singular).  Here dF/dA,
dF/dV and dF/dL are formed first (all of moderate size), and the reverse
mode of the Cholesky factorisation (dL = L Phi(L^-1 dKmm L^-T)) carries
dF/dL back to Kmm with one pair of triangular solves.

The same factors give the predictive distribution (paper section 4), so both
come out of :func:`collapsed_bound` as one :class:`CollapsedPosterior`.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .linalg import FactorisationError, check_finite, chol_inverse, tri_solve, try_cholesky

LOG_2PI = np.log(2.0 * np.pi)

__all__ = ["CollapsedBound", "CollapsedPosterior", "FactorisationError", "StatsBound", "cholesky_backward",
           "collapsed_bound", "collapsed_bound_stats", "collapsed_factors", "gaussian_kl",
           "gaussian_kl_rows"]


class CollapsedPosterior(NamedTuple):
    """Factors shared by the bound and the predictions.

    L: (M, M) chol(Kmm + jitter I); LB: (M, M) chol(I + beta A);
    LW: (M, M) = L LB, so LW LW^T = Kmm + jitter I + beta Psi2;
    alpha: (M, D) = beta W^-1 Psi1^T Y, so the predictive mean at x* is k*M alpha;
    beta: noise precision; jitter: what was added to Kmm's diagonal.
    """

    L: np.ndarray
    LB: np.ndarray
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


def _sym(A: np.ndarray) -> np.ndarray:
    return 0.5 * (A + A.T)


def _whiten_both(L: np.ndarray, S: np.ndarray) -> np.ndarray:
    """L^-1 S L^-T for lower-triangular L, (M, M)."""
    return tri_solve(L, tri_solve(L, S).T).T


def _unwhiten_both(L: np.ndarray, S: np.ndarray) -> np.ndarray:
    """L^-T S L^-1 for lower-triangular L, (M, M): pulls a gradient w.r.t. A back to Psi2."""
    return tri_solve(L, tri_solve(L, S, trans=True).T, trans=True).T


def cholesky_backward(L: np.ndarray, Gamma: np.ndarray) -> np.ndarray:
    """Gradient w.r.t. the symmetric K = L L^T of a function whose change is tr(Gamma X).

    X = L^-1 dL = Phi(L^-1 dK L^-T), Phi taking the lower triangle and half the
    diagonal; tr(Gamma X) = <Psi, L^-1 dK L^-T> with Psi = Phi(Gamma^T), so
    the gradient is L^-T sym(Psi) L^-1, symmetric (M, M).
    """
    Psi = np.tril(Gamma.T, -1) + 0.5 * np.diag(np.diag(Gamma))
    return _sym(_unwhiten_both(L, _sym(Psi)))


def collapsed_factors(Psi1TY: np.ndarray, Psi2: np.ndarray, Kmm: np.ndarray, beta: float):
    """(L, LB, V, C, A): see the module docstring; Kmm already holds the jitter.

    Shapes (M, M), (M, M), (M, D), (M, D), (M, M).  Raises
    :class:`FactorisationError` when Kmm or I + beta A is not numerically
    positive definite (the model then raises its jitter and says so).
    """
    Kmm = check_finite(Kmm, "inducing-point kernel matrix Kmm")
    L = try_cholesky(Kmm)
    if L is None:
        raise FactorisationError("The inducing-point kernel matrix Kmm is not numerically positive definite.")
    A = _sym(_whiten_both(L, Psi2))
    LB = try_cholesky(np.eye(Kmm.shape[0]) + beta * A)
    if LB is None:
        raise FactorisationError("I + beta A is not numerically positive definite (Kmm is too ill-conditioned).",
                                 matrix="matrix I + beta A (the statistic Psi2 whitened by Kmm)")
    V = tri_solve(L, Psi1TY)
    return L, LB, V, tri_solve(LB, V), A


class StatsBound(NamedTuple):
    """F (nats, without KL) from sufficient statistics, and its gradients w.r.t. them."""

    value: float
    dpsi0: float
    dP: np.ndarray  # (M, D): dF/d(Psi1^T Y)
    dPsi2: np.ndarray  # (M, M), symmetric
    dKmm: np.ndarray  # (M, M), symmetric
    dbeta: float
    posterior: CollapsedPosterior


def collapsed_bound_stats(N: int, D: int, trYY: float, psi0: float, P: np.ndarray, Psi2: np.ndarray,
                          Kmm: np.ndarray, beta: float, jitter: float = 0.0) -> StatsBound:
    """The collapsed bound from the sufficient statistics of the data.

    N rows and D outputs; trYY = tr(Y^T Y); psi0: scalar; P = Psi1^T Y, (M, D);
    Psi2: (M, M) summed over rows; Kmm: (M, M), ``jitter`` added to its diagonal
    (part of the function); beta: noise precision.  Everything the bound needs
    of Y and of the latents is in these sums over rows, which is what lets them
    be computed over row groups (missing data) or chunks on other machines.
    """
    M = Kmm.shape[0]
    eye = np.eye(M)
    if jitter:
        Kmm = Kmm + jitter * eye
    L, LB, V, C, A = collapsed_factors(P, Psi2, Kmm, beta)
    trA = float(np.trace(A))
    CC = float(np.sum(C * C))
    value = (-0.5 * N * D * LOG_2PI + 0.5 * N * D * np.log(beta)
             - D * float(np.sum(np.log(np.diag(LB))))
             - 0.5 * beta * trYY + 0.5 * beta**2 * CC
             - 0.5 * beta * D * psi0 + 0.5 * beta * D * trA)

    Binv = chol_inverse(LB)  # B >= I, so every entry is at most 1 in size
    Cw = tri_solve(LB, C, trans=True)  # B^-1 V, (M, D)
    G = Cw @ Cw.T

    # F through A (log|B|, tr A and the data term's B^-1) and through V (data term)
    dA = 0.5 * beta * D * (eye - Binv) - 0.5 * beta**3 * G
    dV = beta**2 * Cw
    dPsi2 = _sym(_unwhiten_both(L, dA))
    WiP = tri_solve(L, Cw, trans=True)  # W^-1 P = L^-T B^-1 V, (M, D)

    # F through L at fixed Psi2 and P: with X = L^-1 dL, dA = -X A - A X^T and
    # dV = -X V, so dF = tr(Gamma X) with Gamma = -(2 A dF/dA + V dF/dV^T).
    dKmm = cholesky_backward(L, -(2.0 * A @ dA + V @ dV.T))

    dbeta = (0.5 * N * D / beta - 0.5 * D * float(np.sum(Binv * A)) - 0.5 * trYY
             + beta * CC - 0.5 * beta**2 * float(np.sum(G * A)) - 0.5 * D * psi0 + 0.5 * D * trA)

    posterior = CollapsedPosterior(L=L, LB=LB, LW=L @ LB, alpha=beta * WiP, beta=beta, jitter=float(jitter))
    return StatsBound(value, -0.5 * beta * D, beta**2 * WiP, dPsi2, dKmm, dbeta, posterior)


def collapsed_bound(Y: np.ndarray, psi0: float, Psi1: np.ndarray, Psi2: np.ndarray,
                    Kmm: np.ndarray, beta: float, jitter: float = 0.0) -> CollapsedBound:
    """The collapsed bound F and its gradients.

    Y: (N, D) centred outputs; psi0: scalar; Psi1: (N, M); Psi2: (M, M) summed over n;
    Kmm: (M, M) inducing kernel matrix; ``jitter`` is added to its diagonal (it is
    part of the function: the gradients are those of F at Kmm + jitter I);
    beta: noise precision (1 / noise variance).
    """
    N, D = Y.shape
    b = collapsed_bound_stats(N, D, float(np.sum(Y * Y)), psi0, Psi1.T @ Y, Psi2, Kmm, beta, jitter)
    return CollapsedBound(b.value, b.dpsi0, Y @ b.dP.T, b.dPsi2, b.dKmm, b.dbeta, b.posterior)


def gaussian_kl(mu: np.ndarray, S: np.ndarray) -> float:
    """KL(q(X) || N(0, I)) for q(x_n) = N(mu_n, diag S_n); mu, S: (N, Q)."""
    return 0.5 * float(np.sum(mu * mu + S - np.log(S) - 1.0))


def gaussian_kl_rows(mu: np.ndarray, S: np.ndarray) -> np.ndarray:
    """KL(q(x_n) || N(0, I)) of every row, (N,); mu, S: (N, Q)."""
    return 0.5 * np.sum(mu * mu + S - np.log(S) - 1.0, axis=1)
