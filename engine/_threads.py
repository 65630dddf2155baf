"""Keep BLAS to one thread while the engine's own (numba) threads work.

On a small machine OpenBLAS threads and numba threads fight for the same
cores; a fit of a few hundred M x M factorisations gains nothing from BLAS
threads and loses a lot to the contention (one Bayesian GP-LVM bound and
gradient at N=1000, M=50 on two cores: ~5 ms pinned, 16-28 ms not).

:func:`blas_pinned` (a decorator) and :func:`single_blas_thread` (a context
manager) hold every loaded BLAS library to one thread for their duration and
then restore the previous counts.  Both are cheap to enter:

- the BLAS libraries are found once per process (a cached
  ``threadpoolctl.ThreadpoolController``; ``threadpool_limits`` re-scans the
  loaded libraries on every call, 1.5-4 ms here), and the limit is read, set
  and restored by direct calls into the libraries: an outermost entry and
  exit cost ~5-10 microseconds with numpy's and scipy's OpenBLAS loaded;
- nesting is free: a thread-local depth counter, so only the outermost entry
  in a thread touches the libraries (a pinned method called from a pinned
  method costs well under a microsecond more than a plain call).

The BLAS thread count is process-wide, so entries from several threads
(e.g. two training sessions of the web app) share one pin: a process-wide
reference count under a lock.  The first thread to enter saves the libraries'
thread counts and sets them to 1; the last one to leave restores the saved
counts.  A thread leaving never unpins BLAS under another thread still inside.
While any thread is inside, numpy/scipy BLAS calls elsewhere in the process
also run on one thread.

OpenBLAS built on OpenMP, and MKL (through its "local" limit), keep the
limit per calling thread; such libraries are pinned and restored by each
thread on its own.  The limits are set through the libraries directly:
threadpoolctl's ``set_num_threads`` lets only one "controlling" thread change
a pthreads OpenBLAS and silently ignores the others, which would leave a fit
in a worker thread (the app's training thread) unpinned.

Limits changed by other code while a pinned region is active are overwritten
when the last pinned region ends (the saved counts are restored).

Without threadpoolctl (an optional dependency at import time) both are no-ops.
"""
from __future__ import annotations

import functools
import os
import threading

try:
    from threadpoolctl import ThreadpoolController
except ImportError:  # optional: without it BLAS keeps its own thread count
    ThreadpoolController = None

__all__ = ["blas_pinned", "single_blas_thread", "blas_thread_counts", "refresh_blas_libraries"]

_local = threading.local()  # .depth: nesting depth of pinned regions in this thread; .saved: per-thread libs
_lock = threading.Lock()  # guards _refcount, _saved and _libs
_refcount = 0  # threads currently inside a pinned region (outermost entries)
_saved = None  # [(setter, thread count before pinning)] of the process-wide libraries while _refcount > 0
_libs = None  # (process-wide, per-thread) lists of (setter, getter), found once (see _blas_libraries)


def _accessors(lib):
    """(set(n), get()) for one threadpoolctl library controller.

    For a pthreads OpenBLAS, the library's own functions straight from ctypes
    (about a microsecond a call, and free of threadpoolctl's rule that only
    one "controlling" thread may change the limit); otherwise the controller's
    methods.
    """
    if getattr(lib, "internal_api", None) == "openblas" and getattr(lib, "threading_layer", None) != "openmp":
        find = getattr(lib, "_get_symbol", None)
        if find is not None:
            setter = find("openblas_set_num_threads")
            getter = find("openblas_get_num_threads")
            if setter is not None and getter is not None:
                return setter, getter
        return getattr(lib, "_real_set_num_threads", lib.set_num_threads), lib.get_num_threads
    return lib.set_num_threads, lib.get_num_threads


def _per_thread(lib):
    """Whether the library keeps its thread limit per calling thread (OpenBLAS on OpenMP; MKL's local limit)."""
    api = getattr(lib, "internal_api", None)
    return api == "mkl" or (api == "openblas" and getattr(lib, "threading_layer", None) == "openmp")


def _blas_libraries():
    """(process-wide, per-thread) BLAS libraries of this process as (setter, getter) pairs, found once.

    scipy's BLAS (which the numba kernels call through ``scipy.linalg.cython_blas``)
    and numpy's are separate libraries; both are loaded before the scan.
    Call with ``_lock`` held.
    """
    global _libs
    if _libs is None:
        shared, per_thread = [], []
        if ThreadpoolController is not None:
            import numpy  # noqa: F401  (load numpy's BLAS)

            try:
                import scipy.linalg.cython_blas  # noqa: F401  (load scipy's BLAS, the one numba calls)
            except ImportError:  # pragma: no cover - scipy is a dependency
                pass
            for lib in ThreadpoolController().select(user_api="blas").lib_controllers:
                (per_thread if _per_thread(lib) else shared).append(_accessors(lib))
        _libs = (shared, per_thread)
    return _libs


def refresh_blas_libraries() -> None:
    """Scan again for BLAS libraries (only needed if one is loaded after the engine's first call).

    Takes effect at the next outermost pinned entry in the process.
    """
    global _libs
    with _lock:
        if _refcount == 0:
            _libs = None


def blas_thread_counts() -> list:
    """Current thread count of each BLAS library the pinning acts on, as seen from this thread."""
    with _lock:
        shared, per_thread = _blas_libraries()
    return [get() for _, get in shared + per_thread]


def _pin(libs):
    """Set each library to one thread; returns what to restore."""
    saved = []
    for setter, getter in libs:
        n = getter()
        saved.append((setter, n))
        if n != 1:
            setter(1)
    return saved


def _restore(saved):
    for setter, n in saved or ():
        if n != 1 and n is not None:
            setter(n)


def _enter() -> None:
    global _refcount, _saved
    depth = getattr(_local, "depth", 0)
    _local.depth = depth + 1
    if depth:
        return
    try:
        with _lock:
            shared, per_thread = _blas_libraries()
            if _refcount == 0:
                _saved = _pin(shared)
            _refcount += 1
        _local.saved = _pin(per_thread) if per_thread else None
    except BaseException:
        _local.depth = depth
        raise


def _leave() -> None:
    global _refcount, _saved
    depth = _local.depth - 1
    _local.depth = depth
    if depth:
        return
    saved_here, _local.saved = _local.saved, None
    _restore(saved_here)
    with _lock:
        _refcount -= 1
        if _refcount == 0:
            saved, _saved = _saved, None
            _restore(saved)


def _after_fork_in_child() -> None:
    """Only the forking thread exists in the child: the pin count is its own."""
    global _lock, _refcount, _saved
    _lock = threading.Lock()
    _refcount = 1 if getattr(_local, "depth", 0) else 0
    if not _refcount:
        _saved = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class single_blas_thread:
    """Context manager holding BLAS to one thread (process-wide) for its duration.

    ``with single_blas_thread(): ...``; cheap, nestable and safe to use from
    several threads at once (see the module docstring).
    """

    __slots__ = ()

    def __enter__(self):
        _enter()
        return self

    def __exit__(self, *exc):
        _leave()
        return False


def blas_pinned(fn):
    """Decorator: run ``fn`` with BLAS held to one thread (as :func:`single_blas_thread`)."""

    @functools.wraps(fn)
    def pinned(*args, **kwargs):
        depth = getattr(_local, "depth", 0)
        if depth:  # already pinned in this thread: only count the nesting
            _local.depth = depth + 1
            try:
                return fn(*args, **kwargs)
            finally:
                _local.depth = depth
        _enter()
        try:
            return fn(*args, **kwargs)
        finally:
            _leave()

    return pinned
