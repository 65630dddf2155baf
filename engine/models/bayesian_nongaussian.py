"""The Bayesian GP-LVM with a non-Gaussian likelihood (Bernoulli, Poisson).

``BayesianGPLVM(Y, latent_dim, likelihood="bernoulli")`` builds this model.
The bound is no longer closed form in q(u), so q(u) is explicit and
whitened, one Gaussian per output (:mod:`engine.nonconjugate` has the bound,
the marginals of f under q(x_n) through the psi statistics, and the
gradients).  Parameters: ``X_mean`` (N, Q), ``X_variance`` (N, Q) > 0, ``Z``
(M, Q), the kernel's parameters, ``q_mu`` (M, D) and ``q_sqrt`` (D, M, M)
(lower triangles used).  There is no noise variance: the likelihood is the noise.

Y is not centred (0/1 answers and counts mean what they say); missing
entries (NaN, or ``observed``) simply have no data term.  The default kernel
is the ARD RBF of the Gaussian model plus a Bias, whose per-output constant
plays the part the data mean plays there (a pixel that is never inked needs
f far below 0 everywhere).  Supported kernels: those whose psi statistics
have per-point contractions (:func:`engine.psi.contract`: RBF, alone or with
Bias and White).

At construction q(u) takes a few natural-gradient steps
(:func:`engine.nonconjugate.natural_step`) on the start's q(X) and kernel,
estimated from at most ``_Q_START_ROWS`` rows, so the optimiser does not start
from q(u) = the prior (where f = 0 for every output).
"""
from __future__ import annotations

import numpy as np

from .. import kernels as _kernels
from .. import psi
from .._cancel import checkpoint
from .._threads import blas_pinned
from ..bound import gaussian_kl
from ..errors import ConfigurationError, ShapeError, UnsupportedKernelError, UnsupportedOperationError
from ..imputation import candidate_rows
from ..likelihoods import get_likelihood
from ..linalg import cholesky, tri_solve
from ..nonconjugate import data_term, marginals, natural_step, q_gradients, q_projections, whitened_kl
from ..transforms import POSITIVE, ParameterSpec
from .base import LatentVariableModel, initial_X
from .bayesian import BayesianGPLVM
from .collapsed import add_grads, inducing_subset

#: Rows the start of q(u) is estimated from (a fixed random subset above it).
_Q_START_ROWS = 1024
#: Natural-gradient steps of the start of q(u), and their size.
_Q_START_STEPS, _Q_START_RHO = 8, 0.7

#: Rows per block of the mixture imputation's candidate likelihoods (blocks are rows x candidates x D).
_IMPUTE_BLOCK = 2**20


def check_nongaussian_kernel(kernel) -> None:
    """UnsupportedKernelError unless the kernel's psi statistics have per-point contractions."""
    if not psi.supports_grouped(kernel):
        psi.check_supported(kernel)
        raise UnsupportedKernelError(
            f"A non-Gaussian likelihood needs each point's psi statistics, implemented for the RBF kernel "
            f"alone or with Bias and White terms; got {kernel!r}. Use an RBF kernel, or likelihood='gaussian'.")


def default_nongaussian_kernel(latent_dim, fractions=None):
    """ARD RBF (lengthscales 1 / PCA variance fraction, as the Gaussian models) plus a Bias."""
    if fractions is None:
        rbf = _kernels.RBF(latent_dim, ard=True)
    else:
        rbf = _kernels.RBF(latent_dim, ard=True, lengthscales=1.0 / np.maximum(fractions, 1e-3))
    return rbf + _kernels.Bias(latent_dim, variance=1.0)


def distinct_inducing(X0, num_inducing, seed):
    """Z (M, Q): a random subset of the *distinct* rows of X0 (binary data repeat rows, and two equal
    inducing inputs make Kmm singular); with fewer distinct rows than M, the rest are distinct rows
    moved by a tenth of the data's spread."""
    unique = np.unique(X0, axis=0)
    if unique.shape[0] >= num_inducing:
        return inducing_subset(unique, num_inducing, seed)
    inducing_subset(X0, num_inducing, seed)  # the same checks of num_inducing
    rng = np.random.default_rng(seed)
    extra = unique[rng.integers(0, unique.shape[0], num_inducing - unique.shape[0])]
    extra = extra + 0.1 * np.std(X0, axis=0) * rng.standard_normal(extra.shape)
    return np.vstack([unique, extra])


def init_data(likelihood, Y):
    """What PCA starts from: counts on a log scale, everything else as given."""
    return np.log1p(Y) if likelihood.name == "poisson" else Y


class NonGaussianMixin:
    """What the models with a Bernoulli or Poisson likelihood share: the likelihood itself, its checks,
    the default kernel and the moments of y from those of f (``predict_f``)."""

    def _build_explicit_q(self, X0, X_variance, Z, num_inducing, seed) -> list:
        """Parameters q(x_n) = N(X_mean, X_variance), Z (M, Q), the kernel's and the explicit whitened
        q(u_d) = N(q_mu[:, d], q_sqrt[d] q_sqrt[d]^T) per output, starting at the prior; returns the specs."""
        S0 = np.broadcast_to(np.asarray(X_variance, dtype=float), X0.shape).copy()
        Z0 = distinct_inducing(X0, num_inducing, seed) if Z is None else np.array(Z, dtype=float)
        if Z0.ndim != 2 or Z0.shape[1] != self.latent_dim:
            raise ShapeError(f"Expected Z of shape (M, {self.latent_dim}), got {Z0.shape} instead.")
        self.num_inducing = M = Z0.shape[0]
        D = self.output_dim
        specs = [self._free_spec("X_mean", X0.shape), ParameterSpec("X_variance", X0.shape, POSITIVE),
                 self._free_spec("Z", Z0.shape), *self._kernel_specs(self._kernel),
                 self._free_spec("q_mu", (M, D)), self._free_spec("q_sqrt", (D, M, M))]
        values = {"X_mean": X0, "X_variance": S0, "Z": Z0, **self._kernel.params,
                  "q_mu": np.zeros((M, D)), "q_sqrt": np.broadcast_to(np.eye(M), (D, M, M)).copy()}
        self._build_packer(specs, values)
        return specs

    def _init_likelihood(self, likelihood, noise_variance, gaussian_class):
        lik = get_likelihood(likelihood)
        if lik.name == "gaussian":
            raise ConfigurationError(f"This is the non-Gaussian model; use {gaussian_class} for likelihood='gaussian'.")
        if noise_variance is not None:
            raise ConfigurationError(f"likelihood={lik.name!r} has no Gaussian noise, so noise_variance= does not "
                                     "apply; drop it (or use likelihood='gaussian').")
        self._likelihood = lik
        self.likelihood = lik.name
        return lik

    def _default_kernel(self, init):
        if init != "pca":
            return default_nongaussian_kernel(self.latent_dim)
        from ..init import pca_variance_fractions

        if not self.source.in_memory:  # read by chunks: the source's own PCA of Y as given
            return default_nongaussian_kernel(self.latent_dim, self.source.pca_fractions(self.latent_dim))
        return default_nongaussian_kernel(self.latent_dim,
                                          pca_variance_fractions(init_data(self._likelihood, self.Y), self.latent_dim))

    def _inert_entries(self) -> np.ndarray:
        """The strict upper triangles of q_sqrt (D, M, M): only the lower ones are read."""
        mask = np.zeros(self._packer.size, dtype=bool)
        if "q_sqrt" in self._packer.names():
            D, M = self.output_dim, self.num_inducing
            mask[self._packer._slices["q_sqrt"]] = np.broadcast_to(np.triu(np.ones((M, M), bool), 1), (D, M, M)).ravel()
        return mask

    @property
    def likelihood_model(self):
        """The :class:`engine.likelihoods.Likelihood` object."""
        return self._likelihood

    def predictor(self):
        """None: the moments of y come through the likelihood (:meth:`predict`), not from a Gaussian
        :class:`engine.predictor.Predictor` (which the app would otherwise take for them)."""
        return None

    def predict(self, Xnew, Xnew_variance=None, include_noise=False):
        """Moments of y itself (n, D) at latent points: Bernoulli P(y = 1) and P (1 - P); Poisson the
        mean and variance of the count.  ``include_noise`` is accepted for the common signature: the
        moments of y always include the likelihood's own spread (``predict_f`` gives f's)."""
        mean, var = self.predict_f(Xnew, Xnew_variance)
        return self._likelihood.predictive_moments(mean, var)


class NonConjugateBayesianGPLVM(NonGaussianMixin, BayesianGPLVM, likelihoods_of=BayesianGPLVM):
    """Bayesian GP-LVM with an explicit, whitened q(u) and a non-Gaussian likelihood (module docstring).

    Arguments as :class:`BayesianGPLVM`; ``likelihood`` "bernoulli" or "poisson"
    (or a :class:`engine.likelihoods.Likelihood`).  ``noise_variance`` and
    ``backend`` are refused (no Gaussian noise; the Dask backend sums the
    Gaussian model's statistics).  ``predict`` gives the moments of y
    (Bernoulli: P(y = 1)), ``predict_f`` those of f; ``impute`` fills missing
    entries with the predictive mean of y and its standard deviation.
    """

    objective_name = "ELBO"
    handles_missing = True
    _row_params = ("X_mean", "X_variance")

    def __init__(self, Y, latent_dim, num_inducing=30, kernel=None, init="pca", seed=0, X=None,
                 X_variance=0.5, Z=None, noise_variance=None, observed=None, backend=None, likelihood="bernoulli"):
        lik = self._init_likelihood(likelihood, noise_variance, "BayesianGPLVM")
        if backend is not None:
            raise ConfigurationError(
                f"The Dask backend sums the Gaussian model's statistics over row chunks; likelihood={lik.name!r} "
                "trains in-process. Use BayesianGPLVM(..., backend=...) with likelihood='gaussian', or "
                "StochasticBayesianGPLVM(..., likelihood=...) for large data.")
        self.backend = None
        LatentVariableModel.__init__(self, Y, latent_dim, kernel, init=init, observed=observed, likelihood=lik)
        check_nongaussian_kernel(self._kernel)
        start = init_data(lik, self._Y_data if self.observed is None else np.where(self.observed, self._Y_data, 0.0))
        X0 = initial_X(start, self.latent_dim, init, seed, X)
        self._build_explicit_q(X0, X_variance, Z, num_inducing, seed)
        self.reset_q_u(rows=_Q_START_ROWS, seed=seed)

    # ---- q(u) ---------------------------------------------------------------------------
    def _factor(self, kern, Z):
        """chol(Kmm + jitter I), the jitter escalated (logged) if the factorisation fails."""
        Kmm = kern.K(Z)
        what = "inducing-point kernel matrix Kmm"
        return self._with_jitter(lambda jitter: cholesky(Kmm, jitter, what), float(np.mean(np.diag(Kmm))), what)

    def _rows_data(self, rows):
        """(Y rows, mask rows or None) of the training data."""
        Yr = self.Y[rows]
        return Yr, (None if self.observed is None else self.observed[rows])

    @blas_pinned
    def reset_q_u(self, rows=None, seed=0, steps=_Q_START_STEPS, rho=_Q_START_RHO) -> None:
        """``steps`` natural-gradient steps of size ``rho`` on q(u) with everything else held.

        ``rows=None``: on all rows; an integer k: on a fixed random subset of k
        rows (all rows when N <= k), its data term scaled by N / k.
        """
        values = self.parameters
        kern = self.kernel_at(values)
        Z = values["Z"]
        N = self.num_data
        if rows is None or int(rows) >= N:
            idx = np.arange(N)
        else:
            idx = np.sort(np.random.default_rng(seed).choice(N, size=int(rows), replace=False))
        scale = N / idx.size
        Yr, mask = self._rows_data(idx)
        mu, S = values["X_mean"][idx], values["X_variance"][idx]
        q_mu, q_sqrt = values["q_mu"], values["q_sqrt"]
        L = self._factor(kern, Z)
        for _ in range(int(steps)):
            proj = q_projections(L, q_mu, q_sqrt)
            rt = data_term(self._likelihood, kern, Z, mu, S, Yr, mask, proj, natural=True)
            q_mu, q_sqrt = natural_step(L, q_mu, q_sqrt, scale * rt.G_Mw, scale * rt.G_E, rho)
        self.set_parameters(q_mu=q_mu, q_sqrt=q_sqrt)

    # ---- the bound --------------------------------------------------------------------------
    def _evaluate(self, values):
        kern = self.kernel_at(values)
        Z = values["Z"]
        mu, S = values["X_mean"], values["X_variance"]
        L = self._factor(kern, Z)
        proj = q_projections(L, values["q_mu"], values["q_sqrt"])
        checkpoint()
        rt = data_term(self._likelihood, kern, Z, mu, S, self.Y, self.observed, proj)
        checkpoint()
        dKmm, dq_mu, dq_sqrt = q_gradients(L, values["q_mu"], proj, rt.G_Mw, rt.G_E)
        kl_u, dkl_mu, dkl_sqrt = whitened_kl(values["q_mu"], values["q_sqrt"])
        dKmm_params, dKmm_Z = kern.grad_params_and_X(dKmm, Z)
        grads = {"X_mean": rt.dmu - mu, "X_variance": rt.dS - 0.5 * (1.0 - 1.0 / S), "Z": rt.dZ + dKmm_Z,
                 "q_mu": dq_mu - dkl_mu, "q_sqrt": dq_sqrt - dkl_sqrt}
        add_grads(grads, rt.dkernel)
        add_grads(grads, dKmm_params)
        return rt.value - kl_u - gaussian_kl(mu, S), grads

    # ---- prediction ---------------------------------------------------------------------------
    def _posterior(self):
        """(kernel, Z, L, Mw (M, D), Rw (D, M, M) = R_d^T L^-1 stacked, QProjections) at the current
        parameters (cached until they change)."""
        def build(values):
            kern = self.kernel_at(values)
            Z = values["Z"]
            L = self._factor(kern, Z)
            proj = q_projections(L, values["q_mu"], values["q_sqrt"])
            Linv = tri_solve(L, np.eye(L.shape[0]))
            Rw = np.matmul(np.swapaxes(proj.R, 1, 2), Linv[None])  # (D, M, M): R_d^T L^-1
            return kern, Z, L, proj.Mw, Rw, proj

        return self._cached(build, key="nonconjugate")

    def _geometry_maps(self, values):
        # the metric of the latent functions f: one posterior per output (its own q(v_d))
        from ..geometry import explicit_q_groups

        kern, Z, L, Mw, _, proj = self._posterior()
        return [(kern, Z, explicit_q_groups(L, Mw, proj.R))]

    def posteriors(self):
        raise UnsupportedOperationError(
            f"likelihood={self.likelihood!r}: q(u) is explicit with its own covariance per output; "
            "predict with predict() or predict_f().")

    def posterior(self):
        return self.posteriors()

    @blas_pinned
    def predict_f(self, Xnew, Xnew_variance=None):
        """Mean and variance (n, D) of the latent functions f at latent points Xnew (n, Q)
        (:func:`f_moments_at_points`)."""
        kern, Z, L, _, _, proj = self._posterior()
        return f_moments_at_points(self, kern, Z, L, proj, Xnew, Xnew_variance)

    # ---- projection of new rows ---------------------------------------------------------------
    def projection_problem(self, Yc, mask):
        """q(x*_n) per new row: the row's expected log-likelihood under the likelihood minus its KL
        (:class:`NonConjugateRowTerm`); Yc (n, D) the new rows (not centred: Y_mean is 0)."""
        from .projection import QxProjection

        self._likelihood.check(Yc, mask, name="Ynew")
        values = self.parameters
        kern, Z, _, Mw, _, proj = self._posterior()
        term = NonConjugateRowTerm(self._likelihood, kern, Z, Mw, proj.E, Yc, mask)
        return QxProjection([term], values["X_mean"], values["X_variance"])

    # ---- missing values (impute() is the collapsed models'; its mixture weighs by the likelihood) -----
    def _imputation_candidates(self, values):
        cand = candidate_rows(self.num_data)
        f_mean, f_var = self.predict_f(values["X_mean"][cand], values["X_variance"][cand])
        return cand, f_mean, f_var

    def _mixture_moments(self, rows):
        """impute's mixture (:mod:`engine.imputation`) with each candidate m weighted by the
        likelihood's predictive probability of the row's observed entries,
        prod_d p(y_nd | f_d ~ q_m), and the moments of y (Bernoulli: P(y = 1)) mixed."""
        cand, f_mean, f_var = self._cached(self._imputation_candidates, key="imputation")
        lik = self._likelihood
        y_mean, y_var = lik.predictive_moments(f_mean, f_var)
        second = y_var + y_mean * y_mean
        D = self.output_dim
        out_mean = np.empty((rows.size, D))
        out_var = np.empty_like(out_mean)
        block = max(1, _IMPUTE_BLOCK // max(1, cand.size * D))
        for lo in range(0, rows.size, block):
            r = rows[lo:lo + block]
            obs = self.observed[r]  # (b, D)
            Yr = np.where(obs, self._Y_data[r], 0.0)
            shape = (r.size, cand.size, D)
            logp = lik.log_predictive_density(np.broadcast_to(Yr[:, None, :], shape),
                                              np.broadcast_to(f_mean[None], shape),
                                              np.broadcast_to(f_var[None], shape),
                                              np.broadcast_to(obs[:, None, :], shape))[0]
            log_w = logp.sum(axis=2)
            log_w[cand[None, :] == r[:, None]] = -np.inf
            log_w -= log_w.max(axis=1, keepdims=True)
            w = np.exp(log_w)
            w /= w.sum(axis=1, keepdims=True)
            m = w @ y_mean
            out_mean[lo:lo + r.size] = m
            out_var[lo:lo + r.size] = np.maximum(w @ second - m * m, 0.0)
        return out_mean, out_var

    def __repr__(self):
        return (f"BayesianGPLVM(N={self.num_data}, D={self.output_dim}, Q={self.latent_dim}, "
                f"likelihood={self.likelihood!r}, kernel={self._kernel!r})")


def f_moments_at_points(model, kern, Z, L, proj, Xnew, Xnew_variance=None):
    """Mean and variance (n, D) of f at latent points Xnew (n, Q) under an explicit q(u) (``proj``,
    :func:`engine.nonconjugate.q_projections`).

    Point inputs: mean k*M Mw, variance k** - |L^-1 kM*|^2 + |R_d^T L^-1 kM*|^2 (per output).
    With ``Xnew_variance`` (n, Q) > 0: the moments under q(x*) (:func:`engine.nonconjugate.marginals`).
    ``model`` checks the inputs.
    """
    Xnew = model._check_points(Xnew)
    if Xnew_variance is None:
        Ks = kern.K(Xnew, Z)
        a = tri_solve(L, Ks.T)  # (M, n)
        c = np.matmul(np.swapaxes(proj.R, 1, 2), a[None])  # (D, M, n)
        var = kern.K_diag(Xnew)[:, None] - np.sum(a * a, axis=0)[:, None] + np.sum(c * c, axis=1).T
        return Ks @ proj.Mw, np.maximum(var, 0.0)
    S = model._check_points(Xnew_variance, "Xnew_variance")
    if S.shape != Xnew.shape or np.any(S <= 0):
        raise ShapeError("Expected Xnew_variance of the same shape as Xnew with positive entries.")
    mean, var, _, _ = marginals(kern, Z, Xnew, S, proj)
    return mean, var


class NonConjugateRowTerm:
    """The data term of new rows under q(x*_n), q(u) fixed (a term of a q(x*) projection problem).

    value_and_grad(rows, mu, S, with_grad) -> (value (r,), dmu (r, Q), dS (r, Q)):
    sum over the row's observed outputs d of E[log p(y*_d | f)] under the
    marginal of f_d at q(x*_n) (:mod:`engine.nonconjugate`), with per-point psi
    statistics (:class:`PointPsi`: every kernel of the model).  Minus the KL of
    q(x*_n), added by the problem, this is the bound on log p(y*_O) the
    projection maximises and reports as ``log_density`` (<= 0 for binary data).
    """

    def __init__(self, likelihood, kern, Z, Mw, E, Y, mask):
        self.likelihood = likelihood
        self.point_psi = _point_psi(kern, Z)
        self.Mw, self.E = Mw, E
        self.Y, self.mask = Y, mask

    def value_and_grad(self, rows, mu, S, with_grad=True):
        psi0, Psi1, Psi2 = self.point_psi.forward(np.ascontiguousarray(mu), S)
        mean = Psi1 @ self.Mw
        var = psi0[:, None] + np.einsum("rab,dab->rd", Psi2, self.E) - mean * mean
        floor = 1e-12 * np.maximum(psi0, 1e-300)[:, None]
        floored = var < floor
        ell = self.likelihood.expected_log_density(self.Y[rows], mean, np.where(floored, floor, var), self.mask[rows])
        value = ell.value.sum(axis=1)
        if not with_grad:
            return value, None, None
        dvar = np.where(floored, 0.0, ell.dvar)
        G1 = (ell.dmean - 2.0 * dvar * mean) @ self.Mw.T
        G2 = np.einsum("rd,dab->rab", dvar, self.E)
        dmu, dS = self.point_psi.backward(dvar.sum(axis=1), G1, G2)
        return value, dmu, dS


def _point_psi(kern, Z):
    try:
        from ..psi.point import PointPsi
    except ImportError:  # before the per-point statistics had their own module
        from ..infer import PointPsi
    return PointPsi(kern, Z)
