"""Training on a background thread: one :class:`TrainingJob` per Train click.

The job builds the engine model from a :class:`~gplvm_explorer.catalog.ModelConfig`,
waits for a slot of the process-wide :class:`Limiter` (showing its place in
the queue), runs ``engine.fit`` with ``stop`` / ``pause`` events and turns
what happens into *events*, in order, each with a sequence number:

* :class:`StatusEvent` -- queued (with the position), starting, running,
  paused, stopping, finished, stopped, failed (with a message for people);
* :class:`ProgressEvent` -- the objective points since the last event
  (coalesced: never one event per iteration) and the latest iteration;
* :class:`ResultEvent` -- an immutable :class:`TrainedResult`: a frozen
  ``model.copy()`` taken between two iterations plus the latent arrays of that
  snapshot, at most every ``publish_interval`` seconds and once at the end.

The page takes the events with :meth:`TrainingJob.drain` when ``notify`` tells
it there are some; ``notify`` is throttled to ``notify_interval`` while
iterations stream in, and immediate for status changes.  The thread never
touches Bokeh or Panel objects, and copies nothing of size N per iteration
(the engine's snapshot arrays are handed over as they are).
"""
from __future__ import annotations

import dataclasses
import enum
import logging
import os
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..catalog import ModelConfig, spec, time_start

logger = logging.getLogger(__name__)

__all__ = [
    "ACTIVE",
    "Limiter",
    "PreparedStart",
    "ProgressEvent",
    "ResultEvent",
    "Status",
    "StatusEvent",
    "TrainedResult",
    "TrainingJob",
    "configure_limiter",
    "default_limiter",
    "explain_error",
    "stopped_early_note",
]


def stopped_early_note(iteration: int, exc: BaseException, kept: str) -> str:
    """What people read when the numbers ended a fit after ``iteration`` iterations (a NumericalError
    ``exc``; its best point is kept, as ``kept`` says): the page's note and the command line's line."""
    reason = str(exc).split(". Try")[0].rstrip(".")
    return (f"Stopped early at iteration {iteration}: {reason}. {kept}; standardising the data, fewer inducing "
            "points or a smaller Q may let it train longer.")


class Status(str, enum.Enum):
    IDLE = "idle"
    QUEUED = "queued"
    STARTING = "starting"
    RUNNING = "running"
    PAUSED = "paused"
    STOPPING = "stopping"
    FINISHED = "finished"
    STOPPED = "stopped"
    FAILED = "failed"

    def __str__(self) -> str:
        return self.value


#: Frozen results while training come at most every this many seconds per data row (2 s at 20,000
#: rows, 10 s at 100,000): each costs the page a pass over the rows (the map's posterior, its KD-tree).
PUBLISH_SECONDS_PER_ROW = 1e-4

#: Seconds a :class:`PreparedStart` waits after it is made before it builds: changes of the
#: settings in quick succession replace it before it costs anything.
PREPARE_DELAY = 0.2

ACTIVE = frozenset({Status.QUEUED, Status.STARTING, Status.RUNNING, Status.PAUSED, Status.STOPPING})


@dataclass(frozen=True, eq=False)
class TrainedResult:
    """A consistent, immutable view of a model at one iteration.

    ``model`` is a frozen copy (``predict`` is safe on any thread; nothing
    changes it afterwards); the arrays are read-only.  ``final`` marks the
    state after the fit ended.  :meth:`from_model` builds one from a model (and
    the fit's snapshot while it trains).
    """

    run_id: int
    iteration: int
    objective: float
    objective_name: str
    model: Any
    X_mean: np.ndarray  # (N, Q)
    X_variance: np.ndarray | None  # (N, Q) or None
    relevance: np.ndarray  # (Q,); for several views (MRD), each dim's largest over the views
    parameters: dict
    config: ModelConfig
    dataset: Any = None
    final: bool = False
    jitter: float = 0.0
    view_relevance: np.ndarray | None = None  # (V, Q) per view (MRD), else None
    _predictor_lock: Any = field(default_factory=threading.Lock, init=False, repr=False)

    @classmethod
    def from_model(cls, model, *, run_id: int, config: ModelConfig, dataset=None, iteration: int = 0,
                   objective: float | None = None, final: bool = True, snapshot=None) -> "TrainedResult":
        """The result of ``model`` as it is, or at ``snapshot`` (an engine Snapshot taken while it trains:
        its arrays are handed over as they are, nothing of size N is copied).

        ``objective`` None: the snapshot's, else the model's own (one evaluation).  Arrays are made
        read-only; the latent parameters are left out of ``parameters`` (they are X_mean and
        X_variance); a relevance with one row per view (MRD) is kept as ``view_relevance`` and
        ``relevance`` is each dimension's largest over the views.
        """
        if snapshot is not None:
            X_mean, X_var, rel = snapshot.X_mean, snapshot.X_variance, snapshot.relevance
            params = dict(snapshot.parameters)
            iteration = int(snapshot.iteration)
            objective = float(snapshot.objective) if objective is None else objective
        else:
            state = model.snapshot_state()
            X_mean, X_var, rel = (np.array(state["X_mean"], dtype=float), state.get("X_variance"),
                                  np.array(state["relevance"], dtype=float))
            X_var = None if X_var is None else np.array(X_var, dtype=float)
            params = dict(state.get("parameters", {}))
            params.pop("X_mean", None)
            params.pop("X_variance", None)
            objective = float(model.objective()) if objective is None else objective
        view_rel = None
        if rel is not None and np.ndim(rel) == 2:  # one row per view: (Q,) is the largest of them
            view_rel = np.array(rel, dtype=float)
            rel = view_rel.max(axis=0)
        for arr in (X_mean, X_var, rel, view_rel):
            if arr is not None:
                arr.setflags(write=False)
        return cls(run_id=run_id, iteration=int(iteration), objective=float(objective),
                   objective_name=getattr(model, "objective_name", config.spec.objective_name), model=model, X_mean=X_mean,
                   X_variance=X_var, relevance=rel, parameters=params, config=config, dataset=dataset,
                   final=final, jitter=float(getattr(model, "jitter", 0.0) or 0.0), view_relevance=view_rel)

    @property
    def latent_dim(self) -> int:
        return int(self.X_mean.shape[1])

    @property
    def predictor(self):
        """The model's :class:`engine.predictor.Predictor`, taken once (thread-safe); None where the
        model predicts by other means (``model.predictor()`` is None or absent).

        The first call may cost a pass over the data (the latent map's thread makes it);
        afterwards a prediction at n points is O(n M^2 D), independent of N.
        """
        cache = self.__dict__.get("_predictor")
        if cache is None:
            with self._predictor_lock:
                cache = self.__dict__.get("_predictor")
                if cache is None:
                    make = getattr(self.model, "predictor", None)
                    cache = (make() if callable(make) else None,)
                    self.__dict__["_predictor"] = cache  # frozen dataclass: a cache, not a field
        return cache[0]

    def predict(self, Xnew: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean (n, D) and variance (n, D) of f at latent points (n, Q) (noise not included)."""
        predictor = self.predictor
        if predictor is not None:
            return predictor.predict(Xnew)
        mean, var = self.model.predict(np.atleast_2d(Xnew))
        mean = np.atleast_2d(np.asarray(mean, dtype=float))
        var = np.asarray(var, dtype=float)
        if var.ndim == 1:
            var = np.repeat(var[:, None], mean.shape[1], axis=1)
        return mean, var


@dataclass(frozen=True)
class StatusEvent:
    run_id: int
    seq: int
    status: Status
    message: str = ""
    position: int = 0  # place in the queue (1 = next), when queued
    details: str = ""  # traceback of a failure (for the log and the page's details)
    reason: str = ""  # why a finished fit ended (engine FitResult.reason: "converged", "max_iters", ...)


@dataclass(frozen=True)
class ProgressEvent:
    run_id: int
    seq: int
    iterations: np.ndarray  # new points of the objective trace
    objectives: np.ndarray
    iteration: int
    objective: float
    elapsed: float
    evaluations: int
    epoch: float = 0.0  # passes over the rows so far (minibatch models); 0 for the others
    #: the best objective's relative rise over the convergence rule's window (engine Snapshot.change):
    #: the run converges when it falls to the rule's rtol; NaN without a rule or before a full window
    change: float = float("nan")


@dataclass(frozen=True)
class ResultEvent:
    run_id: int
    seq: int
    result: TrainedResult


def explain_error(exc: BaseException) -> str:
    """A message for people: what happened and, where possible, what to try."""
    from engine.errors import EngineError, NumericalError, OptimizationError, ShapeError, UnsupportedKernelError

    msg = str(exc).strip() or type(exc).__name__
    if isinstance(exc, NumericalError):
        return (f"Numerical failure: {msg} Try: standardise the data (Data card), add a white-noise term to "
                "the kernel, use fewer inducing points M or a smaller Q, or a different seed/initialisation.")
    if isinstance(exc, OptimizationError):
        return (f"The optimiser stopped: {msg} "
                "Try: standardise the data, add a white-noise term, or a different optimiser or seed.")
    if isinstance(exc, UnsupportedKernelError):
        return f"Kernel not supported by this model: {msg}"
    if isinstance(exc, ShapeError):
        return f"The data or settings do not fit together: {msg}"
    if isinstance(exc, EngineError):
        return f"Training failed: {msg}"
    if isinstance(exc, (np.linalg.LinAlgError, FloatingPointError)):
        return (f"Numerical failure ({type(exc).__name__}: {msg}). "
                "Try: standardise the data, add a white-noise term, or use fewer inducing points.")
    if isinstance(exc, MemoryError):
        return "Out of memory: use fewer data points (subsample) or the sparse or Bayesian model."
    return f"Unexpected error in training ({type(exc).__name__}): {msg}"


# --------------------------------------------------------------------------
# Process-wide limiter with a queue
# --------------------------------------------------------------------------

class Limiter:
    """At most ``limit`` trainings at once in this process; the others wait in line."""

    def __init__(self, limit: int = 2):
        if limit < 1:
            raise ValueError(f"Expected a limit of at least 1, got {limit} instead.")
        self._limit = int(limit)
        self._active = 0
        self._queue: list = []
        self._cond = threading.Condition()

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def active(self) -> int:
        with self._cond:
            return self._active

    @property
    def waiting(self) -> int:
        with self._cond:
            return len(self._queue)

    def set_limit(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"Expected a limit of at least 1, got {limit} instead.")
        with self._cond:
            self._limit = int(limit)
            self._cond.notify_all()

    def acquire(self, ticket, stop: threading.Event, on_position: Callable[[int], None] | None = None) -> bool:
        """Wait for a slot; False when ``stop`` is set first.  Reports queue positions (1 = next)."""
        last = None
        with self._cond:
            self._queue.append(ticket)
            try:
                while True:
                    if stop.is_set():
                        return False
                    pos = self._queue.index(ticket)
                    if pos == 0 and self._active < self._limit:
                        self._queue.pop(0)
                        self._active += 1
                        self._cond.notify_all()
                        return True
                    if pos + 1 != last and on_position is not None:
                        last = pos + 1
                        on_position(last)
                    self._cond.wait(timeout=1.0)
            finally:
                if ticket in self._queue:
                    self._queue.remove(ticket)
                    self._cond.notify_all()

    def release(self) -> None:
        with self._cond:
            if self._active > 0:
                self._active -= 1
            self._cond.notify_all()

    def wake(self) -> None:
        """Let waiting trainings re-check their stop events now."""
        with self._cond:
            self._cond.notify_all()


def _env_limit() -> int:
    try:
        return max(1, int(os.environ.get("GPLVM_EXPLORER_MAX_TRAININGS", "2")))
    except ValueError:
        return 2


_LIMITER = Limiter(_env_limit())


def default_limiter() -> Limiter:
    """The process-wide limiter (size from ``GPLVM_EXPLORER_MAX_TRAININGS``, default 2)."""
    return _LIMITER


def configure_limiter(limit: int) -> None:
    """Set the process-wide cap (the CLI's ``--max-trainings``)."""
    _LIMITER.set_limit(limit)


# --------------------------------------------------------------------------
# One training
# --------------------------------------------------------------------------

class _Observed:
    """The model as ``engine.fit`` sees it, reporting the first objective value.

    ``fit`` evaluates the starting point before its first iteration; that value
    is iteration 0 of the trace, so the curve starts as soon as the first
    evaluation is done instead of after the first full iteration.
    """

    def __init__(self, model, on_first: Callable[[float], None]):
        self._model = model
        self._on_first = on_first

    def objective_and_gradient(self, x):
        value, grad = self._model.objective_and_gradient(x)
        if self._on_first is not None:
            first, self._on_first = self._on_first, None
            first(float(value))
        return value, grad

    def __getattr__(self, name):
        return getattr(self._model, name)


#: One starting point computed at a time in the process (they serve Train clicks still to come).
_PREPARE_LOCK = threading.Lock()


class PreparedStart:
    """The model of a likely next Train click, built and evaluated at its start ahead of the click.

    On a daemon thread, ``delay`` seconds after it is made (unless :meth:`take`
    wants it sooner): build the model from ``(Y, config)`` and run
    ``engine.fit(model, max_iters=0)``, which chooses the fit's jitter and
    evaluates the objective at the starting point.  A :class:`TrainingJob`
    given this object takes the model and that value (iteration 0 of its
    trace) instead of building: the first point of the curve is drawn as soon
    as Train is clicked, and it is the true objective of the model then
    trained (the fit evaluates the same model at the same point again).

    Unless a Train click already waits for it, it then times one more evaluation
    (:func:`~gplvm_explorer.catalog.time_start`): :attr:`timing`, the measured cost
    the page's estimates (ETA, the proposal of a model for big data) scale from,
    handed to ``on_timed(timing)`` (called on its thread).

    It matches only the same ``Y`` array (identity) and the same config but for
    the run's length; the page cancels it when the data or settings change.  It
    yields to trainings: while the process-wide limiter is full it computes
    nothing until a job takes it.  Never raises: a failure leaves it empty and
    the job builds (and reports the error) as usual.
    """

    def __init__(self, Y: np.ndarray, config: ModelConfig, *,
                 build: Callable[[np.ndarray, ModelConfig], Any] | None = None,
                 limiter: Limiter | None = None, delay: float = PREPARE_DELAY,
                 on_timed: Callable[[Any], None] | None = None):
        self._Y = Y
        self._on_timed = on_timed
        self.timing = None  # catalog.StartTiming once measured
        self.config = config
        self._key = self.key(config)
        self._build = build or (lambda Y, cfg: cfg.spec.build(Y, cfg))
        self._limiter = limiter if limiter is not None else default_limiter()
        self._delay = float(delay)
        self._cancel = threading.Event()
        self._wake = threading.Event()  # end the delay: taken or cancelled
        self._wanted = False  # a job waits for it
        self._done = threading.Event()
        self._model = None
        self._value: float | None = None
        self._started: tuple = (config, "")  # (config the model was built with, note) of the start
        self._thread = threading.Thread(target=self._run, name="gplvm-prepare", daemon=True)

    @staticmethod
    def key(config: ModelConfig) -> ModelConfig:
        """What must agree for a prepared start to serve a run (everything but the run's length)."""
        return config.model_key()

    @staticmethod
    def applies(config: ModelConfig) -> bool:
        """Whether a start can be prepared: full-batch models without extra inputs."""
        s = config.spec
        return not s.minibatch and not s.inputs and config.optimizer != "svi"

    def start(self) -> "PreparedStart":
        self._thread.start()
        return self

    def matches(self, Y: np.ndarray, config: ModelConfig) -> bool:
        return Y is self._Y and self.key(config) == self._key and not self._cancel.is_set()

    @property
    def ready(self) -> bool:
        """The model and its starting value are there."""
        return self._done.is_set() and self._model is not None

    @property
    def value(self) -> float | None:
        """The objective at the start (nats), once ready."""
        return self._value

    def cancel(self) -> None:
        """Stop computing (within an evaluation) and let go of the model; it matches nothing after."""
        self._cancel.set()
        self._wake.set()

    def take(self, stop: threading.Event) -> tuple | None:
        """(model, objective at its start, config it was built with, note), waiting for the
        computation; None if it failed, was cancelled or ``stop`` was set first.  Once only: the
        model now belongs to the caller.  The config and note differ from the one asked for when
        the start fell back (`start_with_fallbacks`)."""
        self._wanted = True
        self._wake.set()
        while not self._done.wait(0.05):
            if stop.is_set():
                self.cancel()
                return None
        if self._cancel.is_set() or self._model is None:
            return None
        taken = (self._model, float(self._value), *self._started)
        self._model = None
        self._cancel.set()  # taken: it serves no other run
        return taken

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until it has finished (or given up); True when finished."""
        return self._done.wait(timeout)

    def _run(self) -> None:
        try:
            self._wake.wait(self._delay)
            while not self._cancel.is_set() and not self._wanted and self._limiter.active >= self._limiter.limit:
                self._wake.wait(0.5)  # the trainings running now come first
            with _PREPARE_LOCK:
                if self._cancel.is_set():
                    return
                began = time.perf_counter()
                started = start_with_fallbacks(self._build, self._Y, self.config, stop=self._cancel)
                if started is None or self._cancel.is_set():
                    return
                model, value, config, note = started
                timing = None
                if not self._wanted:  # a Train click waits for it: no time for the timing
                    timing = time_start(model, config, *np.shape(self._Y), stop=self._cancel,
                                        first_seconds=time.perf_counter() - began)
                if self._cancel.is_set():
                    return
                self._model, self._value, self._started = model, value, (config, note)
            if timing is not None:
                self.timing = timing
                if self._on_timed is not None:
                    self._on_timed(timing)
        except BaseException:  # the job builds again and reports what goes wrong
            logger.debug("Preparing the start of a training failed", exc_info=True)
            self._model = None
        finally:
            self._done.set()


def _build_pinned(build, Y, config):
    """``build(Y, config)`` with BLAS on one thread: the initialisation's few small products
    (PCA of an (N, D) matrix) took ~0.7 s at 20,000 rows with OpenBLAS's threads on a busy
    two-core machine, ~0.07 s on one."""
    import engine

    with engine.single_blas_thread():
        return build(Y, config)


def start_with_fallbacks(build, Y, config: ModelConfig, stop: threading.Event | None = None) -> tuple | None:
    """(model, objective at its start, config it was built with, note) of a full-batch model:
    when the numbers refuse the start asked for, ``engine.fit_start.start_model`` falls back to a
    random start, then fewer inducing points, and the note says so.  None when ``stop`` was set."""
    from engine.fit_start import start_model

    uses_inducing = config.spec.uses_inducing

    def make(init, num_inducing):
        changed = dataclasses.replace(config, init=init,
                                      num_inducing=num_inducing if uses_inducing else config.num_inducing)
        return _build_pinned(build, Y, changed)

    start = start_model(make, config.init, int(config.num_inducing) if uses_inducing else None,
                        optimizer=config.optimizer, stop=stop)
    if start is None:
        return None
    if start.note:
        config = dataclasses.replace(config, init=start.init,
                                     num_inducing=start.num_inducing if uses_inducing else config.num_inducing)
        logger.warning("%s", start.note)
    return start.model, start.objective, config, start.note


def _check_start(prepared: float, evaluated: float) -> None:
    """The prepared starting value against the fit's own first evaluation (equal: same model, same point)."""
    if not np.isclose(prepared, evaluated, rtol=1e-9, atol=0.0):
        logger.warning("The prepared starting objective %r differs from the fit's first evaluation %r",
                       prepared, evaluated)


class TrainingJob:
    """One fit on a daemon thread, reporting through ordered events.

    Parameters
    ----------
    run_id : identifies the run in every event (the page ignores stale runs).
    Y : (N, D) data; config : what to build and how to fit.
    notify : called (from any thread) when events are waiting; must be cheap.
    build : ``(Y, config) -> model``; the catalog's ModelSpec.build by default.
    publish_interval : seconds between two frozen results while training (at least
        ``PUBLISH_SECONDS_PER_ROW`` per data row).
    notify_interval : seconds between two progress notifications.
    prepared : a :class:`PreparedStart` of the same data and settings: its model and starting
        value are taken instead of building (the value is iteration 0 at once).
    pace : a :class:`~gplvm_explorer.training.pace.Pace` spacing the iterations (None: unpaced).
    """

    def __init__(self, run_id: int, Y: np.ndarray, config: ModelConfig, *, dataset=None,
                 notify: Callable[[], None] | None = None, limiter: Limiter | None = None,
                 build: Callable[[np.ndarray, ModelConfig], Any] | None = None,
                 publish_interval: float = 1.0, notify_interval: float = 0.2,
                 prepared: PreparedStart | None = None, pace=None):
        self.run_id = int(run_id)
        self.config = config
        self._Y = Y
        self._dataset = dataset
        self._notify = notify or (lambda: None)
        self._limiter = limiter if limiter is not None else default_limiter()
        self._build = build or (lambda Y, cfg: cfg.spec.build(Y, cfg))
        self.publish_interval = float(publish_interval)
        self.notify_interval = float(notify_interval)
        self._stop = threading.Event()
        self._pause = threading.Event()
        self._lock = threading.Lock()
        self._events: list = []
        self._seq = 0
        self._trace_it: list[int] = []
        self._trace_obj: list[float] = []
        self._latest: tuple | None = None  # (iteration, objective, elapsed, evaluations)
        self._status = Status.IDLE
        self._phase = Status.QUEUED  # what the fit is doing when not paused/stopping
        self._model = None
        self._objective_name = config.spec.objective_name
        self._last_publish = -np.inf
        self._publish_floor = PUBLISH_SECONDS_PER_ROW * len(Y)
        self._last_notify = -np.inf
        self._thread: threading.Thread | None = None
        self._prepared = prepared
        self._note = ""  # what changed when the start fell back (start_with_fallbacks)
        self._pace = pace

    # ---- control (any thread) ----------------------------------------------------
    @property
    def status(self) -> Status:
        with self._lock:
            return self._status

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("A TrainingJob runs once; make a new one to train again.")
        self._thread = threading.Thread(target=self._run, name=f"gplvm-training-{self.run_id}", daemon=True)
        self._thread.start()

    def pause(self) -> None:
        with self._lock:
            if self._status not in (Status.QUEUED, Status.STARTING, Status.RUNNING):
                return
            self._pause.set()
            self._status_locked(Status.PAUSED)
        self._notify()

    def resume(self) -> None:
        with self._lock:
            if self._status != Status.PAUSED:
                return
            self._pause.clear()
            self._status_locked(self._phase)
        self._notify()

    def stop(self) -> None:
        """End the fit at the next check (the model keeps its best point so far)."""
        with self._lock:
            active = self._status in ACTIVE and self._status != Status.STOPPING
            self._stop.set()
            self._pause.clear()
            if active:
                self._status_locked(Status.STOPPING)
        self._limiter.wake()
        if active:
            self._notify()

    def join(self, timeout: float | None = None) -> bool:
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # ---- events (page thread) --------------------------------------------------------
    def drain(self) -> list:
        """Every event since the last call, in order (progress coalesced)."""
        with self._lock:
            self._flush_progress_locked()
            events, self._events = self._events, []
        return events

    def epochs(self, iteration: int) -> float:
        """Passes over the rows after ``iteration`` iterations (minibatch models; 0 for the others)."""
        if not self.config.spec.minibatch:
            return 0.0
        n = max(1, int(np.shape(self._Y)[0]))
        return float(iteration) * min(max(1, int(self.config.batch_size)), n) / n

    # ---- internals ---------------------------------------------------------------------
    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _flush_progress_locked(self) -> None:
        if not self._trace_it and self._latest is None:
            return
        it, obj, elapsed, evals, change = (self._latest if self._latest is not None
                                           else (0, np.nan, 0.0, 0, np.nan))
        self._events.append(ProgressEvent(
            self.run_id, self._next_seq(), np.asarray(self._trace_it, dtype=float),
            np.asarray(self._trace_obj, dtype=float), int(it), float(obj), float(elapsed), int(evals),
            epoch=self.epochs(it), change=float(change)))
        self._trace_it, self._trace_obj, self._latest = [], [], None

    def _status_locked(self, status: Status, message: str = "", position: int = 0, details: str = "",
                       reason: str = "") -> None:
        self._flush_progress_locked()  # points before a status change arrive before it
        self._status = status
        self._events.append(StatusEvent(self.run_id, self._next_seq(), status, message, position, details,
                                        reason))

    def _emit_status(self, status: Status, message: str = "", position: int = 0, details: str = "",
                     phase: bool = True, reason: str = "") -> None:
        with self._lock:
            if phase:
                self._phase = status
            # a pause or stop asked for meanwhile wins over the phase change
            if self._status == Status.STOPPING and status not in (Status.FINISHED, Status.STOPPED, Status.FAILED):
                pass
            elif self._status == Status.PAUSED and status in (Status.STARTING, Status.RUNNING, Status.QUEUED):
                pass
            else:
                self._status_locked(status, message, position, details, reason)
        self._notify()

    def _emit_result(self, result: TrainedResult) -> None:
        with self._lock:
            self._flush_progress_locked()
            self._events.append(ResultEvent(self.run_id, self._next_seq(), result))

    def _on_queue_position(self, position: int) -> None:
        with self._lock:
            self._phase = Status.QUEUED
            if self._status in (Status.PAUSED, Status.STOPPING):
                return
            self._status_locked(Status.QUEUED, position=position)
        self._notify()

    def _on_first_value(self, value: float) -> None:
        with self._lock:
            self._trace_it.append(0)
            self._trace_obj.append(value)
            self._latest = (0, value, 0.0, 1, np.nan)
        self._last_notify = time.monotonic()
        self._notify()

    def _on_snapshot(self, snap) -> None:
        """engine.fit's callback (worker thread, between iterations): cheap, O(1) per call."""
        with self._lock:
            self._trace_it.append(int(snap.iteration))
            self._trace_obj.append(float(snap.objective))
            self._latest = (int(snap.iteration), float(snap.objective), float(snap.elapsed),
                            int(snap.n_evaluations), float(getattr(snap, "change", np.nan)))
        now = time.monotonic()
        if now - self._last_publish >= max(self.publish_interval, self._publish_floor):
            self._last_publish = now
            self._publish(self._model.copy(), snap, final=False)
        if now - self._last_notify >= self.notify_interval:
            self._last_notify = now
            self._notify()
        if self._pace is not None:
            self._pace.wait(self._stop)

    def _publish(self, model, snap, final: bool) -> None:
        objective = None if snap is not None else self._trace_last_objective()
        iteration = 0 if snap is not None else self._trace_last_iteration()
        self._emit_result(TrainedResult.from_model(
            model, run_id=self.run_id, config=self.config, dataset=self._dataset, iteration=iteration,
            objective=objective, final=final, snapshot=snap))

    def _trace_last_iteration(self) -> int:
        return int(self._last_seen[0]) if self._last_seen else 0

    def _trace_last_objective(self) -> float:
        return float(self._last_seen[1]) if self._last_seen else float("nan")

    def _run(self) -> None:
        import engine

        acquired = False
        early = ""
        self._last_seen = None
        final = (Status.FAILED, "The training ended unexpectedly.", "", "")
        try:
            acquired = self._limiter.acquire(self, self._stop, self._on_queue_position)
            if not acquired:
                final = (Status.STOPPED, "Stopped before it started.", "", "")
                return
            self._emit_status(Status.STARTING)
            prepared, self._prepared = self._prepared, None
            taken = prepared.take(self._stop) if prepared is not None else None
            if taken is None and PreparedStart.applies(self.config):
                taken = start_with_fallbacks(self._build, self._Y, self.config, stop=self._stop)
            if taken is not None:
                model, start_value, started, self._note = taken
                # a prepared start serves any max_iters: only what a fallback changed is taken from it
                self.config = dataclasses.replace(self.config, init=started.init,
                                                  num_inducing=started.num_inducing)
            else:  # minibatch models and those with extra inputs start in their own fit
                model, start_value = _build_pinned(self._build, self._Y, self.config), None
            self._model = model
            self._objective_name = getattr(model, "objective_name", self._objective_name)
            result = None
            if not self._stop.is_set():
                self._emit_status(Status.RUNNING, self._note)
                if start_value is None:
                    observed = _Observed(model, self._on_first_value)
                else:  # iteration 0 is known: drawn now; the fit's own first evaluation only confirms it
                    self._on_first_value(start_value)
                    observed = _Observed(model, lambda value: _check_start(start_value, value))
                callback = self._remember(self._on_snapshot)
                if self._pace is not None:
                    self._pace.restart()
                try:
                    result = engine.fit(observed, optimizer=self.config.optimizer,
                                        max_iters=int(self.config.max_iters), callback=callback, stop=self._stop,
                                        pause=self._pause, convergence=self.config.convergence())
                except engine.NumericalError as exc:
                    if self._last_seen is None:  # not one iteration: nothing to keep
                        raise
                    # the engine left the model at its best point: a result, stopped early, not a failure
                    early = self._stopped_early(exc)
            if result is not None:
                self._last_seen = (int(result.iterations), float(result.objective))
            # the fit is over: the model no longer changes and is handed over as it is
            self._publish(model, None, final=True)
            stopped = self._stop.is_set() or bool(getattr(result, "stopped", False)) or bool(early)
            final = (Status.STOPPED if stopped else Status.FINISHED, early or self._note, "",
                     str(getattr(result, "reason", "")))
        except BaseException as exc:  # shown in the page, never raised into the server
            logger.exception("Training run %d failed", self.run_id)
            details = traceback.format_exc()
            if self._model is not None:
                try:  # the engine leaves the model at its best point: keep the page usable
                    self._publish(self._model, None, final=True)
                except Exception:
                    logger.exception("Could not publish the model after a failure")
            final = (Status.FAILED, explain_error(exc), details, "")
        finally:
            if self._prepared is not None:  # never taken (stopped while queued)
                self._prepared.cancel()
            if acquired:
                self._limiter.release()
            # the slot is free before the page hears the run is over
            self._emit_status(final[0], final[1], details=final[2], reason=final[3])

    def _stopped_early(self, exc) -> str:
        """The note of a fit the numbers ended after some iterations (its best point is kept)."""
        logger.warning("Training run %d stopped early at iteration %d: %s", self.run_id, self._last_seen[0], exc)
        return stopped_early_note(self._last_seen[0], exc, "The result is the best point reached")

    def _remember(self, callback):
        def wrapped(snap):
            self._last_seen = (int(snap.iteration), float(snap.objective))
            callback(snap)
        return wrapped
