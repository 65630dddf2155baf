"""One predictor per trained model: the Gaussian posterior of the mapping f at new latent points.

Every model whose mapping, given its trained parameters, is a Gaussian process
posterior predicts through a :class:`Predictor` (``model.predictor()``): the
GP-LVM (its training latents are the centres), the sparse and Bayesian GP-LVM
and their dynamical and missing-data variants (the inducing inputs Z, one
group of outputs per missing-data column group, Titsias & Lawrence 2010,
section 4), and the stochastic model's explicit q(u).  Per group g of outputs,
with k = k(Z, x) (M,) and k** = k(x, x):

    mean_d(x) = k^T alpha_g[:, d] + Y_mean[d]
    var(x)    = k** - |L_g^-1 k|^2 + |R_g^T k|^2          (shared by the group's outputs)

L_g = chol(Kmm + jitter I) (the exact GP-LVM: chol(K + noise I + jitter I)
over its training latents), and R_g R_g^T = Sigma_g is the covariance of the
whitened-back inducing outputs' weights: the collapsed models' W^-1 =
(Kmm + beta Psi2)^-1 = LW^-T LW^-1 (R^T k = LW^-1 k, a triangular solve),
the stochastic model's L^-T S L^-1 = Rw Rw^T (R = Rw, dense); the exact GP-LVM
has no such term.  In matrix form var = k** - k^T (Kmm^-1 - Sigma) k.

The factors are the Gaussian posterior itself, kept accessible for what
builds on it: :meth:`Predictor.latent_moments` gives f's moments (no noise,
no data mean; a likelihood maps them to the data's), :meth:`Predictor.whiten`
applies L^-1 and R^T to any columns (k's Jacobian dk/dx for the metric's
covariance term), :meth:`Predictor.covariance_correction` is Kmm^-1 - Sigma
(uncertain inputs), and the page's script evaluates the same formulas from
``groups`` (:mod:`gplvm_explorer.views.page_prediction`).

Uncertain inputs q(x*) = N(x*, diag S*) replace k and k k^T by the psi
statistics of q(x*) (:class:`engine.psi.point.PointPsi`): mean = Psi1* alpha,
var_d = psi0* - tr((Kmm^-1 - Sigma) Psi2*) + alpha_d^T Psi2* alpha_d - mean_d^2.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._threads import blas_pinned
from .bound import _unwhiten_both
from .errors import ConfigurationError, ShapeError, UnsupportedOperationError
from .linalg import chol_inverse, tri_solve
from .psi.point import PointPsi
from .validation import latent_points

__all__ = ["Predictor", "PredictorGroup"]

#: Rows per chunk in predictions at uncertain inputs (their per-row Psi2 are (chunk, M, M)).
_PREDICT_CHUNK = 256


class PredictorGroup(NamedTuple):
    """The posterior factors of one group of outputs (module docstring); arrays read-only.

    cols: slice or (D_g,) index array of the outputs; L: (M, M) lower;
    alpha: (M, D_g) mean weights; LW: (M, M) lower with Sigma = LW^-T LW^-1, and
    LB = L^-1 LW (M, M) lower, or both None; Rw: (M, M) dense with Sigma = Rw Rw^T,
    or None; noise_variance: the group's output noise 1 / beta.
    """

    cols: object
    L: np.ndarray
    alpha: np.ndarray
    LW: np.ndarray | None = None
    LB: np.ndarray | None = None
    Rw: np.ndarray | None = None
    noise_variance: float = 0.0


def _frozen(a):
    """A read-only float64 copy (None stays None)."""
    if a is None:
        return None
    out = np.array(a, dtype=np.float64)
    out.setflags(write=False)
    return out


class Predictor:
    """Predictive moments at latent points from factors taken once from a model (module docstring).

    kernel : the model's kernel at its parameters (a copy; never changed here).
    centres : (M, Q) inducing inputs Z, or the training latents of the exact GP-LVM.
    groups : [PredictorGroup] (or tuples of its fields) covering the D outputs.
    Y_mean : (D,) the data mean the model subtracted.
    inducing : True when ``centres`` are inducing inputs (the factors are O(M^2 + M D),
        independent of N, and uncertain inputs are supported); False for the exact
        GP-LVM, whose centres are its N training latents.
    """

    def __init__(self, kernel, centres, groups, Y_mean, inducing: bool = True):
        self.kernel = kernel
        self.Z = _frozen(centres)
        self.groups = []
        for g in groups:
            g = PredictorGroup(*g)
            if g.LW is not None and g.Rw is not None:
                raise ConfigurationError("Expected a group with at most one of LW and Rw.")
            self.groups.append(g._replace(L=_frozen(g.L), alpha=_frozen(g.alpha), LW=_frozen(g.LW),
                                          LB=_frozen(g.LB), Rw=_frozen(g.Rw),
                                          noise_variance=float(g.noise_variance)))
        self.Y_mean = _frozen(Y_mean)
        self.inducing = bool(inducing)

    @property
    def latent_dim(self) -> int:
        return int(self.Z.shape[1])

    @property
    def output_dim(self) -> int:
        return int(self.Y_mean.shape[0])

    @property
    def centres(self) -> np.ndarray:
        return self.Z

    # ---- the factors, for what builds on them -----------------------------------------------
    def whiten(self, group: PredictorGroup, B: np.ndarray):
        """(L^-1 B, R^T B or None) for columns B (M, r): B^T (Kmm^-1 - Sigma) B = a^T a - b^T b."""
        a = tri_solve(group.L, B)
        if group.LW is not None:
            return a, tri_solve(group.LW, B)
        if group.Rw is not None:
            return a, group.Rw.T @ B
        return a, None

    def covariance_correction(self, group: PredictorGroup) -> np.ndarray:
        """Kmm^-1 - Sigma of a group, (M, M) symmetric, whitened (no difference of two large inverses):
        the collapsed models' L^-T (I - B^-1) L^-1, the explicit q(u)'s L^-T (I - R R^T) L^-1
        (R = L^T Rw), the exact GP-LVM's (K + noise I)^-1."""
        eye = np.eye(group.L.shape[0])
        if group.LB is not None:
            return _unwhiten_both(group.L, eye - chol_inverse(group.LB))
        if group.Rw is not None:
            R = group.L.T @ group.Rw
            return _unwhiten_both(group.L, eye - R @ R.T)
        return chol_inverse(group.L)

    # ---- moments ----------------------------------------------------------------------------
    def _check(self, Xnew, Xnew_variance):
        Xnew = latent_points(Xnew, self.latent_dim, "Xnew")
        if Xnew_variance is None:
            return Xnew, None
        if not self.inducing:
            raise UnsupportedOperationError(
                "The exact GP-LVM predicts at point inputs only (its latents are points); "
                "use BayesianGPLVM for uncertain inputs.")
        S = latent_points(Xnew_variance, self.latent_dim, "Xnew_variance")
        if S.shape != Xnew.shape or np.any(S <= 0):
            raise ShapeError("Expected Xnew_variance of the same shape as Xnew with positive entries.")
        return Xnew, S

    @blas_pinned
    def latent_moments(self, Xnew, Xnew_variance=None) -> tuple[np.ndarray, np.ndarray]:
        """Mean (n, D) and variance (n, D) of f at latent points Xnew (n, Q) (or under q(x*) with
        ``Xnew_variance`` (n, Q) > 0), centred (no data mean) and without the noise."""
        Xnew, S = self._check(Xnew, Xnew_variance)
        n = Xnew.shape[0]
        mean = np.empty((n, self.output_dim))
        var = np.empty_like(mean)
        if S is None:
            Ks = self.kernel.K(Xnew, self.Z)  # (n, M)
            Kdiag = self.kernel.K_diag(Xnew)  # (n,)
            for g in self.groups:
                a, b = self.whiten(g, Ks.T)
                v = Kdiag - np.sum(a * a, axis=0)
                if b is not None:
                    v = v + np.sum(b * b, axis=0)
                mean[:, g.cols] = Ks @ g.alpha
                var[:, g.cols] = np.maximum(v, 0.0)[:, None]
            return mean, var
        point_psi = PointPsi(self.kernel, self.Z)
        G = [self.covariance_correction(g) for g in self.groups]
        for lo in range(0, n, _PREDICT_CHUNK):  # per-row Psi2 (r, M, M) for a chunk of rows
            hi = min(n, lo + _PREDICT_CHUNK)
            psi0_r, Psi1_r, Psi2_r = point_psi.forward(Xnew[lo:hi], S[lo:hi])
            for g, G_g in zip(self.groups, G):
                shared = psi0_r - np.einsum("jk,rjk->r", G_g, Psi2_r)  # psi0* - tr((Kmm^-1 - Sigma) Psi2*)
                # spread of the mean under q(x*): alpha_d^T (Psi2* - Psi1*^T Psi1*) alpha_d
                a_Psi2_a = np.einsum("md,rmk,kd->rd", g.alpha, Psi2_r, g.alpha)
                m_r = Psi1_r @ g.alpha
                mean[lo:hi, g.cols] = m_r
                var[lo:hi, g.cols] = np.maximum(shared[:, None] + a_Psi2_a - m_r * m_r, 0.0)
        return mean, var

    def predict(self, Xnew, Xnew_variance=None, include_noise=False) -> tuple[np.ndarray, np.ndarray]:
        """Predictive mean (n, D) in data units and variance (n, D) at latent points Xnew (n, Q);
        ``include_noise`` adds each group's noise variance (module docstring)."""
        mean, var = self.latent_moments(Xnew, Xnew_variance)
        if include_noise:
            for g in self.groups:
                var[:, g.cols] += g.noise_variance
        return mean + self.Y_mean, var

    def __repr__(self):
        M, Q = self.Z.shape
        return (f"Predictor(kernel={self.kernel!r}, M={M}, Q={Q}, D={self.output_dim}, groups={len(self.groups)}, "
                f"inducing={self.inducing})")
