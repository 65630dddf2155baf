"""Timing of the RBF psi statistics (forward) and their gradients (backward).

    python benchmarks/bench_psi.py            # warm timings, default grid
    python benchmarks/bench_psi.py --cold     # also time a cold compile (fresh numba cache)
    python benchmarks/bench_psi.py --quick    # N=1000, Q=10, M=50 only

Prints the first-call time (compile, or load from numba's on-disk cache),
then min / median over repeats for each (N, M) at Q=10.  "psi2" columns are
the compiled Psi2 loops alone; "fwd" / "bwd" are the whole of
``rbf.psi_stats`` / ``rbf.psi_gradients`` (psi0, Psi1, Psi2 and the BLAS
glue).  BLAS is kept to one thread (numba's threads use the cores).
Timings on a shared machine are noisy: compare ratios within one run.
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numba  # noqa: E402

from engine.psi import rbf  # noqa: E402


def problem(N, M, Q, seed=0):
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((M, Q))
    mu = rng.standard_normal((N, Q))
    S = rng.uniform(0.05, 0.5, (N, Q))
    ell = rng.uniform(0.8, 2.0, Q)
    G1 = rng.standard_normal((N, M))
    G2 = rng.standard_normal((M, M))
    return 1.3, ell, Z, mu, S, 0.7, G1, G2


def timeit(fn, repeats, min_time=0.3):
    fn()
    times = []
    t_start = time.perf_counter()
    while len(times) < repeats or (time.perf_counter() - t_start < min_time and len(times) < 200):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * min(times), 1e3 * float(np.median(times))


def first_call():
    v, ell, Z, mu, S, g0, G1, G2 = problem(70, 5, 3)
    t0 = time.perf_counter()
    rbf.psi_stats(v, ell, Z, mu, S)
    rbf.psi_gradients(g0, G1, G2, v, ell, Z, mu, S)
    return time.perf_counter() - t0


def bench(N, M, Q, repeats):
    v, ell, Z, mu, S, g0, G1, G2 = problem(N, M, Q)
    _, l, Zc, muc, Sc = rbf._prepare(v, ell, Z, mu, S)
    _, c, Ut, Rt = rbf._psi2_terms(v, l, Zc, muc, Sc)
    Gs = 0.5 * (G2 + G2.T)
    Gp = np.ascontiguousarray(Gs[np.tril_indices(M)])
    k_fwd = timeit(lambda: rbf._psi2_packed(c, Ut, Rt, Zc), repeats)
    k_bwd = timeit(lambda: rbf._psi2_reductions(c, Ut, Rt, Zc, Gp), repeats)
    fwd = timeit(lambda: rbf.psi_stats(v, ell, Z, mu, S), repeats)
    bwd = timeit(lambda: rbf.psi_gradients(g0, G1, G2, v, ell, Z, mu, S), repeats)
    return k_fwd, k_bwd, fwd, bwd


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cold", action="store_true", help="time a compile with an empty numba cache")
    parser.add_argument("--quick", action="store_true", help="only N=1000, Q=10, M=50")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--first-call-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.first_call_only:
        print(f"{first_call():.2f}")
        return
    if args.cold:
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, NUMBA_CACHE_DIR=cache)
            out = subprocess.run([sys.executable, __file__, "--first-call-only"], env=env, capture_output=True, text=True, check=True)
        print(f"cold compile (empty numba cache), forward + backward: {float(out.stdout.split()[-1]):.1f} s")
    print(f"first call (compile or load from numba's cache): {first_call():.2f} s")
    print(f"worker threads (numba.get_num_threads()): {numba.get_num_threads()}")

    grid = [(1000, 50)] if args.quick else [(1000, 25), (1000, 50), (1000, 100), (1000, 200), (10000, 50), (10000, 200)]
    Q = 10
    print(f"\nQ = {Q}; milliseconds, min / median")
    print(f"{'N':>6} {'M':>4} | {'psi2 fwd':>15} {'psi2 bwd':>15} | {'fwd (all)':>15} {'bwd (all)':>15}")
    for N, M in grid:
        reps = args.repeats if N * M * M <= 1000 * 100 * 100 else 3
        k_fwd, k_bwd, fwd, bwd = bench(N, M, Q, reps)
        cells = " ".join(f"{a:7.2f} /{b:7.2f}" for a, b in (k_fwd, k_bwd))
        cells2 = " ".join(f"{a:7.2f} /{b:7.2f}" for a, b in (fwd, bwd))
        print(f"{N:>6} {M:>4} | {cells} | {cells2}", flush=True)


if __name__ == "__main__":
    main()
