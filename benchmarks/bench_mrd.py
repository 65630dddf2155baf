"""MRD on generated two-view data: the shared / private pattern found, and cross-view prediction.

Data (Damianou et al. 2012's set-up in miniature): N rows driven by a shared
factor s and one private factor per view, all uniform on [-1, 1].

- view A, an "image": a Gaussian blob on a 10 x 10 grid, its horizontal
  position set by s and its vertical position by the private factor pA;
- view B, a "sensor": a random linear map of (s, s^2, pB, pB^2), pB private.

Both views add Gaussian noise of sd 0.05.

``MRD([A, B], Q=6)`` is fitted to the training rows.  Printed: each view's
relevances (1 / lengthscale^2, scaled to the view's largest), the dimensions
relevant (above 5% of the largest) in both views (shared; expected 1) and in
one view only (private; expected 1 each), and the correlations of those
dimensions with s, pA and pB.  Then cross-view prediction on held-out rows:
q(x*) from one view alone (``infer_latent(Y_A, view=0)``), the other view
predicted from it (``predict(mean, variance, view=1)``), RMSE against the held-out
rows, compared with the training mean, 5-nearest-neighbour regression
(neighbours found in the observed view, their other view averaged) and the
floor E[target view | true s] (the private factor of the target view cannot
be predicted from the other view).  No asserts.

    python benchmarks/bench_mrd.py [--seed 0] [--iters 600] [--quick]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import engine


def two_view_data(N, seed=0, noise=0.05):
    """(A (N, 100), B (N, 8), factors (N, 3) = (s, pA, pB), conditional means given s)."""
    rng = np.random.default_rng(seed)
    s, pA, pB = (rng.uniform(-1, 1, N) for _ in range(3))
    g = np.linspace(-1, 1, 10)
    gx, gy = np.meshgrid(g, g)

    def image(s, pA):
        cx, cy = 0.6 * s, 0.6 * pA
        return np.exp(-((gx.ravel()[None] - cx[:, None]) ** 2 + (gy.ravel()[None] - cy[:, None]) ** 2) / (2 * 0.3**2))

    W = rng.normal(size=(4, 8))
    A = image(s, pA) + noise * rng.normal(size=(N, 100))
    B = np.c_[s, s**2 - 1 / 3, pB, pB**2 - 1 / 3] @ W + noise * rng.normal(size=(N, 8))
    grid = np.linspace(-1, 1, 201)

    def given_s(view, s):
        """E[view | s]: the best any predictor can do from the shared factor alone."""
        if view == 1:
            return np.c_[s, s**2 - 1 / 3, 0 * s, 0 * s] @ W
        return np.array([image(np.full(grid.size, si), grid).mean(axis=0) for si in s])

    return A, B, np.c_[s, pA, pB], given_s


def rmse(a, b):
    return float(np.sqrt(np.mean((np.asarray(a) - np.asarray(b)) ** 2)))


def knn_predict(X_train, Y_train, X_query, k=5):
    d2 = np.sum(X_query**2, 1)[:, None] - 2 * X_query @ X_train.T + np.sum(X_train**2, 1)[None]
    idx = np.argsort(d2, axis=1)[:, :k]
    return Y_train[idx].mean(axis=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--iters", type=int, default=600)
    ap.add_argument("--latent-dim", type=int, default=5)
    ap.add_argument("--num-inducing", type=int, default=25)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    N_train, N_test = (100, 40) if args.quick else (200, 60)
    iters = 200 if args.quick else args.iters
    A, B, factors, given_s = two_view_data(N_train + N_test, seed=args.seed)
    At, Bt, Ft = A[:N_train], B[:N_train], factors[:N_train]
    Ah, Bh = A[N_train:], B[N_train:]
    print(f"views: A {A.shape[1]} pixels (blob: x from shared s, y private), B {B.shape[1]} sensors "
          f"(s, s^2, private pB, pB^2); {N_train} training rows, {N_test} held out")
    print(f"MRD: Q={args.latent_dim}, M={args.num_inducing} per view, L-BFGS max {iters} iterations, seed {args.seed}")

    t0 = time.perf_counter()
    model = engine.MRD([At, Bt], args.latent_dim, num_inducing=args.num_inducing, seed=args.seed)
    res = engine.fit(model, max_iters=iters)
    elapsed = time.perf_counter() - t0
    print(f"fit: ELBO {res.objective:.1f} after {res.iterations} iterations, {elapsed:.1f} s")

    R = model.relevance
    Rn = R / R.max(axis=1, keepdims=True)
    on = Rn > 0.05
    shared = np.flatnonzero(on[0] & on[1])
    privA = np.flatnonzero(on[0] & ~on[1])
    privB = np.flatnonzero(on[1] & ~on[0])
    print("\nrelevance / largest, per view (columns: latent dimensions):")
    for name, row in zip("AB", Rn):
        print(f"  view {name}: " + "  ".join(f"{x:6.3f}" for x in row))
    print(f"shared dims {shared.tolist()} (expected 1), private to A {privA.tolist()} (expected 1), "
          f"private to B {privB.tolist()} (expected 1)")
    X = model.X_mean
    found = (("shared factor s", shared, 0), ("A's private pA", privA, 1), ("B's private pB", privB, 2))
    for label, dims, col in found:
        if dims.size:
            c = max(abs(np.corrcoef(X[:, d], Ft[:, col])[0, 1]) for d in dims)
            print(f"|corr| of {label} with its dimension(s): {c:.3f}")

    print("\ncross-view prediction on held-out rows (RMSE against the held-out view; 'floor': E[view | true s],"
          " what the shared factor alone can tell):")
    for src, dst, Ysrc, Ydst, Ytrain_src, Ytrain_dst in ((0, 1, Ah, Bh, At, Bt), (1, 0, Bh, Ah, Bt, At)):
        t0 = time.perf_counter()
        inf = model.infer_latent(Ysrc, view=src)
        pred, _ = model.predict(inf.mean, inf.variance, view=dst)
        t_inf = time.perf_counter() - t0
        mean_pred = np.repeat(Ytrain_dst.mean(0, keepdims=True), len(Ydst), axis=0)
        knn = knn_predict(Ytrain_src, Ytrain_dst, Ysrc, k=5)
        floor = given_s(dst, factors[N_train:, 0])
        print(f"  {'AB'[src]} -> {'AB'[dst]}: MRD {rmse(pred, Ydst):.4f} ({t_inf:.1f} s)   "
              f"training mean {rmse(mean_pred, Ydst):.4f}   5-NN {rmse(knn, Ydst):.4f}   floor {rmse(floor, Ydst):.4f}")


if __name__ == "__main__":
    main()
