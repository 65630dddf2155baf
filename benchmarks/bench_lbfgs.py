"""L-BFGS's own cost per iteration: scipy's L-BFGS-B against engine.lbfgs (the compact form).

Three sections, each running both implementations of ``optimizer="lbfgs"``
(``engine.optimize.COMPACT_LBFGS_FROM`` set to 0 or out of reach), 50 stored pairs:

* ``overhead``: a diagonal quadratic with P parameters (P in ``--params``), 120
  iterations; the process CPU time per iteration outside the evaluations, BLAS
  on one thread as in a fit (what the optimiser itself costs);
* ``rows``: ``engine.fit`` on the page's defaults (Bayesian GP-LVM, RBF + bias +
  white, Q=5, M=30) at ``--rows`` generated rows x 20: ms per iteration after
  the first 5, and the bound after ``--iters`` iterations (issue target: <= 100 ms
  per iteration at 50,000 rows);
* ``oil`` (with ``--data PATH``): the paper's oil-flow fit (Q=10, M=50, PCA start,
  ``--oil-iters`` iterations) over ``--seeds``: bound, 1-NN errors in the two
  most relevant dimensions, wall time.

    python benchmarks/bench_lbfgs.py [--skip overhead,rows,oil] [--rows 50000] [--data PATH]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402
from bench_cost import generate  # noqa: E402

IMPLEMENTATIONS = {"scipy": 10**18, "compact": 0}  # COMPACT_LBFGS_FROM for each


class DiagonalQuadratic:
    """f(x) = 1/2 sum d_i x_i^2 + sum x_i (maximised as -f), d spread over e^-3..e^3."""

    def __init__(self, P: int):
        rng = np.random.default_rng(0)
        self.d, self.x = np.exp(rng.uniform(-3, 3, P)), rng.standard_normal(P)
        self.evaluation_cpu = 0.0

    def get_free(self):
        return self.x.copy()

    def set_free(self, x):
        self.x = np.array(x, dtype=float)

    def objective_and_gradient(self, x):
        c0 = time.process_time()
        value, grad = -0.5 * float(x @ (self.d * x)) - float(x.sum()), -(self.d * x) - 1.0
        self.evaluation_cpu += time.process_time() - c0
        return value, grad

    def snapshot_state(self):
        return {"parameters": {}, "X_mean": None, "X_variance": None, "relevance": None}


def use(name: str) -> None:
    from engine import optimize

    optimize.COMPACT_LBFGS_FROM = IMPLEMENTATIONS[name]


def overhead(params) -> None:
    import engine
    from engine._threads import single_blas_thread

    C.header("The optimiser's own CPU per iteration (outside the evaluations), diagonal quadratic, 50 pairs")
    for P in params:
        cost = {}
        for name in IMPLEMENTATIONS:
            use(name)
            model = DiagonalQuadratic(P)
            c0 = time.process_time()
            with single_blas_thread():
                result = engine.fit(model, optimizer="lbfgs", max_iters=120, tol=0.0)
            cost[name] = (time.process_time() - c0 - model.evaluation_cpu) / max(result.iterations, 1)
            print(f"  P={P:>8,}  {name:8s} {cost[name] * 1e3:8.2f} ms per iteration "
                  f"({result.iterations} iterations, {result.n_evaluations} evaluations)", flush=True)
        print(f"  P={P:>8,}  scipy / compact = {cost['scipy'] / cost['compact']:.1f}; {C.machine_load()}")


def rows(n: int, iters: int) -> None:
    import engine
    from gplvm_explorer import warmup
    from gplvm_explorer.catalog import ModelConfig

    C.header(f"engine.fit at {n:,} x 20 rows, the page's defaults, {iters} iterations")
    warmup.start()
    warmup.wait()
    Y = generate(n, 20)
    config = ModelConfig()
    for name in IMPLEMENTATIONS:
        use(name)
        model = config.spec.build(Y, config)
        marks = []
        result = engine.fit(model, optimizer="lbfgs", max_iters=iters,
                            callback=lambda s: marks.append((s.iteration, s.elapsed, s.n_evaluations)))
        (i0, e0, n0), (i1, e1, n1) = marks[min(5, len(marks) - 1)], marks[-1]
        per_it = (e1 - e0) / max(i1 - i0, 1)
        per_eval = (e1 - e0) / max(n1 - n0, 1)
        print(f"  {name:8s} {per_it * 1e3:7.1f} ms per iteration, {per_eval * 1e3:7.1f} ms per evaluation "
              f"(iterations 6-{i1}); bound {result.objective:,.1f} after {result.iterations}; "
              f"{C.machine_load()}", flush=True)


def oil(path, seeds, iters: int) -> None:
    import engine
    from engine import metrics

    Y, labels = C.load_oil(path)[:2]
    C.header(f"Oil flow, Bayesian GP-LVM Q=10, M=50, PCA start, {iters} iterations")
    for seed in seeds:
        for name in IMPLEMENTATIONS:
            use(name)
            model = engine.BayesianGPLVM(Y, 10, num_inducing=50, init="pca", seed=seed)
            model.objective_and_gradient(model.get_free())
            t0 = time.perf_counter()
            result = engine.fit(model, optimizer="lbfgs", max_iters=iters)
            wall = time.perf_counter() - t0
            top = metrics.most_relevant_dims(model.relevance, k=2)
            errors = metrics.one_nn_errors(model.X_mean[:, top], labels)
            print(f"  seed {seed} {name:8s} bound {result.objective:10.2f}  errors {errors:3d}  "
                  f"{result.iterations} iterations {wall:6.1f} s ({wall / max(result.iterations, 1) * 1e3:.1f} "
                  f"ms each)  {result.reason}; {C.machine_load()}", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip", default="", help="comma-separated sections to skip: overhead, rows, oil")
    ap.add_argument("--params", type=int, nargs="+", default=[20_000, 100_000, 500_000])
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--iters", type=int, default=60)
    ap.add_argument("--data", default=None, help="oil-flow .npz (the oil section runs only with it)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    ap.add_argument("--oil-iters", type=int, default=2000)
    args = ap.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    print(C.environment_summary())
    if "overhead" not in skip:
        overhead(args.params)
    if "rows" not in skip:
        rows(args.rows, args.iters)
    if "oil" not in skip and args.data:
        oil(args.data, args.seeds, args.oil_iters)
    return 0


if __name__ == "__main__":
    sys.exit(main())
