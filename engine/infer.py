"""Projection of new data into a trained Bayesian GP-LVM (Titsias & Lawrence 2010, section 4).

For a new output vector y* (possibly with only the entries ``observed`` seen)
we optimise q(x*) = N(mu*, diag S*) in the augmented bound

    F(X, x*) = F_O(psi stats of X and x*; [Y_O; y*_O]) - KL(q(x*) || N(0, I))

with everything else fixed.  The columns that y* does not observe contribute
the same to F(X, x*) and F(X), so only the observed columns O enter.  The
difference F(X, x*) - F(X) approximates log p(y*_O | Y) (eq. 20).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize

from . import psi
from .bound import collapsed_bound, gaussian_kl
from .errors import ShapeError
from .transforms import POSITIVE


@dataclass(frozen=True)
class LatentInference:
    """Result of :func:`infer_latent`.

    mean, variance: (Q,) moments of q(x*); log_density: F(X, x*) - F(X), nats;
    observed: (D,) bool mask; prediction, prediction_variance: (D,) predictive
    moments of every output at q(x*) (data units, noise included).
    """

    mean: np.ndarray
    variance: np.ndarray
    log_density: float
    observed: np.ndarray
    prediction: np.ndarray
    prediction_variance: np.ndarray

    @property
    def reconstruction(self) -> np.ndarray:
        """Predicted values of the unobserved entries, (D - |O|,)."""
        return self.prediction[~self.observed]

    @property
    def reconstruction_variance(self) -> np.ndarray:
        return self.prediction_variance[~self.observed]


def _check_new(model, y_new, observed):
    y = np.asarray(y_new, dtype=float).ravel()
    D = model.output_dim
    if y.shape != (D,):
        raise ShapeError(f"Expected a new output vector of length D={D}, got shape {np.shape(y_new)} instead.")
    mask = np.ones(D, bool) if observed is None else np.asarray(observed, dtype=bool).ravel()
    if mask.shape != (D,):
        raise ShapeError(f"Expected an observed mask of length D={D}, got shape {mask.shape} instead.")
    if not mask.any():
        raise ShapeError("At least one entry of the new vector must be observed.")
    if not np.all(np.isfinite(y[mask])):
        raise ShapeError("The observed entries of the new vector must be finite (mark missing ones in `observed`).")
    return y, mask


class _AugmentedBound:
    """F_O(X, x*) - KL(x*) as a function of (mu*, unconstrained S*), and F_O(X)."""

    def __init__(self, model, y, mask):
        values = model.parameters
        self.kern = model.kernel_at(values)
        self.Z = values["Z"]
        self.beta = 1.0 / float(values["noise_variance"])
        self.stats = psi.compute(self.kern, self.Z, values["X_mean"], values["X_variance"])
        self.Kmm = self.kern.K(self.Z)
        Y_O = model.Y[:, mask]
        self.Y_aug = np.vstack([Y_O, (y[mask] - model.Y_mean[mask])[None, :]])
        self.base = collapsed_bound(Y_O, *self.stats, self.Kmm, self.beta).value
        self.Q = model.latent_dim

    def value_and_grad(self, theta):
        Q = self.Q
        mu = theta[:Q][None, :]
        S = POSITIVE.forward(theta[Q:])[None, :]
        new = psi.compute(self.kern, self.Z, mu, S)
        b = collapsed_bound(self.Y_aug, self.stats.psi0 + new.psi0, np.vstack([self.stats.Psi1, new.Psi1]),
                            self.stats.Psi2 + new.Psi2, self.Kmm, self.beta)
        g = psi.gradients(self.kern, self.Z, mu, S, b.dpsi0, b.dPsi1[-1:], b.dPsi2)
        value = b.value - gaussian_kl(mu, S)
        dmu = g.mu[0] - mu[0]
        dS = (g.S[0] - 0.5 * (1.0 - 1.0 / S[0])) * POSITIVE.grad_factor(theta[Q:])
        return value, np.concatenate([dmu, dS])


def infer_latent(model, y_new, observed=None, num_starts=5, max_iters=200):
    """Optimise q(x*) for y_new (D,) with the model fixed; see the module docstring.

    Starts from the q(x_n) of the ``num_starts`` training points nearest to
    y_new on its observed entries and keeps the best optimum.
    """
    y, mask = _check_new(model, y_new, observed)
    aug = _AugmentedBound(model, y, mask)
    values = model.parameters
    dist = np.sum((model.Y[:, mask] - (y[mask] - model.Y_mean[mask])) ** 2, axis=1)
    starts = np.argsort(dist, kind="stable")[:max(1, int(num_starts))]

    def negative(theta):
        v, g = aug.value_and_grad(theta)
        return -v, -g

    best = None
    for n in starts:
        theta0 = np.concatenate([values["X_mean"][n], POSITIVE.inverse(values["X_variance"][n])])
        res = optimize.minimize(negative, theta0, jac=True, method="L-BFGS-B", options={"maxiter": max_iters})
        if np.isfinite(res.fun) and (best is None or res.fun < best.fun):
            best = res
    Q = model.latent_dim
    mean = best.x[:Q].copy()
    variance = POSITIVE.forward(best.x[Q:])
    pred, pred_var = model.predict(mean[None, :], variance[None, :], include_noise=True)
    return LatentInference(mean=mean, variance=variance, log_density=float(-best.fun - aug.base),
                           observed=mask, prediction=pred[0], prediction_variance=pred_var[0])


def log_density(model, y_new, observed=None, **options) -> float:
    """log q(y*_O | Y) = F(X, x*) - F(X) (eq. 20) at the optimised q(x*), nats."""
    return infer_latent(model, y_new, observed=observed, **options).log_density
