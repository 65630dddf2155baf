"""Training until the bound has converged (engine.Convergence), and the noise warm-up only when the
start needs it (engine.optimize.start_explains)."""
import math

import numpy as np
import pytest

import engine
from engine.optimize import HOLD_NOISE_BELOW, Convergence, fit, start_explains


class Ramp:
    """objective = level + slope * sum(x): rises for ever.  Adam's first steps move every coordinate
    by exactly its learning rate (the gradient is constant), so each iteration adds slope * lr * P."""

    def __init__(self, level=1e4, slope=0.2, P=1):
        self.level, self.slope = float(level), float(slope)
        self.x = np.zeros(P)

    def get_free(self):
        return self.x.copy()

    def set_free(self, x):
        self.x = np.array(x, dtype=float)

    def objective_and_gradient(self, x):
        return self.level + self.slope * float(np.sum(x)), np.full(x.shape, self.slope)

    def snapshot_state(self):
        return {"parameters": {}, "X_mean": self.x.reshape(1, -1), "X_variance": None, "relevance": self.x}


RULE = Convergence(window=10, rtol=1e-6)


def ramp_fit(rise_per_window_over_rtol, max_iters=300):
    """A Ramp whose objective rises by ``rise_per_window_over_rtol`` x RULE.rtol of itself per window."""
    lr, level = 0.01, 1e4
    slope = rise_per_window_over_rtol * RULE.rtol * level / (RULE.window * lr)
    model = Ramp(level=level, slope=slope)
    shots = []
    result = fit(model, optimizer="adam", max_iters=max_iters, learning_rate=lr, convergence=RULE,
                 callback=shots.append)
    return result, shots


def test_a_bound_still_rising_faster_than_the_rule_is_not_stopped():
    result, shots = ramp_fit(2.0)  # twice the rule's rise per window: never converged
    assert result.iterations == 300 and result.reason == "max_iters" and not result.converged
    changes = np.array([s.change for s in shots])
    assert np.all(np.isnan(changes[:RULE.window]))  # no full window yet
    np.testing.assert_allclose(changes[RULE.window:], 2.0 * RULE.rtol, rtol=1e-3)


def test_a_bound_rising_slower_than_the_rule_converges_after_one_window():
    result, shots = ramp_fit(0.5)
    assert result.reason == "converged" and result.converged
    assert result.iterations == RULE.window + 1 == len(shots)  # the first full window decides
    assert shots[-1].change <= RULE.rtol and "Converged after 11 iterations" in result.message


def test_the_cap_is_respected_before_convergence():
    result, _ = ramp_fit(0.5, max_iters=RULE.window)  # the cap comes before the first full window
    assert result.iterations == RULE.window and result.reason == "max_iters" and not result.converged


def curve(N=80, D=6, seed=0):
    rng = np.random.default_rng(seed)
    T = rng.uniform(-1.5, 1.5, size=(N, 2))
    return np.sin(T @ rng.normal(size=(2, D)) + rng.uniform(0, 6, D)) + 0.05 * rng.normal(size=(N, D))


def test_a_small_bayesian_gplvm_converges_before_the_cap_near_where_a_long_run_ends():
    Y = curve()
    rule = Convergence(window=30, rtol=1e-5)
    model = engine.BayesianGPLVM(Y, 2, num_inducing=10)
    result = fit(model, max_iters=5000, convergence=rule)
    assert result.converged and result.reason in ("converged", "optimizer") and result.iterations < 5000
    best = np.maximum.accumulate([h[1] for h in result.history])
    if result.reason == "converged":  # the rule's own arithmetic, from the history
        assert (best[-1] - best[-1 - rule.window]) <= rule.rtol * abs(best[-1])
        assert (best[-2] - best[-2 - rule.window]) > rule.rtol * abs(best[-2])  # and not one iteration sooner
    long = engine.BayesianGPLVM(Y, 2, num_inducing=10)
    reference = fit(long, max_iters=result.iterations + 2000)
    # stopped where little was left: within 1% of the objective's scale of what 2000 more iterations reach
    assert reference.objective - result.objective <= 0.01 * abs(reference.objective)


def test_convergence_must_be_a_rule():
    with pytest.raises(engine.ConfigurationError, match="window"):
        Convergence(window=0)
    with pytest.raises(engine.ConfigurationError, match="rtol"):
        Convergence(rtol=-1.0)
    with pytest.raises(engine.ConfigurationError, match="Convergence"):
        fit(Ramp(), optimizer="adam", max_iters=2, convergence=1e-5)


def test_without_a_rule_snapshots_carry_no_change_and_the_fit_runs_to_the_cap():
    shots = []
    result = fit(Ramp(slope=1e-6), optimizer="adam", max_iters=25, callback=shots.append)  # rises 1e-8 per step
    assert result.iterations == 25 and result.reason == "max_iters"
    assert all(math.isnan(s.change) for s in shots)


# ---- the noise warm-up: only when the start needs it ------------------------------------------

def test_start_explains_is_the_share_of_the_top_principal_components_after_a_pca_start():
    Y = curve(N=120, D=6, seed=2)
    Yc = Y - Y.mean(axis=0)
    eig = np.sort(np.linalg.eigvalsh(Yc.T @ Yc))[::-1]
    for Q in (1, 2, 4):
        model = engine.BayesianGPLVM(Y, Q, num_inducing=8)
        assert start_explains(model) == pytest.approx(eig[:Q].sum() / eig.sum(), rel=1e-10)
    random = engine.BayesianGPLVM(Y, 2, num_inducing=8, init="random", seed=1)
    assert start_explains(random) < HOLD_NOISE_BELOW < start_explains(engine.BayesianGPLVM(Y, 1, num_inducing=8))


@pytest.mark.parametrize("init, held", [("pca", 0), ("random", 100)])
def test_the_noise_is_held_only_from_a_start_that_explains_little(init, held):
    model = engine.BayesianGPLVM(curve(), 2, num_inducing=8, init=init, seed=0)
    noise0 = model.noise_variance
    noises = []
    result = fit(model, max_iters=250, callback=lambda s: noises.append(s.parameters["noise_variance"]))
    assert result.warm_up == held
    assert all(v == noise0 for v in noises[:held])
    assert noises[held] != noise0  # released (or never held): it moves at once


def test_an_explicit_warm_up_holds_whatever_the_start():
    model = engine.BayesianGPLVM(curve(), 2, num_inducing=8)
    result = fit(model, max_iters=40, warm_up_iters=10)
    assert result.warm_up == 10


def test_with_a_rule_the_warm_up_ends_when_the_held_fit_has_converged():
    """The held phase is a fit of its own: once it has converged, holding on longer gains nothing."""
    model = engine.BayesianGPLVM(curve(N=40), 2, num_inducing=6, init="random", seed=3)
    rule = Convergence(window=20, rtol=1e-4)
    result = fit(model, max_iters=20000, warm_up_iters=5000, convergence=rule)
    assert 0 < result.warm_up < 5000 and result.iterations > result.warm_up
