"""TrainingSession: thread machinery, limiter, error paths (a stand-in model, no numba)."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from engine.errors import NumericalError
from gplvm_explorer.session import (
    Busy,
    ModelConfig,
    SliceSpec,
    TrainingLimiter,
    TrainingSession,
    check_config,
    explain_error,
    kernels_for,
    slice_dims,
)

Y = np.random.default_rng(1).standard_normal((30, 4))


def wait_done(s: TrainingSession, timeout=10.0):
    deadline = time.monotonic() + timeout
    while s.active and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not s.active, f"session still {s.state}"


def test_run_to_completion_publishes_snapshots_history_and_grid(fake_factory):
    s = TrainingSession(limiter=TrainingLimiter(2), model_factory=fake_factory(), predict_interval=0.0)
    s.start(Y, ModelConfig(model="gplvm", latent_dim=3, max_iters=12))
    wait_done(s)
    p = s.poll(0)
    assert p.state == "finished"
    assert list(p.iterations) == list(range(1, 13))
    assert p.snapshot.X_mean.shape == (30, 3)
    assert p.grid is not None and p.grid.variance.shape == (60, 60)
    # auto slice = the two most relevant dims (relevance 3, 2, 1)
    assert (p.grid.x_dim, p.grid.y_dim) == (0, 1)
    # incremental polling returns only new points
    assert len(s.poll(p.history_length).iterations) == 0
    assert s.final_model is not None


def test_fit_runs_on_a_daemon_thread_and_predictor_is_frozen(fake_factory):
    s = TrainingSession(limiter=TrainingLimiter(1), model_factory=fake_factory(delay=0.02),
                        predict_interval=0.0)
    s.start(Y, ModelConfig(model="gplvm", latent_dim=2, max_iters=30))
    deadline = time.monotonic() + 5
    while s.predictor is None and time.monotonic() < deadline:
        time.sleep(0.005)
    frozen = s.predictor
    X0 = frozen.X_mean.copy()
    time.sleep(0.15)  # the fit keeps updating its own model in place
    assert np.array_equal(frozen.X_mean, X0)
    s.stop(wait=5)
    assert s._thread.daemon and s._thread is not threading.current_thread()


def test_stop_and_pause_resume(fake_factory):
    s = TrainingSession(limiter=TrainingLimiter(1), model_factory=fake_factory(delay=0.01))
    s.start(Y, ModelConfig(model="gplvm", latent_dim=2, max_iters=10_000))
    time.sleep(0.1)
    s.pause()
    assert s.state == "paused"
    time.sleep(0.05)
    n1 = s.poll(0).history_length
    time.sleep(0.15)
    n2 = s.poll(0).history_length
    assert n2 - n1 <= 1  # paused: no progress
    s.resume()
    assert s.state == "running"
    time.sleep(0.1)
    assert s.poll(0).history_length > n2
    s.stop()
    wait_done(s)
    assert s.state == "stopped"
    assert s.poll(0).history_length < 10_000


def test_busy_limit_is_process_wide_and_released(fake_factory):
    limiter = TrainingLimiter(1)
    a = TrainingSession(limiter=limiter, model_factory=fake_factory(delay=0.01))
    b = TrainingSession(limiter=limiter, model_factory=fake_factory(delay=0.01))
    a.start(Y, ModelConfig(model="gplvm", latent_dim=2, max_iters=10_000))
    with pytest.raises(Busy, match="busy"):
        b.start(Y, ModelConfig(model="gplvm", latent_dim=2, max_iters=5))
    assert b.state == "idle"
    a.stop()
    wait_done(a)
    assert limiter.active == 0
    b.start(Y, ModelConfig(model="gplvm", latent_dim=2, max_iters=5))
    wait_done(b)
    assert b.state == "finished" and limiter.active == 0


def test_exception_in_thread_becomes_message_and_releases_slot(fake_factory):
    limiter = TrainingLimiter(1)
    s = TrainingSession(limiter=limiter, model_factory=fake_factory(
        fail_at=3, exc=NumericalError("Cholesky of Kmm failed after jitter 1e-2")), predict_interval=0.0)
    s.start(Y, ModelConfig(model="gplvm", latent_dim=2, max_iters=10))
    wait_done(s)
    assert s.state == "error"
    assert "Cholesky" in s.error and "jitter" in s.error
    assert "standardise" in s.error and "inducing" in s.error  # suggests fixes
    assert limiter.active == 0
    assert s.predictor is not None  # what was there before the failure stays usable
    # a factory failure (bad kernel, bad data) is reported the same way
    def broken(Y, config):
        raise ValueError("no such kernel")
    s2 = TrainingSession(limiter=limiter, model_factory=broken)
    s2.start(Y, ModelConfig())
    wait_done(s2)
    assert s2.state == "error" and "no such kernel" in s2.error


def test_explain_error_for_plain_linalg_error():
    msg = explain_error(np.linalg.LinAlgError("Matrix is not positive definite"))
    assert "Numerical failure" in msg and "white" in msg


def test_check_config_prevents_impossible_combinations():
    errs, _ = check_config(ModelConfig(model="bayesian", kernel="mlp"), 100, 5)
    assert errs and "RBF" in errs[0]
    errs, _ = check_config(ModelConfig(model="sparse", num_inducing=200), 100, 5)
    assert any("M=200" in e for e in errs)
    errs, notes = check_config(ModelConfig(model="gplvm", kernel="mlp"), 100, 5)
    assert errs == []
    assert kernels_for("bayesian") == ["rbf", "linear"]
    assert "mlp" in kernels_for("gplvm")


def test_slice_dims_auto_and_manual():
    rel = np.array([0.1, 5.0, 0.2, 3.0])
    assert slice_dims(SliceSpec(auto=True), rel, 4) == (1, 3)
    assert slice_dims(SliceSpec(auto=False, x_dim=2, y_dim=0), rel, 4) == (2, 0)
    assert slice_dims(SliceSpec(auto=False, x_dim=2, y_dim=2), rel, 4) == (2, 3)
