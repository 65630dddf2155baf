"""Pace: space a fit's iterations so a room can watch the map and the ARD bars move.

The page sets ``rate`` (iterations per second; 0 is real time: as fast as the
engine goes) at any moment; the training thread calls :meth:`Pace.wait` between
iterations.  With the pace off, ``wait`` reads one number and returns: the
engine is not slowed.  A Stop interrupts the wait at once.
"""
from __future__ import annotations

import threading
import time

import param

__all__ = ["Pace", "PACE_CHOICES"]

#: The speeds the page offers: label -> iterations per second (0: real time).
PACE_CHOICES = {"Real time": 0.0, "Slow: 10 iterations/s": 10.0, "Slower: 5 iterations/s": 5.0,
                "Slowest: 2 iterations/s": 2.0, "1 iteration/s": 1.0}


class Pace(param.Parameterized):
    """Iterations per second of the page's fits (0: unpaced).  ``rate`` may change at any time."""

    rate = param.Number(default=0.0, bounds=(0.0, 100.0), doc="Iterations per second; 0: real time.")

    def __init__(self, clock=time.monotonic, **params):
        super().__init__(**params)
        self._clock = clock
        self._due: float | None = None  # when the next iteration may end

    def restart(self) -> None:
        """A new fit begins: its first iteration is not held back."""
        self._due = None

    def wait(self, stop: threading.Event) -> None:
        """Between two iterations (training thread): hold the fit until the next iteration is due."""
        rate = self.rate
        if rate <= 0:
            self._due = None
            return
        period = 1.0 / rate
        now = self._clock()
        if self._due is None or self._due < now - period:
            # the first paced iteration, or the fit fell behind (a slow iteration, a pause): no catching up
            self._due = now + period
            return
        delay = self._due - now
        if delay > 0:
            stop.wait(delay)
        self._due += period
