"""The GP-LVM with point estimates of X (Lawrence 2005).

Objective: log N(Y | 0, K + sigma^2 I) + log N(X | 0, I)  (eq. 6 with the
N(0, I) prior of section 3.2), maximised over X, the kernel parameters and the
noise variance sigma^2 = 1 / beta.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._threads import blas_pinned

from ..linalg import check_finite, chol_inverse, chol_solve, cholesky, logdet_from_chol
from ..predictor import Predictor, PredictorGroup
from .base import LatentVariableModel, initial_X
from .projection import PointProjection

LOG_2PI = np.log(2.0 * np.pi)


class ExactPosterior(NamedTuple):
    """X: (N, Q) training latents; L: chol(K + sigma^2 I + jitter I); alpha: (K + sigma^2 I)^-1 Y, (N, D)."""

    X: np.ndarray
    L: np.ndarray
    alpha: np.ndarray
    noise_variance: float
    jitter: float


def log_prior(X: np.ndarray) -> tuple[float, np.ndarray]:
    """log N(X | 0, I) summed over all entries, and its gradient (N, Q)."""
    return -0.5 * float(np.sum(X * X)) - 0.5 * X.size * LOG_2PI, -X


class GPLVM(LatentVariableModel):
    """GP-LVM with MAP latent points.

    Parameters: ``X_mean`` (N, Q), the kernel's parameters, ``noise_variance``.
    ``Y`` (N, D) is centred inside; predictions add the mean back.
    ``likelihood="bernoulli"`` or ``"poisson"`` builds the model with that noise
    model instead, by Laplace's approximation (:mod:`engine.models.gplvm_laplace`),
    still an instance of this class.
    """

    objective_name = "log-likelihood"

    def __init__(self, Y, latent_dim, kernel=None, init="pca", seed=0, X=None, noise_variance=None,
                 observed=None, likelihood="gaussian"):
        super().__init__(Y, latent_dim, kernel, noise_variance=noise_variance, init=init, observed=observed)
        X0 = initial_X(self.Y, self.latent_dim, init, seed, X)
        specs = [self._free_spec("X_mean", X0.shape), *self._kernel_specs(self._kernel), self._noise_spec()]
        values = {"X_mean": X0, "noise_variance": self._initial_noise_variance, **self._kernel.params}
        self._build_packer(specs, values)

    def _factor(self, values):
        X = values["X_mean"]
        kern = self.kernel_at(values)
        noise = float(values["noise_variance"])
        Kn = check_finite(kern.K(X), "kernel matrix K")
        Kn[np.diag_indices_from(Kn)] += noise

        what = "kernel matrix K + noise I"
        L = self._with_jitter(lambda jitter: cholesky(Kn, jitter, what), float(np.mean(np.diag(Kn))), what)
        return kern, ExactPosterior(X, L, chol_solve(L, self.Y), noise, self.jitter)

    def _evaluate(self, values):
        kern, post = self._factor(values)
        N, D = self.Y.shape
        loglik = (-0.5 * N * D * LOG_2PI - 0.5 * D * logdet_from_chol(post.L)
                  - 0.5 * float(np.sum(self.Y * post.alpha)))
        # dL/dK = 1/2 (alpha alpha^T - D K^-1), written over K^-1; numpy's product releases the GIL
        # (scipy's BLAS wrappers hold it: O(N^2 D) work with every other thread of the server waiting)
        dL_dK = chol_inverse(post.L)
        dL_dK *= -0.5 * D
        outer = np.matmul(post.alpha, post.alpha.T)
        outer *= 0.5
        dL_dK += outer
        prior, dprior = log_prior(post.X)
        grads, dX = kern.grad_params_and_X(dL_dK, post.X)
        grads["X_mean"] = dX + dprior
        grads["noise_variance"] = float(np.trace(dL_dK))
        return loglik + prior, grads

    def log_likelihood(self) -> float:
        """log N(Y | 0, K + sigma^2 I) at the current parameters, without the prior on X."""
        values = self.parameters
        return self.objective() - log_prior(values["X_mean"])[0]

    def posterior(self) -> ExactPosterior:
        return self._cached(lambda values: self._factor(values)[1])

    @blas_pinned
    def predictor(self) -> Predictor:
        """The :class:`~engine.predictor.Predictor` of the exact posterior: mean k*N (K + sigma^2 I)^-1 Y,
        variance k** - k*N (K + sigma^2 I)^-1 kN* (the same for all D outputs), over the N training
        latents (so point inputs only; cached until the parameters change)."""
        def build(values):
            post = self._factor(values)[1]
            group = PredictorGroup(slice(None), post.L, post.alpha, noise_variance=post.noise_variance)
            return Predictor(self.kernel_at(values), post.X, [group], self.Y_mean, inducing=False)

        return self._cached(build, key="predictor")

    def projection_problem(self, Yc, mask):
        """The MAP point of each new row under the predictive density plus the prior
        (:class:`~engine.models.projection.PointProjection`); Yc (n, D) centred, 0 where ``mask`` is False."""
        predictor = self.predictor()
        return PointProjection(predictor, predictor.centres, Yc, mask)
