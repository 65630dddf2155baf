"""The latent points as one image (datashader), computed off the page's thread.

Above a few thousand points the map shows the points as an RGBA image of
O(pixels), coloured by label category.  :func:`rasterise_points` makes it;
:class:`BackgroundRaster` runs it on a thread (the newest request wins, older
ones are dropped) and hands the finished image to the page's thread through
the :class:`~gplvm_explorer.dispatch.Dispatcher`, so the page only swaps an
image in: a click never waits behind a re-rasterisation.

The image travels to the browser zlib-compressed (:func:`pack_rgba`, also on
that thread): a 640 x 400 map is 1 MB as raw RGBA and some 20-60 kB packed;
the browser unpacks it to the very same pixels (:func:`unpack_rgba` is the
inverse, for tests and checks).
"""
from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass
from typing import Callable

import datashader as ds
import datashader.transfer_functions as tf
import numpy as np
import pandas as pd

from .dispatch import Dispatcher
from .state.background import LatestOnly

logger = logging.getLogger(__name__)

__all__ = ["BackgroundRaster", "PointRaster", "pack_rgba", "rasterise_points", "unpack_rgba"]

#: zlib level of the packed image: about 40x smaller than raw at ~20 ms for 640 x 400 (off the page's thread).
PACK_LEVEL = 6


@dataclass(frozen=True, eq=False)
class PointRaster:
    """An RGBA image of points over ``extent`` = (x0, y0, x1, y1); row 0 is the bottom (y0) row."""

    rgba: np.ndarray  # (H, W) uint32, one packed RGBA value per pixel
    extent: tuple
    key: object = None  # what the requester asked for (echoed back)
    packed: bytes = b""  # pack_rgba(rgba): what the browser receives


def pack_rgba(rgba: np.ndarray) -> bytes:
    """zlib stream of an (H, W) uint32 image's bytes, little-endian, row 0 first."""
    return zlib.compress(np.ascontiguousarray(rgba, dtype="<u4").tobytes(), PACK_LEVEL)


def unpack_rgba(packed: bytes, shape: tuple) -> np.ndarray:
    """The (H, W) uint32 image of :func:`pack_rgba` (what the browser's unpacking gives)."""
    return np.frombuffer(zlib.decompress(packed), dtype="<u4").reshape(shape).astype(np.uint32)


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
        self._on_done = on_done
        self._on_error = on_error
        self._runner = LatestOnly(dispatcher, _rasterise, self._apply, name="gplvm-raster")

    def request(self, points, codes, categories, colours, extent, size, key=None) -> None:
        """Rasterise soon (any thread); a newer request replaces one not yet started."""
        self._runner.submit((points, codes, tuple(categories), tuple(colours), tuple(extent), tuple(size), key))

    def _apply(self, done) -> None:
        if isinstance(done, Exception):  # the previous image stays
            if self._on_error is not None:
                self._on_error(done)
        else:
            self._on_done(done)

    def wait(self, timeout: float = 30.0) -> bool:
        """Wait for the thread and apply its image (tests and non-served use)."""
        return self._runner.wait(timeout)

    def close(self) -> None:
        self._runner.close()


def _rasterise(wanted) -> PointRaster:
    points, codes, cats, colours, extent, size, key = wanted
    rgba = rasterise_points(points, codes, cats, colours, extent, size)
    return PointRaster(rgba, extent, key, pack_rgba(rgba))
