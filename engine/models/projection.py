"""Per-row projection problems the models hand to :func:`engine.infer.infer_latent`.

Two shapes of problem (the protocol is in :mod:`engine.infer`):

* :class:`QxProjection` -- a Gaussian q(x*_n) = N(mu*, diag S*) per new row,
  theta = [mu*, unconstrained S*] (2Q,), maximising the sum of the model's
  data terms (one per view for MRD; the rows' share of the bound) minus one
  KL(q(x*_n) || N(0, I)).  A data term is an object with
  ``value_and_grad(rows, mu, S, with_grad) -> (value (r,), dmu (r, Q), dS (r, Q))``
  (gradients w.r.t. the constrained mu and S; None without ``with_grad``).
  The Bayesian GP-LVM's term is :class:`engine.models.bayesian.CollapsedRowTerm`,
  the stochastic model's its row bound under the explicit q(u).
* :class:`PointProjection` -- the MAP point of a point-latent model (GP-LVM,
  sparse GP-LVM): log p(y*_O | x, model) + log N(x | 0, I), with the model's
  Gaussian predictive distribution at x.
"""
from __future__ import annotations

import copy

import numpy as np

from ..bound import gaussian_kl_rows
from ..linalg import lower_inverse, rows_dot
from ..transforms import POSITIVE

LOG_2PI = np.log(2.0 * np.pi)


class QxProjection:
    """sum_t term_t(q(x*_n)) - KL(q(x*_n) || N(0, I)) per new row, over theta = [mu*, unconstrained S*].

    terms : data terms (module docstring) that share q(x*).
    X_mean, X_variance : (N, Q) the training rows' q(x_n): the starts.
    """

    latent_variance = True

    def __init__(self, terms, X_mean, X_variance):
        self.terms = list(terms)
        self.X_mean = X_mean
        self.X_variance = X_variance
        self.Q = X_mean.shape[1]

    def value_and_grad(self, rows, theta, *, with_grad=True):
        Q = self.Q
        mu = np.ascontiguousarray(theta[:, :Q])
        S = POSITIVE.forward(theta[:, Q:])
        value = -gaussian_kl_rows(mu, S)
        dmu = -mu
        dS = -0.5 * (1.0 - 1.0 / S)
        for term in self.terms:
            v, gmu, gS = term.value_and_grad(rows, mu, S, with_grad)
            value = value + v
            if with_grad:
                dmu = dmu + gmu
                dS = dS + gS
        value = np.where(np.isfinite(value), value, -np.inf)
        if not with_grad:
            return value, None
        return value, np.concatenate([dmu, dS * POSITIVE.grad_factor(theta[:, Q:])], axis=1)

    def log_density(self, theta) -> np.ndarray:
        """The objective itself: the bound with the row added minus the training bound (eq. 20), nats."""
        return self.value_and_grad(np.arange(theta.shape[0]), theta, with_grad=False)[0]

    def unpack(self, theta):
        return theta[:, :self.Q].copy(), POSITIVE.forward(theta[:, self.Q:])

    def scales(self, theta0):
        """Diagonal preconditioner: means in units of the starting standard deviation.

        The curvature of the bound in mu* is about 1 / S* (S* is close to the
        inverse curvature at the optimum), and in the softplus-transformed
        variances about 1/2; scaling the means by sqrt(S* at the start) makes
        the problem well conditioned (about 15 L-BFGS iterations on oil flow
        instead of about 150 unscaled).
        """
        S0 = POSITIVE.forward(theta0[:, self.Q:])
        return np.concatenate([np.sqrt(S0), np.ones_like(S0)], axis=1)

    def prior_start(self, n):
        return np.hstack([np.zeros((n, self.Q)), np.full((n, self.Q), float(POSITIVE.inverse(1.0)))])

    def starts(self, idx):
        return np.concatenate([self.X_mean[idx], POSITIVE.inverse(self.X_variance[idx])], axis=1)

    def first_stage(self):
        return None


class PointProjection:
    """log p(y*_O | x, model) + log N(x | 0, I) per row, for the GP-LVM and the sparse GP-LVM.

    The predictive distribution at a point x is the model's
    (:class:`engine.predictor.Predictor`): per group g of outputs, mean
    k(x)^T alpha_g (centred) and variance k(x, x) - |L_g^-1 k(x)|^2 + |R_g^T k(x)|^2
    + noise, shared by the group's outputs.  ``log_density`` is the plug-in
    log p(y*_O | x*, model) at the MAP point (no integration over x*, so it is
    not comparable to the Bayesian bound); the latent variance is zero by the
    nature of these models.  ``X_train`` (N, Q): the training latents (the starts).
    """

    latent_variance = False

    #: With ``mean_only`` the variance is held at the noise: a first stage that finds the point
    #: reconstructing the row.  Far from the training latents the predictive variance grows,
    #: and with little noise a row explained poorly near the data (a residual of a few noise
    #: standard deviations) scores better far away, where everything is "explained" by variance.
    mean_only = False

    def __init__(self, predictor, X_train, Y, mask):
        self.predictor = predictor
        self.kern = predictor.kernel
        self.centres = predictor.centres
        self.X_train = X_train
        self.Q = predictor.latent_dim
        self.Y = Y
        self.mask_f = mask.astype(float)
        # per group: (group, L^-T, R (so that R^T k is the posterior term) or None), applied row by row
        # (engine.linalg.rows_dot) so that a row's objective never depends on the other rows in the batch
        self._factors = []
        for g in predictor.groups:
            R = lower_inverse(g.LW).T if g.LW is not None else g.Rw
            self._factors.append((g, lower_inverse(g.L).T, R))

    def _terms(self, rows, X):
        """Per group: (group, variance (r,) with noise, residual (r, D_g), Dn (r,), L^-1 k (r, M),
        R^T k (r, M) or None, clipped (r,) bool); and the kernel matrix Ks (r, M)."""
        Ks = self.kern.K(X, self.centres)
        Kdiag = self.kern.K_diag(X)
        out = []
        for g, LiT, R in self._factors:
            a = rows_dot(Ks, LiT)
            latent = Kdiag - np.sum(a * a, axis=1)
            b = None
            if R is not None:
                b = rows_dot(Ks, R)
                latent = latent + np.sum(b * b, axis=1)
            clipped = latent < 0
            var = np.where(clipped, 0.0, latent) + g.noise_variance
            if self.mean_only:
                var = np.full_like(var, g.noise_variance)
                clipped = np.ones_like(clipped)
            mf = self.mask_f[rows][:, g.cols]
            res = mf * (self.Y[rows][:, g.cols] - rows_dot(Ks, g.alpha))
            out.append((g, var, res, mf.sum(axis=1), a, b, clipped))
        return out, Ks

    @staticmethod
    def _density(terms):
        density = 0.0
        for _, var, res, Dn, *_ in terms:
            density = density - 0.5 * Dn * (LOG_2PI + np.log(var)) - 0.5 * np.sum(res * res, axis=1) / var
        return density

    def value_and_grad(self, rows, X, *, with_grad=True):
        X = np.ascontiguousarray(X)
        terms, Ks = self._terms(rows, X)
        value = self._density(terms) - 0.5 * np.sum(X * X, axis=1) - 0.5 * self.Q * LOG_2PI
        if not with_grad:
            return value, None
        dKs = np.zeros_like(Ks)
        dvar_total = np.zeros(X.shape[0])
        for (g, var, res, Dn, a, b, clipped), (_, LiT, R) in zip(terms, self._factors):
            r2 = np.sum(res * res, axis=1)
            dvar = np.where(clipped, 0.0, -0.5 * Dn / var + 0.5 * r2 / var**2)
            dvdk = -2.0 * rows_dot(a, LiT.T)  # d|L^-1 k|^2 / dk = 2 L^-T L^-1 k
            if b is not None:
                dvdk += 2.0 * rows_dot(b, R.T)  # d|R^T k|^2 / dk = 2 R R^T k
            dKs += rows_dot(res / var[:, None], g.alpha.T) + dvar[:, None] * dvdk
            dvar_total += dvar
        grad = self.kern.grad_X(dKs, X, self.centres) + self.kern.grad_X_diag(dvar_total, X) - X
        return value, grad

    def log_density(self, X) -> np.ndarray:
        return self._density(self._terms(np.arange(X.shape[0]), np.ascontiguousarray(X))[0])

    def unpack(self, theta):
        return theta.copy(), np.zeros_like(theta)

    def scales(self, theta0):
        return np.ones_like(theta0)

    def prior_start(self, n):
        return np.zeros((n, self.Q))

    def starts(self, idx):
        return np.asarray(self.X_train, dtype=float)[idx]

    def first_stage(self):
        """The same problem with the variance held at the noise (see ``mean_only``)."""
        staged = copy.copy(self)
        staged.mean_only = True
        return staged
