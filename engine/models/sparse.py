"""The sparse GP-LVM: the collapsed bound with X as points and a N(0, I) prior.

The "standard sparse GP-LVM" baseline of Titsias & Lawrence (2010): psi
statistics become kernel matrices, psi0 = tr(Knn), Psi1 = Knm, Psi2 = Kmn Knm.
"""
from __future__ import annotations

import numpy as np

from ..likelihoods import require_gaussian
from .base import initial_X
from .collapsed import CollapsedModel, add_grads, initial_Z
from .gplvm import log_prior
from .projection import PointProjection


class SparseGPLVM(CollapsedModel):
    """Sparse GP-LVM with MAP latent points X (N, Q) and inducing inputs Z (M, Q).

    ``backend`` (e.g. ``engine.DaskBackend(client)``): where the row sums
    tr(Knn), Knm^T Y and Knm^T Knm and their gradients are computed
    (:mod:`engine.backends`); None: here.
    """

    objective_name = "ELBO"

    def __init__(self, Y, latent_dim, num_inducing=30, kernel=None, init="pca", seed=0, X=None,
                 Z=None, noise_variance=None, observed=None, backend=None, likelihood="gaussian"):
        require_gaussian(likelihood, "SparseGPLVM")
        super().__init__(Y, latent_dim, kernel, noise_variance=noise_variance, init=init, observed=observed)
        X0 = initial_X(self.Y, self.latent_dim, init, seed, X)
        Z0 = initial_Z(X0, num_inducing, seed, Z)
        self.num_inducing = Z0.shape[0]
        specs = [self._free_spec("X_mean", X0.shape), self._free_spec("Z", Z0.shape),
                 *self._kernel_specs(self._kernel), self._noise_spec()]
        values = {"X_mean": X0, "Z": Z0, "noise_variance": self._initial_noise_variance, **self._kernel.params}
        self._build_packer(specs, values)
        self._attach_backend(backend)

    def _psi_forward(self, kern, values):
        X, Z = values["X_mean"], values["Z"]
        Knm = kern.K(X, Z)
        return float(np.sum(kern.K_diag(X))), Knm, Knm.T @ Knm

    def _psi_backward(self, kern, values, dpsi0, dPsi1, dPsi2):
        X, Z = values["X_mean"], values["Z"]
        Knm = kern.K(X, Z)
        dKnm = dPsi1 + Knm @ (dPsi2 + dPsi2.T)
        dKdiag = np.full(X.shape[0], dpsi0)
        grads, dX = kern.grad_params_and_X(dKnm, X, Z)
        add_grads(grads, kern.grad_params_diag(dKdiag, X))
        grads["X_mean"] = dX + kern.grad_X_diag(dKdiag, X)
        grads["Z"] = kern.grad_X(np.ascontiguousarray(dKnm.T), Z, X)
        return grads

    def _latent_term(self, values):
        value, dX = log_prior(values["X_mean"])
        return value, {"X_mean": dX}

    def projection_problem(self, Yc, mask):
        """The MAP point of each new row under the predictive density plus the prior
        (:class:`~engine.models.projection.PointProjection`); Yc (n, D) centred, 0 where ``mask`` is False."""
        return PointProjection(self.predictor(), self.parameters["X_mean"], Yc, mask)
