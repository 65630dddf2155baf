"""Shared helpers for the benchmark scripts (not part of the test run).

- ``time_call``: wall-clock timing, min / median over repeats after warm-up.
- ``blas_threads``: pin BLAS threads through threadpoolctl when it is installed
  (a no-op otherwise); ``blas_summary`` says which BLAS and how many threads.
- ``import_gpy``: GPy if importable, else ``None`` after printing
  "GPy not importable: skipped comparison".
- ``load_oil`` / ``resolve_data_path``: the oil-flow arrays from a path given on
  the command line (relative paths are tried against the working directory,
  then against the repository root).
"""
from __future__ import annotations

import contextlib
import os
import platform
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
#: Default location of the oil-flow data, relative to the repository root.
DEFAULT_OIL = "../shared/data/oil_flow.npz"

try:  # optional: pinning BLAS threads
    import threadpoolctl
except ImportError:  # pragma: no cover - depends on the environment
    threadpoolctl = None


# --------------------------------------------------------------------- timing
@dataclass
class Timing:
    """Wall-clock seconds of each timed call (warm-up calls excluded)."""

    times: list[float] = field(default_factory=list)
    first: float | None = None  # the first warm-up call (JIT / cache load)
    cpu: list[float] = field(default_factory=list)  # process CPU seconds of each timed call

    @property
    def min(self) -> float:
        return min(self.times)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def cpu_min(self) -> float:
        """Least process CPU seconds of a timed call: the work done, all threads counted.

        Less sensitive than wall time to other load on the machine (which
        takes cores away, not CPU seconds): on a busy machine compare these.
        """
        return min(self.cpu) if self.cpu else float("nan")

    @property
    def cpu_per_wall(self) -> float:
        """Median process CPU time over wall time: ~1 single-threaded, ~2 on two busy cores."""
        return statistics.median(c / t for c, t in zip(self.cpu, self.times)) if self.cpu else float("nan")

    def __str__(self) -> str:
        return (f"min {fmt_s(self.min)}  median {fmt_s(self.median)}"
                f"  ({len(self.times)} repeats, cpu/wall {self.cpu_per_wall:.2f})")


def fmt_s(seconds: float) -> str:
    """Seconds as a short human figure: '183.2 ms', '2.41 s'."""
    if seconds < 1.0:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def time_call(fn, args_list=None, repeats: int = 7, warmup: int = 1) -> Timing:
    """Time ``fn(*args)`` ``repeats`` times after ``warmup`` untimed calls.

    ``args_list`` is a sequence of argument tuples used in turn (so that a
    library cannot answer from a cache keyed on an unchanged input); ``None``
    calls ``fn()`` without arguments.
    """
    if args_list is None:
        args_list = [()]
    out = Timing()
    k = 0
    for i in range(warmup):
        t0 = time.perf_counter()
        fn(*args_list[k % len(args_list)])
        dt = time.perf_counter() - t0
        if i == 0:
            out.first = dt
        k += 1
    for _ in range(repeats):
        c0 = time.process_time()
        t0 = time.perf_counter()
        fn(*args_list[k % len(args_list)])
        out.times.append(time.perf_counter() - t0)
        out.cpu.append(time.process_time() - c0)
        k += 1
    return out


def time_interleaved(calls: dict, repeats: int = 7, warmup: int = 1) -> dict:
    """Time several implementations round-robin, so they share the machine's load.

    ``calls`` maps a name to ``(fn, args_list)``; each round times one call of
    each in turn (warm-up rounds first). On a shared machine this keeps the
    ratio between them fair even when the background load changes.
    Returns name -> :class:`Timing`.
    """
    out = {name: Timing() for name in calls}
    for r in range(warmup + repeats):
        for name, (fn, args_list) in calls.items():
            args = args_list[r % len(args_list)] if args_list else ()
            c0 = time.process_time()
            t0 = time.perf_counter()
            fn(*args)
            dt = time.perf_counter() - t0
            dc = time.process_time() - c0
            if r == 0:
                out[name].first = dt
            if r >= warmup:
                out[name].times.append(dt)
                out[name].cpu.append(dc)
    return out


def interleaved_over_threads(calls: dict, repeats: int, thread_counts=(1, 2), warmup: int = 1,
                             quiet: bool = False):
    """:func:`time_interleaved` under each BLAS thread count; prints one line per (count, name).

    A count of ``None`` is the default setting: no limit is set around the
    calls. Returns (results {n: {name: Timing}}, best {name: n}), best being
    the thread count of each name's lowest minimum. Without threadpoolctl only
    the default setting is measured (key ``None``).
    """
    if threadpoolctl is None:
        thread_counts = (None,)
    results = {}
    for n in thread_counts:
        with blas_threads(n):
            results[n] = time_interleaved(calls, repeats=repeats, warmup=warmup)
        if not quiet:
            for name, t in results[n].items():
                print(f"  BLAS threads={n if n is not None else 'default'}  {name:<14} {t}", flush=True)
    best = {name: min(results, key=lambda n: results[n][name].min) for name in calls}
    return results, best


def perturbed(x: np.ndarray, count: int = 3, scale: float = 1e-7, seed: int = 0):
    """``count`` argument tuples ``(x + tiny noise,)`` to defeat value caches."""
    rng = np.random.default_rng(seed)
    return [(x + scale * rng.standard_normal(x.shape),) for _ in range(count)]


# ------------------------------------------------------------------ threading
def blas_threads(n: int | None):
    """Context manager limiting BLAS to ``n`` threads by hand (``None``: no change, the default settings)."""
    if n is None or threadpoolctl is None:
        return contextlib.nullcontext()
    return threadpoolctl.threadpool_limits(limits=n, user_api="blas")


def can_pin_blas() -> bool:
    return threadpoolctl is not None


def blas_summary() -> str:
    """Which BLAS libraries are loaded and with how many threads."""
    if threadpoolctl is None:
        return "BLAS: unknown (threadpoolctl not installed: threads not pinned)"
    parts = []
    for info in threadpoolctl.threadpool_info():
        if info.get("user_api") != "blas":
            continue
        parts.append(f"{info.get('internal_api')} {info.get('version')} "
                     f"({info.get('architecture', '?')}, "
                     f"{info.get('num_threads')} threads, "
                     f"{Path(info.get('filepath', '?')).name})")
    return "BLAS: " + ("; ".join(parts) if parts else "none loaded yet")


def current_blas_threads() -> int | None:
    if threadpoolctl is None:
        return None
    counts = [i["num_threads"] for i in threadpoolctl.threadpool_info()
              if i.get("user_api") == "blas"]
    return max(counts) if counts else None


def environment_summary() -> str:
    lines = [
        f"Python {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} cores; numpy {np.__version__}",
    ]
    try:
        import scipy
        lines[0] += f", scipy {scipy.__version__}"
    except ImportError:
        pass
    try:
        import numba
        lines[0] += (f", numba {numba.__version__} "
                     f"({numba.config.NUMBA_NUM_THREADS} threads)")
    except ImportError:
        pass
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                "NUMBA_NUM_THREADS"):
        if var in os.environ:
            lines.append(f"{var}={os.environ[var]}")
    lines.append(blas_summary())
    return "\n".join(lines)


# ----------------------------------------------------------------------- GPy
def import_gpy():
    """GPy if importable (its version is printed), else ``None``."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import GPy  # noqa: F401
    except Exception as exc:  # ImportError, or a broken binary extension
        print(f"GPy not importable: skipped comparison ({type(exc).__name__}: {exc})")
        return None
    print(f"GPy {GPy.__version__} importable: measuring it in the same run")
    return GPy


def best_over_threads(measure, thread_counts=(1, 2), label: str = ""):
    """Run ``measure()`` under each BLAS thread count; return (best_n, {n: Timing}).

    Without threadpoolctl only the default setting is measured (key ``None``).
    """
    if threadpoolctl is None:
        thread_counts = (None,)
    results = {}
    for n in thread_counts:
        with blas_threads(n):
            results[n] = measure()
        if label:
            print(f"  {label} BLAS threads={n if n is not None else 'default'}: {results[n]}")
    best = min(results, key=lambda n: results[n].min)
    return best, results


# ---------------------------------------------------------------------- data
def resolve_data_path(path: str | os.PathLike) -> Path:
    """``path`` as given, or relative to the repository root if that exists."""
    p = Path(path)
    if p.is_absolute() or p.exists():
        return p
    alt = REPO_ROOT / p
    return alt if alt.exists() else p


def load_oil(path: str | os.PathLike = DEFAULT_OIL):
    """(Y (N, D), labels (N,)) from the oil-flow ``.npz``; ``None`` if missing."""
    p = resolve_data_path(path)
    if not p.exists():
        return None
    with np.load(p, allow_pickle=False) as data:
        Y = np.ascontiguousarray(data["Y"], dtype=np.float64)
        labels = np.asarray(data["labels"])
    if labels.ndim == 2:  # one-hot
        labels = labels.argmax(axis=1)
    return Y, labels


def synthetic_like(n: int, d: int = 12, q: int = 3, seed: int = 0) -> np.ndarray:
    """Smooth nonlinear data of shape (n, d) from a q-dimensional latent space."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, q))
    W = rng.standard_normal((q, d))
    b = rng.uniform(0, 2 * np.pi, d)
    Y = np.sin(X @ W + b) + 0.5 * (X @ W) + 0.05 * rng.standard_normal((n, d))
    return np.ascontiguousarray(Y)


def base_data(path, n: int = 1000, d: int = 12):
    """The oil-flow Y when the file is there, else synthetic data of that shape."""
    loaded = load_oil(path)
    if loaded is not None:
        Y = loaded[0]
        print(f"data: oil flow {Y.shape[0]}x{Y.shape[1]} from {path}")
        return Y
    print(f"data: {path} not found; synthetic {n}x{d} data instead")
    return synthetic_like(n, d)


def machine_load() -> str:
    """The 1-minute load average against the core count (other work on the machine)."""
    try:
        load1 = os.getloadavg()[0]
    except (AttributeError, OSError):
        return "load average: unknown"
    return f"load average (1 min) {load1:.2f} on {os.cpu_count()} cores"


def header(title: str) -> None:
    print("=" * 72)
    print(title)
    print(environment_summary())
    print(machine_load() + "; cpu/wall in the timings: ~1 one busy core, ~2 two")
    print("=" * 72)
    sys.stdout.flush()


def engine_has(*names: str) -> bool:
    """True when ``engine`` exposes every one of ``names``."""
    try:
        import engine
    except ImportError:
        return False
    return all(hasattr(engine, n) for n in names)
