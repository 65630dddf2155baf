"""Variational Gaussian process dynamical systems (Damianou, Titsias & Lawrence 2011).

The Bayesian GP-LVM with the latent points coupled in time: a GP prior over
each latent dimension,

    p(X | t) = prod_q N(x_q | 0, K_t),   K_t = k_t(t, t)   (N, N),

and a variational q(X) = prod_q N(x_q | mu_q, S_q) in the paper's
reparameterisation (section 3.2), O(NQ) free parameters:

    mu_q = K_t mu_bar_q,       S_q = (K_t^-1 + Lambda_q)^-1,   Lambda_q = diag(lambda_q) > 0.

The bound is the Bayesian GP-LVM's data term with the psi statistics of the
marginals q(x_n) = N(mu_n, diag(S_1[n, n], ..., S_Q[n, n])), minus
sum_q KL(q(x_q) || N(0, K_t)).

Nothing here inverts K_t (a smooth time kernel makes it numerically
singular).  With B_q = I + Lambda^1/2 K_t Lambda^1/2 (eigenvalues >= 1),
L_B = chol(B_q) and R_q = Lambda^1/2 B_q^-1 Lambda^1/2:

    S_q  = K_t - K_t R_q K_t = Lambda^-1/2 (I - B_q^-1) Lambda^-1/2,
    P_q  = K_t^-1 S_q = I - R_q K_t = Lambda^1/2 B_q^-1 Lambda^-1/2,
    KL_q = 1/2 (tr B_q^-1 + mu_bar_q^T K_t mu_bar_q - N + log|B_q|).

Gradients (g = dF/dmu_q, h = dF/d diag S_q from the data term, (N,)):

    dF/dmu_bar_q = K_t (g - mu_bar_q)
    dF/dlambda_q = -(S_q o S_q)(h + lambda_q / 2)
    dF/dK_t      = sum_q g mu_bar_q^T + P_q diag(h) P_q^T
                   - 1/2 (mu_bar_q mu_bar_q^T + R_q - P_q Lambda_q P_q^T)

and the time kernel's parameters follow from dF/dK_t.  The predictive
marginal of x_q at new times t* (interpolation and extrapolation) is

    mean = k_*^T mu_bar_q,   variance = k_** - |L_B^-1 Lambda^1/2 k_*|^2,

which returns to the prior variance k_** far from the data.  Each latent
dimension costs O(N^3) per evaluation (the paper's cost), so this model is
meant for series of up to a few thousand frames.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from .. import kernels as _kernels
from .. import psi
from .._threads import blas_pinned
from ..errors import ConfigurationError, NumericalError, ShapeError, UnsupportedKernelError
from ..linalg import chol_inverse, tri_solve, try_cholesky
from ..likelihoods import require_gaussian
from ..transforms import POSITIVE, ParameterSpec
from ._shared import as_times, kernel_from_json, kernel_json, static_bayesian
from .base import initial_X
from .collapsed import CollapsedModel, inducing_subset

#: Prefix of the time kernel's parameter names ("time.variance", "time.lengthscales", ...).
TIME_PREFIX = "time."
#: Key under which one evaluation's factorisations of the time prior travel with the values.
_FACTORS = "_time_factors"
#: Smallest marginal variance handed to the psi statistics (guards round-off in K_t - K_t R K_t).
_MIN_VARIANCE = 1e-12


class TimeFactors(NamedTuple):
    """The reparameterised q(X) at one set of parameters.

    K: (N, N) time kernel matrix; mu, S: (N, Q) marginal means and variances;
    Sfull, Binv: (Q, N, N) full covariances S_q and B_q^-1; r: (N, Q)
    sqrt(lambdas); kl: float, sum_q KL(q(x_q) || N(0, K_t)); dkl_mu_bar,
    dkl_lambdas: (N, Q) and dkl_K: (N, N), its gradients.
    """

    K: np.ndarray
    mu: np.ndarray
    S: np.ndarray
    Sfull: np.ndarray
    Binv: np.ndarray
    r: np.ndarray
    kl: float
    dkl_mu_bar: np.ndarray
    dkl_lambdas: np.ndarray
    dkl_K: np.ndarray


def _sym(A):
    return 0.5 * (A + A.T)


def _chol_B(K, lam):
    """L_B = chol(I + Lambda^1/2 K Lambda^1/2), (N, N), and sqrt(lam)."""
    r = np.sqrt(lam)
    B = r[:, None] * K * r[None, :]
    B[np.diag_indices_from(B)] += 1.0
    LB = try_cholesky(B)
    if LB is None:  # eigenvalues >= 1 unless K is not positive semi-definite at all
        raise NumericalError("I + Lambda^1/2 K_t Lambda^1/2 could not be factorised; "
                             "the time kernel matrix is not positive semi-definite.")
    return LB, r


def time_factors(K, mu_bar, lambdas) -> TimeFactors:
    """Marginals of q(X), the KL to the GP prior and its gradients (module docstring).

    K: (N, N) time kernel matrix; mu_bar, lambdas: (N, Q), lambdas > 0.
    Everything comes from B^-1 (Lambda = diag(lambda_q), r = sqrt(lambda_q)):
    S = Lambda^-1/2 (I - B^-1) Lambda^-1/2 and P = K^-1 S = Lambda^1/2 B^-1 Lambda^-1/2,
    so one Cholesky, its inverse and one product per latent dimension.
    """
    N, Q = mu_bar.shape
    mu = K @ mu_bar
    S = np.empty((N, Q))
    Sfull = np.empty((Q, N, N))
    Binvs = np.empty((Q, N, N))
    dlam = np.empty((N, Q))
    dK = 0.5 * (mu_bar @ mu_bar.T)
    kl = 0.5 * float(np.sum(mu_bar * mu)) - 0.5 * N * Q
    eye = np.eye(N)
    for q in range(Q):
        lam = lambdas[:, q]
        LB, r = _chol_B(K, lam)
        Binv = chol_inverse(LB)
        ri = 1.0 / r
        Sq = ri[:, None] * (eye - Binv) * ri[None, :]
        Sfull[q], Binvs[q] = Sq, Binv
        S[:, q] = np.maximum(np.diag(Sq), _MIN_VARIANCE)
        kl += 0.5 * float(np.trace(Binv)) + float(np.sum(np.log(np.diag(LB))))
        dlam[:, q] = 0.5 * (Sq * Sq) @ lam
        # dKL/dK = 1/2 (mu_bar mu_bar^T + R - P Lambda P^T) with R = Lambda^1/2 B^-1 Lambda^1/2
        # and P Lambda P^T = Lambda^1/2 B^-2 Lambda^1/2
        dK += 0.5 * r[:, None] * (Binv - Binv @ Binv) * r[None, :]
    return TimeFactors(K, mu, S, Sfull, Binvs, np.sqrt(lambdas), kl, mu.copy(), dlam, _sym(dK))


def rescaled_kernel(kernel, c: float):
    """``kernel`` over inputs divided by c: k'(x / c, x' / c) = k(x, x').

    RBF lengthscales are divided by c, linear variances multiplied by c^2;
    Bias and White do not depend on the inputs.  Other kernels raise
    :class:`UnsupportedKernelError` (they have no psi statistics either).
    """
    spec = kernel.to_spec()

    def scale(value, factor):
        return [v * factor for v in value] if isinstance(value, list) else value * factor

    def walk(part):
        if part["type"] == "sum":
            for p in part["parts"]:
                walk(p)
        elif part["type"] == "rbf":
            part["params"]["lengthscales"] = scale(part["params"]["lengthscales"], 1.0 / c)
        elif part["type"] == "linear":
            part["params"]["variances"] = scale(part["params"]["variances"], c * c)
        elif part["type"] not in ("bias", "white"):
            raise UnsupportedKernelError(f"Cannot rescale the inputs of a {part['type']} kernel.")

    walk(spec)
    return _kernels.kernel_from_spec(spec)


def default_time_kernel(t, X0):
    """RBF over t whose lengthscale best explains the initial latents X0 (N, Q) as GP draws.

    A grid of lengthscales from twice the median spacing of the times to
    their span is scored by sum_q log N(x0_q | 0, K_t + 0.1 I); the best is
    kept.  Variance 1 matches the unit variance of the PCA initialisation.
    """
    ts = np.sort(t[:, 0])
    gaps = np.diff(ts)
    gaps = gaps[gaps > 0]
    span = float(ts[-1] - ts[0])
    if gaps.size == 0 or span <= 0:
        return _kernels.RBF(1, variance=1.0, lengthscales=1.0)
    lo = 2.0 * float(np.median(gaps))
    best, best_ls = -np.inf, max(lo, span / 10.0)
    for ls in np.geomspace(lo, max(span, lo * 1.01), 16):
        K = _kernels.RBF(1, variance=1.0, lengthscales=ls).K(t)
        K[np.diag_indices_from(K)] += 0.1
        L = try_cholesky(K)
        if L is None:
            continue
        a = tri_solve(L, X0)
        score = -0.5 * float(np.sum(a * a)) - X0.shape[1] * float(np.sum(np.log(np.diag(L))))
        if score > best:
            best, best_ls = score, float(ls)
    return _kernels.RBF(1, variance=1.0, lengthscales=best_ls)


class DynamicalBGPLVM(CollapsedModel):
    """Bayesian GP-LVM with a GP prior over time on the latent points (variational GPDS).

    ``DynamicalBGPLVM(Y, t, latent_dim, num_inducing=30, time_kernel=None)``:
    Y (N, D) frames, t (N,) or (N, 1) their times (any order, any spacing).
    ``time_kernel``: a kernel over one input from :mod:`engine.kernels` (RBF,
    Matérn, sums with White or Bias, ...); default an RBF whose lengthscale is
    chosen from the initial latents (:func:`default_time_kernel`); its
    parameters are learnt with the rest.  ``kernel``: the mapping kernel over
    the latent space (default ARD RBF, initialised as for the Bayesian GP-LVM).
    (The bound does not change when X, Z and the mapping kernel's
    lengthscales are scaled by c and the time kernel's variance by c^2; the
    variance is learnt all the same: fixing it at 1 made L-BFGS stop at
    lower bounds on the benchmark series.)

    Parameters: ``mu_bar`` (N, Q), ``lambdas`` (N, Q) > 0, ``Z`` (M, Q), the
    mapping kernel's parameters, the time kernel's parameters prefixed
    ``time.`` and ``noise_variance``.  ``X_mean`` and ``X_variance`` (N, Q)
    are the marginal moments of q(x_n) (read-only properties).

    Initialisation: latent means from ``init`` (PCA by default) smoothed by the
    time prior, mu_bar = (K_t + 0.01 I)^-1 X0 (one Cholesky solve), and
    ``lambdas`` constant (default 10: marginal variances below 0.1 at the start).
    """

    objective_name = "ELBO"
    #: The marginals of q(X) are coupled in time; rows with missing outputs are not supported.
    handles_missing = False

    def __init__(self, Y, t, latent_dim, num_inducing=30, time_kernel=None, kernel=None, init="pca", seed=0,
                 X=None, lambdas=10.0, Z=None, noise_variance=None, likelihood="gaussian"):
        require_gaussian(likelihood, "DynamicalBGPLVM")
        super().__init__(Y, latent_dim, kernel, noise_variance=noise_variance, init=init)
        psi.check_supported(self._kernel)
        self.t = as_times(t, self.num_data)
        X0 = initial_X(self.Y, self.latent_dim, init, seed, X)
        if time_kernel is None:
            time_kernel = default_time_kernel(self.t, X0)
        if not isinstance(time_kernel, _kernels.Kernel):
            raise ConfigurationError(f"Expected time_kernel as an engine.kernels kernel, "
                                     f"got {type(time_kernel).__name__} instead.")
        if time_kernel.input_dim != 1:
            raise ShapeError(f"Expected a time kernel over one input (input_dim=1), "
                             f"got input_dim={time_kernel.input_dim} instead.")
        self._time_kernel = time_kernel.copy()
        self._time_names = list(time_kernel.params)
        K0 = self._time_kernel.K(self.t)
        Kreg = K0 + 0.01 * max(float(np.mean(np.diag(K0))), 1e-12) * np.eye(self.num_data)
        L0 = try_cholesky(Kreg)
        if L0 is None:
            raise NumericalError("The time kernel matrix could not be factorised at initialisation; "
                                 "check the times and the time kernel.")
        mu_bar0 = tri_solve(L0, tri_solve(L0, X0), trans=True)
        lam0 = np.broadcast_to(np.asarray(lambdas, dtype=float), X0.shape).copy()
        Z0 = inducing_subset(X0, num_inducing, seed) if Z is None else np.array(Z, dtype=float)
        self.num_inducing = Z0.shape[0]
        specs = [self._free_spec("mu_bar", X0.shape), ParameterSpec("lambdas", X0.shape, POSITIVE),
                 self._free_spec("Z", Z0.shape), *self._kernel_specs(self._kernel),
                 *[ParameterSpec(TIME_PREFIX + name, np.shape(value), POSITIVE)
                   for name, value in self._time_kernel.params.items()],
                 self._noise_spec()]
        values = {"mu_bar": mu_bar0, "lambdas": lam0, "Z": Z0, "noise_variance": self._initial_noise_variance,
                  **self._kernel.params,
                  **{TIME_PREFIX + name: value for name, value in self._time_kernel.params.items()}}
        self._build_packer(specs, values)

    # ---- the time prior -------------------------------------------------------------
    def time_kernel_at(self, values: dict):
        """A copy of the time kernel with its parameters taken from ``values``."""
        return self._time_kernel.with_params({name: values[TIME_PREFIX + name] for name in self._time_names})

    @property
    def time_kernel(self):
        """A copy of the time kernel at the current parameters."""
        return self.time_kernel_at(self.parameters)

    def _factors(self, values) -> TimeFactors:
        fac = values.get(_FACTORS)
        if fac is None:
            K = self.time_kernel_at(values).K(self.t)
            fac = time_factors(K, values["mu_bar"], values["lambdas"])
        return fac

    def marginals(self):
        """(X_mean (N, Q), X_variance (N, Q)): the moments of q(x_n) at the current parameters."""
        fac = self._factors(self.parameters)
        return fac.mu, fac.S

    @property
    def X_mean(self):
        """Marginal means of q(X), (N, Q)."""
        return self.marginals()[0]

    @property
    def X_variance(self):
        """Marginal variances of q(X), (N, Q)."""
        return self.marginals()[1]

    # ---- the CollapsedModel contract ---------------------------------------------------
    def _evaluate(self, values):
        # factorise the time prior once per evaluation; the three hooks below read it
        values = {**values, _FACTORS: self._factors(values)}
        return super()._evaluate(values)

    def _psi_forward(self, kern, values):
        fac = self._factors(values)
        return psi.compute(kern, values["Z"], fac.mu, fac.S)

    def _psi_backward(self, kern, values, dpsi0, dPsi1, dPsi2):
        fac = self._factors(values)
        g = psi.gradients(kern, values["Z"], fac.mu, fac.S, dpsi0, dPsi1, dPsi2)
        mu_bar = values["mu_bar"]
        # through mu = K mu_bar and S_q = (K^-1 + Lambda_q)^-1
        dK = g.mu @ mu_bar.T
        dlam = np.empty_like(g.S)
        for q in range(mu_bar.shape[1]):
            h = g.S[:, q]
            Binv, Sq, r = fac.Binv[q], fac.Sfull[q], fac.r[:, q]
            # P diag(h) P^T with P = Lambda^1/2 B^-1 Lambda^-1/2
            dK += r[:, None] * ((Binv * (h / (r * r))[None, :]) @ Binv) * r[None, :]
            dlam[:, q] = -(Sq * Sq) @ h
        grads = {**g.params, "mu_bar": fac.K @ g.mu, "lambdas": dlam, "Z": g.Z}
        grads.update(self._time_grads(values, _sym(dK)))
        return grads

    def _latent_term(self, values):
        fac = self._factors(values)
        grads = {"mu_bar": -fac.dkl_mu_bar, "lambdas": -fac.dkl_lambdas}
        grads.update(self._time_grads(values, -fac.dkl_K))
        return -fac.kl, grads

    def _time_grads(self, values, dK):
        g = self.time_kernel_at(values).grad_params(dK, self.t)
        return {TIME_PREFIX + name: value for name, value in g.items()}

    def kl(self) -> float:
        """sum_q KL(q(x_q) || N(0, K_t)) at the current parameters, nats."""
        return self._factors(self.parameters).kl

    def elbo(self) -> float:
        """The bound (data term minus the KL), nats, with all constants."""
        return self.objective()

    # ---- new times ------------------------------------------------------------------
    @blas_pinned
    def latent_at_times(self, t_new):
        """q(x(t*)) at new times t_new (n,) or (n, 1): mean (n, Q) and variance (n, Q).

        The GP prior conditioned through q(X): mean k_*^T mu_bar_q, variance
        k_** - k_*^T R_q k_* (module docstring), per latent dimension; far
        from the data the variance returns to the prior's k_**.
        """
        t_new = as_times(t_new, name="t_new")
        values = self.parameters
        tk = self.time_kernel_at(values)
        K = tk.K(self.t)
        Ks = tk.K(self.t, t_new)  # (N, n)
        kss = tk.K_diag(t_new)
        mean = Ks.T @ values["mu_bar"]
        var = np.empty_like(mean)
        for q in range(self.latent_dim):
            LB, r = _chol_B(K, values["lambdas"][:, q])
            a = tri_solve(LB, r[:, None] * Ks)
            var[:, q] = kss - np.sum(a * a, axis=0)
        return mean, np.maximum(var, 0.0)

    def predict_at_times(self, t_new, include_noise=False):
        """Outputs at new times: mean (n, D) and variance (n, D), integrating over q(x(t*)).

        ``include_noise`` adds the noise variance.  Between and beyond the
        observed times the latent uncertainty grows, and so does the output's.
        """
        mean, var = self.latent_at_times(t_new)
        return self.predict(mean, np.maximum(var, _MIN_VARIANCE), include_noise=include_noise)

    # ---- prediction and projection through the marginals ----------------------------------
    def prior_scale(self) -> float:
        """c = sqrt(mean_n k_t(t_n, t_n)): the prior sd of a latent point at a time not given."""
        return float(np.sqrt(np.mean(self.time_kernel.K_diag(self.t))))

    def static_model(self, scale: float = 1.0):
        """A :class:`BayesianGPLVM` at this model's marginals q(x_n), Z, kernel and noise.

        With ``scale`` c the latent space is divided by c (means, Z by c,
        variances by c^2, the mapping kernel rescaled to match), which leaves
        its data term, predictions and Kmm unchanged.
        """
        values = self.parameters
        fac = self._factors(values)
        kern = rescaled_kernel(self.kernel_at(values), scale)
        return static_bayesian(self.Y + self.Y_mean, kern, fac.mu / scale, fac.S / scale**2, values["Z"] / scale,
                               values["noise_variance"], self.jitter)

    def infer_latent(self, Ynew, observed=None, **options):
        """Project new frames of unknown time; returns an :class:`engine.infer.LatentInference`.

        Without a time, the prior of x* is the GP prior's marginal
        N(0, c^2 I), c = :meth:`prior_scale` (exact for a stationary time
        kernel): :func:`engine.infer.infer_latent` runs on the static model in
        units of c (where that prior is its N(0, I)) and the moments are
        scaled back.  ``log_density`` is that model's, the same in both units.
        """
        c = self.prior_scale()
        res = self.static_model(c).infer_latent(Ynew, observed=observed, **options)
        return dataclasses.replace(res, mean=res.mean * c, variance=res.variance * c**2)

    def log_density(self, Ynew, observed=None, **options):
        return self.infer_latent(Ynew, observed=observed, **options).log_density

    def snapshot_state(self) -> dict:
        values = self.parameters
        fac = self._factors(values)
        return {"parameters": values, "X_mean": fac.mu, "X_variance": fac.S,
                "relevance": np.asarray(self.kernel_at(values).relevance, dtype=float)}

    def copy(self):
        clone = super().copy()
        clone._time_kernel = self._time_kernel.copy()
        return clone

    # ---- files (engine.io) --------------------------------------------------------------
    def _saved_arrays(self) -> dict:
        return {"t": self.t.copy(), "time_kernel_spec": kernel_json(self._time_kernel)}

    @classmethod
    def _from_saved(cls, Y, arrays, params):
        try:
            latent_dim = int(arrays["latent_dim"])
            kernel = kernel_from_json(arrays["kernel_spec"])
            t = arrays["t"]
            time_kernel = kernel_from_json(arrays["time_kernel_spec"])
            Z = params["Z"]
        except (KeyError, ValueError, TypeError) as exc:
            raise ShapeError(f"missing or bad entry {exc}") from None
        return cls(Y, t, latent_dim, kernel=kernel, time_kernel=time_kernel, X=np.zeros((Y.shape[0], latent_dim)),
                   Z=Z)

    def __repr__(self):
        return (f"{type(self).__name__}(N={self.num_data}, D={self.output_dim}, Q={self.latent_dim}, "
                f"kernel={self._kernel!r}, time_kernel={self._time_kernel!r})")
