"""A start the numbers refuse falls back (random start, then fewer inducing points) instead of failing."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import engine
from engine import kernels
from engine.fit_start import start_model

pytestmark = pytest.mark.timeout(120)

Y = np.random.default_rng(0).normal(size=(500, 2)) @ np.random.default_rng(1).normal(size=(2, 6))


def smooth_and_noiseless(init, num_inducing):
    """A kernel far smoother than the data's spread and a tiny noise: Kmm is numerically of low rank,
    and at 30 inducing points I + beta A cannot be factorised even with jitter at 1% of Kmm's diagonal."""
    return engine.BayesianGPLVM(Y, 3, num_inducing=num_inducing, init=init, noise_variance=2e-8,
                                kernel=kernels.RBF(3, variance=1e4, lengthscales=[10.0, 10.0, 10.0]))


def test_the_start_asked_for_really_fails():
    with pytest.raises(engine.NumericalError, match="could not be factorised even with jitter"):
        engine.fit(smooth_and_noiseless("pca", 30), max_iters=0)


def test_a_refused_start_falls_back_to_fewer_inducing_points_and_says_so():
    tried = []

    def build(init, num_inducing):
        tried.append((init, num_inducing))
        return smooth_and_noiseless(init, num_inducing)

    start = start_model(build, "pca", 30)
    assert tried == [("pca", 30), ("random", 30), ("random", 15)]
    assert (start.init, start.num_inducing, start.model.num_inducing) == ("random", 15, 15)
    assert np.isfinite(start.objective)
    assert start.note.startswith("The start asked for could not be evaluated (The matrix I + beta A (the statistic "
                                 "Psi2 whitened by Kmm) could not be factorised even with jitter")
    assert start.note.endswith("training from a random start instead of pca and M=15 inducing points instead of 30.")
    result = engine.fit(start.model, max_iters=5)  # and the fit itself starts where the fallback did
    assert result.iterations == 5 and result.objective >= start.objective


def test_a_start_that_works_is_kept_as_asked():
    start = start_model(lambda init, m: engine.BayesianGPLVM(Y, 2, num_inducing=m, init=init), "pca", 10)
    assert (start.init, start.num_inducing, start.note) == ("pca", 10, "")
    assert start.objective == pytest.approx(start.model.objective(), rel=1e-12)


def test_when_nothing_starts_the_first_error_is_raised_and_settings_errors_at_once():
    calls = []

    def never(init, num_inducing):
        calls.append(num_inducing)
        raise engine.NumericalError(f"no start at M={num_inducing}")

    with pytest.raises(engine.NumericalError, match="no start at M=30"):
        start_model(never, "pca", 30)
    assert calls == [30, 30, 15, 7]  # down to MIN_INDUCING (4): 30, 15, 7 (7 // 2 = 3 is too few)
    with pytest.raises(engine.ShapeError):
        start_model(lambda init, m: engine.BayesianGPLVM(Y, 2, num_inducing=10_000), "pca", 10_000)


def test_a_stop_returns_nothing():
    stop = threading.Event()
    stop.set()
    assert start_model(lambda init, m: engine.BayesianGPLVM(Y, 2, num_inducing=m), "pca", 10, stop=stop) is None
