"""The GP-LVM with a non-Gaussian likelihood: Laplace's approximation per output.

``GPLVM(Y, latent_dim, likelihood="bernoulli")`` builds this model (Lawrence
2005, section 5: binary and count data).  For output d the latent function
values f_d (N,) have the prior N(0, K), K = k(X, X), and the likelihood
prod_n p(y_nd | f_nd) over the observed rows.  The objective replaces the
marginal likelihood of each output by Laplace's approximation (Rasmussen &
Williams 2006, section 3.4 and algorithm 5.1) and adds the prior on X:

    F = sum_d [ log p(y_d | f_d^) - 1/2 a_d^T K a_d - 1/2 log|B_d| ] + log N(X | 0, I),

with f_d^ = K a_d the mode of p(y_d | f) N(f | 0, K), W_d = -d2 log p / df2 at
the mode (0 where y_nd is missing) and B_d = I + W_d^1/2 K W_d^1/2.

Why Laplace.  The paper used assumed density filtering inside its sparse
(IVM) algorithm; ADF depends on the order of the points and its
approximate marginal likelihood has no simple gradient.  EP is more accurate
for probit classification, but its gradient is valid only at the EP fixed
point, reached by sweeps over all N D sites per evaluation.  Laplace's mode
is unique for the log-concave likelihoods here (probit, Poisson with the exp
link), Newton reaches it in a few steps from the previous evaluation's mode,
and the approximate marginal likelihood has an exact gradient by implicit
differentiation of the mode (R&W eq. 5.23-5.24).  A full variational q(f_d)
would add N(N+1)/2 parameters per output.  The cost is one N x N Cholesky
per output and Newton step, D N^3 / 3, so this model is for the small data
sets the exact GP-LVM is meant for (as the Gaussian GPLVM's N^3).

Gradient (per output, summed): dF/dK = 1/2 a a^T - 1/2 R + sym(u g^T) with
R = W^1/2 B^-1 W^1/2, g = d log p / df at the mode (= a), and the mode's
own movement: -1/2 log|B| changes with f^ through W, d/df_i = s2_i =
1/2 diag((K^-1 + W)^-1)_i d3 log p / df_i^3 (dW_ii/df_i = -d3 log p / df_i^3),
and df^ = (I - K R) dK g, so u = s2 - R K s2; then through the kernel to X
and its parameters.

Prediction at a point x* (R&W section 3.4.2): f_d(x*) ~ N(k*^T g_d,
k** - v^T B_d^-1 v), v = W_d^1/2 * k*; the moments of y follow from the
likelihood (Bernoulli: P(y = 1) = Phi(mean / sqrt(1 + var))).  The model keeps
B_d^-1 for every output (D N^2 numbers) while it predicts.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._cancel import checkpoint
from .._threads import blas_pinned
from ..errors import NumericalError, UnsupportedOperationError
from .base import LatentVariableModel, initial_X
from .bayesian_nongaussian import NonGaussianMixin, init_data
from .gplvm import GPLVM, log_prior
from .projection import PointProjection

#: Newton steps at most per evaluation, and the stopping test on the largest change of f.
_NEWTON_STEPS, _NEWTON_TOL = 100, 1e-10

#: Doubles of the batched (outputs, N, N) factorisations held at once.
_BATCH_DOUBLES = 2**22


class LaplaceMode(NamedTuple):
    """The Laplace approximation at the mode, per output.

    F: (N, D) modes; a: (N, D) with F = K a; g: (N, D) d log p / df at the mode (= a once
    converged); sW: (N, D) W^1/2; Binv: (D, N, N) B_d^-1 (None unless kept for
    prediction); value: the approximate log marginal likelihood summed over the
    outputs (no prior on X); dK: (N, N) its gradient w.r.t. K (None unless asked for).
    """

    F: np.ndarray
    a: np.ndarray
    g: np.ndarray
    sW: np.ndarray
    Binv: np.ndarray | None
    value: float
    dK: np.ndarray | None = None


def _batches(D, N):
    size = max(1, _BATCH_DOUBLES // max(1, N * N))
    return [slice(lo, min(D, lo + size)) for lo in range(0, D, size)]


def _B(K, sW):
    """B_d = I + W_d^1/2 K W_d^1/2 for the outputs d of sW (N, d), as (d, N, N) (eigenvalues >= 1)."""
    B = sW.T[:, :, None] * K[None] * sW.T[:, None, :]
    idx = np.arange(K.shape[0])
    B[:, idx, idx] += 1.0
    return B


def _newton_direction(K, F, g, W, batches):
    """R&W algorithm 3.1's new a: b - W^1/2 B^-1 W^1/2 K b with b = W f + g, every output (batched solves)."""
    sW = np.sqrt(W)
    b = W * F + g
    Kb = K @ b
    a_new = np.empty_like(b)
    for sl in batches:
        rhs = (sW[:, sl] * Kb[:, sl]).T[:, :, None]  # (d, N, 1)
        a_new[:, sl] = b[:, sl] - sW[:, sl] * np.linalg.solve(_B(K, sW[:, sl]), rhs)[:, :, 0].T
    return a_new


def laplace_mode(likelihood, K, Y, mask, a0=None, keep_factors=False, gradient=False) -> LaplaceMode:
    """Newton's method for the modes f_d^ (R&W algorithm 3.1, every output at once), with halving
    of the step whenever Psi(f) = log p(y | f) - 1/2 a^T f does not increase, then the
    approximation at the mode (and, with ``gradient``, dF/dK; module docstring).

    K: (N, N); Y: (N, D); mask: (N, D) bool or None; a0: (N, D) the start f = K a0
    (e.g. the previous evaluation's a), or None for f = 0.  B_d is symmetric with
    eigenvalues >= 1, so LU solves and determinants are as safe as Cholesky's and
    run batched over the outputs.
    """
    N, D = Y.shape
    batches = _batches(D, N)
    a = np.zeros((N, D)) if a0 is None else np.array(a0, dtype=float)
    F = K @ a
    logp, g, d2, d3 = likelihood.log_density_derivatives(Y, F, mask)
    psi_val = logp.sum(axis=0) - 0.5 * np.sum(a * F, axis=0)  # (D,)
    for _ in range(_NEWTON_STEPS):
        checkpoint()
        a_new = _newton_direction(K, F, g, np.maximum(-d2, 0.0), batches)
        F_new = K @ a_new
        step = 1.0
        while True:
            Ft = F + step * (F_new - F)
            at = a + step * (a_new - a)
            logp_t, g_t, d2_t, d3_t = likelihood.log_density_derivatives(Y, Ft, mask)
            psi_t = logp_t.sum(axis=0) - 0.5 * np.sum(at * Ft, axis=0)
            worse = psi_t < psi_val - 1e-12 * np.abs(psi_val)
            if not np.any(worse) or step < 1e-6:
                break
            step *= 0.5
        change = float(np.max(np.abs(Ft - F))) if Ft.size else 0.0
        F, a, logp, g, d2, d3, psi_val = Ft, at, logp_t, g_t, d2_t, d3_t, psi_t
        if change < _NEWTON_TOL * max(1.0, float(np.max(np.abs(F)))):
            break
    sW = np.sqrt(np.maximum(-d2, 0.0))
    logdet = 0.0
    Binv = np.empty((D, N, N)) if keep_factors else None
    dK = 0.5 * (g @ g.T) if gradient else None
    U = np.empty((N, D)) if gradient else None
    Kdiag = np.diag(K)
    for sl in batches:
        checkpoint()
        B = _B(K, sW[:, sl])
        sign, ld = np.linalg.slogdet(B)
        if not np.all(sign > 0) or not np.all(np.isfinite(ld)):
            raise NumericalError("I + W^1/2 K W^1/2 is not positive definite (non-finite kernel values?).")
        logdet += float(np.sum(ld))
        if not (keep_factors or gradient):
            continue
        Bi = np.linalg.inv(B)
        if keep_factors:
            Binv[sl] = Bi
        if gradient:
            s = sW[:, sl]
            R = s.T[:, :, None] * Bi * s.T[:, None, :]  # W^1/2 B^-1 W^1/2, (d, N, N)
            KR = np.matmul(K[None], R)
            post_var = Kdiag[None, :] - np.sum(KR * K[None], axis=2)  # diag(K - K R K) = diag((K^-1 + W)^-1)
            s2 = 0.5 * post_var.T * d3[:, sl]  # (N, d): d(-1/2 log|B|)/df^
            U[:, sl] = s2 - np.matmul(R, (K @ s2).T[:, :, None])[:, :, 0].T
            dK -= 0.5 * R.sum(axis=0)
    if gradient:
        ug = U @ g.T
        dK = dK + 0.5 * (ug + ug.T)
    value = float(np.sum(logp)) - 0.5 * float(np.sum(a * F)) - 0.5 * logdet
    return LaplaceMode(F, a, g, sW, Binv, value, dK)


def laplace_gradient(likelihood, K, Y, mask, mode: LaplaceMode) -> np.ndarray:
    """dF/dK (N, N) of the Laplace log marginal likelihood at ``mode`` (module docstring)."""
    if mode.dK is not None:
        return mode.dK
    return laplace_mode(likelihood, K, Y, mask, mode.a, gradient=True).dK


class LaplaceGPLVM(NonGaussianMixin, GPLVM, likelihoods_of=GPLVM):
    """The GP-LVM with MAP latent points and a Bernoulli or Poisson likelihood (module docstring).

    Parameters: ``X_mean`` (N, Q) and the kernel's (no noise variance).  Y is not
    centred; NaN entries (or ``observed``) are missing values (their W is 0).
    Default kernel: the ARD RBF plus a Bias.
    """

    objective_name = "log-likelihood"
    handles_missing = True

    def __init__(self, Y, latent_dim, kernel=None, init="pca", seed=0, X=None, noise_variance=None,
                 observed=None, likelihood="bernoulli"):
        lik = self._init_likelihood(likelihood, noise_variance, "GPLVM")
        LatentVariableModel.__init__(self, Y, latent_dim, kernel, init=init, observed=observed, likelihood=lik)
        start = init_data(lik, self.Y)
        X0 = initial_X(start, self.latent_dim, init, seed, X)
        specs = [self._free_spec("X_mean", X0.shape), *self._kernel_specs(self._kernel)]
        self._build_packer(specs, {"X_mean": X0, **self._kernel.params})
        self._mode_start = None

    def _mode(self, values, keep_factors=False, gradient=False):
        X = values["X_mean"]
        kern = self.kernel_at(values)
        K = kern.K(X)
        if not np.all(np.isfinite(K)):
            raise NumericalError("The kernel matrix K contains NaN or infinite values; check the parameters.")
        start = self.__dict__.get("_mode_start")
        mode = laplace_mode(self._likelihood, K, self.Y, self.observed, start, keep_factors, gradient)
        self._mode_start = mode.a  # the next evaluation starts at f = K a (replaced, never mutated)
        return kern, K, mode

    def _evaluate(self, values):
        kern, K, mode = self._mode(values, gradient=True)
        dK = mode.dK
        prior, dprior = log_prior(values["X_mean"])
        grads, dX = kern.grad_params_and_X(dK, values["X_mean"])
        grads["X_mean"] = dX + dprior
        return mode.value + prior, grads

    def log_likelihood(self) -> float:
        """Laplace's approximation of log p(Y | X) at the current parameters (no prior on X)."""
        values = self.parameters
        return self._mode(values)[2].value

    def posterior(self):
        """(kernel, X (N, Q), LaplaceMode with B_d^-1 kept) at the current parameters (cached)."""
        def build(values):
            kern, _, mode = self._mode(values, keep_factors=True)
            return kern, values["X_mean"], mode

        return self._cached(build, key="laplace")

    def _geometry_maps(self, values):
        # the metric of the latent functions f, per output: mean k(x, X) g_d and
        # cov(f_d(a), f_d(b)) = k(a, b) - k(a, X) W_d^1/2 B_d^-1 W_d^1/2 k(X, b)
        kern, X, mode = self.posterior()
        groups = [([d], mode.g[:, d:d + 1], mode.sW[:, d][:, None] * mode.Binv[d] * mode.sW[:, d][None, :])
                  for d in range(self.output_dim)]
        return [(kern, X, groups)]

    @blas_pinned
    def predict_f(self, Xnew, Xnew_variance=None):
        """Mean and variance (n, D) of the latent functions at latent points Xnew (n, Q)."""
        if Xnew_variance is not None:
            raise UnsupportedOperationError(
                "The GP-LVM predicts at point inputs only (its latents are points); use BayesianGPLVM for "
                "uncertain inputs.")
        Xnew = self._check_points(Xnew)
        kern, X, mode = self.posterior()
        Ks = kern.K(Xnew, X)  # (n, N)
        mean = Ks @ mode.g
        var = np.empty_like(mean)
        kdiag = kern.K_diag(Xnew)
        for d in range(self.output_dim):
            v = mode.sW[:, d][:, None] * Ks.T  # (N, n)
            var[:, d] = kdiag - np.sum(v * (mode.Binv[d] @ v), axis=0)
        return mean, np.maximum(var, 0.0)

    # ---- projection of new rows ---------------------------------------------------------------
    def projection_problem(self, Yc, mask):
        """The MAP point of each new row: sum over its observed outputs of log p(y*_d | x), the
        likelihood's predictive density under f_d(x) (Bernoulli: log Phi((2y - 1) mean / sqrt(1 + var))),
        plus log N(x | 0, I) (:class:`LaplaceProjection`)."""
        self._likelihood.check(Yc, mask, name="Ynew")
        kern, X, mode = self.posterior()
        return LaplaceProjection(self._likelihood, kern, X, mode, Yc, mask)

    def __repr__(self):
        return (f"GPLVM(N={self.num_data}, D={self.output_dim}, Q={self.latent_dim}, "
                f"likelihood={self.likelihood!r}, kernel={self._kernel!r})")


class LaplaceProjection(PointProjection):
    """Per new row, log p(y*_O | x) + log N(x | 0, I) over a latent point x (the projection protocol
    of :func:`engine.infer.infer_latent`).

    p(y*_d | x) = int p(y | f) N(f | mean_d(x), var_d(x)) df under the Laplace posterior of
    f_d at x: mean_d = k(x)^T g_d, var_d = k(x, x) - v^T B_d^-1 v (v = W_d^1/2 * k(x)), whose
    gradient w.r.t. k(x) is g_d and -2 R_d k(x) (R_d = W_d^1/2 B_d^-1 W_d^1/2).
    ``log_density`` is log p(y*_O | x*) at the MAP point (no integration over x*).  The
    starts, scales and unpacking are the point models' (:class:`PointProjection`); no
    first stage (the predictive variance of a probability does not reward being far away).
    """

    def __init__(self, likelihood, kern, X, mode, Y, mask):
        self.likelihood, self.kern, self.X, self.mode = likelihood, kern, X, mode
        self.X_train = X
        self.Y, self.mask = Y, mask
        self.Q = X.shape[1]

    def _density(self, rows, x, with_grad):
        Ks = self.kern.K(x, self.X)  # (r, N)
        mean = Ks @ self.mode.g
        D = self.mode.g.shape[1]
        r = x.shape[0]
        var = np.empty((r, D))
        V = np.empty((D, self.X.shape[0], r))  # R_d k(x) per output, for the gradient
        kdiag = self.kern.K_diag(x)
        for d in range(D):
            sW = self.mode.sW[:, d][:, None]
            v = sW * Ks.T
            Bv = self.mode.Binv[d] @ v
            var[:, d] = kdiag - np.sum(v * Bv, axis=0)
            if with_grad:
                V[d] = sW * Bv
        clipped = var < 0.0
        var = np.where(clipped, 0.0, var)
        lpd, dmean, dvar = self.likelihood.log_predictive_density(self.Y[rows], mean, var, self.mask[rows])
        if not with_grad:
            return lpd.sum(axis=1), None
        dvar = np.where(clipped, 0.0, dvar)
        dKs = dmean @ self.mode.g.T - 2.0 * np.einsum("rd,dnr->rn", dvar, V)
        grad = self.kern.grad_X(dKs, x, self.X) + self.kern.grad_X_diag(dvar.sum(axis=1), x)
        return lpd.sum(axis=1), grad

    def value_and_grad(self, rows, theta, *, with_grad=True):
        x = np.ascontiguousarray(theta)
        density, grad = self._density(rows, x, with_grad)
        value = density - 0.5 * np.sum(x * x, axis=1) - 0.5 * self.Q * np.log(2.0 * np.pi)
        value = np.where(np.isfinite(value), value, -np.inf)
        return value, (grad - x if with_grad else None)

    def log_density(self, theta) -> np.ndarray:
        return self._density(np.arange(theta.shape[0]), np.ascontiguousarray(theta), False)[0]

    def first_stage(self):
        return None
