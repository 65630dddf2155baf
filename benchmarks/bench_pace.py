"""The pace control off costs the fit nothing: a page's training job, unpaced vs with the pace at real time.

Each round runs the same fit (the Bayesian GP-LVM on the three-phase flow sample,
a fixed number of L-BFGS iterations, no convergence rule) through
``TrainingJob`` three ways, interleaved so they share the machine's load:
without a Pace (as before the control existed), with a Pace at 0 (the control's
"Real time"), and with a Pace at 20 iterations per second (the rate it holds).
Prints the times, the ratio "real time / no pace" (1.00 is the target) and
the paced run's iterations per second.

Usage: ``python benchmarks/bench_pace.py [--iters 60] [--repeats 5]``
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

from _common import fmt_s, header, time_interleaved  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iters", type=int, default=60)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args(argv)

    from gplvm_explorer.catalog import ModelConfig
    from gplvm_explorer.data import load_sample
    from gplvm_explorer.training import Limiter
    from gplvm_explorer.training.pace import Pace
    from gplvm_explorer.training import TrainingJob

    header("Pace control: a training job's time with the pace off vs no pace object")
    Y = load_sample("three-phase-flow").values
    config = ModelConfig(model="bayesian", latent_dim=5, num_inducing=25, max_iters=args.iters,
                         until_converged=False)
    iterations = {}

    def run(pace):
        job = TrainingJob(1, Y, config, limiter=Limiter(1), pace=pace, publish_interval=1e9)
        job.start()
        job.join()
        events = job.drain()
        iterations[id(pace)] = max(getattr(e, "iteration", 0) for e in events)

    paced = Pace(rate=20.0)
    t = time_interleaved({"no pace": (run, [(None,)]), "real time": (run, [(Pace(),)])},
                         repeats=args.repeats, warmup=1)
    for name, timing in t.items():
        print(f"{name:>10}: {timing}")
    print(f"ratio real time / no pace (median): {t['real time'].median / t['no pace'].median:.3f}")
    t0 = time.perf_counter()
    run(paced)
    dt = time.perf_counter() - t0
    print(f"paced at 20 it/s: {iterations[id(paced)]} iterations in {fmt_s(dt)} "
          f"= {iterations[id(paced)] / dt:.1f} it/s (build included)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
