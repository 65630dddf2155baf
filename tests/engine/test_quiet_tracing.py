"""The guard around tracemalloc: it waits for computing threads and refuses to toggle while they run."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import engine
from quiet_tracing import busy_threads, traced_peak, wait_quiet


def _spin(stop: threading.Event) -> None:
    while not stop.is_set():
        sum(range(1000))


def test_a_thread_that_keeps_computing_is_named_and_tracing_refused():
    stop = threading.Event()
    spinner = threading.Thread(target=_spin, args=(stop,), name="spinner")
    spinner.start()
    try:
        with pytest.raises(AssertionError, match="spinner"):
            wait_quiet(timeout=0.5)
    finally:
        stop.set()
        spinner.join()


def test_threads_blocked_in_a_wait_are_quiet():
    stop = threading.Event()
    waiter = threading.Thread(target=stop.wait, name="waiter")
    waiter.start()
    try:
        assert not any(name.startswith("waiter") for name in busy_threads())
        wait_quiet(timeout=5.0)
    finally:
        stop.set()
        waiter.join()


def test_tracing_waits_for_a_fit_in_another_thread_to_end_and_measures_the_call():
    rng = np.random.default_rng(0)
    model = engine.BayesianGPLVM(rng.normal(size=(200, 4)), 2, num_inducing=8)
    fitting = threading.Thread(target=engine.fit, args=(model,), kwargs={"max_iters": 30}, name="fit")
    fitting.start()
    _, peak = traced_peak(lambda: np.ones(1_000_000))
    assert not fitting.is_alive()  # the toggle waited for the compiled kernels' thread
    assert 8e6 <= peak < 9e6
    fitting.join()
