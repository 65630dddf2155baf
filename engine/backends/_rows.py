"""The row sums of the collapsed bound over one block of rows: what every backend computes, and how
the blocks' sums are added (in chunk order: the same bits on every backend for the same chunks).

A block holds the centred outputs Y (n, D) and, with missing outputs, the
weights W (n, G) (1.0 where column group g observes row n).  Its latents are
q(x_n) = N(mu_n, diag S_n) (Bayesian GP-LVM: psi statistics) or points mu_n
with S None (sparse GP-LVM: psi0 = sum k(x_n, x_n), Psi1 = Knm, Psi2 = Knm^T Knm).

Without W the statistics are (psi0: float, P = Psi1^T Y (M, D), Psi2 (M, M));
with W they are per group: (psi0 (G,), P (M, D), Psi2 (G, M, M)), where P
needs no weights because Y is 0 where missing.  The backward functions take
the bound's cotangents of the same shapes and return
:class:`engine.psi.PsiGradients` (``S`` None for points).
"""
from __future__ import annotations

import numpy as np

from .. import psi

#: Rows per chunk of the row sums when a backend is given no ``chunks``: the collapsed models'
#: local default, and what fixes the order of every sum over rows (see :func:`sum_forward`).
ROW_CHUNK = 4096


def chunk_bounds(N: int, size: int | None) -> list:
    """Row ranges (start, stop) of consecutive chunks of ``size`` rows (``ROW_CHUNK`` when None)."""
    size = ROW_CHUNK if size is None else int(size)
    return [(a, min(a + size, N)) for a in range(0, N, size)]


def sum_forward(parts) -> tuple:
    """(psi0, P, Psi2) summed over the chunks' statistics in chunk order (one order for every backend)."""
    psi0 = np.array(parts[0][0], dtype=float, copy=True)
    P = np.array(parts[0][1], dtype=float, copy=True)
    Psi2 = np.array(parts[0][2], dtype=float, copy=True)
    for p0, Pc, P2 in parts[1:]:
        psi0 += p0
        P += Pc
        Psi2 += P2
    return (float(psi0) if psi0.ndim == 0 else psi0), P, Psi2


def sum_backward(parts) -> psi.PsiGradients:
    """The chunks' PsiGradients: parameter and Z gradients summed in chunk order, per-row ones concatenated."""
    params = {k: np.array(v, dtype=float, copy=True) for k, v in parts[0].params.items()}
    dZ = np.array(parts[0].Z, dtype=float, copy=True)
    for g in parts[1:]:
        for k in params:
            params[k] = params[k] + g.params[k]
        dZ += g.Z
    dS = None if parts[0].S is None else np.concatenate([g.S for g in parts])
    return psi.PsiGradients(params, dZ, np.concatenate([g.mu for g in parts]), dS)


def forward(Y, W, kernel, Z, mu, S):
    """(psi0, P, Psi2) of the block (module docstring)."""
    if S is None:
        Knm = kernel.K(mu, Z)
        Kdiag = kernel.K_diag(mu)
        P = Knm.T @ Y
        if W is None:
            return float(np.sum(Kdiag)), P, Knm.T @ Knm
        return W.T @ Kdiag, P, np.einsum("nm,ng,nk->gmk", Knm, W, Knm, optimize=True)
    if W is None:
        st = psi.compute(kernel, Z, mu, S)
        return st.psi0, st.Psi1.T @ Y, st.Psi2
    st = psi.compute_grouped(kernel, Z, mu, S, W)
    return st.psi0, st.Psi1.T @ Y, st.Psi2


def backward(Y, W, kernel, Z, mu, S, dpsi0, dP, dPsi2) -> psi.PsiGradients:
    """Gradients of the block's <dpsi0, psi0> + <dP, P> + <dPsi2, Psi2> (per-group sums with W)."""
    dPsi1 = Y @ dP.T
    if S is None:
        Knm = kernel.K(mu, Z)
        if W is None:
            dKnm = dPsi1 + Knm @ (dPsi2 + dPsi2.T)
            dKdiag = np.full(mu.shape[0], float(dpsi0))
        else:
            sym = dPsi2 + np.swapaxes(dPsi2, 1, 2)  # (G, M, M)
            dKnm = dPsi1 + np.einsum("ng,nk,gkm->nm", W, Knm, sym, optimize=True)
            dKdiag = W @ np.asarray(dpsi0, dtype=float)
        params, dX = kernel.grad_params_and_X(dKnm, mu, Z)
        params = dict(params)
        for name, g in kernel.grad_params_diag(dKdiag, mu).items():
            params[name] = params[name] + g if name in params else g
        dX = dX + kernel.grad_X_diag(dKdiag, mu)
        dZ = kernel.grad_X(np.ascontiguousarray(dKnm.T), Z, mu)
        return psi.PsiGradients(params, dZ, dX, None)
    if W is None:
        return psi.gradients(kernel, Z, mu, S, dpsi0, dPsi1, dPsi2)
    return psi.gradients_grouped(kernel, Z, mu, S, W, np.asarray(dpsi0, dtype=float), dPsi1, dPsi2)
