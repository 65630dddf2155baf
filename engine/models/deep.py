"""Deep Gaussian processes: stacked Bayesian GP-LVMs trained by one bound (Damianou & Lawrence 2013).

The model, with H layers counted from the data side up (``layer_dims`` =
[Q_0, ..., Q_{H-1}]; the paper's X_1 nearest the data is ``layers[0]``)::

    X_{H-1} ~ N(0, I)                                  top layer, (N, Q_{H-1})
    X_{l-1} = f_l(X_l) + noise,  f_l ~ GP(0, k_l)      hidden layers, l = H-1 .. 1
    Y       = f_0(X_0) + noise,  f_0 ~ GP(0, k_0)      data, (N, D), centred

Each layer l has its own kernel k_l over Q_l inputs (default ARD RBF), its
own inducing inputs Z_l (M_l, Q_l), noise precision beta_l, and a factorised
q(X_l) = prod_n N(x_n | mu_n, diag S_n).  Parameters are named
``layer{l}.X_mean``, ``layer{l}.X_variance``, ``layer{l}.Z``,
``layer{l}.<kernel parameter>`` and ``layer{l}.noise_variance``.

The bound (the paper's variational bound, written for H layers)
---------------------------------------------------------------
q(X_0, ..., X_{H-1}) factorises over layers (mean field, as in the paper).
With the inducing outputs of every layer collapsed (their optimal q(U_l)
substituted), the bound is

    F = sum_{l=0}^{H-1} F_l  +  sum_{l=0}^{H-2} H(q(X_l))  -  KL(q(X_{H-1}) || N(0, I)),

    H(q(X_l))  = 1/2 sum_nq log(2 pi e S_nq),
    KL         = 1/2 sum_nq (mu_nq^2 + S_nq - log S_nq - 1),

where F_l is the collapsed data term of layer l (Titsias & Lawrence 2010,
eq. 14) with inputs q(X_l) (through psi0_l, Psi1_l (N, M_l), Psi2_l of the
layer's kernel) and outputs O_l of dimension D_l: O_0 = Y (D_0 = D) and, for
l >= 1, the layer below, O_l = X_{l-1} under q(X_{l-1}) (D_l = Q_{l-1}).
The outputs enter only through tr(O^T O) and P_l = Psi1_l^T O, linearly in
the log-likelihood's quadratic form, so under q(X_{l-1}) they become

    T_l = <tr(O^T O)> = sum_nq (mu_{l-1}^2 + S_{l-1})_nq,   P_l = Psi1_l^T mu_{l-1}.

With L = chol(Kmm_l + jitter I), A = L^-1 Psi2_l L^-T, B = I + beta_l A,
L_B = chol(B), C = L_B^-1 L^-1 P_l:

    F_l = -N D_l/2 log(2 pi) + N D_l/2 log beta_l - D_l sum(log diag L_B)
          - beta_l/2 T_l + beta_l^2/2 ||C||_F^2 - beta_l D_l/2 psi0_l + beta_l D_l/2 tr(A).

With one layer this is exactly the Bayesian GP-LVM bound.  For l >= 1,
F_l is the collapsed bound of the sufficient statistics (N, D_l, T_l, psi0_l,
P_l, Psi2_l); so dF_l/dmu_{l-1} = Psi1_l dF/dP - beta_l mu_{l-1}, with
dF/dP = beta_l^2 (Kmm + beta_l Psi2)^-1 P_l = beta_l alpha_l (alpha_l: the
predictive weights), and dF_l/dS_{l-1} = -beta_l/2.  Every gradient goes
through the engine's stable collapsed-bound gradients
(:func:`engine.bound.collapsed_bound_stats`) and psi statistics.

Jitter: one value for all layers, 1e-8 of the largest mean diagonal of the
layers' Kmm, chosen once per fit like the other models' and raised (logged)
only when some layer's factorisation fails; it is part of the objective.

Prediction (:meth:`DeepGP.predict`) is moment-matched, not sampled: a top
point is mapped through the top layer's predictive distribution, and each
layer's Gaussian (mean, diagonal variance) is passed as an uncertain input to
the layer below, whose predictive mean and per-output variance under q(x*)
are exact (psi statistics; Titsias & Lawrence 2010, section 4).  The hidden
layers' noise is part of the generative model and is included; the data
layer's noise only with ``include_noise``.  Cross-covariances between the
outputs of a hidden layer are dropped (the diagonal Gaussian closest in
moments per dimension).

Projection of new rows (:meth:`DeepGP.project`, :meth:`DeepGP.infer_latent`)
starts layer by layer: y* is projected into the bottom layer (the Bayesian
GP-LVM projection of :mod:`engine.infer`, all parameters and the training
rows' q(X) fixed), its mean into the layer above, and so on to the top;
optionally (``joint=True``) the row's q(x*_l) of all layers are then
optimised together on the deep bound (:mod:`engine.models._deep_projection`).
"""
from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np

from .. import kernels as _kernels
from .. import optimize, psi
from .._cancel import checkpoint
from .._threads import blas_pinned
from ..bound import collapsed_bound_stats, gaussian_kl, gaussian_kl_rows
from ..errors import ConfigurationError, ShapeError
from ..infer import LatentInference, check_new_data
from ..init import pca_variance_fractions
from ..kernels import kernel_from_spec
from ..likelihoods import require_gaussian
from ..linalg import start_jitter
from ..transforms import POSITIVE, ParameterSpec
from ..validation import latent_points
from ._deep_projection import refine_rows, training_layers
from .base import LatentVariableModel, initial_X, validate_latent_dim
from .bayesian import BayesianGPLVM
from .collapsed import add_grads, inducing_subset

LOG_2PI_E = np.log(2.0 * np.pi) + 1.0

__all__ = ["DeepGP", "DeepLayer", "DeepProjection", "layer_bound"]


class DeepLayer(NamedTuple):
    """One layer of a :class:`DeepGP` at its current parameters.

    X_mean, X_variance: (N, Q_l) moments of q(X_l); relevance: (Q_l,) ARD
    relevance of the kernel that maps X_l to the layer below; Z: (M_l, Q_l);
    kernel: a copy of that kernel; noise_variance: of the layer below given X_l.
    """

    X_mean: np.ndarray
    X_variance: np.ndarray
    relevance: np.ndarray
    Z: np.ndarray
    kernel: object
    noise_variance: float


class DeepProjection(NamedTuple):
    """New rows projected into every layer: means, variances: [(n, Q_l)] from the data side up;
    log_density (n,); observed (n, D) bool; prediction, prediction_variance (n, D) in data units."""

    means: list
    variances: list
    log_density: np.ndarray
    observed: np.ndarray
    prediction: np.ndarray
    prediction_variance: np.ndarray


class LayerBound(NamedTuple):
    """F_l and its gradients w.r.t. the psi statistics, Kmm, beta and the outputs' moments."""

    value: float
    dpsi0: float
    dPsi1: np.ndarray  # (N, M)
    dPsi2: np.ndarray  # (M, M)
    dKmm: np.ndarray  # (M, M)
    dbeta: float
    dmu_out: np.ndarray  # (N, D_l)
    dS_out: float  # the same for every entry of S_out
    posterior: object


def layer_bound(mu_out, S_out, psi0, Psi1, Psi2, Kmm, beta, jitter=0.0) -> LayerBound:
    """The collapsed data term F_l of one layer whose outputs are uncertain (module docstring).

    mu_out: (N, D_l) output means (the data themselves for the bottom layer);
    S_out: (N, D_l) output variances, or None for observed outputs; the psi
    statistics of the layer's inputs, Kmm (M, M), beta and jitter as for
    :func:`engine.bound.collapsed_bound_stats`, which gets T_l = sum(mu^2 + S)
    and P_l = Psi1^T mu as the data's sufficient statistics.
    """
    N, D = mu_out.shape
    trOO = float(np.sum(mu_out * mu_out)) + (float(np.sum(S_out)) if S_out is not None else 0.0)
    b = collapsed_bound_stats(N, D, trOO, psi0, Psi1.T @ mu_out, Psi2, Kmm, beta, jitter)
    # F depends on the output means through T (-beta/2 T) and P (dF/dP = b.dP), on S through T
    dmu = Psi1 @ b.dP - beta * mu_out
    return LayerBound(b.value, b.dpsi0, mu_out @ b.dP.T, b.dPsi2, b.dKmm, b.dbeta, dmu, -0.5 * beta, b.posterior)


def _per_layer(value, H, name):
    """``value`` repeated for H layers, or a list of exactly H entries."""
    if isinstance(value, (list, tuple)):
        if len(value) != H:
            raise ShapeError(f"Expected {name} with one entry per layer ({H}), got {len(value)} instead.")
        return list(value)
    return [value] * H


def _validate_layer_dims(layer_dims) -> list:
    if isinstance(layer_dims, numbers.Integral) and not isinstance(layer_dims, bool):
        layer_dims = [layer_dims]
    try:
        dims = list(layer_dims)
    except TypeError:
        raise ConfigurationError(f"Expected layer_dims as a list of positive integers, got {layer_dims!r} "
                                 "instead.") from None
    if not dims:
        raise ConfigurationError("Expected at least one layer in layer_dims, got an empty list instead.")
    return [validate_latent_dim(q) for q in dims]


class DeepGP(LatentVariableModel):
    """Deep GP of stacked GP-LVMs: ``DeepGP(Y, layer_dims=[5, 2], num_inducing=30)``.

    ``layer_dims`` from the data side up; ``kernels``: None (ARD RBF per layer)
    or one kernel per layer, layer l's over Q_l inputs.  ``num_inducing``,
    ``X_variance`` and ``noise_variance`` take one value for all layers or a
    list; ``X`` and ``Z``: None or a list of per-layer arrays.

    Initialisation layer by layer, as the paper does: q(X_0) means from PCA
    of Y, q(X_l) means from PCA of the layer below's initial means taken at
    their principal-component scale (so a [5, 2] model starts with the top
    layer on Y's first two principal components), each standardised; ARD
    lengthscales 1 / (variance fraction) of those components (surplus
    dimensions start switched off); Z_l a random subset of the initial means;
    variances ``X_variance`` (0.5); noise 0.1 of the mean variance of each
    layer's outputs.  With one layer every default equals BayesianGPLVM's.
    """

    objective_name = "ELBO"

    def __init__(self, Y, layer_dims, num_inducing=30, kernels=None, init="pca", seed=0, X=None,
                 X_variance=0.5, Z=None, noise_variance=None, likelihood="gaussian"):
        require_gaussian(likelihood, "DeepGP")
        dims = _validate_layer_dims(layer_dims)
        H = len(dims)
        # the base class validates and centres Y (self.Y); the kernel is a placeholder until the layers exist
        super().__init__(Y, dims[-1], _kernels.RBF(dims[-1], ard=True), noise_variance=1.0, init=init)
        Yc = self.Y
        kernels = _per_layer(kernels, H, "kernels")
        Xs = _per_layer(X, H, "X") if X is not None else [None] * H
        Zs = _per_layer(Z, H, "Z") if Z is not None else [None] * H
        Ms = _per_layer(num_inducing, H, "num_inducing")
        S_init = _per_layer(X_variance, H, "X_variance")
        noises = _per_layer(noise_variance, H, "noise_variance")

        # layer by layer: means, kernels, inducing inputs, noise (module / class docstrings)
        outputs = Yc  # the layer's outputs at their natural (principal-component) scale
        layer_init = []
        for l, Q in enumerate(dims):
            kern = kernels[l]
            fractions = None
            if init == "pca" and (kern is None or Xs[l] is None):

                fractions = pca_variance_fractions(outputs, Q)
            if kern is None:
                kern = (_kernels.RBF(Q, ard=True, lengthscales=1.0 / np.maximum(fractions, 1e-3))
                        if fractions is not None else _kernels.RBF(Q, ard=True))
            if kern.input_dim != Q:
                raise ShapeError(f"Expected the kernel of layer {l} over {Q} inputs, got input_dim="
                                 f"{kern.input_dim} instead.")
            psi.check_supported(kern)
            X0 = initial_X(outputs, Q, init, seed, Xs[l])
            S0 = np.broadcast_to(np.asarray(S_init[l], dtype=float), X0.shape).copy()
            Z0 = inducing_subset(X0, Ms[l], seed) if Zs[l] is None else np.array(Zs[l], dtype=float)
            if Z0.ndim != 2 or Z0.shape[1] != Q:
                raise ShapeError(f"Expected Z of layer {l} with {Q} columns, got shape {Z0.shape} instead.")
            noise = noises[l]
            if noise is None:
                noise = 0.1 * max(float(np.mean(outputs.var(axis=0))) if l == 0 else
                                  float(np.mean(layer_init[-1][0].var(axis=0))), 1e-6)
            layer_init.append((X0, S0, Z0, kern.copy(), float(noise)))
            # the next layer initialises from these means at their principal-component scale
            outputs = X0 * np.sqrt(np.maximum(fractions, 0.0)) if fractions is not None and Xs[l] is None else X0

        self._kernel = layer_init[-1][3].copy()
        self._initial_noise_variance = layer_init[0][4]
        self.layer_dims = dims
        self.num_layers = H
        self._kernels = [entry[3] for entry in layer_init]
        self._kernel_names = [list(k.params) for k in self._kernels]
        self.num_inducing = [entry[2].shape[0] for entry in layer_init]
        specs, values = [], {}
        for l, (X0, S0, Z0, kern, noise) in enumerate(layer_init):
            p = self._prefix(l)
            specs += [self._free_spec(p + "X_mean", X0.shape), ParameterSpec(p + "X_variance", X0.shape, POSITIVE),
                      self._free_spec(p + "Z", Z0.shape),
                      *[ParameterSpec(p + spec.name, spec.shape, spec.transform) for spec in self._kernel_specs(kern)],
                      ParameterSpec(p + "noise_variance", (), POSITIVE)]
            values.update({p + "X_mean": X0, p + "X_variance": S0, p + "Z": Z0, p + "noise_variance": noise,
                           **{p + name: v for name, v in kern.params.items()}})
        self._build_packer(specs, values)

    # ---- names -------------------------------------------------------------------------
    @staticmethod
    def _prefix(layer: int) -> str:
        return f"layer{layer}."

    def _layer_index(self, layer) -> int:
        H = self.num_layers
        if isinstance(layer, bool) or not isinstance(layer, numbers.Integral) or not -H <= layer < H:
            raise ShapeError(f"Expected a layer index in [{-H}, {H}), got {layer!r} instead.")
        return int(layer) % H

    def layer_values(self, values: dict, layer: int) -> dict:
        """The named values of one layer, without the ``layer{l}.`` prefix."""
        p = self._prefix(self._layer_index(layer))
        return {k[len(p):]: v for k, v in values.items() if k.startswith(p)}

    @property
    def noise_names(self) -> tuple:
        """The noise-variance parameter of every layer (what a fit's warm-up holds)."""
        return tuple(self._prefix(l) + "noise_variance" for l in range(self.num_layers))

    #: What :meth:`fit` holds during its warm-up (pass it to :func:`engine.fit` as ``warm_up_fixed``).
    warm_up_fixed = noise_names
    #: Every fit holds the noises first: the layers above the first start from the means below,
    #: which their PCA explains well, and still, with the noises free from the start, an upper
    #: layer explains its inputs as noise (measured: N=40, layers [3, 2], its noise 6.0 against
    #: 0.4 with the hold, and the predictive variance no longer grows away from the data).
    always_warm_up = True

    # ---- kernels and layers --------------------------------------------------------------
    def kernel_at(self, values: dict, layer: int = -1):
        """A copy of layer ``layer``'s kernel (default: the top) with parameters from ``values``."""
        l = self._layer_index(layer)
        p = self._prefix(l)
        return self._kernels[l].with_params({name: values[p + name] for name in self._kernel_names[l]})

    def layer_at(self, values: dict, layer: int) -> DeepLayer:
        l = self._layer_index(layer)
        v = self.layer_values(values, l)
        kern = self.kernel_at(values, l)
        return DeepLayer(v["X_mean"], v["X_variance"], np.asarray(kern.relevance, dtype=float), v["Z"], kern,
                         float(v["noise_variance"]))

    @property
    def layers(self) -> list:
        """[:class:`DeepLayer`] from the data side up, at the current parameters (fresh copies)."""
        values = self.parameters
        return [self.layer_at(values, l) for l in range(self.num_layers)]

    @property
    def X_mean(self) -> np.ndarray:
        """Top layer's latent means (N, Q_top)."""
        return self.parameters[self._prefix(self.num_layers - 1) + "X_mean"]

    @property
    def X_variance(self) -> np.ndarray:
        """Top layer's latent variances (N, Q_top)."""
        return self.parameters[self._prefix(self.num_layers - 1) + "X_variance"]

    def copy(self):
        clone = super().copy()
        clone._kernels = [k.copy() for k in self._kernels]
        return clone

    # ---- the bound ------------------------------------------------------------------------
    def _base_jitter(self, values):
        """1e-8 of the largest mean diagonal of the layers' Kmm (one jitter for all layers)."""
        scale = max(float(np.mean(self.kernel_at(values, l).K_diag(self.layer_values(values, l)["Z"])))
                    for l in range(self.num_layers))
        return start_jitter(scale)

    def _layer_terms(self, values):
        """Per layer: (kernel, psi statistics, Kmm, LayerBound), all at one jitter."""
        while True:
            jitter = self.jitter
            terms = []
            for l in range(self.num_layers):
                v = self.layer_values(values, l)
                kern = self.kernel_at(values, l)
                stats = psi.compute(kern, v["Z"], v["X_mean"], v["X_variance"])
                checkpoint()
                if l == 0:
                    mu_out, S_out = self.Y, None
                else:
                    below = self.layer_values(values, l - 1)
                    mu_out, S_out = below["X_mean"], below["X_variance"]
                Kmm = kern.K(v["Z"])
                beta = 1.0 / float(v["noise_variance"])
                b = self._with_jitter(
                    lambda j: layer_bound(mu_out, S_out, stats.psi0, stats.Psi1, stats.Psi2, Kmm, beta, j),
                    float(np.mean(np.diag(Kmm))), f"inducing-point kernel matrix Kmm of layer {l}")
                checkpoint()
                terms.append((kern, stats, Kmm, b))
            if self.jitter == jitter:  # a raise mid-way: evaluate every layer again at the new value
                return terms

    def _evaluate(self, values):
        H = self.num_layers
        terms = self._layer_terms(values)
        total = 0.0
        grads = {}
        for l, (kern, stats, Kmm, b) in enumerate(terms):
            p = self._prefix(l)
            v = self.layer_values(values, l)
            total += b.value
            g = psi.gradients(kern, v["Z"], v["X_mean"], v["X_variance"], b.dpsi0, b.dPsi1, b.dPsi2)
            checkpoint()
            dKmm_params, dKmm_Z = kern.grad_params_and_X(b.dKmm, v["Z"])
            add_grads(grads, {p + "X_mean": g.mu, p + "X_variance": g.S, p + "Z": g.Z + dKmm_Z,
                              p + "noise_variance": -b.posterior.beta**2 * b.dbeta})
            add_grads(grads, {p + name: value for name, value in g.params.items()})
            add_grads(grads, {p + name: value for name, value in dKmm_params.items()})
            if l > 0:  # the outputs of this layer are q(X_{l-1})
                q = self._prefix(l - 1)
                add_grads(grads, {q + "X_mean": b.dmu_out,
                                  q + "X_variance": np.full(v["X_mean"].shape[:1] + (self.layer_dims[l - 1],),
                                                            b.dS_out)})
        for l in range(H - 1):  # entropies of the hidden layers below the top
            p = self._prefix(l)
            S = values[p + "X_variance"]
            total += 0.5 * float(np.sum(np.log(S))) + 0.5 * S.size * LOG_2PI_E
            add_grads(grads, {p + "X_variance": 0.5 / S})
        p = self._prefix(H - 1)
        mu, S = values[p + "X_mean"], values[p + "X_variance"]
        total -= gaussian_kl(mu, S)
        add_grads(grads, {p + "X_mean": -mu, p + "X_variance": -0.5 * (1.0 - 1.0 / S)})
        return total, grads

    def elbo(self) -> float:
        """The bound F (module docstring), nats, with all constants."""
        return self.objective()

    # ---- fitting ---------------------------------------------------------------------------
    def fit(self, **fit_kwargs):
        """:func:`engine.fit` with every layer's noise held during the warm-up (``warm_up_fixed``)."""
        fit_kwargs.setdefault("warm_up_fixed", self.noise_names)
        return optimize.fit(self, **fit_kwargs)

    def snapshot_state(self) -> dict:
        """Snapshots report the top layer's latents and relevance; every layer is in ``parameters``."""
        values = self.parameters
        top = self.layer_at(values, -1)
        return {"parameters": values, "X_mean": top.X_mean, "X_variance": top.X_variance,
                "relevance": top.relevance}

    # ---- per-layer Bayesian GP-LVMs (prediction and projection) -----------------------------
    def _layer_models(self) -> list:
        """One BayesianGPLVM per layer at the current parameters, whose outputs are the layer
        below's means (uncentred: the hidden layers are zero-mean GPs); cached."""
        return self._cached(self._build_layer_models)

    def _build_layer_models(self, values) -> list:

        models = []
        for l in range(self.num_layers):
            v = self.layer_values(values, l)
            if l == 0:
                out, out_mean = self.Y + self.Y_mean, self.Y_mean
            else:
                out = self.layer_values(values, l - 1)["X_mean"]
                out_mean = np.zeros(out.shape[1])
            m = BayesianGPLVM(out, self.layer_dims[l], num_inducing=v["Z"].shape[0], kernel=self.kernel_at(values, l),
                              X=v["X_mean"], X_variance=v["X_variance"], Z=v["Z"],
                              noise_variance=float(v["noise_variance"]))
            # the layer's own outputs, not re-centred (the S_out term of F_l does not change q(u_l))
            m.Y_mean = np.asarray(out_mean, dtype=float)
            m.Y = np.ascontiguousarray(self.Y if l == 0 else out)
            m.jitter = self.jitter
            models.append(m)
        return models

    # ---- prediction -------------------------------------------------------------------------
    def _check_layer_points(self, X, layer, name):
        return latent_points(X, self.layer_dims[layer], f"{name} (layer {layer})")

    @blas_pinned
    def predict_layers(self, Xnew, Xnew_variance=None, include_noise=False, layer=-1) -> list:
        """Moment-matched propagation down from points of ``layer`` (default: the top), (n, Q_layer):
        [(mean, variance)] for every layer below it, top down, ending with the data
        ((n, D), data units).

        Hidden layers include their noise (it is part of the model); the data
        layer only with ``include_noise``.  ``Xnew_variance`` (n, Q_layer) > 0
        makes the starting points uncertain.
        """
        start = self._layer_index(layer)
        mean = self._check_layer_points(Xnew, start, "Xnew")
        var = None
        if Xnew_variance is not None:
            var = self._check_layer_points(Xnew_variance, start, "Xnew_variance")
            if var.shape != mean.shape or np.any(var <= 0):
                raise ShapeError("Expected Xnew_variance of the same shape as Xnew with positive entries.")
        models = self._layer_models()
        out = []
        for l in range(start, -1, -1):
            mean, var = models[l].predict(mean, var, include_noise=include_noise if l == 0 else True)
            out.append((mean, var))
        return out

    def predict(self, Xnew, Xnew_variance=None, include_noise=False, layer=-1):
        """Predictive mean (n, D) in data units and variance (n, D) at top-layer points Xnew (n, Q_top).

        Moment-matched through the layers (module docstring); ``Xnew_variance``
        (n, Q_top) > 0 makes the top points uncertain too; ``layer`` starts
        from another layer's points instead (0: the layer next to the data).
        """
        return self.predict_layers(Xnew, Xnew_variance, include_noise, layer)[-1]

    # ---- projection ---------------------------------------------------------------------------
    @blas_pinned
    def infer_layers(self, Ynew, observed=None, **options) -> list:
        """Layer-by-layer projection of new rows: [LatentInference] from the data side up.

        Entry 0 is the Bayesian GP-LVM projection of Ynew (n, D) into layer 0;
        entry l projects entry l-1's means into layer l (its ``prediction`` is
        then of layer l-1).  ``options`` as for :func:`engine.infer.infer_latent`.
        """
        models = self._layer_models()
        results = [models[0].infer_latent(Ynew, observed=observed, **options)]
        for l in range(1, self.num_layers):
            results.append(models[l].infer_latent(results[-1].mean, **options))
        return results

    @blas_pinned
    def project(self, Ynew, observed=None, joint=False, max_iters=200, **options) -> DeepProjection:
        """q(x*_l) in every layer for new rows Ynew (n, D) or (D,) (NaN = unobserved, or ``observed``).

        Layer by layer (:meth:`infer_layers`, ``options`` passed on; all rows
        batched).  With ``joint`` every row's q(x*_l) of all layers are then
        optimised together, from there and from the nearest training row's
        q(x_n) (two L-BFGS runs of at most ``max_iters`` iterations per row:
        much slower), so each layer's point is also pulled by the
        layer above rather than by an N(0, I) prior: the density never drops,
        and rows with few observed outputs are placed much better.
        ``log_density`` (n,) is the deep bound's increase when the row is
        added at these q(x*_l), nats (Titsias & Lawrence 2010, eq. 20, for the
        deep bound).
        """

        greedy = self.infer_layers(Ynew, observed=observed, **options)
        starts = [(r.mean, r.variance) for r in greedy]
        values = self.parameters
        if joint:
            Y, mask = check_new_data(self, Ynew, observed)
            Yc = np.where(mask, Y - self.Y_mean, 0.0)
            # a second start: the nearest training row (on the observed entries) in every layer
            dist = mask.astype(float) @ (self.Y * self.Y).T - 2.0 * Yc @ self.Y.T
            nearest = np.argmin(dist, axis=1)
            chain = [(v["X_mean"][nearest], v["X_variance"][nearest])
                     for v in (self.layer_values(values, l) for l in range(self.num_layers))]
            means, variances, density = refine_rows(training_layers(self, values), Yc, mask, [starts, chain],
                                                    max_iters)
        else:
            means, variances = [m for m, _ in starts], [v for _, v in starts]
            density = self._layerwise_density(greedy, values)
        pred, pred_var = self._layer_models()[0].predict(means[0], variances[0], include_noise=True)
        return DeepProjection(means, variances, density, greedy[0].observed, pred, pred_var)

    def _layerwise_density(self, results, values) -> np.ndarray:
        """The deep bound's increase at the layer-by-layer projections (each layer's data term from
        its Bayesian GP-LVM projection, which reports F_O(X, x*) - F_O(X))."""
        H = self.num_layers
        density = np.zeros(len(results[0]))
        for l, r in enumerate(results):
            density += r.log_density + gaussian_kl_rows(r.mean, r.variance)  # the layer's data term alone
            if l > 0:
                beta = 1.0 / float(values[self._prefix(l) + "noise_variance"])
                density -= 0.5 * beta * np.sum(results[l - 1].variance, axis=1)
            if l < H - 1:
                density += 0.5 * np.sum(np.log(r.variance), axis=1) + 0.5 * r.variance.shape[1] * LOG_2PI_E
            else:
                density -= 0.5 * np.sum(r.mean**2 + r.variance - np.log(r.variance) - 1.0, axis=1)
        return density

    def infer_latent(self, Ynew, observed=None, joint=False, **options) -> LatentInference:
        """Project new rows Ynew (n, D) or (D,) (NaN = unobserved) to the top layer (:meth:`project`).

        Returns a LatentInference with the top layer's mean and variance (n, Q_top);
        ``prediction``/``prediction_variance`` reconstruct Ynew (n, D) from the
        row's bottom-layer q(x*) (noise included); ``log_density`` (n,) is the
        deep bound's increase from adding the row, nats.
        """
        p = self.project(Ynew, observed=observed, joint=joint, **options)
        return LatentInference(mean=p.means[-1], variance=p.variances[-1], log_density=p.log_density,
                               observed=p.observed, prediction=p.prediction, prediction_variance=p.prediction_variance)

    def log_density(self, Ynew, observed=None, **options):
        """(n,) the deep bound's increase per new row (see :meth:`infer_latent`), nats."""
        return self.infer_latent(Ynew, observed=observed, **options).log_density

    # ---- saving -------------------------------------------------------------------------------
    def _saved_arrays(self) -> dict:
        import json

        return {"layer_dims": np.array(self.layer_dims),
                "layer_kernel_specs": np.array(json.dumps([k.to_spec() for k in self._kernels]))}

    @classmethod
    def _from_saved(cls, Y, arrays: dict, params: dict):
        """Rebuild from the arrays of :func:`engine.io.save_model` (KeyError when one is missing)."""
        from ..model_file import spec_from_json

        dims = [int(q) for q in arrays["layer_dims"]]
        kernels = [kernel_from_spec(s) for s in spec_from_json(arrays["layer_kernel_specs"], "layers' kernel specs")]
        X = [params[f"layer{l}.X_mean"] for l in range(len(dims))]
        Z = [params[f"layer{l}.Z"] for l in range(len(dims))]
        return cls(Y, dims, kernels=kernels, X=X, Z=Z)

    def __repr__(self):
        return (f"DeepGP(N={self.num_data}, D={self.output_dim}, layer_dims={self.layer_dims}, "
                f"num_inducing={self.num_inducing})")
