"""The in-process backend: the row sums over all rows at once (see :mod:`engine.backends`)."""
from __future__ import annotations

import numpy as np

from .. import psi
from . import _rows


class LocalBackend:
    """Row sums of the bound computed in this process; the reference other backends must equal."""

    def setup(self, Y: np.ndarray, weights: np.ndarray | None = None) -> None:
        """Keep the (N, D) centred outputs and, with missing outputs, the (N, G) group weights."""
        self.Y = np.ascontiguousarray(Y, dtype=np.float64)
        self.weights = None if weights is None else np.ascontiguousarray(weights, dtype=np.float64)

    def forward(self, kernel, Z, mu, S):
        """(psi0, P = Psi1^T Y (M, D), Psi2 (M, M)); per group with weights; S None: points."""
        return _rows.forward(self.Y, self.weights, kernel, Z, mu, S)

    def backward(self, kernel, Z, mu, S, dpsi0, dP, dPsi2) -> psi.PsiGradients:
        """Gradients of dpsi0 psi0 + <dP, Psi1^T Y> + <dPsi2, Psi2> (summed over the groups with weights)."""
        return _rows.backward(self.Y, self.weights, kernel, Z, mu, S, dpsi0, dP, dPsi2)

    def __repr__(self):
        return "LocalBackend()"
