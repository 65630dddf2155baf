"""Stop requests that reach inside one long objective evaluation.

``engine.fit`` checks its ``stop`` event between iterations and before every
evaluation; at 10^5 rows one evaluation takes seconds, so the models also call
:func:`checkpoint` between the stages of an evaluation (psi statistics, bound,
gradients).  The event is thread-local: each training thread watches its own.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager

_local = threading.local()


class Cancelled(Exception):
    """Raised by :func:`checkpoint` when the watched stop event is set (caught by ``engine.fit``)."""


@contextmanager
def watching(stop):
    """Make :func:`checkpoint` on this thread raise :class:`Cancelled` once ``stop`` is set."""
    previous = getattr(_local, "stop", None)
    _local.stop = stop
    try:
        yield
    finally:
        _local.stop = previous


def checkpoint() -> None:
    """Raise :class:`Cancelled` if this thread's watched stop event is set."""
    stop = getattr(_local, "stop", None)
    if stop is not None and stop.is_set():
        raise Cancelled
