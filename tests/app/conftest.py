"""Fixtures for the app tests (no browser)."""
from __future__ import annotations

import copy
import threading
import time

import numpy as np
import pytest

from engine.optimize import Snapshot


class FakeModel:
    """A tiny stand-in following the engine's fit/predict protocol.

    ``fit`` moves X a little per iteration, sleeping ``delay`` seconds, calls
    the callback with a snapshot, honours ``stop`` and ``pause``; it can be
    told to raise after a number of iterations.
    """

    objective_name = "log-likelihood"

    def __init__(self, Y, Q=2, delay=0.01, fail_at=None, exc=None):
        self.Y = np.asarray(Y, dtype=float)
        rng = np.random.default_rng(0)
        self._free = rng.standard_normal(self.Y.shape[0] * Q)
        self.Q = Q
        self.delay = delay
        self.fail_at = fail_at
        self.exc = exc
        self.jitter = 0.0
        self.fit_thread = None

    # protocol
    def get_free(self):
        return self._free.copy()

    def set_free(self, x):
        self._free = np.array(x, dtype=float, copy=True)

    def copy(self):
        clone = copy.copy(self)
        clone._free = self._free.copy()
        return clone

    @property
    def X_mean(self):
        return self._free.reshape(-1, self.Q)

    X_variance = None

    @property
    def relevance(self):
        return np.arange(self.Q, 0, -1, dtype=float)

    def objective(self):
        return -float(np.sum(self._free ** 2))

    def predict(self, Xnew, Xnew_variance=None, include_noise=False):
        Xnew = np.atleast_2d(Xnew)
        d2 = np.min(((Xnew[:, None, :] - self.X_mean[None]) ** 2).sum(-1), axis=1)
        mean = np.tile(self.Y.mean(0), (Xnew.shape[0], 1)) + d2[:, None] * 0.0
        return mean, 0.01 + 1 - np.exp(-d2)

    def fit(self, optimizer="lbfgs", max_iters=10, callback=None, stop=None, pause=None):
        self.fit_thread = threading.current_thread()
        t0 = time.perf_counter()
        for it in range(1, max_iters + 1):
            if stop is not None and stop.is_set():
                break
            if self.fail_at is not None and it >= self.fail_at:
                raise self.exc
            time.sleep(self.delay)
            # an in-place update: a frozen copy must not see it
            self._free *= 0.99
            if callback is not None:
                callback(Snapshot(it, self.objective(), 1.0, time.perf_counter() - t0, {},
                                  self.X_mean.copy(), None, self.relevance, n_evaluations=it, optimizer="fake"))
            while pause is not None and pause.is_set() and not (stop is not None and stop.is_set()):
                time.sleep(0.01)
        return None


@pytest.fixture
def fake_factory():
    """``make(**kw) -> factory(Y, config)`` building FakeModels."""
    def make(**kw):
        def factory(Y, config):
            return FakeModel(Y, Q=config.latent_dim, **kw)
        return factory
    return make
