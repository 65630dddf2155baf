"""Fixtures for the app tests (no browser)."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest


class FakeModel:
    """A tiny stand-in following the engine's model protocol (see engine/optimize.py).

    The objective is -sum(X^2)/2 over an (N, Q) latent matrix; every
    evaluation sleeps ``delay`` seconds; after ``fail_at`` evaluations it
    raises ``exc``.  ``predict_calls`` counts predictions (rows asked for).
    """

    objective_name = "log-likelihood"

    def __init__(self, Y, Q=2, delay=0.0, fail_at=None, exc=None):
        self.Y = np.asarray(Y, dtype=float)
        rng = np.random.default_rng(0)
        self._free = rng.standard_normal(self.Y.shape[0] * Q)
        self.Q = Q
        self.delay = delay
        self.fail_at = fail_at
        self.exc = exc
        self.jitter = 0.0
        self.evaluations = 0
        self.predict_calls: list[int] = []
        self.fit_threads: set = set()

    # the optimiser's protocol
    def get_free(self):
        return self._free.copy()

    def set_free(self, x):
        self._free = np.array(x, dtype=float, copy=True)

    def objective_and_gradient(self, x):
        self.fit_threads.add(threading.current_thread().name)
        self.evaluations += 1
        if self.fail_at is not None and self.evaluations >= self.fail_at:
            raise self.exc
        if self.delay:
            time.sleep(self.delay)
        x = np.asarray(x, dtype=float)
        return -0.5 * float(x @ x), -x

    def snapshot_state(self):
        return {"parameters": {"noise_variance": 0.1}, "X_mean": self.X_mean.copy(), "X_variance": None,
                "relevance": self.relevance}

    def copy(self):
        clone = FakeModel.__new__(FakeModel)
        clone.__dict__.update(self.__dict__)
        clone._free = self._free.copy()
        clone.predict_calls = []
        return clone

    @property
    def X_mean(self):
        return self._free.reshape(-1, self.Q)

    X_variance = None

    @property
    def relevance(self):
        return np.arange(self.Q, 0, -1, dtype=float)

    def objective(self):
        return -0.5 * float(self._free @ self._free)

    def predict(self, Xnew):
        Xnew = np.atleast_2d(Xnew)
        self.predict_calls.append(Xnew.shape[0])
        d2 = np.min(((Xnew[:, None, :] - self.X_mean[None]) ** 2).sum(-1), axis=1)
        mean = np.tile(self.Y.mean(0), (Xnew.shape[0], 1))
        return mean, 0.01 + 1 - np.exp(-d2)


@pytest.fixture
def fake_build():
    """``make(**kw) -> build(Y, config)`` building FakeModels (the last one is ``build.models[-1]``)."""
    def make(**kw):
        models = []

        def build(Y, config):
            m = FakeModel(Y, Q=config.latent_dim, **kw)
            models.append(m)
            return m
        build.models = models
        return build
    return make


def pump_until(explorer_or_dispatcher, cond, timeout=30.0):
    """Run the page's pending updates until ``cond()`` holds (the test plays the event loop)."""
    dispatcher = getattr(explorer_or_dispatcher, "dispatcher", explorer_or_dispatcher)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dispatcher.flush()
        if cond():
            return True
        time.sleep(0.005)
    dispatcher.flush()
    return cond()


@pytest.fixture
def pump():
    return pump_until


@pytest.fixture
def make_explorer():
    """``make(**kw) -> Explorer`` (a two-slot limiter of its own unless given); all closed at the end."""
    from gplvm_explorer.explorer import Explorer
    from gplvm_explorer.training import Limiter

    made = []

    def make(**kw):
        kw.setdefault("limiter", Limiter(2))
        ex = Explorer(**kw)
        made.append(ex)
        return ex
    yield make
    for ex in made:
        ex.close()
        ex.training.join(30)
