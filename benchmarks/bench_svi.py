"""StochasticBayesianGPLVM (SVI) benchmarks: oil flow from a memmap, time per iteration vs N, bound vs collapsed.

1. Oil flow (Q=10, M=50, batch 256), the data read through a memmap written
   to a temporary directory: leave-one-out 1-NN errors in the two most
   relevant latent dimensions (target <= 5) and wall time of the whole fit
   including construction (target <= 2 minutes).
2. Time per SVI iteration at 10^4 and 10^6 generated rows, memmapped in a
   temporary directory (target: within 1.5x of each other).
3. At 10^5 generated rows: the SVI bound per row against the collapsed
   BayesianGPLVM's after its L-BFGS fit, and the ratio of the fit times
   (target: within 10%, in <= 1/10 of the time).
4. The race at 20,000 generated rows (``--race-rows``; D=12, or each of
   ``--race-dims``), on process CPU time (``time.process_time``, construction
   included, BLAS held to one thread): the collapsed BayesianGPLVM (L-BFGS)
   given ``--race-budget`` CPU seconds (60), SVI fits of ``--race-iters``
   iterations given a tenth of it (a fit past that is stopped after the
   iteration that crosses it, and judged by its state then), each with
   fit_svi's default full-data polish and without it (``polish_passes=0``).
   Each bound per row is put against an independent-Gaussian baseline (every
   column its own Gaussian at its sample mean and variance:
   -1/2 sum_d log(2 pi e var_d) nats per row); target: SVI's gain over it
   >= 90% of the collapsed fit's gain, in <= 1/10 of its CPU time.  Run it
   with ``NUMBA_NUM_THREADS=1`` for single-core budgets.

Options ``--oil-collapsed ITERS`` and ``--gpytorch`` (``--gpytorch-tutorial``)
put the references the oil target names beside the SVI fits, on the same
seeds in the same run: the collapsed BayesianGPLVM on all rows, and the
GPyTorch tutorial's SVI recipe (``_gpytorch_recipe.py``; needs torch and
gpytorch, see benchmarks/README.md) at the target's Q=10, M=50 and at the
tutorial's own Q=12, M=25.

The race (``--skip oil,scaling,compare --race-dims 12 40 --race-iters 200 300
600``, NUMBA_NUM_THREADS=1, OPENBLAS_CORETYPE unset, load average 2.6-3.9 from
other work on the 2 cores): SVI bound per row, share of the collapsed fit's
gain over the independent-Gaussian baseline, process CPU seconds
(construction + fit + polish):

  ====================  ================================  ================================
  D (baseline;          SVI with the full-data polish     the iterations alone
  collapsed in 60 s)    (fit_svi's default: 1, 1, 3       (``polish_passes=0``)
                        passes)
  ====================  ================================  ================================
  12 (-8.627; 6.205)    200 it.: 5.516, 95.4%, 0.90 s     200 it.: -3.601, 33.9%, 0.68 s
                        300 it.: 7.459, 108.5%, 1.25 s    300 it.: -22.669, -94.7%, 1.08 s
                        600 it.: 8.919, 118.3%, 2.50 s    600 it.: 6.126, 99.5%, 2.13 s
  40 (-32.534; 44.901)  200 it.: 33.638, 85.5%, 0.93 s    200 it.: 2.429, 45.2%, 0.77 s
                        300 it.: 42.037, 96.3%, 1.30 s    300 it.: -15.819, 21.6%, 1.08 s
                        600 it.: 48.051, 104.1%, 2.68 s   600 it.: 33.182, 84.9%, 2.61 s
  ====================  ================================  ================================

  The collapsed fit (342-343 L-BFGS iterations in 60 CPU s, not converged)
  was at -2.207 / 12.521 nats per row after 6 CPU s (D = 12 / 40).  In an
  earlier run (polish every 3 epochs, before the psi backward's GEMM
  reduction changed the last bits), fits of 1200 and 2000 iterations were
  stopped at the 6 s budget (954-1152 iterations), all at 104-120% with or
  without the polish: the iterations alone reach the target when the budget
  holds ~1000 of them; with the polish 300 do (1/50 of the collapsed fit's
  CPU), where each row has been drawn ~4 times.  With OPENBLAS_CORETYPE=
  Haswell (D = 12, load 3.1-3.6) the SVI figures were the same and the
  collapsed fit made 273 iterations (6.132).

One run of everything (``--oil-collapsed 600 --gpytorch --gpytorch-tutorial``,
torch 2.13 CPU, one torch thread, load average 0.9-1.7): top-two 1-NN errors
(top three) / wall, seeds 0, 1, 2:

  ==============================  ================  ==============  =================
  fit                             seed 0            seed 1          seed 2
  ==============================  ================  ==============  =================
  SVI (fit_svi's defaults, 4000)  15 (1) / 33 s     10 (0) / 33 s   11 (1) / 41 s
  collapsed, L-BFGS 600           8 (1) / 14 s      8 (1) / 12 s    4 (1) / 12 s
  GPyTorch recipe, Q=10, M=50     166 (88) / 150 s  19 (1) / 169 s  188 (151) / 129 s
  GPyTorch recipe, Q=12, M=25     16 (10) / 109 s   2 (2) / 100 s   13 (1) / 98 s
  ==============================  ================  ==============  =================

  The recipe varies widely with its seed (earlier runs with other random
  streams: Q=10, M=50: 13, 22, 14 errors in 147-160 s; Q=12, M=25, the
  tutorial's own seed 73 and seeds 0, 1: 18, 15, 85); one run in six gave
  2.  The same run: time per iteration 10^6 / 10^4 rows 1.03x (median),
  1.14x (min); at 10^5 rows SVI 7.495 nats per row in 28.3 s against the
  collapsed fit's 4.945 (150 L-BFGS iterations, 360 s): ratio 0.079.

  The 10^5-row comparison again, three later runs (load 1-2): the 3000-
  iteration fit 30.5-35.9 s against the collapsed fit's 341-363 s, ratios
  0.102, 0.089, 0.091.  Smaller budgets, each a whole fit with its own
  schedule (``--compare-budgets``): 1000 iterations -18.32 nats per row in
  11.4 s, 1500: -20.75 in 15.7 s, 2000: 3.81 in 22.3 s (not within 10% of
  4.945), 2500: 7.518 in 24.6 s, ratio 0.072 - the first within 10%.

  The collapsed reference's "2 errors" is from the first release
  (1ab5fab: 3 errors, bound 7866 when re-run here): the fit has held the
  noise for its first 100 iterations since 46a2306 (5fbf266, the first
  commit after it that runs: 9 errors, bound 7509; HEAD: 8, 7486).

  Also measured (seed 0 unless said): the SVI fits started from a collapsed
  fit (1000 L-BFGS iterations, bound 7652, 6 errors) climb to 7828, 7905,
  7973, 8003 nats in four times 1000 SVI iterations - above any collapsed
  fit here - with 10, 7, 10, 8 errors (top three: 0): the top-two count does
  not follow the bound.  From PCA, the SVI fits end with the second and third
  dims at 0.2-0.4 and 0.1-0.16 of the top relevance (still falling slowly at
  4000 iterations), the collapsed fits at 0.04-0.1 and 0.01-0.02 (set within
  its first 20 iterations, when L-BFGS sends the lengthscales of all but one
  dim to 12-14).  Not kept: standardised columns (seeds 0-2: 11, 15, 6; the
  collapsed model 5, 10, 12), the kernel, Z and noise first with q(X) held
  at PCA for 200 iterations (9, 19, 10), no noise warm-up (10, 11, 10),
  averaging the globals over the last 2000 iterations (14, 11, 10 after
  refine(), bounds 60-110 nats below the last iterate's), Adam at 0.05 or
  0.1 decaying to a quarter (9, 15, 13 / 7248-7385 nats; 14, 4, 13 /
  7195-7346).

Oil flow, fit_svi's defaults with the full-data polish (3 passes after the
4000 iterations; OPENBLAS_CORETYPE unset, load 3.0-3.5): errors 14, 11, 10
(top three 1, 0, 1), bounds 7393, 7438, 7551 nats (the iterations alone: 15,
10, 11 / 7261, 7326, 7420), wall 10-13 s, CPU 11.9-12.4 s: the target (<= 5)
is missed as before.  Not kept (seeds 0, 1, 2, with the polish): no noise warm-up
11, 11, 9; that and Adam at 0.05: 15, 16, 9; batch 1000 (all rows), 1000
iterations: 12, 9, 12; seed 0, 100 / 300 collapsed L-BFGS iterations from
the polished fit: 14 / 16 errors (bound 7569 / 7657).

Measured earlier (2 cores shared with other jobs, load average 3-6; one run each):

* oil flow, seeds 0, 1, 2 (errors / wall / CPU / full bound):

  ==========================  ==================  ==================  ==================
  settings                    seed 0              seed 1              seed 2
  ==========================  ==================  ==================  ==================
  before, 3000 iterations     8 / 56 s / 52 s /   10 / 46 s / 41 s /  7 / 44 s / 44 s /
                              6269                6396                5686
  now, 4000 iterations        15 / 51 s / 52 s /  10 / 47 s / 49 s /  11 / 60 s / 49 s /
                              7261                7326                7420
  ==========================  ==================  ==================  ==================

  The bound rose by 700-1700 nats per seed (refine() afterwards: 7389, 7434,
  7546; the collapsed model after 1500 L-BFGS iterations: 7775) and the wall
  time target holds at this load (the earlier 124-174 s were at load 8-10),
  but the 1-NN target (<= 5) is missed, more widely than before.  The new
  fits use three latent dimensions like the collapsed model: on seed 0 the
  three most relevant dimensions give 1 error (before: 5; collapsed: 0), the
  two most relevant 15 - the third carries class information the top-two
  count drops.  The collapsed model itself gives 7-8 errors in its top two
  dimensions here (bench_oil.py, 600 L-BFGS iterations: 8; 1500: 7).
  Measured again later (load average 1-3): the same errors and bounds (the
  fit is deterministic for a seed), wall 51, 53, 39 s, CPU 49, 49, 48 s.
* time per iteration, 7 interleaved rounds of 100 (fit_svi's defaults):
  N=10^4 median 9.7 ms (min 8.9), N=10^6 median 11.1 ms (min 8.5): 1.15x
  median, 0.95x min.  Construction: 0.3 s and 4.4 s.
* N=10^5 (the whole script niced, load average ~4): collapsed, 150 L-BFGS
  iterations (not converged), 4.945 nats per row in 511.5 s; SVI with 4000
  iterations 8.635 nats per row in 54.0 s (+0.6 s for the full bound), time
  ratio 0.106; with 3000 iterations (a separate run right after, same data)
  7.495 nats per row in 32.7 s (CPU 35.5 s), ratio 0.064.  Both SVI bounds
  are above the collapsed fit's, so 3000 iterations is the default here.

Oil flow: what was tried (seed 0 unless said; full bound in nats, errors)

* Diagnosis.  SVI with the earlier settings started at a converged collapsed
  fit (7775) drifted to 7000 in 2000 iterations; with the kernel, Z and the
  noise held it still fell to 7032, with the rows held it rose to 7890: the
  rows' full natural-gradient (Newton) steps overshoot.  Half steps (or 0.2)
  with the globals held: 7791.  Then, from PCA, with q(u) set to its optimum
  over all rows after every iteration (not scalable, a probe): 7424 after
  2000 iterations; q(u) from 512 fresh rows per iteration: 7078; from 256:
  6494; the natural-gradient average with rho 0.2 -> 0.003: 6806, 0.5 -> 0.2:
  7153, 0.3 constant (3000 iterations): 7204, 0.5 constant: 7120.  A slowly
  decaying rho averages targets computed at older rows, kernel and Z.
* Adam in log coordinates for the positive globals, the earlier settings
  otherwise (3000 iterations, one local step): 6870 against 6106 in softplus
  coordinates (a softplus lengthscale of 100 moves like one of 1).
* Not kept: holding q(u) rather
  than the whitened q(v) while the kernel and Z step (diverged: the Adam
  step was taken for fixed q(v)); noise held for 0 / 200 / 500 iterations
  (7060 / 7204 / 7218, errors 10 / 9 / 8); batch 512, 2500 iterations (seeds
  0, 1: 7348, 7239; errors 12, 14); batch 100, 8000 iterations (6995, 7052;
  9, 7); four local steps per visit (7182, 7214; 11, 9; 57 s CPU); 5000
  iterations (seeds 1, 2: 7310, 7403; 14, 11); full batch (B = N, q(u) at its
  optimum every step) with full local steps: -8459 after 400 iterations,
  with half steps and a constant rate 0.02: 7424 after 1000.
* Not kept: per-row Adam for q(x_n) (``local_optimizer="adam"``; earlier
  294-309 errors).  Its updates are right (moments and bias correction per
  row and visit, the prior's -mu and -(1 - 1/S)/2 in each row's gradient);
  its step is too small: at ``local_learning_rate`` = ``learning_rate``
  (0.02 -> 0.005 per visit, a row seen every N/B ~ 4 iterations) the rows stay
  near the PCA start, the relevant dimensions' variances stay large and the
  relevance spreads over four or more dimensions.  Seed 0, 2000 iterations
  (errors / full bound): local rate 0.02: 329 / 3848; 0.05: 253 / 5343;
  0.2: 8 / 6057; 0.5: 19 / 7007 (natgrad, the defaults: 13 / 7079).  Larger
  local steps raise the bound and switch all but three dimensions off, as the
  natural-gradient steps do, and the top two then lack the third's class
  information (top-three errors 1).  4000 iterations, seeds 0, 1, 2 (mostly
  run side by side, CPU 28-36 s each): rate 0.2 in softplus coordinates 8,
  175, 18 / 6462, 6341, 6573; 0.2 in log-variance coordinates 17, 131, 14 /
  6427, 6393, 6556; 0.5 in log-variance coordinates
  21, 8, 11 / 7211, 7125, 7193 (top three: 1, 1, 0), against the defaults'
  15, 10, 11 / 7261, 7326, 7420.  A shorter second-moment memory (beta2 0.99)
  changed little (rate 0.05, 2500 iterations: 215 / 5612 against 243 / 5505).
  The local rate's default is now 0.5 (it was ``learning_rate``); natgrad
  stays the default local optimiser.
* Not kept: the GPyTorch recipe: Adam at a constant 0.01 on everything
  (kernel, Z, noise, q(u) in its Cholesky parametrisation, and q(X) as one
  (N, 2Q) matrix with one Adam state: every row gets its KL gradient every
  iteration, the minibatch rows their likelihood gradient scaled by N/B),
  batch 100, 10000 iterations, noise held for 200.  Seeds 0, 1, 2: 156, 163,
  208 errors, bound 5861, 5815, 5969; wall 58 s (seed 0 alone, load 2.4),
  109-110 s (seeds 1 and 2 side by side, CPU 60 s); the bound still rising
  at the end (seed 0, minibatch estimates: 5232 at 4000 iterations, 6136 at
  10000).  A row's likelihood gradient arrives once in N/B iterations, N/B
  times larger, so Adam's second moment holds it and the row moves about
  lr / sqrt(N/B) per iteration: too slow for this budget.  With q(u) by the
  natural-gradient step (rho 0.3) instead, 5000 iterations: 305 / 5038;
  Adam at 0.03 on everything, 6000 iterations: 103 / 4934.
* Not kept: a warm start from a collapsed BayesianGPLVM fit on a fixed
  random subset of rows (its kernel, Z and noise; its rows' q(x_n); every
  other row's q(x_n) copied from its nearest subset row in data space; then
  three refine() passes and SVI on all rows, no noise warm-up).  Seeds 0, 1,
  2 (errors / full bound / wall; the defaults: 15, 10, 11 / 7261, 7326, 7420
  / 39-53 s):
  300 rows, 1000 L-BFGS iterations, 2500 SVI: 8, 10, 15 / 7549, 7430, 7525
  / 36-39 s; 500 rows, 1000 + 2000: 8, 13, 15 / 7529, 7409, 7618 / 31-42 s
  (learning_rate 0.005: 10, 14, 17 / 7524, 7413, 7607); 500 rows, 1000 +
  4000: 6, 12, 17 / 7567, 7444, 7654 / 56-71 s; 500 rows, 2000 + 2000: 9,
  13, 11 / 7555, 7438, 7689 / 66-71 s.  The bound is 90-290 nats higher
  on every seed (and with 2000-2500 SVI iterations the fit is faster), but
  the errors are not lower: the warm start itself, before SVI, gives 6-15
  (500 rows, 1000 or 2000 iterations).  A local-only start (five refine() passes from PCA, then the
  default fit): 13, 23, 11 / 7279, 7222, 7209.  Local-only passes at the end
  (refine(), 1 / 3 / 10 / 30 passes after the default fit): bounds +127 to
  +136 nats, errors 15 / 14 / 14 / 14, 11 / 11 / 10 / 10, 11 / 10 / 10 / 10.
* The target is beyond the collapsed model too: BayesianGPLVM(Y, 10,
  num_inducing=50, seed=s) on all 1000 rows, L-BFGS, seeds 0, 1, 2, gives
  8, 9, 6 errors at 500 iterations (7419, 7418, 7423), 8, 10, 5 at 1000
  (7614, 7596, 7613) and 6, 7, 8 at 2000 (7812, 7753, 7802; relevances of
  the second and third dimensions 0.04 and 0.007-0.009 of the largest).
* Earlier (the settings before): learning rates, q(u) step sizes, batch
  sizes, holding the noise, a final refine pass; 300 collapsed L-BFGS
  iterations from the seed-0 SVI fit reached 7455 and 3 errors.

Usage::

    .venv/bin/python benchmarks/bench_svi.py [--data ../shared/data/oil_flow.npz]
        [--oil-iters 4000] [--oil-seeds 0 1 2] [--oil-before] [--oil-collapsed 600]
        [--gpytorch] [--gpytorch-tutorial] [--gpytorch-iters 10000] [--sizes 10000 1000000]
        [--compare-rows 100000] [--collapsed-iters 150] [--compare-iters 3000]
        [--compare-budgets 2000 2500] [--race-rows 20000] [--race-dims 12 40] [--race-budget 60]
        [--race-iters 300 600 1200 2000] [--skip oil,scaling,compare,race]
"""
from __future__ import annotations

import argparse
import math
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import engine  # noqa: E402
from engine.metrics import most_relevant_dims, one_nn_errors  # noqa: E402

from _common import load_oil, machine_load  # noqa: E402

#: What the oil-flow fits use: fit_svi's defaults (Adam at 0.02 decaying to 0.005 in log coordinates for
#: the positive globals, q(u)'s natural-gradient step constant at 0.3, two half local steps per visit, then
#: the full-data polish: 3 passes after 4000 iterations).
OIL_SETTINGS = {}
#: The settings before (``--oil-before`` runs them too, for a table from one run): Adam 0.05 -> 0.0005 on
#: softplus coordinates, q(u)'s step 0.2 -> 0.003, three full local steps per visit, 3000 iterations.
BEFORE_SETTINGS = {"learning_rate": 0.05, "final_learning_rate": 0.0005, "natgrad_step": 0.2,
                   "final_natgrad_step": 0.003, "local_step": 1.0, "local_iters": 3, "positive_steps": "free"}
BEFORE_ITERS = 3000


def to_memmap(Y, directory, name):
    path = Path(directory) / f"{name}.npy"
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=Y.shape)
    out[:] = Y
    out.flush()
    del out
    return np.load(path, mmap_mode="r")


def generated_memmap(n, directory, D=12, seed=0, chunk=100_000):
    """n rows of a 3-D latent manifold through a fixed random nonlinear map, D outputs, written by chunks."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((3, 8))
    B = rng.standard_normal((8, D)) / np.sqrt(8)
    path = Path(directory) / f"gen_{n}_{D}_{seed}.npy"
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(n, D))
    for a in range(0, n, chunk):
        b = min(a + chunk, n)
        t = rng.standard_normal((b - a, 3))
        out[a:b] = np.tanh(t @ A) @ B + 0.05 * rng.standard_normal((b - a, D))
    out.flush()
    del out
    return np.load(path, mmap_mode="r")


def bench_oil(args, tmp):
    """One fit per seed (the seed of Z's initial subset and of the minibatch sampler): errors and times."""
    Y, labels = load_oil(args.data)
    Ym = to_memmap(np.asarray(Y, dtype=np.float64), tmp, "oil")
    runs = [] if args.oil_before_only else [("after", args.oil_iters, OIL_SETTINGS)]
    if args.oil_before or args.oil_before_only:
        runs.insert(0, ("before", BEFORE_ITERS, BEFORE_SETTINGS))
    rows = []
    for tag, iters, settings in runs:
        text = ", ".join(f"{k}={v}" for k, v in settings.items()) or "fit_svi's defaults"
        print(f"oil flow (memmap), Q=10, M=50, batch 256, {iters} SVI iterations [{tag}: {text}]:")
        for seed in args.oil_seeds:
            load0 = machine_load()
            t0, c0 = time.perf_counter(), time.process_time()
            m = engine.StochasticBayesianGPLVM(Ym, 10, num_inducing=50, batch_size=256, seed=seed)
            result = engine.fit(m, optimizer="svi", max_iters=iters, **settings)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            dims = most_relevant_dims(m.relevance, 2)
            errors, errors3 = oil_errors(m.X_mean, m.relevance, labels)
            rel = m.relevance / m.relevance.max()
            # after the fit: q(u) at its optimum over all rows and one pass of local steps (three passes over Y)
            refined = m.refine()
            errors_r = oil_errors(m.X_mean, m.relevance, labels)[0]
            rows.append((tag, seed, errors, wall, cpu, result.objective))
            print(f"  seed {seed}: 1-NN errors in dims {dims.tolist()}: {errors:3d} (target <= 5; three dims: {errors3}); "
                  f"wall {wall:.1f} s (target <= 120 s), CPU {cpu:.1f} s; bound {result.objective:.1f} nats; "
                  f"dims on (relevance >= 1% of max): {int(np.sum(rel >= 0.01))} of 10; noise variance "
                  f"{float(m.parameters['noise_variance']):.3g}; after refine(): bound {refined:.1f}, errors "
                  f"{errors_r}; {load0} at the start, {machine_load()} at the end", flush=True)
        mine = [r for r in rows if r[0] == tag]
        print(f"  [{tag}] errors over seeds {list(args.oil_seeds)}: {[r[2] for r in mine]}; wall median "
              f"{np.median([r[3] for r in mine]):.1f} s, CPU median {np.median([r[4] for r in mine]):.1f} s "
              "(construction + fit + final full bound)", flush=True)
    if args.oil_collapsed:
        rows += oil_collapsed(Y, labels, args)
    if args.gpytorch or args.gpytorch_tutorial:
        rows += oil_gpytorch(Y, labels, args)
    return rows


def oil_errors(X_mean, relevance, labels):
    """(1-NN errors in the two most relevant dims, in the three most relevant) of a latent space."""
    return tuple(one_nn_errors(np.asarray(X_mean)[:, most_relevant_dims(relevance, k)], labels) for k in (2, 3))


def oil_collapsed(Y, labels, args):
    """The reference the target names: the collapsed BayesianGPLVM on all rows (bench_oil.py's fit), per seed."""
    print(f"oil flow, collapsed BayesianGPLVM (Q=10, M=50, PCA start, L-BFGS, {args.oil_collapsed} iterations):")
    rows = []
    for seed in args.oil_seeds:
        t0 = time.perf_counter()
        m = engine.BayesianGPLVM(np.asarray(Y), 10, num_inducing=50, seed=seed)
        result = engine.fit(m, optimizer="lbfgs", max_iters=args.oil_collapsed)
        wall = time.perf_counter() - t0
        top2, top3 = oil_errors(m.X_mean, m.relevance, labels)
        rows.append(("collapsed", seed, top2, wall, math.nan, result.objective))
        print(f"  seed {seed}: 1-NN errors in the two most relevant dims {top2:3d} (three: {top3}); "
              f"wall {wall:.1f} s; bound {result.objective:.1f} nats", flush=True)
    return rows


def oil_gpytorch(Y, labels, args):
    """The GPyTorch tutorial's recipe (``_gpytorch_recipe``), per seed: at the target's Q=10, M=50 and, with
    ``--gpytorch-tutorial``, at the tutorial's own Q=12, M=25."""
    from _gpytorch_recipe import fit_recipe, import_gpytorch

    if import_gpytorch() is None:
        return []
    settings = ([(10, 50)] if args.gpytorch else []) + ([(12, 25)] if args.gpytorch_tutorial else [])
    rows = []
    for Q, M in settings:
        print(f"oil flow, the GPyTorch recipe (Q={Q}, M={M} per output, batch 100, Adam 0.01, random start, "
              f"{args.gpytorch_iters} iterations):")
        for seed in args.oil_seeds:
            def progress(it, X_mean, relevance):
                top2, top3 = oil_errors(X_mean, relevance, labels)
                print(f"    iteration {it}: errors {top2} (three dims: {top3})", flush=True)

            X_mean, relevance, wall = fit_recipe(Y, Q, M, args.gpytorch_iters, seed, report_every=progress)
            top2, top3 = oil_errors(X_mean, relevance, labels)
            rows.append((f"gpytorch Q={Q} M={M}", seed, top2, wall, math.nan, math.nan))
            print(f"  seed {seed}: 1-NN errors in the two most relevant dims {top2:3d} (three: {top3}); "
                  f"wall {wall:.1f} s (one torch thread)", flush=True)
    return rows


def bench_scaling(args, tmp):
    """Models at every size are built first, then timed round-robin (``rounds`` x ``iters`` iterations
    each), so a changing background load falls on all sizes alike."""
    print(f"time per SVI iteration (Q=10, M=50, batch 256, D=12, memmapped generated data; "
          f"{args.scaling_rounds} interleaved rounds of {args.scaling_iters} iterations):")
    models = {}
    for n in args.sizes:
        t0 = time.perf_counter()
        models[n] = engine.StochasticBayesianGPLVM(generated_memmap(n, tmp), 10, num_inducing=50, batch_size=256)
        built = time.perf_counter() - t0
        engine.fit(models[n], optimizer="svi", max_iters=20, evaluate_final=False)  # warm-up
        print(f"  N={n:>9,d}: construction (one pass over Y for the mean and PCA, q(u) start) {built:.1f} s",
              flush=True)
    per_iter = {n: [] for n in models}
    for _ in range(args.scaling_rounds):
        for n, m in models.items():
            result = engine.fit(m, optimizer="svi", max_iters=args.scaling_iters, evaluate_final=False)
            per_iter[n].append(result.elapsed / result.iterations)
    for n, times in per_iter.items():
        print(f"  N={n:>9,d}: median {np.median(times) * 1e3:7.2f} ms, min {np.min(times) * 1e3:7.2f} ms "
              f"per iteration", flush=True)
    sizes = list(per_iter)
    if len(sizes) >= 2:
        ratio = np.median(per_iter[sizes[-1]]) / np.median(per_iter[sizes[0]])
        ratio_min = np.min(per_iter[sizes[-1]]) / np.min(per_iter[sizes[0]])
        print(f"  ratio N={sizes[-1]:,d} / N={sizes[0]:,d}: {ratio:.2f}x median, {ratio_min:.2f}x min   "
              "(target <= 1.5x)")


def timed_svi(Y, iters):
    """An SVI fit of ``iters`` iterations on Y (N, 12): (seconds for construction and fit, the full bound
    after it in nats, seconds for that bound)."""
    t0 = time.perf_counter()
    s = engine.StochasticBayesianGPLVM(Y, 10, num_inducing=50, batch_size=256)
    engine.fit(s, optimizer="svi", max_iters=iters, evaluate_final=False, **OIL_SETTINGS)
    t_fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    bound = s.objective()
    return t_fit, bound, time.perf_counter() - t0


def bench_compare(args, tmp):
    n = args.compare_rows
    Ym = generated_memmap(n, tmp, seed=1)
    print(f"bound per row at N={n:,d} (Q=10, M=50, D=12): collapsed L-BFGS ({args.collapsed_iters} iterations) "
          f"vs SVI ({args.compare_iters} iterations, batch 256):", flush=True)
    t0 = time.perf_counter()
    c = engine.BayesianGPLVM(np.asarray(Ym), 10, num_inducing=50)
    rc = engine.fit(c, optimizer="lbfgs", max_iters=args.collapsed_iters)
    t_c = time.perf_counter() - t0
    print(f"  collapsed: {rc.objective / n:.4f} nats per row in {t_c:.1f} s", flush=True)
    t_s, bound, t_eval = timed_svi(Ym, args.compare_iters)
    per_row_c, per_row_s = rc.objective / n, bound / n
    gap = (per_row_s - per_row_c) / abs(per_row_c)
    print(f"  SVI:       {per_row_s:.4f} nats per row in {t_s:.1f} s (+ {t_eval:.1f} s for the full bound)")
    print(f"  (SVI - collapsed) / |collapsed| of the bound per row: {gap:+.1%}   (target >= -10%; "
          f"collapsed {'converged' if rc.converged else 'not converged'} after {rc.iterations} iterations)")
    print(f"  time ratio SVI / collapsed: {t_s / t_c:.3f}   (target <= 0.1)")
    # smaller budgets, each a whole fit of its own (construction, the schedule over its own max_iters, the
    # full bound after): the first one within 10% of the collapsed bound per row, and its time ratio
    aim = per_row_c - 0.1 * abs(per_row_c)
    for budget in args.compare_budgets:
        t_b, bound_b, _ = timed_svi(Ym, budget)
        per_row_b = bound_b / n
        within = per_row_b >= aim
        print(f"  SVI, {budget} iterations: {per_row_b:.4f} nats per row in {t_b:.1f} s: time ratio "
              f"{t_b / t_c:.3f}, {'within' if within else 'not within'} 10% of the collapsed bound per row")
        if within:
            break


def independent_gaussian_per_row(Y, chunk=100_000):
    """Log-likelihood per row, nats, of every column as its own Gaussian at its sample mean and variance."""
    n = Y.shape[0]
    total, total_sq = np.zeros(Y.shape[1]), np.zeros(Y.shape[1])
    for a in range(0, n, chunk):
        block = np.asarray(Y[a:a + chunk], dtype=np.float64)
        total += block.sum(axis=0)
        total_sq += np.sum(block * block, axis=0)
    var = total_sq / n - (total / n) ** 2
    return float(-0.5 * np.sum(np.log(2.0 * np.pi * var) + 1.0))


def cpu_budgeted(fit, budget):
    """Run ``fit(callback, stop)`` with ``stop`` set once the process has spent ``budget`` CPU seconds
    since the call began: (its result, CPU seconds spent, (CPU seconds, objective) after each iteration)."""
    stop, trace = threading.Event(), []
    c0 = time.process_time()

    def callback(snapshot):
        spent = time.process_time() - c0
        trace.append((spent, snapshot.objective))
        if spent >= budget:
            stop.set()

    result = fit(callback, stop)
    return result, time.process_time() - c0, trace


def bench_race(args, tmp):
    from engine._threads import single_blas_thread

    import numba

    n, budget = args.race_rows, args.race_budget
    for D in args.race_dims:
        Ym = generated_memmap(n, tmp, D=D, seed=1)
        base = independent_gaussian_per_row(Ym)
        print(f"race at N={n:,d}, D={D} (Q=10, M=50; process CPU time, BLAS one thread, numba threads "
              f"{numba.config.NUMBA_NUM_THREADS}): independent-Gaussian baseline {base:.3f} nats per row; "
              f"{machine_load()}", flush=True)
        with single_blas_thread():
            def collapsed(callback, stop):
                c = engine.BayesianGPLVM(np.asarray(Ym), 10, num_inducing=50)
                return engine.fit(c, optimizer="lbfgs", max_iters=100_000, callback=callback, stop=stop)

            rc, cpu_c, trace = cpu_budgeted(collapsed, budget)
        per_row_c = rc.objective / n
        gain_c = per_row_c - base
        aim = base + 0.9 * gain_c
        marks = [(t, o / n) for t, o in trace]
        at = "; ".join(f"{max((o for t, o in marks if t <= b), default=math.nan):.3f} at {b:g} s"
                       for b in (budget / 10, budget / 4, budget / 2))
        print(f"  collapsed, L-BFGS: {per_row_c:.3f} nats per row (gain {gain_c:.3f}) in {cpu_c:.1f} CPU s, "
              f"{rc.iterations} iterations (on the way: {at}); 90% of its gain: {aim:.3f}", flush=True)
        for iters in args.race_iters:
            for label, options in (("default polish", {}), ("no polish", {"polish_passes": 0})):
                with single_blas_thread():
                    def svi(callback, stop):
                        s = engine.StochasticBayesianGPLVM(Ym, 10, num_inducing=50, batch_size=256)
                        r = engine.fit(s, optimizer="svi", max_iters=iters, callback=callback, stop=stop,
                                       evaluate_final=False, **options)
                        return s, r

                    (s, rs), cpu_s, _ = cpu_budgeted(svi, budget / 10)
                    per_row_s = s.objective() / n
                fraction = (per_row_s - base) / gain_c
                # a fit stopped at the budget is judged by its state then (one iteration past it)
                met = fraction >= 0.9 and (cpu_s <= budget / 10 or rs.stopped)
                print(f"  SVI {iters:5d} iterations, {label:14s}: {per_row_s:8.3f} nats per row, "
                      f"{fraction:6.1%} of the collapsed gain, {cpu_s:5.2f} CPU s = {cpu_s / cpu_c:.3f} of the "
                      f"collapsed fit's{' (stopped at the budget)' if rs.stopped else ''}: "
                      f"{'met' if met else 'not met'}; {rs.message}", flush=True)
        print(f"  {machine_load()} at the end", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=None, help="oil-flow .npz (arrays Y, labels)")
    p.add_argument("--oil-iters", type=int, default=4000)
    p.add_argument("--oil-seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--oil-before", action="store_true", help="also run the settings before (BEFORE_SETTINGS)")
    p.add_argument("--oil-before-only", action="store_true", help="run only the settings before")
    p.add_argument("--oil-collapsed", type=int, default=0, metavar="ITERS",
                   help="also fit the collapsed BayesianGPLVM (L-BFGS, ITERS iterations) for each oil seed")
    p.add_argument("--gpytorch", action="store_true",
                   help="also run the GPyTorch tutorial's SVI recipe at Q=10, M=50 for each oil seed (needs torch "
                        "and gpytorch)")
    p.add_argument("--gpytorch-tutorial", action="store_true",
                   help="also run the recipe at the tutorial's own Q=12, M=25")
    p.add_argument("--gpytorch-iters", type=int, default=10000)
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 1_000_000])
    p.add_argument("--scaling-iters", type=int, default=100)
    p.add_argument("--scaling-rounds", type=int, default=7)
    p.add_argument("--compare-rows", type=int, default=100_000)
    p.add_argument("--collapsed-iters", type=int, default=150)
    p.add_argument("--compare-iters", type=int, default=3000)
    p.add_argument("--compare-budgets", type=int, nargs="*", default=[2000, 2500], metavar="ITERS",
                   help="then SVI fits of these budgets, smallest first, until one comes within 10%% of the "
                        "collapsed bound per row")
    p.add_argument("--race-rows", type=int, default=20_000)
    p.add_argument("--race-dims", type=int, nargs="+", default=[12], metavar="D",
                   help="output dimensions of the generated data of the race (one race per D)")
    p.add_argument("--race-budget", type=float, default=60.0, help="the collapsed fit's CPU seconds")
    p.add_argument("--race-iters", type=int, nargs="+", default=[300, 600, 1200, 2000],
                   help="SVI fits of these many iterations, each given a tenth of --race-budget")
    p.add_argument("--skip", default="", help="comma-separated parts to skip: oil, scaling, compare, race")
    args = p.parse_args(argv)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    engine.psi.warm_up()
    with tempfile.TemporaryDirectory() as tmp:
        if "oil" not in skip:
            bench_oil(args, tmp)
        if "scaling" not in skip:
            bench_scaling(args, tmp)
        if "compare" not in skip:
            bench_compare(args, tmp)
        if "race" not in skip:
            bench_race(args, tmp)


if __name__ == "__main__":
    main()
