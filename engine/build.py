"""One factory: settings -> an engine model, whichever door a user comes through.

The app's catalog, ``gplvm-explorer fit`` and ``engine.sklearn.GPLVMTransformer``
all build their models here, so the same settings and data give the same
model at the same starting point (the same starting objective), whichever
door they came through.

>>> from engine.build import Settings, build                         # doctest: +SKIP
>>> model = build(Y, Settings(model="bayesian", latent_dim=3, num_inducing=10))   # doctest: +SKIP

The start (one choice for every door):

* latent means from ``init`` (PCA, random or Isomap; :mod:`engine.init`), Z a
  seeded random subset of them, latent variances 0.5, noise variance a tenth
  of the data's mean column variance (the models' own defaults);
* an ARD kernel of the chosen family over the Q latent dims.  With a PCA start
  the lengthscales of the stationary kernels (RBF, Matérn) start at
  1 / (variance of each principal component over the largest), capped at 1e3,
  as GPy and Titsias & Lawrence (2010) start: dims PCA finds unimportant start
  nearly switched off.  Measured against lengthscales of 1 (bias + white,
  Q=5, M=30, 300 L-BFGS iterations): a higher starting bound on every data
  set tried and a higher final one on four of five (oil flow 6454 vs 6054
  nats with 5 vs 10 1-NN errors);
* ``bias`` adds a constant term (variance 0.1), ``white`` a white-noise term
  (variance 1e-3).

MRD and the deep GP keep their own starts (per-view relevances from each
view's share of the variance; layer-by-layer PCA) and add the bias and white
terms asked for.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from . import kernels as K
from .errors import ConfigurationError

__all__ = ["KERNELS", "LIKELIHOODS", "MODELS", "Settings", "build", "build_model", "start_kernel"]

#: Model keys -> the engine class each stands for (attribute of the ``engine`` package).
MODELS = {
    "bayesian": "BayesianGPLVM",
    "sparse": "SparseGPLVM",
    "gplvm": "GPLVM",
    "svi": "StochasticBayesianGPLVM",
    "gpds": "DynamicalBGPLVM",
    "mrd": "MRD",
    "deep": "DeepGP",
}

#: Kernel families over the latent space (ARD: one lengthscale or variance per latent dim).
KERNELS = {"rbf": K.RBF, "linear": K.Linear, "matern32": K.Matern32, "matern52": K.Matern52, "mlp": K.MLP}

#: Likelihoods the factory builds models for, and the models that take the non-Gaussian ones.
LIKELIHOODS = ("gaussian", "bernoulli", "poisson")
_TAKE_LIKELIHOOD = ("bayesian", "gplvm", "svi")

_INITS = ("pca", "random", "isomap")

#: Variance of the bias term and of the white-noise term at the start.
BIAS_VARIANCE = 0.1
WHITE_VARIANCE = 1e-3
#: Longest starting lengthscale (a dim PCA finds empty starts at most this far off).
MAX_START_LENGTHSCALE = 1e3


@dataclass(frozen=True)
class Settings:
    """What a model is built from (plain values; every door fills one of these).

    ``num_inducing`` is used by the models with inducing points, ``batch_size``
    by the stochastic model; ``likelihood`` is "gaussian" (the closed-form
    models) or, for the models of ``_TAKE_LIKELIHOOD``, "bernoulli" or "poisson".
    """

    model: str = "bayesian"
    latent_dim: int = 2
    kernel: str = "rbf"
    bias: bool = True
    white: bool = True
    num_inducing: int = 30
    init: str = "pca"
    seed: int = 0
    likelihood: str = "gaussian"
    batch_size: int = 256

    def replace(self, **changes) -> "Settings":
        return dataclasses.replace(self, **changes)


def _choice(value, name, options):
    if not isinstance(value, str) or value not in options:
        raise ConfigurationError(f"Expected {name} to be one of {', '.join(map(repr, options))}, "
                                 f"got {value!r} instead.")
    return value


def _check(settings: Settings) -> None:
    _choice(settings.model, "model", tuple(MODELS))
    if not isinstance(settings.kernel, K.Kernel):
        _choice(settings.kernel, "kernel", tuple(KERNELS))
    _choice(settings.init, "init", _INITS)
    _choice(settings.likelihood, "likelihood", LIKELIHOODS)
    if settings.likelihood != "gaussian" and settings.model not in _TAKE_LIKELIHOOD:
        raise ConfigurationError(f"The {settings.model!r} model takes only the Gaussian likelihood; "
                                 f"likelihood={settings.likelihood!r} needs one of {list(_TAKE_LIKELIHOOD)}.")


def _filled(Y) -> np.ndarray:
    """Y (N, D) as float64 with missing (NaN) cells at their column's observed mean."""
    Y = np.asarray(Y, dtype=np.float64)
    if not np.isnan(Y).any():
        return Y
    means = np.nanmean(Y, axis=0)
    return np.where(np.isnan(Y), np.where(np.isnan(means), 0.0, means), Y)


def _variance_fractions(Y, latent_dim) -> np.ndarray:
    """Variance of each of the top ``latent_dim`` principal components over the largest, (Q,)."""
    from .init import pca_variance_fractions

    if isinstance(Y, np.memmap):  # a file bigger than memory: the scatter matrix in row chunks
        N, D = Y.shape
        mean = np.zeros(D)
        for a in range(0, N, 4096):
            mean += np.asarray(Y[a:a + 4096], dtype=np.float64).sum(axis=0)
        mean /= N
        scatter = np.zeros((D, D))
        for a in range(0, N, 4096):
            block = np.asarray(Y[a:a + 4096], dtype=np.float64) - mean
            scatter += block.T @ block
        w = np.linalg.eigvalsh(0.5 * (scatter + scatter.T))[::-1][:min(latent_dim, N - 1, D)]
        w = w[w > 1e-10 * max(float(np.trace(scatter)), 1e-300)]
        fractions = np.zeros(latent_dim)
        if w.size:
            fractions[:w.size] = w / w[0]
        return fractions
    return pca_variance_fractions(_filled(Y), latent_dim)


def start_kernel(Y, latent_dim: int, kernel="rbf", bias: bool = True, white: bool = True,
                 init: str = "pca"):
    """The kernel a fit of ``Y`` (N, D; NaN = missing) starts from (see the module docstring).

    ``kernel``: a family name of :data:`KERNELS`, to which the bias and white terms
    asked for are added; or a kernel object over ``latent_dim`` inputs, used as given.
    """
    Q = int(latent_dim)
    if isinstance(kernel, K.Kernel):
        return kernel.copy()
    family = KERNELS[_choice(kernel, "kernel", tuple(KERNELS))]
    if init == "pca" and issubclass(family, K._Stationary):
        fractions = _variance_fractions(Y, Q)
        kern = family(Q, lengthscales=1.0 / np.maximum(fractions, 1.0 / MAX_START_LENGTHSCALE))
    else:
        kern = family(Q)
    if bias:
        kern = kern + K.Bias(Q, variance=BIAS_VARIANCE)
    if white:
        kern = kern + K.White(Q, variance=WHITE_VARIANCE)
    return kern


def build(Y, settings: Settings | None = None, *, times=None, view_sizes=None, layer_dims=None, backend=None,
          **changes):
    """The engine model (not fitted) that ``settings`` describe, for data ``Y`` (N, D).

    ``changes`` override fields of ``settings`` (e.g. ``build(Y, latent_dim=3)``).
    Extra inputs of the models that need them: ``times`` (N,) for "gpds" (None:
    row order), ``view_sizes`` (columns per view, in column order) for "mrd"
    (None: two halves), ``layer_dims`` (from the data side up) for "deep"
    (None: one layer of ``latent_dim``).  ``backend`` (e.g.
    ``engine.DaskBackend(client)``) is passed to the models that take one
    ("bayesian", "sparse").

    Raises ConfigurationError for unknown names; the models raise ShapeError,
    UnsupportedKernelError ... for settings that do not fit the data.
    """
    settings = (settings or Settings()).replace(**changes) if changes else (settings or Settings())
    _check(settings)
    builder = _BUILDERS.get(settings.model, _build_plain)
    return builder(Y, settings, times=times, view_sizes=view_sizes, layer_dims=layer_dims, backend=backend)


def build_model(Y, model="bayesian", latent_dim=2, **options):
    """``build(Y, Settings(model=model, latent_dim=latent_dim, ...))`` with keyword settings
    (and the extra inputs ``times``, ``view_sizes``, ``layer_dims``, ``backend``)."""
    extra = {k: options.pop(k) for k in ("times", "view_sizes", "layer_dims", "backend") if k in options}
    return build(Y, Settings(model=model, latent_dim=int(latent_dim), **options), **extra)


def _engine_class(key):
    import engine

    return getattr(engine, MODELS[key])


def _common(Y, s: Settings) -> dict:
    kwargs = dict(kernel=start_kernel(Y, s.latent_dim, s.kernel, s.bias, s.white, s.init), init=s.init,
                  seed=int(s.seed))
    if s.likelihood != "gaussian":  # only the models that take one get here (_check)
        kwargs["likelihood"] = s.likelihood
    return kwargs


def _build_plain(Y, s: Settings, backend=None, **_):
    """The Bayesian, sparse and exact GP-LVMs."""
    kwargs = _common(Y, s)
    if s.model != "gplvm":
        kwargs["num_inducing"] = int(s.num_inducing)
    if backend is not None and s.model in ("bayesian", "sparse"):
        kwargs["backend"] = backend
    return _engine_class(s.model)(Y, int(s.latent_dim), **kwargs)


def _build_svi(Y, s: Settings, **_):
    return _engine_class("svi")(Y, int(s.latent_dim), num_inducing=int(s.num_inducing),
                                batch_size=int(s.batch_size), **_common(Y, s))


def _build_gpds(Y, s: Settings, times=None, **_):
    n = np.shape(Y)[0]
    t = np.arange(n, dtype=float) if times is None else np.asarray(times, dtype=float)
    return _engine_class("gpds")(Y, t, int(s.latent_dim), num_inducing=int(s.num_inducing), **_common(Y, s))


def view_split(d: int, view_sizes) -> list[int]:
    """Columns per view: ``view_sizes`` when it covers the ``d`` columns, else two halves."""
    sizes = [int(v) for v in (view_sizes or ())]
    if len(sizes) >= 1 and all(v >= 1 for v in sizes) and sum(sizes) == d:
        return sizes
    return [d // 2, d - d // 2] if d >= 2 else [d]


def _extra_terms(kern, Q, s: Settings):
    if s.bias:
        kern = kern + K.Bias(Q, variance=BIAS_VARIANCE)
    if s.white:
        kern = kern + K.White(Q, variance=WHITE_VARIANCE)
    return kern


def _build_mrd(Y, s: Settings, view_sizes=None, **_):
    """MRD over the views: its own per-view start, then the chosen kernel's extra terms."""
    MRD = _engine_class("mrd")
    Y = np.asarray(Y, dtype=float)
    sizes = view_split(Y.shape[1], view_sizes)
    views = np.split(Y, np.cumsum(sizes)[:-1], axis=1)
    Q, M, seed = int(s.latent_dim), int(s.num_inducing), int(s.seed)
    base = MRD(views, Q, num_inducing=M, init=s.init, seed=seed)
    if s.kernel == "rbf" and not s.bias and not s.white:
        return base
    # keep MRD's start (ARD lengthscales per view from the share of each view's variance per
    # component, so shared and private dims can emerge) and add the terms asked for
    kernels = []
    for k in base.kernels:
        if s.kernel == "linear":
            k = K.Linear(Q, variances=np.maximum(np.asarray(k.relevance, dtype=float), 1e-6))
        kernels.append(_extra_terms(k, Q, s))
    return MRD(views, Q, num_inducing=M, kernels=kernels, init=s.init, seed=seed, X=base.X_mean)


def _build_deep(Y, s: Settings, layer_dims=None, **_):
    """A deep GP over ``layer_dims``: its own layer-by-layer start, then the extra terms asked for."""
    DeepGP = _engine_class("deep")
    dims = list(layer_dims or (int(s.latent_dim),))
    M, seed = int(s.num_inducing), int(s.seed)
    base = DeepGP(Y, layer_dims=dims, num_inducing=M, init=s.init, seed=seed)
    if not s.bias and not s.white:
        return base
    kernels = [_extra_terms(layer.kernel, q, s) for layer, q in zip(base.layers, dims)]
    X = [np.array(layer.X_mean, dtype=float) for layer in base.layers]
    return DeepGP(Y, layer_dims=dims, num_inducing=M, kernels=kernels, init=s.init, seed=seed, X=X)


_BUILDERS = {"svi": _build_svi, "gpds": _build_gpds, "mrd": _build_mrd, "deep": _build_deep}
