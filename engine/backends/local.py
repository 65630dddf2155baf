"""The in-process backend: the row sums over fixed row chunks, added in chunk order (see :mod:`engine.backends`)."""
from __future__ import annotations

import numpy as np

from .. import psi
from .._cancel import checkpoint
from .._threads import blas_pinned
from ..validation import integer
from . import _rows


class LocalBackend:
    """Row sums of the bound computed in this process; the reference other backends must equal.

    ``chunks``: rows per chunk (None: ``engine.backends.ROW_CHUNK``).  Each chunk's
    statistics are computed on their own and the chunks' sums added in chunk
    order (:func:`engine.backends._rows.sum_forward`), exactly as a
    :class:`~engine.DaskBackend` with the same ``chunks`` adds its workers'
    results: the two give the same bits.  A chunk keeps its psi forward pass for
    its backward pass (as the psi module keeps one per thread).
    """

    def __init__(self, chunks=None):
        self.chunks = None if chunks is None else integer(chunks, "chunks (rows per chunk, or None)")
        self._bounds = None
        self._kept = None

    def setup(self, Y: np.ndarray, weights: np.ndarray | None = None) -> None:
        """Keep the (N, D) centred outputs and, with missing outputs, the (N, G) group weights."""
        self.Y = np.ascontiguousarray(Y, dtype=np.float64)
        self.weights = None if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
        self._bounds = _rows.chunk_bounds(self.Y.shape[0], self.chunks)
        self._kept = [None] * len(self._bounds)

    @property
    def num_chunks(self) -> int:
        return 0 if self._bounds is None else len(self._bounds)

    def _block(self, a, b):
        return self.Y[a:b], None if self.weights is None else self.weights[a:b]

    @blas_pinned
    def forward(self, kernel, Z, mu, S):
        """(psi0, P = Psi1^T Y (M, D), Psi2 (M, M)); per group with weights; S None: points."""
        parts = []
        for i, (a, b) in enumerate(self._bounds):
            if i:
                checkpoint()  # a fit's stop ends an evaluation between two chunks
            psi.restore_forward(None)
            parts.append(_rows.forward(*self._block(a, b), kernel, Z, mu[a:b], None if S is None else S[a:b]))
            self._kept[i] = psi.take_forward()
        return _rows.sum_forward(parts)

    @blas_pinned
    def backward(self, kernel, Z, mu, S, dpsi0, dP, dPsi2) -> psi.PsiGradients:
        """Gradients of dpsi0 psi0 + <dP, Psi1^T Y> + <dPsi2, Psi2> (summed over the groups with weights)."""
        parts = []
        try:
            for i, (a, b) in enumerate(self._bounds):
                if i:
                    checkpoint()
                psi.restore_forward(self._kept[i])
                parts.append(_rows.backward(*self._block(a, b), kernel, Z, mu[a:b], None if S is None else S[a:b],
                                            dpsi0, dP, dPsi2))
        finally:
            psi.restore_forward(None)
        return _rows.sum_backward(parts)

    def __getstate__(self):
        """Pickled without the kept forward passes (O(N M^2) floats at most, rebuilt by the next evaluation)."""
        state = dict(self.__dict__)
        state["_kept"] = None if self._bounds is None else [None] * len(self._bounds)
        return state

    def __repr__(self):
        return f"LocalBackend(chunks={self.chunks})"
