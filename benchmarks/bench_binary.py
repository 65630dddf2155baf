"""Binary and count data: the noise model matters (Lawrence 2005, section 7.3, Table 5).

Three parts, each printing its figures (nothing is asserted):

1. The twos experiment of Table 5.  scikit-learn's 8x8 handwritten twos
   (177 images, pixel values 0..16) thresholded at 8 (ink = 1; 33% of pixels).
   Per split (``--splits``, default 5): two thirds of the twos train, the rest
   test; in every test digit 20% of the pixels are hidden; the digit's latent
   position is found from its observed pixels (``infer_latent``, 10 starts as
   in the paper) and the hidden pixels are filled in by the mapping.  Models:
   the GP-LVM (the paper's model; Laplace's approximation for Bernoulli) and
   the Bayesian GP-LVM, each with a Bernoulli and a Gaussian noise model, 2-D
   latent space, RBF kernel (plus bias, and white noise for the Gaussian);
   baselines "no ink" (every hidden pixel 0) and the per-pixel majority of the
   training digits.  Per model: pixel error rate (a pixel is ink when its
   probability is above 1/2; the Gaussian models' predicted value above 1/2)
   and log-loss in nats per hidden pixel.  Probabilities: Bernoulli models
   P(y = 1); Gaussian models P(y > 1/2) under their predictive Gaussian
   (noise included), clipped to [1e-6, 1 - 1e-6]; "no ink" the training ink
   rate; majority the training frequency of ink per pixel ((k + 1) / (n + 2)).
   The paper's figures (USPS twos, 700 train / 400 test) are printed beside.

2. Counts.  Generated data: 2-D latents, D = 20 outputs with log-rates from
   random smooth functions (mean count ~4); 200 training rows, 100 test rows
   with 20% of their entries hidden; held-out log-likelihood per hidden entry
   of the Bayesian GP-LVM with a Poisson and a Gaussian noise model (the
   Gaussian's density integrated over [y - 1/2, y + 1/2], a probability of
   the count), and of the training column means (Poisson at the column mean).

3. Time per evaluation (bound + gradient, what an L-BFGS iteration costs once
   or a few times) of the Bernoulli Bayesian GP-LVM against the Gaussian one
   at N = 1000 and 20,000 (D = 64 binary columns, Q = 10, M = 50), and the
   time per L-BFGS iteration over a short fit; the ratio is printed.
   Unset OPENBLAS_CORETYPE when comparing speed; the load average is printed.

    python benchmarks/bench_binary.py [--splits 5] [--iters 300] [--quick] [--parts twos,counts,timing]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
from scipy import special

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

import engine  # noqa: E402
from engine import kernels  # noqa: E402
from engine.likelihoods import Poisson  # noqa: E402

PAPER = {"GP-LVM, Bernoulli": "23.5%", "GP-LVM, Gaussian": "35.9%", "no ink": "51.5%"}
HIDDEN = 0.2
CLIP = 1e-6


def loadavg() -> str:
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:  # pragma: no cover - not Linux
        return "?"


# ------------------------------------------------------------------ twos


def binary_twos():
    from sklearn.datasets import load_digits

    d = load_digits()
    return (d.data[d.target == 2] >= 8).astype(float)


def _kernel(Q, likelihood):
    k = kernels.RBF(Q, ard=True) + kernels.Bias(Q, variance=1.0)
    return k if likelihood != "gaussian" else k + kernels.White(Q, variance=1e-3)


def build(kind, likelihood, Y, Q, M, seed):
    if kind == "GP-LVM":
        return engine.GPLVM(Y, Q, kernel=_kernel(Q, likelihood), likelihood=likelihood, seed=seed)
    return engine.BayesianGPLVM(Y, Q, num_inducing=M, kernel=_kernel(Q, likelihood), likelihood=likelihood,
                                seed=seed)


def probabilities(model, result):
    """P(ink) of every pixel (n, D) from a projection."""
    if model.likelihood == "bernoulli":
        return result.prediction
    sd = np.sqrt(np.maximum(result.prediction_variance, 1e-12))
    return special.ndtr((result.prediction - 0.5) / sd)


def scores(p, truth, hidden, guess=None):
    """(pixel error, log-loss per hidden pixel) of probabilities p for the hidden pixels."""
    y = truth[hidden]
    q = np.clip(p[hidden], CLIP, 1 - CLIP)
    guess = (q > 0.5) if guess is None else guess[hidden]
    return float(np.mean(guess != (y == 1))), float(-np.mean(y * np.log(q) + (1 - y) * np.log(1 - q)))


def twos(splits, iters, Q=2, M=30, quick=False):
    B = binary_twos()
    n = B.shape[0]
    n_train = (2 * n) // 3
    rows = {}
    fit_times = {}
    print(f"\n== Twos: {n} binary 8x8 digits (scikit-learn, threshold 8; ink {B.mean():.1%}), "
          f"{n_train} train / {n - n_train} test per split, {HIDDEN:.0%} hidden pixels, Q={Q}, "
          f"{splits} splits, {iters} L-BFGS iterations; load {loadavg()}")
    kinds = [("GP-LVM", "bernoulli"), ("GP-LVM", "gaussian")]
    if not quick:
        kinds += [("Bayesian GP-LVM", "bernoulli"), ("Bayesian GP-LVM", "gaussian")]
    for s in range(splits):
        rng = np.random.default_rng(100 + s)
        perm = rng.permutation(n)
        train, test = B[perm[:n_train]], B[perm[n_train:]]
        hidden = rng.uniform(size=test.shape) < HIDDEN
        given = np.where(hidden, np.nan, test)
        ink = train.mean()
        freq = (train.sum(axis=0) + 1.0) / (train.shape[0] + 2.0)
        rows.setdefault("no ink", []).append(scores(np.full(test.shape, ink), test, hidden,
                                                    guess=np.zeros(test.shape, bool)))
        rows.setdefault("per-pixel majority", []).append(scores(np.broadcast_to(freq, test.shape), test, hidden))
        for kind, lik in kinds:
            name = f"{kind}, {'Bernoulli' if lik == 'bernoulli' else 'Gaussian'}"
            model = build(kind, lik, train, Q, M, seed=s)
            t0 = time.perf_counter()
            engine.fit(model, max_iters=iters)
            fit_times.setdefault(name, []).append(time.perf_counter() - t0)
            res = model.infer_latent(given, num_starts=10, num_optimised=3)
            p = probabilities(model, res)
            guess = (p > 0.5) if lik == "bernoulli" else (res.prediction > 0.5)
            rows.setdefault(name, []).append(scores(p, test, hidden, guess))
        print(f"  split {s}: " + ", ".join(f"{k} {v[-1][0]:.1%}" for k, v in rows.items()), flush=True)
    print(f"\n{'model':32s} {'pixel error':>18s} {'log-loss (nats)':>18s} {'paper (Table 5)':>16s} {'fit':>8s}")
    for name, vals in rows.items():
        e = np.array([v[0] for v in vals])
        ll = np.array([v[1] for v in vals])
        fit = f"{np.mean(fit_times[name]):.1f} s" if name in fit_times else ""
        print(f"{name:32s} {e.mean():>10.1%} ± {e.std():.1%} {ll.mean():>11.3f} ± {ll.std():.3f} "
              f"{PAPER.get(name, ''):>16s} {fit:>8s}")
    return rows


# ------------------------------------------------------------------ counts


def count_data(N, D=20, Q=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, Q))
    W = rng.normal(size=(Q, D)) * 1.2
    phase = rng.uniform(0, 2 * np.pi, D)
    log_rate = 1.2 + 0.9 * np.sin(X @ W + phase)
    return rng.poisson(np.exp(log_rate)).astype(float)


def counts(iters, Q=2, M=25):
    Y = count_data(300)
    train, test = Y[:200], Y[200:]
    rng = np.random.default_rng(7)
    hidden = rng.uniform(size=test.shape) < HIDDEN
    given = np.where(hidden, np.nan, test)
    y = test[hidden]
    print(f"\n== Counts: generated, 200 train / 100 test rows, D={Y.shape[1]}, mean count {Y.mean():.2f}, "
          f"{HIDDEN:.0%} of the test entries hidden, Q={Q}, M={M}; load {loadavg()}")
    out = {}
    mean = train.mean(axis=0)
    out["column means (Poisson)"] = float(np.mean(Poisson().logpdf(y, np.log(np.broadcast_to(mean, test.shape)[hidden]))))
    for lik in ("poisson", "gaussian"):
        model = engine.BayesianGPLVM(train, Q, num_inducing=M, kernel=_kernel(Q, lik), likelihood=lik)
        engine.fit(model, max_iters=iters)
        res = model.infer_latent(given, num_starts=10, num_optimised=3)
        if lik == "poisson":
            f_mean, f_var = model.predict_f(res.mean, res.variance)
            lpd = Poisson().log_predictive_density(test, f_mean, f_var, hidden)[0][hidden]
        else:
            m, v = res.prediction[hidden], res.prediction_variance[hidden]
            sd = np.sqrt(v)
            prob = special.ndtr((y + 0.5 - m) / sd) - special.ndtr((y - 0.5 - m) / sd)
            lpd = np.log(np.maximum(prob, 1e-300))
        err = np.abs(res.prediction[hidden] - y)
        out[f"Bayesian GP-LVM, {lik.capitalize()}"] = float(np.mean(lpd))
        print(f"  {lik}: mean absolute error of the hidden counts {err.mean():.3f}")
    print(f"\n{'model':32s} {'held-out log-likelihood per entry (nats)':>42s}")
    for name, v in out.items():
        print(f"{name:32s} {v:>42.4f}")
    return out


# ------------------------------------------------------------------ timing


def timing(repeats=5, Ns=(1000, 20000), D=64, Q=10, M=50):
    print(f"\n== Time per evaluation (bound + gradient) and per L-BFGS iteration, D={D} binary columns, Q={Q}, "
          f"M={M}; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}; {C.blas_summary()}; "
          f"load {loadavg()}")
    rng = np.random.default_rng(0)
    print("  eval: wall median per bound + gradient (cpu: least process CPU seconds of one, all threads: on a "
          "busy machine compare these); it: wall per L-BFGS iteration of a short fit")
    print(f"{'N':>7s} {'Gaussian':>10s} {'Bernoulli':>10s} {'ratio':>6s} {'cpu G':>9s} {'cpu B':>9s} {'ratio':>6s} "
          f"{'it G':>9s} {'it B':>9s} {'ratio':>6s}")
    for N in Ns:
        Xl = rng.normal(size=(N, 3))
        Y = (rng.uniform(size=(N, D)) < special.ndtr(np.sin(Xl @ rng.normal(size=(3, D))) * 2)).astype(float)
        models = {"gaussian": engine.BayesianGPLVM(Y, Q, num_inducing=M),
                  "bernoulli": engine.BayesianGPLVM(Y, Q, num_inducing=M, likelihood="bernoulli")}
        evals, iters = {}, {}
        for name, m in models.items():
            x0 = m.get_free()
            perturbed = [(x0 + 1e-9 * i,) for i in range(repeats)]
            evals[name] = C.time_call(m.objective_and_gradient, perturbed, repeats=repeats, warmup=1)
        for name, m in models.items():
            n_it = 10 if N <= 1000 else 4
            t0 = time.perf_counter()
            r = engine.fit(m, max_iters=n_it, warm_up_iters=0)
            iters[name] = (time.perf_counter() - t0) / max(1, r.iterations)
        eg, eb = evals["gaussian"].median, evals["bernoulli"].median
        cg, cb = evals["gaussian"].cpu_min, evals["bernoulli"].cpu_min
        ig, ib = iters["gaussian"], iters["bernoulli"]
        print(f"{N:>7d} {C.fmt_s(eg):>10s} {C.fmt_s(eb):>10s} {eb / eg:>5.2f}x {C.fmt_s(cg):>9s} {C.fmt_s(cb):>9s} "
              f"{cb / cg:>5.2f}x {C.fmt_s(ig):>9s} {C.fmt_s(ib):>9s} {ib / ig:>5.2f}x   (load {loadavg()})", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--splits", type=int, default=5)
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="2 splits, 100 iterations, GP-LVM only, N=1000 timing")
    ap.add_argument("--parts", default="twos,counts,timing")
    args = ap.parse_args(argv)
    parts = set(args.parts.split(","))
    splits, iters = (2, 100) if args.quick else (args.splits, args.iters)
    print(f"bench_binary: load {loadavg()}, numba threads {engine.psi.rbf.numba.get_num_threads()}")
    if "twos" in parts:
        twos(splits, iters, quick=args.quick)
    if "counts" in parts:
        counts(iters)
    if "timing" in parts:
        timing(args.repeats, Ns=(1000,) if args.quick else (1000, 20000))


if __name__ == "__main__":
    main()
