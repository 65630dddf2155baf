"""Compiled loops of the latent geometry (private; see :mod:`engine.geometry`)."""
import numpy as np

from ._jit import PJIT, njit, prange


@njit(**PJIT)
def _pair_products(T, dK, out):
    """out[n, a, b] += sum_m T[n, a, m] dK[n, b, m] for b >= a, mirrored below the diagonal.

    T, dK: (n, q, M) C-contiguous; out: (n, q, q).  With T = dK C this is dK C dK^T per point.
    """
    n, q, M = T.shape
    for i in prange(n):
        for a in range(q):
            Ta = T[i, a]
            for b in range(a, q):
                Db = dK[i, b]
                acc = 0.0
                for m in range(M):
                    acc += Ta[m] * Db[m]
                out[i, a, b] += acc
                if b != a:
                    out[i, b, a] += acc


def warmup():
    """Compile (or load from the on-disk cache) the loops on tiny inputs."""
    A = np.zeros((2, 2, 3))
    _pair_products(A, A, np.zeros((2, 2, 2)))
