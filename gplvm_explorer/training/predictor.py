"""Point predictions of a frozen model from cached factors, without the training data.

``model.predict`` of a collapsed sparse model (sparse and Bayesian GP-LVM,
their dynamical and missing-data variants) reads the kernel and the inducing
inputs Z from the model's parameter vector, which also holds the N x Q latent
means and variances: every call unpacks O(N Q) numbers to predict one point.
A :class:`CachedPredictor` takes what prediction needs once -- the kernel, Z,
the data mean and, per column group, the Cholesky factors of q(u) (L, LW) and
alpha = beta W^-1 Psi1^T Y -- and then predicts at n points in
O(n (M^2 D_g + M Q)) without touching the model again.

The formulas are those of ``CollapsedModel.predict`` for point inputs
(Titsias & Lawrence 2010, section 4):

    mean = k*M alpha + Y_mean,
    var  = k** - |L^-1 kM*|^2 + |LW^-1 kM*|^2   (the same for every output of a group).
"""
from __future__ import annotations

import logging

import numpy as np
from scipy.linalg import solve_triangular

logger = logging.getLogger(__name__)

__all__ = ["CachedPredictor"]


class CachedPredictor:
    """Predictive mean and variance at latent points from factors taken once from a model.

    Parameters
    ----------
    kernel : an engine kernel at the model's parameters (a copy; never changed here).
    Z : (M, Q) inducing inputs.
    groups : [(cols, L, LW, alpha)] per column group: cols indexes the outputs
        (a slice or an index array), L and LW are (M, M) lower-triangular, alpha is (M, D_g).
    Y_mean : (D,) the data mean the model subtracted.
    """

    def __init__(self, kernel, Z: np.ndarray, groups: list, Y_mean: np.ndarray):
        self.kernel = kernel
        self.Z = np.array(Z, dtype=float)
        self.groups = [(cols, np.array(L, dtype=float), np.array(LW, dtype=float), np.array(alpha, dtype=float))
                       for cols, L, LW, alpha in groups]
        self.Y_mean = np.array(Y_mean, dtype=float)
        for arr in (self.Z, self.Y_mean, *(a for g in self.groups for a in g[1:])):
            arr.setflags(write=False)

    @property
    def latent_dim(self) -> int:
        return int(self.Z.shape[1])

    @property
    def output_dim(self) -> int:
        return int(self.Y_mean.shape[0])

    @classmethod
    def from_model(cls, model) -> "CachedPredictor | None":
        """The factors of a collapsed sparse model at its current parameters; None for other models.

        Costs one pass over the data (the posterior of q(u)), done once per frozen model.
        """
        from engine.models.collapsed import CollapsedModel

        # a model with its own predict (e.g. a model with extra inputs) keeps it
        if not isinstance(model, CollapsedModel) or type(model).predict is not CollapsedModel.predict:
            return None
        posteriors = model.posteriors()
        values = model.parameters
        kernel = model.kernel_at(values)
        groups = [(cols, post.L, post.LW, post.alpha) for cols, post in posteriors]
        return cls(kernel, values["Z"], groups, model.Y_mean)

    def predict(self, Xnew) -> tuple[np.ndarray, np.ndarray]:
        """Mean (n, D) in data units and variance (n, D) at latent points Xnew (n, Q); noise not included."""
        Xnew = np.ascontiguousarray(np.atleast_2d(np.asarray(Xnew, dtype=float)))
        if Xnew.ndim != 2 or Xnew.shape[1] != self.latent_dim:
            raise ValueError(f"Expected points with {self.latent_dim} columns, got shape {Xnew.shape} instead.")
        if not np.all(np.isfinite(Xnew)):
            raise ValueError("Expected finite latent points, got NaN or infinite values instead.")
        Ks = self.kernel.K(Xnew, self.Z)  # (n, M)
        Kdiag = self.kernel.K_diag(Xnew)  # (n,)
        n = Xnew.shape[0]
        mean = np.empty((n, self.output_dim))
        var = np.empty_like(mean)
        for cols, L, LW, alpha in self.groups:
            a = solve_triangular(L, Ks.T, lower=True, check_finite=False)
            b = solve_triangular(LW, Ks.T, lower=True, check_finite=False)
            v = Kdiag - np.sum(a * a, axis=0) + np.sum(b * b, axis=0)
            mean[:, cols] = Ks @ alpha
            var[:, cols] = np.maximum(v, 0.0)[:, None]
        return mean + self.Y_mean, var
