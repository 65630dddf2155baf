"""Deep GPs (Damianou & Lawrence 2013): oil flow, and a generated hierarchical data set.

(a) Oil flow: ``engine.DeepGP(Y, [5, 2])`` on the 1000 x 12 training set
    (layer-by-layer PCA initialisation), fitted with L-BFGS; prints the bound,
    each layer's ARD relevances and noise, the leave-one-out 1-NN errors of
    the top layer's 2 dims (``engine.metrics.one_nn_errors``) and of the
    5-dim layer below, and the wall time of the fit (a warm-up evaluation
    compiles or loads the numba code before the clock starts).  References:
    PCA to 2 dims, 162 errors (computed here); one-layer Bayesian GP-LVM with
    Q = 10, M = 50: 2 errors in its two most relevant dims
    (``bench_oil.py``).  Needs the data file (``--data``); skipped without it.

(b) Generated hierarchical data, the deep model's own kind of process: a
    smooth 1-d latent t ~ N(0, 1); a hidden 2-d layer h = (cos theta, sin theta)
    + N(0, 0.1^2 I) with theta = pi sigmoid(6 t) (a sharp, step-like warp: most
    points pile up at the two ends of a half circle, which has some
    thickness); and D = 10 outputs y = sin(1.5 W^T h + b) + N(0, 0.02^2).
    The 2-layer model [2, 1] is compared with one-layer Bayesian GP-LVMs
    (Q = 1 and 2) on the bound per training point (all are lower bounds on
    log p(Y) / N, so directly comparable) and on held-out reconstruction:
    test rows with their first 5 outputs observed (``--n-observed``) are
    projected (``infer_latent``) and the other outputs predicted; RMSE over
    those entries (the noise floor is the output noise, 0.02).  The deep
    model's rows are projected both layer by layer (the default) and jointly
    through its layers (``joint=True``).  Several data seeds.

    python benchmarks/bench_deep.py [--data PATH] [--part oil|hier|both]
                                    [--max-iters N] [--inducing M0 M1] [--seeds K]
                                    [--n-observed K]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

PCA_ERRORS_PAPER = 162
BAYESIAN_Q10_ERRORS = 2


# ------------------------------------------------------------------------------ (a) oil flow

def oil(args):
    import engine
    from engine import metrics
    from engine.init import initial_latents

    loaded = C.load_oil(args.data)
    if loaded is None:
        print(f"(a) oil flow: {args.data} not found; skipped")
        return
    Y, labels = loaded
    print(f"(a) oil flow {Y.shape[0]}x{Y.shape[1]} from {args.data}")
    pca_errors = metrics.one_nn_errors(initial_latents(Y, 2, method="pca"), labels)
    print(f"PCA to 2 dims: {pca_errors} 1-NN errors (paper: {PCA_ERRORS_PAPER})")
    model = engine.DeepGP(Y, [5, 2], num_inducing=list(args.inducing), X_variance=args.x_variance, seed=args.seed)
    t0 = time.perf_counter()
    model.objective_and_gradient(model.get_free())
    print(f"DeepGP [5, 2], M={list(args.inducing)}: warm-up evaluation {C.fmt_s(time.perf_counter() - t0)}; "
          f"initial bound {model.objective():.2f}")

    def progress(s):
        if args.verbose and s.iteration % args.verbose == 0:
            print(f"  iter {s.iteration:5d}  bound {s.objective:12.2f}  top-layer 1-NN errors "
                  f"{metrics.one_nn_errors(s.X_mean, labels):4d}  {s.elapsed:7.1f} s", flush=True)

    res = model.fit(max_iters=args.max_iters, callback=progress)
    print(f"fit: {res.iterations} iterations, {res.n_evaluations} evaluations, {C.fmt_s(res.elapsed)} "
          f"({res.message.strip()})")
    print(f"bound {res.objective:.2f} ({res.objective / Y.shape[0]:.4f} per point)")
    for l, layer in enumerate(model.layers):
        rel = layer.relevance
        print(f"layer {l} (Q={rel.size}): relevance {np.array2string(rel, precision=4)}, "
              f"noise variance {layer.noise_variance:.4g}, mean latent variance {layer.X_variance.mean():.4g}, "
              f"1-NN errors in all {rel.size} dims: {metrics.one_nn_errors(layer.X_mean, labels)}")
    top = metrics.one_nn_errors(model.X_mean, labels)
    print(f"RESULT oil: top layer (2 dims) 1-NN errors {top} of {Y.shape[0]}; time {C.fmt_s(res.elapsed)}; "
          f"references: PCA {pca_errors}, one-layer Bayesian GP-LVM Q=10: {BAYESIAN_Q10_ERRORS}")


# --------------------------------------------------------------------- (b) hierarchical data

def hierarchical(N, seed, noise=0.02, hidden_noise=0.1, D=10):
    """(Y (N, D), t (N, 1), h (N, 2)): t smooth, h a step-like warp of t plus noise, Y a smooth map of h."""
    maps = np.random.default_rng(1000)  # the same maps for every seed: one generative process
    W = maps.normal(size=(2, D))
    b = maps.uniform(0.0, 2.0 * np.pi, D)
    rng = np.random.default_rng(seed)
    t = rng.standard_normal((N, 1))
    theta = np.pi / (1.0 + np.exp(-6.0 * t))
    h = np.hstack([np.cos(theta), np.sin(theta)]) + hidden_noise * rng.standard_normal((N, 2))
    Y = np.sin(1.5 * h @ W + b) + noise * rng.standard_normal((N, D))
    return Y, t, h


def hier(args):
    import engine

    n_train, n_test, D, n_obs = 200, 60, 10, args.n_observed
    print(f"(b) hierarchical data: t ~ N(0,1) -> h = half circle at angle pi*sigmoid(6t) + N(0, 0.1^2 I) -> "
          f"y = sin(1.5 W^T h + b) + N(0, {args.noise:g}^2), D={D}; {n_train} training rows, {n_test} held-out "
          f"rows with {n_obs} of {D} outputs observed; M=20 in every layer, {args.hier_iters} iterations at most")
    makers = {
        "one layer, Q=1": lambda Y: engine.BayesianGPLVM(Y, 1, num_inducing=20),
        "one layer, Q=2": lambda Y: engine.BayesianGPLVM(Y, 2, num_inducing=20),
        "DeepGP [2, 1]": lambda Y: engine.DeepGP(Y, [2, 1], num_inducing=20),
    }
    table = {name: [] for name in [*makers, "DeepGP [2, 1] joint"]}
    for seed in range(args.seeds):
        Ytr, _, _ = hierarchical(n_train, seed=2 * seed, noise=args.noise, D=D)
        Yte, _, _ = hierarchical(n_test, seed=2 * seed + 1, noise=args.noise, D=D)
        observed = np.zeros(Yte.shape, dtype=bool)
        observed[:, :n_obs] = True
        for name, make in makers.items():
            model = make(Ytr)
            res = model.fit(max_iters=args.hier_iters)
            pred = model.infer_latent(Yte, observed=observed).prediction
            rmse = float(np.sqrt(np.mean((pred[:, n_obs:] - Yte[:, n_obs:]) ** 2)))
            table[name].append((res.objective / n_train, rmse, res.elapsed))
            print(f"  seed {seed}  {name:16s} bound/N {res.objective / n_train:8.4f}  held-out RMSE {rmse:.4f}  "
                  f"{res.iterations:5d} iterations  {C.fmt_s(res.elapsed)}", flush=True)
            if isinstance(model, engine.DeepGP):  # the same model, rows projected jointly through its layers
                t0 = time.perf_counter()
                pred = model.infer_latent(Yte, observed=observed, joint=True).prediction
                rmse = float(np.sqrt(np.mean((pred[:, n_obs:] - Yte[:, n_obs:]) ** 2)))
                table[name + " joint"].append((res.objective / n_train, rmse, res.elapsed))
                print(f"  seed {seed}  {'  joint projection':16s} held-out RMSE {rmse:.4f}  "
                      f"({C.fmt_s(time.perf_counter() - t0)} for {n_test} rows)", flush=True)
    print("RESULT hierarchical (mean over seeds):")
    for name, rows in table.items():
        r = np.array(rows)
        print(f"  {name:16s} bound/N {r[:, 0].mean():8.4f}  held-out RMSE {r[:, 1].mean():.4f}  "
              f"time {C.fmt_s(r[:, 2].mean())}")
    deep = np.array(table["DeepGP [2, 1]"])
    joint = np.array(table["DeepGP [2, 1] joint"])
    for name in ("one layer, Q=1", "one layer, Q=2"):
        one = np.array(table[name])
        print(f"  DeepGP [2, 1] vs {name}: bound/N higher in {int(np.sum(deep[:, 0] > one[:, 0]))} of "
              f"{args.seeds} seeds, held-out RMSE lower in {int(np.sum(deep[:, 1] < one[:, 1]))} "
              f"(joint projection: {int(np.sum(joint[:, 1] < one[:, 1]))}) of {args.seeds}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=C.DEFAULT_OIL, help="oil-flow .npz (arrays Y, labels)")
    parser.add_argument("--part", choices=("oil", "hier", "both"), default="both")
    parser.add_argument("--max-iters", type=int, default=3000, help="oil fit: L-BFGS iterations at most")
    parser.add_argument("--inducing", type=int, nargs=2, default=(50, 30), metavar=("M0", "M1"),
                        help="oil: inducing points of the 5-dim and the 2-dim layer")
    parser.add_argument("--x-variance", type=float, default=0.1, help="oil: initial latent variances")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", type=int, default=200, help="oil: print progress every N iterations (0: off)")
    parser.add_argument("--seeds", type=int, default=5, help="hierarchical data: number of data seeds")
    parser.add_argument("--noise", type=float, default=0.02, help="hierarchical data: noise std")
    parser.add_argument("--hier-iters", type=int, default=3000)
    parser.add_argument("--n-observed", type=int, default=5,
                        help="hierarchical data: outputs observed in each held-out row (of 10)")
    args = parser.parse_args(argv)
    C.header("Deep GP benchmarks (Damianou & Lawrence 2013)")
    if args.part in ("oil", "both"):
        oil(args)
    if args.part in ("hier", "both"):
        hier(args)


if __name__ == "__main__":
    main()
