"""engine.lbfgs: the compact L-BFGS direction against the classic two-loop recursion on the
stored vectors, the Gram entries it keeps against products computed directly, the strong
Wolfe line search, and the optimiser's ends (line-search failure, evaluation limit)."""
import math

import numpy as np
import pytest

from engine import optimize
from engine.lbfgs import PairMemory, wolfe_search


def two_loop(g, pairs):
    """Nocedal & Wright (2006), Algorithm 7.4, on explicit (s, y) vectors, oldest first: -H g."""
    q = g.copy()
    alphas = []
    for s, y in reversed(pairs):
        a = (s @ q) / (s @ y)
        q -= a * y
        alphas.append(a)
    s, y = pairs[-1]
    r = (s @ y) / (y @ y) * q
    for (s, y), a in zip(pairs, reversed(alphas)):
        b = (y @ r) / (s @ y)
        r += s * (a - b)
    return -r


def quadratic(P, seed=0):
    """f(x) = 1/2 x^T A x - c^T x, A with eigenvalues from 1 to 1000: (f, g) and A."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((P, P)))
    A = Q @ np.diag(np.geomspace(1.0, 1000.0, P)) @ Q.T
    c = rng.standard_normal(P)
    return (lambda x: (0.5 * x @ A @ x - c @ x, A @ x - c)), A


@pytest.mark.parametrize("m", [1, 3, 6])
def test_directions_equal_the_two_loop_recursion_through_many_evictions(m):
    P = 40
    f_g, _ = quadratic(P)
    memory = PairMemory(P, m)
    x = np.random.default_rng(1).standard_normal(P)
    f, g = f_g(x)
    pairs = []
    rng = np.random.default_rng(2)
    for it in range(25):
        d, coefficients = memory.direction(g)
        if pairs:
            expected = two_loop(g, pairs[-m:])
            np.testing.assert_allclose(d, expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())
        else:
            np.testing.assert_allclose(d, -g / np.linalg.norm(g), rtol=1e-15)
        step = rng.uniform(0.2, 0.9)  # inexact steps: the pairs are not conjugate
        s = step * d
        f_new, g_new = f_g(x + s)
        a_new, b_new = memory.products(g_new)
        assert memory.add(s, g_new - g, g_new, a_new, b_new, coefficients, step)
        pairs.append((s, g_new - g))
        x, g = x + s, g_new
        # the kept Gram entries and products equal those computed from the vectors
        S = np.array([p[0] for p in pairs[-m:]])
        Y = np.array([p[1] for p in pairs[-m:]])
        order = memory.order
        scale = np.abs(S @ Y.T).max()
        np.testing.assert_allclose(memory.SY[np.ix_(order, order)], S @ Y.T, atol=1e-9 * scale)
        np.testing.assert_allclose(memory.YY[np.ix_(order, order)], Y @ Y.T, rtol=1e-9,
                                   atol=1e-9 * np.abs(Y @ Y.T).max())
        np.testing.assert_allclose(memory.a[order], S @ g, atol=1e-9 * np.abs(S @ g).max())
        np.testing.assert_allclose(memory.b[order], Y @ g, atol=1e-9 * np.abs(Y @ g).max())
    assert len(memory) == m


def test_a_pair_without_positive_curvature_is_not_stored():
    P = 5
    memory = PairMemory(P, 3)
    g = np.ones(P)
    d, coefficients = memory.direction(g)
    g_new = g - 2.0 * d * np.linalg.norm(g)  # = 3 g: the slope along d fell further, s.y < 0
    a_new, b_new = memory.products(g_new)
    assert not memory.add(0.5 * d, g_new - g, g_new, a_new, b_new, coefficients, 0.5)
    assert len(memory) == 0


def wolfe_ok(f_g, x, d, step, f_step, g_step, c1=1e-4, c2=0.9):
    f0, g0 = f_g(x)
    slope0 = g0 @ d
    return f_step <= f0 + c1 * step * slope0 and abs(g_step @ d) <= -c2 * slope0


@pytest.mark.parametrize("scale", [1e-4, 1.0, 30.0])
def test_the_line_search_meets_the_strong_wolfe_conditions(scale):
    """A direction far too short (steps must grow), about right, and far too long (zoom)."""
    f_g, _ = quadratic(20, seed=3)
    x = np.random.default_rng(4).standard_normal(20)
    f0, g0 = f_g(x)
    d = -scale * g0 / np.linalg.norm(g0)
    found = wolfe_search(f_g, x, f0, d, float(g0 @ d))
    assert found is not None
    step, f_step, g_step = found
    assert (f_step, g_step.tolist()) == (f_g(x + step * d)[0], f_g(x + step * d)[1].tolist())
    assert wolfe_ok(f_g, x, d, step, f_step, g_step)


def rosenbrock(x):
    a, b = x[:-1], x[1:]
    f = np.sum(100.0 * (b - a**2) ** 2 + (1.0 - a) ** 2)
    g = np.zeros_like(x)
    g[:-1] += -400.0 * a * (b - a**2) - 2.0 * (1.0 - a)
    g[1:] += 200.0 * (b - a**2)
    return f, g


def test_the_line_search_on_rosenbrock_from_many_points():
    rng = np.random.default_rng(5)
    for _ in range(50):
        x = rng.uniform(-2, 2, 6)
        f0, g0 = rosenbrock(x)
        d = -g0 / np.linalg.norm(g0)
        step, f_step, g_step = wolfe_search(rosenbrock, x, f0, d, float(g0 @ d))
        assert wolfe_ok(rosenbrock, x, d, step, f_step, g_step)


def test_a_non_finite_trial_point_is_stepped_back_from():
    def f_g(x):
        if x[0] > 1.0:
            return math.inf, np.full_like(x, np.nan)
        return float((x[0] - 0.8) ** 2), np.array([2 * (x[0] - 0.8)])
    f0, g0 = f_g(np.zeros(1))
    step, f_step, _ = wolfe_search(f_g, np.zeros(1), f0, np.array([4.0]), float(g0[0] * 4.0))
    assert 0 < step * 4.0 <= 1.0 and f_step < f0


def test_the_line_search_gives_up_when_no_step_lowers_f():
    def f_g(x):  # the gradient claims descent along +x; f only rises
        return float(x[0] ** 2 + x[0]), np.array([-1.0])
    assert wolfe_search(f_g, np.zeros(1), 0.0, np.array([1.0]), -1.0, max_evals=8) is None


class Model:
    """The model protocol over a function to minimise (the driver maximises -f)."""

    def __init__(self, f_g, x0):
        self.f_g, self.x = f_g, np.array(x0, dtype=float)

    def get_free(self):
        return self.x.copy()

    def set_free(self, x):
        self.x = np.array(x, dtype=float)

    def objective_and_gradient(self, x):
        f, g = self.f_g(np.asarray(x, dtype=float))
        return -f, -g

    def snapshot_state(self):
        return {"parameters": {}, "X_mean": self.x[None], "X_variance": None, "relevance": np.ones(1)}


def test_lbfgs_runs_the_compact_optimiser_from_the_threshold_on(monkeypatch):
    calls = []
    real = optimize.minimize_compact

    def spy(*args, **kwargs):
        calls.append(args[1].size)
        return real(*args, **kwargs)

    monkeypatch.setattr(optimize, "minimize_compact", spy)
    monkeypatch.setattr(optimize, "COMPACT_LBFGS_FROM", 6)
    for P in (5, 6):
        optimize.fit(Model(rosenbrock, np.zeros(P)), optimizer="lbfgs", max_iters=3)
    assert calls == [6]


def test_a_wrong_gradient_ends_the_fit_at_the_start_with_a_message(monkeypatch):
    monkeypatch.setattr(optimize, "COMPACT_LBFGS_FROM", 0)

    def wrong(x):
        f, g = rosenbrock(x)
        return f, -g

    x0 = np.array([-1.2, 1.0, -1.2])
    model = Model(wrong, x0)
    result = optimize.fit(model, optimizer="lbfgs", max_iters=50)
    assert not result.converged and "line search" in result.message
    assert result.iterations == 0
    np.testing.assert_array_equal(model.get_free(), x0)


def test_the_evaluation_limit_ends_the_fit(monkeypatch):
    monkeypatch.setattr(optimize, "COMPACT_LBFGS_FROM", 0)
    model = Model(rosenbrock, np.array([-1.2, 1.0, -1.2, 1.0]))
    result = optimize.fit(model, optimizer="lbfgs", max_iters=1000, maxfun=12)
    assert not result.converged and "EVALUATIONS" in result.message
    assert 12 <= result.n_evaluations <= 12 + 20  # the limit is checked after each iteration


def test_the_compact_optimiser_takes_about_scipys_iterations_on_an_ill_conditioned_quadratic(monkeypatch):
    """Both are L-BFGS with 50 pairs and a strong Wolfe search from step 1: same iteration counts
    to within a few, where the exact arithmetic is identical."""
    f_g, A = quadratic(300, seed=6)
    counts = {}
    for name, threshold in (("scipy", 10**9), ("compact", 0)):
        monkeypatch.setattr(optimize, "COMPACT_LBFGS_FROM", threshold)
        model = Model(f_g, np.zeros(300))
        result = optimize.fit(model, optimizer="lbfgs", max_iters=2000, ftol=0.0, gtol=1e-5)
        assert result.converged
        assert "GRADIENT" in result.message
        np.testing.assert_allclose(A @ model.get_free(), -f_g(np.zeros(300))[1], atol=1e-5)
        counts[name] = result.iterations
    assert abs(counts["compact"] - counts["scipy"]) <= max(5, 0.1 * counts["scipy"]), counts

