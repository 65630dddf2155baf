"""How soon a page's threads get the interpreter back from a training thread.

A training thread runs Python between its numpy and numba calls: at 10^6 rows
the stochastic model's thread held the interpreter lock (GIL) about 40% of
the time.  A thread that wants the lock waits until the holder is asked to
drop it, which happens after the interpreter's switch interval (Python's
default: 5 ms).  A click's answer passes the lock many times -- the event loop
reads the click, one of Bokeh's executor threads applies it and runs the
handler, another serialises the reply, the loop sends it -- and each pass could
wait that long behind the training thread: the click's handler alone took
from 4 to 111 ms while training.

`share_interpreter` (once per serving process, at start) sets the interval to
`SWITCH_INTERVAL`: the page's threads wait at most about a millisecond per
pass.  A training thread that nobody waits for is not interrupted more often.
"""
from __future__ import annotations

import sys

__all__ = ["SWITCH_INTERVAL", "share_interpreter"]

#: Seconds a thread holding the interpreter lock runs on while another thread waits for it.
SWITCH_INTERVAL = 0.001


def share_interpreter() -> float:
    """Lower the interpreter's switch interval to `SWITCH_INTERVAL` (never raise it); the interval in force."""
    if sys.getswitchinterval() > SWITCH_INTERVAL:
        sys.setswitchinterval(SWITCH_INTERVAL)
    return sys.getswitchinterval()
