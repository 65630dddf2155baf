"""LatestOnly: one background computation at a time, for the newest request only.

The page offers work (a new trained result, a new row to infer, ...) faster
than some of it can be computed.  :class:`LatestOnly` runs ``compute(request)``
on a daemon thread; requests that arrive while it runs replace each other, so
only the newest waits, and stale ones are never computed.  Each outcome (the
return value, or the exception raised) is handed to the page's thread through
the session's :class:`~gplvm_explorer.dispatch.Dispatcher`, never applied from
the worker thread.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from ..dispatch import Dispatcher

logger = logging.getLogger(__name__)

__all__ = ["LatestOnly"]

_NOTHING = object()


class LatestOnly:
    """Compute the newest request on a daemon thread; deliver outcomes on the page thread.

    Parameters
    ----------
    dispatcher:
        The session's dispatcher; ``apply`` and ``on_idle`` run through it.
    compute:
        ``compute(request) -> value``, called on the background thread.
    apply:
        ``apply(outcome)`` on the page thread, with the value or the exception
        ``compute`` raised (already logged).  Only the newest outcome not yet
        applied is delivered.
    on_idle:
        Optional ``on_idle()`` on the page thread once nothing is left to compute.
    name:
        Thread name and the subject of the log message when ``compute`` fails.
    """

    def __init__(self, dispatcher: Dispatcher, compute: Callable[[Any], Any], apply: Callable[[Any], None],
                 name: str, on_idle: Callable[[], None] | None = None):
        self._dispatcher = dispatcher
        self._compute = compute
        self._apply = apply
        self._on_idle = on_idle
        self._name = name
        self._lock = threading.Lock()
        self._wanted = _NOTHING
        self._done = _NOTHING
        self._generation = 0  # bumped by drop(): outcomes of older requests are not applied
        self._busy = False
        self._closed = False
        self._idle = threading.Event()
        self._idle.set()

    @property
    def busy(self) -> bool:
        """True while a computation runs or waits."""
        with self._lock:
            return self._busy

    def submit(self, request) -> None:
        """Compute ``request`` next (replacing any request still waiting); ignored once closed."""
        with self._lock:
            if self._closed:
                return
            self._wanted = request
            if self._busy:
                return
            self._busy = True
            self._idle.clear()
        threading.Thread(target=self._loop, name=self._name, daemon=True).start()

    def drop(self) -> None:
        """Forget the waiting request and any outcome not yet applied (the one running finishes unseen)."""
        with self._lock:
            self._wanted = _NOTHING
            self._done = _NOTHING
            self._generation += 1

    def close(self) -> None:
        """The page is gone: forget everything, compute nothing more."""
        with self._lock:
            self._closed = True
        self.drop()

    def wait(self, timeout: float = 30.0) -> bool:
        """Block until idle (tests, exports), then run what the dispatcher holds; False on timeout."""
        ok = self._idle.wait(timeout)
        self._dispatcher.flush()
        return ok

    def _loop(self) -> None:
        while True:
            with self._lock:
                request, self._wanted = self._wanted, _NOTHING
                generation = self._generation
                if request is _NOTHING:
                    self._busy = False
                    self._idle.set()
                    break
            try:
                outcome = self._compute(request)
            except Exception as exc:  # delivered to the page, which shows it
                logger.exception("%s failed", self._name)
                outcome = exc
            with self._lock:
                if generation == self._generation:
                    self._done = outcome
            self._dispatcher.soon(self._deliver)
        if self._on_idle is not None:
            self._dispatcher.soon(self._deliver)

    def _deliver(self) -> None:
        with self._lock:
            outcome, self._done = self._done, _NOTHING
            idle = not self._busy
        if outcome is not _NOTHING:
            self._apply(outcome)
        if idle and self._on_idle is not None:
            self._on_idle()
