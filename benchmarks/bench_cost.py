"""The page's cost model against measured seconds per iteration, per model, at 1k, 20k and 50k rows.

For each model of the catalog and each size (generated data: a curved 3-D sheet in ``--dim`` = 20
columns, the page's default settings Q=5, M=30, bias + white, PCA start):

* ``formula``: the catalog's static estimate (``ModelSpec.config_cost``) before anything is measured;
* ``page``: what the page predicts after it has timed the start of the model it prepares
  (``catalog.time_start``, the same code the page runs: one evaluation after the kernels are
  compiled) -- for the model timed itself, and for every other model scaled by the formulas' ratio
  (``catalog.estimate`` with that timing), as the page shows them;
* ``measured``: the steady state of a real fit (``engine.fit`` with the page's optimiser): seconds
  per iteration over the iterations after the first ``--skip`` (which include one-off costs).

The exact GP-LVM (O(N^3)) and the GPDS (O(N^3) per latent dim) run only up to ``--max-cubic`` rows.

    python benchmarks/bench_cost.py [--sizes 1000 20000 50000] [--dim 20] [--models bayesian sparse svi ...]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402


def generate(n: int, d: int, seed: int = 0) -> np.ndarray:
    """n points near a curved 3-D sheet in d dimensions."""
    rng = np.random.default_rng(seed)
    z = rng.uniform(-2, 2, size=(n, 3))
    feats = np.c_[z, np.sin(z[:, :1]), np.cos(z[:, 1:2]), z[:, :1] * z[:, 2:3]]
    W = rng.standard_normal((feats.shape[1], d)) / np.sqrt(feats.shape[1])
    return feats @ W + 0.05 * rng.standard_normal((n, d))


def steady_seconds(model, config, skip: int, budget: float) -> tuple[float, int]:
    """(seconds per iteration after the first ``skip``, iterations run) of a fit stopped after ``budget`` s."""
    import threading

    import engine

    marks, stop = [], threading.Event()

    def callback(s):
        marks.append((s.iteration, s.elapsed))
        if s.elapsed > budget and len(marks) > skip + 3:
            stop.set()

    engine.fit(model, optimizer=config.optimizer, max_iters=max(skip + 40, 400), callback=callback, stop=stop)
    (i0, t0), (i1, t1) = marks[skip], marks[-1]
    return (t1 - t0) / max(i1 - i0, 1), len(marks)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 20000, 50000])
    ap.add_argument("--dim", type=int, default=20)
    ap.add_argument("--models", nargs="+", default=["bayesian", "sparse", "svi", "gplvm", "gpds", "mrd", "deep"])
    ap.add_argument("--skip", type=int, default=3, help="first iterations left out of the steady state")
    ap.add_argument("--budget", type=float, default=8.0, help="seconds of fitting per measurement")
    ap.add_argument("--max-cubic", type=int, default=2000, help="largest N for the O(N^3) models")
    args = ap.parse_args(argv)

    import engine
    from gplvm_explorer import catalog, warmup
    from gplvm_explorer.catalog import ModelConfig, spec

    C.header(f"Cost model: predicted vs measured seconds per iteration (D={args.dim}, page defaults)")
    t0 = time.perf_counter()
    warmup.start()
    warmup.wait()
    print(f"kernels compiled / loaded from cache in {time.perf_counter() - t0:.1f} s (reported apart, not timed)")
    rows = []
    for n in args.sizes:
        Y = generate(n, args.dim)
        configs = {}
        for key in args.models:
            optimizer = spec(key).optimizers[0]
            configs[key] = ModelConfig(model=key, optimizer=optimizer,
                                       layer_dims=(5, 2) if key == "deep" else None)
        # the page times the start of the model it prepares: the default (Bayesian) one
        timed = configs.get("bayesian") or next(iter(configs.values()))
        with engine.single_blas_thread():
            timing = catalog.time_start(spec(timed.model).build(Y, timed), timed, n, args.dim)
        print(f"N={n}: the page's timing of the {timed.model} start: {timing.seconds_per_evaluation * 1e3:.1f} ms "
              f"per evaluation (first evaluation {timing.first_seconds * 1e3:.1f} ms)", flush=True)
        for key, cfg in configs.items():
            s = spec(key)
            if ("gplvm" == key or "time" in s.inputs) and n > args.max_cubic:
                continue
            formula = catalog.estimate(cfg, n, args.dim).seconds_per_iteration
            page = catalog.estimate(cfg, n, args.dim, timing).seconds_per_iteration
            model = s.build(Y, cfg)
            measured, its = steady_seconds(model, cfg, args.skip, args.budget)
            rows.append((key, n, formula, page, measured, its))
            print(f"  {key:>9} N={n:6d}: formula {formula:8.4f}  page {page:8.4f}  measured {measured:8.4f} s/it "
                  f"(page/measured {page / measured:5.2f}, formula/measured {formula / measured:5.2f}; "
                  f"{its} iterations)", flush=True)
    print("-" * 72)
    print(f"{'model':>9} {'N':>6} {'formula':>9} {'page':>9} {'measured':>9} {'page/meas':>9} {'form/meas':>9}")
    for key, n, formula, page, measured, _ in rows:
        print(f"{key:>9} {n:6d} {formula:9.4f} {page:9.4f} {measured:9.4f} {page / measured:9.2f} "
              f"{formula / measured:9.2f}")
    print(C.blas_summary())
    print(C.machine_load())
    return 0


if __name__ == "__main__":
    sys.exit(main())
