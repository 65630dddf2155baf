"""Variational GPDS (DynamicalBGPLVM) filling a held-out gap of a generated periodic series.

Data: a multi-dimensional periodic "motion", D outputs driven by one phase,
y_d(t) = a_d sin(phi) + b_d sin(2 phi + c_d) + noise, phi = 2 pi t / period,
N frames at slightly irregular times over about four periods.  A contiguous
stretch of about half a period is held out (the gap), and so are the frames
after the last training time (extrapolation).

Compared on the gap (RMSE against the noise-free signal, in the data's units):

- GPDS: ``DynamicalBGPLVM(Y, t, Q, num_inducing=M)`` fitted with L-BFGS,
  then ``predict_at_times`` inside the gap;
- linear interpolation in time between the frames that border the gap;
- the static Bayesian GP-LVM (no dynamics) fitted to the same frames: a gap
  frame gets the reconstruction at the latent point of the observed frame
  nearest in time (it has no other way to place an unseen time).

Also printed: the predictive standard deviation inside the gap against at
observed times (it must grow in the gap), the latent variance at the gap's
middle against at the data, and the extrapolation RMSE against holding the
last frame.  No asserts.

    python benchmarks/bench_gpds.py [--seed 0] [--iters 400] [--quick]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import engine


def periodic_series(N=160, D=12, period=2.5, noise=0.05, seed=0):
    rng = np.random.default_rng(seed)
    t = np.sort(np.linspace(0.0, 4 * period, N) + rng.uniform(-0.01, 0.01, N))
    a, b = rng.normal(size=D), 0.6 * rng.normal(size=D)
    c = rng.uniform(0, 2 * np.pi, D)

    def signal(tt):
        phi = 2 * np.pi * np.asarray(tt)[:, None] / period
        return a * np.sin(phi) + b * np.sin(2 * phi + c)

    return t, signal(t) + noise * rng.normal(size=(N, D)), signal


def rmse(a, b):
    return float(np.sqrt(np.mean((np.asarray(a) - np.asarray(b)) ** 2)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--iters", type=int, default=400)
    ap.add_argument("--latent-dim", type=int, default=3)
    ap.add_argument("--num-inducing", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="fewer frames and iterations")
    args = ap.parse_args()
    N = 100 if args.quick else 160
    iters = 150 if args.quick else args.iters
    period = 2.5
    t, Y, signal = periodic_series(N=N, period=period, seed=args.seed)
    gap = (4.4, 5.6)  # about half a period, inside the series
    end = 3.5 * period  # frames after this are for extrapolation
    in_gap = (t > gap[0]) & (t < gap[1])
    train = ~in_gap & (t <= end)
    ahead = t > end
    tt, Yt = t[train], Y[train]
    print(f"series: N={N} frames, D={Y.shape[1]}, period {period}, noise sd 0.05; gap {gap} "
          f"({in_gap.sum()} frames held out), extrapolation beyond t={end} ({ahead.sum()} frames)")
    print(f"model: Q={args.latent_dim}, M={args.num_inducing}, L-BFGS max {iters} iterations, seed {args.seed}")

    t0 = time.perf_counter()
    gpds = engine.DynamicalBGPLVM(Yt, tt, args.latent_dim, num_inducing=args.num_inducing, seed=args.seed)
    res = engine.fit(gpds, max_iters=iters)
    t_gpds = time.perf_counter() - t0
    truth_gap = signal(t[in_gap])
    m_gap, v_gap = gpds.predict_at_times(t[in_gap], include_noise=False)
    _, v_obs = gpds.predict_at_times(tt, include_noise=False)
    lat_mid = gpds.latent_at_times(np.array([0.5 * (gap[0] + gap[1])]))[1][0]
    lat_obs = gpds.X_variance.mean(axis=0)
    m_ahead, v_ahead = gpds.predict_at_times(t[ahead])

    # linear interpolation between the frames bordering the gap
    lin = np.column_stack([np.interp(t[in_gap], tt, Yt[:, d]) for d in range(Y.shape[1])])

    t0 = time.perf_counter()
    static = engine.BayesianGPLVM(Yt, args.latent_dim, num_inducing=args.num_inducing, seed=args.seed)
    res_s = engine.fit(static, max_iters=iters)
    t_static = time.perf_counter() - t0
    nearest = np.abs(t[in_gap][:, None] - tt[None, :]).argmin(axis=1)
    m_static, _ = static.predict(static.X_mean[nearest])
    hold = np.repeat(Yt[-1:], ahead.sum(), axis=0)

    print(f"\nGPDS fit: ELBO {res.objective:.1f} after {res.iterations} iterations, {t_gpds:.1f} s; "
          f"time kernel {gpds.time_kernel!r}")
    print(f"static Bayesian GP-LVM fit: ELBO {res_s.objective:.1f} after {res_s.iterations} iterations, "
          f"{t_static:.1f} s")
    print("\nRMSE on the gap (against the noise-free signal):")
    print(f"  GPDS predict_at_times                 {rmse(m_gap, truth_gap):.4f}")
    print(f"  linear interpolation                  {rmse(lin, truth_gap):.4f}")
    print(f"  static Bayesian GP-LVM, nearest frame {rmse(m_static, truth_gap):.4f}")
    print(f"  (signal sd {float(truth_gap.std()):.3f})")
    print("\nuncertainty:")
    print(f"  predictive sd, mean over outputs: observed times {np.sqrt(v_obs).mean():.4f}, "
          f"gap {np.sqrt(v_gap).mean():.4f}, gap middle {np.sqrt(v_gap[len(v_gap) // 2]).mean():.4f}")
    print(f"  latent variance at the gap's middle {np.round(lat_mid, 4).tolist()} "
          f"vs mean at the data {np.round(lat_obs, 4).tolist()}")
    print("\nextrapolation beyond the last training frame:")
    print(f"  GPDS RMSE {rmse(m_ahead, signal(t[ahead])):.4f}, hold last frame {rmse(hold, signal(t[ahead])):.4f}; "
          f"predictive sd first {np.sqrt(v_ahead[0]).mean():.4f} -> last {np.sqrt(v_ahead[-1]).mean():.4f}")


if __name__ == "__main__":
    main()
