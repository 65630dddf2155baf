"""Psi statistics of the ARD RBF kernel (Titsias & Lawrence 2010, section 3.2).

k(x, z) = variance * exp(-1/2 sum_q (x_q - z_q)^2 / l_q), l_q = lengthscales_q^2,
under q(x_n) = N(mu_n, diag S_n):

    psi0          = N variance
    Psi1[n, m]    = variance prod_q (1 + S_nq / l_q)^(-1/2)
                    exp(-1/2 sum_q (mu_nq - z_mq)^2 / (l_q + S_nq))
    Psi2_n[m, m'] = variance^2 prod_q (1 + 2 S_nq / l_q)^(-1/2)
                    exp(-sum_q (z_mq - z_m'q)^2 / (4 l_q)
                        - sum_q (mu_nq - (z_mq + z_m'q) / 2)^2 / (l_q + 2 S_nq))
    Psi2          = sum_n Psi2_n

Fast path.  With a_nq = 1 / (l_q + 2 S_nq) the Psi2 exponent is rewritten as

    -(c_n + U[n, m] + U[n, m'] + sum_q R[n, q] z_mq z_m'q)
    c_n     = -2 log variance + 1/2 sum_q log(1 + 2 S_nq / l_q) + sum_q a_nq mu_nq^2
    U[n, m] = sum_q (1 / (4 l_q) + a_nq / 4) z_mq^2 - a_nq mu_nq z_mq
    R[n, q] = (a_nq - 1 / l_q) / 2

where c, U, R come from BLAS.  The compiled loops run over blocks of
``_BLOCK`` data points laid out along the fastest axis (N is padded with
points that contribute exactly 0) and visit only m' <= m (Psi2 is
symmetric).  For a block and a row m, the cross terms sum_q R[n, q] z_mq z_m'q
of all m' <= m are one small GEMM (Z[:m+1] times R z_m over the block; BLAS
register-blocks it, which hand-written loops did not); a single fused pass
then adds the per-point terms, exponentiates with the vectorisable exp of
:mod:`._exp` (inlined: the 2**k factor is a bitcast) and sums, with the row
in L1.  Every block is first copied into C-contiguous buffers: views of the
(M, N) arrays have a runtime row stride, and LLVM then gathers.  Nothing of
size N x M x M is stored, except as below.

Threads and summation order: the blocks form ``min(blocks, _GROUPS)`` groups
of consecutive blocks, as equal as they can be (:func:`_group_bounds`: they
depend on N alone, never on the thread count).  Each group sums its blocks in
order into its own accumulators, and the group partials are added in group
order at the end.  The groups are split into ``numba.get_num_threads()``
contiguous shares run by a small thread pool (the compiled functions release
the GIL), so the threads only decide who computes a group, not the order of
any sum: the results are bitwise the same for any number of threads.  The
pool replaced ``parallel=True``: under the "omp" layer, waiting OpenMP threads spin, and on
a machine that also runs the web server, other sessions or BLAS the parallel
region was several times slower than this pool (N=1000, M=50, Q=10 on a
busy two-core machine: ~90 ms against ~12 ms for the forward pass).  It
also keeps the cold compile near 10 s instead of 30-40 s.

The backward pass forms, per data point, T_n = sym(dL_dPsi2) * Psi2_n and
the reductions Y_n = T_n [Z, 1], sum_m z_m Y_n[m] and sum_n R[n] Y_n[m]; per
block and row these are two more small GEMMs, and every gradient follows
through O(N M Q) BLAS work (see :func:`psi_gradients`).  It needs Psi2_n
again: :func:`psi_stats` keeps them (with its other intermediates) for a
following :func:`psi_gradients` at the same arguments when they fit in
``_KEEP_LIMIT`` (N = 1000 at M = 50: the backward pass then does no exp,
and each block's reductions are two GEMMs over all its pairs (m, m') at
once, :func:`_psi2_backward_kept_blocks`); otherwise the backward pass
recomputes them row by row.  The GEMMs are small enough
that OpenBLAS runs them on the calling thread; keep BLAS to one thread
anyway while these loops run (see :mod:`engine.psi`).

Weighted sums (:func:`psi_stats_weighted`, :func:`psi_gradients_weighted`):
Psi2[k] = sum_n W[n, k] Psi2_n for K columns of weights (the observed rows of
K column groups when outputs are missing).  The forward loop computes each
row of Psi2_n over a block once, as above, and one more small GEMM with the
block's (B, K) weights adds it to all K sums; the backward loop forms each
point's cotangent sum_k W[n, k] sym(dL_dPsi2[k]) for a row of a block by one
GEMM, multiplies it into Psi2_n (kept or recomputed) and then runs the same
reductions, which are linear in the cotangent.  Same groups of blocks and
summation order (bitwise the same for any number of threads), same forward
cache (the kept Psi2_n do not depend on W).  At N = 1000, M = 50, K = 12 the
pair costs ~1.3 times the unweighted one, against K + 1 passes before.

The statistics are invariant to translating mu and Z together; both are
centred on the mean of Z first, which keeps the expanded exponent free of
cancellation for far-from-origin inputs (the gradients are unchanged).
"""
from __future__ import annotations

import functools
import threading
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from .._jit import JIT, STRICT, njit
from .._threads import single_blas_thread
from ._exp import _exp1

#: Parameter names, in the order the array functions take them.
PARAMS = ("variance", "lengthscales")

#: Psi1 depends on x: a cross term with another x-dependent kernel is not
#: Psi1-separable (see :mod:`.sum`).
CROSS = None

#: Data points per block of the compiled loops (a multiple of the SIMD width).
_BLOCK = 64

#: Groups of blocks with their own accumulators (fewer when there are fewer
#: blocks; see :func:`_group_bounds`).  Each group ends with an O(M^2 Q) step
#: (its share of the Z gradient, ~5% of the backward work of one block), so
#: groups are kept few and large; 8 share evenly between 1, 2, 4 or 8 threads.
_GROUPS = 8


# ----------------------------------------------------------------- compiled


@njit(**JIT)
def _load_block(c, Ut, Rt, n0, cb, Ub, Rb):
    """Copy the block of points at n0 into C-contiguous (M, B), (Q, B) buffers.

    Views of Ut and Rt would have a runtime row stride; the copies let every
    inner loop below use unit-stride, compile-time-shaped accesses (no gathers).
    """
    for i in range(_BLOCK):
        cb[i] = c[n0 + i]
    for m in range(Ut.shape[0]):
        for i in range(_BLOCK):
            Ub[m, i] = Ut[m, n0 + i]
    for q in range(Rt.shape[0]):
        for i in range(_BLOCK):
            Rb[q, i] = Rt[q, n0 + i]


@njit(**JIT)
def _row_setup(cb, Ub, Rb, Z, m, W, base):
    """W[q, i] = R[n0 + i, q] z_mq and base[i] = -(c + U[:, m]) for row m of a block."""
    Q = Rb.shape[0]
    for q in range(Q):
        zq = Z[m, q]
        for i in range(_BLOCK):
            W[q, i] = Rb[q, i] * zq
    for i in range(_BLOCK):
        base[i] = -(cb[i] + Ub[m, i])


@njit(**JIT)
def _psi2_forward_blocks(c, Ut, Rt, Z, g_lo, g_hi, bounds, acc, Es):
    """acc[g, p] = sum over the points of group g of Psi2_n (packed), for groups g_lo..g_hi-1.

    Group g is the blocks bounds[g] .. bounds[g + 1] - 1, summed in order (the
    order does not depend on how groups are shared among threads).

    c: (Npad,); Ut: (M, Npad) = U^T; Rt: (Q, Npad) = R^T (Npad a multiple of
    the block size; padding has c = 1e300, so it contributes exactly 0);
    Z: (M, Q); acc: (groups, M(M+1)/2) of zeros, p = m(m+1)/2 + m' for m' <= m.
    Es: (Npad / B, M(M+1)/2, B) receives every Psi2_n[m, m'] (Es[b, p, i] for
    point b B + i) for :func:`_psi2_backward_kept_blocks`, or has size 0 (not kept).

    Per block and row m: the cross terms sum_q z_m2q W[q, i] of rows m2 <= m
    come from one GEMM (Z[:m+1] W, BLAS), then one fused pass adds the
    per-point terms, exponentiates (inlined vectorised exp) and sums while
    the row is in L1.
    """
    store = Es.size > 0
    M = Ut.shape[0]
    Q = Rt.shape[0]
    W = np.empty((Q, _BLOCK))
    base = np.empty(_BLOCK)
    Ebuf = np.empty((M, _BLOCK))
    cb = np.empty(_BLOCK)
    Ub = np.empty((M, _BLOCK))
    Rb = np.empty((Q, _BLOCK))
    g = g_lo
    for b in range(bounds[g_lo], bounds[g_hi]):
        while b >= bounds[g + 1]:
            g += 1
        ag = acc[g]
        _load_block(c, Ut, Rt, b * _BLOCK, cb, Ub, Rb)
        for m in range(M):
            _row_setup(cb, Ub, Rb, Z, m, W, base)
            p0 = m * (m + 1) // 2
            G = Ebuf[:m + 1]
            np.dot(Z[:m + 1], W, G)
            for m2 in range(m + 1):
                e = G[m2]
                u = Ub[m2]
                s = 0.0
                if store:  # Es comes from _kept_buffer (see there)
                    Eo = Es[b, p0 + m2]
                    for i in range(_BLOCK):
                        x = _exp1(base[i] - u[i] - e[i])
                        Eo[i] = x
                        s += x
                else:
                    for i in range(_BLOCK):
                        s += _exp1(base[i] - u[i] - e[i])
                ag[p0 + m2] += s


@njit(**JIT)
def _psi2_backward_blocks(c, Ut, Rt, Z, Gp, g_lo, g_hi, bounds, r, H, KZ):
    """Reductions of T_n = sym(dL_dPsi2) * Psi2_n for the points of groups g_lo..g_hi-1.

    c, Ut, Rt, Z: as in :func:`_psi2_forward_blocks`; Gp: (M(M+1)/2,) packed
    lower triangle of sym(dL_dPsi2).  With Y_n = T_n Z (M, Q) and
    r_n = T_n 1 (M,), writes r[n] (rows of (Npad, M)), H[n, q] = sum_m z_mq Y_n[m, q]
    (rows of (Npad, Q)) and writes KZ[g, m, q] = sum_{n in group g} R[n, q] Y_n[m, q]
    (as KZ[g] (Q, M), transposed; groups of blocks as in :func:`_psi2_forward_blocks`).
    The exponentials are recomputed here; when the forward pass kept them,
    :func:`_psi2_backward_kept_blocks` does the same reductions from them.

    Only the lower triangle m2 <= m is used, H_n[q] being
    sum_m z_mq (2 sum_{m2 <= m} T[m, m2] z_m2q - T[m, m] z_mq).

    Per block of points and row m, with Er = Psi2_n[m, :m+1] over the block
    ((m+1, B), recomputed) and g = Gs[m, :m+1]:
    Ym^T = Er^T [g Z, g] ((B, Q+1), one GEMM: row parts of T_n Z and T_n 1),
    D = Er R_block ((m+1, Q), one GEMM) is summed over the blocks of a group (KZ
    is linear in it, with coefficients from Z and Gp alone, so KZ[g] is formed
    once per group),
    and the mirror half of r is one FMA per element (rb[m2] += g[m2] Er[m2]),
    fused into the exp pass.
    """
    M = Ut.shape[0]
    Q = Rt.shape[0]
    P = M * (M + 1) // 2
    W = np.empty((Q, _BLOCK))
    base = np.empty(_BLOCK)
    Ebuf = np.empty((M, _BLOCK))
    ZgT = np.empty((M, Q + 1))
    YmT = np.empty((_BLOCK, Q + 1))
    D = np.empty((M, Q))
    Df = D.reshape(M * Q)
    Dacc = np.empty(P * Q)  # packed (P, Q): sum over a group's blocks of D, row m at p0 = m(m+1)/2
    ZT = np.ascontiguousarray(Z.T)
    T = np.empty((Q, M))
    rb = np.empty((M, _BLOCK))
    Hb = np.empty((Q, _BLOCK))
    cb = np.empty(_BLOCK)
    Ub = np.empty((M, _BLOCK))
    Rb = np.empty((Q, _BLOCK))
    RbT = np.empty((_BLOCK, Q))
    for g in range(g_lo, g_hi):
        for b in range(bounds[g], bounds[g + 1]):
            first = b == bounds[g]  # the group's first block sets Dacc (no memset of P Q doubles)
            n0 = b * _BLOCK
            _load_block(c, Ut, Rt, n0, cb, Ub, Rb)
            for q in range(Q):
                for i in range(_BLOCK):
                    RbT[i, q] = Rb[q, i]
            rb[:] = 0.0
            Hb[:] = 0.0
            for m in range(M):
                p0 = m * (m + 1) // 2
                for m2 in range(m + 1):
                    gm = Gp[p0 + m2]
                    for q in range(Q):
                        ZgT[m2, q] = gm * Z[m2, q]
                    ZgT[m2, Q] = gm
                _row_setup(cb, Ub, Rb, Z, m, W, base)
                Er = Ebuf[:m + 1]
                np.dot(Z[:m + 1], W, Er)
                for m2 in range(m):
                    gm = Gp[p0 + m2]
                    e = Er[m2]
                    u = Ub[m2]
                    rr = rb[m2]
                    for i in range(_BLOCK):
                        x = _exp1(base[i] - u[i] - e[i])
                        e[i] = x
                        rr[i] += gm * x
                e = Er[m]
                u = Ub[m]
                for i in range(_BLOCK):
                    e[i] = _exp1(base[i] - u[i] - e[i])
                np.dot(Er.T, ZgT[:m + 1], YmT)
                np.dot(Er, RbT, D[:m + 1])
                k0 = p0 * Q
                if first:
                    for k in range((m + 1) * Q):
                        Dacc[k0 + k] = Df[k]
                else:
                    for k in range((m + 1) * Q):
                        Dacc[k0 + k] += Df[k]
                gd = Gp[p0 + m]
                ed = Er[m]
                for i in range(_BLOCK):
                    rb[m, i] += YmT[i, Q]
                for q in range(Q):
                    zq = Z[m, q]
                    for i in range(_BLOCK):
                        Hb[q, i] += zq * (2.0 * YmT[i, q] - gd * ed[i] * zq)
            for i in range(_BLOCK):
                n = n0 + i
                for m in range(M):
                    r[n, m] = rb[m, i]
                for q in range(Q):
                    H[n, q] = Hb[q, i]
        _kz_of_group(ZT, Gp, Dacc, T, KZ[g])


@njit(**JIT)
def _psi2_backward_kept_blocks(Rt, Z, Gp, Wq, g_lo, g_hi, bounds, r, H, KZ, Es):
    """The reductions of :func:`_psi2_backward_blocks` from the Psi2_n the forward pass kept.

    Es: (Npad / B, M(M+1)/2, B) from :func:`_psi2_forward_blocks`; Rt, Z, Gp,
    bounds and the outputs r, H, KZ as in :func:`_psi2_backward_blocks`;
    Wq: (M(M+1)/2, Q) with Wq[p, q] = k_p Gp[p] z_mq z_m'q for p = (m, m'),
    k_p = 2 off the diagonal and 1 on it.  With the block's Psi2_n as one
    (P, B) matrix E_b, per block:

        H_b (B, Q) = E_b^T Wq                   (one GEMM: sum_m z_mq Y_n[m, q])
        D_b (P, Q) = E_b R_b                    (one GEMM, summed over the group)
        r_b[m]    += Gp[p] E_b[p] for both ends m of every pair p

    Two GEMMs with an inner dimension of P or B run near BLAS's peak, where
    row-by-row products of (m+1) x B panels did not; the exponentials are not
    recomputed.  Groups and summation order as in :func:`_psi2_forward_blocks`.
    """
    M = Z.shape[0]
    Q = Z.shape[1]
    P = M * (M + 1) // 2
    Dacc = np.empty((P, Q))  # the group's sum over blocks of D_b
    Db = np.empty((P, Q))
    ZT = np.ascontiguousarray(Z.T)
    T = np.empty((Q, M))
    rb = np.empty((M, _BLOCK))
    RbT = np.empty((_BLOCK, Q))
    Hb = np.empty((_BLOCK, Q))
    for g in range(g_lo, g_hi):
        for b in range(bounds[g], bounds[g + 1]):
            n0 = b * _BLOCK
            for i in range(_BLOCK):
                for q in range(Q):
                    RbT[i, q] = Rt[q, n0 + i]
            Eb = Es[b]
            np.dot(Eb.T, Wq, Hb)
            if b == bounds[g]:
                np.dot(Eb, RbT, Dacc)
            else:
                np.dot(Eb, RbT, Db)
                Dacc += Db
            for m in range(M):
                p0 = m * (m + 1) // 2
                gd = Gp[p0 + m]
                e = Eb[p0 + m]
                rm = rb[m]
                for i in range(_BLOCK):
                    rm[i] = gd * e[i]
                for m2 in range(m):
                    gm = Gp[p0 + m2]
                    e = Eb[p0 + m2]
                    r2 = rb[m2]
                    for i in range(_BLOCK):
                        x = gm * e[i]
                        rm[i] += x
                        r2[i] += x
            for i in range(_BLOCK):
                n = n0 + i
                for m in range(M):
                    r[n, m] = rb[m, i]
                for q in range(Q):
                    H[n, q] = Hb[i, q]
        _kz_of_group(ZT, Gp, Dacc.reshape(P * Q), T, KZ[g])


@njit(**JIT)
def _kz_of_group(ZT, Gp, Dacc, T, KZT):
    """KZT (Q, M) of zeros += the group's part of KZ^T from its summed D (Dacc, packed (P, Q)).

    With t[m2, q] = g[m, m2] D[m, m2, q]: KZ[m, q] += sum_{m2 <= m} t z_m2q (row
    part) and KZ[m2, q] += t z_mq for m2 < m (mirror).  Row m's t is first
    copied transposed into T (Q, M), so the loops over m2 are unit-stride.
    """
    Q, M = ZT.shape
    for m in range(M):
        p0 = m * (m + 1) // 2
        for m2 in range(m + 1):
            g = Gp[p0 + m2]
            k0 = (p0 + m2) * Q
            for q in range(Q):
                T[q, m2] = g * Dacc[k0 + q]
        for q in range(Q):
            zmq = ZT[q, m]
            s = 0.0
            # the sum by a loop that only reads: one that also stores is vectorised behind a
            # run-time check that its arrays are far enough apart and runs scalar (another
            # summation order) when the heap places them close together
            for m2 in range(m):
                s += T[q, m2] * ZT[q, m2]
            for m2 in range(m):
                KZT[q, m2] += T[q, m2] * zmq
            KZT[q, m] += s + T[q, m] * zmq


@njit(**JIT)
def _psi2_forward_weighted_blocks(c, Ut, Rt, Z, Wn, g_lo, g_hi, bounds, acc, Es):
    """acc[g, p, k] = sum over the points n of group g of Wn[n, k] Psi2_n[p] (packed p), groups g_lo..g_hi-1.

    As :func:`_psi2_forward_blocks` (same arguments and groups of blocks), with
    Wn: (Npad, K) weights (padding rows 0) and acc: (groups, M(M+1)/2, K) of
    zeros.  Each Psi2_n is computed once: per block and row m the (m+1, B)
    values Psi2_n[m, :m+1] are exponentiated into a buffer (and copied to Es
    when kept), then one GEMM with the block's (B, K) weights adds them to
    all K weighted sums.
    """
    store = Es.size > 0
    M = Ut.shape[0]
    Q = Rt.shape[0]
    K = Wn.shape[1]
    Wr = np.empty((Q, _BLOCK))
    base = np.empty(_BLOCK)
    Ebuf = np.empty((M, _BLOCK))
    Tbuf = np.empty((M, K))
    Wb = np.empty((_BLOCK, K))
    cb = np.empty(_BLOCK)
    Ub = np.empty((M, _BLOCK))
    Rb = np.empty((Q, _BLOCK))
    g = g_lo
    for b in range(bounds[g_lo], bounds[g_hi]):
        while b >= bounds[g + 1]:
            g += 1
        ag = acc[g]
        n0 = b * _BLOCK
        _load_block(c, Ut, Rt, n0, cb, Ub, Rb)
        for i in range(_BLOCK):
            for k in range(K):
                Wb[i, k] = Wn[n0 + i, k]
        for m in range(M):
            _row_setup(cb, Ub, Rb, Z, m, Wr, base)
            p0 = m * (m + 1) // 2
            G = Ebuf[:m + 1]
            np.dot(Z[:m + 1], Wr, G)
            for m2 in range(m + 1):
                e = G[m2]
                u = Ub[m2]
                if store:
                    Eo = Es[b, p0 + m2]
                    for i in range(_BLOCK):
                        x = _exp1(base[i] - u[i] - e[i])
                        e[i] = x
                        Eo[i] = x
                else:
                    for i in range(_BLOCK):
                        e[i] = _exp1(base[i] - u[i] - e[i])
            T = Tbuf[:m + 1]
            np.dot(G, Wb, T)
            for m2 in range(m + 1):
                a = ag[p0 + m2]
                t = T[m2]
                for k in range(K):
                    a[k] += t[k]


@njit(**JIT)
def _psi2_backward_weighted_blocks(c, Ut, Rt, Z, GpW, WnT, g_lo, g_hi, bounds, r, H, KZ, Es):
    """As :func:`_psi2_backward_blocks` with a cotangent per point: T_n = C_n * Psi2_n,
    C_n = sum_k WnT[k, n] sym(dL_dPsi2_k).

    GpW: (M(M+1)/2, K), column k the packed lower triangle of sym(dL_dPsi2_k);
    WnT: (K, Npad) weights (padding columns 0); the other arguments and the
    outputs r, H, KZ as in :func:`_psi2_backward_blocks`.  Per block and row m,
    C_n[m, :m+1] over the block is one GEMM (GpW rows times the block's
    weights), multiplied in place by Psi2_n[m, :m+1] (kept or recomputed);
    the reductions then read T_n directly (KZ with unit coefficients).
    """
    stored = Es.size > 0
    M = Ut.shape[0]
    Q = Rt.shape[0]
    K = GpW.shape[1]
    P = M * (M + 1) // 2
    Wr = np.empty((Q, _BLOCK))
    base = np.empty(_BLOCK)
    Ebuf = np.empty((M, _BLOCK))
    Cbuf = np.empty((M, _BLOCK))
    Z1 = np.empty((M, Q + 1))
    for m in range(M):
        for q in range(Q):
            Z1[m, q] = Z[m, q]
        Z1[m, Q] = 1.0
    ones = np.ones(P)
    YmT = np.empty((_BLOCK, Q + 1))
    D = np.empty((M, Q))
    Df = D.reshape(M * Q)
    Dacc = np.empty(P * Q)
    ZT = np.ascontiguousarray(Z.T)
    T = np.empty((Q, M))
    rb = np.empty((M, _BLOCK))
    Hb = np.empty((Q, _BLOCK))
    cb = np.empty(_BLOCK)
    Ub = np.empty((M, _BLOCK))
    Rb = np.empty((Q, _BLOCK))
    RbT = np.empty((_BLOCK, Q))
    WbT = np.empty((K, _BLOCK))
    for g in range(g_lo, g_hi):
        for b in range(bounds[g], bounds[g + 1]):
            first = b == bounds[g]
            n0 = b * _BLOCK
            _load_block(c, Ut, Rt, n0, cb, Ub, Rb)
            for q in range(Q):
                for i in range(_BLOCK):
                    RbT[i, q] = Rb[q, i]
            for k in range(K):
                for i in range(_BLOCK):
                    WbT[k, i] = WnT[k, n0 + i]
            rb[:] = 0.0
            Hb[:] = 0.0
            for m in range(M):
                p0 = m * (m + 1) // 2
                Tr = Cbuf[:m + 1]
                np.dot(GpW[p0:p0 + m + 1], WbT, Tr)
                if stored:
                    Er = Es[b, p0:p0 + m + 1]
                    for m2 in range(m + 1):
                        e = Er[m2]
                        t = Tr[m2]
                        for i in range(_BLOCK):
                            t[i] *= e[i]
                else:
                    _row_setup(cb, Ub, Rb, Z, m, Wr, base)
                    G = Ebuf[:m + 1]
                    np.dot(Z[:m + 1], Wr, G)
                    for m2 in range(m + 1):
                        e = G[m2]
                        u = Ub[m2]
                        t = Tr[m2]
                        for i in range(_BLOCK):
                            t[i] *= _exp1(base[i] - u[i] - e[i])
                for m2 in range(m):
                    t = Tr[m2]
                    rr = rb[m2]
                    for i in range(_BLOCK):
                        rr[i] += t[i]
                np.dot(Tr.T, Z1[:m + 1], YmT)
                np.dot(Tr, RbT, D[:m + 1])
                k0 = p0 * Q
                if first:
                    for k in range((m + 1) * Q):
                        Dacc[k0 + k] = Df[k]
                else:
                    for k in range((m + 1) * Q):
                        Dacc[k0 + k] += Df[k]
                td = Tr[m]
                for i in range(_BLOCK):
                    rb[m, i] += YmT[i, Q]
                for q in range(Q):
                    zq = Z[m, q]
                    for i in range(_BLOCK):
                        Hb[q, i] += zq * (2.0 * YmT[i, q] - td[i] * zq)
            for i in range(_BLOCK):
                n = n0 + i
                for m in range(M):
                    r[n, m] = rb[m, i]
                for q in range(Q):
                    H[n, q] = Hb[q, i]
        _kz_of_group(ZT, ones, Dacc, T, KZ[g])


@njit(**JIT)
def _psi2_contract_blocks(c, Ut, Rt, Z, Ep, g_lo, g_hi, bounds, out):
    """out[n, k] = <Psi2_n, E_k> for the points of groups g_lo..g_hi-1 (groups of blocks as in
    :func:`_psi2_forward_blocks`, same arguments c, Ut, Rt, Z).

    Ep: (M(M+1)/2, K), column k the packed lower triangle of the symmetric E_k
    with its off-diagonal entries doubled; out: (Npad, K).  Per block the
    (M(M+1)/2, B) values Psi2_n[m, m'], m' <= m, are exponentiated into a
    buffer row by row (as the forward pass does), then one GEMM with Ep gives
    the block's (B, K) contractions.  Rows never mix, so the split of the
    blocks among threads changes no number.
    """
    M = Ut.shape[0]
    Q = Rt.shape[0]
    P = M * (M + 1) // 2
    K = Ep.shape[1]
    W = np.empty((Q, _BLOCK))
    base = np.empty(_BLOCK)
    Eb = np.empty((P, _BLOCK))
    Tb = np.empty((_BLOCK, K))
    cb = np.empty(_BLOCK)
    Ub = np.empty((M, _BLOCK))
    Rb = np.empty((Q, _BLOCK))
    for b in range(bounds[g_lo], bounds[g_hi]):
        n0 = b * _BLOCK
        _load_block(c, Ut, Rt, n0, cb, Ub, Rb)
        for m in range(M):
            _row_setup(cb, Ub, Rb, Z, m, W, base)
            p0 = m * (m + 1) // 2
            G = Eb[p0:p0 + m + 1]
            np.dot(Z[:m + 1], W, G)
            for m2 in range(m + 1):
                e = G[m2]
                u = Ub[m2]
                for i in range(_BLOCK):
                    e[i] = _exp1(base[i] - u[i] - e[i])
        np.dot(Eb.T, Ep, Tb)
        for i in range(_BLOCK):
            for k in range(K):
                out[n0 + i, k] = Tb[i, k]


def _group_bounds(nblock):
    """First block of each group and the end, (groups + 1,): min(nblock, _GROUPS) groups of
    consecutive blocks whose sizes differ by at most one.

    A function of the problem size alone (never of the thread count): the
    groups fix the summation order of every reduction over points.
    """
    ngroup = max(1, min(nblock, _GROUPS))
    return np.array([g * nblock // ngroup for g in range(ngroup + 1)], dtype=np.int64)


def _nthread(ngroup):
    """Threads worth using: numba's thread count, at most one per group of blocks."""
    return max(1, min(numba.get_num_threads(), ngroup))


_POOL = None
_POOL_LOCK = threading.Lock()


def _pool():
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=max(1, numba.config.NUMBA_NUM_THREADS - 1), thread_name_prefix="psi")
        return _POOL


def _run_shares(fn, ngroup, args_of_share):
    """Run fn(*args_of_share(g_lo, g_hi)) for contiguous shares of range(ngroup), one per thread.

    The compiled functions release the GIL, so shares run in parallel on a
    small thread pool (the caller runs share 0 itself).  Waiting threads
    sleep instead of spinning, unlike an OpenMP barrier: on a machine also
    running the web server, another training session or BLAS, this was
    several times faster than ``parallel=True`` under the "omp" layer.
    Each group has its own accumulators, so which thread runs a group does
    not change any result.
    """
    nthread = _nthread(ngroup)
    shares = [(t * ngroup // nthread, (t + 1) * ngroup // nthread) for t in range(nthread)]
    futures = [_pool().submit(fn, *args_of_share(*share)) for share in shares[1:]]
    fn(*args_of_share(*shares[0]))
    for f in futures:
        f.result()


def _pad(c, Ut, Rt):
    """Pad the point axis to a multiple of the block size with points that contribute 0."""
    N = c.shape[0]
    Npad = -(-N // _BLOCK) * _BLOCK
    if Npad == N:
        return c, Ut, Rt
    cp = np.full(Npad, 1e300)
    cp[:N] = c
    Up = np.zeros((Ut.shape[0], Npad))
    Up[:, :N] = Ut
    Rp = np.zeros((Rt.shape[0], Npad))
    Rp[:, :N] = Rt
    return cp, Up, Rp


def _sum_rows(parts):
    """parts[0] + parts[1] + ... in this order (the group partials; a fixed order, whatever the threads)."""
    out = parts[0].copy()
    for part in parts[1:]:
        out += part
    return out


#: Most doubles of the weighted forward pass's accumulators (groups of blocks x
#: M(M+1)/2 x weight columns): 2**22 (32 MB); more weight columns are taken in chunks.
_WEIGHTED_ACC_LIMIT = 2**22

#: Empty stand-in for the kept Psi2_n when they are not kept.
_NOT_KEPT = np.empty((0, 0, _BLOCK))

#: Most Psi2_n values (doubles) a forward pass keeps for the backward pass:
#: 2**21 (16 MB) holds N = 1000 at M = 50.  Above it the backward pass
#: recomputes the exponentials.
_KEEP_LIMIT = 2**21


def _kept_buffer(nblock, P):
    """Uninitialised (nblock, P, B) for the kept Psi2_n, with 64 doubles of unused memory on each side.

    The forward loop stores each row while it sums it; LLVM vectorises such a loop behind a
    run-time check that the row and the arrays it reads are not within a few vectors of each
    other, and otherwise runs it scalar, summing in another order (other last bits).  With the
    gaps, no array of the heap can sit right beside a row, so the vectorised path is the one
    taken, whatever the heap's layout.
    """
    size = nblock * P * _BLOCK
    return np.empty(64 + size + 64)[64:64 + size].reshape(nblock, P, _BLOCK)


def _psi2_packed(c, Ut, Rt, Z, keep=False):
    """Packed lower triangle (M(M+1)/2,) of Psi2 = sum_n Psi2_n.

    With ``keep``, returns (packed, kept) where kept holds every Psi2_n for
    :func:`_psi2_reductions` ((Npad / B, M(M+1)/2, B)), or None above _KEEP_LIMIT.
    """
    c, Ut, Rt = _pad(c, Ut, Rt)
    nblock = c.shape[0] // _BLOCK
    M = Z.shape[0]
    P = M * (M + 1) // 2
    Es = _kept_buffer(nblock, P) if keep and nblock * P * _BLOCK <= _KEEP_LIMIT else _NOT_KEPT
    bounds = _group_bounds(nblock)
    ngroup = bounds.shape[0] - 1
    acc = np.zeros((ngroup, P))
    _run_shares(_psi2_forward_blocks, ngroup, lambda lo, hi: (c, Ut, Rt, Z, lo, hi, bounds, acc, Es))
    packed = _sum_rows(acc)
    if keep:
        return packed, (Es if Es.size else None)
    return packed


def _psi2_reductions(c, Ut, Rt, Z, Gp, kept=None):
    """(r (N, M), H (N, Q), KZ (M, Q)); see :func:`_psi2_backward_blocks`.

    kept: the Psi2_n from ``_psi2_packed(c, Ut, Rt, Z, keep=True)`` at the same
    arguments, or None (recompute them).
    """
    N = c.shape[0]
    c, Ut, Rt = _pad(c, Ut, Rt)
    M, Npad = Ut.shape
    Q = Rt.shape[0]
    r = np.empty((Npad, M))
    H = np.empty((Npad, Q))
    nblock = Npad // _BLOCK
    bounds = _group_bounds(nblock)
    ngroup = bounds.shape[0] - 1
    KZ = np.zeros((ngroup, Q, M))  # KZ^T of each group
    if kept is None:
        _run_shares(_psi2_backward_blocks, ngroup, lambda lo, hi: (c, Ut, Rt, Z, Gp, lo, hi, bounds, r, H, KZ))
    else:
        rows, cols = _tril(M)
        Wq = np.ascontiguousarray((Gp * np.where(rows == cols, 1.0, 2.0))[:, None] * Z[rows] * Z[cols])
        _run_shares(_psi2_backward_kept_blocks, ngroup, lambda lo, hi: (Rt, Z, Gp, Wq, lo, hi, bounds, r, H, KZ, kept))
    return r[:N], H[:N], np.ascontiguousarray(_sum_rows(KZ).T)


def _pad_weights(W, Npad):
    """Weights (N, K) padded with zero rows to (Npad, K), C-contiguous."""
    N, K = W.shape
    Wp = np.zeros((Npad, K))
    Wp[:N] = W
    return Wp


def _psi2_weighted_packed(c, Ut, Rt, Z, W, keep=False):
    """(P, K) packed lower triangles of sum_n W[n, k] Psi2_n; with ``keep`` also the kept Psi2_n
    (as :func:`_psi2_packed`)."""
    c, Ut, Rt = _pad(c, Ut, Rt)
    nblock = c.shape[0] // _BLOCK
    M = Z.shape[0]
    P = M * (M + 1) // 2
    K = W.shape[1]
    Wp = _pad_weights(W, c.shape[0])
    Es = _kept_buffer(nblock, P) if keep and nblock * P * _BLOCK <= _KEEP_LIMIT else _NOT_KEPT
    bounds = _group_bounds(nblock)
    ngroup = bounds.shape[0] - 1
    # the accumulators of each group of blocks hold P K doubles: with many weight columns,
    # take them in chunks (each chunk a pass over the points; only the first keeps Psi2_n)
    chunk = max(1, min(K, _WEIGHTED_ACC_LIMIT // (ngroup * P)))
    packed = np.empty((P, K))
    for k0 in range(0, K, chunk):
        Wk = np.ascontiguousarray(Wp[:, k0:k0 + chunk])
        acc = np.zeros((ngroup, P, Wk.shape[1]))
        Ek = Es if k0 == 0 else _NOT_KEPT
        _run_shares(_psi2_forward_weighted_blocks, ngroup,
                    lambda lo, hi: (c, Ut, Rt, Z, Wk, lo, hi, bounds, acc, Ek))
        packed[:, k0:k0 + chunk] = _sum_rows(acc)
    if keep:
        return packed, (Es if Es.size else None)
    return packed


def _psi2_weighted_reductions(c, Ut, Rt, Z, GpW, W, kept=None):
    """(r (N, M), H (N, Q), KZ (M, Q)) of T_n = (sum_k W[n, k] sym(dL_dPsi2_k)) * Psi2_n
    (see :func:`_psi2_backward_weighted_blocks`); kept as in :func:`_psi2_reductions`."""
    N = c.shape[0]
    c, Ut, Rt = _pad(c, Ut, Rt)
    M, Npad = Ut.shape
    Q = Rt.shape[0]
    WnT = np.ascontiguousarray(_pad_weights(W, Npad).T)
    r = np.empty((Npad, M))
    H = np.empty((Npad, Q))
    nblock = Npad // _BLOCK
    Es = _NOT_KEPT if kept is None else kept
    bounds = _group_bounds(nblock)
    ngroup = bounds.shape[0] - 1
    KZ = np.zeros((ngroup, Q, M))
    _run_shares(_psi2_backward_weighted_blocks, ngroup,
                lambda lo, hi: (c, Ut, Rt, Z, GpW, WnT, lo, hi, bounds, r, H, KZ, Es))
    return r[:N], H[:N], np.ascontiguousarray(_sum_rows(KZ).T)


def packed_contraction(E):
    """Ep (M(M+1)/2, K) of K matrices E (K, M, M): the packed lower triangles of sym(E_k) with the
    off-diagonal entries doubled, so that <Psi2_n, E_k> = sum_p packed(Psi2_n)[p] Ep[p, k]."""
    E = np.asarray(E, dtype=np.float64)
    M = E.shape[1]
    Es = 0.5 * (E + np.swapaxes(E, 1, 2))
    rows, cols = _tril(M)
    return np.ascontiguousarray((Es[:, rows, cols] * np.where(rows == cols, 1.0, 2.0)).T)


def _psi2_contractions(c, Ut, Rt, Z, Ep):
    """(N, K): <Psi2_n, E_k> for every point (see :func:`_psi2_contract_blocks`)."""
    N = c.shape[0]
    c, Ut, Rt = _pad(c, Ut, Rt)
    nblock = c.shape[0] // _BLOCK
    out = np.empty((c.shape[0], Ep.shape[1]))
    bounds = _group_bounds(nblock)
    ngroup = bounds.shape[0] - 1
    _run_shares(_psi2_contract_blocks, ngroup, lambda lo, hi: (c, Ut, Rt, Z, Ep, lo, hi, bounds, out))
    return out[:N]


# ----------------------------------------------------------------- forward cache

# The models call psi_stats and then psi_gradients at the same arguments; the
# backward pass reuses the forward pass's prepared terms, Psi1 and (below
# _KEEP_LIMIT) its Psi2_n, if the arguments are equal.  One entry per thread
# (sessions training in different threads never see each other's), dropped
# by the next psi_gradients.
_LAST = threading.local()


class _Forward:
    """What :func:`psi_stats` leaves for :func:`psi_gradients` (inputs copied for the comparison)."""

    __slots__ = ("args", "prepared", "Psi1", "b", "terms", "kept")

    def __init__(self, args, prepared, Psi1, b, terms, kept):
        self.args = tuple(np.array(x, dtype=np.float64) for x in args)
        self.prepared = prepared
        self.Psi1 = Psi1
        self.b = b
        self.terms = terms
        self.kept = kept

    def matches(self, args):
        return all(np.array_equal(mine, np.asarray(x, dtype=np.float64)) for mine, x in zip(self.args, args))


def _take_forward(args):
    """The cached forward pass at exactly these arguments (and drop the cache), else None."""
    fw = take_kept()
    if fw is not None and fw.matches(args):
        return fw
    return None


def take_kept():
    """This thread's kept forward pass (or None), removed from the thread."""
    fw = getattr(_LAST, "forward", None)
    _LAST.forward = None
    return fw


def put_kept(fw) -> None:
    """Make ``fw`` (from :func:`take_kept`, or None) this thread's kept forward pass."""
    _LAST.forward = fw


@njit(**STRICT)
def _row_gradients(b, a, mu, S, il, WZ, rZ, H, dmu, dS, dl_rows):
    """The per-row gradient terms of :func:`_gradients`, one pass over (N, Q).

    b = 1 / (l + S), a = 1 / (l + 2 S), mu, S, H: (N, Q); il = 1 / l: (Q,);
    WZ = W1 [Z, Z^2, 1] and rZ = r [Z, Z^2, 1]: (N, 2Q + 1).  Writes dmu, dS
    and dl_rows (N, Q), whose column sums (plus sum(w) / 2l) are dL/dl.  Every
    entry is its own expression (no sums across rows, no fast-math), so a
    row's values do not depend on the other rows or on the vector width.
    """
    N, Q = mu.shape
    for n in range(N):
        w = WZ[n, 2 * Q]
        t = rZ[n, 2 * Q]
        for q in range(Q):
            bq = b[n, q]
            aq = a[n, q]
            m = mu[n, q]
            wz = WZ[n, q]
            wz2 = WZ[n, Q + q]
            rz = rZ[n, q]
            rz2 = rZ[n, Q + q]
            h = H[n, q]
            aa = aq * aq
            dS1 = -0.5 * bq * w + 0.5 * bq * bq * (m * m * w - 2.0 * m * wz + wz2)
            dmu[n, q] = -bq * (m * w - wz) - 2.0 * aq * (t * m - rz)
            dS[n, q] = dS1 - t * (aq - 2.0 * aa * m * m) + aa * (rz2 - 4.0 * m * rz + h)
            dl_rows[n, q] = (dS1 + t * (S[n, q] * aq * il[q] + aa * m * m) + 0.5 * aa * rz2
                             - 2.0 * aa * m * rz + 0.5 * aa * h + 0.5 * il[q] * il[q] * (rz2 - h))


# ----------------------------------------------------------------- helpers


def _prepare(variance, lengthscales, Z, mu, S):
    """Centred float64 arrays and l = lengthscales^2 broadcast to (Q,)."""
    Z = np.asarray(Z, dtype=np.float64)
    mu = np.asarray(mu, dtype=np.float64)
    S = np.asarray(S, dtype=np.float64)
    Q = Z.shape[1]
    ell = np.asarray(lengthscales, dtype=np.float64)
    l = np.broadcast_to(ell * ell, (Q,)).astype(np.float64)
    shift = Z.mean(axis=0)
    return float(variance), l, np.ascontiguousarray(Z - shift), np.ascontiguousarray(mu - shift), S


def _psi1(variance, l, Z, mu, S):
    """Psi1 (N, M) and b = 1 / (l + S) (N, Q) from prepared arrays."""
    b = 1.0 / (l + S)
    log_pre = np.log(variance) - 0.5 * np.sum(np.log1p(S / l), axis=1) - 0.5 * np.sum(b * mu * mu, axis=1)
    expo = (b * mu) @ Z.T - 0.5 * (b @ (Z * Z).T)
    expo += log_pre[:, None]
    return np.exp(expo), b


def _psi2_terms(variance, l, Z, mu, S):
    """a (N, Q), c (N,), U^T (M, N), R^T (Q, N): the rewritten exponent (module docstring)."""
    a = 1.0 / (l + 2.0 * S)
    c = -2.0 * np.log(variance) + 0.5 * np.sum(np.log1p(2.0 * S / l), axis=1) + np.sum(a * mu * mu, axis=1)
    Z2 = Z * Z
    Ut = 0.25 * (Z2 @ a.T) - Z @ (a * mu).T
    Ut += (Z2 @ (0.25 / l))[:, None]
    Rt = np.ascontiguousarray(0.5 * (a - 1.0 / l).T)
    return a, np.ascontiguousarray(c), np.ascontiguousarray(Ut), Rt


#: Fewest rows for which Psi1 goes to the pool (below, waking a thread costs more than it saves).
_POOLED_PSI1_ROWS = 512


def _pinned_psi1(variance, l, Z, mu, S):
    with single_blas_thread():  # for BLAS libraries whose limit is per thread
        return _psi1(variance, l, Z, mu, S)


def _psi1_and_terms(variance, l, Z, mu, S):
    """(_psi1(...), _psi2_terms(...)): the two are independent numpy work, so with a second
    thread Psi1 is computed on the pool while this thread forms the Psi2 terms (numpy
    releases the GIL in its loops and BLAS calls; the values do not depend on the thread)."""
    if _nthread(2) == 1 or mu.shape[0] < _POOLED_PSI1_ROWS:
        return _psi1(variance, l, Z, mu, S), _psi2_terms(variance, l, Z, mu, S)
    psi1 = _pool().submit(_pinned_psi1, variance, l, Z, mu, S)
    try:
        terms = _psi2_terms(variance, l, Z, mu, S)
    finally:
        Psi1_b = psi1.result()
    return Psi1_b, terms


@functools.lru_cache(maxsize=16)
def _tril(M):
    """np.tril_indices(M), read-only, made once per M (the packed order of the lower triangles)."""
    rows, cols = np.tril_indices(M)
    rows.flags.writeable = False
    cols.flags.writeable = False
    return rows, cols


def _unpack_sym(packed, M):
    out = np.empty((M, M))
    rows, cols = _tril(M)
    out[rows, cols] = packed
    out[cols, rows] = packed
    return out


# ----------------------------------------------------------------- public


def psi1(variance, lengthscales, Z, mu, S):
    """Psi1 (N, M) alone (used for the cross terms of sums).

    After :func:`psi_stats` at the same arguments on this thread, the kept
    forward pass's Psi1 (read-only; the kept pass stays for :func:`psi_gradients`).
    """
    args = (variance, lengthscales, Z, mu, S)
    fw = getattr(_LAST, "forward", None)
    if fw is not None and fw.matches(args):
        out = fw.Psi1.view()
        out.flags.writeable = False
        return out
    v, l, Zc, muc, S = _prepare(*args)
    return _psi1(v, l, Zc, muc, S)[0]


def psi_stats(variance, lengthscales, Z, mu, S):
    """(psi0: float, Psi1: (N, M), Psi2: (M, M)) for the RBF kernel.

    variance: float; lengthscales: (Q,) or () (shared); Z: (M, Q); mu, S: (N, Q).
    """
    args = (variance, lengthscales, Z, mu, S)
    _LAST.forward = None
    prepared = _prepare(*args)
    v, l, Zc, muc, S = prepared
    N, M = muc.shape[0], Zc.shape[0]
    (Psi1, b), terms = _psi1_and_terms(v, l, Zc, muc, S)
    _, c, Ut, Rt = terms
    packed, kept = _psi2_packed(c, Ut, Rt, Zc, keep=True)
    _LAST.forward = _Forward(args, prepared, Psi1, b, terms, kept)
    return N * v, Psi1.copy(), _unpack_sym(packed, M)


def psi_stats_weighted(variance, lengthscales, Z, mu, S, W):
    """(psi0: (K,), Psi1: (N, M), Psi2: (K, M, M)) with psi0[k] = sum_n W[n, k] variance and
    Psi2[k] = sum_n W[n, k] Psi2_n: K weighted sums from one pass over the points.

    W: (N, K) weights (e.g. 0/1 memberships of K row sets); the other arguments
    as in :func:`psi_stats`, whose forward cache this shares (the kept Psi2_n
    do not depend on W, so either backward pass may follow).
    """
    args = (variance, lengthscales, Z, mu, S)
    _LAST.forward = None
    prepared = _prepare(*args)
    v, l, Zc, muc, S = prepared
    M = Zc.shape[0]
    W = np.ascontiguousarray(W, dtype=np.float64)
    (Psi1, b), terms = _psi1_and_terms(v, l, Zc, muc, S)
    _, c, Ut, Rt = terms
    packed, kept = _psi2_weighted_packed(c, Ut, Rt, Zc, W, keep=True)
    _LAST.forward = _Forward(args, prepared, Psi1, b, terms, kept)
    return v * W.sum(axis=0), Psi1.copy(), _unpack_sym_many(packed, M)


def _unpack_sym_many(packed, M):
    """(K, M, M) symmetric matrices from their packed lower triangles (P, K)."""
    K = packed.shape[1]
    out = np.empty((K, M, M))
    rows, cols = _tril(M)
    out[:, rows, cols] = packed.T
    out[:, cols, rows] = packed.T
    return out


def psi_contract(variance, lengthscales, Z, mu, S, Ep):
    """(psi0_n (N,), Psi1 (N, M), T (N, K)) with T[n, k] = <Psi2_n, E_k>, each point's Psi2 contracted
    with K symmetric matrices given as Ep = :func:`packed_contraction` (E) (M(M+1)/2, K).

    Per-point statistics, not sums: what a non-Gaussian likelihood needs
    (every entry y_nd has its own marginal of f under q(x_n)).  Nothing of
    size N x M x M is stored; the cost is that of the forward pass plus
    one (B, M(M+1)/2) x (M(M+1)/2, K) GEMM per block of B points.
    """
    v, l, Zc, muc, S = _prepare(variance, lengthscales, Z, mu, S)
    (Psi1, _), (_, c, Ut, Rt) = _psi1_and_terms(v, l, Zc, muc, S)
    T = _psi2_contractions(c, Ut, Rt, Zc, np.ascontiguousarray(Ep, dtype=np.float64))
    return np.full(muc.shape[0], v), Psi1, T


def psi_gradients(dL_dpsi0, dL_dPsi1, dL_dPsi2, variance, lengthscales, Z, mu, S):
    """Gradients of L = dL_dpsi0 psi0 + sum(dL_dPsi1 Psi1) + sum(dL_dPsi2 Psi2).

    dL_dpsi0: float; dL_dPsi1: (N, M); dL_dPsi2: (M, M), need not be symmetric.
    Returns dict(variance: float, lengthscales: shape of ``lengthscales``,
    Z: (M, Q), mu: (N, Q), S: (N, Q)).
    """
    N, M = np.shape(mu)[0], np.shape(Z)[0]
    G2 = np.asarray(dL_dPsi2, dtype=np.float64)
    Gs = 0.5 * (G2 + G2.T)
    Gp = np.ascontiguousarray(Gs[_tril(M)])
    return _gradients(float(dL_dpsi0) * N, dL_dPsi1, variance, lengthscales, Z, mu, S,
                      lambda c, Ut, Rt, Zc, kept: _psi2_reductions(c, Ut, Rt, Zc, Gp, kept))


def psi_gradients_weighted(dL_dpsi0, dL_dPsi1, dL_dPsi2, variance, lengthscales, Z, mu, S, W):
    """Gradients of L = sum_k (dL_dpsi0[k] psi0[k] + sum(dL_dPsi2[k] Psi2[k])) + sum(dL_dPsi1 Psi1)
    for the weighted sums of :func:`psi_stats_weighted`.

    dL_dpsi0: (K,); dL_dPsi1: (N, M); dL_dPsi2: (K, M, M), need not be symmetric;
    W: (N, K).  Each point's cotangent sum_k W[n, k] sym(dL_dPsi2[k]) is formed
    once, then the reductions are those of :func:`psi_gradients`.  Returns the
    same dict as :func:`psi_gradients`.
    """
    M = np.shape(Z)[0]
    W = np.ascontiguousarray(W, dtype=np.float64)
    G2 = np.asarray(dL_dPsi2, dtype=np.float64)
    Gs = 0.5 * (G2 + np.swapaxes(G2, 1, 2))
    rows, cols = _tril(M)
    GpW = np.ascontiguousarray(Gs[:, rows, cols].T)
    dv0 = float(np.dot(np.asarray(dL_dpsi0, dtype=np.float64), W.sum(axis=0)))
    return _gradients(dv0, dL_dPsi1, variance, lengthscales, Z, mu, S,
                      lambda c, Ut, Rt, Zc, kept: _psi2_weighted_reductions(c, Ut, Rt, Zc, GpW, W, kept))


def _gradients(dv, dL_dPsi1, variance, lengthscales, Z, mu, S, reductions):
    """The gradient dict from dv (the psi0 part of d/dvariance), the Psi1 cotangent and
    ``reductions(c, Ut, Rt, Zc, kept)`` -> (r, H, KZ) of the Psi2 cotangent."""
    ell_shape = np.shape(lengthscales)
    ell = np.broadcast_to(np.asarray(lengthscales, dtype=np.float64), (np.shape(Z)[1],))
    fw = _take_forward((variance, lengthscales, Z, mu, S))
    v, l, Zc, muc, S = _prepare(variance, lengthscales, Z, mu, S) if fw is None else fw.prepared
    G1 = np.asarray(dL_dPsi1, dtype=np.float64)

    (Psi1, b), (a, c, Ut, Rt) = _psi1_and_terms(v, l, Zc, muc, S) if fw is None else ((fw.Psi1, fw.b), fw.terms)
    r, H, KZ = reductions(c, Ut, Rt, Zc, None if fw is None else fw.kept)

    # Psi1, with W1 = G1 * Psi1 and d = mu_n - z_m:
    #   dlogPsi1/dmu = -b d, dlogPsi1/dS = -b/2 + b^2 d^2 / 2,
    #   dlogPsi1/dl = S b / (2 l) + b^2 d^2 / 2, dlogPsi1/dz = b d.
    # Psi2: dL/dE_n[m, m'] = -T_n[m, m'] for the exponent E (module docstring), whose
    # reductions are r_n = T_n 1, H and KZ.  Both need the row sums of W1 and r against
    # [Z, Z^2, 1] (one GEMM each) and their column sums against the rows' terms (one GEMM each).
    W1 = G1 * Psi1
    N, Q = muc.shape
    Z1 = np.empty((Zc.shape[0], 2 * Q + 1))
    Z1[:, :Q] = Zc
    Z1[:, Q:2 * Q] = Zc * Zc
    Z1[:, 2 * Q] = 1.0
    WZ = W1 @ Z1  # [W1 Z, W1 Z^2, w]
    rZ = r @ Z1  # [r Z, r Z^2, t]
    dmu = np.empty((N, Q))
    dS = np.empty((N, Q))
    dl_rows = np.empty((N, Q))
    _row_gradients(b, a, muc, S, 1.0 / l, WZ, rZ, H, dmu, dS, dl_rows)
    w, t = WZ[:, 2 * Q], rZ[:, 2 * Q]
    dv += (w.sum() + 2.0 * t.sum()) / v
    dl = dl_rows.sum(axis=0) + 0.5 * w.sum() / l
    Wb = W1.T @ np.hstack([b * muc, b])  # (M, 2Q)
    ra = r.T @ np.hstack([a, a * muc])
    dZ = (Wb[:, :Q] - Zc * Wb[:, Q:]
          - 2.0 * (Zc * ((0.5 / l) * r.sum(axis=0)[:, None] + 0.5 * ra[:, :Q]) - ra[:, Q:]) - 2.0 * KZ)

    dell = dl * 2.0 * ell
    if ell_shape == ():
        dell = np.asarray(dell.sum())
    return dict(variance=float(dv), lengthscales=dell.reshape(ell_shape), Z=dZ, mu=dmu, S=dS)
