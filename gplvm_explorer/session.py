"""Training sessions: one background fit per browser session.

This module is the only part of the app that imports the engine's model
classes.  A :class:`TrainingSession` builds a model from a data matrix and a
:class:`ModelConfig`, runs ``model.fit(callback=..., stop=..., pause=...)`` on
a daemon thread, and publishes what the UI needs under one lock:

* the latest :class:`~engine.optimize.Snapshot` and an append-only history of
  ``(iteration, objective)`` pairs (the UI polls these at a few Hz);
* a *predictor*: a frozen copy of the model taken between two optimiser
  iterations, at most every ``predict_interval`` seconds (and once at the
  end).  The worker keeps mutating its own model while fitting; the UI only
  ever calls ``predict`` on the frozen copy, so a prediction never sees a
  half-updated parameter vector.
* a variance grid for the latent map, computed *on the worker thread* with
  that copy right after it is taken, for the slice the UI last asked for
  (:meth:`TrainingSession.set_slice`).  The grid therefore refreshes at a
  bounded rate while training and costs the web server's event loop nothing.

Worker threads never touch Bokeh or Panel objects.

A process-wide :class:`TrainingLimiter` caps the number of concurrent fits
(server configuration, not per-session state); its size comes from the
``GPLVM_EXPLORER_MAX_TRAININGS`` environment variable (default 2).
"""
from __future__ import annotations

import copy
import dataclasses
import os
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from engine.errors import (
    EngineError,
    NumericalError,
    OptimizationError,
    ShapeError,
    UnsupportedKernelError,
)
from engine.optimize import Snapshot

__all__ = [
    "MODELS",
    "KERNELS",
    "INITS",
    "OPTIMIZERS",
    "ModelConfig",
    "Busy",
    "TrainingLimiter",
    "default_limiter",
    "configure_limiter",
    "TrainingSession",
    "SliceSpec",
    "VarianceGrid",
    "build_model",
    "check_config",
    "kernels_for",
    "explain_error",
]

#: Model kinds: key -> label shown to users.
MODELS = {
    "bayesian": "Bayesian GP-LVM",
    "sparse": "Sparse GP-LVM",
    "gplvm": "GP-LVM (exact)",
}

#: Kernel families: key -> label.  Which ones a model takes: :func:`kernels_for`.
KERNELS = {
    "rbf": "RBF (ARD)",
    "linear": "Linear (ARD)",
    "matern32": "Matérn 3/2 (ARD)",
    "matern52": "Matérn 5/2 (ARD)",
    "mlp": "MLP",
}

#: Kernels with closed-form psi statistics (Bayesian GP-LVM) and those the
#: sparse model is documented to take.
_PSI_KERNELS = ("rbf", "linear")

INITS = {"pca": "PCA", "random": "Random", "isomap": "Isomap"}
OPTIMIZERS = {"lbfgs": "L-BFGS-B", "scg": "Scaled conjugate gradients", "adam": "Adam"}

#: Isomap needs a dense N x N geodesic matrix; the engine caps N.
try:  # pragma: no cover - depends on the engine version
    from engine.init import ISOMAP_MAX_POINTS
except Exception:  # pragma: no cover
    ISOMAP_MAX_POINTS = 3000


def kernels_for(model: str) -> list[str]:
    """Kernel keys the given model kind supports."""
    if model == "gplvm":
        return list(KERNELS)
    return list(_PSI_KERNELS)


@dataclass(frozen=True)
class ModelConfig:
    """Everything needed to build and fit one model (plain values only)."""

    model: str = "bayesian"
    kernel: str = "rbf"
    bias: bool = True
    white: bool = True
    latent_dim: int = 5
    num_inducing: int = 30
    init: str = "pca"
    optimizer: str = "lbfgs"
    max_iters: int = 300
    seed: int = 0

    def describe(self) -> str:
        """One line for people, e.g. ``Bayesian GP-LVM, RBF (ARD) + bias + white, Q=5, M=30``."""
        kern = KERNELS.get(self.kernel, self.kernel)
        if self.bias:
            kern += " + bias"
        if self.white:
            kern += " + white"
        parts = [MODELS.get(self.model, self.model), kern, f"Q={self.latent_dim}"]
        if self.model != "gplvm":
            parts.append(f"M={self.num_inducing}")
        parts.append(f"init={INITS.get(self.init, self.init)}")
        parts.append(f"optimiser={OPTIMIZERS.get(self.optimizer, self.optimizer)}")
        parts.append(f"{self.max_iters} iterations")
        parts.append(f"seed={self.seed}")
        return ", ".join(parts)


def check_config(config: ModelConfig, n: int, d: int) -> tuple[list[str], list[str]]:
    """Validate a configuration against data of shape ``(n, d)``.

    Returns ``(errors, notes)``: errors make training impossible (the Train
    button explains them); notes describe automatic adjustments.
    """
    errors: list[str] = []
    notes: list[str] = []
    if config.model not in MODELS:
        errors.append(f"Expected a model in {sorted(MODELS)}, got {config.model!r} instead.")
        return errors, notes
    if config.kernel not in kernels_for(config.model):
        allowed = ", ".join(KERNELS[k] for k in kernels_for(config.model))
        errors.append(
            f"The {MODELS[config.model]} needs closed-form kernel expectations; "
            f"choose one of: {allowed}."
        )
    if config.latent_dim < 1:
        errors.append("The latent dimensionality Q must be at least 1.")
    if n < 3:
        errors.append(f"Need at least 3 data points to train, got {n}.")
    if config.model != "gplvm":
        if config.num_inducing < 1:
            errors.append("The number of inducing points M must be at least 1.")
        elif config.num_inducing > n:
            errors.append(
                f"M={config.num_inducing} inducing points is more than the {n} data points; "
                f"choose M ≤ {n}."
            )
    if config.model == "gplvm" and n > 1500:
        notes.append(
            f"The exact GP-LVM costs O(N³) per iteration; with N={n} it will be slow. "
            "The sparse or Bayesian GP-LVM scales linearly in N."
        )
    if config.init == "isomap" and n > ISOMAP_MAX_POINTS:
        errors.append(
            f"Isomap initialisation is limited to {ISOMAP_MAX_POINTS} points (N={n}); "
            "use PCA or subsample the data."
        )
    if config.max_iters < 1:
        errors.append("The number of iterations must be at least 1.")
    return errors, notes


def _build_kernel(config: ModelConfig):
    from engine import kernels as K

    Q = int(config.latent_dim)
    classes = {
        "rbf": lambda: K.RBF(Q),
        "linear": lambda: K.Linear(Q),
        "matern32": lambda: K.Matern32(Q),
        "matern52": lambda: K.Matern52(Q),
        "mlp": lambda: K.MLP(Q),
    }
    kern = classes[config.kernel]()
    if config.bias:
        kern = kern + K.Bias(Q, variance=0.1) if _accepts(K.Bias, "variance") else kern + K.Bias(Q)
    if config.white:
        kern = kern + K.White(Q, variance=1e-3) if _accepts(K.White, "variance") else kern + K.White(Q)
    return kern


def _accepts(cls, name: str) -> bool:
    import inspect

    try:
        return name in inspect.signature(cls).parameters
    except (TypeError, ValueError):  # pragma: no cover
        return False


def build_model(Y: np.ndarray, config: ModelConfig):
    """Construct (but do not fit) the engine model a configuration describes."""
    import engine

    kernel = _build_kernel(config)
    common = dict(kernel=kernel, init=config.init, seed=int(config.seed))
    Q = int(config.latent_dim)
    if config.model == "gplvm":
        return engine.GPLVM(Y, Q, **common)
    if config.model == "sparse":
        return engine.SparseGPLVM(Y, Q, num_inducing=int(config.num_inducing), **common)
    if config.model == "bayesian":
        return engine.BayesianGPLVM(Y, Q, num_inducing=int(config.num_inducing), **common)
    raise ValueError(f"Expected a model in {sorted(MODELS)}, got {config.model!r} instead.")


def explain_error(exc: BaseException) -> str:
    """A message for people: what happened and, where possible, what to try."""
    msg = str(exc).strip() or type(exc).__name__
    if isinstance(exc, NumericalError):
        return (
            f"Numerical failure: {msg} "
            "Try: standardise the data (Data card), add a white-noise term to the kernel, "
            "use fewer inducing points M or a smaller Q, or a different seed/initialisation."
        )
    if isinstance(exc, OptimizationError):
        return (
            f"The optimiser stopped: {msg} "
            "Try: standardise the data, add a white-noise term, or a different optimiser or seed."
        )
    if isinstance(exc, UnsupportedKernelError):
        return f"Kernel not supported by this model: {msg}"
    if isinstance(exc, ShapeError):
        return f"The data or settings do not fit together: {msg}"
    if isinstance(exc, EngineError):
        return f"Training failed: {msg}"
    if isinstance(exc, (np.linalg.LinAlgError, FloatingPointError)):
        return (
            f"Numerical failure ({type(exc).__name__}: {msg}). "
            "Try: standardise the data, add a white-noise term, or use fewer inducing points."
        )
    if isinstance(exc, MemoryError):
        return "Out of memory: use fewer data points (subsample) or a sparse/Bayesian model."
    return f"Unexpected error in training ({type(exc).__name__}): {msg}"


# --------------------------------------------------------------------------
# Process-wide cap on concurrent trainings
# --------------------------------------------------------------------------


class Busy(RuntimeError):
    """Raised by :meth:`TrainingSession.start` when the server is at its limit."""


class TrainingLimiter:
    """A counting limiter (non-blocking acquire) with a readable state."""

    def __init__(self, limit: int = 2):
        if limit < 1:
            raise ValueError(f"Expected a limit of at least 1, got {limit} instead.")
        self._limit = int(limit)
        self._active = 0
        self._lock = threading.Lock()

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def active(self) -> int:
        with self._lock:
            return self._active

    def set_limit(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"Expected a limit of at least 1, got {limit} instead.")
        with self._lock:
            self._limit = int(limit)

    def try_acquire(self) -> bool:
        with self._lock:
            if self._active >= self._limit:
                return False
            self._active += 1
            return True

    def release(self) -> None:
        with self._lock:
            if self._active > 0:
                self._active -= 1


def _env_limit() -> int:
    raw = os.environ.get("GPLVM_EXPLORER_MAX_TRAININGS", "2")
    try:
        return max(1, int(raw))
    except ValueError:
        return 2


_LIMITER = TrainingLimiter(_env_limit())


def default_limiter() -> TrainingLimiter:
    """The process-wide limiter used by sessions that are not given one."""
    return _LIMITER


def configure_limiter(limit: int) -> None:
    """Set the process-wide cap (the CLI's ``--max-trainings``)."""
    _LIMITER.set_limit(limit)


# --------------------------------------------------------------------------
# Latent slice and variance grid
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class SliceSpec:
    """A 2-D slice of the latent space: shown dims, values of the others, grid size."""

    x_dim: int = 0
    y_dim: int = 1
    fixed: tuple = ()  # one value per latent dimension (used for the dims not shown)
    auto: bool = True  # follow the two most relevant dimensions
    resolution: int = 60


@dataclass
class VarianceGrid:
    """Predictive variance over a regular grid of the (x_dim, y_dim) plane."""

    x_dim: int
    y_dim: int
    xs: np.ndarray  # (R,)
    ys: np.ndarray  # (R,)
    variance: np.ndarray  # (R, R), rows follow ys
    bounds: tuple  # (x0, y0, x1, y1)
    version: int = 0


def most_relevant(relevance: np.ndarray, k: int = 2) -> list[int]:
    """Indices of the ``k`` largest relevances (ties: lower index first)."""
    rel = np.nan_to_num(np.asarray(relevance, dtype=float).ravel(), nan=0.0)
    order = sorted(range(rel.size), key=lambda i: (-rel[i], i))
    return order[:k]


def slice_dims(spec: SliceSpec, relevance: np.ndarray | None, Q: int) -> tuple[int, int]:
    """The (x, y) latent dims a slice shows, resolving ``auto``."""
    if Q < 2:
        return 0, 0
    if spec.auto and relevance is not None and len(relevance) == Q:
        a, b = most_relevant(relevance, 2)
        return a, b
    x, y = int(spec.x_dim) % Q, int(spec.y_dim) % Q
    if x == y:
        y = (x + 1) % Q
    return x, y


def latent_bounds(X: np.ndarray, x_dim: int, y_dim: int, margin: float = 0.2) -> tuple:
    """A padded box around the training latents in the two shown dims."""
    def lim(v):
        lo, hi = float(np.min(v)), float(np.max(v))
        span = hi - lo
        if not np.isfinite(span) or span < 1e-9:
            span = 1.0
        return lo - margin * span, hi + margin * span

    x0, x1 = lim(X[:, x_dim])
    y0, y1 = lim(X[:, y_dim])
    return (x0, y0, x1, y1)


def compute_variance_grid(predictor, X_mean: np.ndarray, relevance, spec: SliceSpec) -> VarianceGrid:
    """Predictive variance on a ``resolution``² grid of the slice (any thread)."""
    Q = X_mean.shape[1]
    xd, yd = slice_dims(spec, relevance, Q)
    x0, y0, x1, y1 = latent_bounds(X_mean, xd, yd)
    R = int(spec.resolution)
    # cell centres, so hv.Image(bounds=...) lines up exactly
    xs = x0 + (np.arange(R) + 0.5) * (x1 - x0) / R
    ys = y0 + (np.arange(R) + 0.5) * (y1 - y0) / R
    base = np.zeros(Q)
    if spec.fixed is not None and len(spec.fixed) == Q:
        base[:] = np.asarray(spec.fixed, dtype=float)
    gx, gy = np.meshgrid(xs, ys)
    Xg = np.tile(base, (R * R, 1))
    Xg[:, xd] = gx.ravel()
    Xg[:, yd] = gy.ravel()
    _, var = predictor.predict(Xg)
    var = np.asarray(var, dtype=float).reshape(-1)
    if var.size != R * R:  # a model returning per-output variances: average them
        var = np.asarray(var).reshape(R * R, -1).mean(axis=1)
    return VarianceGrid(xd, yd, xs, ys, var.reshape(R, R), (x0, y0, x1, y1))


# --------------------------------------------------------------------------
# The training session
# --------------------------------------------------------------------------

#: Session states.  ``idle`` before the first start; terminal: finished,
#: stopped, error.
IDLE, STARTING, RUNNING, PAUSED, STOPPING, FINISHED, STOPPED, ERROR = (
    "idle", "starting", "running", "paused", "stopping", "finished", "stopped", "error",
)
ACTIVE_STATES = (STARTING, RUNNING, PAUSED, STOPPING)


@dataclass
class Poll:
    """What changed since the UI last looked (see :meth:`TrainingSession.poll`)."""

    state: str
    snapshot: Any  # latest Snapshot or None
    iterations: np.ndarray  # new history points since ``since``
    objectives: np.ndarray
    history_length: int
    grid: VarianceGrid | None  # newest grid (check .version)
    predictor_version: int
    error: str | None
    started_at: float | None
    objective_name: str


class TrainingSession:
    """One model fit on a daemon thread, observable from the UI thread.

    Parameters
    ----------
    limiter:
        Cap on concurrent fits; the process-wide one by default.
    model_factory:
        ``(Y, config) -> model``; :func:`build_model` by default (tests pass
        small stand-ins implementing ``fit``/``predict``/``X_mean``).
    predict_interval:
        Minimum seconds between two predictor copies (and variance grids)
        while training.
    """

    def __init__(
        self,
        limiter: TrainingLimiter | None = None,
        model_factory: Callable[[np.ndarray, ModelConfig], Any] = build_model,
        predict_interval: float = 1.0,
    ):
        self._limiter = limiter if limiter is not None else default_limiter()
        self._factory = model_factory
        self.predict_interval = float(predict_interval)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._pause = threading.Event()
        self._thread: threading.Thread | None = None
        self._reset()
        self._slice = SliceSpec()

    # ---- state -----------------------------------------------------------
    def _reset(self):
        self._state = IDLE
        self._snapshot = None
        self._iters: list[int] = []
        self._objs: list[float] = []
        self._predictor = None
        self._predictor_version = 0
        self._grid: VarianceGrid | None = None
        self._grid_version = 0
        self._error: str | None = None
        self._traceback: str | None = None
        self._started_at: float | None = None
        self._finished_at: float | None = None
        self._config: ModelConfig | None = None
        self._objective_name = "objective"
        self._last_copy = 0.0
        self._model = None
        self._result = None
        self._jitter = 0.0

    @property
    def state(self) -> str:
        with self._lock:
            return self._state

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def config(self) -> ModelConfig | None:
        return self._config

    @property
    def error(self) -> str | None:
        with self._lock:
            return self._error

    @property
    def error_traceback(self) -> str | None:
        with self._lock:
            return self._traceback

    @property
    def predictor(self):
        """A frozen model copy that is safe to ``predict`` with on any thread."""
        with self._lock:
            return self._predictor

    @property
    def snapshot(self):
        with self._lock:
            return self._snapshot

    @property
    def objective_name(self) -> str:
        return self._objective_name

    @property
    def jitter(self) -> float:
        return self._jitter

    @property
    def final_model(self):
        """The fitted model once the thread has ended (None before)."""
        if self.active:
            return None
        with self._lock:
            return self._model if self._state in (FINISHED, STOPPED) else None

    def history(self) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            return np.asarray(self._iters, dtype=int), np.asarray(self._objs, dtype=float)

    # ---- control ---------------------------------------------------------
    def start(self, Y: np.ndarray, config: ModelConfig) -> None:
        """Start fitting on a daemon thread; raises :class:`Busy` at the cap."""
        if self.active:
            raise RuntimeError("A training is already running in this session; stop it first.")
        if self._thread is not None:
            self._thread.join(timeout=5)
        if not self._limiter.try_acquire():
            raise Busy(
                f"The server is busy: {self._limiter.limit} training"
                f"{'s are' if self._limiter.limit != 1 else ' is'} already running "
                "(the limit for this server). Try again in a moment."
            )
        with self._lock:
            self._reset()
            self._state = STARTING
            self._config = config
            self._started_at = time.perf_counter()
        self._stop.clear()
        self._pause.clear()
        Y = np.array(Y, dtype=float, copy=True)
        self._thread = threading.Thread(
            target=self._run, args=(Y, config), name="gplvm-training", daemon=True
        )
        try:
            self._thread.start()
        except BaseException:
            self._limiter.release()
            raise

    def pause(self) -> None:
        with self._lock:
            if self._state == RUNNING or self._state == STARTING:
                self._pause.set()
                self._state = PAUSED

    def resume(self) -> None:
        with self._lock:
            if self._state == PAUSED:
                self._pause.clear()
                self._state = RUNNING

    def stop(self, wait: float | None = None) -> None:
        """Ask the fit to end after the current iteration (keeps the best point)."""
        with self._lock:
            if self._state in (STARTING, RUNNING, PAUSED):
                self._state = STOPPING
        self._stop.set()
        self._pause.clear()
        if wait and self._thread is not None:
            self._thread.join(timeout=wait)

    def join(self, timeout: float | None = None) -> bool:
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    def close(self) -> None:
        """Stop and forget (browser session destroyed)."""
        self.stop(wait=None)

    def set_slice(self, spec: SliceSpec) -> None:
        """The slice the worker should shade next time it takes a predictor copy."""
        with self._lock:
            self._slice = spec

    def load_model(self, model, config: ModelConfig | None = None) -> None:
        """Adopt an already fitted model (e.g. loaded from a file)."""
        if self.active:
            raise RuntimeError("Stop the running training first.")
        with self._lock:
            self._reset()
            self._model = model
            self._config = config
            self._objective_name = getattr(model, "objective_name", "objective")
            self._state = FINISHED
        snap = _snapshot_from_model(model)
        self._publish(model, snap, force=True, final=True)

    # ---- polling (UI thread) ---------------------------------------------
    def poll(self, since: int = 0) -> Poll:
        with self._lock:
            it = np.asarray(self._iters[since:], dtype=int)
            ob = np.asarray(self._objs[since:], dtype=float)
            return Poll(
                state=self._state,
                snapshot=self._snapshot,
                iterations=it,
                objectives=ob,
                history_length=len(self._iters),
                grid=self._grid,
                predictor_version=self._predictor_version,
                error=self._error,
                started_at=self._started_at,
                objective_name=self._objective_name,
            )

    # ---- worker ----------------------------------------------------------
    def _run(self, Y: np.ndarray, config: ModelConfig) -> None:
        model = None
        try:
            model = self._factory(Y, config)
            with self._lock:
                self._model = model
                self._objective_name = getattr(model, "objective_name", "objective")
                if self._state == STARTING:
                    self._state = PAUSED if self._pause.is_set() else RUNNING
            if not self._stop.is_set():
                self._result = model.fit(
                    optimizer=config.optimizer,
                    max_iters=int(config.max_iters),
                    callback=self._on_snapshot,
                    stop=self._stop,
                    pause=self._pause,
                )
            # final, consistent state: the model no longer changes
            snap = self._snapshot or _snapshot_from_model(model)
            if self._snapshot is not None:
                snap = _snapshot_from_model(model, like=self._snapshot)
            self._publish(model, snap, force=True, final=True)
            self._jitter = float(getattr(model, "jitter", 0.0) or 0.0)
            with self._lock:
                self._state = STOPPED if self._stop.is_set() else FINISHED
                self._finished_at = time.perf_counter()
        except BaseException as exc:  # shown in the page, never re-raised into the server
            text = explain_error(exc)
            with self._lock:
                self._error = text
                self._traceback = traceback.format_exc()
                self._state = ERROR
                self._finished_at = time.perf_counter()
            # keep whatever consistent predictor we had: the page stays usable
        finally:
            self._limiter.release()

    def _on_snapshot(self, snap) -> None:
        """Optimiser callback (worker thread, between iterations)."""
        with self._lock:
            self._snapshot = snap
            self._iters.append(int(snap.iteration))
            self._objs.append(float(snap.objective))
        now = time.perf_counter()
        if self._predictor is None or now - self._last_copy >= self.predict_interval:
            self._publish(self._model, snap)
            self._last_copy = time.perf_counter()

    def _publish(self, model, snap, force: bool = False, final: bool = False) -> None:
        """Freeze a predictor copy and shade the current slice (worker thread)."""
        if model is None:
            return
        try:
            frozen = model if final else _freeze(model)
        except Exception:  # pragma: no cover - a model that cannot be copied
            return
        with self._lock:
            spec = self._slice
            if final:
                self._snapshot = snap if snap is not None else self._snapshot
        grid = None
        X = np.asarray(getattr(snap, "X_mean", None) if snap is not None else frozen.X_mean)
        try:
            if X.ndim == 2 and X.shape[1] >= 2:
                grid = compute_variance_grid(frozen, X, getattr(snap, "relevance", None), spec)
        except Exception:
            grid = None  # the shading is a nicety; never kill the fit for it
        with self._lock:
            self._predictor = frozen
            self._predictor_version += 1
            if grid is not None:
                self._grid_version += 1
                grid.version = self._grid_version
                self._grid = grid


def _freeze(model):
    """A copy of ``model`` that later optimiser steps cannot change.

    Called on the worker thread between two iterations, when the model sits at
    the snapshot's parameters.  Engine models provide ``copy()`` (independent
    parameters, shared read-only data); anything else is deep-copied.
    """
    if hasattr(model, "copy"):
        return model.copy()
    return copy.deepcopy(model)


def _snapshot_from_model(model, like=None) -> Snapshot:
    """An engine Snapshot of a model's current state (end of fit, loaded model).

    Counters (iteration, elapsed, ...) come from ``like``, the last snapshot, if any.
    """
    try:
        obj = float(model.objective())
    except Exception:
        obj = float(getattr(like, "objective", np.nan)) if like is not None else float("nan")
    X_var = getattr(model, "X_variance", None)
    try:
        params = dict(model.snapshot_state().get("parameters", {}))
    except Exception:
        params = dict(getattr(like, "parameters", {}) or {})
    return Snapshot(
        iteration=int(getattr(like, "iteration", 0)) if like is not None else 0,
        objective=obj,
        grad_norm=float(getattr(like, "grad_norm", np.nan)) if like is not None else float("nan"),
        elapsed=float(getattr(like, "elapsed", 0.0)) if like is not None else 0.0,
        parameters=params,
        X_mean=np.array(model.X_mean, dtype=float, copy=True),
        X_variance=None if X_var is None else np.array(X_var, dtype=float, copy=True),
        relevance=np.array(model.relevance, dtype=float, copy=True),
        n_evaluations=int(getattr(like, "n_evaluations", 0)) if like is not None else 0,
        optimizer=str(getattr(like, "optimizer", "")) if like is not None else "",
    )
