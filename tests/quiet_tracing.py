"""Peak allocation of a call by tracemalloc, measured while no other thread computes.

``tracemalloc.start()`` and ``stop()`` swap CPython's raw allocator while other
threads may be calling it without the GIL (CPython issues 128679, fixed in 3.12.9
and 3.13.2, and 143143, still open).  The engine's compiled kernels allocate
exactly that way (numba's runtime uses ``PyMem_RawMalloc`` from nogil code), so a
training or a prepared start running in a background thread while a test
toggles tracemalloc can crash the whole test process.  The server never uses
tracemalloc; tests that do go through :func:`traced_peak`, which first waits
until every other thread is blocked in a wait and fails, naming the threads,
if they do not settle.
"""
from __future__ import annotations

import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: Innermost Python functions of a thread that is blocked and allocates nothing until woken
#: (threading's and queue's waits, an idle concurrent.futures worker, an event loop's select).
_BLOCKED_IN = frozenset({"wait", "_wait_for_tstate_lock", "get", "_worker", "select", "poll",
                         "accept", "recv", "recv_into", "readinto", "read", "_recv_bytes", "_poll"})


def busy_threads() -> list[str]:
    """Names and places of the other threads that are running code now (not blocked in a wait)."""
    me = threading.get_ident()
    names = {t.ident: t.name for t in threading.enumerate()}
    busy = []
    for ident, frame in sys._current_frames().items():
        if ident == me or frame.f_code.co_name in _BLOCKED_IN:
            continue
        busy.append(f"{names.get(ident, ident)} in {frame.f_code.co_name} "
                    f"({frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno})")
    return busy


def wait_quiet(timeout: float = 60.0, settle: float = 0.5) -> None:
    """Wait until no other thread has run code for ``settle`` seconds; AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    quiet_since = None
    while True:
        busy = busy_threads()
        now = time.monotonic()
        if busy:
            quiet_since = None
            if now > deadline:
                raise AssertionError("other threads kept computing; tracemalloc cannot be toggled safely: "
                                     + "; ".join(busy))
        elif quiet_since is None:
            quiet_since = now
        elif now - quiet_since >= settle:
            return
        time.sleep(0.02)


def traced_peak(call: Callable[[], T]) -> tuple[T, int]:
    """(call(), the peak bytes traced by tracemalloc during it), with the other threads quiet."""
    wait_quiet()
    tracemalloc.start()
    try:
        out = call()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        wait_quiet()
        tracemalloc.stop()
