"""Give memory back to the system when browser sessions end.

A session's arrays (an uploaded file, its data, the models and results of its
trainings) are freed once the session is destroyed and its page's reference
cycles are collected, but glibc's allocator keeps freed memory in its heaps:
one arena per thread that allocated (up to eight per core), and every training
runs on a thread of its own.  A server that opened, trained and closed eight
sessions of a 16 MB upload held 480 MB more than when idle after they closed.

* `limit_arenas` (once per process, at start): at most `ARENAS` heaps, so the
  memory of finished training threads is reused instead of left in theirs
  (no measurable change in a fit's CPU time);
* `release_soon` (when a session is destroyed): a little later and again later, on a thread,
  a full garbage collection (the page's objects refer to each other) and
  ``malloc_trim(0)``, which returns the free pages of every heap;
* `freeze_imports` (once per process, at start): the ~300,000 objects of the imported
  libraries go to the collector's permanent generation, so that a full
  collection, which holds the GIL and so pauses every session, scans only the
  sessions' objects (0.2 s of pause per collection before, on this app's imports).

Both do nothing where the C library is not glibc.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import threading

logger = logging.getLogger(__name__)

__all__ = ["ARENAS", "freeze_imports", "limit_arenas", "release", "release_soon"]

#: Most malloc arenas (heaps) of the server process.
ARENAS = 2
_M_ARENA_MAX = -8  # mallopt's parameter number (glibc malloc.h)
#: Seconds after a session ends at which memory is released: soon, and again once what outlives the
#: session's end has gone too (its training thread's last step, its document's reference cycles; on a
#: loaded server a single release 5 s after the last session left ~300 MB of 17 MB uploads held).
RELEASE_DELAYS = (5.0, 30.0)


def _glibc():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None
    except OSError:  # pragma: no cover - not Linux
        return None


_LIBC = _glibc()
_lock = threading.Lock()
_timer: threading.Timer | None = None


def limit_arenas(arenas: int = ARENAS) -> bool:
    """At most ``arenas`` malloc heaps in this process from now on; False where that cannot be set."""
    return bool(_LIBC is not None and _LIBC.mallopt(_M_ARENA_MAX, int(arenas)) == 1)


_frozen = False


def freeze_imports() -> bool:
    """Move every object alive now to the garbage collector's permanent generation, once per process
    (later calls do nothing and return False): call it after the imports, before any session."""
    global _frozen
    with _lock:
        if _frozen:
            return False
        _frozen = True
    gc.collect()  # what is garbage already is not frozen
    gc.freeze()
    return True


def release() -> bool:
    """Collect garbage, then return the allocator's free pages to the system; False without glibc."""
    gc.collect()
    if _LIBC is None:
        return False
    return bool(_LIBC.malloc_trim(0))


def _release_then(later: tuple) -> None:
    global _timer
    try:
        release()
    except Exception:  # pragma: no cover - never let housekeeping end a server thread noisily
        logger.exception("Releasing memory failed")
    with _lock:
        _timer = _schedule(later) if later else None


def _schedule(delays: tuple) -> threading.Timer:
    first, later = delays[0], tuple(d - delays[0] for d in delays[1:])
    timer = threading.Timer(first, _release_then, args=(later,))
    timer.name = "gplvm-release-memory"
    timer.daemon = True
    timer.start()
    return timer


def release_soon(delays: tuple = RELEASE_DELAYS) -> None:
    """`release` on a daemon thread at each of ``delays`` seconds from now; a session ending meanwhile
    starts the countdown again (the releases follow the last session's end)."""
    global _timer
    with _lock:
        if _timer is not None:
            _timer.cancel()
        _timer = _schedule(tuple(delays))
