"""Bitwise determinism: the same call gives the same bits, whatever the load, the thread counts and the
other rows projected with a row (the Dask backend's bits: tests/engine/test_dask_backend.py)."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import engine
from busy import another_session_pinning_blas, cpu_hog
from modelcheck import curved_data

ENGINE = Path(engine.__file__).resolve().parent
ROOT = ENGINE.parent

pytestmark = pytest.mark.timeout(600)


def _is_prange_loop(node) -> bool:
    it = getattr(node, "iter", None)
    return isinstance(node, ast.For) and isinstance(it, ast.Call) and (
        getattr(it.func, "id", None) == "prange" or getattr(it.func, "attr", None) == "prange")


def prange_reductions(source: str) -> list:
    """Lines of ``x += ...`` (any augmented assignment to a plain name) inside a ``numba.prange`` loop
    to a name not assigned in that loop's body: a reduction across iterations, summed in a
    thread-dependent order.  Writes to an iteration's own outputs (``out[i] += ...``) and
    accumulators local to an iteration are fine."""
    lines = []
    for loop in (n for n in ast.walk(ast.parse(source)) if _is_prange_loop(n)):
        body = ast.Module(body=loop.body, type_ignores=[])
        local = {t.id for n in ast.walk(body) if isinstance(n, ast.Assign) for t in n.targets
                 if isinstance(t, ast.Name)}
        local |= {n.target.id for n in ast.walk(body) if isinstance(n, ast.For) and isinstance(n.target, ast.Name)}
        lines += [n.lineno for n in ast.walk(body)
                  if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and n.target.id not in local]
    return lines


def test_no_engine_loop_reduces_across_prange_iterations():
    """A numba prange reduction sums in an order that depends on the threads: the engine has none."""
    reducing = "def f(x):\n    t = 0.0\n    for i in prange(3):\n        t += x[i]\n    return t\n"
    per_row = "def f(x, out):\n    for i in prange(3):\n        acc = 0.0\n        acc += x[i]\n        out[i] += acc\n"
    assert prange_reductions(reducing) == [4] and prange_reductions(per_row) == []
    offenders = {str(p.relative_to(ROOT)): lines for p in ENGINE.rglob("*.py")
                 if (lines := prange_reductions(p.read_text()))}
    assert not offenders, offenders


# ---------------------------------------------------------------- a row alone = in a batch


def _new_rows(model, n=7, seed=1):
    rng = np.random.default_rng(seed)
    Y = np.asarray(model._Y_data, dtype=float)
    rows = Y[rng.choice(Y.shape[0], n, replace=False)] + 0.3 * rng.standard_normal((n, Y.shape[1]))
    rows[1, 2] = np.nan
    rows[4, :3] = np.nan
    return rows


def _models():
    Y = curved_data(150, 6)
    Ym = Y.copy()
    Ym[np.random.default_rng(2).random(Y.shape) < 0.15] = np.nan
    return {
        "bayesian": engine.BayesianGPLVM(Y, 3, num_inducing=10),
        "bayesian-linear": engine.BayesianGPLVM(Y, 2, num_inducing=2, kernel=engine.kernels.Linear(2)),
        "bayesian-missing": engine.BayesianGPLVM(Ym, 2, num_inducing=8),
        "sparse": engine.SparseGPLVM(Y, 2, num_inducing=10),
        "sparse-mlp": engine.SparseGPLVM(Y, 2, num_inducing=10, kernel=engine.kernels.MLP(2)),
        "gplvm": engine.GPLVM(Y[:60], 2),
        "stochastic": engine.StochasticBayesianGPLVM(Y, 2, num_inducing=8, batch_size=40),
        "mrd": engine.MRD([Y[:, :3], Y[:, 3:]], 2, num_inducing=8),
    }


@pytest.mark.parametrize("name", list(_models()))
def test_a_rows_projection_does_not_depend_on_the_rows_projected_with_it(name):
    model = _models()[name]
    engine.fit(model, max_iters=15)
    rows = _new_rows(model)
    together = model.infer_latent(rows)
    for i in range(rows.shape[0]):
        alone = model.infer_latent(rows[i])
        for field in ("mean", "variance", "log_density"):
            np.testing.assert_array_equal(getattr(alone, field)[0], getattr(together, field)[i], err_msg=f"{field} {i}")
    swapped = model.infer_latent(rows[::-1])  # another order: the same bits per row
    np.testing.assert_array_equal(swapped.mean[::-1], together.mean)


# ---------------------------------------------------------------- the same call, the same bits


def _fit_and_project(make, optimizer="lbfgs"):
    model = make()
    result = engine.fit(model, optimizer=optimizer, max_iters=25)
    trace = np.array([obj for _, obj, _ in result.history])
    return trace, model.get_free(), model.infer_latent(curved_data(155, 6)[150:]).mean


@pytest.mark.parametrize("name, make, optimizer", [
    ("bayesian", lambda: engine.BayesianGPLVM(curved_data(300, 6), 3, num_inducing=12), "lbfgs"),
    ("sparse", lambda: engine.SparseGPLVM(curved_data(300, 6), 3, num_inducing=12), "scg"),
    ("stochastic", lambda: engine.StochasticBayesianGPLVM(curved_data(300, 6), 2, num_inducing=8, batch_size=50),
     "svi"),
])
def test_the_same_fit_gives_the_same_bits_under_load_and_while_another_session_pins_blas(name, make, optimizer):
    quiet = _fit_and_project(make, optimizer)
    with cpu_hog(), another_session_pinning_blas():
        busy = _fit_and_project(make, optimizer)
    for a, b, what in zip(quiet, busy, ("trace", "parameters", "projection")):
        np.testing.assert_array_equal(a, b, err_msg=what)


_RUN = textwrap.dedent("""
    import json, sys
    import numpy as np
    import engine
    sys.path.insert(0, {tests!r})
    from modelcheck import curved_data

    out = {{}}
    for name, make, opt in [
        ("bayesian", lambda: engine.BayesianGPLVM(curved_data(700, 6), 3, num_inducing=12), "lbfgs"),
        ("sparse", lambda: engine.SparseGPLVM(curved_data(300, 6), 3, num_inducing=12), "lbfgs"),
        ("stochastic", lambda: engine.StochasticBayesianGPLVM(curved_data(300, 6), 2, num_inducing=8,
                                                               batch_size=50), "svi"),
    ]:
        m = make()
        r = engine.fit(m, optimizer=opt, max_iters=20)
        out[name] = {{"trace": [float(o).hex() for _, o, _ in r.history],
                      "free": [float(v).hex() for v in m.get_free()],
                      "projection": [float(v).hex() for v in m.infer_latent(curved_data(705, 6)[700:]).mean.ravel()]}}
    print(json.dumps(out))
""")


def _run_with_threads(n: int) -> dict:
    env = dict(os.environ, NUMBA_NUM_THREADS=str(n), OPENBLAS_NUM_THREADS=str(n), OMP_NUM_THREADS=str(n))
    code = _RUN.format(tests=str(Path(__file__).resolve().parents[1]))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=500,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_fits_and_projections_are_the_same_bits_for_any_thread_count():
    one, two = _run_with_threads(1), _run_with_threads(2)
    assert one.keys() == two.keys() and len(one["bayesian"]["trace"]) == 20
    assert one == two  # every float of every trace, parameter vector and projection, as hex
