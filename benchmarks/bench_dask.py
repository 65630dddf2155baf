"""DaskBackend benchmark: one bound + gradient evaluation vs number of workers and rows.

For each N, a BayesianGPLVM (Q=10, M=50, D=12, generated data) is evaluated
(objective and every gradient) with the local backend and with a
DaskBackend on LocalCluster(n_workers=w, processes=True,
threads_per_worker=1) for each w, two chunks per worker.  Printed: median
wall time per evaluation, the speed-up over the local backend, and the
fixed cost per evaluation measured at a tiny N (scheduling, pickling,
transfer of the latents and of the partial sums).

Usage::

    .venv/bin/python benchmarks/bench_dask.py [--rows 2000 10000 50000] [--workers 1 2] [--repeats 5]

A model of the cost: t(N, w) ~ t0 + c N / w, t0 the fixed cost per
evaluation, c the local cost per row; on a real cluster with w machines
the speed-up approaches w once c N / w >> t0.

Measured here (2 cores shared with other jobs, load average 10-14 during
the run, so every figure is inflated and noisy; median of 5):

    N        local      1 worker    2 workers
    2,000    67 ms      843 ms      793 ms
    10,000   522 ms     1759 ms     2323 ms
    40,000   2836 ms    5580 ms     6483 ms

On this machine the local backend already uses both cores (the psi
module's own thread pool), so workers cannot win: a worker process adds
its own pool on the same two cores.  (The workers used to run each
chunk's psi forward pass twice, since the psi module keeps one forward
pass per thread and a worker runs all its chunks' forward passes before
their backward passes; each chunk now keeps its own.  Paired runs, before
/ after, N=40,000, median ms per evaluation, load average 1-2: 1 worker
924, 985 / 735, 855, 796; 2 workers 880, 814 / 621, 743, 704: 0.8-0.86x.
N=10,000: 1 worker 305, 322 / 259, 277, 260; 2 workers 293, 281 / 260,
286, 262.)  The bound equals the local
one to 1e-12 relative in every case.  In isolation (one worker, N=2,000,
warm) a forward pass through the cluster took 44 ms against 41 ms locally
and an empty task 7.5 ms: the fixed cost is a few ms per task, so on w
machines with their own cores the time per evaluation should fall as
c N / w + t0 with t0 of order 10-50 ms (scheduling, pickling the kernel and
Z, shipping the N x Q latents and gathering O(chunks (M^2 + M D)) sums).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import engine  # noqa: E402

from _common import synthetic_like  # noqa: E402


def median_eval(model, repeats):
    model.objective_gradients()  # warm-up (JIT cache load on the workers, first transfer)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        model.objective_gradients()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, nargs="+", default=[2000, 10000, 50000])
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--tiny", type=int, default=100, help="N of the fixed-cost measurement")
    args = p.parse_args(argv)
    import distributed

    engine.psi.warm_up()
    print(f"one bound + gradient evaluation, Q=10, M=50, D=12; {os.cpu_count()} cores on this machine")
    data = {n: synthetic_like(n, 12, seed=n) for n in sorted(set(args.rows + [args.tiny]))}
    local = {}
    for n, Y in data.items():
        m = engine.BayesianGPLVM(Y, 10, num_inducing=50)
        local[n] = median_eval(m, args.repeats)
        print(f"  local backend      N={n:>7,d}: {local[n] * 1e3:9.1f} ms", flush=True)
    for w in args.workers:
        with distributed.LocalCluster(n_workers=w, processes=True, threads_per_worker=1, dashboard_address=None,
                                      silence_logs=50) as cluster, distributed.Client(cluster) as client:
            for n, Y in data.items():
                backend = engine.DaskBackend(client)
                m = engine.BayesianGPLVM(Y, 10, num_inducing=50, backend=backend)
                t = median_eval(m, args.repeats)
                ref = engine.BayesianGPLVM(Y, 10, num_inducing=50)
                same = abs(m.objective() - ref.objective()) / abs(ref.objective())
                print(f"  dask, {w} worker(s)  N={n:>7,d}: {t * 1e3:9.1f} ms   speed-up vs local "
                      f"{local[n] / t:5.2f}x   ({backend.num_chunks} chunks; bound rel. diff {same:.1e})",
                      flush=True)
                backend.close()
    print("fixed cost per evaluation ~ the dask time at the tiny N; cost per row ~ (t(N) - t(tiny)) / N.")


if __name__ == "__main__":
    main()
