"""Compiled O(N N2 Q) loops shared by the stationary kernels (private).

Every function here takes float64 C-contiguous arrays that the public wrappers
in :mod:`engine.kernels` have already validated.  Inputs are passed
*transposed and scaled*: ``XsT[q, n] = X[n, q] / lengthscales[q]``, shape
(Q, N), so the innermost loop runs over contiguous memory along N2 and LLVM
vectorises it.

Squared distances are summed from differences, never as |x|^2 + |x'|^2 - 2 x.x',
so they are exactly zero on the diagonal of K(X), never negative, and K(X) is
exactly symmetric.

The transcendental part (exp, sqrt) is left to numpy, whose SIMD ``exp`` is
several times faster than the scalar libm call numba emits inside a loop.
"""
import numpy as np

from ._jit import JIT, njit

#: JIT flags without the "no NaN / no inf" assumptions of ``fastmath=True``:
#: reassociation and FMA contraction are kept (they let the row reductions
#: vectorise), but a NaN in an input still propagates to the output instead of
#: being optimised into an arbitrary value.
_FLAGS = dict(JIT, fastmath={"nsz", "arcp", "contract", "reassoc"})


@njit(**_FLAGS)
def _scaled_sqdist(XsT, X2sT, scale, offset, out, root=False):
    """out[i, j] = offset + scale * r2[i, j], r2 = sum_q (XsT[q, i] - X2sT[q, j])**2.

    With ``root``, sqrt(r2) replaces r2 (the scaled distance r).
    XsT: (Q, N), X2sT: (Q, N2), out: (N, N2), written in place.
    """
    Q, N = XsT.shape
    N2 = X2sT.shape[1]
    for i in range(N):
        row = out[i]
        for j in range(N2):
            row[j] = 0.0
        for q in range(Q):
            a = XsT[q, i]
            x2q = X2sT[q]
            for j in range(N2):
                d = a - x2q[j]
                row[j] += d * d
        if root:
            for j in range(N2):
                row[j] = offset + scale * np.sqrt(row[j])
        else:
            for j in range(N2):
                row[j] = offset + scale * row[j]


@njit(**_FLAGS)
def _matern_profile(R, E, five_halves):
    """Matérn profile in place, (N, N2) arrays.

    On entry R = r and E = exp(-sqrt(2 nu) r); on exit R = f(r) (f(0) = 1) and
    E = df/d(r^2), which is finite at r = 0:
    nu = 3/2: f = (1 + sqrt3 r) e,           df/dr2 = -3/2 e;
    nu = 5/2: f = (1 + sqrt5 r + 5/3 r^2) e,  df/dr2 = -5/6 (1 + sqrt5 r) e.
    """
    N, N2 = R.shape
    if five_halves:
        c = np.sqrt(5.0)
        for i in range(N):
            r_row = R[i]
            e_row = E[i]
            for j in range(N2):
                r = r_row[j]
                e = e_row[j]
                poly = 1.0 + c * r
                r_row[j] = (poly + (5.0 / 3.0) * r * r) * e
                e_row[j] = (-5.0 / 6.0) * poly * e
    else:
        c = np.sqrt(3.0)
        for i in range(N):
            r_row = R[i]
            e_row = E[i]
            for j in range(N2):
                r = r_row[j]
                e = e_row[j]
                r_row[j] = (1.0 + c * r) * e
                e_row[j] = -1.5 * e


@njit(**_FLAGS)
def _sqdist_grads(A, B, XsT, X2sT, symmetric):
    """Contract W = A * B (elementwise, (N, N2)) against scaled squared distances.

    With d[i, j, q] = XsT[q, i] - X2sT[q, j] and r2[i, j] = sum_q d**2, returns

    - ``total``: sum_ij W_ij (a float);
    - ``wsq``: (Q,), wsq[q] = sum_ij W_ij d[i, j, q]**2;
    - ``gXsT``: (Q, N), the gradient of sum_ij W_ij r2_ij w.r.t. XsT with W held
      fixed: 2 sum_j W_ij d[i, j, q] (first argument slot), and, when
      ``symmetric`` (X2 is X, so N2 == N), also -2 sum_i W_ij d[i, j, q]
      accumulated at j (second slot).
    """
    Q, N = XsT.shape
    N2 = X2sT.shape[1]
    total = 0.0
    wsq = np.zeros(Q)
    gXsT = np.zeros((Q, N))
    w = np.empty(N2)
    for i in range(N):
        a_row = A[i]
        b_row = B[i]
        for j in range(N2):
            w[j] = a_row[j] * b_row[j]
        # The reductions are loops that only read: a loop that also stores is vectorised behind
        # a run-time check that its arrays are far enough apart, and takes the scalar path (another
        # summation order, other last bits) when the heap happens to place them close together.
        s = 0.0
        for j in range(N2):
            s += w[j]
        total += s
        for q in range(Q):
            a = XsT[q, i]
            x2q = X2sT[q]
            acc = 0.0
            accsq = 0.0
            for j in range(N2):
                t = w[j] * (a - x2q[j])
                acc += t
                accsq += t * (a - x2q[j])
            if symmetric:
                gq = gXsT[q]
                for j in range(N2):
                    gq[j] -= w[j] * (a - x2q[j])
            gXsT[q, i] += acc
            wsq[q] += accsq
    for q in range(Q):
        for n in range(N):
            gXsT[q, n] *= 2.0
    return total, wsq, gXsT


@njit(**_FLAGS)
def _scaled_differences(dk, X, X2, dims, weights, out):
    """out[n, a, m] = weights[a] * dk[n, m] * (X[n, dims[a]] - X2[m, dims[a]]), written in place.

    dk: (N, N2); X: (N, Q); X2: (N2, Q); dims: (q,) int64; weights: (q,); out: (N, q, N2).
    A stationary kernel's derivatives w.r.t. its first argument, with weights 2 / l^2.
    """
    N, N2 = dk.shape
    for n in range(N):
        for a in range(dims.size):
            q = dims[a]
            x = X[n, q]
            w = weights[a]
            row = out[n, a]
            dkn = dk[n]
            for m in range(N2):
                row[m] = w * dkn[m] * (x - X2[m, q])


def warmup():
    """Compile (or load from the on-disk cache) every loop on tiny inputs."""
    XT = np.zeros((1, 2))
    out = np.empty((2, 2))
    _scaled_sqdist(XT, XT, 1.0, 0.0, out)
    _scaled_sqdist(XT, XT, 1.0, 0.0, out, True)
    _matern_profile(out, out.copy(), True)
    _sqdist_grads(out, out, XT, XT, True)
    _scaled_differences(out, np.zeros((2, 1)), np.zeros((2, 1)), np.zeros(1, dtype=np.int64), np.ones(1),
                        np.empty((2, 1, 2)))
