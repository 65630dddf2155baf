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

where c, U, R come from BLAS, so the O(N M^2 Q) loop is one FMA per term.
The compiled loops run over blocks of ``_BLOCK`` data points laid out along
the fastest axis (every inner loop is a contiguous, vectorised loop of fixed
length; N is padded with points that contribute exactly 0), visit only
m' <= m (Psi2 is symmetric), exponentiate a whole row of the block at once
with the vectorisable exp of :mod:`._exp`, and unroll by four where a loop
would otherwise load and store its accumulator once per FMA.  Nothing of
size N x M x M is ever stored.

Threads: the blocks are split into ``numba.get_num_threads()`` shares, each
with its own accumulators (summed at the end, no races), run by a small
thread pool; the compiled functions release the GIL.  This replaced
``parallel=True``: under the "omp" layer, waiting OpenMP threads spin, and on
a machine that also runs the web server, other sessions or BLAS the parallel
region was several times slower than this pool (N=1000, M=50, Q=10 on a
busy two-core machine: ~90 ms against ~12 ms for the forward pass).  It
also keeps the cold compile near 10 s instead of 30-40 s.

The backward pass recomputes the exponentials of the forward pass (cheaper
than storing N M^2 / 2 numbers) and forms, per data point, Y_n = T_n [Z, 1]
with T_n = sym(dL_dPsi2) * Psi2_n; every gradient follows from Y_n through
O(N M Q) BLAS work (see :func:`psi_gradients`).

The statistics are invariant to translating mu and Z together; both are
centred on the mean of Z first, which keeps the expanded exponent free of
cancellation for far-from-origin inputs (the gradients are unchanged).
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from .._jit import JIT, njit
from ._exp import _exp_inplace

#: Parameter names, in the order the array functions take them.
PARAMS = ("variance", "lengthscales")

#: Psi1 depends on x: a cross term with another x-dependent kernel is not
#: Psi1-separable (see :mod:`.sum`).
CROSS = None

#: Data points per block of the compiled loops (a multiple of the SIMD width).
_BLOCK = 64


# ----------------------------------------------------------------- compiled


@njit(**JIT)
def _row_exponents(Ub, W, Z, base, m, E):
    """E[m2, :] = base - Ub[m2] - sum_q W[q] z_m2q for m2 <= m (one block of points).

    Ub: (M, B); W: (Q, B) = R^T[:, block] * z_m; Z: (M, Q); base: (B,); E: (M, B).
    The q loop is unrolled by four so each pass over E does four FMAs.
    """
    Q = W.shape[0]
    Q4 = Q - Q % 4
    for m2 in range(m + 1):
        for i in range(_BLOCK):
            E[m2, i] = base[i] - Ub[m2, i]
        for q in range(0, Q4, 4):
            z0 = Z[m2, q]
            z1 = Z[m2, q + 1]
            z2 = Z[m2, q + 2]
            z3 = Z[m2, q + 3]
            for i in range(_BLOCK):
                E[m2, i] -= (W[q, i] * z0 + W[q + 1, i] * z1) + (W[q + 2, i] * z2 + W[q + 3, i] * z3)
        for q in range(Q4, Q):
            zq = Z[m2, q]
            for i in range(_BLOCK):
                E[m2, i] -= W[q, i] * zq


@njit(**JIT)
def _row_psi2(c, Ut, Rt, Z, n0, m, W, base, E, ibuf, fbuf):
    """E[m2, i] <- Psi2_{n0+i}[m, m2] for m2 <= m and the block of points at n0."""
    # slices, so that every index below is a plain loop counter (no
    # negative-index wrap-around checks in the vectorised loops)
    Q = Rt.shape[0]
    cb = c[n0:n0 + _BLOCK]
    Ub = Ut[:, n0:n0 + _BLOCK]
    Rb = Rt[:, n0:n0 + _BLOCK]
    for q in range(Q):
        zq = Z[m, q]
        for i in range(_BLOCK):
            W[q, i] = Rb[q, i] * zq
    for i in range(_BLOCK):
        base[i] = -(cb[i] + Ub[m, i])
    _row_exponents(Ub, W, Z, base, m, E)
    _exp_inplace(E.reshape(E.size), ibuf, fbuf, (m + 1) * _BLOCK)


@njit(**JIT)
def _psi2_forward_blocks(c, Ut, Rt, Z, b_lo, b_hi, acc):
    """acc[p] += sum over the points of blocks b_lo..b_hi-1 of Psi2_n (packed).

    c: (Npad,); Ut: (M, Npad) = U^T; Rt: (Q, Npad) = R^T (Npad a multiple of
    the block size; padding has c = 1e300, so it contributes exactly 0);
    Z: (M, Q); acc: (M(M+1)/2,), p = m(m+1)/2 + m' for m' <= m.
    """
    M = Ut.shape[0]
    Q = Rt.shape[0]
    E = np.empty((M, _BLOCK))
    W = np.empty((Q, _BLOCK))
    base = np.empty(_BLOCK)
    ibuf = np.empty(M * _BLOCK, np.int64)
    fbuf = ibuf.view(np.float64)
    for b in range(b_lo, b_hi):
        n0 = b * _BLOCK
        for m in range(M):
            _row_psi2(c, Ut, Rt, Z, n0, m, W, base, E, ibuf, fbuf)
            p0 = m * (m + 1) // 2
            for m2 in range(m + 1):
                s = 0.0
                for i in range(_BLOCK):
                    s += E[m2, i]
                acc[p0 + m2] += s


@njit(**JIT)
def _accumulate_row(Ym, E, Z, m):
    """Ym[:Q] += sum_{m2 <= m} E[m2] z_m2q and Ym[Q] += sum_{m2 <= m} E[m2], four m2 per pass.

    Ym: (Q + 1, B); E: (M, B), row m of T_n for the block; Z: (M, Q).
    """
    Q = Z.shape[1]
    m4 = (m + 1) - (m + 1) % 4
    for q in range(Q):
        for m2 in range(0, m4, 4):
            z0 = Z[m2, q]
            z1 = Z[m2 + 1, q]
            z2 = Z[m2 + 2, q]
            z3 = Z[m2 + 3, q]
            for i in range(_BLOCK):
                Ym[q, i] += (E[m2, i] * z0 + E[m2 + 1, i] * z1) + (E[m2 + 2, i] * z2 + E[m2 + 3, i] * z3)
        for m2 in range(m4, m + 1):
            zq = Z[m2, q]
            for i in range(_BLOCK):
                Ym[q, i] += E[m2, i] * zq
    for m2 in range(0, m4, 4):
        for i in range(_BLOCK):
            Ym[Q, i] += (E[m2, i] + E[m2 + 1, i]) + (E[m2 + 2, i] + E[m2 + 3, i])
    for m2 in range(m4, m + 1):
        for i in range(_BLOCK):
            Ym[Q, i] += E[m2, i]


@njit(**JIT)
def _accumulate_mirror(Y, E, Z, m, lo, hi):
    """Y[m2, :Q] += E[m2] z_mq and Y[m2, Q] += E[m2] for lo <= m2 < hi (the T_n[m2, m] half)."""
    Q = Z.shape[1]
    for m2 in range(lo, hi):
        Y2 = Y[m2]
        for q in range(Q):
            zq = Z[m, q]
            for i in range(_BLOCK):
                Y2[q, i] += E[m2, i] * zq
        for i in range(_BLOCK):
            Y2[Q, i] += E[m2, i]


@njit(**JIT)
def _psi2_backward_blocks(c, Ut, Rt, Z, Gp, b_lo, b_hi, r, H, KZ):
    """Reductions of T_n = sym(dL_dPsi2) * Psi2_n for the points of blocks b_lo..b_hi-1.

    c, Ut, Rt, Z: as in :func:`_psi2_forward_blocks`; Gp: (M(M+1)/2,) packed
    lower triangle of sym(dL_dPsi2).  With Y_n = T_n Z (M, Q) and
    r_n = T_n 1 (M,), writes r[n] (rows of (Npad, M)), H[n, q] = sum_m z_mq Y_n[m, q]
    (rows of (Npad, Q)) and adds KZ[m, q] += sum_n R[n, q] Y_n[m, q] ((M, Q)).

    Only m2 <= m is exponentiated; T_n's other half is added by mirroring.
    Rows m are taken four at a time so the mirror pass does four FMAs per
    load and store of Y.
    """
    M = Ut.shape[0]
    Q = Rt.shape[0]
    E4 = np.empty((4, M, _BLOCK))
    W = np.empty((Q, _BLOCK))
    base = np.empty(_BLOCK)
    ibuf = np.empty(M * _BLOCK, np.int64)
    fbuf = ibuf.view(np.float64)
    Y = np.empty((M, Q + 1, _BLOCK))  # Y[m, :Q] = (T_n Z)[m], Y[m, Q] = (T_n 1)[m]
    for b in range(b_lo, b_hi):
        n0 = b * _BLOCK
        Y[:] = 0.0
        for m0 in range(0, M, 4):
            G = min(4, M - m0)
            for g in range(G):
                m = m0 + g
                E = E4[g]
                _row_psi2(c, Ut, Rt, Z, n0, m, W, base, E, ibuf, fbuf)
                p0 = m * (m + 1) // 2
                for m2 in range(m + 1):
                    gp = Gp[p0 + m2]
                    for i in range(_BLOCK):
                        E[m2, i] *= gp
                _accumulate_row(Y[m], E, Z, m)
            # mirror half for m2 < m0, all rows of the group at once
            if G == 4:
                E0 = E4[0]
                E1 = E4[1]
                E2 = E4[2]
                E3 = E4[3]
                for m2 in range(m0):
                    Y2 = Y[m2]
                    for q in range(Q):
                        za = Z[m0, q]
                        zb = Z[m0 + 1, q]
                        zc = Z[m0 + 2, q]
                        zd = Z[m0 + 3, q]
                        for i in range(_BLOCK):
                            Y2[q, i] += (E0[m2, i] * za + E1[m2, i] * zb) + (E2[m2, i] * zc + E3[m2, i] * zd)
                    for i in range(_BLOCK):
                        Y2[Q, i] += (E0[m2, i] + E1[m2, i]) + (E2[m2, i] + E3[m2, i])
            else:
                for g in range(G):
                    _accumulate_mirror(Y, E4[g], Z, m0 + g, 0, m0)
            # mirror half inside the group: m0 <= m2 < m
            for g in range(1, G):
                _accumulate_mirror(Y, E4[g], Z, m0 + g, m0, m0 + g)
        for i in range(_BLOCK):
            n = n0 + i
            for m in range(M):
                r[n, m] = Y[m, Q, i]
            for q in range(Q):
                h = 0.0
                for m in range(M):
                    h += Z[m, q] * Y[m, q, i]
                H[n, q] = h
        Rb = Rt[:, n0:n0 + _BLOCK]
        for m in range(M):
            for q in range(Q):
                k = 0.0
                for i in range(_BLOCK):
                    k += Rb[q, i] * Y[m, q, i]
                KZ[m, q] += k


def _nthread(nblock):
    """Threads worth using: numba's thread count, at most one per block of points."""
    return max(1, min(numba.get_num_threads(), nblock))


_POOL = None
_POOL_LOCK = threading.Lock()


def _pool():
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=max(1, numba.config.NUMBA_NUM_THREADS - 1), thread_name_prefix="psi")
        return _POOL


def _run_shares(fn, nblock, args_of_share):
    """Run fn(*args_of_share(t, b_lo, b_hi)) for the shares t of range(nblock).

    The compiled functions release the GIL, so shares run in parallel on a
    small thread pool (the caller runs share 0 itself).  Waiting threads
    sleep instead of spinning, unlike an OpenMP barrier: on a machine also
    running the web server, another training session or BLAS, this was
    several times faster than ``parallel=True`` under the "omp" layer.
    """
    nthread = _nthread(nblock)
    shares = [(t, t * nblock // nthread, (t + 1) * nblock // nthread) for t in range(nthread)]
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


def _psi2_packed(c, Ut, Rt, Z):
    """Packed lower triangle (M(M+1)/2,) of Psi2 = sum_n Psi2_n."""
    c, Ut, Rt = _pad(c, Ut, Rt)
    nblock = c.shape[0] // _BLOCK
    M = Z.shape[0]
    acc = np.zeros((_nthread(nblock), M * (M + 1) // 2))
    _run_shares(_psi2_forward_blocks, nblock, lambda t, lo, hi: (c, Ut, Rt, Z, lo, hi, acc[t]))
    return acc.sum(axis=0)


def _psi2_reductions(c, Ut, Rt, Z, Gp):
    """(r (N, M), H (N, Q), KZ (M, Q)); see :func:`_psi2_backward_blocks`."""
    N = c.shape[0]
    c, Ut, Rt = _pad(c, Ut, Rt)
    M, Npad = Ut.shape
    Q = Rt.shape[0]
    r = np.empty((Npad, M))
    H = np.empty((Npad, Q))
    nblock = Npad // _BLOCK
    KZ = np.zeros((_nthread(nblock), M, Q))
    _run_shares(_psi2_backward_blocks, nblock, lambda t, lo, hi: (c, Ut, Rt, Z, Gp, lo, hi, r, H, KZ[t]))
    return r[:N], H[:N], KZ.sum(axis=0)


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


def _unpack_sym(packed, M):
    out = np.empty((M, M))
    rows, cols = np.tril_indices(M)
    out[rows, cols] = packed
    out[cols, rows] = packed
    return out


# ----------------------------------------------------------------- public


def psi1(variance, lengthscales, Z, mu, S):
    """Psi1 (N, M) alone (used for the cross terms of sums)."""
    v, l, Zc, muc, S = _prepare(variance, lengthscales, Z, mu, S)
    return _psi1(v, l, Zc, muc, S)[0]


def psi_stats(variance, lengthscales, Z, mu, S):
    """(psi0: float, Psi1: (N, M), Psi2: (M, M)) for the RBF kernel.

    variance: float; lengthscales: (Q,) or () (shared); Z: (M, Q); mu, S: (N, Q).
    """
    v, l, Zc, muc, S = _prepare(variance, lengthscales, Z, mu, S)
    N, M = muc.shape[0], Zc.shape[0]
    Psi1, _ = _psi1(v, l, Zc, muc, S)
    _, c, Ut, Rt = _psi2_terms(v, l, Zc, muc, S)
    Psi2 = _unpack_sym(_psi2_packed(c, Ut, Rt, Zc), M)
    return N * v, Psi1, Psi2


def psi_gradients(dL_dpsi0, dL_dPsi1, dL_dPsi2, variance, lengthscales, Z, mu, S):
    """Gradients of L = dL_dpsi0 psi0 + sum(dL_dPsi1 Psi1) + sum(dL_dPsi2 Psi2).

    dL_dpsi0: float; dL_dPsi1: (N, M); dL_dPsi2: (M, M), need not be symmetric.
    Returns dict(variance: float, lengthscales: shape of ``lengthscales``,
    Z: (M, Q), mu: (N, Q), S: (N, Q)).
    """
    ell_shape = np.shape(lengthscales)
    ell = np.broadcast_to(np.asarray(lengthscales, dtype=np.float64), (np.shape(Z)[1],))
    v, l, Zc, muc, S = _prepare(variance, lengthscales, Z, mu, S)
    N, M = muc.shape[0], Zc.shape[0]
    G1 = np.asarray(dL_dPsi1, dtype=np.float64)
    G2 = np.asarray(dL_dPsi2, dtype=np.float64)

    # psi0 = N variance
    dv = float(dL_dpsi0) * N

    # Psi1, with W1 = G1 * Psi1 and d = mu_n - z_m:
    #   dlogPsi1/dmu = -b d, dlogPsi1/dS = -b/2 + b^2 d^2 / 2,
    #   dlogPsi1/dl = S b / (2 l) + b^2 d^2 / 2, dlogPsi1/dz = b d.
    Psi1, b = _psi1(v, l, Zc, muc, S)
    W1 = G1 * Psi1
    w = W1.sum(axis=1)
    WZ = W1 @ Zc
    WZ2 = W1 @ (Zc * Zc)
    dv += w.sum() / v
    dmu = -b * (muc * w[:, None] - WZ)
    dS = -0.5 * b * w[:, None] + 0.5 * b * b * (muc * muc * w[:, None] - 2.0 * muc * WZ + WZ2)
    dl = dS.sum(axis=0) + 0.5 * w.sum() / l
    dZ = W1.T @ (b * muc) - Zc * (W1.T @ b)

    # Psi2: dL/dE_n[m, m'] = -T_n[m, m'] for the exponent E (module docstring).
    a, c, Ut, Rt = _psi2_terms(v, l, Zc, muc, S)
    Gs = 0.5 * (G2 + G2.T)
    Gp = np.ascontiguousarray(Gs[np.tril_indices(M)])
    r, H, KZ = _psi2_reductions(c, Ut, Rt, Zc, Gp)
    t = r.sum(axis=1)  # (N,)  sum_mm' T_n
    rZ = r @ Zc  # (N, Q)
    rZ2 = r @ (Zc * Zc)
    tc = t[:, None]
    aa = a * a
    dv += 2.0 * t.sum() / v
    dmu += -2.0 * a * (tc * muc - rZ)
    dS += -tc * (a - 2.0 * aa * muc * muc) + aa * (rZ2 - 4.0 * muc * rZ + H)
    dl += (
        np.sum(tc * (S * a / l + aa * muc * muc) + 0.5 * aa * rZ2 - 2.0 * aa * muc * rZ + 0.5 * aa * H, axis=0)
        + (0.5 / (l * l)) * (rZ2.sum(axis=0) - H.sum(axis=0))
    )
    dZ += -2.0 * (Zc * ((0.5 / l) * r.sum(axis=0)[:, None] + 0.5 * (r.T @ a)) - r.T @ (a * muc)) - 2.0 * KZ

    dell = dl * 2.0 * ell
    if ell_shape == ():
        dell = np.asarray(dell.sum())
    return dict(variance=float(dv), lengthscales=dell.reshape(ell_shape), Z=dZ, mu=dmu, S=dS)
