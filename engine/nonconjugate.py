"""The variational bound of the Bayesian GP-LVM with an explicit q(u), for any likelihood.

Hensman, Matthews & Ghahramani (2015) (the SVGP bound) with the uncertain
inputs of Titsias & Lawrence (2010).  Output d has inducing values
u_d = f_d(Z), whitened, u_d = L v_d with L = chol(Kmm + jitter I), and
q(v_d) = N(m_d, S_d), S_d = R_d R_d^T: its own mean *and* covariance, since a
non-Gaussian likelihood gives each output its own curvature (and each column
its own observed rows).  Parameters: q_mu (M, D) = [m_1 .. m_D] and
q_sqrt (D, M, M), R_d lower triangular.

The bound:

    F = sum_{(n, d) observed} E_{q(x_n) q(u_d)}[log p(y_nd | f_d(x_n))]
        - sum_d KL(q(v_d) || N(0, I)) - KL(q(X) || N(0, I)).

Marginal of f_nd.  Given x, f_d(x) | v_d is Gaussian with mean k(x)^T L^-T v_d
and variance k(x, x) - k(x)^T Kmm^-1 k(x); under q(v_d) its mean is
a_d(x) = k(x)^T Mw_d (Mw = L^-T q_mu, (M, D)) and its variance
k(x, x) - k(x)^T L^-T (I - S_d) L^-1 k(x).  Under q(x_n) the first two moments
of f_nd are then exact in the psi statistics of the row,

    mean_nd = Psi1_n Mw_d,
    E[f_nd^2] = psi0_n + <Psi2_n, E_d>,  E_d = L^-T (S_d + m_d m_d^T - I) L^-1,
    var_nd  = psi0_n + <Psi2_n, E_d> - mean_nd^2,

with psi0_n = <k(x_n, x_n)>, Psi1_n = <k(x_n, Z)> (M,), Psi2_n = <k(Z, x_n) k(x_n, Z)>
(M, M) under q(x_n) (:func:`engine.psi.contract` gives every <Psi2_n, E_d> without
storing any Psi2_n).  The data term takes E[log p(y_nd | f)] under
N(mean_nd, var_nd) (:meth:`engine.likelihoods.Likelihood.expected_log_density`).

For a Gaussian likelihood log p is quadratic in f, so only these two moments
matter and F is exactly the uncollapsed bound of Titsias & Lawrence; at the
optimal q(v_d) it equals the collapsed bound of :class:`engine.BayesianGPLVM`
(with missing values: each output's bound on its observed rows, as there).
For a non-Gaussian likelihood the marginal of f_nd under q(x_n) is not
Gaussian; replacing it by the Gaussian with the same mean and variance is an
approximation of the expectation (exact when q(x_n) is a point, and the
error shrinks with the spread of q(x_n) in the directions where the mean
function curves).  It keeps every sum over rows in closed form, which a
Monte Carlo estimate over x would not.

Gradients (all through whitened quantities).  With dmean, dvar the
derivatives of the data term w.r.t. the marginal moments (zero where not
observed) and Gm = dmean - 2 dvar * mean:

    dF/dpsi0_n = sum_d dvar_nd,   dF/dPsi1_n = Gm_n Mw^T,   dF/dPsi2_n = sum_d dvar_nd E_d,
    dF/dMw (direct) = Psi1^T Gm = G_Mw,   dF/dE_d = sum_n dvar_nd Psi2_n = G_E_d.

The psi statistics' own gradients (kernel, Z, mu, S) are those of the
weighted sums with weights W = dvar (:func:`engine.psi.gradients_grouped`),
and G_E is their weighted forward pass (:func:`engine.psi.compute_grouped`).
Then, with Ghat_d = L^-1 G_E_d L^-T and H_d = S_d + m_d m_d^T - I:

    dF/dm_d = L^-1 G_Mw_d + 2 Ghat_d m_d,   dF/dR_d = tril(2 Ghat_d R_d),
    dF/dKmm = cholesky_backward(L, Gamma),  Gamma = -(L^-1 G_Mw) q_mu^T - 2 sum_d Ghat_d H_d,

(Gamma: dF = tr(Gamma L^-1 dL), as in :mod:`engine.bound`).

Natural gradients of q(v_d) (:func:`natural_step`): the data term depends on
the expectation parameters eta1 = m_d and eta2 = S_d + m_d m_d^T only through
mean (eta1) and E_d (eta2), so dF/deta1 = L^-1 G_Mw_d and dF/deta2 = Ghat_d;
a step of size rho moves the natural parameters (S^-1 m, -S^-1 / 2) a fraction
rho towards (L^-1 G_Mw_d, Ghat_d - I / 2).  With rho = 1 and a Gaussian
likelihood that is the optimal q(v_d) in one step; for a log-concave likelihood
dvar <= 0, so the target precision I - 2 Ghat_d is positive definite.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import psi
from .bound import cholesky_backward
from .linalg import chol_inverse, tri_solve, try_cholesky
from .errors import NumericalError

#: Smallest marginal variance of f used, relative to psi0_n (round-off can take
#: psi0_n - <Psi2_n, Kmm^-1> a little below zero); below it the variance is held.
VAR_FLOOR = 1e-12


class QProjections(NamedTuple):
    """What the rows need of q(u): Mw = L^-T q_mu (M, D), E (D, M, M) = L^-T H_d L^-1 and
    H (D, M, M) = S_d + m_d m_d^T - I (whitened), R (D, M, M) = tril(q_sqrt)."""

    Mw: np.ndarray
    E: np.ndarray
    H: np.ndarray
    R: np.ndarray


def q_projections(L, q_mu, q_sqrt) -> QProjections:
    """:class:`QProjections` from L = chol(Kmm + jitter I) (M, M), q_mu (M, D), q_sqrt (D, M, M)."""
    M, D = q_mu.shape
    R = np.tril(q_sqrt)
    H = np.matmul(R, np.swapaxes(R, 1, 2)) + q_mu.T[:, :, None] * q_mu.T[:, None, :]
    H[:, np.arange(M), np.arange(M)] -= 1.0
    Linv = tri_solve(L, np.eye(M))
    E = np.matmul(np.matmul(Linv.T[None], H), Linv[None])
    E = 0.5 * (E + np.swapaxes(E, 1, 2))
    return QProjections(tri_solve(L, q_mu, trans=True), E, H, R)


def whitened_kl(q_mu, q_sqrt):
    """(sum_d KL(N(m_d, R_d R_d^T) || N(0, I)), d/dq_mu (M, D), d/dq_sqrt (D, M, M) lower triangular)."""
    M, D = q_mu.shape
    R = np.tril(q_sqrt)
    diag = np.diagonal(R, axis1=1, axis2=2)  # (D, M)
    kl = 0.5 * (float(np.sum(R * R)) + float(np.sum(q_mu * q_mu)) - D * M
                - 2.0 * float(np.sum(np.log(np.abs(diag)))))
    dR = R.copy()
    dR[:, np.arange(M), np.arange(M)] -= 1.0 / diag
    return kl, q_mu.copy(), dR


class RowTerm(NamedTuple):
    """The data term of a block of rows and what its gradients need.

    value: float (nats, summed over the observed entries); mean, var (B, D):
    the marginal moments of f; dvar (B, D); dmu, dS (B, Q) (psi part only, no
    KL); dkernel: dict like the kernel's params; dZ (M, Q) (psi part);
    G_Mw (M, D); G_E (D, M, M); dlik: the likelihood's parameter gradients.
    Gradient entries are None when not asked for.
    """

    value: float
    mean: np.ndarray
    var: np.ndarray
    dvar: np.ndarray | None
    dmu: np.ndarray | None
    dS: np.ndarray | None
    dkernel: dict | None
    dZ: np.ndarray | None
    G_Mw: np.ndarray | None
    G_E: np.ndarray | None
    dlik: dict | None


def marginals(kern, Z, mu, S, proj: QProjections):
    """(mean (B, D), var (B, D), floored (B, D) bool, Psi1 (B, M)) of f under q(x_n) q(u) for rows mu, S (B, Q)."""
    c = psi.contract(kern, Z, mu, S, proj.E)
    mean = c.Psi1 @ proj.Mw
    var = c.psi0[:, None] + c.T - mean * mean
    floor = VAR_FLOOR * np.maximum(c.psi0, 1e-300)[:, None]
    floored = var < floor
    return mean, np.where(floored, floor, var), floored, c.Psi1


def data_term(likelihood, kern, Z, mu, S, Y, mask, proj: QProjections, *, gradients=True,
              natural=False) -> RowTerm:
    """The data term of rows Y (B, D) (mask (B, D) bool or None) under q(x) = N(mu, S) (B, Q).

    With ``natural`` only what :func:`natural_step` needs (G_Mw, G_E), not
    the gradients w.r.t. the kernel, Z and the latents.
    """
    mean, var, floored, Psi1 = marginals(kern, Z, mu, S, proj)
    ell = likelihood.expected_log_density(Y, mean, var, mask)
    value = float(np.sum(ell.value))
    if not gradients:
        return RowTerm(value, mean, var, None, None, None, None, None, None, None, None)
    dvar = np.where(floored, 0.0, ell.dvar)
    Gm = ell.dmean - 2.0 * dvar * mean
    G_Mw = Psi1.T @ Gm
    G_E = psi.compute_grouped(kern, Z, mu, S, dvar).Psi2
    if natural:
        return RowTerm(value, mean, var, dvar, None, None, None, None, G_Mw, G_E, ell.dparams)
    D = Y.shape[1]
    g = psi.gradients_grouped(kern, Z, mu, S, dvar, np.ones(D), Gm @ proj.Mw.T, proj.E)
    return RowTerm(value, mean, var, dvar, g.mu, g.S, dict(g.params), g.Z, G_Mw, G_E, ell.dparams)


def q_gradients(L, q_mu, proj: QProjections, G_Mw, G_E):
    """(dF/dKmm (M, M), dF/dq_mu (M, D), dF/dq_sqrt (D, M, M)) of the data term from G_Mw, G_E."""
    Ghat = _whiten_stack(L, G_E)
    LG = tri_solve(L, G_Mw)  # (M, D)
    dq_mu = LG + 2.0 * np.matmul(Ghat, q_mu.T[:, :, None])[:, :, 0].T
    dq_sqrt = np.tril(2.0 * np.matmul(Ghat, proj.R))
    D, M = Ghat.shape[:2]
    GH = np.swapaxes(Ghat, 0, 1).reshape(M, D * M) @ proj.H.reshape(D * M, M)  # sum_d Ghat_d H_d, one GEMM
    Gamma = -LG @ q_mu.T - 2.0 * GH
    return cholesky_backward(L, Gamma), dq_mu, dq_sqrt


def _whiten_stack(L, G):
    """L^-1 G_d L^-T for every symmetric (M, M) slice of G (D, M, M), symmetrised."""
    D, M, _ = G.shape
    Linv = tri_solve(L, np.eye(M))
    out = np.matmul(np.matmul(Linv[None], G), Linv.T[None])
    return 0.5 * (out + np.swapaxes(out, 1, 2))


def natural_step(L, q_mu, q_sqrt, G_Mw, G_E, rho: float):
    """q(v_d) after a natural-gradient step of size rho in (0, 1] (module docstring): (q_mu, q_sqrt).

    G_Mw (M, D), G_E (D, M, M) from :func:`data_term` (scaled like the data term:
    by N / B for a minibatch).  Raises NumericalError if a target precision is
    not positive definite (a likelihood that is not log-concave).
    """
    M, D = q_mu.shape
    Ghat = _whiten_stack(L, G_E)
    eta_target = tri_solve(L, G_Mw)  # (M, D)
    R = np.tril(q_sqrt)
    eye = np.eye(M)
    new_mu = np.empty_like(q_mu)
    new_sqrt = np.empty((D, M, M))
    for d in range(D):
        Ri = tri_solve(R[d], eye)
        Lam = Ri.T @ Ri  # S_d^-1
        Lam_new = (1.0 - rho) * Lam + rho * (eye - 2.0 * Ghat[d])
        eta_new = (1.0 - rho) * (Lam @ q_mu[:, d]) + rho * eta_target[:, d]
        C = try_cholesky(0.5 * (Lam_new + Lam_new.T))
        if C is None:
            raise NumericalError("The natural-gradient step of q(u) met a precision that is not positive definite.")
        new_mu[:, d] = tri_solve(C, tri_solve(C, eta_new), trans=True)
        Sd = chol_inverse(C)
        Rd = try_cholesky(0.5 * (Sd + Sd.T))
        if Rd is None:
            raise NumericalError("The covariance of q(u) is not numerically positive definite.")
        new_sqrt[d] = Rd
    return new_mu, new_sqrt


__all__ = ["QProjections", "RowTerm", "data_term", "marginals", "natural_step", "q_gradients", "q_projections",
           "whitened_kl"]
