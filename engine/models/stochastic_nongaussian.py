"""The stochastic Bayesian GP-LVM with a non-Gaussian likelihood: big binary or count data by SVI.

``StochasticBayesianGPLVM(Y, latent_dim, likelihood="bernoulli")`` builds this
model: the bound of :class:`~engine.models.bayesian_nongaussian.NonConjugateBayesianGPLVM`
(:mod:`engine.nonconjugate`: an explicit, whitened q(u) per output, the data
term's expectations by Gauss-Hermite quadrature under the marginal of f at
q(x_n)) trained by minibatches of rows as :func:`engine.svi.fit_svi` trains
the Gaussian model (Hensman, Fusi & Lawrence 2013):

* q(u): natural-gradient steps of size rho on every output's q(v_d) towards
  the minibatch's target (:func:`engine.nonconjugate.natural_step`): the
  data term's gradients w.r.t. the expectation parameters, scaled by N / B,
  plus the prior (Salimbeni, Eleftheriadis & Hensman 2018 for non-conjugate
  likelihoods; for a Gaussian likelihood it is the Gaussian model's step);
* the kernel and Z: Adam on the minibatch estimate (no noise variance: the
  likelihood is the noise, so nothing is held during a warm-up);
* the minibatch rows' q(x_n): the natural-gradient steps of the Gaussian model
  on each row's own expected log-likelihood.

``refine`` is the Gaussian model's (q(u) by natural steps on all rows, then the
rows' q(x_n)).

Y may be a numpy memmap (read by row chunks, never centred: 0/1 answers and
counts mean what they say; every chunk is checked against the likelihood's
support).  Parameters: ``X_mean``, ``X_variance`` (N, Q), ``Z`` (M, Q), the
kernel's, ``q_mu`` (M, D) and ``q_sqrt`` (D, M, M).
"""
from __future__ import annotations

import numpy as np

from .._cancel import checkpoint
from .._threads import blas_pinned
from ..backends._rows import ROW_CHUNK
from ..bound import gaussian_kl
from ..errors import ConfigurationError
from ..nonconjugate import data_term, natural_step, q_gradients, q_projections, whitened_kl
from ..transforms import POSITIVE
from ..validation import integer
from .base import LatentVariableModel, initial_X
from .bayesian_nongaussian import NonConjugateRowTerm, NonGaussianMixin, check_nongaussian_kernel, f_moments_at_points
from .collapsed import add_grads
from .data_source import ChunkedRows
from .projection import QxProjection
from .stochastic import StochasticBayesianGPLVM

#: Natural-gradient steps of the start of q(u), and their size (on at most ``max(batch, 1024)`` rows).
_Q_START_STEPS, _Q_START_RHO = 8, 0.7


class NonConjugateStochasticBGPLVM(NonGaussianMixin, StochasticBayesianGPLVM, likelihoods_of=StochasticBayesianGPLVM):
    """SVI for the Bayesian GP-LVM with a Bernoulli or Poisson likelihood (module docstring).

    Arguments as :class:`StochasticBayesianGPLVM` plus ``likelihood``;
    ``noise_variance`` and ``backend`` are refused.
    """

    #: No noise variance to hold at the start of a fit.
    warm_up_iters = 0
    warm_up_fixed = ()
    #: q(u)'s optimum has no closed form here (its reset_q_u iterates): ``fit_svi`` does not polish.
    closed_form_q_u = False

    def __init__(self, Y, latent_dim, num_inducing=50, batch_size=256, kernel=None, init="pca", seed=0,
                 X=None, X_variance=0.5, Z=None, noise_variance=None, chunk_size=ROW_CHUNK, backend=None,
                 likelihood="bernoulli"):
        lik = self._init_likelihood(likelihood, noise_variance, "StochasticBayesianGPLVM")
        if backend is not None:
            raise ConfigurationError("StochasticBayesianGPLVM takes no backend: each SVI step works on one minibatch "
                                     "of rows; train it in-process.")
        source = ChunkedRows(Y, chunk_size, likelihood=lik)
        LatentVariableModel.__init__(self, None, latent_dim, kernel, init=init, source=source)
        check_nongaussian_kernel(self._kernel)
        self.batch_size = integer(batch_size, "batch_size")
        self.chunk_size = source.chunk_size
        self.seed = seed
        X0 = initial_X(source, self.latent_dim, init, seed, X)
        self._split_globals(self._build_explicit_q(X0, X_variance, Z, num_inducing, seed))
        self.reset_q_u(rows=min(self.num_data, max(self.batch_size, 1024)), seed=seed)

    # ---- q(u) ---------------------------------------------------------------------------
    @blas_pinned
    def reset_q_u(self, rows=None, seed=0, steps=_Q_START_STEPS, rho=_Q_START_RHO) -> None:
        """``steps`` natural-gradient steps of size ``rho`` on q(u) with everything else held: on all
        rows (``rows=None``, chunked passes) or a fixed random subset of ``rows`` rows, scaled by N / k."""
        values = self._globals()
        kern = self.kernel_at(values)
        Z = values["Z"]
        L = self._factor(kern, Z)
        N = self.num_data
        mu_v, s_v = self._local_views()
        if rows is None or int(rows) >= N:
            parts, scale = self.source.chunks(), 1.0
        else:
            idx = np.sort(np.random.default_rng(seed).choice(N, size=int(rows), replace=False))
            parts, scale = [idx], N / idx.size
        q_mu, q_sqrt = values["q_mu"], values["q_sqrt"]
        for _ in range(int(steps)):
            proj = q_projections(L, q_mu, q_sqrt)
            G_Mw, G_E = 0.0, 0.0
            for rows_ in parts:
                sl = slice(*rows_) if isinstance(rows_, tuple) else rows_
                rt = data_term(self._likelihood, kern, Z, mu_v[sl], POSITIVE.forward(s_v[sl]), self.source.read(rows_),
                               None, proj, natural=True)
                G_Mw, G_E = G_Mw + rt.G_Mw, G_E + rt.G_E
                checkpoint()
            q_mu, q_sqrt = natural_step(L, q_mu, q_sqrt, scale * G_Mw, scale * G_E, rho)
        self.set_parameters(q_mu=q_mu, q_sqrt=q_sqrt)

    # ---- the bound ------------------------------------------------------------------------
    def _rows_term(self, kern, Z, proj, mu, S, Yb, gradients=True, natural=False):
        return data_term(self._likelihood, kern, Z, mu, S, Yb, None, proj, gradients=gradients, natural=natural)

    def _evaluate(self, values):
        """Full bound and its gradients (one chunked pass over Y)."""
        kern = self.kernel_at(values)
        Z = values["Z"]
        L = self._factor(kern, Z)
        proj = q_projections(L, values["q_mu"], values["q_sqrt"])
        mu_all, S_all = values["X_mean"], values["X_variance"]
        dmu, dS = np.empty_like(mu_all), np.empty_like(S_all)
        value, G_Mw, G_E, dkern, dZ = 0.0, 0.0, 0.0, {}, np.zeros_like(Z)
        for a, b in self.source.chunks():
            rt = self._rows_term(kern, Z, proj, mu_all[a:b], S_all[a:b], self.source.read((a, b)))
            value += rt.value
            G_Mw, G_E = G_Mw + rt.G_Mw, G_E + rt.G_E
            dmu[a:b] = rt.dmu - mu_all[a:b]
            dS[a:b] = rt.dS - 0.5 * (1.0 - 1.0 / S_all[a:b])
            add_grads(dkern, rt.dkernel)
            dZ += rt.dZ
            checkpoint()
        grads = self._global_terms(kern, Z, L, values, proj, G_Mw, G_E, dkern, dZ, 1.0)
        kl_u = grads.pop("_kl_u")
        grads["X_mean"] = dmu
        grads["X_variance"] = dS
        return value - kl_u - gaussian_kl(mu_all, S_all), grads

    def _global_terms(self, kern, Z, L, values, proj, G_Mw, G_E, dkern, dZ, scale):
        """Gradients w.r.t. the globals from the (scaled) data term's pieces and the KL of q(u)."""
        dKmm, dq_mu, dq_sqrt = q_gradients(L, values["q_mu"], proj, scale * G_Mw, scale * G_E)
        kl_u, dkl_mu, dkl_sqrt = whitened_kl(values["q_mu"], values["q_sqrt"])
        dKmm_params, dKmm_Z = kern.grad_params_and_X(dKmm, Z)
        grads = {name: scale * np.asarray(g, dtype=float) for name, g in dkern.items()}
        add_grads(grads, dKmm_params)
        grads["Z"] = scale * dZ + dKmm_Z
        grads["q_mu"] = dq_mu - dkl_mu
        grads["q_sqrt"] = dq_sqrt - dkl_sqrt
        grads["_kl_u"] = kl_u
        return grads

    @blas_pinned
    def objective(self) -> float:
        """The full bound at the current parameters, nats (one chunked pass over Y)."""
        values = self._globals()
        kern = self.kernel_at(values)
        Z = values["Z"]
        L = self._factor(kern, Z)
        proj = q_projections(L, values["q_mu"], values["q_sqrt"])
        mu_v, s_v = self._local_views()
        value, kl_x = 0.0, 0.0
        for a, b in self.source.chunks():
            mu, S = mu_v[a:b], POSITIVE.forward(s_v[a:b])
            value += self._rows_term(kern, Z, proj, mu, S, self.source.read((a, b)), gradients=False).value
            kl_x += gaussian_kl(mu, S)
            checkpoint()
        return value - whitened_kl(values["q_mu"], values["q_sqrt"])[0] - kl_x

    # ---- the minibatch step protocol of engine.svi ------------------------------------------
    def minibatch_terms(self, values, rows, mu, S, Yb=None):
        """(estimate, global grads, per-row d(row term)/dmu (B, Q), d/dS (B, Q), natural target
        (L, G_Mw, G_E) scaled by N / B) for sorted rows."""
        kern = self.kernel_at(values)
        Z = values["Z"]
        scale = self.num_data / len(rows)
        L = self._factor(kern, Z)
        proj = q_projections(L, values["q_mu"], values["q_sqrt"])
        Yb = self.source.read(rows) if Yb is None else Yb
        rt = self._rows_term(kern, Z, proj, mu, S, Yb)
        grads = self._global_terms(kern, Z, L, values, proj, rt.G_Mw, rt.G_E, rt.dkernel, rt.dZ, scale)
        kl_u = grads.pop("_kl_u")
        estimate = scale * (rt.value - gaussian_kl(mu, S)) - kl_u
        return estimate, grads, rt.dmu, rt.dS, (L, scale * rt.G_Mw, scale * rt.G_E)

    def local_natural_steps(self, values, Yb, mu, S, steps, rho, move_mu=True, move_S=True):
        """``steps`` natural-gradient steps on the rows' q(x_n), every global parameter fixed."""
        kern = self.kernel_at(values)
        Z = values["Z"]
        proj = q_projections(self._factor(kern, Z), values["q_mu"], values["q_sqrt"])
        for _ in range(steps):
            rt = self._rows_term(kern, Z, proj, mu, S, Yb)
            mu, S = self.local_natural_step(mu, S, rt.dmu, rt.dS, rho, move_mu, move_S)
        return mu, S

    @staticmethod
    def q_u_natural_step(values, rho, target):
        """(q_mu, q_sqrt) after a natural-gradient step of size rho (:func:`engine.nonconjugate.natural_step`)."""
        L, G_Mw, G_E = target
        return natural_step(L, values["q_mu"], values["q_sqrt"], G_Mw, G_E, rho)

    # ---- prediction and projection --------------------------------------------------------
    def _posterior(self):
        """(kernel, Z, L, QProjections) from the globals (cached until they change)."""
        def build(values):
            kern = self.kernel_at(values)
            Z = values["Z"]
            L = self._factor(kern, Z)
            return kern, Z, L, q_projections(L, values["q_mu"], values["q_sqrt"])

        return self._cached(build, key="nonconjugate")

    def predictor(self):
        """None: the moments of y come through the likelihood (``predict``), not a Gaussian Predictor."""
        return None

    def posterior(self):
        from ..errors import UnsupportedOperationError

        raise UnsupportedOperationError(f"likelihood={self.likelihood!r}: q(u) has its own covariance per output; "
                                        "predict with predict() or predict_f().")

    @blas_pinned
    def predict_f(self, Xnew, Xnew_variance=None):
        """Mean and variance (n, D) of the latent functions at Xnew (n, Q), or under q(x*) with
        ``Xnew_variance``: as :meth:`NonConjugateBayesianGPLVM.predict_f`."""
        kern, Z, L, proj = self._posterior()
        return f_moments_at_points(self, kern, Z, L, proj, Xnew, Xnew_variance)

    def projection_problem(self, Yc, mask):
        """q(x*_n) per new row: its expected log-likelihood minus its KL (:class:`NonConjugateRowTerm`)."""
        self._likelihood.check(Yc, mask, name="Ynew")
        kern, Z, _, proj = self._posterior()
        with self._lock:
            mu_v, s_v = self._local_views()
            mu, S = mu_v.copy(), POSITIVE.forward(s_v)
        return QxProjection([NonConjugateRowTerm(self._likelihood, kern, Z, proj.Mw, proj.E, Yc, mask)], mu, S)

    def __repr__(self):
        return (f"StochasticBayesianGPLVM(N={self.num_data}, D={self.output_dim}, Q={self.latent_dim}, "
                f"M={self.num_inducing}, likelihood={self.likelihood!r}, batch_size={self.batch_size})")
