"""Latent geometry: the map's magnification grid against today's variance grid, geodesic times,
and the geodesic of a circle against its arc length.

1. Grid.  The latent map's shading of one (snapshot, slice): a 128 x 128 grid of the
   two most relevant dims with the other dims at 0, computed as the page computes it
   (``gplvm_explorer.state.latent``'s grid function on a TrainedResult): the
   predictive variance from the result's cached prediction factors, against the
   magnification sqrt(det G) of the expected metric in the shown dims.  Models at
   1,000 rows (GP-LVM, sparse and Bayesian GP-LVM) and 20,000 rows (Bayesian and
   stochastic GP-LVM), briefly fitted on synthetic 12-D data (or the first rows of
   oil flow with --data, resampled with a little noise up to 20,000).  Each grid is
   timed with its factors already formed (a second slice of the same snapshot), and
   the factors' one-off cost per snapshot is printed beside it.  Target: the
   magnification grid no slower than 2x the variance grid.
2. Geodesic.  ``model.geodesic(a, b, dims=(i, j))`` between two training points in the
   shown plane (the page's case, plus its 64 predictions along the path) and in all
   dims.  Target: <= 1 s in the page at 20,000 rows.
3. Circle.  120 latent points on the unit circle mapped to 16 dims by six harmonics
   (|dY/dt| known): the geodesic's length between points of the circle against the
   data's arc length, and the straight segment's, for the kernel parameters of the
   test suite (RBF variance 4, lengthscale 0.5) and after fitting them (a fit on these
   noise-free data picks a longer lengthscale, whose map is a little compressive just
   inside the circle, so its geodesics cut slightly inside and come out shorter).

The two timings of each comparison run round-robin, so they share the machine's load;
the load average is printed.  Run with ``env -u OPENBLAS_CORETYPE`` (users do not set it).

    python benchmarks/bench_geometry.py [--repeats 5] [--quick] [--data PATH]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import environment_summary, fmt_s, time_interleaved  # noqa: E402

import engine  # noqa: E402
from engine import kernels as K  # noqa: E402

R = 128  # grid cells per side, as the page's default


def synthetic(N, D=12, seed=0):
    rng = np.random.default_rng(seed)
    T = rng.uniform(-1.5, 1.5, size=(N, 3))
    W = rng.normal(size=(3, D))
    return np.sin(T @ W + rng.uniform(0, 6, D)) + 0.05 * rng.normal(size=(N, D))


def oil_rows(path, N, seed=0):
    with np.load(path, allow_pickle=False) as f:
        Y = np.asarray(f["Y"] if "Y" in f.files else f[f.files[0]], dtype=float)
    rng = np.random.default_rng(seed)
    if N <= Y.shape[0]:
        return Y[:N]
    extra = Y[rng.integers(0, Y.shape[0], N - Y.shape[0])]
    return np.vstack([Y, extra + 0.02 * Y.std(axis=0) * rng.standard_normal(extra.shape)])


def result_of(model):
    """A TrainedResult of the model as the page gets one (the app's own constructor)."""
    from gplvm_explorer.catalog import ModelConfig
    from gplvm_explorer.training import TrainedResult

    state = model.snapshot_state()
    return TrainedResult(run_id=1, iteration=1, objective=0.0, objective_name=model.objective_name, model=model,
                         X_mean=np.asarray(state["X_mean"]), X_variance=state.get("X_variance"),
                         relevance=np.asarray(state["relevance"]), parameters={},
                         config=ModelConfig(model="bayesian", latent_dim=model.latent_dim), final=True)


def build(kind, Y, Q, M, iters):
    if kind == "GP-LVM":
        m = engine.GPLVM(Y, Q)
    elif kind == "sparse":
        m = engine.SparseGPLVM(Y, Q, num_inducing=M)
    elif kind == "Bayesian":
        m = engine.BayesianGPLVM(Y, Q, num_inducing=M)
    else:
        m = engine.StochasticBayesianGPLVM(Y, Q, num_inducing=M, batch_size=256)
    t0 = time.perf_counter()
    m.fit(max_iters=iters)
    return m, time.perf_counter() - t0


def grid_section(args, configs):
    from gplvm_explorer.state.latent import _shading_grid, most_relevant, padded_extent

    print(f"\n1. The map's grid, {R} x {R} points of the two most relevant dims (others at 0); "
          f"best of {args.repeats}, load before: {os.getloadavg()[0]:.2f}")
    print(f"{'model':>22s} {'N':>6s} {'Q':>3s} {'M':>4s} | {'variance':>9s} {'magnif.':>9s} {'ratio':>6s} | "
          f"{'factors: variance':>17s} {'+ metric':>9s}")
    out = {}
    for kind, N, Q, M in configs:
        Y = oil_rows(args.data, N) if args.data else synthetic(N)
        model, fit_s = build(kind, Y, Q, M, 3 if kind == "GP-LVM" and N > 2000 else args.iters)
        result = result_of(model)
        dims = tuple(most_relevant(result.relevance, 2))
        extent = padded_extent(result.X_mean[:, list(dims)])
        fixed = np.zeros(Q)
        # the factors, once per snapshot, on a fresh copy of the model (empty caches): what the variance
        # needs (the prediction factors; the exact GP-LVM's own factorisation), then what the metric adds
        for _ in range(2):  # the second time: compiled helpers already loaded (the app warms them up)
            fresh = result_of(model.copy())
            t0 = time.perf_counter()
            if fresh.predictor is None:
                fresh.model.posterior()
            t_pred = time.perf_counter() - t0
            t0 = time.perf_counter()
            fresh.model.geometry()
            t_metric = time.perf_counter() - t0
        result.predictor  # noqa: B018  (formed before the timing)
        model.geometry()
        timings = time_interleaved({
            "variance": (lambda: _shading_grid(result, "variance", dims, fixed, extent, R), None),
            "magnification": (lambda: _shading_grid(result, "magnification", dims, fixed, extent, R), None),
        }, repeats=args.repeats, warmup=1)
        tv, tm = timings["variance"].min, timings["magnification"].min
        out[(kind, N)] = (tv, tm)
        print(f"{kind:>22s} {N:>6d} {Q:>3d} {('-' if kind == 'GP-LVM' else M):>4} | {fmt_s(tv):>9s} {fmt_s(tm):>9s} "
              f"{tm / tv:>6.2f} | {fmt_s(t_pred):>17s} {fmt_s(t_metric):>9s}   (fit {fit_s:.1f} s)")
        if kind in ("Bayesian", "stochastic") and N >= 10000:
            out[("model", kind, N)] = model
    print(f"load after: {os.getloadavg()[0]:.2f}")
    return out


def geodesic_section(args, models):
    print(f"\n2. Geodesics between two training points (64 points); best of {args.repeats}, "
          f"load before: {os.getloadavg()[0]:.2f}")
    for (_, kind, N), model in sorted(((k, v) for k, v in models.items() if k[0] == "model"), key=lambda kv: kv[0][1]):
        result = result_of(model)
        from gplvm_explorer.state.latent import most_relevant

        dims = tuple(most_relevant(result.relevance, 2))
        X = result.X_mean
        a, b = X[np.argmin(X[:, dims[0]])].copy(), X[np.argmax(X[:, dims[0]])].copy()
        a_plane, b_plane = np.zeros_like(a), np.zeros_like(b)
        a_plane[list(dims)], b_plane[list(dims)] = a[list(dims)], b[list(dims)]

        def page():
            g = model.geodesic(a_plane, b_plane, num_points=64, dims=dims)
            result.predict(g.path)
            return g

        timings = time_interleaved({
            "page (dims=(i, j), + predictions)": (page, None),
            "all dims": (lambda: model.geodesic(a, b, num_points=64), None),
        }, repeats=args.repeats, warmup=1)
        g, g_all = page(), model.geodesic(a, b, num_points=64)
        for name, t in timings.items():
            print(f"  {kind} N={N}: {name:34s} {fmt_s(t.min):>9s} (median {fmt_s(t.median)})")
        print(f"    lengths: plane {g.length:.4g} vs straight {g.straight_length:.4g}; all dims {g_all.length:.4g} "
              f"vs straight {g_all.straight_length:.4g}")
    print(f"load after: {os.getloadavg()[0]:.2f}")


def circle_model(N=120, D=16, H=6):
    t = np.linspace(0.0, 2 * np.pi, N, endpoint=False)
    amps = np.ones(H) / np.sqrt(H)
    F = np.hstack([np.c_[a * np.cos((k + 1) * t), a * np.sin((k + 1) * t)] for k, a in enumerate(amps)])
    Rot = np.linalg.qr(np.random.default_rng(0).standard_normal((D, D)))[0][:, :2 * H]
    speed = float(np.sqrt(np.sum((amps * np.arange(1, H + 1)) ** 2)))
    m = engine.GPLVM(F @ Rot.T, 2, X=np.c_[np.cos(t), np.sin(t)], kernel=K.RBF(2, 4.0, 0.5), noise_variance=1e-6)
    return m, speed


def circle_section():
    print("\n3. A circle of 120 latent points mapped to 16 dims by 6 harmonics: geodesic vs the data's arc")
    pairs = [(0.0, 2 * np.pi / 3), (0.3, 0.3 + np.pi), (0.1, 1.0), (1.0, 1.0 + 0.5 * np.pi)]
    for label in ("set (test suite's RBF variance 4, lengthscale 0.5)", "fitted (X held at the circle)"):
        m, speed = circle_model()
        if label.startswith("fitted"):
            m.fix("X_mean")
            m.fit(max_iters=200)
        p = m.parameters
        print(f"  kernel {label}: variance {float(p['variance']):.3g}, lengthscale "
              f"{float(np.mean(p['lengthscales'])):.3g}, noise {float(p['noise_variance']):.2g}")
        for ta, tb in pairs:
            a, b = np.array([np.cos(ta), np.sin(ta)]), np.array([np.cos(tb), np.sin(tb)])
            t0 = time.perf_counter()
            g = m.geodesic(a, b, num_points=64)
            dt = time.perf_counter() - t0
            arc = speed * abs(tb - ta)
            r = np.linalg.norm(g.path, axis=1)
            print(f"    {abs(tb - ta):5.3f} rad: arc {arc:7.4f}  geodesic {g.length:7.4f} ({g.length / arc:6.4f} x arc)"
                  f"  straight {g.straight_length:7.4f} ({g.straight_length / arc:5.2f} x)  path radius "
                  f"{r.min():.3f}-{r.max():.3f}  {dt * 1e3:.0f} ms")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20, help="fit iterations before timing (default 20)")
    ap.add_argument("--quick", action="store_true", help="1,000 rows only")
    ap.add_argument("--data", help="oil-flow .npz (first rows, resampled with noise beyond them)")
    args = ap.parse_args(argv)
    print(environment_summary())
    configs = [("GP-LVM", 1000, 5, 0), ("sparse", 1000, 5, 30), ("Bayesian", 1000, 5, 30)]
    if not args.quick:
        configs += [("Bayesian", 20000, 5, 30), ("stochastic", 20000, 5, 50)]
    else:
        configs += [("Bayesian", 2000, 5, 30)]
    models = grid_section(args, configs)
    if args.quick:
        Y = synthetic(2000)
        models[("model", "Bayesian", 2000)] = build("Bayesian", Y, 5, 30, args.iters)[0]
    geodesic_section(args, models)
    circle_section()


if __name__ == "__main__":
    main()
