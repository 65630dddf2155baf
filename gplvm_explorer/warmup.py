"""Compile the engine's numba kernels in the background at server start.

numba compiles on first call (tens of seconds cold, well under a second from
its on-disk cache).  :func:`start` fits a tiny model of each kind for two
iterations on a daemon thread, once per process, so the first Train click
does not wait for the JIT.  :func:`status` is "idle", "running", "done" or
"failed"; the page shows a notice while it is "running".
"""
from __future__ import annotations

import threading
import time

__all__ = ["start", "status", "done", "wait", "elapsed"]

_lock = threading.Lock()
_state = {"status": "idle", "thread": None, "started": None, "finished": None, "error": None}
_done = threading.Event()


def _configs():
    from .session import ModelConfig

    for model in ("bayesian", "sparse", "gplvm"):
        yield ModelConfig(model=model, kernel="rbf", bias=True, white=True, latent_dim=2,
                          num_inducing=5, max_iters=2, seed=0)
    for model in ("bayesian", "sparse"):
        yield ModelConfig(model=model, kernel="linear", bias=True, white=True, latent_dim=2,
                          num_inducing=5, max_iters=2, seed=0)


def _run():
    import numpy as np

    from .session import build_model

    try:
        rng = np.random.default_rng(0)
        Y = rng.standard_normal((20, 4))
        for cfg in _configs():
            try:
                model = build_model(Y, cfg)
                model.fit(optimizer="lbfgs", max_iters=cfg.max_iters)
                model.predict(np.zeros((3, cfg.latent_dim)))
            except Exception as exc:  # one model kind failing must not stop the others
                _state["error"] = f"{cfg.model}/{cfg.kernel}: {exc}"
        _state["status"] = "done" if _state["error"] is None else "failed"
    except BaseException as exc:  # pragma: no cover
        _state["error"] = str(exc)
        _state["status"] = "failed"
    finally:
        _state["finished"] = time.perf_counter()
        _done.set()


def start() -> threading.Thread | None:
    """Start the warm-up once per process (later calls do nothing)."""
    with _lock:
        if _state["thread"] is not None:
            return _state["thread"]
        _state["status"] = "running"
        _state["started"] = time.perf_counter()
        t = threading.Thread(target=_run, name="gplvm-warmup", daemon=True)
        _state["thread"] = t
        t.start()
        return t


def status() -> str:
    return _state["status"]


def done() -> bool:
    """True unless a warm-up is under way (no warm-up at all counts as done)."""
    return _state["status"] != "running"


def wait(timeout: float | None = None) -> bool:
    if _state["thread"] is None:
        return True
    return _done.wait(timeout)


def elapsed() -> float | None:
    if _state["started"] is None or _state["finished"] is None:
        return None
    return _state["finished"] - _state["started"]


def error() -> str | None:
    return _state["error"]
