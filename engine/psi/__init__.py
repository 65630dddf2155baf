"""Psi statistics of the Bayesian GP-LVM and their gradients.

Titsias & Lawrence (2010), eqs. 15-17, under q(x_n) = N(mu_n, diag S_n):

    psi0        = sum_n <k(x_n, x_n)>                    float
    Psi1[n, m]  = <k(x_n, z_m)>                          (N, M)
    Psi2[m, m'] = sum_n <k(z_m, x_n) k(x_n, z_m')>       (M, M), summed over n

Closed forms exist for RBF (ARD or not), Linear (ARD or not), Bias and White,
and for sums of at most one RBF or Linear with any number of Bias and White
terms.  Each kernel family is a module of pure array functions
(``psi_stats``, ``psi_gradients``, ``psi1``, ``PARAMS``, ``CROSS``) found
through :data:`REGISTRY` by ``kernel.name``; sums are handled by
:mod:`engine.psi.sum`.  Any other kernel raises
:class:`~engine.errors.UnsupportedKernelError`.

Weighted sums over the points (:func:`compute_grouped`, :func:`gradients_grouped`):
psi0[k] = sum_n W[n, k] psi0_n and Psi2[k] = sum_n W[n, k] Psi2_n for K
columns of weights W (N, K) at once, e.g. the statistics of the observed rows
of K column groups when outputs are missing.  Each Psi2_n is computed once and
enters all K sums; the backward pass forms one cotangent per point,
sum_k W[n, k] sym(dL_dPsi2[k]).  Available (:func:`supports_grouped`) for RBF,
Bias and White and their supported sums; for the others (Linear) compute the
statistics of each row subset with :func:`compute`.

Performance: the RBF Psi2 loops run on numba.get_num_threads() threads
(see :mod:`engine.psi.rbf`); :func:`compute`, :func:`gradients` and
:func:`warm_up` hold BLAS to one thread while they run
(:func:`engine._threads.blas_pinned`: a few microseconds per call), since
otherwise OpenBLAS's threads and numba's fight over the cores.  The results
do not depend on the number of threads (fixed summation order).  Compiled code is
cached on disk; call :func:`warm_up` once in the background at start-up so
the first real call does not wait for the JIT (~10 s cold, < 1 s cached).
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from .._threads import blas_pinned
from ..errors import ShapeError, UnsupportedKernelError
from . import bias, linear, rbf, white
from . import sum as _sum

__all__ = [
    "PsiStats",
    "PsiGradients",
    "GroupedPsiStats",
    "REGISTRY",
    "SUPPORTED_DESCRIPTION",
    "compute",
    "gradients",
    "compute_grouped",
    "gradients_grouped",
    "contract",
    "ContractedPsi",
    "take_forward",
    "restore_forward",
    "supports",
    "supports_grouped",
    "check_supported",
    "warm_up",
]


class PsiStats(NamedTuple):
    """psi0: float; Psi1: (N, M); Psi2: (M, M), symmetric, summed over n."""

    psi0: float
    Psi1: np.ndarray
    Psi2: np.ndarray


class GroupedPsiStats(NamedTuple):
    """psi0: (K,) and Psi2: (K, M, M) (symmetric), the sums over the points weighted by
    each column of W (N, K); Psi1: (N, M), every point."""

    psi0: np.ndarray
    Psi1: np.ndarray
    Psi2: np.ndarray


class ContractedPsi(NamedTuple):
    """Per-point statistics: psi0 (N,) with psi0[n] = <k(x_n, x_n)>, Psi1 (N, M), and
    T (N, K) with T[n, k] = <Psi2_n, E_k> for the K matrices given to :func:`contract`."""

    psi0: np.ndarray
    Psi1: np.ndarray
    T: np.ndarray


class PsiGradients(NamedTuple):
    """Gradients of a scalar L w.r.t. the kernel parameters (dict keyed like
    ``kernel.params``, same shapes), Z (M, Q), mu (N, Q) and S (N, Q)."""

    params: dict
    Z: np.ndarray
    mu: np.ndarray
    S: np.ndarray


#: Kernel name -> module of pure array functions for that family.
REGISTRY = {
    "rbf": rbf,
    "linear": linear,
    "bias": bias,
    "white": white,
}

SUPPORTED_DESCRIPTION = (
    "RBF, Linear, Bias and White kernels, and sums of at most one RBF or Linear "
    "kernel with any number of Bias and White terms (e.g. RBF + Bias + White, Linear + Bias)"
)


# ------------------------------------------------------------------ dispatch


def _leaves(kernel, prefix=""):
    """Flatten ``kernel`` into [(key prefix, name, leaf kernel)]; sums recurse."""
    name = getattr(kernel, "name", type(kernel).__name__)
    if name == "sum":
        names = getattr(kernel, "part_names", None) or [p.name for p in kernel.parts]
        out = []
        for part_name, part in zip(names, kernel.parts):
            out.extend(_leaves(part, f"{prefix}{part_name}."))
        return out
    return [(prefix, name, kernel)]


def _why_unsupported(kernel):
    """None when supported, else a short reason."""
    try:
        leaves = _leaves(kernel)
    except AttributeError as exc:  # not a kernel object at all
        return f"not a kernel ({exc})"
    return _why_unsupported_names(tuple(name for _, name, _ in leaves))


@functools.lru_cache(maxsize=64)
def _why_unsupported_names(names):
    """:func:`_why_unsupported` of a sum of leaves with these kernel names (a function of the
    names alone: decided once per kernel structure, not on every evaluation)."""
    unknown = sorted({name for name in names if name not in REGISTRY})
    if unknown:
        return f"no closed-form psi statistics for {', '.join(unknown)}"
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            a, b = names[i], names[j]
            if not _sum.cross_term_ok(REGISTRY[a], REGISTRY[b]):
                return (
                    f"the cross term of {a} and {b} in a sum has no implemented closed form "
                    "(only Bias and White combine with other kernels)"
                )
    return None


def _describe(kernel):
    try:
        names = [name for _, name, _ in _leaves(kernel)]
        return " + ".join(names)
    except AttributeError:
        return type(kernel).__name__


def supports(kernel) -> bool:
    """Whether the psi statistics of ``kernel`` are available in closed form."""
    return _why_unsupported(kernel) is None


def check_supported(kernel) -> None:
    """Raise :class:`UnsupportedKernelError` unless :func:`supports` ``(kernel)``."""
    why = _why_unsupported(kernel)
    if why is not None:
        raise UnsupportedKernelError(
            f"The Bayesian GP-LVM needs closed-form psi statistics; expected {SUPPORTED_DESCRIPTION}, "
            f"got {_describe(kernel)} instead ({why}). Choose one of the supported kernels, "
            "or use the GP-LVM or sparse GP-LVM for this kernel."
        )


def supports_grouped(kernel) -> bool:
    """Whether :func:`compute_grouped` and :func:`gradients_grouped` handle ``kernel``."""
    if not supports(kernel):
        return False
    return _sum.weighted_ok([REGISTRY[name] for _, name, _ in _leaves(kernel)])


def _parts(kernel):
    """[(key prefix, family module, params dict)] of a supported kernel."""
    try:
        leaves = _leaves(kernel)
    except AttributeError:
        leaves = None
    if leaves is None or _why_unsupported_names(tuple(name for _, name, _ in leaves)) is not None:
        check_supported(kernel)  # raises, saying why
    return [(prefix, REGISTRY[name], leaf.params) for prefix, name, leaf in leaves]


# ------------------------------------------------------------------ validation


def _as_matrix(x, name, cols=None):
    arr = np.ascontiguousarray(x, dtype=np.float64)
    if arr.ndim != 2:
        raise ShapeError(f"Expected {name} to be a 2-D array, got shape {arr.shape} instead.")
    if cols is not None and arr.shape[1] != cols:
        raise ShapeError(f"Expected {name} to have {cols} columns (Q), got shape {arr.shape} instead.")
    if not _all_finite(arr):
        raise ShapeError(f"Expected finite values in {name}, got NaN or inf instead.")
    return arr


def _all_finite(arr) -> bool:
    """Whether every entry is finite: a sum is, when they all are (one SIMD pass instead of a
    boolean array and its reduction); entry by entry only when it is not (it may have overflowed)."""
    return bool(np.isfinite(arr.sum())) or bool(np.all(np.isfinite(arr)))


def _validate(kernel, Z, mu, S):
    Z = _as_matrix(Z, "Z")
    Q = Z.shape[1]
    input_dim = getattr(kernel, "input_dim", Q)
    if input_dim != Q:
        raise ShapeError(f"Expected Z with kernel.input_dim = {input_dim} columns, got shape {Z.shape} instead.")
    mu = _as_matrix(mu, "mu", Q)
    S = _as_matrix(S, "S", Q)
    if S.shape != mu.shape:
        raise ShapeError(f"Expected S of the same shape as mu {mu.shape}, got {S.shape} instead.")
    if Z.shape[0] < 1 or mu.shape[0] < 1:
        raise ShapeError(f"Expected at least one inducing input and one data point, got Z {Z.shape}, mu {mu.shape} instead.")
    if S.min() < 0:
        raise ShapeError("Expected non-negative variances S, got a negative entry instead.")
    return Z, mu, S


# ------------------------------------------------------------------ public


@blas_pinned
def compute(kernel, Z, mu, S) -> PsiStats:
    """psi0, Psi1 (N, M) and Psi2 (M, M) of ``kernel`` under q(X).

    Z: (M, Q) inducing inputs; mu, S: (N, Q) variational means and variances.
    """
    parts = _parts(kernel)
    Z, mu, S = _validate(kernel, Z, mu, S)
    if len(parts) == 1 and kernel.name != "sum":
        _, family, params = parts[0]
        psi0, Psi1, Psi2 = family.psi_stats(*[params[k] for k in family.PARAMS], Z, mu, S)
    else:
        psi0, Psi1, Psi2 = _sum.psi_stats([(f, p) for _, f, p in parts], Z, mu, S)
    return PsiStats(float(psi0), Psi1, Psi2)


def take_forward():
    """What :func:`compute` (or :func:`compute_grouped`) last kept on this thread for the backward
    pass at the same arguments (an opaque object, or None), removed from the thread.

    The thread keeps one forward pass; a caller that runs several blocks' forward
    passes before their backward passes (a dask worker holding two chunks) takes
    each block's after its forward and gives it back with :func:`restore_forward`
    before that block's backward, which then skips recomputing it.
    """
    return rbf.take_kept()


def restore_forward(kept) -> None:
    """Give this thread back a forward pass from :func:`take_forward` (None: keep nothing).  The backward
    pass uses it only at exactly the arguments it was computed for."""
    rbf.put_kept(kept)


@blas_pinned
def gradients(kernel, Z, mu, S, dL_dpsi0, dL_dPsi1, dL_dPsi2) -> PsiGradients:
    """Gradients of L = dL_dpsi0 psi0 + sum(dL_dPsi1 * Psi1) + sum(dL_dPsi2 * Psi2).

    dL_dpsi0: float; dL_dPsi1: (N, M); dL_dPsi2: (M, M), need not be symmetric.
    Returns :class:`PsiGradients` with ``params`` keyed exactly like ``kernel.params``.
    """
    parts = _parts(kernel)
    Z, mu, S = _validate(kernel, Z, mu, S)
    N, M = mu.shape[0], Z.shape[0]
    G1 = np.ascontiguousarray(dL_dPsi1, dtype=np.float64)
    G2 = np.ascontiguousarray(dL_dPsi2, dtype=np.float64)
    if G1.shape != (N, M):
        raise ShapeError(f"Expected dL_dPsi1 of shape {(N, M)}, got {G1.shape} instead.")
    if G2.shape != (M, M):
        raise ShapeError(f"Expected dL_dPsi2 of shape {(M, M)}, got {G2.shape} instead.")
    if len(parts) == 1 and kernel.name != "sum":
        _, family, params = parts[0]
        grads = [family.psi_gradients(dL_dpsi0, G1, G2, *[params[k] for k in family.PARAMS], Z, mu, S)]
    else:
        grads = _sum.psi_gradients(dL_dpsi0, G1, G2, [(f, p) for _, f, p in parts], Z, mu, S)
    return _collect(parts, grads, Z, mu, S)


def _validate_weights(weights, N):
    W = np.ascontiguousarray(weights, dtype=np.float64)
    if W.ndim != 2 or W.shape[0] != N or W.shape[1] < 1:
        raise ShapeError(f"Expected weights of shape (N={N}, K >= 1), got {W.shape} instead.")
    if not np.all(np.isfinite(W)):
        raise ShapeError("Expected finite weights, got NaN or inf instead.")
    return W


def _grouped_parts(kernel):
    if not supports_grouped(kernel):
        check_supported(kernel)
        raise UnsupportedKernelError(
            f"Weighted psi statistics are implemented for RBF, Bias and White kernels and their sums, "
            f"got {_describe(kernel)} instead; use compute() on each subset of rows.")
    return _parts(kernel)


@blas_pinned
def compute_grouped(kernel, Z, mu, S, weights) -> GroupedPsiStats:
    """K weighted sums of the psi statistics over the points, from one pass over them.

    weights: (N, K), e.g. 0/1 memberships of K row sets; returns
    :class:`GroupedPsiStats` with psi0[k] = sum_n weights[n, k] psi0_n and
    Psi2[k] = sum_n weights[n, k] Psi2_n, and Psi1 (N, M) as :func:`compute`.
    Equal (to rounding) to :func:`compute` on each row set; the results do
    not depend on the number of threads.
    """
    parts = _grouped_parts(kernel)
    Z, mu, S = _validate(kernel, Z, mu, S)
    W = _validate_weights(weights, mu.shape[0])
    psi0, Psi1, Psi2 = _sum.psi_stats_weighted([(f, p) for _, f, p in parts], Z, mu, S, W)
    return GroupedPsiStats(psi0, Psi1, Psi2)


@blas_pinned
def gradients_grouped(kernel, Z, mu, S, weights, dL_dpsi0, dL_dPsi1, dL_dPsi2) -> PsiGradients:
    """Gradients of L = sum_k (dL_dpsi0[k] psi0[k] + sum(dL_dPsi2[k] * Psi2[k])) + sum(dL_dPsi1 * Psi1)
    for the statistics of :func:`compute_grouped`.

    dL_dpsi0: (K,); dL_dPsi1: (N, M); dL_dPsi2: (K, M, M), need not be symmetric.
    After :func:`compute_grouped` at the same arguments the RBF backward pass
    reuses the forward pass's values.
    """
    parts = _grouped_parts(kernel)
    Z, mu, S = _validate(kernel, Z, mu, S)
    N, M = mu.shape[0], Z.shape[0]
    W = _validate_weights(weights, N)
    K = W.shape[1]
    g0 = np.ascontiguousarray(dL_dpsi0, dtype=np.float64).reshape(-1)
    G1 = np.ascontiguousarray(dL_dPsi1, dtype=np.float64)
    G2 = np.ascontiguousarray(dL_dPsi2, dtype=np.float64)
    if g0.shape != (K,):
        raise ShapeError(f"Expected dL_dpsi0 of shape {(K,)}, got {g0.shape} instead.")
    if G1.shape != (N, M):
        raise ShapeError(f"Expected dL_dPsi1 of shape {(N, M)}, got {G1.shape} instead.")
    if G2.shape != (K, M, M):
        raise ShapeError(f"Expected dL_dPsi2 of shape {(K, M, M)}, got {G2.shape} instead.")
    grads = _sum.psi_gradients_weighted(g0, G1, G2, [(f, p) for _, f, p in parts], Z, mu, S, W)
    return _collect(parts, grads, Z, mu, S)


@blas_pinned
def contract(kernel, Z, mu, S, E) -> ContractedPsi:
    """Each point's psi statistics, Psi2_n contracted with K symmetric matrices E (K, M, M).

    Returns :class:`ContractedPsi` (psi0 (N,), Psi1 (N, M), T (N, K), T[n, k] =
    <Psi2_n, E_k>).  The gradients of L = sum(dpsi0 psi0) + sum(dPsi1 Psi1) +
    sum(dT T) follow from the weighted sums: with W = dT (N, K), d/dE_k is
    :func:`compute_grouped` (weights W).Psi2[k], and the gradients w.r.t. the
    kernel, Z, mu and S are :func:`gradients_grouped` (weights W, dL_dpsi0 =
    ones(K), dL_dPsi2 = E) when every dpsi0[n] = sum_k dT[n, k] (as for the
    marginal variances of f); otherwise add the psi0 part separately.
    Available for the kernels of :func:`supports_grouped`, whose psi0 per
    point is the same for every point.
    """
    parts = _grouped_parts(kernel)
    Z, mu, S = _validate(kernel, Z, mu, S)
    M = Z.shape[0]
    E = np.ascontiguousarray(E, dtype=np.float64)
    if E.ndim != 3 or E.shape[1:] != (M, M) or E.shape[0] < 1:
        raise ShapeError(f"Expected E of shape (K, {M}, {M}), got {E.shape} instead.")
    Ep = rbf.packed_contraction(E)
    psi0, Psi1, T = _sum.psi_contract([(f, p) for _, f, p in parts], Z, mu, S, 0.5 * (E + np.swapaxes(E, 1, 2)), Ep)
    return ContractedPsi(psi0, Psi1, T)


def _collect(parts, grads, Z, mu, S) -> PsiGradients:
    """Per-part gradient dicts -> :class:`PsiGradients` (parameters keyed like ``kernel.params``)."""
    out_params = {}
    dZ = np.zeros_like(Z)
    dmu = np.zeros_like(mu)
    dS = np.zeros_like(S)
    for (prefix, family, _), g in zip(parts, grads):
        for k in family.PARAMS:
            out_params[prefix + k] = g[k]
        dZ += g["Z"]
        if g["mu"] is not None:  # None: an x-independent part of a sum (no gradient there)
            dmu += g["mu"]
            dS += g["S"]
    return PsiGradients(out_params, dZ, dmu, dS)


@blas_pinned
def warm_up() -> None:
    """Compile (or load from the on-disk cache) the numba loops on a tiny problem."""
    rng = np.random.default_rng(0)
    Z = rng.standard_normal((3, 2))
    mu = rng.standard_normal((5, 2))
    S = np.full((5, 2), 0.1)
    rbf.psi_stats(1.0, np.ones(2), Z, mu, S)
    for _ in range(2):  # from the Psi2_n the forward pass kept, then (nothing kept) recomputing them
        rbf.psi_gradients(1.0, np.ones((5, 3)), np.ones((3, 3)), 1.0, np.ones(2), Z, mu, S)
    W = np.ones((5, 2))
    rbf.psi_stats_weighted(1.0, np.ones(2), Z, mu, S, W)
    rbf.psi_gradients_weighted(np.ones(2), np.ones((5, 3)), np.ones((2, 3, 3)), 1.0, np.ones(2), Z, mu, S, W)
