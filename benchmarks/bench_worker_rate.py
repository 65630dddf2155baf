"""Seconds per iteration at 50k rows: ``engine.fit`` alone against the app's training worker.

The page's defaults (Bayesian GP-LVM, RBF + bias + white, Q=5, M=30, L-BFGS)
on a generated N x D data set (default 50,000 x 20).  Both are timed in the
steady state: iterations after the first ``--skip`` (compilation is done
before, by the app's own warm-up, and reported apart), over ``--budget``
seconds of fitting each.

* engine: ``engine.fit`` on the model the page builds (``ModelSpec.build``),
  its callback recording (iteration, elapsed);
* app: a :class:`gplvm_explorer.training.worker.TrainingJob`, the thread the
  page starts on Train (prepared start with fallbacks, the snapshots it
  publishes for the map, progress events), its events drained every 0.2 s as
  the page's pump does; the rate is the one the page shows
  (``TrainingRun.rate``'s rule: progress after iteration ``STEADY_FROM``).

The two alternate (engine, app, engine, app, ...) so they share the machine's
load; the ratio app / engine of each pair is printed, with the load average.
No browser: what the page itself costs (Bokeh updates) is not in the app
figure (benchmarks/bench_app.py measures it in Chromium).

    python benchmarks/bench_worker_rate.py [--rows 50000] [--dim 20] [--budget 20] [--pairs 2]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402
from bench_cost import generate  # noqa: E402


def engine_seconds(model, config, skip: int, budget: float) -> tuple[float, float, int]:
    """(seconds per iteration, seconds per evaluation, iterations) of ``engine.fit`` after ``skip`` iterations."""
    import threading

    import engine

    marks, stop = [], threading.Event()

    def callback(s):
        marks.append((s.iteration, s.elapsed, s.n_evaluations))
        if s.elapsed - marks[min(skip, len(marks) - 1)][1] > budget and len(marks) > skip + 3:
            stop.set()

    engine.fit(model, optimizer=config.optimizer, max_iters=100_000, callback=callback, stop=stop)
    steady = [m for m in marks if m[0] >= skip]
    (i0, e0, n0), (i1, e1, n1) = steady[0], steady[-1]
    return (e1 - e0) / max(i1 - i0, 1), (e1 - e0) / max(n1 - n0, 1), i1


def app_seconds(Y, config, skip: int, budget: float) -> tuple[float, float, int, float]:
    """(seconds per iteration and per evaluation after ``skip``, iterations, seconds to the first
    progress event) through a TrainingJob."""
    from gplvm_explorer.training.events import ProgressEvent
    from gplvm_explorer.training.job import TrainingJob

    job = TrainingJob(1, Y, config, publish_interval=1.0, notify_interval=0.2)
    marks = []
    t0 = time.perf_counter()
    first = None
    job.start()
    try:
        while job.alive:
            time.sleep(0.2)
            for ev in job.drain():
                if isinstance(ev, ProgressEvent) and ev.iteration > 0:
                    marks.append((ev.iteration, ev.elapsed, ev.evaluations))
                    if first is None:
                        first = time.perf_counter() - t0
            steady = [m for m in marks if m[0] >= skip]
            if steady and steady[-1][1] - steady[0][1] > budget:
                break
    finally:
        job.stop()
        job.join(60.0)
    steady = [m for m in marks if m[0] >= skip]
    (i0, e0, n0), (i1, e1, n1) = steady[0], steady[-1]
    return (e1 - e0) / max(i1 - i0, 1), (e1 - e0) / max(n1 - n0, 1), i1, first or float("nan")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--dim", type=int, default=20)
    ap.add_argument("--budget", type=float, default=20.0, help="seconds of steady-state fitting per measurement")
    ap.add_argument("--pairs", type=int, default=2, help="engine/app pairs, alternating")
    ap.add_argument("--skip", type=int, default=None, help="first iterations left out (default: the page's)")
    args = ap.parse_args(argv)

    from gplvm_explorer import warmup
    from gplvm_explorer.catalog import ModelConfig
    from gplvm_explorer.state.training import STEADY_FROM

    skip = STEADY_FROM if args.skip is None else args.skip
    C.header(f"Seconds per iteration at {args.rows} x {args.dim}: engine.fit against the app's worker")
    t0 = time.perf_counter()
    warmup.start()
    warmup.wait()
    print(f"compiled / loaded from the numba cache in {time.perf_counter() - t0:.1f} s (reported apart, not timed)")
    Y = generate(args.rows, args.dim)
    config = ModelConfig()
    print(f"model: {config}; steady state from iteration {skip}, {args.budget:g} s per measurement")
    ratios, eval_ratios = [], []
    for p in range(args.pairs):
        model = config.spec.build(Y, config)
        eng, eng_ev, its = engine_seconds(model, config, skip, args.budget)
        print(f"  pair {p + 1}: engine.fit {eng * 1e3:7.1f} ms/it, {eng_ev * 1e3:7.1f} ms/evaluation "
              f"({its} iterations); {C.machine_load()}", flush=True)
        app, app_ev, app_its, first = app_seconds(Y, config, skip, args.budget)
        print(f"  pair {p + 1}: app worker {app * 1e3:7.1f} ms/it, {app_ev * 1e3:7.1f} ms/evaluation "
              f"({app_its} iterations, first progress after {first:.1f} s); {C.machine_load()}", flush=True)
        ratios.append(app / eng)
        eval_ratios.append(app_ev / eng_ev)
        print(f"  pair {p + 1}: app / engine = {app / eng:.2f} per iteration, {app_ev / eng_ev:.2f} per evaluation",
              flush=True)
    for name, r in (("per iteration", ratios), ("per evaluation", eval_ratios)):
        r.sort()
        print(f"app / engine {name} over {len(r)} pairs: median {r[len(r) // 2]:.2f}, min {r[0]:.2f}, max {r[-1]:.2f}")
    print(C.machine_load())
    return 0


if __name__ == "__main__":
    sys.exit(main())
