"""Compile the engine's numba kernels in the background at server start.

numba compiles on first call (tens of seconds cold, well under a second from
its on-disk cache).  :func:`start` fits a tiny model of each kind for two
iterations on a daemon thread, once per process, so the first Train click
does not wait for the JIT.  :func:`status` is "idle", "running", "done" or
"failed"; the page shows a notice while it is "running".
"""
from __future__ import annotations

import logging
import threading
import time

logger = logging.getLogger(__name__)

__all__ = ["start", "status", "done", "wait", "elapsed", "on_done"]

_lock = threading.Lock()
_state = {"status": "idle", "thread": None, "started": None, "finished": None, "error": None}
_done = threading.Event()
_listeners: list = []


def _configs():
    from .catalog import CATALOG, ModelConfig

    for spec in CATALOG.values():
        for kernel in ("rbf", "linear"):
            if kernel in spec.kernels:
                yield ModelConfig(model=spec.key, kernel=kernel, bias=True, white=True, latent_dim=2,
                                  num_inducing=5, max_iters=2, seed=0)


def _run():
    import numpy as np
    from engine.errors import UnsupportedOperationError

    try:
        rng = np.random.default_rng(0)
        Y = rng.standard_normal((20, 4))
        for cfg in _configs():
            try:
                model = cfg.spec.build(Y, cfg)
                model.fit(optimizer="lbfgs", max_iters=cfg.max_iters)
                model.predict(np.zeros((3, cfg.latent_dim)))
                if cfg.latent_dim >= 2:  # the latent map's magnification shading (models with a metric)
                    try:
                        model.magnification(np.zeros((3, cfg.latent_dim)), dims=(0, 1))
                    except UnsupportedOperationError:
                        pass
            except Exception as exc:  # one model kind failing must not stop the others
                logger.exception("Warm-up of %s/%s failed", cfg.model, cfg.kernel)
                _state["error"] = f"{cfg.model}/{cfg.kernel}: {exc}"
        _state["status"] = "done" if _state["error"] is None else "failed"
    except BaseException as exc:  # pragma: no cover
        logger.exception("Warm-up failed")
        _state["error"] = str(exc)
        _state["status"] = "failed"
    finally:
        _state["finished"] = time.perf_counter()
        _done.set()
        with _lock:
            listeners = list(_listeners)
            _listeners.clear()
        for fn in listeners:
            try:
                fn()
            except Exception:
                logger.exception("A warm-up listener failed")


def on_done(fn):
    """Call ``fn()`` (from the warm-up thread) when the warm-up ends; returns an unsubscribe function.

    If no warm-up is under way, nothing is registered and ``fn`` is not called.
    """
    with _lock:
        if _state["status"] != "running":
            return lambda: None
        _listeners.append(fn)

    def unsubscribe():
        with _lock:
            if fn in _listeners:
                _listeners.remove(fn)
    return unsubscribe


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
