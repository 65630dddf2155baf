"""What every latent variable model shares: data handling, parameters, fitting.

A model holds Y (centred), a kernel *template* and one flat unconstrained
parameter vector.  The objective is evaluated by a pure method of named,
constrained values, so evaluating never changes the model's state; only
``set_free`` / ``set_parameters`` do.
"""
from __future__ import annotations

import copy
import logging
import threading

import numpy as np

from .. import kernels as _kernels
from .. import optimize
from .._threads import blas_pinned
from ..errors import ConfigurationError, ParameterError, ShapeError, UnsupportedOperationError
from ..infer import LatentInference, infer_latent
from ..init import initial_latents
from ..likelihoods import likelihood_name
from ..linalg import escalate_jitter, rows_dot
from ..predictor import Predictor
from ..transforms import IDENTITY, LENGTHSCALE, POSITIVE, ParameterPacker, ParameterSpec
from ..validation import integer, latent_points
from .data_source import InMemoryRows


def validate_latent_dim(latent_dim) -> int:
    return integer(latent_dim, "latent_dim", error=ShapeError)


def initial_X(Y, latent_dim, init, seed, X=None) -> np.ndarray:
    """Initial latent means, (N, Q): given ``X``, or from engine.init.

    ``Y``: (N, D) in memory, or a data source (:mod:`engine.models.data_source`), which
    computes them its own way (e.g. PCA by row chunks).
    """
    N = Y.shape[0] if isinstance(Y, np.ndarray) else Y.num_data
    if X is not None:
        X = np.array(X, dtype=float)
        if X.shape != (N, latent_dim):
            raise ShapeError(f"Expected X of shape {(N, latent_dim)}, got {X.shape} instead.")
        return X
    if not isinstance(Y, np.ndarray):
        return Y.initial_latents(latent_dim, init, seed)
    return initial_latents(Y, latent_dim, method=init, seed=seed)


logger = logging.getLogger(__name__)


class LatentVariableModel:
    """Base class: subclasses define ``_specs`` and ``_evaluate``.

    Subclass contract: ``_evaluate(values) -> (objective, grads)`` where both are
    keyed by parameter name (constrained values, gradients w.r.t. them).
    """

    objective_name = "log-likelihood"

    #: Iterations of a fit for which :func:`engine.fit` holds the noise variance
    #: before letting it move, when the start needs it (see its ``warm_up_iters``).
    warm_up_iters = 100
    #: Hold the noise for ``warm_up_iters`` whatever the start (else only from a start
    #: whose latent means explain little of the data: :func:`engine.optimize.start_explains`).
    always_warm_up = False

    #: Whether NaN entries of Y (or an ``observed`` mask) are trained on as missing values.
    handles_missing = False

    #: Name of the noise model p(y | f) (:mod:`engine.likelihoods`); the closed-form models are Gaussian.
    likelihood = "gaussian"

    def __init_subclass__(cls, likelihoods_of=None, **kwargs):
        """``class Sub(..., likelihoods_of=Base)``: ``Base(..., likelihood="bernoulli")`` builds a Sub.

        The non-Gaussian likelihoods of a model are served by a subclass in its
        own module, which registers here; the base class never imports it.  Every
        model's constructor holds BLAS to one thread (its PCA start, Cholesky
        factors ...): its numbers then do not depend on the BLAS thread count, which
        other threads of the process (another session's fit) may change meanwhile.
        """
        super().__init_subclass__(**kwargs)
        if likelihoods_of is not None:
            likelihoods_of._non_gaussian_class = cls
        if "__init__" in cls.__dict__:
            cls.__init__ = blas_pinned(cls.__init__)

    def __new__(cls, *args, likelihood="gaussian", **kwargs):
        served = cls.__dict__.get("_non_gaussian_class")  # registered on exactly this class
        if served is not None and likelihood_name(likelihood) != "gaussian":
            return super().__new__(served)
        return super().__new__(cls)

    @blas_pinned
    def __init__(self, Y, latent_dim, kernel, *, noise_variance=None, init="pca", observed=None, likelihood=None,
                 source=None):
        """``source``: where the model reads Y (:mod:`engine.models.data_source`); None: Y in memory
        (NaN or ``observed`` as missing values when the model ``handles_missing``; checked against a
        non-Gaussian ``likelihood``'s support and left uncentred when it says so)."""
        self.latent_dim = validate_latent_dim(latent_dim)
        if source is None:
            source = InMemoryRows(Y, observed, missing=self.handles_missing, owner=type(self).__name__,
                                  likelihood=likelihood)
        elif observed is not None:
            raise ConfigurationError(f"Expected observed=None with a data source, got {type(observed).__name__}.")
        #: The training outputs: centred rows by range or index, their mean, moments (data_source).
        self.source = source
        # the data as given (NaN where missing): what files save and impute() returns unchanged
        self._Y_data = source.data
        #: (N, D) bool mask of the observed entries of Y, or None when all are observed.
        self.observed = source.observed
        self.Y_mean = source.Y_mean
        if source.in_memory:
            #: (N, D) Y, centred unless the likelihood says otherwise, 0 where missing (data in memory).
            self.Y = source.Y
        self.num_data, self.output_dim = source.num_data, source.output_dim
        if kernel is None:
            kernel = self._default_kernel(init)
        if kernel.input_dim != self.latent_dim:
            raise ShapeError(f"Expected a kernel over {self.latent_dim} latent dimensions, "
                             f"got input_dim={kernel.input_dim} instead.")
        self._kernel = kernel.copy()
        self._kernel_names = list(kernel.params)
        if noise_variance is None:
            # a tenth of the data's variance: small enough to leave signal for the kernel
            noise_variance = 0.1 * max(source.mean_variance(), 1e-6)
        self._initial_noise_variance = float(noise_variance)
        #: Jitter added to the diagonal of the matrix the model factorises (Kmm for
        #: the collapsed models, K + noise I for the exact one).  It is part of the
        #: objective, chosen at construction and at the start of every fit, and
        #: raised (with a logged warning) only when a factorisation fails.
        self.jitter = 0.0
        self._fixed = frozenset()
        self._lock = threading.RLock()
        self._version = 0
        self._cache = None

    # ---- parameters -------------------------------------------------------------
    def _default_kernel(self, init):
        """ARD RBF; after PCA initialisation its lengthscales are 1 / (variance fraction) of each
        principal component (capped at 1e3), so surplus dimensions start switched off."""
        if init != "pca":
            return _kernels.RBF(self.latent_dim, ard=True)
        fractions = self.source.pca_fractions(self.latent_dim)
        return _kernels.RBF(self.latent_dim, ard=True, lengthscales=1.0 / np.maximum(fractions, 1e-3))

    def _kernel_specs(self, kernel):
        return [ParameterSpec(name, np.shape(value), LENGTHSCALE if name.endswith("lengthscales") else POSITIVE)
                for name, value in kernel.params.items()]

    def _build_packer(self, specs, values):
        self._packer = ParameterPacker(specs)
        self._free = self._packer.pack(values)
        self._free_mask = ~self._inert_entries()
        self.jitter = self._base_jitter(values)

    def _inert_entries(self) -> np.ndarray:
        """(P,) bool: entries of the parameter vector the objective never reads (e.g. the upper
        triangle of a Cholesky factor), left out of what the optimisers move; none by default."""
        return np.zeros(self._packer.size, dtype=bool)

    @staticmethod
    def _noise_spec():
        return ParameterSpec("noise_variance", (), POSITIVE)

    @staticmethod
    def _free_spec(name, shape):
        return ParameterSpec(name, tuple(shape), IDENTITY)

    @property
    def parameter_names(self) -> list[str]:
        return self._packer.names()

    @property
    def parameters(self) -> dict:
        """Named constrained values (fresh arrays)."""
        with self._lock:
            return self._packer.unpack(self._free)

    def get_free(self) -> np.ndarray:
        """Unconstrained flat vector of the parameters that are not fixed, (P_free,)."""
        with self._lock:
            return self._free[self._free_mask].copy()

    def set_free(self, x) -> None:
        """Set the parameters that are not fixed from an unconstrained flat vector (P_free,)."""
        x = np.asarray(x, dtype=float)
        with self._lock:
            size = int(self._free_mask.sum())
            if x.shape != (size,):
                raise ShapeError(f"Expected a vector of length {size}, got shape {x.shape} instead.")
            full = self._free.copy()
            full[self._free_mask] = x
            self._free = full
            self._version += 1
            self._cache = None

    def _full_vector(self, x) -> np.ndarray:
        """The whole unconstrained vector with the free entries taken from x."""
        full = self._free.copy()
        full[self._free_mask] = x
        return full

    def _check_names(self, names, what) -> None:
        unknown = sorted(set(names) - set(self.parameter_names))
        if unknown:
            raise ParameterError(f"Unknown parameter(s) {unknown} in {what}; "
                                 f"expected names from {self.parameter_names}.")

    # ---- fixing parameters ------------------------------------------------------
    @property
    def fixed(self) -> frozenset:
        """Names of the parameters that :func:`engine.fit` holds constant."""
        return self._fixed

    def fix(self, *names) -> None:
        """Hold the named parameters constant in :func:`engine.fit`, e.g. ``fix("Z", "noise_variance")``."""
        self._check_names(names, "fix()")
        self._set_fixed(self._fixed | set(names))

    def unfix(self, *names) -> None:
        """Let the named parameters (all of them when no name is given) be optimised again."""
        self._check_names(names, "unfix()")
        self._set_fixed(self._fixed - set(names) if names else frozenset())

    def _set_fixed(self, names) -> None:
        with self._lock:
            self._fixed = frozenset(names)
            self._free_mask = ~(self._packer.mask(self._fixed) | self._inert_entries())

    def set_parameters(self, **named) -> None:
        """Set named constrained values, e.g. ``set_parameters(Z=..., noise_variance=0.1)``.

        Works for fixed parameters too (fixing only stops the optimiser moving them).
        """
        self._check_names(named, "set_parameters()")
        values = self.parameters
        for name, value in named.items():
            value = np.asarray(value, dtype=float)
            if value.shape != np.shape(values[name]):
                if value.size == np.size(values[name]) or value.ndim == 0:
                    value = np.broadcast_to(value, np.shape(values[name])).copy()
                else:
                    raise ShapeError(f"Expected {name} of shape {np.shape(values[name])}, got {value.shape} instead.")
            if not np.all(np.isfinite(value)):
                raise ShapeError(f"Expected finite values for {name}, got NaN or infinite entries instead.")
            values[name] = value
        free = self._packer.pack(values)
        with self._lock:
            self._free = free
            self._version += 1
            self._cache = None

    def __getattr__(self, name):
        # Named parameters read as attributes: model.X_mean, model.Z, model.lengthscales ...
        if name.startswith("_") or "_packer" not in self.__dict__:
            raise AttributeError(name)
        if name in self._packer.names():
            value = self.parameters[name]
            return float(value) if np.ndim(value) == 0 else value
        raise AttributeError(f"{type(self).__name__!r} has no attribute {name!r}")

    def copy(self):
        """An independent model at the same parameters (data arrays are shared, read-only).

        What to predict with while this model keeps training on another thread.
        """
        with self._lock:
            clone = copy.copy(self)
            clone._free = self._free.copy()
            if "_evaluated" in self.__dict__:  # immutable by-products of the last evaluation (not pickled)
                clone._evaluated = self._evaluated
        clone._kernel = self._kernel.copy()
        clone._free_mask = self._free_mask.copy()
        clone._lock = threading.RLock()
        clone._cache = None
        return clone

    def __getstate__(self):
        """Pickling (e.g. a fitted scikit-learn transformer in joblib): everything but the lock
        and the prediction cache.  Model files for sharing are engine.io's .npz, never pickles."""
        with self._lock:
            state = dict(self.__dict__)
        state.pop("_lock", None)
        state.pop("_evaluated", None)  # the last evaluation's factors (and its O(N Q) values)
        state.pop("_geometry_cache", None)  # the stochastic model's metric factors
        state["_cache"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.RLock()

    def kernel_at(self, values: dict):
        """A copy of the kernel with its parameters taken from ``values``."""
        return self._kernel.with_params({name: values[name] for name in self._kernel_names})

    @property
    def kernel(self):
        """A copy of the kernel at the current parameters."""
        return self.kernel_at(self.parameters)

    @property
    def relevance(self) -> np.ndarray:
        """ARD relevance per latent dimension, (Q,): 1/lengthscale^2 (RBF) or variances (linear)."""
        return np.asarray(self.kernel.relevance, dtype=float)

    @property
    def X_variance(self):
        """Latent variances (N, Q) of a Bayesian model; None for point models."""
        return self.parameters.get("X_variance")

    def _check_points(self, Xnew, name="Xnew"):
        return latent_points(Xnew, self.latent_dim, name)

    # ---- jitter -----------------------------------------------------------------
    def _base_jitter(self, values: dict) -> float:
        """The jitter a fit starts with (subclasses: from the scale of the factorised matrix)."""
        return 0.0

    def begin_fit(self) -> None:
        """Called by :func:`engine.fit` before its first evaluation: choose the jitter for this fit."""
        with self._lock:
            self.jitter = self._base_jitter(self._packer.unpack(self._free))
            self._version += 1
            self._cache = None

    def _with_jitter(self, factorise, scale: float, what: str):
        """``factorise(jitter)`` at the model's jitter, raised by :func:`engine.linalg.escalate_jitter`
        (tenfold, logged) while it fails; the model keeps the jitter that worked.

        ``factorise`` raises :class:`~engine.linalg.FactorisationError` (a
        NumericalError) on failure; ``scale`` is the mean diagonal of the matrix.
        """
        result, self.jitter = escalate_jitter(factorise, self.jitter, scale, what, type(self).__name__)
        return result

    # ---- objective --------------------------------------------------------------
    def _evaluate(self, values: dict):
        raise NotImplementedError

    @blas_pinned
    def objective_and_gradient(self, x) -> tuple[float, np.ndarray]:
        """Objective (to maximise, nats) and its gradient w.r.t. the free vector x, (P_free,).

        Fixed parameters stay at their current values and get no gradient entry.
        """
        x = np.asarray(x, dtype=float)
        with self._lock:
            full = self._full_vector(x)
            mask = self._free_mask
        value, grads = self._evaluate(self._packer.unpack(full))
        return float(value), self._packer.pack_gradient(full, grads)[mask]

    @blas_pinned
    def objective(self) -> float:
        """The objective at the current parameters, in nats (all constants included)."""
        value, _ = self._evaluate(self.parameters)
        return float(value)

    @blas_pinned
    def objective_gradients(self) -> dict:
        """Gradients of the objective w.r.t. the named, constrained parameters (fixed ones too)."""
        _, grads = self._evaluate(self.parameters)
        return grads

    @blas_pinned
    def checkgrad(self, eps: float = 1e-6, seed: int = 0, details: bool = False):
        """Largest relative error of the analytic gradient against central differences.

        For every parameter block that is not fixed, the derivative along a
        random direction d of that block (standard normal entries, in the
        unconstrained parameters, so positive parameters stay positive) is
        compared with (F(x + h d) - F(x - h d)) / 2h, h = eps * max(1, max|x_block|):
        every entry moves by about ``eps``, as in an entry-by-entry check.
        Where Kmm is near-singular the objective itself carries round-off of
        ~cond(Kmm) machine epsilons, which swamps a difference over a tiny
        step; each block is therefore also checked at 10 and 100 times the
        step, and its smallest error counts (a wrong gradient is wrong at
        every step; truncation error at 100 eps stays far below 1e-4).  The
        error of a block is |analytic - numeric| / max(|analytic|, |numeric|,
        1e-2 * the largest |numeric| of any block): a block whose derivative is
        far below the others (e.g. dF/dZ of a linear kernel with M > Q, which
        is ~0) is compared in absolute terms, so finite-difference round-off
        does not read as a large error.  Returns the largest error, or with
        ``details`` a dict block -> (analytic, numeric, error).
        """
        rng = np.random.default_rng(seed)
        with self._lock:
            x = self._free.copy()
        _, grads = self._evaluate(self._packer.unpack(x))
        g = self._packer.pack_gradient(x, grads)
        rows = {}
        for spec in self._packer.specs:
            if spec.name in self._fixed or spec.size == 0:
                continue
            sl = self._packer.slice(spec.name)
            d = np.zeros_like(x)
            d[sl] = rng.standard_normal(spec.size)
            h0 = eps * max(1.0, float(np.max(np.abs(x[sl]))))
            numeric = []
            for h in (h0, 10.0 * h0, 100.0 * h0):
                f_up = self._evaluate(self._packer.unpack(x + h * d))[0]
                f_down = self._evaluate(self._packer.unpack(x - h * d))[0]
                numeric.append((f_up - f_down) / (2.0 * h))
            rows[spec.name] = (float(g @ d), numeric)
        scale = max([abs(n[0]) for _, n in rows.values()], default=0.0)

        def error(a, n):
            return abs(a - n) / max(abs(a), abs(n), 1e-2 * scale, 1e-300)

        out = {}
        for name, (a, numeric) in rows.items():
            n = min(numeric, key=lambda v: error(a, v))
            out[name] = (a, n, error(a, n))
        if details:
            return out
        return max([e for _, _, e in out.values()], default=0.0)

    # ---- prediction and projection ------------------------------------------------
    def predictor(self) -> Predictor | None:
        """The model's :class:`engine.predictor.Predictor` at the current parameters (cached until
        they change; safe to use on another thread), or None when the model predicts by other means
        (e.g. a deep GP's layers)."""
        return None

    @blas_pinned
    def predict(self, Xnew, Xnew_variance=None, include_noise=False):
        """Predictive mean (n, D) in data units and variance (n, D) at latent points Xnew (n, Q)
        (under q(x*) = N(Xnew, diag Xnew_variance) when given); ``include_noise`` adds the noise
        variance.  See :class:`engine.predictor.Predictor` for the formulas."""
        predictor = self.predictor()
        if predictor is None:
            raise NotImplementedError(f"{type(self).__name__} defines no predict().")
        return predictor.predict(Xnew, Xnew_variance, include_noise=include_noise)

    def infer_latent(self, Ynew, observed=None, **options) -> LatentInference:
        """Project new rows Ynew (n, D) or (D,) (NaN = unobserved, or a boolean ``observed``
        mask of the same shape) into the latent space; returns an
        :class:`engine.infer.LatentInference` (see :func:`engine.infer.infer_latent`)."""
        return infer_latent(self, Ynew, observed=observed, **options)

    def projection_problem(self, Yc, mask):
        """The per-row objective of new rows for :func:`engine.infer.infer_latent` (its protocol):
        Yc (n, D) centred new rows, 0 where ``mask`` (n, D) is False."""
        raise UnsupportedOperationError(f"Projection of new data is not implemented for {type(self).__name__}.")

    def nearest_rows(self, Yc, mask, count: int) -> np.ndarray:
        """Indices (n, count) of the training rows nearest to each centred new row on its observed entries.

        Squared distance over the entries observed in the new row (and, when the
        model was trained with missing values, in the training row, as a mean
        over the entries observed in both); ties go to the lower index.  The
        training rows are read chunk by chunk from the model's data source.
        """
        n = Yc.shape[0]
        count = int(min(max(1, count), self.num_data))
        mf = mask.astype(float)
        Ym = Yc * mf
        best_d = np.full((n, 0), np.inf)
        best_i = np.zeros((n, 0), dtype=np.intp)
        for a, b in self.source.chunks():
            T = self.source.read((a, b))  # centred (0 where a training entry is missing)
            # row by row (engine.linalg.rows_dot): a new row's candidates never depend on the other new rows
            if self.observed is None:
                # sum_O (t - y)^2 = sum_O t^2 - 2 sum_O t y + sum_O y^2; the last term is constant per row
                dist = rows_dot(mf, (T * T).T) - 2.0 * rows_dot(Ym, T.T)
            else:  # mean squared difference over the entries observed in both rows
                To = np.asarray(self.observed[a:b], float)
                both = rows_dot(mf, To.T)
                dist = (rows_dot(mf, (T * T).T) - 2.0 * rows_dot(Ym, T.T) + rows_dot(Ym * Ym, To.T)) / np.maximum(both, 1.0)
                dist[both == 0] = np.inf
            d = np.concatenate([best_d, dist], axis=1)
            i = np.concatenate([best_i, np.broadcast_to(np.arange(a, b), (n, b - a))], axis=1)
            keep = np.argsort(d, axis=1, kind="stable")[:, :count]
            best_d = np.take_along_axis(d, keep, axis=1)
            best_i = np.take_along_axis(i, keep, axis=1)
        return best_i

    def log_density(self, Ynew, observed=None, **options):
        """Approximate log p(y* | Y) of new rows, nats; see :func:`engine.infer.infer_latent`."""
        return self.infer_latent(Ynew, observed=observed, **options).log_density

    # ---- latent geometry (engine.geometry) ----------------------------------------------
    def _geometry_maps(self, values) -> list:
        """[(kernel, Z, [(cols, alpha, Sigma)])]: the posterior of the mapping (engine.geometry), from the
        model's :class:`~engine.predictor.Predictor` (Sigma = Kmm^-1 - its posterior covariance term)."""
        predictor = self.predictor()
        if predictor is None:
            raise UnsupportedOperationError(
                f"{type(self).__name__} has no latent metric: it is defined for the GP-LVM, the sparse, Bayesian, "
                "dynamical and stochastic GP-LVMs and MRD (a deep GP's composed layers are not covered).")
        groups = [(g.cols, g.alpha, predictor.covariance_correction(g)) for g in predictor.groups]
        return [(predictor.kernel, predictor.centres, groups)]

    @blas_pinned
    def geometry(self):
        """The :class:`engine.geometry.LatentGeometry` of the mapping at the current parameters
        (cached until they change)."""
        from ..geometry import LatentGeometry

        def build(values):  # the training latents are where the data are (a dynamical model derives them)
            anchors = values["X_mean"] if "X_mean" in values else self.X_mean
            return LatentGeometry(self._geometry_maps(values), anchors)

        return self._cached(build, key="geometry")

    @blas_pinned
    def metric(self, Xnew, dims=None) -> np.ndarray:
        """The expected pull-back metric E[J]^T E[J] + sum_d cov(J_d) at points Xnew (n, Q):
        (n, Q, Q), or (n, 2, 2) for ``dims=(i, j)`` (the other dims at Xnew's values)."""
        return self.geometry().metric(self._check_points(Xnew), dims)

    @blas_pinned
    def magnification(self, Xnew, dims=None) -> np.ndarray:
        """sqrt(det metric) at points Xnew (n, Q), (n,); ``dims=None``: the full Q x Q metric."""
        return self.geometry().magnification(self._check_points(Xnew), dims)

    @blas_pinned
    def geodesic(self, x_start, x_end, num_points=64, dims=None):
        """The shortest path under the metric from x_start to x_end (Q,): an
        :class:`engine.geometry.Geodesic` (path (num_points, Q), length, straight_length, data
        units).  ``dims=(i, j)``: the points agree outside dims and the path moves only in them."""
        return self.geometry().geodesic(x_start, x_end, num_points=num_points, dims=dims)

    # ---- fitting ----------------------------------------------------------------
    def snapshot_state(self) -> dict:
        """What the optimiser's snapshots report: parameters, latents and relevance."""
        values = self.parameters
        return {
            "parameters": values,
            "X_mean": values["X_mean"],
            "X_variance": values.get("X_variance"),
            "relevance": np.asarray(self.kernel_at(values).relevance, dtype=float),
        }

    def fit(self, **fit_kwargs):
        """Optimise the parameters: same arguments as :func:`engine.optimize.fit`."""
        return optimize.fit(self, **fit_kwargs)

    # ---- prediction cache ---------------------------------------------------------
    def _cache_values(self) -> dict:
        """What :meth:`_cached` builds from: every named value (a model with many per-row values
        that its cached factors never read may return fewer)."""
        return self._packer.unpack(self._free)

    def _cached(self, build, key="factors"):
        """``build(values)`` at the current parameters, kept under ``key`` until any change."""
        with self._lock:
            version = self._version
            if self._cache is not None and self._cache[0] == version and key in self._cache[1]:
                return self._cache[1][key]
            values = self._cache_values()
        result = build(values)
        with self._lock:
            if self._version == version:
                if self._cache is None or self._cache[0] != version:
                    self._cache = (version, {})
                self._cache[1][key] = result
        return result

    def __repr__(self):
        return (f"{type(self).__name__}(N={self.num_data}, D={self.output_dim}, Q={self.latent_dim}, "
                f"kernel={self._kernel!r})")
