"""The latent points as one image (datashader), computed off the page's thread.

Above a few thousand points the map shows the points as an RGBA image of
O(pixels), coloured by label category.  :func:`rasterise_points` makes it;
:class:`BackgroundRaster` runs it on a thread (the newest request wins, older
ones are dropped) and hands the finished image to the page's thread through
the :class:`~gplvm_explorer.dispatch.Dispatcher`, so the page only swaps an
image in: a click never waits behind a re-rasterisation.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Callable

import datashader as ds
import datashader.transfer_functions as tf
import numpy as np
import pandas as pd

from .dispatch import Dispatcher

logger = logging.getLogger(__name__)

__all__ = ["BackgroundRaster", "PointRaster", "rasterise_points"]


@dataclass(frozen=True, eq=False)
class PointRaster:
    """An RGBA image of points over ``extent`` = (x0, y0, x1, y1); row 0 is the bottom (y0) row."""

    rgba: np.ndarray  # (H, W) uint32, one packed RGBA value per pixel
    extent: tuple
    key: object = None  # what the requester asked for (echoed back)


def rasterise_points(points: np.ndarray, codes: np.ndarray, categories, colours, extent: tuple,
                     size: tuple = (640, 400)) -> np.ndarray:
    """(H, W) uint32 RGBA image of ``points`` (N, 2) coloured by category ``codes`` (N,).

    Counts per pixel and category, mixed in the categories' ``colours``; isolated
    points are spread to at most 3 pixels so they stay visible.
    """
    x0, y0, x1, y1 = (float(v) for v in extent)
    W, H = int(size[0]), int(size[1])
    cats = list(categories)
    canvas = ds.Canvas(plot_width=W, plot_height=H, x_range=(x0, x1), y_range=(y0, y1))
    frame = pd.DataFrame({"x": points[:, 0], "y": points[:, 1],
                          "cat": pd.Categorical.from_codes(np.asarray(codes, dtype=np.int32), categories=cats)})
    agg = canvas.points(frame, "x", "y", agg=ds.count_cat("cat"))
    img = tf.shade(agg, color_key=dict(zip(cats, colours)), min_alpha=180)
    img = tf.dynspread(img, threshold=0.6, max_px=3)
    return np.ascontiguousarray(img.data, dtype=np.uint32)


class BackgroundRaster:
    """One rasterising thread at a time per map; ``on_done(PointRaster)`` runs on the page's thread."""

    def __init__(self, dispatcher: Dispatcher, on_done: Callable[[PointRaster], None],
                 on_error: Callable[[Exception], None] | None = None):
        self._dispatcher = dispatcher
        self._on_done = on_done
        self._on_error = on_error
        self._lock = threading.Lock()
        self._wanted = None
        self._done = None
        self._busy = False
        self._idle = threading.Event()
        self._idle.set()
        self._closed = False

    def request(self, points, codes, categories, colours, extent, size, key=None) -> None:
        """Rasterise soon (any thread); a newer request replaces one not yet started."""
        with self._lock:
            if self._closed:
                return
            self._wanted = (points, codes, tuple(categories), tuple(colours), tuple(extent), tuple(size), key)
            if self._busy:
                return
            self._busy = True
            self._idle.clear()
        threading.Thread(target=self._loop, name="gplvm-raster", daemon=True).start()

    def _loop(self) -> None:
        while True:
            with self._lock:
                wanted, self._wanted = self._wanted, None
                if wanted is None or self._closed:
                    self._busy = False
                    self._idle.set()
                    return
            points, codes, cats, colours, extent, size, key = wanted
            try:
                done = PointRaster(rasterise_points(points, codes, cats, colours, extent, size), extent, key)
            except Exception as exc:  # shown in the page; the previous image stays
                logger.exception("Could not rasterise the latent points")
                done = exc
            with self._lock:
                self._done = done
            self._dispatcher.soon(self._apply)

    def _apply(self) -> None:
        with self._lock:
            done, self._done = self._done, None
        if isinstance(done, Exception):
            if self._on_error is not None:
                self._on_error(done)
        elif done is not None:
            self._on_done(done)

    def wait(self, timeout: float = 30.0) -> bool:
        """Wait for the thread and apply its image (tests and non-served use)."""
        ok = self._idle.wait(timeout)
        self._dispatcher.flush()
        return ok

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._wanted = self._done = None
