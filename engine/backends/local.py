"""The in-process backend: psi statistics over all rows at once (see :mod:`engine.backends`)."""
from __future__ import annotations

import numpy as np

from .. import psi


class LocalBackend:
    """Row sums of the bound computed in this process; the reference other backends must equal."""

    def setup(self, Y: np.ndarray) -> None:
        """Keep the (N, D) centred outputs."""
        self.Y = np.ascontiguousarray(Y, dtype=np.float64)

    def forward(self, kernel, Z, mu, S):
        """(psi0, P = Psi1^T Y (M, D), Psi2 (M, M))."""
        stats = psi.compute(kernel, Z, mu, S)
        return stats.psi0, stats.Psi1.T @ self.Y, stats.Psi2

    def backward(self, kernel, Z, mu, S, dpsi0, dP, dPsi2) -> psi.PsiGradients:
        """Gradients of dpsi0 psi0 + <dP, Psi1^T Y> + <dPsi2, Psi2>."""
        return psi.gradients(kernel, Z, mu, S, dpsi0, self.Y @ dP.T, dPsi2)

    def __repr__(self):
        return "LocalBackend()"
