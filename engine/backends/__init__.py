"""Where the row sums of the collapsed bound (Bayesian and sparse GP-LVM) are computed.

A backend computes the sufficient statistics of the collapsed bound that are
sums over rows -- psi0, P = Psi1^T Y and Psi2 -- and, given the bound's
cotangents (dF/dpsi0, dF/dP, dF/dPsi2), their gradients w.r.t. the kernel
parameters, Z and every row's q(x_n).  :class:`LocalBackend` does it in this
process (a BayesianGPLVM or SparseGPLVM given no backend uses one);
``engine.DaskBackend`` (optional extra ``distributed``) maps it over row
chunks on a dask.distributed cluster (Gal, van der Wilk & Rasmussen 2014).

Both cut the rows into the same fixed chunks (``ROW_CHUNK`` rows unless
``chunks=`` says otherwise), compute each chunk's sums with the same
functions (:mod:`engine.backends._rows`) and add them in chunk order: for
the same chunks their bounds and gradients are the same bits.

The interface (``S`` None: point latents of the sparse GP-LVM; ``weights`` (N, G): the column groups
of missing outputs, psi0 and Psi2 then per group)::

    backend.setup(Y, weights=None)                    # (N, D) centred outputs, once per model
    backend.forward(kernel, Z, mu, S) -> (psi0, P (M, D), Psi2 (M, M))
    backend.backward(kernel, Z, mu, S, dpsi0, dP, dPsi2) -> engine.psi.PsiGradients
"""
from ._rows import ROW_CHUNK
from .local import LocalBackend

__all__ = ["LocalBackend", "ROW_CHUNK"]
