"""A machine under load for the determinism tests: a busy process, and another session changing BLAS threads."""
from __future__ import annotations

import subprocess
import sys
import threading
from contextlib import contextmanager

import numpy as np

from engine import single_blas_thread


@contextmanager
def cpu_hog():
    """A busy subprocess for the duration (one core kept spinning)."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield hog
    finally:
        hog.kill()
        hog.wait(timeout=10)


@contextmanager
def another_session_pinning_blas():
    """A thread that keeps entering and leaving the engine's one-BLAS-thread regions, as another
    session's fit does: the process-wide BLAS thread count flips under any code not pinned itself."""
    done = threading.Event()

    def churn():
        while not done.is_set():
            with single_blas_thread():
                np.linalg.cholesky(np.eye(50) * 2.0)
            np.dot(np.ones((200, 200)), np.ones((200, 200)))

    t = threading.Thread(target=churn, daemon=True)
    t.start()
    try:
        yield
    finally:
        done.set()
        t.join(10)
