"""Results that do not depend on the number of threads, and the BLAS pinning helpers.

The fit test runs the same short Bayesian GP-LVM fit in fresh interpreters
with different NUMBA_NUM_THREADS and OPENBLAS_NUM_THREADS (both are read when
the libraries load, so only a new process can change them; numba 3 threads is
``numba.set_num_threads(3)`` under NUMBA_NUM_THREADS=4) and compares the
objective traces.  N = 300 points are five blocks of 64 in the Psi2 loops, so
with two or more threads the blocks are shared between threads; a summation
order that followed the thread count shows in the traces (with one share per
thread, the 2- and 4-thread traces left the 1-thread trace by ~1e-7 relative
within 30 iterations).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from engine import _threads
from engine import single_blas_thread  # public
from engine._threads import blas_pinned, blas_thread_counts

REPO = Path(__file__).resolve().parents[2]

#: The child: for each numba thread count in argv (at most NUMBA_NUM_THREADS),
#: a 30-iteration L-BFGS fit from a fixed start; prints one JSON line per fit
#: with the first evaluation (objective and gradient, straight from the
#: model's public method, under the default BLAS settings) and the trace.
FIT_SCRIPT = r"""
import json, sys
import numpy as np
import numba
import engine

rng = np.random.default_rng(7)
N, D, Q, M = 300, 8, 4, 20
X = rng.standard_normal((N, 3))
W = rng.standard_normal((3, D))
Y = np.sin(X @ W) + 0.3 * (X @ W) + 0.05 * rng.standard_normal((N, D))
for threads in map(int, sys.argv[1:]):
    numba.set_num_threads(threads)
    model = engine.BayesianGPLVM(Y, Q, num_inducing=M, seed=0)
    x0 = np.array(model.get_free(), dtype=float)
    f0, g0 = model.objective_and_gradient(x0)
    result = engine.fit(model, optimizer="lbfgs", max_iters=30)
    trace = [float(h[1]) for h in result.history]
    print(json.dumps({"threads": numba.get_num_threads(), "f0": float(f0),
                      "g0": np.asarray(g0, dtype=float).tolist(), "trace": trace}))
"""

#: (NUMBA_NUM_THREADS, OPENBLAS_NUM_THREADS, numba thread counts to fit with in that process):
#: numba 1, 2, 3 and 4 threads, BLAS 1 and 2, four interpreters.
SETTINGS = [(1, 1, (1,)), (2, 1, (2,)), (2, 2, (2,)), (4, 2, (4, 3))]


def _run_fits(numba_threads, blas_threads, counts):
    env = dict(os.environ)
    env.update(NUMBA_NUM_THREADS=str(numba_threads), OPENBLAS_NUM_THREADS=str(blas_threads),
               OMP_NUM_THREADS=str(blas_threads), MKL_NUM_THREADS=str(blas_threads))
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    proc = subprocess.run([sys.executable, "-c", FIT_SCRIPT, *map(str, counts)], cwd=str(REPO), env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    outs = [json.loads(line) for line in proc.stdout.strip().splitlines() if line.startswith("{")]
    assert [out["threads"] for out in outs] == list(counts)
    return {(out["threads"], blas_threads): out for out in outs}


def _rel(a, b):
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def test_fit_trace_independent_of_thread_counts():
    runs = {}
    for setting in SETTINGS:
        runs.update(_run_fits(*setting))
    assert len(runs) == 5
    ref = runs[(1, 1)]
    assert len(ref["trace"]) >= 20  # the fit really ran (L-BFGS may stop early only on convergence)
    assert all(np.isfinite(ref["trace"]))
    for setting, run in runs.items():
        # the first evaluation: same summation order, so the same numbers up to rounding noise
        assert abs(run["f0"] - ref["f0"]) <= 1e-13 * abs(ref["f0"]), (setting, run["f0"], ref["f0"])
        assert _rel(run["g0"], ref["g0"]) <= 1e-12, setting
        assert len(run["trace"]) == len(ref["trace"]), setting
        diff = _rel(run["trace"], ref["trace"])
        assert diff <= 1e-9, f"numba threads, OPENBLAS_NUM_THREADS = {setting}: trace differs by {diff:.3g}"


# ----------------------------------------------------------------- BLAS pinning


@pytest.fixture
def two_blas_threads():
    """Every BLAS library at 2 threads for the test (restored after), so a pin is visible."""
    with _threads._lock:
        shared, per_thread = _threads._blas_libraries()
    libs = shared + per_thread
    if not libs:
        pytest.skip("no BLAS library visible to threadpoolctl")
    before = [get() for _, get in libs]
    for set_threads, _ in libs:
        set_threads(2)
    yield
    for (set_threads, _), n in zip(libs, before):
        set_threads(n)

def test_blas_pinned_restores_and_nests(two_blas_threads):
    seen = []

    @blas_pinned
    def inner(x):
        seen.append(("inner", blas_thread_counts()))
        return x + 1

    @blas_pinned
    def outer(x):
        seen.append(("outer before", blas_thread_counts()))
        y = inner(x)
        seen.append(("outer after", blas_thread_counts()))
        return y * 2

    assert outer.__name__ == "outer"
    assert set(blas_thread_counts()) == {2}
    assert outer(1) == 4
    assert set(blas_thread_counts()) == {2}
    assert [name for name, _ in seen] == ["outer before", "inner", "outer after"]
    assert all(set(counts) == {1} for _, counts in seen)
    with single_blas_thread():
        assert set(blas_thread_counts()) == {1}
        with single_blas_thread():
            assert set(blas_thread_counts()) == {1}
        assert set(blas_thread_counts()) == {1}
    assert set(blas_thread_counts()) == {2}


def test_blas_pinned_restores_after_an_exception(two_blas_threads):
    @blas_pinned
    def boom():
        assert set(blas_thread_counts()) == {1}
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        boom()
    assert set(blas_thread_counts()) == {2}
    assert getattr(_threads._local, "depth", 0) == 0


def test_blas_pin_shared_between_threads(two_blas_threads):
    """A thread leaving its pinned region does not unpin BLAS under another still inside."""
    a_in, b_in, a_out, b_check = (threading.Event() for _ in range(4))
    seen = {}

    def first():
        with single_blas_thread():
            a_in.set()
            b_in.wait(5)
        a_out.set()

    def second():
        a_in.wait(5)
        with single_blas_thread():
            b_in.set()
            a_out.wait(5)  # the first thread has left; we are still inside
            seen["inside after first left"] = blas_thread_counts()
        seen["after both left"] = blas_thread_counts()
        b_check.set()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert b_check.is_set()
    assert set(seen["inside after first left"]) == {1}
    assert set(seen["after both left"]) == {2}
    assert _threads._refcount == 0


def test_psi_entry_points_are_pinned(two_blas_threads):
    """engine.psi.compute / gradients run with BLAS at one thread and leave it as it was."""
    import engine.psi as psi
    from engine import kernels

    rng = np.random.default_rng(0)
    Z = rng.standard_normal((5, 2))
    mu = rng.standard_normal((70, 2))
    S = np.full((70, 2), 0.2)
    kern = kernels.RBF(2, lengthscales=np.array([0.7, 1.3]))
    seen = []
    original = psi.rbf.psi_stats

    def spy(*args, **kwargs):
        seen.append(blas_thread_counts())
        return original(*args, **kwargs)

    psi.rbf.psi_stats = spy
    try:
        stats = psi.compute(kern, Z, mu, S)
    finally:
        psi.rbf.psi_stats = original
    assert seen and set(seen[0]) == {1}
    assert set(blas_thread_counts()) == {2}
    grads = psi.gradients(kern, Z, mu, S, 1.0, np.ones_like(stats.Psi1), np.ones_like(stats.Psi2))
    assert np.all(np.isfinite(grads.Z))
    assert set(blas_thread_counts()) == {2}
