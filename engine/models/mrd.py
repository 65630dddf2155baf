"""Manifold relevance determination (Damianou, Ek, Titsias & Lawrence 2012).

V views Y_v (N, D_v) of the same N rows share one latent space: one
q(X) = prod_n N(x_n | mu_n, diag S_n); each view has its own ARD kernel k_v,
noise variance and inducing inputs Z_v.  The bound is

    F = sum_v F_v(Y_v; q(X), Z_v, k_v, beta_v) - KL(q(X) || N(0, I)),

with F_v the collapsed data term of the Bayesian GP-LVM (Titsias & Lawrence
2010, eq. 14 without the KL) and the KL counted once.  After training, a
latent dimension relevant (large 1 / lengthscale^2) in several views is
shared by them; one relevant in a single view is private to it.

Inducing inputs per view (GPy's MRD shares one Z): each view's kernel has
its own lengthscales, so the locations that summarise one view's mapping
well need not suit another's (a view's Z can spread along its private
dimensions and ignore the other views'), and with V views the cost is V
times a single view's either way.  All Z_v start at the same subset of the
initial means.

Initialisation: each view is standardised (columns to unit variance, then the
view scaled by 1 / sqrt(D_v) so that every view weighs the same), the views
are concatenated and X starts at its principal-component scores.  (The
standardisation is for the start only: each view is modelled centred, in
its own units, with its own kernel variance and noise.)  Each view's
ARD lengthscales start at 1 / f_vq, with f_vq the share of view v's
standardised variance that component q explains relative to its best
component (capped at 1e3), so a component that only one view uses starts
relevant in that view alone.
"""
from __future__ import annotations

import dataclasses
import json

import numpy as np

from .. import kernels as _kernels
from .. import psi
from .._cancel import checkpoint
from .._threads import blas_pinned
from ..bound import gaussian_kl
from ..errors import ConfigurationError, ShapeError
from ..likelihoods import require_gaussian
from ..linalg import start_jitter
from ..model_file import spec_from_json
from ..transforms import POSITIVE, ParameterSpec
from ..validation import real_matrix
from ._shared import static_bayesian, view_backward, view_forward
from .base import LatentVariableModel, initial_X, validate_latent_dim
from .bayesian import CollapsedRowTerm
from .collapsed import inducing_subset
from .projection import QxProjection


def view_prefix(v: int) -> str:
    """Prefix of view v's parameter names: "view0.Z", "view0.lengthscales", "view0.noise_variance"."""
    return f"view{v}."


def _check_views(views):
    if isinstance(views, np.ndarray) or not isinstance(views, (list, tuple)) or len(views) < 1:
        raise ShapeError(f"Expected views as a list of (N, D_v) arrays, got {type(views).__name__} instead.")
    out = [real_matrix(Y, name=f"views[{v}]") for v, Y in enumerate(views)]
    rows = {Y.shape[0] for Y in out}
    if len(rows) != 1:
        raise ShapeError(f"Expected every view to have the same rows N, got {[Y.shape[0] for Y in out]} instead.")
    return out


def standardised_concat(views) -> np.ndarray:
    """Views with unit-variance columns, each scaled by 1 / sqrt(D_v), side by side (N, sum D_v)."""
    parts = []
    for Y in views:
        Yc = Y - Y.mean(axis=0)
        sd = Yc.std(axis=0)
        parts.append(Yc / np.where(sd > 0, sd, 1.0) / np.sqrt(Y.shape[1]))
    return np.hstack(parts)


def view_fractions(views, X0) -> np.ndarray:
    """(V, Q) share of each standardised view's variance along each column of X0, over its largest."""
    Xc = X0 - X0.mean(axis=0)
    norms = np.maximum(np.sum(Xc * Xc, axis=0), 1e-300)
    out = np.empty((len(views), X0.shape[1]))
    for v, Y in enumerate(views):
        Yc = Y - Y.mean(axis=0)
        sd = Yc.std(axis=0)
        Yc = Yc / np.where(sd > 0, sd, 1.0)
        explained = np.sum((Xc.T @ Yc) ** 2, axis=1) / norms  # per column of X0
        out[v] = explained / max(float(explained.max()), 1e-300)
    return out


class MRD(LatentVariableModel):
    """Manifold relevance determination: one q(X), one ARD kernel, noise and Z per view.

    ``MRD(views, latent_dim, num_inducing=30, kernels=None)``: ``views`` a list
    of (N, D_v) arrays with the same rows; ``kernels`` None (an ARD RBF per
    view, initialised as in the module docstring) or one kernel per view over
    ``latent_dim`` inputs with closed-form psi statistics.

    Parameters: ``X_mean``, ``X_variance`` (N, Q) shared; per view v,
    ``view{v}.Z`` (M, Q), ``view{v}.<kernel parameter>`` and
    ``view{v}.noise_variance``.  ``relevance`` is (V, Q).  ``Y`` holds the
    centred views side by side (N, sum D_v); ``view_slices[v]`` picks view v's
    columns.  ``predict(Xnew, view=w)`` and ``infer_latent(Y_v, view=v)``
    address one view; without ``view`` they cover all views side by side.
    """

    objective_name = "ELBO"

    def __init__(self, views, latent_dim, num_inducing=30, kernels=None, init="pca", seed=0, X=None,
                 X_variance=0.5, Z=None, noise_variances=None, likelihood="gaussian"):
        require_gaussian(likelihood, "MRD")
        views = _check_views(views)
        Q = validate_latent_dim(latent_dim)
        self.num_views = V = len(views)
        X0 = initial_X(standardised_concat(views), Q, init, seed, X)
        if kernels is None:
            fractions = view_fractions(views, X0) if init == "pca" or X is not None else np.ones((V, Q))
            kernels = [_kernels.RBF(Q, variance=max(float(np.mean(Y.var(axis=0))), 1e-6),
                                    lengthscales=1.0 / np.maximum(fractions[v], 1e-3))
                       for v, Y in enumerate(views)]
        if not isinstance(kernels, (list, tuple)) or len(kernels) != V:
            raise ConfigurationError(f"Expected one kernel per view ({V}), got {kernels!r} instead.")
        for v, k in enumerate(kernels):
            if not isinstance(k, _kernels.Kernel):
                raise ConfigurationError(f"Expected kernels[{v}] as an engine.kernels kernel, "
                                         f"got {type(k).__name__} instead.")
            psi.check_supported(k)
        super().__init__(np.hstack(views), Q, kernels[0])
        self.view_dims = [Y.shape[1] for Y in views]
        ends = np.cumsum(self.view_dims)
        self.view_slices = [slice(int(e - d), int(e)) for e, d in zip(ends, self.view_dims)]
        self._kernels = [k.copy() for k in kernels]
        self._view_kernel_names = [list(k.params) for k in kernels]
        if noise_variances is None:
            noise_variances = [0.1 * max(float(np.mean(self.Y[:, sl].var(axis=0))), 1e-6) for sl in self.view_slices]
        noise_variances = np.broadcast_to(np.asarray(noise_variances, dtype=float), (V,))
        S0 = np.broadcast_to(np.asarray(X_variance, dtype=float), X0.shape).copy()
        if Z is None:
            Z = [inducing_subset(X0, num_inducing, seed)] * V
        elif isinstance(Z, np.ndarray) and Z.ndim == 2:
            Z = [Z] * V  # one array: the start of every view's Z
        if len(Z) != V:
            raise ShapeError(f"Expected one Z per view ({V}), got {len(Z)} instead.")
        Z = [np.array(z, dtype=float) for z in Z]
        for v, z in enumerate(Z):
            if z.ndim != 2 or z.shape[1] != Q:
                raise ShapeError(f"Expected Z of view {v} with shape (M, {Q}), got {z.shape} instead.")
        self.num_inducing = [z.shape[0] for z in Z]
        specs = [self._free_spec("X_mean", X0.shape), ParameterSpec("X_variance", X0.shape, POSITIVE)]
        values = {"X_mean": X0, "X_variance": S0}
        for v in range(V):
            p = view_prefix(v)
            specs.append(self._free_spec(p + "Z", Z[v].shape))
            specs += [dataclasses.replace(spec, name=p + spec.name) for spec in self._kernel_specs(kernels[v])]
            specs.append(ParameterSpec(p + "noise_variance", (), POSITIVE))
            values[p + "Z"] = Z[v]
            values[p + "noise_variance"] = float(noise_variances[v])
            values.update({p + name: value for name, value in kernels[v].params.items()})
        self._build_packer(specs, values)

    # ---- per-view parameters ---------------------------------------------------------
    def kernel_at(self, values: dict, view: int = 0):
        """A copy of view ``view``'s kernel with its parameters taken from ``values``."""
        p = view_prefix(view)
        return self._kernels[view].with_params({name: values[p + name] for name in self._view_kernel_names[view]})

    @property
    def kernels(self) -> list:
        """Copies of the views' kernels at the current parameters."""
        values = self.parameters
        return [self.kernel_at(values, v) for v in range(self.num_views)]

    @property
    def kernel(self):
        """The first view's kernel (see :attr:`kernels` for all of them)."""
        return self.kernels[0]

    @property
    def relevance(self) -> np.ndarray:
        """(V, Q) ARD relevance of each latent dimension in each view."""
        return np.array([np.asarray(k.relevance, dtype=float) for k in self.kernels])

    def view_data(self, view: int) -> np.ndarray:
        """View ``view`` of the training data, in data units, (N, D_v)."""
        sl = self.view_slices[self._check_view(view)]
        return self.Y[:, sl] + self.Y_mean[sl]

    def _check_view(self, view) -> int:
        if isinstance(view, bool) or not isinstance(view, (int, np.integer)) or not 0 <= view < self.num_views:
            raise ConfigurationError(f"Expected view as an integer in [0, {self.num_views}), got {view!r} instead.")
        return int(view)

    def _view_args(self, values, v):
        p = view_prefix(v)
        return self.kernel_at(values, v), values[p + "Z"], 1.0 / float(values[p + "noise_variance"])

    # ---- objective ---------------------------------------------------------------------
    def _base_jitter(self, values):
        """1e-8 of the largest mean diagonal of the views' Kmm: one jitter for every view."""
        scale = max(float(np.mean(self.kernel_at(values, v).K_diag(values[view_prefix(v) + "Z"])))
                    for v in range(self.num_views))
        return start_jitter(scale)

    def _terms(self, values):
        """[(kernel, Z, (psi stats, CollapsedBound))] of every view, at one jitter for all."""
        mu, S = values["X_mean"], values["X_variance"]
        args = [self._view_args(values, v) for v in range(self.num_views)]
        scale = max(float(np.mean(k.K_diag(Z))) for k, Z, _ in args)

        def all_views(jitter):
            out = []
            for v, (k, Z, beta) in enumerate(args):
                out.append(view_forward(self.Y[:, self.view_slices[v]], k, Z, mu, S, beta, jitter))
                checkpoint()
            return out

        results = self._with_jitter(all_views, scale, "inducing-point kernel matrices Kmm of the views")
        return [(k, Z, r) for (k, Z, _), r in zip(args, results)]

    def _evaluate(self, values):
        mu, S = values["X_mean"], values["X_variance"]
        value = -gaussian_kl(mu, S)
        grads = {"X_mean": -mu, "X_variance": -0.5 * (1.0 - 1.0 / S)}
        for v, (k, Z, (_, bound)) in enumerate(self._terms(values)):
            value += bound.value
            g = view_backward(k, Z, mu, S, bound)
            grads["X_mean"] = grads["X_mean"] + g.pop("X_mean")
            grads["X_variance"] = grads["X_variance"] + g.pop("X_variance")
            p = view_prefix(v)
            grads.update({p + name: gv for name, gv in g.items()})
            checkpoint()
        return value, grads

    def kl(self) -> float:
        """KL(q(X) || N(0, I)) at the current parameters, nats (counted once in the bound)."""
        values = self.parameters
        return gaussian_kl(values["X_mean"], values["X_variance"])

    def data_terms(self) -> np.ndarray:
        """(V,) the views' collapsed data terms F_v at the current parameters, nats."""
        return np.array([b.value for _, _, (_, b) in self._terms(self.parameters)])

    def elbo(self) -> float:
        return self.objective()

    # ---- prediction --------------------------------------------------------------------
    def view_model(self, view: int):
        """View ``view`` as a :class:`BayesianGPLVM` at the shared q(X) and that view's kernel, Z and noise.

        Its data term equals this model's F_v; it predicts and projects for that view.
        """
        view = self._check_view(view)
        return self._cached(self._view_models)[view]

    def _view_models(self, values):
        out = []
        for v in range(self.num_views):
            k, Z, _ = self._view_args(values, v)
            sl = self.view_slices[v]
            out.append(static_bayesian(self.Y[:, sl] + self.Y_mean[sl], k, values["X_mean"], values["X_variance"],
                                       Z, values[view_prefix(v) + "noise_variance"], self.jitter))
        return out

    def _geometry_maps(self, values):
        # the views share the latent space: their metrics add (one map per view, outputs side by side)
        return [m for v in range(self.num_views) for m in self.view_model(v)._geometry_maps(
            self.view_model(v).parameters)]

    def predictor(self, view=None):
        """View ``view``'s :class:`~engine.predictor.Predictor` (its kernel, Z and q(u)); None without
        ``view`` (the views have different kernels and inducing inputs: :meth:`predict` stacks them)."""
        return None if view is None else self.view_model(view).predictor()

    @blas_pinned
    def predict(self, Xnew, Xnew_variance=None, include_noise=False, view=None):
        """Predictive mean and variance of view ``view`` at latent points Xnew (n, Q): (n, D_w) each.

        Without ``view``: every view, side by side, (n, sum D_v).  Uncertain
        inputs (``Xnew_variance``) and ``include_noise`` as in BayesianGPLVM.predict.
        """
        if view is not None:
            return self.view_model(view).predict(Xnew, Xnew_variance, include_noise=include_noise)
        parts = [self.view_model(v).predict(Xnew, Xnew_variance, include_noise=include_noise)
                 for v in range(self.num_views)]
        return np.hstack([m for m, _ in parts]), np.hstack([s for _, s in parts])

    def infer_latent(self, Ynew, observed=None, view=None, **options):
        """q(x*) of new rows: ``infer_latent(Y_v, view=v)`` from one view, Y_v (n, D_v) or (D_v,).

        NaN entries (or ``observed``) mark unobserved outputs, as in
        :func:`engine.infer.infer_latent`; the result's ``prediction`` is of
        view v.  Predict another view from its ``mean`` and ``variance`` with
        ``predict(mean, variance, view=w)``.

        Without ``view``, Ynew holds all views side by side (n, sum D_v), and
        each row's q(x*) maximises the sum over views of that view's bound
        difference F_v(X, x*) - F_v(X) on the row's observed entries, minus
        one KL (:meth:`projection_problem`); ``prediction`` then covers every view.
        """
        if view is not None:
            return self.view_model(view).infer_latent(Ynew, observed=observed, **options)
        return super().infer_latent(Ynew, observed=observed, **options)

    def projection_problem(self, Yc, mask):
        """The views' row terms F_v(X, x*) - F_v(X) on their observed entries, summed, minus one KL of the
        shared q(x*); Yc (n, sum D_v) centred new rows, 0 where ``mask`` is False."""
        values = self.parameters
        terms = [CollapsedRowTerm(self.view_model(v), self.view_model(v).parameters, Yc[:, sl], mask[:, sl])
                 for v, sl in enumerate(self.view_slices) if mask[:, sl].any()]
        return QxProjection(terms, values["X_mean"], values["X_variance"])

    def snapshot_state(self) -> dict:
        values = self.parameters
        return {"parameters": values, "X_mean": values["X_mean"], "X_variance": values["X_variance"],
                "relevance": np.array([np.asarray(self.kernel_at(values, v).relevance, dtype=float)
                                       for v in range(self.num_views)])}

    def copy(self):
        clone = super().copy()
        clone._kernels = [k.copy() for k in self._kernels]
        return clone

    # ---- files (engine.io) --------------------------------------------------------------
    def _saved_arrays(self) -> dict:
        return {"view_dims": np.array(self.view_dims, dtype=np.int64),
                "view_kernel_specs": np.array(json.dumps([k.to_spec() for k in self._kernels]))}

    @classmethod
    def _from_saved(cls, Y, arrays, params):
        try:
            latent_dim = int(arrays["latent_dim"])
            dims = [int(d) for d in arrays["view_dims"]]
            kernels = [_kernels.kernel_from_spec(s)
                       for s in spec_from_json(arrays["view_kernel_specs"], "views' kernel specs")]
            Z = [params[view_prefix(v) + "Z"] for v in range(len(dims))]
            X = params["X_mean"]
        except (KeyError, ValueError, TypeError) as exc:
            raise ShapeError(f"missing or bad entry {exc}") from None
        if sum(dims) != Y.shape[1]:
            raise ShapeError(f"view sizes {dims} do not add up to the {Y.shape[1]} saved columns")
        ends = np.cumsum(dims)
        views = [Y[:, e - d:e] for e, d in zip(ends, dims)]
        return cls(views, latent_dim, kernels=kernels, X=X, Z=Z)

    def __repr__(self):
        return (f"{type(self).__name__}(N={self.num_data}, views={self.view_dims}, Q={self.latent_dim}, "
                f"kernels={self._kernels!r})")
