"""Keep BLAS to one thread while the engine's own (numba) threads work.

On a small machine OpenBLAS threads and numba threads fight for the same
cores; a fit of a few hundred M x M factorisations gains nothing from BLAS
threads and loses a lot to the contention.
"""
from contextlib import contextmanager

try:
    from threadpoolctl import threadpool_limits
except ImportError:  # optional: without it BLAS keeps its own thread count
    threadpool_limits = None


@contextmanager
def single_blas_thread():
    """Context manager limiting BLAS libraries to one thread (process-wide) for its duration."""
    if threadpool_limits is None:
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield
