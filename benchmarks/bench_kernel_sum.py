"""The app's default kernel (RBF + bias + white) against RBF alone: one bound + gradient.

The Bayesian GP-LVM's evaluation (``model.objective_and_gradient``) at the
base configuration (N=1000, D=12, Q=10, M=50) and at the app's 50k-row
configuration (N=50,000, D=20, Q=5, M=30), on synthetic data, with the kernel
``RBF(Q)`` and with ``RBF(Q) + Bias(Q) + White(Q)``.  The two are timed
round-robin so they share the machine's load; the ratio sum / RBF is what
the bias and white terms cost (the psi statistics of Bias and White are
constants, so ideally little).  Also printed: the psi statistics alone
(``engine.psi.compute`` + ``engine.psi.gradients``) for both kernels.

    python benchmarks/bench_kernel_sum.py [--sizes 1000,50000] [--repeats 15]
    python benchmarks/bench_kernel_sum.py --only sum --sizes 1000 --evals 400

``--evals K`` runs K evaluations of one kernel and prints nothing else: a
whole-process workload for paired timing of two checkouts.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

#: N -> (D, Q, M): the base configuration and the app's 50k-row one.
CONFIGS = {1000: (12, 10, 50), 50_000: (20, 5, 30)}


def config(n):
    return CONFIGS.get(n, (20, 5, 30))


def kernel_of(kind, Q):
    from engine import kernels as K

    k = K.RBF(Q)
    if kind == "sum":
        k = k + K.Bias(Q, variance=0.1) + K.White(Q, variance=0.01)
    return k


def model_of(kind, n, seed=0):
    import engine

    D, Q, M = config(n)
    Y = C.synthetic_like(n, D, q=min(Q, 3), seed=seed)
    return engine.BayesianGPLVM(Y, Q, num_inducing=M, kernel=kernel_of(kind, Q), seed=seed)


def psi_calls(model):
    from engine import psi

    v = model.parameters
    kern = model.kernel_at(v)
    Z, mu, S = v["Z"], v["X_mean"], v["X_variance"]
    rng = np.random.default_rng(1)
    N, M = mu.shape[0], Z.shape[0]
    G1 = rng.standard_normal((N, M))
    G2 = rng.standard_normal((M, M))

    def run(x):
        st = psi.compute(kern, Z, mu * x, S)
        psi.gradients(kern, Z, mu * x, S, -0.5, G1, G2)
        return st

    return run, [(1.0 + 1e-7 * i,) for i in range(4)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,50000")
    ap.add_argument("--repeats", type=int, default=15, help="timed evaluations at N=1000 (fewer at larger N)")
    ap.add_argument("--only", choices=("rbf", "sum"), help="with --evals: the kernel to run")
    ap.add_argument("--evals", type=int, help="run this many evaluations of --only's kernel, print nothing")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]

    if args.evals:
        for n in sizes:
            model = model_of(args.only or "sum", n)
            xs = C.perturbed(model.get_free(), count=args.evals)
            for (x,) in xs:
                model.objective_and_gradient(x)
        return 0

    C.header("Bayesian GP-LVM: RBF + bias + white against RBF alone (bound + gradient)")
    for n in sizes:
        D, Q, M = config(n)
        reps = max(3, int(args.repeats * min(1.0, 2000 / n)))
        models = {kind: model_of(kind, n) for kind in ("rbf", "sum")}
        calls = {}
        for kind, model in models.items():
            calls[f"{kind}: bound+grad"] = (model.objective_and_gradient, C.perturbed(model.get_free(), 4))
        for kind, model in models.items():
            calls[f"{kind}: psi only"] = psi_calls(model)
        times = C.time_interleaved(calls, repeats=reps, warmup=2)
        print(f"\nN={n}, D={D}, Q={Q}, M={M}; {reps} repeats, round-robin; {C.machine_load()}")
        for name, t in times.items():
            print(f"  {name:<20} min {C.fmt_s(t.min):>10}  median {C.fmt_s(t.median):>10}")
        for what in ("bound+grad", "psi only"):
            a, b = times[f"sum: {what}"], times[f"rbf: {what}"]
            print(f"  sum / rbf, {what}: {a.median / b.median:.2f} (median), {a.min / b.min:.2f} (min)")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
