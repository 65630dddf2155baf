"""Training on a background thread: one :class:`TrainingJob` per Train click.

The job builds the engine model from a :class:`~gplvm_explorer.catalog.ModelConfig`,
waits for a slot of the process-wide :class:`Limiter` (showing its place in
the queue), runs ``engine.fit`` with ``stop`` / ``pause`` events and turns
what happens into *events* (`training.events`), in order; its results are
frozen ``model.copy()``s taken between two iterations plus the latent arrays of
that snapshot, at most every ``publish_interval`` seconds and once at the end.

The page takes the events with :meth:`TrainingJob.drain` when ``notify`` tells
it there are some; ``notify`` is throttled to ``notify_interval`` while
iterations stream in, and immediate for status changes.  The thread never
touches Bokeh or Panel objects, and copies nothing of size N per iteration
(the engine's snapshot arrays are handed over as they are).
"""
from __future__ import annotations

import dataclasses
import logging
import threading
import time
import traceback
from typing import Any, Callable

import numpy as np

from ..catalog import ModelConfig
from .events import ACTIVE, ProgressEvent, ResultEvent, Status, StatusEvent
from .limiter import Limiter, default_limiter
from .messages import explain_error, stopped_early_note
from .prepared import PreparedStart
from .result import TrainedResult
from .start import build_pinned, check_start, start_with_fallbacks

logger = logging.getLogger(__name__)

__all__ = ["PUBLISH_SECONDS_PER_ROW", "TrainingJob"]

#: Frozen results while training come at most every this many seconds per data row (2 s at 20,000
#: rows, 10 s at 100,000): each costs the page a pass over the rows (the map's posterior, its KD-tree).
PUBLISH_SECONDS_PER_ROW = 1e-4


def end_reason(result) -> str:
    """Why a fit ended, for the page: engine ``FitResult.reason``, with an optimiser's own end that
    did not converge (no step it could find improved the objective) told apart as "stalled"."""
    reason = str(getattr(result, "reason", ""))
    if reason == "optimizer" and not getattr(result, "converged", True):
        return "stalled"
    return reason


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
                model, start_value = build_pinned(self._build, self._Y, self.config), None
            self._model = model
            self._objective_name = getattr(model, "objective_name", self._objective_name)
            result = None
            if not self._stop.is_set():
                self._emit_status(Status.RUNNING, self._note)
                if start_value is None:
                    observed = _Observed(model, self._on_first_value)
                else:  # iteration 0 is known: drawn now; the fit's own first evaluation only confirms it
                    self._on_first_value(start_value)
                    observed = _Observed(model, lambda value: check_start(start_value, value))
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
            final = (Status.STOPPED if stopped else Status.FINISHED, early or self._note, "", end_reason(result))
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
