"""PreparedStart: the model of a likely next Train click, built and evaluated ahead of the click."""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

import numpy as np

from ..catalog import ModelConfig, time_start
from .limiter import Limiter, default_limiter
from .start import start_with_fallbacks

logger = logging.getLogger(__name__)

__all__ = ["PREPARE_DELAY", "PreparedStart"]

#: Seconds a :class:`PreparedStart` waits after it is made before it builds: changes of the
#: settings in quick succession replace it before it costs anything.
PREPARE_DELAY = 0.2

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
