"""Hand work from background threads to the page's own thread.

Worker threads never touch Bokeh or Panel objects.  They call
:meth:`Dispatcher.soon` with a function; the function runs on the session's
event loop (the Bokeh document's next tick) when served, or when a test calls
:meth:`Dispatcher.flush`.  Requests for the same function coalesce while one
is pending, so a fast producer never floods the page, and nothing runs -- no
polling -- when nothing happens.

Every exception raised by a dispatched function is logged and handed to
``on_error`` (the page shows it); none is swallowed.
"""
from __future__ import annotations

import contextlib
import logging
import threading
from typing import Callable

logger = logging.getLogger(__name__)

__all__ = ["Dispatcher"]


class Dispatcher:
    """Coalescing, thread-safe "run this on the UI thread soon"."""

    def __init__(self, doc=None, on_error: Callable[[str, BaseException], None] | None = None):
        self._doc = doc
        self._on_error = on_error
        self._lock = threading.Lock()
        self._pending: dict[tuple, Callable[[], None]] = {}
        self._order: list[tuple] = []
        self._closed = False

    @property
    def served(self) -> bool:
        return self._doc is not None

    def batch(self):
        """Context manager for a page update that changes many models: Bokeh recomputes the
        document's model graph once at its end instead of after every change (page thread).
        Only for such updates: the recomputation at its end (a walk over every model of the
        page) happens whether or not anything changed."""
        models = getattr(self._doc, "models", None)
        return models.freeze() if models is not None and hasattr(models, "freeze") else contextlib.nullcontext()

    def set_error_handler(self, on_error: Callable[[str, BaseException], None]) -> None:
        self._on_error = on_error

    def soon(self, fn: Callable[[], None]) -> None:
        """Run ``fn()`` on the UI thread (any thread may call this)."""
        key = (id(fn.__self__), id(fn.__func__)) if hasattr(fn, "__func__") else (id(fn), 0)
        with self._lock:
            if self._closed or key in self._pending:
                return
            self._pending[key] = fn
            self._order.append(key)
        if self._doc is not None:
            try:
                # the one Bokeh document method that is safe to call from another thread
                self._doc.add_next_tick_callback(lambda key=key: self._run(key))
            except Exception:  # the session is gone: nothing will ever run it
                logger.debug("next-tick callback refused (session closed?)", exc_info=True)
                with self._lock:
                    self._pending.pop(key, None)

    def flush(self) -> int:
        """Run everything pending now, on the calling thread (tests, non-served use)."""
        count = 0
        while True:
            with self._lock:
                if not self._order:
                    return count
                key = self._order[0]
            self._run(key)
            count += 1

    def pending(self) -> int:
        with self._lock:
            return len(self._order)

    def close(self) -> None:
        """Forget everything pending; later requests are ignored (session destroyed)."""
        with self._lock:
            self._closed = True
            self._pending.clear()
            self._order.clear()

    def _run(self, key: tuple) -> None:
        with self._lock:
            fn = self._pending.pop(key, None)
            if key in self._order:
                self._order.remove(key)
        if fn is None:
            return
        if self._doc is not None:
            from panel.io.state import set_curdoc

            with set_curdoc(self._doc):
                self._call(fn)
        else:
            self._call(fn)

    def _call(self, fn) -> None:
        try:
            fn()
        except Exception as exc:
            name = getattr(fn, "__qualname__", repr(fn))
            logger.exception("Error in a page update (%s)", name)
            if self._on_error is not None:
                try:
                    self._on_error(name, exc)
                except Exception:  # pragma: no cover - the error display itself failed
                    logger.exception("Could not show an error in the page")
