"""What every latent variable model shares: data handling, parameters, fitting.

A model holds Y (centred), a kernel *template* and one flat unconstrained
parameter vector.  The objective is evaluated by a pure method of named,
constrained values, so evaluating never changes the model's state; only
``set_free`` / ``set_parameters`` do.
"""
from __future__ import annotations

import copy
import threading

import numpy as np

from .. import kernels as _kernels
from ..errors import ShapeError
from ..transforms import IDENTITY, POSITIVE, ParameterPacker, ParameterSpec
from ..validation import real_matrix


def validate_latent_dim(latent_dim) -> int:
    if isinstance(latent_dim, bool) or not isinstance(latent_dim, (int, np.integer)) or latent_dim < 1:
        raise ShapeError(f"Expected latent_dim as a positive integer, got {latent_dim!r} instead.")
    return int(latent_dim)


def initial_X(Y, latent_dim, init, seed, X=None) -> np.ndarray:
    """Initial latent means, (N, Q): given ``X``, or from engine.init."""
    if X is not None:
        X = np.array(X, dtype=float)
        if X.shape != (Y.shape[0], latent_dim):
            raise ShapeError(f"Expected X of shape {(Y.shape[0], latent_dim)}, got {X.shape} instead.")
        return X
    from ..init import initial_latents

    return initial_latents(Y, latent_dim, method=init, seed=seed)


class LatentVariableModel:
    """Base class: subclasses define ``_specs`` and ``_evaluate``.

    Subclass contract: ``_evaluate(values) -> (objective, grads)`` where both are
    keyed by parameter name (constrained values, gradients w.r.t. them).
    """

    objective_name = "log-likelihood"

    def __init__(self, Y, latent_dim, kernel, *, noise_variance=None, init="pca"):
        Y = real_matrix(Y)
        self.latent_dim = validate_latent_dim(latent_dim)
        self.Y_mean = Y.mean(axis=0)
        self.Y = np.ascontiguousarray(Y - self.Y_mean)
        self.num_data, self.output_dim = self.Y.shape
        if kernel is None:
            kernel = self._default_kernel(init)
        if kernel.input_dim != self.latent_dim:
            raise ShapeError(f"Expected a kernel over {self.latent_dim} latent dimensions, "
                             f"got input_dim={kernel.input_dim} instead.")
        self._kernel = kernel.copy()
        self._kernel_names = list(kernel.params)
        if noise_variance is None:
            # a tenth of the data's variance: small enough to leave signal for the kernel
            noise_variance = 0.1 * max(float(np.mean(self.Y.var(axis=0))), 1e-6)
        self._initial_noise_variance = float(noise_variance)
        self.jitter = 0.0
        self._lock = threading.RLock()
        self._version = 0
        self._cache = None

    # ---- parameters -------------------------------------------------------------
    def _default_kernel(self, init):
        """ARD RBF; after PCA initialisation its lengthscales are 1 / (variance fraction) of each
        principal component (capped at 1e3), so surplus dimensions start switched off."""
        if init != "pca":
            return _kernels.RBF(self.latent_dim, ard=True)
        from ..init import pca_variance_fractions

        fractions = pca_variance_fractions(self.Y, self.latent_dim)
        return _kernels.RBF(self.latent_dim, ard=True, lengthscales=1.0 / np.maximum(fractions, 1e-3))

    def _kernel_specs(self, kernel):
        return [ParameterSpec(name, np.shape(value), POSITIVE) for name, value in kernel.params.items()]

    def _build_packer(self, specs, values):
        self._packer = ParameterPacker(specs)
        self._free = self._packer.pack(values)

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
        """Unconstrained flat parameter vector, (P,)."""
        with self._lock:
            return self._free.copy()

    def set_free(self, x) -> None:
        x = np.asarray(x, dtype=float)
        if x.shape != self._free.shape:
            raise ShapeError(f"Expected a vector of length {self._free.size}, got shape {x.shape} instead.")
        with self._lock:
            self._free = x.copy()
            self._version += 1
            self._cache = None

    def set_parameters(self, **named) -> None:
        """Set named constrained values, e.g. ``set_parameters(Z=..., noise_variance=0.1)``."""
        unknown = sorted(set(named) - set(self.parameter_names))
        if unknown:
            raise KeyError(f"Unknown parameter(s) {unknown}; expected names from {self.parameter_names}.")
        values = self.parameters
        for name, value in named.items():
            value = np.asarray(value, dtype=float)
            if value.shape != np.shape(values[name]):
                if value.size == np.size(values[name]) or value.ndim == 0:
                    value = np.broadcast_to(value, np.shape(values[name])).copy()
                else:
                    raise ShapeError(f"Expected {name} of shape {np.shape(values[name])}, got {value.shape} instead.")
            values[name] = value
        self.set_free(self._packer.pack(values))

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
        clone._kernel = self._kernel.copy()
        clone._lock = threading.RLock()
        clone._cache = None
        return clone

    def kernel_at(self, values: dict):
        """A copy of the kernel with its parameters taken from ``values``."""
        k = self._kernel.copy()
        k.set_params(**{name: values[name] for name in self._kernel_names})
        return k

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
        Xnew = np.atleast_2d(np.asarray(Xnew, dtype=float))
        if Xnew.ndim != 2 or Xnew.shape[1] != self.latent_dim:
            raise ShapeError(f"Expected {name} with {self.latent_dim} columns, got shape {Xnew.shape} instead.")
        if not np.all(np.isfinite(Xnew)):
            raise ShapeError(f"{name} contains NaN or infinite values.")
        return np.ascontiguousarray(Xnew)

    # ---- objective --------------------------------------------------------------
    def _evaluate(self, values: dict):
        raise NotImplementedError

    def objective_and_gradient(self, x) -> tuple[float, np.ndarray]:
        """Objective (to maximise, nats) and its gradient w.r.t. the free vector x, (P,)."""
        x = np.asarray(x, dtype=float)
        value, grads = self._evaluate(self._packer.unpack(x))
        return float(value), self._packer.pack_gradient(x, grads)

    def objective(self) -> float:
        """The objective at the current parameters, in nats."""
        value, _ = self._evaluate(self.parameters)
        return float(value)

    def objective_gradients(self) -> dict:
        """Gradients of the objective w.r.t. the named, constrained parameters."""
        _, grads = self._evaluate(self.parameters)
        return grads

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
        from ..optimize import fit

        return fit(self, **fit_kwargs)

    # ---- prediction cache ---------------------------------------------------------
    def _cached(self, build):
        """Factors for prediction at the current parameters, rebuilt after any change."""
        with self._lock:
            version = self._version
            if self._cache is not None and self._cache[0] == version:
                return self._cache[1]
            values = self._packer.unpack(self._free)
        result = build(values)
        with self._lock:
            if self._version == version:
                self._cache = (version, result)
        return result

    def __repr__(self):
        return (f"{type(self).__name__}(N={self.num_data}, D={self.output_dim}, Q={self.latent_dim}, "
                f"kernel={self._kernel!r})")
