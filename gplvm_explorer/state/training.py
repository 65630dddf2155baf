"""TrainingRun: the status, progress and objective trace of the current training.

It starts a :class:`~gplvm_explorer.training.TrainingJob` per Train click and
applies the job's events, in order, on the page's thread (the job's
``notify`` goes through the :class:`~gplvm_explorer.dispatch.Dispatcher`).
The state is never inferred from polling differences: a fit that starts and
finishes between two page updates still delivers "running" then "finished".
Events of an older run (``run_id``) are ignored.

``trace`` (a HoloViews ``Buffer``) is the one store of the objective curve;
views subscribe to it and receive only the new points.
"""
from __future__ import annotations

import collections
import logging
import time

import holoviews as hv
import numpy as np
import pandas as pd
import param

from ..catalog import ModelConfig
from ..dispatch import Dispatcher
from ..training.pace import Pace
from ..training.events import ACTIVE, ProgressEvent, ResultEvent, Status, StatusEvent
from ..training.job import TrainingJob
from ..training.limiter import Limiter, default_limiter
from ..training.prepared import PreparedStart
from ..training.result import TrainedResult

logger = logging.getLogger(__name__)

__all__ = ["TrainedResult", "TrainingRun", "Status"]

#: Jitter the page mentions: above the tiny amount every fit starts with, i.e. it was raised.
NOTABLE_JITTER = 1e-6
#: Results (frozen models for the map) come at most every this many times what the latent slice took
#: to show the last one.  The rest of a result's cost to the page (the points' raster, sending the
#: images and the predictor) is about as much again: the map then takes about a tenth of the CPU.
RESULT_COST_FACTOR = 20.0

#: The shown rate leaves out iterations before this one (compilation, first allocations) ...
STEADY_FROM = 3
#: ... and is measured over at most this many recent progress updates.
RATE_WINDOW = 40

_MESSAGES = {
    Status.STARTING: "Building the model…",
    Status.PAUSED: "Paused. Resume to continue, or Stop to keep the current fit.",
    Status.STOPPING: "Stopping…",
}


class TrainingRun(param.Parameterized):
    """What the page shows about training; changed only by events and its own methods."""

    status = param.Selector(default=Status.IDLE.value, objects=[s.value for s in Status])
    run_id = param.Integer(default=0, doc="Increases with every Train click.")
    iteration = param.Integer(default=0)
    max_iters = param.Integer(default=0)
    objective = param.Number(default=None, allow_None=True)
    objective_name = param.String(default="objective")
    elapsed = param.Number(default=0.0)
    queue_position = param.Integer(default=0, doc="Place in the server's queue (0: not waiting).")
    message = param.String(default="")
    message_kind = param.Selector(default="info", objects=["info", "warning", "danger", "success"])
    details = param.String(default="", doc="Technical details of the last failure.")
    result = param.Parameter(default=None, doc="Latest TrainedResult of this run (immutable).")
    config = param.Parameter(default=None, doc="ModelConfig of this run.")
    dataset = param.Parameter(default=None, doc="The Dataset this run trains on.")
    opened = param.String(default="", doc="Name of the saved model on show (opened, not trained here), else ''.")
    restored = param.String(default="", doc="Name of the earlier run on show again (from the runs table), else ''.")
    change = param.Number(default=float("nan"), doc="The best objective's relative rise over the convergence "
                          "rule's window (the run converges when it falls to the rule's rtol); NaN: no rule "
                          "or no full window yet.")
    timing = param.Parameter(default=None, doc="catalog.StartTiming: the measured cost of the prepared start "
                             "(one evaluation on these data, this machine), or None.")
    end_reason = param.String(default="", doc="Why the last run ended: 'converged', 'optimizer', 'stalled' (the "
                              "optimiser found no better point before converging), 'max_iters', "
                              "'stopped' (engine FitResult.reason), or '' while running.")

    def __init__(self, dispatcher: Dispatcher, limiter: Limiter | None = None, build=None,
                 publish_interval: float = 1.0, notify_interval: float = 0.2, **params):
        super().__init__(**params)
        self._dispatcher = dispatcher
        self._limiter = limiter if limiter is not None else default_limiter()
        self._build = build
        self.publish_interval = float(publish_interval)
        self.notify_interval = float(notify_interval)
        self._job: TrainingJob | None = None
        self._prepared: PreparedStart | None = None
        self._deferred: list = []  # events of the current run left for the next page update
        self._recent = collections.deque(maxlen=RATE_WINDOW)  # (iteration, elapsed) of recent progress
        self.trace = hv.streams.Buffer(self._empty_trace(), length=1_000_000, index=False)
        self.pace = Pace()  # iterations per second of this page's fits (0: real time); changeable while training

    @staticmethod
    def _empty_trace() -> pd.DataFrame:
        return pd.DataFrame({"iteration": np.array([], dtype=float), "objective": np.array([], dtype=float)})

    # ---- derived ---------------------------------------------------------------------
    @property
    def active(self) -> bool:
        return Status(self.status) in ACTIVE

    @property
    def rate(self) -> float:
        """Iterations per second in the steady state: over the recent iterations, leaving out the
        first ones (a model's first evaluations include one-off costs: compilation on a cold cache,
        first allocations); the overall average until there are enough."""
        recent = [(i, t) for i, t in self._recent if i >= STEADY_FROM]
        if len(recent) >= 2 and recent[-1][1] > recent[0][1]:
            return (recent[-1][0] - recent[0][0]) / (recent[-1][1] - recent[0][1])
        return self.iteration / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def limiter(self) -> Limiter:
        return self._limiter

    def build_model(self, Y, config: ModelConfig):
        """A new, unfitted model of ``Y`` and ``config``, built as Train builds it."""
        return self._build(Y, config) if self._build is not None else config.spec.build(Y, config)

    # ---- control (page thread) -----------------------------------------------------
    def start(self, dataset, config: ModelConfig) -> bool:
        if self.active:
            self.message, self.message_kind = "A training is already running; stop it first.", "warning"
            return False
        if self._job is not None:
            self._job.join(1.0)  # it has reported its end; the thread is returning
        prepared, self._prepared = self._prepared, None
        if prepared is not None and not prepared.matches(dataset.values, config):
            prepared.cancel()
            prepared = None
        job = TrainingJob(self.run_id + 1, dataset.values, config, dataset=dataset, notify=self._notify,
                          limiter=self._limiter, build=self._build, publish_interval=self.publish_interval,
                          notify_interval=self.notify_interval, prepared=prepared, pace=self.pace)
        # the thread builds the model while the page redraws for the new run (its events wait for pump)
        try:
            job.start()
        except Exception as exc:  # pragma: no cover - the thread could not start
            logger.exception("Could not start a training thread")
            self.status, self.message, self.message_kind = Status.FAILED.value, f"Could not start: {exc}", "danger"
            return False
        with param.parameterized.batch_call_watchers(self):
            self.run_id += 1
            self._job = job
            self.trace.clear()
            self.result = None
            self.config = config
            self.dataset = dataset
            self.iteration, self.elapsed, self.objective, self.queue_position = 0, 0.0, None, 0
            self._recent.clear()
            self.change, self.end_reason = float("nan"), ""
            self.max_iters = int(config.max_iters)
            self.objective_name = config.spec.objective_name
            self.details = ""
            self.opened = self.restored = ""
            self.message, self.message_kind = _MESSAGES[Status.STARTING], "info"
            self.status = Status.STARTING.value  # the run exists; its events take over from here
        return True

    def prepare(self, dataset, config: ModelConfig | None) -> PreparedStart | None:
        """Build the model of these data and settings and evaluate its start in the background,
        so that a Train click with them draws its first point at once (None, or while training:
        nothing to prepare; the one prepared before is dropped unless it matches)."""
        old = self._prepared
        if dataset is None or config is None or self.active or not PreparedStart.applies(config):
            self.cancel_prepared()
            return None
        if old is not None and old.matches(dataset.values, config):
            return old
        self.cancel_prepared()
        self._prepared = prepared = PreparedStart(dataset.values, config, build=self._build, limiter=self._limiter,
                                                  on_timed=lambda t: self._dispatcher.soon(
                                                      lambda: self._apply_timing(prepared, t)))
        prepared.start()
        return prepared

    def _apply_timing(self, prepared: PreparedStart, timing) -> None:
        """A prepared start was timed (page thread): kept while it is still the one prepared."""
        if prepared is self._prepared or self.timing is None:
            self.timing = timing

    def cancel_prepared(self) -> None:
        if self._prepared is not None:
            self._prepared.cancel()
            self._prepared = None

    @property
    def prepared(self) -> PreparedStart | None:
        """The start prepared for the next Train click, if any."""
        return self._prepared

    def show_result(self, result: TrainedResult, name: str, trace=None, restored: bool = False) -> bool:
        """Show a model trained elsewhere (a saved model file called ``name``) as a finished run of
        ``result.iteration`` iterations; ``trace`` (iterations (k,), objectives (k,)) is its objective curve.
        ``restored``: an earlier run of this page called ``name`` (the runs table), not a file."""
        if self.active:
            self.message, self.message_kind = "A training is running: stop it before opening a model.", "warning"
            return False
        was = self.status
        with param.parameterized.batch_call_watchers(self):
            self.run_id = max(self.run_id + 1, int(result.run_id))  # events of older runs are ignored
            self.trace.clear()
            if trace is not None and len(trace[0]):
                self.trace.send(pd.DataFrame({"iteration": np.asarray(trace[0], dtype=float),
                                              "objective": np.asarray(trace[1], dtype=float)}))
            self.config, self.dataset, self.result = result.config, result.dataset, result
            iterations = int(result.iteration)
            self.iteration, self.max_iters, self.elapsed, self.queue_position = iterations, iterations, 0.0, 0
            self._recent.clear()
            self.change, self.end_reason = float("nan"), ""
            self.objective, self.objective_name = float(result.objective), result.objective_name
            self.details = ""
            self.opened, self.restored = ("", name) if restored else (name, "")
            self.message, self.message_kind = "", "info"
            self.status = Status.FINISHED.value
        if was == Status.FINISHED.value:  # no change, no event: the page still has to hear of the new result
            self.param.trigger("status")
        return True

    def pause(self) -> None:
        if self._job is not None:
            self._job.pause()
            self.pump()

    def resume(self) -> None:
        if self._job is not None:
            self._job.resume()
            self.pump()

    def stop(self) -> None:
        if self._job is not None:
            self._job.stop()
            self.pump()

    def join(self, timeout: float | None = None) -> bool:
        return self._job.join(timeout) if self._job is not None else True

    def close(self) -> None:
        """The page is gone: stop the fit and let go of its events (nothing more reaches the page)."""
        self.cancel_prepared()
        self._deferred = []
        if self._job is not None:
            self._job.stop()
            self._job.drain()

    # ---- events ----------------------------------------------------------------------
    def _notify(self) -> None:  # any thread
        self._dispatcher.soon(self._pump_update)

    def pump(self) -> None:
        """Apply every waiting event of the current run (page thread)."""
        while self._pump_step():
            pass

    def _pump_update(self) -> None:
        """One page update's worth of events; the rest in the next page update (dispatcher)."""
        if self._pump_step():
            self._dispatcher.soon(self._pump_update)

    def _pump_step(self) -> bool:
        """Apply the waiting events of the current run up to a result that follows other events:
        a result costs the page far more than a few points, so it gets a page update of its own
        and the points and status before it reach the browser first (in order).  True when
        events are left for the next step."""
        job = self._job
        if job is None:
            return False
        t0 = time.perf_counter()
        events = self._deferred + job.drain()
        self._deferred = []
        events = [ev for ev in events if ev.run_id == self.run_id]
        if not events:
            return False
        with param.parameterized.batch_call_watchers(self):
            for i, ev in enumerate(events):
                if isinstance(ev, ResultEvent) and i > 0:
                    self._deferred = events[i:]
                    break
                if isinstance(ev, ProgressEvent):
                    self._apply_progress(ev)
                elif isinstance(ev, StatusEvent):
                    self._apply_status(ev)
                elif isinstance(ev, ResultEvent):
                    self.result = ev.result
        # a slow page update asks the worker for fewer of them (the page takes at most ~10%)
        took = time.perf_counter() - t0
        job.notify_interval = max(self.notify_interval, 10.0 * took)
        return bool(self._deferred)

    def set_result_cost(self, seconds: float) -> None:
        """What the latent slice took to show the last result: results come at most every 20x that."""
        if self._job is not None:
            self._job.publish_interval = max(self.publish_interval, RESULT_COST_FACTOR * float(seconds))

    def _apply_progress(self, ev: ProgressEvent) -> None:
        if len(ev.iterations):
            self.trace.send(pd.DataFrame({"iteration": ev.iterations, "objective": ev.objectives}))
        self.iteration = int(ev.iteration)
        self.objective = float(ev.objective)
        self.elapsed = float(ev.elapsed)
        self.change = float(ev.change)
        self._recent.append((self.iteration, self.elapsed))

    def _apply_status(self, ev: StatusEvent) -> None:
        st = ev.status
        if st in (Status.FINISHED, Status.STOPPED, Status.FAILED):
            self.end_reason = ev.reason
        self.queue_position = int(ev.position) if st == Status.QUEUED else 0
        if st == Status.QUEUED:
            limit = self._limiter.limit
            self.message = (f"Waiting for a free training slot: number {ev.position} in the queue "
                            f"({limit} training{'s' if limit != 1 else ''} at a time on this server).")
            self.message_kind = "warning"
        elif st == Status.FAILED:
            self.message, self.message_kind = ev.message or "Training failed.", "danger"
            self.details = ev.details
        elif st in _MESSAGES:
            self.message, self.message_kind = _MESSAGES[st], "info"
        elif ev.message:  # the run goes on (or ended with a result) but something changed: a fallback start,
            self.message, self.message_kind = ev.message, "warning"  # an early stop at the best point
        else:
            self.message, self.message_kind = "", "info"
            jitter = getattr(self.result, "jitter", 0.0) if self.result is not None else 0.0
            if st in (Status.FINISHED, Status.STOPPED) and jitter > NOTABLE_JITTER:
                self.message = f"Note: jitter {jitter:.1e} was added to keep the kernel matrices positive definite."
        self.status = st.value
