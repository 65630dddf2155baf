"""Tests of the optimiser driver ``engine.optimize.fit`` on small toy models.

The toy models below implement the model protocol the driver needs
(get_free / set_free / objective_and_gradient / snapshot_state); they are
test fixtures with known optima, not stand-ins for the product models.
"""
import threading
import time

import numpy as np
import pytest

from engine.errors import OptimizationError
import engine
from engine import optimize
from engine.optimize import FitResult, Snapshot
from engine.optimize import fit as engine_fit

#: "lbfgs" is scipy's L-BFGS-B below ``optimize.COMPACT_LBFGS_FROM`` parameters and
#: engine.lbfgs from there on; the toy models are small, so "lbfgs-compact" runs them
#: with the threshold at 0.  Every protocol test runs both.
OPTIMIZERS = ("lbfgs", "lbfgs-compact", "scg", "adam")


@pytest.fixture(autouse=True)
def _lbfgs_implementation(request, monkeypatch):
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("optimizer") == "lbfgs-compact":
        monkeypatch.setattr(optimize, "COMPACT_LBFGS_FROM", 0)


def fit(model, optimizer=None, **kwargs):
    """engine.optimize.fit, with "lbfgs-compact" meaning "lbfgs" (see ``OPTIMIZERS``)."""
    return engine_fit(model, optimizer=_name(optimizer), **kwargs)


def _name(optimizer):
    return "lbfgs" if optimizer == "lbfgs-compact" else optimizer


class ToyModel:
    """Protocol plumbing; subclasses define ``value_and_grad(x)`` (objective to maximise)."""

    def __init__(self, x0):
        self.x = np.array(x0, dtype=float)
        self.n_calls = 0

    def get_free(self):
        return self.x.copy()

    def set_free(self, x):
        self.x = np.array(x, dtype=float)

    def objective_and_gradient(self, x):
        self.n_calls += 1
        return self.value_and_grad(np.asarray(x, dtype=float))

    def snapshot_state(self):
        return {"parameters": {"x": self.x.copy(), "first": float(self.x[0])},
                "X_mean": self.x.reshape(1, -1).copy(), "X_variance": None,
                "relevance": np.abs(self.x)}


class Quadratic(ToyModel):
    """objective = 7 - 1/2 (x - c)^T A (x - c), maximised at c with value 7."""

    def __init__(self, P=6, seed=0):
        rng = np.random.default_rng(seed)
        Q, _ = np.linalg.qr(rng.standard_normal((P, P)))
        self.A = Q @ np.diag(np.linspace(1.0, 10.0, P)) @ Q.T
        self.c = rng.standard_normal(P)
        super().__init__(np.zeros(P))

    def value_and_grad(self, x):
        e = x - self.c
        return 7.0 - 0.5 * e @ self.A @ e, -self.A @ e


class Rosenbrock(ToyModel):
    """Negated (chained) Rosenbrock function, maximised at (1, ..., 1) with value 0."""

    def __init__(self, P=2):
        x0 = np.tile([-1.2, 1.0], P // 2 + 1)[:P]
        super().__init__(x0)

    def value_and_grad(self, x):
        a, b = x[:-1], x[1:]
        f = np.sum(100.0 * (b - a**2) ** 2 + (1.0 - a) ** 2)
        g = np.zeros_like(x)
        g[:-1] += -400.0 * a * (b - a**2) - 2.0 * (1.0 - a)
        g[1:] += 200.0 * (b - a**2)
        return -f, -g


class Slow(Rosenbrock):
    """A 10-D Rosenbrock that takes ~20 ms per evaluation: far from converging within a second."""

    def __init__(self):
        super().__init__(P=10)

    def value_and_grad(self, x):
        time.sleep(0.02)
        return super().value_and_grad(x)


class NaNAfter(Quadratic):
    """A quadratic whose evaluations turn NaN from the ``n``-th call on."""

    def __init__(self, n, where="objective"):
        super().__init__()
        self.n, self.where = n, where

    def value_and_grad(self, x):
        f, g = super().value_and_grad(x)
        if self.n_calls >= self.n:
            if self.where == "objective":
                f = np.nan
            else:
                g = g.copy()
                g[0] = np.inf
        return f, g


class Recorder:
    """Callback that keeps every snapshot and can signal when an iteration is reached."""

    def __init__(self):
        self.snapshots = []
        self.lock = threading.Lock()
        self.reached = {}

    def __call__(self, snap):
        with self.lock:
            self.snapshots.append(snap)
            for n, event in self.reached.items():
                if snap.iteration >= n:
                    event.set()

    def when(self, n):
        event = threading.Event()
        with self.lock:
            self.reached[n] = event
            if self.snapshots and self.snapshots[-1].iteration >= n:
                event.set()
        return event

    def count(self):
        with self.lock:
            return len(self.snapshots)


def fit_in_thread(model, **kwargs):
    """Start ``fit`` in a thread; returns (thread, box) where box gets "result", "error", "wall"."""
    box = {}

    def target():
        t0 = time.perf_counter()
        try:
            box["result"] = fit(model, **kwargs)
        except BaseException as exc:  # surfaced by the test
            box["error"] = exc
        box["wall"] = time.perf_counter() - t0

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, box


def join(thread, box, timeout=60):
    thread.join(timeout)
    assert not thread.is_alive(), "fit did not end"
    if "error" in box:
        raise box["error"]
    return box["result"]


def best_snapshot_x(snapshots, x0, start_objective):
    """The point the model should be left at: the best recorded iterate, or the start."""
    best = max(snapshots, key=lambda s: s.objective, default=None)
    if best is None or best.objective <= start_objective:
        return np.asarray(x0)
    return best.parameters["x"]


# --- convergence on problems with known optima

QUADRATIC_OPTIONS = {"lbfgs": {}, "lbfgs-compact": {}, "scg": {}, "adam": {"learning_rate": 0.05}}


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_quadratic_reaches_known_optimum(optimizer):
    model = Quadratic()
    result = fit(model, optimizer=optimizer, max_iters=20000, tol=1e-12, **QUADRATIC_OPTIONS[optimizer])
    assert isinstance(result, FitResult)
    np.testing.assert_allclose(model.get_free(), model.c, atol=1e-6)
    assert result.objective == pytest.approx(7.0, abs=1e-10)
    assert result.converged and not result.stopped
    assert result.iterations == len(result.history) <= 20000
    assert result.n_evaluations == model.n_calls


@pytest.mark.parametrize("optimizer", ["lbfgs", "lbfgs-compact", "scg"])
def test_rosenbrock_reaches_one_one(optimizer):
    model = Rosenbrock()
    result = fit(model, optimizer=optimizer, max_iters=5000)
    np.testing.assert_allclose(model.get_free(), [1.0, 1.0], atol=1e-3)
    assert result.objective > -1e-6


def test_adam_decreases_rosenbrock_substantially():
    model = Rosenbrock()
    start = model.value_and_grad(model.get_free())[0]  # -24.2
    result = fit(model, optimizer="adam", max_iters=2000, learning_rate=0.02)
    assert result.objective > start / 100
    assert model.value_and_grad(model.get_free())[0] == pytest.approx(result.objective)


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_max_iters_is_respected_and_every_iteration_is_reported(optimizer):
    model, rec = Rosenbrock(), Recorder()
    result = fit(model, optimizer=optimizer, max_iters=7, callback=rec)
    assert result.iterations == 7
    assert [s.iteration for s in rec.snapshots] == list(range(1, 8))
    assert [h[0] for h in result.history] == list(range(1, 8))
    assert not result.converged and not result.stopped


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_max_iters_zero_only_evaluates_the_start(optimizer):
    model = Quadratic()
    result = fit(model, optimizer=optimizer, max_iters=0)
    assert result.iterations == 0 and result.history == []
    assert result.objective == pytest.approx(model.value_and_grad(np.zeros(6))[0])
    np.testing.assert_array_equal(model.get_free(), np.zeros(6))


# --- snapshots

@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_snapshots_are_complete_and_ordered(optimizer):
    model, rec = Rosenbrock(P=4), Recorder()
    result = fit(model, optimizer=optimizer, max_iters=60, callback=rec)
    snaps = rec.snapshots
    assert len(snaps) == result.iterations > 1
    for s in snaps:
        assert isinstance(s, Snapshot) and s.optimizer == _name(optimizer)
        assert s.X_mean.shape == (1, 4) and s.X_variance is None and s.relevance.shape == (4,)
        # the snapshot describes the reported point: objective and gradient norm match it
        value, grad = model.value_and_grad(s.parameters["x"])
        assert s.objective == pytest.approx(value)
        assert s.grad_norm == pytest.approx(np.linalg.norm(grad))
        assert s.parameters["first"] == s.parameters["x"][0]
    iters = [s.iteration for s in snaps]
    assert iters == list(range(1, len(snaps) + 1))
    elapsed = [s.elapsed for s in snaps]
    assert all(b >= a for a, b in zip(elapsed, elapsed[1:])) and elapsed[-1] > elapsed[0]
    evals = [s.n_evaluations for s in snaps]
    assert all(b >= a for a, b in zip(evals, evals[1:]))
    assert [(s.iteration, s.objective, s.elapsed) for s in snaps] == result.history
    if optimizer != "adam":  # accepted iterates of L-BFGS and SCG never get worse
        objectives = [s.objective for s in snaps]
        assert all(b >= a for a, b in zip(objectives, objectives[1:]))


def test_snapshot_arrays_are_copies():
    model, rec = Quadratic(), Recorder()
    fit(model, optimizer="scg", max_iters=3, callback=rec)
    first = rec.snapshots[0]
    kept = first.X_mean.copy()
    model.x[:] = 123.0  # the model keeps changing after the snapshot was taken
    np.testing.assert_array_equal(first.X_mean, kept)


class CountedStates(Quadratic):
    """A Quadratic that counts how often its state is read (per-row latents: O(N) each time)."""

    states = 0

    def snapshot_state(self):
        self.states += 1
        return super().snapshot_state()


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_a_callback_reading_only_the_scalars_does_not_read_the_models_state(optimizer):
    model = CountedStates()
    seen = []
    fit(model, optimizer=optimizer, max_iters=5, callback=lambda s: seen.append((s.iteration, s.objective)))
    assert [i for i, _ in seen] == [1, 2, 3, 4, 5] and model.states == 0
    # a callback that reads the state reads it once per snapshot
    fit(model, optimizer=optimizer, max_iters=3, callback=lambda s: (s.X_mean, s.relevance, s.parameters))
    assert model.states == 3


def test_a_kept_snapshot_holds_its_own_iterations_state_unread():
    model, kept = CountedStates(), []
    fit(model, optimizer="adam", max_iters=4, callback=kept.append)
    assert model.states == 4  # completed as the callback returned, before the model moved on
    xs = [s.parameters["x"] for s in kept]
    assert all(not np.array_equal(a, b) for a, b in zip(xs, xs[1:]))
    for s, x in zip(kept, xs):
        value, _ = model.value_and_grad(x)
        assert s.objective == pytest.approx(value)
        np.testing.assert_array_equal(s.X_mean, x.reshape(1, -1))


def test_result_objective_is_the_best_and_the_model_is_left_there():
    model = Quadratic()  # Adam with a large step overshoots: the last iterate is not the best
    result = fit(model, optimizer="adam", max_iters=7, learning_rate=1.0)
    objectives = [h[1] for h in result.history]
    assert objectives[-1] < max(objectives)
    assert result.objective == max(objectives)
    assert model.value_and_grad(model.get_free())[0] == pytest.approx(max(objectives))


# --- stop and pause from another thread

@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_stop_from_another_thread_ends_within_one_iteration(optimizer):
    model, rec, stop = Slow(), Recorder(), threading.Event()
    x0 = model.get_free()
    start_objective = model.value_and_grad(x0)[0]
    reached = rec.when(3)
    thread, box = fit_in_thread(model, optimizer=optimizer, max_iters=100000, callback=rec, stop=stop)
    assert reached.wait(30)
    stop.set()
    done_when_set = rec.count()  # read after setting: at most the iteration in progress may follow
    result = join(thread, box)
    assert result.stopped and not result.converged
    assert result.iterations - done_when_set <= 1
    assert result.iterations == rec.count()
    np.testing.assert_allclose(model.get_free(), best_snapshot_x(rec.snapshots, x0, start_objective))


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_stop_set_in_callback_ends_after_that_iteration(optimizer):
    model, stop = Rosenbrock(), threading.Event()
    rec = Recorder()

    def callback(snap):
        rec(snap)
        if snap.iteration == 4:
            stop.set()

    result = fit(model, optimizer=optimizer, max_iters=1000, callback=callback, stop=stop)
    assert result.stopped and result.iterations == 4
    x0 = Rosenbrock().get_free()
    expected = best_snapshot_x(rec.snapshots, x0, model.value_and_grad(x0)[0])
    np.testing.assert_allclose(model.get_free(), expected)


class StopsDuringEvaluation(Rosenbrock):
    """Sets ``stop`` during its ``n``-th evaluation, i.e. in the middle of an iteration."""

    def __init__(self, stop, n):
        super().__init__(P=4)
        self.stop, self.n = stop, n

    def value_and_grad(self, x):
        if self.n_calls == self.n:
            self.stop.set()
        return super().value_and_grad(x)


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_stop_is_honoured_between_evaluations_within_an_iteration(optimizer):
    stop = threading.Event()
    model, rec = StopsDuringEvaluation(stop, n=8), Recorder()
    x0 = model.get_free()
    result = fit(model, optimizer=optimizer, max_iters=1000, callback=rec, stop=stop)
    assert result.stopped
    assert model.n_calls == 8  # no evaluation after stop was set
    assert result.iterations == rec.count() <= 8
    np.testing.assert_allclose(model.get_free(),
                               best_snapshot_x(rec.snapshots, x0, model.value_and_grad(x0)[0]))


def test_stop_set_before_the_fit_runs_no_iteration():
    model, stop = Quadratic(), threading.Event()
    stop.set()
    result = fit(model, optimizer="lbfgs", stop=stop)
    assert result.stopped and result.iterations == 0
    np.testing.assert_array_equal(model.get_free(), np.zeros(6))


def pausing_at(n, rec, pause):
    """Callback that records and sets ``pause`` once iteration ``n`` completes."""

    def callback(snap):
        rec(snap)
        if snap.iteration == n:
            pause.set()

    return callback


def test_pause_blocks_iterations_and_is_excluded_from_elapsed():
    model, rec = Slow(), Recorder()
    stop, pause = threading.Event(), threading.Event()
    reached = rec.when(2)
    thread, box = fit_in_thread(model, optimizer="scg", max_iters=100000,
                                callback=pausing_at(2, rec, pause), stop=stop, pause=pause)
    assert reached.wait(30)
    paused_at = time.perf_counter()
    time.sleep(0.6)
    assert rec.count() == 2, "iterations ran while paused"
    assert thread.is_alive()
    resumed = rec.when(3)
    pause.clear()  # from this thread
    paused_for = time.perf_counter() - paused_at
    assert resumed.wait(30), "the fit did not resume after pause was cleared"
    stop.set()
    result = join(thread, box)
    assert result.stopped and result.iterations >= 3
    # elapsed excludes (most of) the pause: no tight timing, only well under the wall time
    assert result.elapsed < box["wall"] - 0.5 * paused_for
    assert rec.snapshots[2].elapsed < box["wall"] - 0.5 * paused_for


def test_stop_while_paused_ends_the_fit():
    model, rec = Slow(), Recorder()
    stop, pause = threading.Event(), threading.Event()
    reached = rec.when(2)
    thread, box = fit_in_thread(model, optimizer="lbfgs", max_iters=100000,
                                callback=pausing_at(2, rec, pause), stop=stop, pause=pause)
    assert reached.wait(30)
    time.sleep(0.3)
    assert rec.count() == 2 and thread.is_alive()
    stop.set()
    result = join(thread, box)
    assert result.stopped and result.iterations == 2
    assert pause.is_set()  # the driver never clears the caller's events


# --- failures

@pytest.mark.parametrize("where", ["objective", "gradient"])
@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_non_finite_values_raise_and_leave_the_model_at_its_best_point(optimizer, where):
    model, rec = NaNAfter(n=6, where=where), Recorder()
    x0 = model.get_free()
    start_objective = model.value_and_grad(x0)[0]
    with pytest.raises(OptimizationError, match="non-finite") as info:
        fit(model, optimizer=optimizer, max_iters=1000, callback=rec)
    assert "iteration" in str(info.value) and "standardising" in str(info.value)
    assert model.n_calls == 6  # no retry loop after the first non-finite value
    np.testing.assert_allclose(model.get_free(), best_snapshot_x(rec.snapshots, x0, start_objective))


def test_non_finite_start_raises():
    model = NaNAfter(n=1)
    with pytest.raises(OptimizationError, match="non-finite.*starting point"):
        fit(model, optimizer="scg")
    np.testing.assert_array_equal(model.get_free(), np.zeros(6))


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_callback_exception_propagates_and_model_is_at_best(optimizer):
    model, rec = Rosenbrock(), Recorder()

    class Boom(Exception):
        pass

    def callback(snap):
        rec(snap)
        if snap.iteration == 5:
            raise Boom

    with pytest.raises(Boom):
        fit(model, optimizer=optimizer, callback=callback)
    x0 = Rosenbrock().get_free()
    expected = best_snapshot_x(rec.snapshots, x0, model.value_and_grad(x0)[0])
    np.testing.assert_allclose(model.get_free(), expected)


def test_unknown_optimizer_lists_the_valid_names():
    with pytest.raises(engine.ConfigurationError, match="'lbfgs', 'scg', 'adam'"):
        fit(Quadratic(), optimizer="newton")


def test_unknown_option_is_rejected_with_the_valid_ones():
    with pytest.raises(engine.ConfigurationError, match="learning_rate"):
        fit(Quadratic(), optimizer="adam", learnig_rate=0.1)


@pytest.mark.parametrize("bad", [-1, 2.5, True])
def test_invalid_max_iters_is_rejected(bad):
    with pytest.raises(engine.ConfigurationError, match="max_iters"):
        fit(Quadratic(), max_iters=bad)


class JitterRaisingQuadratic(Quadratic):
    """A quadratic whose 'jitter' (part of the objective, as in the models) is raised at one evaluation."""

    def __init__(self, raise_at):
        super().__init__()
        self.jitter = 0.0
        self.raise_at = raise_at

    def value_and_grad(self, x):
        if self.n_calls == self.raise_at:
            self.jitter = 1.0  # as a model does when a factorisation fails
        value, grad = super().value_and_grad(x)
        return value - 100.0 * self.jitter, grad


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_a_raised_jitter_restarts_the_run_and_reports_the_final_objective(optimizer):
    model = JitterRaisingQuadratic(raise_at=6)
    seen = []
    result = fit(model, optimizer=optimizer, max_iters=60, callback=lambda s: seen.append(s.iteration))
    assert model.jitter == 1.0
    # the reported best is a value of the objective as it is now, at the point the model was left at
    assert result.objective == pytest.approx(model.value_and_grad(model.get_free())[0], abs=1e-12)
    assert result.objective < 7.0 - 90.0
    assert seen == list(range(1, result.iterations + 1))  # one numbering across the restart
    assert result.iterations <= 60


class WrongGradient(Rosenbrock):
    """A Rosenbrock whose gradient points the wrong way: no line search finds a better point."""

    def value_and_grad(self, x):
        value, grad = super().value_and_grad(x)
        return value, -grad


@pytest.mark.parametrize("optimizer", ["lbfgs", "lbfgs-compact"])
def test_an_optimiser_that_cannot_improve_ends_for_its_own_reason_not_the_cap(optimizer):
    """The page reads reason "max_iters" as "raise Iterations to go on": a stalled line search is not that."""
    model = WrongGradient(P=3)
    result = fit(model, optimizer=optimizer, max_iters=50)
    assert result.iterations < 50 and not result.converged
    assert result.reason == "optimizer", (result.reason, result.message)
    capped = fit(Rosenbrock(P=3), optimizer=optimizer, max_iters=4)
    assert capped.iterations == 4 and capped.reason == "max_iters"
