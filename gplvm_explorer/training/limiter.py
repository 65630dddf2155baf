"""The process-wide limiter: at most so many trainings at once, the others wait in line."""
from __future__ import annotations

import os
import threading
from typing import Callable

__all__ = ["Limiter", "configure_limiter", "default_limiter"]


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
