"""The Bayesian GP-LVM trained by stochastic variational inference (SVI).

Hensman, Fusi & Lawrence (2013), "Gaussian processes for big data", applied
to the Bayesian GP-LVM of Titsias & Lawrence (2010).  Instead of collapsing
q(u), the inducing outputs get an explicit Gaussian, whitened: u_d = L v_d
with L = chol(Kmm), q(v_d) = N(m_d, S) for every output d, one shared
S = R R^T (R lower triangular).  Per row, q(x_n) = N(mu_n, diag S_n) as in
the collapsed model.  The bound

    F = -N D/2 log(2 pi) + N D/2 log beta - beta/2 tr(Y^T Y)
        + beta tr(m^T V) - beta D/2 psi0 + beta D/2 tr(A)
        - beta D/2 tr(S A) - beta/2 tr(m^T A m)
        - KL(q(v) || N(0, I)) - KL(q(X) || N(0, I)),

    V = L^-1 P, P = Psi1^T Y (M, D), A = L^-1 Psi2 L^-T (M, M),
    KL(q(v)) = 1/2 (D tr S + ||m||^2 - D M - D log|S|),

is *linear* in the row sums psi0, P, Psi2, tr(Y^T Y) and KL(q(X)).  So a
minibatch b of B rows, each sum scaled by N / B, gives an unbiased estimate
of F; over the batches of an equal-sized partition of the rows the estimates
average to F exactly.  At the optimum of q(v) for fixed everything else,
S = (I + beta A)^-1 and m = beta S V, F equals the collapsed bound of
:class:`~engine.BayesianGPLVM` (the same jitter on Kmm).

One SVI iteration (:func:`engine.svi.fit_svi`, the loop; the updates of q(u)
and q(x_n) are this model's) reads B rows of Y, computes their psi statistics
and the estimate's gradients, and then

* q(v): a natural-gradient step of size ``natgrad_step`` (rho): the natural
  parameters (S^-1, S^-1 m) move a fraction rho towards the minibatch
  optimum (I + beta A_b, beta V_b) - the update of Hensman et al. (2013),
  with a constant rho by default (a decaying one averages stale targets);
* kernel parameters, Z and the noise: one Adam step on the estimate, at a
  rate that decays over the fit, in log coordinates for the positive ones;
* q(x_n) of the minibatch rows: natural-gradient steps of size
  ``local_step`` on each row's own term (no per-row optimiser state):
  1/S_n <- (1 - rho) / S_n + rho (1 - 2 dE_n/dS_n),
  mu_n <- mu_n + rho S_n (dE_n/dmu_n - mu_n), where E_n is the row's
  expected log-likelihood (the prior N(0, I) gives the 1 and the -mu_n).
  This is Newton's step with the expected Hessian (Price's theorem:
  E[d2 log p / dx2] = 2 dE/dS); the target precision is kept >= 1/2 and a
  mean moves by at most one prior standard deviation per step.

Memory: the local parameters (N, Q) twice, plus O(B D + B M + M^2 + M D)
per iteration; Y may be a numpy memmap larger than memory and only the B
rows of the minibatch are read per iteration (sorted indices).  The full
bound (:meth:`objective`, :meth:`objective_gradients`) is evaluated over
fixed row chunks of ``chunk_size`` rows in a fixed order.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import optimize, psi, svi
from .._cancel import checkpoint
from .._threads import blas_pinned
from ..backends._rows import ROW_CHUNK
from ..bound import cholesky_backward, gaussian_kl_rows
from ..errors import ConfigurationError, ShapeError
from ..linalg import FactorisationError, chol_inverse, cholesky, rows_dot, start_jitter, tri_solve, try_cholesky
from ..predictor import Predictor, PredictorGroup
from ..psi.point import PointPsi
from ..transforms import POSITIVE, ParameterPacker, ParameterSpec
from ..validation import integer
from .base import LatentVariableModel, initial_X
from .collapsed import add_grads, initial_Z
from .data_source import ChunkedRows
from .projection import QxProjection

LOG_2PI = np.log(2.0 * np.pi)

#: Names of the per-row (local) parameters; every other parameter is global.
LOCAL_NAMES = ("X_mean", "X_variance")

#: Smallest precision a local natural-gradient step aims at (largest variance 1 / this).
_MIN_TARGET_PRECISION = 0.5
#: Largest change of a latent mean in one local step (prior standard deviations).
_MAX_MEAN_STEP = 1.0


# ------------------------------------------------------------------ functional core


class SuffStats(NamedTuple):
    """Row sums the bound depends on (already scaled for a minibatch estimate).

    psi0: float; P: (M, D) = Psi1^T Y; Psi2: (M, M); trYY: float = sum of Y^2;
    kl: float = KL(q(x_n) || N(0, I)) summed over the rows.
    """

    psi0: float
    P: np.ndarray
    Psi2: np.ndarray
    trYY: float
    kl: float


class WhitenedPosterior(NamedTuple):
    """What prediction needs of the explicit q(u) (u = L v, q(v) = N(m, R R^T)).

    kernel: a copy at the current parameters; Z: (M, Q) inducing inputs;
    L: (M, M) chol(Kmm + jitter I); Mw: (M, D) = L^-T m, so the predictive mean
    at x* is k*M Mw (before the data mean); Rw: (M, M) = L^-T R, so the variance
    is k** - |L^-1 kM*|^2 + |Rw^T kM*|^2; beta: noise precision.
    """

    kernel: object
    Z: np.ndarray
    L: np.ndarray
    Mw: np.ndarray
    Rw: np.ndarray
    beta: float


class UncollapsedBound(NamedTuple):
    """Value of F (nats, KL(q(X)) included) and its gradients w.r.t. every input.

    dpsi0: float; dP: (M, D); dPsi2: (M, M) symmetric; dKmm: (M, M) symmetric;
    dbeta: float; dq_mu: (M, D); dq_sqrt: (M, M) lower triangular;
    nat_target: (Lambda (M, M), eta (M, D)), the natural parameters of the
    optimal q(v) for these statistics (what a natural-gradient step moves to).
    """

    value: float
    dpsi0: float
    dP: np.ndarray
    dPsi2: np.ndarray
    dKmm: np.ndarray
    dbeta: float
    dq_mu: np.ndarray
    dq_sqrt: np.ndarray
    nat_target: tuple


def _whiten(L, Psi2):
    """L^-1 Psi2 L^-T, symmetrised, (M, M)."""
    A = tri_solve(L, tri_solve(L, Psi2).T).T
    return 0.5 * (A + A.T)


def _unwhiten(L, G):
    """L^-T G L^-1, symmetrised, (M, M): pulls a gradient w.r.t. A back to Psi2."""
    out = tri_solve(L, tri_solve(L, G, trans=True).T, trans=True).T
    return 0.5 * (out + out.T)


def uncollapsed_bound(stats: SuffStats, L: np.ndarray, q_mu: np.ndarray, q_sqrt: np.ndarray,
                      beta: float, num_data: float) -> UncollapsedBound:
    """The SVI bound F (module docstring) from sufficient statistics, and its gradients.

    L: (M, M) chol(Kmm + jitter I); q_mu: (M, D) whitened means m; q_sqrt: (M, M),
    only its lower triangle R is used (S = R R^T); beta: noise precision;
    num_data: N of the constant terms (the full data size, also for a minibatch).
    """
    M, D = q_mu.shape
    R = np.tril(q_sqrt)
    S = R @ R.T
    A = _whiten(L, stats.Psi2)
    V = tri_solve(L, stats.P)
    Am = A @ q_mu
    trA = float(np.trace(A))
    trSA = float(np.sum(S * A))
    mAm = float(np.sum(q_mu * Am))
    mV = float(np.sum(q_mu * V))
    diagR = np.diag(R)
    kl_u = 0.5 * (D * float(np.trace(S)) + float(np.sum(q_mu * q_mu)) - D * M
                  - 2.0 * D * float(np.sum(np.log(np.abs(diagR)))))
    value = (-0.5 * num_data * D * LOG_2PI + 0.5 * num_data * D * np.log(beta) - 0.5 * beta * stats.trYY
             + beta * mV - 0.5 * beta * D * stats.psi0 + 0.5 * beta * D * trA
             - 0.5 * beta * D * trSA - 0.5 * beta * mAm - kl_u - stats.kl)
    eye = np.eye(M)
    dA = 0.5 * beta * D * (eye - S) - 0.5 * beta * (q_mu @ q_mu.T)
    dA = 0.5 * (dA + dA.T)
    dV = beta * q_mu
    dPsi2 = _unwhiten(L, dA)
    dP = tri_solve(L, dV, trans=True)
    # F through L at fixed Psi2 and P (see engine.bound): dF = tr(Gamma L^-1 dL)
    dKmm = cholesky_backward(L, -(2.0 * A @ dA + V @ dV.T))
    dbeta = (0.5 * num_data * D / beta - 0.5 * stats.trYY + mV - 0.5 * D * stats.psi0
             + 0.5 * D * trA - 0.5 * D * trSA - 0.5 * mAm)
    dq_mu = beta * V - beta * Am - q_mu
    dS = -0.5 * beta * D * A - 0.5 * D * eye
    dq_sqrt = np.tril(2.0 * dS @ R) + np.diag(D / diagR)
    nat_target = (eye + beta * A, beta * V)
    return UncollapsedBound(float(value), -0.5 * beta * D, dP, dPsi2, dKmm, float(dbeta), dq_mu, dq_sqrt,
                            nat_target)


def optimal_q(L: np.ndarray, P: np.ndarray, Psi2: np.ndarray, beta: float):
    """(q_mu (M, D), q_sqrt (M, M)) maximising F for fixed statistics: S = (I + beta A)^-1, m = beta S V."""
    Lam = np.eye(L.shape[0]) + beta * _whiten(L, Psi2)
    return _from_natural(Lam, beta * tri_solve(L, P))


def _from_natural(Lam, eta):
    """(m, R) of the Gaussian with precision Lam (M, M) and Lam m = eta (M, D)."""
    C = try_cholesky(0.5 * (Lam + Lam.T))
    if C is None:
        raise FactorisationError("The precision of q(u) is not numerically positive definite.")
    S = chol_inverse(C)
    R = try_cholesky(0.5 * (S + S.T))
    if R is None:
        raise FactorisationError("The covariance of q(u) is not numerically positive definite.")
    m = tri_solve(C, tri_solve(C, eta), trans=True)
    return m, R


def _to_natural(q_mu, q_sqrt):
    """(Lam, eta) = (S^-1, S^-1 m) of q(v) = N(m, R R^T)."""
    R = np.tril(q_sqrt)
    Ri = tri_solve(R, np.eye(R.shape[0]))  # R^-1
    Lam = Ri.T @ Ri
    return 0.5 * (Lam + Lam.T), Lam @ q_mu


def _local_natgrad(mu, S, gmu, gS, rho, move_mu=True, move_S=True):
    """One natural-gradient step of size rho on q(x_n) = N(mu_n, diag S_n) (module docstring).

    gmu, gS: (B, Q) gradients of each row's expected log-likelihood (prior excluded).
    """
    target = np.maximum(1.0 - 2.0 * gS, _MIN_TARGET_PRECISION)
    S_new = 1.0 / ((1.0 - rho) / S + rho * target) if move_S else S
    mu_new = mu + np.clip(rho * S_new * (gmu - mu), -_MAX_MEAN_STEP, _MAX_MEAN_STEP) if move_mu else mu
    return mu_new, S_new


# ------------------------------------------------------------------ the model


class StochasticBayesianGPLVM(LatentVariableModel):
    """Bayesian GP-LVM with an explicit q(u), trained on minibatches of rows (SVI).

    ``StochasticBayesianGPLVM(Y, latent_dim, num_inducing=50, batch_size=256)``;
    ``engine.fit(m, optimizer="svi", max_iters=...)`` or ``m.fit(...)`` trains it.
    Y (N, D) may be a numpy memmap: it is never copied nor loaded as a whole
    (the mean and the PCA start come from one pass over row chunks).

    Parameters: ``X_mean`` (N, Q), ``X_variance`` (N, Q) > 0, ``Z`` (M, Q), the
    kernel's parameters, ``noise_variance``, ``q_mu`` (M, D) and ``q_sqrt``
    (M, M; its lower triangle is the Cholesky factor of S) of the whitened
    q(v), v = L^-1 u.  The objective (:meth:`objective`) is the full bound.
    ``backend`` exists only to refuse one (ConfigurationError): SVI runs in-process.
    ``likelihood``: "gaussian" (this model), or "bernoulli" / "poisson", which
    build the same bound with a non-Gaussian likelihood
    (:class:`~engine.models.stochastic_nongaussian.NonConjugateStochasticBGPLVM`).
    """

    objective_name = "ELBO"
    #: What ``engine.fit(m)`` and ``m.fit()`` use when no optimiser is named.
    default_optimizer = "svi"
    #: SVI iterations for which the noise variance is held at the start of a fit.
    warm_up_iters = 200
    #: q(u)'s optimum over all rows is closed-form (:meth:`reset_q_u`), so :meth:`refine` costs about
    #: two chunked passes over Y and ``fit_svi`` polishes with it by default.
    closed_form_q_u = True

    def __init__(self, Y, latent_dim, num_inducing=50, batch_size=256, kernel=None, init="pca", seed=0,
                 X=None, X_variance=0.5, Z=None, noise_variance=None, chunk_size=ROW_CHUNK, backend=None,
                 likelihood="gaussian"):
        if backend is not None:
            raise ConfigurationError(
                "StochasticBayesianGPLVM takes no backend: each SVI step works on one minibatch of rows, "
                "too little to ship to a cluster and back per step. For a dask cluster use "
                "BayesianGPLVM(Y, ..., backend=engine.DaskBackend(client)); train this model in-process.")
        source = ChunkedRows(Y, chunk_size)  # a memmap stays a memmap: its rows are read chunk by chunk
        super().__init__(None, latent_dim, kernel, noise_variance=noise_variance, init=init, source=source)
        psi.check_supported(self._kernel)
        self.batch_size = integer(batch_size, "batch_size")
        self.chunk_size = source.chunk_size
        self.seed = seed
        X0 = initial_X(source, self.latent_dim, init, seed, X)
        S0 = np.broadcast_to(np.asarray(X_variance, dtype=float), X0.shape).copy()
        Z0 = initial_Z(X0, num_inducing, seed, Z)
        self.num_inducing = M = Z0.shape[0]
        D = self.output_dim
        specs = [self._free_spec("X_mean", X0.shape), ParameterSpec("X_variance", X0.shape, POSITIVE),
                 self._free_spec("Z", Z0.shape), *self._kernel_specs(self._kernel), self._noise_spec(),
                 self._free_spec("q_mu", (M, D)), self._free_spec("q_sqrt", (M, M))]
        values = {"X_mean": X0, "X_variance": S0, "Z": Z0, "noise_variance": self._initial_noise_variance,
                  **self._kernel.params, "q_mu": np.zeros((M, D)), "q_sqrt": np.eye(M)}
        self._build_packer(specs, values)
        self._split_globals(specs)
        self.reset_q_u(rows=min(self.num_data, max(self.batch_size, 1024)), seed=seed)

    def _split_globals(self, specs) -> None:
        """The global parameters (all but the latents): their packer and their place in the full vector."""
        self._global_specs = [s for s in specs if s.name not in LOCAL_NAMES]
        self._global_packer = ParameterPacker(self._global_specs)
        self._global_index = np.concatenate([np.arange(self._packer.slice(s.name).start,
                                                        self._packer.slice(s.name).stop)
                                             for s in self._global_specs])

    # ---- parameters -------------------------------------------------------------
    def _base_jitter(self, values):
        Kdiag = self.kernel_at(values).K_diag(values["Z"])
        return start_jitter(np.mean(Kdiag))

    def begin_fit(self) -> None:
        with self._lock:
            self.jitter = self._base_jitter(self._globals())
            self._version += 1
            self._cache = None

    @property
    def parameters(self) -> dict:
        """Named constrained values (fresh copies: SVI updates the parameter vector in place)."""
        with self._lock:
            return {k: np.array(v, copy=True) for k, v in self._packer.unpack(self._free).items()}

    def _globals(self) -> dict:
        """Named constrained values of the global parameters (everything but the latents)."""
        with self._lock:
            return self._global_packer.unpack(self._free[self._global_index])

    def _local_views(self):
        """(X_mean (N, Q), unconstrained X_variance (N, Q)): views into the parameter vector."""
        N, Q = self.num_data, self.latent_dim
        mu = self._free[self._packer.slice("X_mean")].reshape(N, Q)
        s = self._free[self._packer.slice("X_variance")].reshape(N, Q)
        return mu, s

    def reset_q_u(self, rows=None, seed=0) -> None:
        """Set q(u) to its optimum for the current other parameters.

        ``rows=None``: from the full data (one chunked pass); an integer k: from
        the estimate of k random rows (read once).
        """
        values = self._globals()
        kern = self.kernel_at(values)
        Z = values["Z"]
        beta = 1.0 / float(values["noise_variance"])
        L = self._factor(kern, Z)
        if rows is None:
            stats = self._full_stats(values, kern)
        else:
            idx = np.sort(np.random.default_rng(seed).choice(self.num_data, int(rows), replace=False))
            mu, s = self._local_views()
            stats = self._batch_stats(kern, Z, idx, mu[idx], POSITIVE.forward(s[idx]), self.num_data / idx.size)[0]
        q_mu, R = optimal_q(L, stats.P, stats.Psi2, beta)
        self.set_parameters(q_mu=q_mu, q_sqrt=R)

    # ---- pieces of the bound ------------------------------------------------------
    def _factor(self, kern, Z):
        """chol(Kmm + jitter I), the jitter escalated (logged) if the factorisation fails."""
        Kmm = kern.K(Z)

        what = "inducing-point kernel matrix Kmm"
        return self._with_jitter(lambda jitter: cholesky(Kmm, jitter, what), float(np.mean(np.diag(Kmm))), what)

    def _batch_stats(self, kern, Z, rows, mu, S, scale=1.0, Yb=None):
        """(SuffStats of the rows scaled by ``scale``, centred Y of the rows (B, D))."""
        Yb = self.source.read(rows) if Yb is None else Yb
        st = psi.compute(kern, Z, mu, S)
        stats = SuffStats(scale * st.psi0, scale * (st.Psi1.T @ Yb), scale * st.Psi2,
                          scale * float(np.sum(Yb * Yb)), scale * float(np.sum(gaussian_kl_rows(mu, S))))
        return stats, Yb

    def _full_stats(self, values, kern):
        """SuffStats of all rows, summed over the fixed chunks in order."""
        Z = values["Z"]
        mu_all = values.get("X_mean")
        if mu_all is None:
            mu_all, s_all = self._local_views()
            S_all = None
        else:
            s_all, S_all = None, values["X_variance"]
        M, D = Z.shape[0], self.output_dim
        psi0, P, Psi2, trYY, kl = 0.0, np.zeros((M, D)), np.zeros((M, M)), 0.0, 0.0
        for a, b in self.source.chunks():
            mu = mu_all[a:b]
            S = S_all[a:b] if S_all is not None else POSITIVE.forward(s_all[a:b])
            st, _ = self._batch_stats(kern, Z, (a, b), mu, S)
            psi0 += st.psi0
            P += st.P
            Psi2 += st.Psi2
            trYY += st.trYY
            kl += st.kl
            checkpoint()
        return SuffStats(psi0, P, Psi2, trYY, kl)

    def _global_grads(self, kern, Z, b: UncollapsedBound, psi_grads_params, psi_grads_Z, beta, scale):
        """Gradients w.r.t. the named global parameters from the bound's and the psi backward's pieces."""
        dKmm_params, dKmm_Z = kern.grad_params_and_X(b.dKmm, Z)
        grads = {name: scale * np.asarray(g, dtype=float) for name, g in psi_grads_params.items()}
        add_grads(grads, dKmm_params)
        grads["Z"] = scale * psi_grads_Z + dKmm_Z
        grads["noise_variance"] = -beta**2 * b.dbeta
        grads["q_mu"] = b.dq_mu
        grads["q_sqrt"] = b.dq_sqrt
        return grads

    # ---- full bound -------------------------------------------------------------------
    def _evaluate(self, values):
        """Full bound and its gradients w.r.t. every named parameter (two chunked passes over Y)."""
        kern = self.kernel_at(values)
        Z = values["Z"]
        beta = 1.0 / float(values["noise_variance"])
        L = self._factor(kern, Z)
        stats = self._full_stats(values, kern)
        b = uncollapsed_bound(stats, L, values["q_mu"], values["q_sqrt"], beta, self.num_data)
        mu_all, S_all = values["X_mean"], values["X_variance"]
        dmu = np.empty_like(mu_all)
        dS = np.empty_like(S_all)
        params_sum, Z_sum = None, np.zeros_like(Z)
        for a, c in self.source.chunks():
            Yc = self.source.read((a, c))
            g = psi.gradients(kern, Z, mu_all[a:c], S_all[a:c], b.dpsi0, Yc @ b.dP.T, b.dPsi2)
            dmu[a:c] = g.mu - mu_all[a:c]
            dS[a:c] = g.S - 0.5 * (1.0 - 1.0 / S_all[a:c])
            params_sum = dict(g.params) if params_sum is None else add_grads(params_sum, g.params)
            Z_sum += g.Z
            checkpoint()
        grads = self._global_grads(kern, Z, b, params_sum, Z_sum, beta, 1.0)
        grads["X_mean"] = dmu
        grads["X_variance"] = dS
        return b.value, grads

    @blas_pinned
    def objective(self) -> float:
        """The full bound F at the current parameters, nats (one chunked pass over Y)."""
        values = self._globals()
        kern = self.kernel_at(values)
        L = self._factor(kern, values["Z"])
        stats = self._full_stats(values, kern)
        return uncollapsed_bound(stats, L, values["q_mu"], values["q_sqrt"],
                                 1.0 / float(values["noise_variance"]), self.num_data).value

    def elbo(self) -> float:
        """The full bound F, nats (same as :meth:`objective`)."""
        return self.objective()

    # ---- minibatch estimate -----------------------------------------------------------
    def minibatch_terms(self, values, rows, mu, S, Yb=None):
        """(estimate, global grads, per-row d(row term)/dmu (B, Q), d/dS (B, Q), nat target) for sorted rows."""
        kern = self.kernel_at(values)
        Z = values["Z"]
        beta = 1.0 / float(values["noise_variance"])
        scale = self.num_data / len(rows)
        L = self._factor(kern, Z)
        stats, Yb = self._batch_stats(kern, Z, rows, mu, S, scale, Yb)
        b = uncollapsed_bound(stats, L, values["q_mu"], values["q_sqrt"], beta, self.num_data)
        g = psi.gradients(kern, Z, mu, S, b.dpsi0, Yb @ b.dP.T, b.dPsi2)
        grads = self._global_grads(kern, Z, b, g.params, g.Z, beta, scale)
        return b.value, grads, g.mu, g.S, b.nat_target

    @blas_pinned
    def minibatch_objective(self, rows, gradients=False):
        """The unbiased estimate of F from the rows ``rows`` (each row sum scaled by N / B).

        With ``gradients``, also a dict of its gradients w.r.t. the named
        constrained parameters; ``X_mean`` and ``X_variance`` are then (B, Q),
        the rows of ``rows`` in the order given.
        """
        rows = np.asarray(rows, dtype=np.intp).ravel()
        if rows.size == 0 or np.any(rows < 0) or np.any(rows >= self.num_data) or np.unique(rows).size != rows.size:
            raise ShapeError(f"Expected distinct row indices in 0..{self.num_data - 1}, got {rows.size} indices "
                             "with repeats or out-of-range entries instead.")
        order = np.argsort(rows, kind="stable")
        srt = rows[order]
        values = self._globals()
        mu_v, s_v = self._local_views()
        mu, S = mu_v[srt].copy(), POSITIVE.forward(s_v[srt])
        value, grads, gmu, gS, _ = self.minibatch_terms(values, srt, mu, S)
        if not gradients:
            return value
        scale = self.num_data / rows.size
        inv = np.empty_like(order)
        inv[order] = np.arange(order.size)
        grads["X_mean"] = (scale * (gmu - mu))[inv]
        grads["X_variance"] = (scale * (gS - 0.5 * (1.0 - 1.0 / S)))[inv]
        return value, grads

    def local_natural_steps(self, values, Yb, mu, S, steps, rho, move_mu=True, move_S=True):
        """``steps`` natural-gradient steps on the rows' q(x_n) with every global parameter fixed.

        A row's gradient depends on the others only through q(u), L and beta:
        dF/dP = beta L^-T m and dF/dPsi2 = L^-T (beta D/2 (I - S) - beta/2 m m^T) L^-1.
        """
        kern = self.kernel_at(values)
        Z = values["Z"]
        beta = 1.0 / float(values["noise_variance"])
        L = self._factor(kern, Z)
        q_mu = values["q_mu"]
        R = np.tril(values["q_sqrt"])
        D = self.output_dim
        dA = 0.5 * beta * D * (np.eye(L.shape[0]) - R @ R.T) - 0.5 * beta * (q_mu @ q_mu.T)
        dPsi2 = _unwhiten(L, 0.5 * (dA + dA.T))
        dPsi1 = Yb @ tri_solve(L, beta * q_mu, trans=True).T
        for _ in range(steps):
            g = psi.gradients(kern, Z, mu, S, -0.5 * beta * D, dPsi1, dPsi2)
            mu, S = _local_natgrad(mu, S, g.mu, g.S, rho, move_mu, move_S)
        return mu, S

    @blas_pinned
    def refine(self, passes=1, local_steps=1, local_step=0.5) -> float:
        """Coordinate ascent on the full bound with the kernel, Z and the noise held: per pass, q(u)
        to its optimum over all rows (one chunked pass), then ``local_steps`` natural-gradient steps
        of size ``local_step`` on every row's q(x_n) (a second chunked pass).  Removes the minibatch
        noise SVI leaves in q(u) and q(X); returns the full bound afterwards."""
        move_mu, move_S = "X_mean" not in self.fixed, "X_variance" not in self.fixed
        for _ in range(int(passes)):
            if "q_mu" not in self.fixed and "q_sqrt" not in self.fixed:
                self.reset_q_u()
            if not (move_mu or move_S):
                continue
            values = self._globals()
            for a, b in self.source.chunks():
                with self._lock:
                    mu_v, s_v = self._local_views()
                    mu, S = mu_v[a:b].copy(), POSITIVE.forward(s_v[a:b])
                mu, S = self.local_natural_steps(values, self.source.read((a, b)), mu, S, int(local_steps),
                                             float(local_step), move_mu, move_S)
                with self._lock:
                    mu_v, s_v = self._local_views()
                    mu_v[a:b] = mu
                    s_v[a:b] = POSITIVE.inverse(np.maximum(S, 2.0 * POSITIVE.lower))
                    self._version += 1
                    self._cache = None
                checkpoint()
        if "q_mu" not in self.fixed and "q_sqrt" not in self.fixed:
            self.reset_q_u()
        return self.objective()

    # ---- SVI ----------------------------------------------------------------------
    def fit(self, **fit_kwargs):
        """Train with :func:`engine.fit` (SVI unless ``optimizer=`` says otherwise)."""
        fit_kwargs.setdefault("optimizer", self.default_optimizer)
        return optimize.fit(self, **fit_kwargs)

    def fit_svi(self, max_iters=1000, callback=None, stop=None, pause=None, **options):
        """Stochastic variational inference (:func:`engine.svi.fit_svi`, its options); what
        ``engine.fit(m, optimizer="svi")`` runs."""
        return svi.fit_svi(self, max_iters=max_iters, callback=callback, stop=stop, pause=pause, **options)

    # ---- the minibatch step protocol of engine.svi ------------------------------------------
    @property
    def global_packer(self) -> ParameterPacker:
        """The packer of the global parameters (everything but X_mean and X_variance)."""
        return self._global_packer

    def minibatch_state(self, idx):
        """(globals' free vector (P_g,), X_mean (B, Q), unconstrained X_variance (B, Q)) of rows ``idx``: copies."""
        with self._lock:
            mu_v, s_v = self._local_views()
            return self._free[self._global_index].copy(), mu_v[idx].copy(), s_v[idx].copy()

    def write_minibatch(self, x_global, idx, mu, S) -> None:
        """Set the globals' free vector and the rows ``idx``' q(x_n) = N(mu, diag S), as one change."""
        with self._lock:
            self._free[self._global_index] = x_global
            mu_v, s_v = self._local_views()
            mu_v[idx] = mu
            s_v[idx] = POSITIVE.inverse(np.maximum(S, 2.0 * POSITIVE.lower))
            self._version += 1
            self._cache = None

    @staticmethod
    def local_natural_step(mu, S, gmu, gS, rho, move_mu=True, move_S=True):
        """One natural-gradient step of size rho on the rows' q(x_n) (module docstring); (mu, S) (B, Q)."""
        return _local_natgrad(mu, S, gmu, gS, rho, move_mu, move_S)

    @staticmethod
    def q_u_natural_step(values, rho, target):
        """(q_mu, q_sqrt) after a natural-gradient step of size rho from ``values``' q(u) towards
        ``target`` = (Lambda, eta), the natural parameters of a minibatch's optimal q(u)."""
        Lam, eta = _to_natural(values["q_mu"], values["q_sqrt"])
        return _from_natural((1 - rho) * Lam + rho * target[0], (1 - rho) * eta + rho * target[1])

    # ---- prediction -----------------------------------------------------------------
    def _cache_values(self) -> dict:
        """The cached factors read the global parameters only (no copy of the N latents)."""
        return self._globals()

    def _posterior(self):
        """Factors for prediction: (kern, Z, L, Mw = L^-T m (M, D), Rw = L^-T R (M, M), beta)."""
        def build(values):
            kern = self.kernel_at(values)
            Z = values["Z"]
            L = self._factor(kern, Z)
            R = np.tril(values["q_sqrt"])
            Mw = tri_solve(L, values["q_mu"], trans=True)
            Rw = tri_solve(L, R, trans=True)
            return kern, Z, L, Mw, Rw, 1.0 / float(values["noise_variance"])

        return self._cached(build, key="posterior")

    def posterior(self) -> WhitenedPosterior:
        """Factors of q(u) at the current parameters (cached until they change; the latent
        parameters are not read)."""
        kern, Z, L, Mw, Rw, beta = self._posterior()
        return WhitenedPosterior(kern.copy(), Z, L, Mw, Rw, beta)

    @blas_pinned
    def geometry(self):
        """The :class:`engine.geometry.LatentGeometry` of the mapping at the current parameters:
        cov(f(a), f(b)) = k(a, b) - k(a, Z) (Kmm^-1 - L^-T S L^-1) k(Z, b), from the globals
        (cached until the parameters change)."""
        from ..geometry import LatentGeometry, explicit_q_groups

        with self._lock:
            version = self._version
            cached = self.__dict__.get("_geometry_cache")
            if cached is not None and cached[0] == version:
                return cached[1]
            X_mean = self._local_views()[0].copy()
        kern, Z, L, Mw, Rw, beta = self._posterior()
        R = L.T @ Rw  # Rw = L^-T R
        geometry = LatentGeometry([(kern, Z, explicit_q_groups(L, Mw, R))], X_mean)
        with self._lock:
            if self._version == version:
                self.__dict__["_geometry_cache"] = (version, geometry)
        return geometry

    @blas_pinned
    def predictor(self) -> Predictor:
        """The :class:`~engine.predictor.Predictor` of the explicit q(u): f(x*) = k*M Kmm^-1 u with
        u = L v, q(v) = N(m, S): mean k*M L^-T m, variance k** - |L^-1 kM*|^2 + |Rw^T kM*|^2
        (Rw = L^-T R, S = R R^T), shared by the outputs; from the global parameters alone."""
        def build(values):
            kern, Z, L, Mw, Rw, beta = self._posterior()
            group = PredictorGroup(slice(None), L, Mw, Rw=Rw, noise_variance=1.0 / beta)
            return Predictor(kern.copy(), Z, [group], self.Y_mean)

        return self._cached(build, key="predictor")

    # ---- projection of new rows ---------------------------------------------------------
    def projection_problem(self, Yc, mask):
        """q(x*) of new rows with every global parameter fixed: each row's own bound
        E_q(x*) q(u)[log p(y*_O | f)] - KL(q(x*) || N(0, I)) over its observed entries O
        (:class:`_RowTerm`), a lower bound on log p(y*_O | q(u)) reported as ``log_density``.
        Yc (n, D) centred new rows, 0 where ``mask`` (n, D) is False."""
        with self._lock:
            mu_v, s_v = self._local_views()
            mu, S = mu_v.copy(), POSITIVE.forward(s_v)
        return QxProjection([_RowTerm(self, Yc, mask)], mu, S)

    def __repr__(self):
        return (f"{type(self).__name__}(N={self.num_data}, D={self.output_dim}, Q={self.latent_dim}, "
                f"M={self.num_inducing}, batch_size={self.batch_size}, kernel={self._kernel!r})")


class _RowTerm:
    """Per-row expected log-likelihood of new rows with every global parameter fixed (no KL).

    For row n with observed mask o (|O| = Dn entries), centred y:

        E_n = Dn/2 log(beta / 2 pi) - beta/2 sum_O y^2 + beta Psi1_n . h_n - beta Dn/2 psi0_n
              + <G_n, Psi2_n>,
        h_n = Mw (o * y_n), G_n = beta Dn/2 (Kmm^-1 - Sw) - beta/2 Mw diag(o) Mw^T,

    with Mw = L^-T m, Sw = L^-T S L^-1.  A data term of
    :class:`~engine.models.projection.QxProjection`:
    ``value_and_grad(rows, mu, S, with_grad)`` -> values (r,), d/dmu (r, Q), d/dS (r, Q).
    """

    def __init__(self, model, Yc, mask):
        kern, Z, L, Mw, Rw, beta = model._posterior()
        self.beta = beta
        self.point_psi = PointPsi(kern, Z)
        mf = mask.astype(float)
        self.Dn = mf.sum(axis=1)
        self.s = np.sum(Yc * Yc * mf, axis=1)
        self.h = rows_dot(Yc * mf, Mw.T)  # (n, M), row by row
        self.KmS = chol_inverse(L) - Rw @ Rw.T
        self.Mw = Mw
        self.mf = mf

    def value_and_grad(self, rows, mu, S, with_grad=True):
        beta = self.beta
        Dn, s, h, mf = self.Dn[rows], self.s[rows], self.h[rows], self.mf[rows]
        psi0, Psi1, Psi2 = self.point_psi.forward(mu, S)
        PM = np.einsum("nmk,kd->nmd", Psi2, self.Mw)  # Psi2_n Mw, (r, M, D)
        quad = np.einsum("md,nmd,nd->n", self.Mw, PM, mf)
        value = (0.5 * Dn * (np.log(beta) - LOG_2PI) - 0.5 * beta * s + beta * np.sum(Psi1 * h, axis=1)
                 - 0.5 * beta * Dn * psi0 + 0.5 * beta * Dn * np.einsum("nmk,mk->n", Psi2, self.KmS)
                 - 0.5 * beta * quad)
        if not with_grad:
            return value, None, None
        G2 = (0.5 * beta * Dn)[:, None, None] * self.KmS[None] \
            - 0.5 * beta * np.einsum("md,nd,kd->nmk", self.Mw, mf, self.Mw)
        dmu, dS = self.point_psi.backward(-0.5 * beta * Dn, beta * h, G2)
        return value, dmu, dS


# ------------------------------------------------------------------ helpers


__all__ = ["StochasticBayesianGPLVM", "SuffStats", "UncollapsedBound", "WhitenedPosterior", "optimal_q", "uncollapsed_bound"]
