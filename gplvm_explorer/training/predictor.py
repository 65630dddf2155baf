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

The stochastic model's explicit q(u) = N(L m, L R R^T L^T) (whitened) fits the
same mould with alpha = L^-T m and, in place of LW, the dense Rw = L^-T R:
var = k** - |L^-1 kM*|^2 + |Rw^T kM*|^2 (``StochasticBayesianGPLVM.predict``).
"""
from __future__ import annotations

import logging
from typing import NamedTuple

import numpy as np
from scipy.linalg import solve_triangular

logger = logging.getLogger(__name__)

__all__ = ["CachedPredictor", "FactorGroup"]


class FactorGroup(NamedTuple):
    """The factors of one group of outputs (see the module docstring); exactly one of LW and Rw is set."""

    cols: object  # slice or (D_g,) index array
    L: np.ndarray  # (M, M) lower-triangular
    LW: np.ndarray | None  # (M, M) lower-triangular
    alpha: np.ndarray  # (M, D_g)
    Rw: np.ndarray | None = None  # (M, M) dense


def _frozen(a):
    """A read-only float copy (None stays None)."""
    if a is None:
        return None
    out = np.array(a, dtype=float)
    out.setflags(write=False)
    return out


class CachedPredictor:
    """Predictive mean and variance at latent points from factors taken once from a model.

    Parameters
    ----------
    kernel : an engine kernel at the model's parameters (a copy; never changed here).
    Z : (M, Q) inducing inputs.
    groups : [(cols, L, LW, alpha)] or [(cols, L, LW, alpha, Rw)] per column group: cols indexes
        the outputs (a slice or an index array), L and LW are (M, M) lower-triangular, alpha is
        (M, D_g); a group with a dense Rw (M, M) has LW None and its variance term is |Rw^T k|^2.
    Y_mean : (D,) the data mean the model subtracted.
    """

    def __init__(self, kernel, Z: np.ndarray, groups: list, Y_mean: np.ndarray):
        self.kernel = kernel
        self.Z = _frozen(Z)
        self.groups = [FactorGroup(g[0], _frozen(g[1]), _frozen(g[2]), _frozen(g[3]),
                                   _frozen(g[4]) if len(g) > 4 else None) for g in groups]
        for g in self.groups:
            if (g.LW is None) == (g.Rw is None):
                raise ValueError("Expected each column group to have exactly one of LW and Rw.")
        self.Y_mean = _frozen(Y_mean)

    @property
    def latent_dim(self) -> int:
        return int(self.Z.shape[1])

    @property
    def output_dim(self) -> int:
        return int(self.Y_mean.shape[0])

    @classmethod
    def from_model(cls, model) -> "CachedPredictor | None":
        """The factors of a collapsed sparse model or the stochastic model at its current parameters;
        None for other models.

        A collapsed model last evaluated at its current parameters (a fit's snapshot) hands over
        the factors of that evaluation; otherwise this costs one pass over the data.  The
        stochastic model's factors come from its global parameters alone.
        """
        from engine.models.collapsed import CollapsedModel
        from engine.models.stochastic import StochasticBayesianGPLVM

        if type(model).predict is StochasticBayesianGPLVM.predict:
            post = model.posterior()  # the globals only: no pass over the rows, no copy of the N latents
            return cls(post.kernel, post.Z, [(slice(None), post.L, None, post.Mw, post.Rw)], model.Y_mean)
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
        for cols, L, LW, alpha, Rw in self.groups:
            a = solve_triangular(L, Ks.T, lower=True, check_finite=False)
            b = Rw.T @ Ks.T if LW is None else solve_triangular(LW, Ks.T, lower=True, check_finite=False)
            v = Kdiag - np.sum(a * a, axis=0) + np.sum(b * b, axis=0)
            mean[:, cols] = Ks @ alpha
            var[:, cols] = np.maximum(v, 0.0)[:, None]
        return mean + self.Y_mean, var
