"""Fits where Kmm is (near-)singular, against GPy on the same data.

(a) Bayesian GP-LVM, linear ARD kernel, Q=3, M=20 (M > Q: Kmm has rank 3):
    the bound reached by our fit and by GPy's, and the gradient check.
(b) Oil flow, standardised, Q=2, M=30, from every initialisation the app
    offers (PCA, random, Isomap): leave-one-out 1-NN errors and the bound,
    ours and GPy's (PCA start).

    python benchmarks/bench_ill_conditioned.py --data PATH/oil_flow.npz [--no-gpy]
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import _common as C
import engine
from engine import kernels
from engine.metrics import one_nn_errors


def linear_data(N=300, D=8, Q=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(N, Q)) @ rng.normal(size=(Q, D)) + 0.1 * rng.normal(size=(N, D))


def gpy_fit(GPy, Y, Q, M, kernel, X, Z, max_iters):
    m = GPy.models.BayesianGPLVM(Y, Q, X=X.copy(), X_variance=np.full(X.shape, 0.5), Z=Z.copy(),
                                 kernel=kernel, num_inducing=M)
    t0 = time.perf_counter()
    m.optimize("lbfgsb", max_iters=max_iters, messages=False)
    return m, time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=C.DEFAULT_OIL, help="oil-flow .npz with arrays Y and labels")
    ap.add_argument("--max-iters", type=int, default=1000)
    ap.add_argument("--no-gpy", action="store_true")
    args = ap.parse_args(argv)
    GPy = None if args.no_gpy else C.import_gpy()
    warnings.filterwarnings("ignore")

    print("(a) linear ARD, Q=3, M=20, N=300, D=8")
    Y = linear_data()
    ours = engine.BayesianGPLVM(Y, 3, num_inducing=20, kernel=kernels.Linear(3, ard=True))
    X0, Z0 = ours.X_mean.copy(), ours.Z.copy()
    print(f"  checkgrad at the start: {ours.checkgrad():.2e}")
    t0 = time.perf_counter()
    engine.fit(ours, max_iters=args.max_iters)
    print(f"  ours: bound {ours.objective():.2f} in {time.perf_counter() - t0:.1f} s (jitter {ours.jitter:.2g})")
    if GPy is not None:
        m, t = gpy_fit(GPy, ours.Y, 3, 20, GPy.kern.Linear(3, ARD=True), X0, Z0, args.max_iters)
        ll = float(np.ravel(m.log_likelihood())[0])
        print(f"  GPy:  bound {ll:.2f} in {t:.1f} s; ours - GPy = {ours.objective() - ll:.2f} "
              f"({100 * (ours.objective() - ll) / abs(ll):+.2f}%)")

    loaded = C.load_oil(args.data)
    if loaded is None:
        print("oil-flow data not found: skipped (b); pass --data PATH")
        return
    Y, labels = loaded
    Y = (Y - Y.mean(0)) / Y.std(0)
    print("(b) oil flow, Q=2, M=30, standardised")
    for init in ("pca", "random", "isomap"):
        t0 = time.perf_counter()
        model = engine.BayesianGPLVM(Y, 2, num_inducing=30, init=init)
        result = engine.fit(model, max_iters=args.max_iters)
        print(f"  ours, {init:>6} start: {one_nn_errors(model.X_mean, labels):3d} errors, bound "
              f"{model.objective():.1f}, {result.iterations} iterations, {time.perf_counter() - t0:.1f} s",
              flush=True)
    if GPy is not None:
        start = engine.BayesianGPLVM(Y, 2, num_inducing=30)
        kern = GPy.kern.RBF(2, ARD=True, lengthscale=start.lengthscales)
        m, t = gpy_fit(GPy, start.Y, 2, 30, kern, start.X_mean, start.Z, args.max_iters)
        print(f"  GPy,     pca start: {one_nn_errors(np.asarray(m.X.mean), labels):3d} errors, bound "
              f"{float(np.ravel(m.log_likelihood())[0]):.1f}, {t:.1f} s")


if __name__ == "__main__":
    main()
