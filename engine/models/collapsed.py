"""Models built on the collapsed bound: shared evaluation and prediction.

A subclass supplies the psi statistics of its latent representation
(``_psi_forward``), their backward pass (``_psi_backward``) and the latent
term (prior or KL, ``_latent_term``).  Everything else - the bound, the noise
and Kmm gradients, predictions - is here once.
"""
from __future__ import annotations

import numpy as np

from .._cancel import checkpoint
from .._threads import blas_pinned
from ..bound import CollapsedPosterior, collapsed_bound
from ..errors import ShapeError
from ..linalg import tri_solve
from .base import JITTER_RELATIVE, LatentVariableModel


def add_grads(total: dict, extra: dict) -> dict:
    """total[k] += extra[k] for every key of ``extra`` (in place; returns total)."""
    for key, value in extra.items():
        total[key] = total[key] + value if key in total else value
    return total


def inducing_subset(X: np.ndarray, num_inducing: int, seed: int) -> np.ndarray:
    """Z as a random subset of the rows of X, (M, Q)."""
    N = X.shape[0]
    if isinstance(num_inducing, bool) or not isinstance(num_inducing, (int, np.integer)) or num_inducing < 1:
        raise ShapeError(f"Expected num_inducing as a positive integer, got {num_inducing!r} instead.")
    if num_inducing > N:
        raise ShapeError(f"Expected at most N={N} inducing points, got num_inducing={num_inducing} instead; "
                         "use fewer inducing points.")
    rng = np.random.default_rng(seed)
    return X[np.sort(rng.choice(N, size=num_inducing, replace=False))].copy()


class CollapsedModel(LatentVariableModel):
    """Base of SparseGPLVM and BayesianGPLVM (Titsias & Lawrence 2010, eq. 14)."""

    def _psi_forward(self, kern, values):
        """(psi0, Psi1 (N, M), Psi2 (M, M)) at the current latents."""
        raise NotImplementedError

    def _psi_backward(self, kern, values, dpsi0, dPsi1, dPsi2) -> dict:
        """Gradients through the psi statistics, keyed by parameter name."""
        raise NotImplementedError

    def _latent_term(self, values) -> tuple[float, dict]:
        """log prior of X (sparse) or -KL (Bayesian), and its gradients."""
        raise NotImplementedError

    def _base_jitter(self, values):
        """GPy's constant: 1e-8 of the mean diagonal of Kmm."""
        Kdiag = self.kernel_at(values).K_diag(values["Z"])
        return JITTER_RELATIVE * max(float(np.mean(Kdiag)), 1e-300)

    def _bound(self, values):
        kern = self.kernel_at(values)
        Z = values["Z"]
        beta = 1.0 / float(values["noise_variance"])
        psi0, Psi1, Psi2 = self._psi_forward(kern, values)
        checkpoint()
        Kmm = kern.K(Z)
        bound = self._with_jitter(lambda jitter: collapsed_bound(self.Y, psi0, Psi1, Psi2, Kmm, beta, jitter),
                                  float(np.mean(np.diag(Kmm))), "inducing-point kernel matrix Kmm")
        checkpoint()
        return kern, bound

    def _evaluate(self, values):
        kern, b = self._bound(values)
        Z = values["Z"]
        grads = self._psi_backward(kern, values, b.dpsi0, b.dPsi1, b.dPsi2)
        checkpoint()
        dKmm_params, dKmm_Z = kern.grad_params_and_X(b.dKmm, Z)
        grads["Z"] = grads["Z"] + dKmm_Z
        add_grads(grads, dKmm_params)
        grads["noise_variance"] = -b.posterior.beta**2 * b.dbeta
        latent_value, latent_grads = self._latent_term(values)
        add_grads(grads, latent_grads)
        return b.value + latent_value, grads

    # ---- prediction -----------------------------------------------------------------
    def posterior(self) -> CollapsedPosterior:
        """Factors of q(u) at the current parameters (cached until parameters change)."""
        return self._cached(lambda values: self._bound(values)[1].posterior)

    @blas_pinned
    def predict(self, Xnew, Xnew_variance=None, include_noise=False):
        """Predictive mean (n, D) in data units and variance (n, D) at latent points (paper section 4).

        Point inputs Xnew (n, Q): the variance k** - k*M (Kmm^-1 - (Kmm + beta Psi2)^-1) kM*
        is the same for every output (repeated along D).  Uncertain inputs
        (Xnew_variance (n, Q) > 0): the moments of the predictive distribution
        under q(x*), whose variance differs per output.  ``include_noise`` adds
        the noise variance 1/beta.
        """
        Xnew = self._check_points(Xnew)
        post = self.posterior()
        kern = self.kernel
        Z = self.parameters["Z"]
        noise = 1.0 / post.beta if include_noise else 0.0
        if Xnew_variance is None:
            Ks = kern.K(Xnew, Z)
            a = tri_solve(post.L, Ks.T)
            b = tri_solve(post.LW, Ks.T)
            var = kern.K_diag(Xnew) - np.sum(a * a, axis=0) + np.sum(b * b, axis=0)
            var = np.maximum(var, 0.0) + noise
            return Ks @ post.alpha + self.Y_mean, np.repeat(var[:, None], self.output_dim, axis=1)
        S = self._check_points(Xnew_variance, "Xnew_variance")
        if S.shape != Xnew.shape or np.any(S <= 0):
            raise ShapeError("Expected Xnew_variance of the same shape as Xnew with positive entries.")
        from .. import psi

        mean = np.empty((Xnew.shape[0], self.output_dim))
        var = np.empty_like(mean)
        for n in range(Xnew.shape[0]):
            stats = psi.compute(kern, Z, Xnew[n:n + 1], S[n:n + 1])
            m = stats.Psi1 @ post.alpha  # (1, D)
            # shared term: psi0* - tr((Kmm^-1 - W^-1) Psi2*)
            LiP = tri_solve(post.L, tri_solve(post.L, stats.Psi2).T)
            LWiP = tri_solve(post.LW, tri_solve(post.LW, stats.Psi2).T)
            shared = stats.psi0 - np.trace(LiP) + np.trace(LWiP)
            # spread of the mean under q(x*): alpha_d^T (Psi2* - Psi1*^T Psi1*) alpha_d
            spread = np.einsum("md,mk,kd->d", post.alpha, stats.Psi2 - stats.Psi1.T @ stats.Psi1, post.alpha)
            mean[n] = m[0] + self.Y_mean
            var[n] = np.maximum(shared + spread, 0.0) + noise
        return mean, var
