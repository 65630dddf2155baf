"""Missing outputs: imputation quality on oil flow and the cost of the missing-data bound.

For 10%, 30% and 50% of the entries of oil flow removed at random (fixed
seeds): imputation RMSE (standardised units) of the Bayesian GP-LVM
(Q=10, M=50, PCA start on the mean-imputed data) against column-mean
imputation and k-nearest-neighbour imputation (k=5, distances on the
columns both rows observe).  The GP-LVM column is ``model.impute()`` (the
mixture over the other rows' q(x_m)); "own q(x)" is
``impute(method="latent")``, the prediction at each row's own q(x_n).
``--more-seeds`` adds two more draws at 10%.  Then the time of one bound + gradient with 20%
missing (N=1000, D=12, Q=10, M=50) against the complete-data bound, wall and
CPU time (``--timing-only``: this part alone).

    python benchmarks/bench_missing.py --data PATH/oil_flow.npz
    python benchmarks/bench_missing.py --data PATH/oil_flow.npz --timing-only
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import _common as C
import engine


def knn_impute(Y_nan: np.ndarray, k: int = 5) -> np.ndarray:
    """Each missing entry: the mean of that column over the k nearest rows that observe it
    (distance: RMS difference on the columns both rows observe)."""
    obs = ~np.isnan(Y_nan)
    Y0 = np.where(obs, Y_nan, 0.0)
    filled = Y_nan.copy()
    for n in np.flatnonzero(~obs.all(axis=1)):
        both = obs & obs[n]
        count = both.sum(axis=1)
        diff = np.where(both, Y0 - Y0[n], 0.0)
        dist = np.sqrt(np.sum(diff**2, axis=1) / np.maximum(count, 1))
        dist[count == 0] = np.inf
        dist[n] = np.inf
        for d in np.flatnonzero(~obs[n]):
            donors = np.flatnonzero(obs[:, d] & np.isfinite(dist))
            nearest = donors[np.argsort(dist[donors], kind="stable")[:k]]
            filled[n, d] = Y0[nearest, d].mean()
    return filled


def remove(Y: np.ndarray, rate: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    holes = rng.random(Y.shape) < rate
    holes[np.arange(Y.shape[0]), rng.integers(0, Y.shape[1], Y.shape[0])] = False  # no empty row
    out = Y.copy()
    out[holes] = np.nan
    return out


def rmse(estimate, truth, mask):
    return float(np.sqrt(np.mean((estimate[mask] - truth[mask]) ** 2)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=C.DEFAULT_OIL, help="oil-flow .npz with arrays Y and labels")
    ap.add_argument("--max-iters", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--timing-only", action="store_true", help="skip the imputation part, time the bound only")
    ap.add_argument("--more-seeds", action="store_true", help="also 10%% missing with seeds 11 and 12")
    args = ap.parse_args(argv)
    loaded = C.load_oil(args.data)
    if loaded is None:
        raise SystemExit(f"oil-flow data not found at {args.data!r}; pass --data PATH")
    Y, _ = loaded
    Y = (Y - Y.mean(0)) / Y.std(0)

    if not args.timing_only:
        imputation(Y, args.max_iters, args.more_seeds)
    timing(Y, args.repeats)


def imputation(Y, max_iters, more_seeds=False):
    print(f"oil flow {Y.shape}, Bayesian GP-LVM Q=10 M=50, {max_iters} L-BFGS iterations")
    print(f"{'missing':>8} {'seed':>5} {'GP-LVM':>8} {'own q(x)':>9} {'col mean':>9} {'5-NN':>8} "
          f"{'fit s':>7} {'impute s':>9}")
    draws = ((0.1, 10), (0.3, 30), (0.5, 50)) + (((0.1, 11), (0.1, 12)) if more_seeds else ())
    for rate, seed in draws:
        Y_nan = remove(Y, rate, seed)
        missing = np.isnan(Y_nan)
        t0 = time.perf_counter()
        model = engine.BayesianGPLVM(Y_nan, 10, num_inducing=50)
        engine.fit(model, max_iters=max_iters)
        elapsed = time.perf_counter() - t0
        t0 = time.perf_counter()
        filled, _ = model.impute()
        impute_s = time.perf_counter() - t0
        own, _ = model.impute(method="latent")
        mean_fill = np.where(missing, np.nanmean(Y_nan, axis=0), Y_nan)
        print(f"{rate:>8.0%} {seed:>5} {rmse(filled, Y, missing):>8.3f} {rmse(own, Y, missing):>9.3f} "
              f"{rmse(mean_fill, Y, missing):>9.3f} {rmse(knn_impute(Y_nan), Y, missing):>8.3f} "
              f"{elapsed:>7.1f} {impute_s:>9.2f}", flush=True)


def timing(Y, repeats):
    """One bound + gradient with 20% missing against the complete-data bound (interleaved, same run);
    also the per-group passes (each group's psi statistics from its own pass over its missing
    rows: the generic path, used before the one-pass weighted sums)."""
    Y_nan = remove(Y, 0.2, 20)
    complete = engine.BayesianGPLVM(Y, 10, num_inducing=50)
    holes = engine.BayesianGPLVM(Y_nan, 10, num_inducing=50, X=complete.X_mean, Z=complete.Z)
    holes.set_parameters(**complete.parameters)
    per_group = engine.BayesianGPLVM(Y_nan, 10, num_inducing=50, X=complete.X_mean, Z=complete.Z)
    per_group.set_parameters(**complete.parameters)
    per_group._grouped_psi = lambda kern: False  # force the generic path
    names = ("complete", "20% missing", "20% missing, per-group passes")
    times = C.time_interleaved({
        names[0]: (complete.objective_and_gradient, C.perturbed(complete.get_free(), count=repeats + 1)),
        names[1]: (holes.objective_and_gradient, C.perturbed(holes.get_free(), count=repeats + 1)),
        names[2]: (per_group.objective_and_gradient, C.perturbed(per_group.get_free(), count=repeats + 1)),
    }, repeats=repeats)
    wall = {k: float(np.median(times[k].times)) for k in names}
    cpu = {k: float(np.median(times[k].cpu)) for k in names}
    print(f"bound + gradient, N=1000 D=12 Q=10 M=50, 20% missing ({len(holes.observation_groups)} column groups), "
          f"median of {repeats} interleaved calls (CPU: process time, all threads):")
    print(f"{'':>32} {'wall ms':>8} {'ratio':>6} {'CPU ms':>8} {'ratio':>6}")
    for k in names:
        print(f"{k:>32} {1e3 * wall[k]:>8.1f} {wall[k] / wall[names[0]]:>6.2f} "
              f"{1e3 * cpu[k]:>8.1f} {cpu[k] / cpu[names[0]]:>6.2f}")
    print("target: 20% missing <= 3x complete")

if __name__ == "__main__":
    main()
