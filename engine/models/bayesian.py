"""The Bayesian GP-LVM (Titsias & Lawrence 2010).

q(X) = prod_n N(x_n | mu_n, diag S_n), the collapsed bound of eq. 14 with the
psi statistics of engine.psi, minus KL(q(X) || N(0, I)).  Parameters:
``X_mean`` (N, Q), ``X_variance`` (N, Q) > 0, ``Z`` (M, Q), the kernel's
parameters and ``noise_variance`` = 1 / beta.
"""
from __future__ import annotations

import numpy as np

from .. import psi
from ..bound import gaussian_kl
from ..transforms import POSITIVE, ParameterSpec
from .base import initial_X
from .collapsed import CollapsedModel, inducing_subset


class BayesianGPLVM(CollapsedModel):
    """Bayesian GP-LVM; ``BayesianGPLVM(Y, latent_dim=10, num_inducing=50)`` is the paper's set-up.

    Defaults as in the paper: means from PCA, variances 0.5, Z a random subset
    of the initial means, an ARD RBF kernel over ``latent_dim`` inputs.
    ``backend`` (e.g. ``engine.DaskBackend(client)``): where the psi statistics'
    row sums and their gradients are computed (:mod:`engine.backends`; with
    missing outputs only for kernels with weighted psi sums, RBF); None: here.
    """

    objective_name = "ELBO"

    _row_params = ("X_mean", "X_variance")

    def __init__(self, Y, latent_dim, num_inducing=30, kernel=None, init="pca", seed=0, X=None,
                 X_variance=0.5, Z=None, noise_variance=None, observed=None, backend=None):
        super().__init__(Y, latent_dim, kernel, noise_variance=noise_variance, init=init, observed=observed)
        psi.check_supported(self._kernel)
        X0 = initial_X(self.Y, self.latent_dim, init, seed, X)
        S0 = np.broadcast_to(np.asarray(X_variance, dtype=float), X0.shape).copy()
        Z0 = inducing_subset(X0, num_inducing, seed) if Z is None else np.array(Z, dtype=float)
        self.num_inducing = Z0.shape[0]
        specs = [self._free_spec("X_mean", X0.shape), ParameterSpec("X_variance", X0.shape, POSITIVE),
                 self._free_spec("Z", Z0.shape), *self._kernel_specs(self._kernel), self._noise_spec()]
        values = {"X_mean": X0, "X_variance": S0, "Z": Z0,
                  "noise_variance": self._initial_noise_variance, **self._kernel.params}
        self._build_packer(specs, values)
        self._attach_backend(backend)

    def _psi_forward(self, kern, values):
        return psi.compute(kern, values["Z"], values["X_mean"], values["X_variance"])

    def _psi_backward(self, kern, values, dpsi0, dPsi1, dPsi2):
        g = psi.gradients(kern, values["Z"], values["X_mean"], values["X_variance"], dpsi0, dPsi1, dPsi2)
        return {**g.params, "X_mean": g.mu, "X_variance": g.S, "Z": g.Z}

    def _latent_term(self, values):
        mu, S = values["X_mean"], values["X_variance"]
        return -gaussian_kl(mu, S), {"X_mean": -mu, "X_variance": -0.5 * (1.0 - 1.0 / S)}

    # ---- names used in the paper ------------------------------------------------------
    def kl(self) -> float:
        """KL(q(X) || N(0, I)) at the current parameters, nats."""
        values = self.parameters
        return gaussian_kl(values["X_mean"], values["X_variance"])

    def elbo(self) -> float:
        """The bound F (eq. 14 minus the KL), nats, with all constants."""
        return self.objective()

    def elbo_gradients(self) -> dict:
        """Gradients of the ELBO w.r.t. the named, constrained parameters."""
        return self.objective_gradients()

