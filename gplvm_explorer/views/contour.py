"""A level line of a small image (marching squares), for drawing the 0.5 contour of a probability map.

The page draws images with Bokeh's ``image`` glyph at x = 0, y = 0 and width w,
height h, so pixel (r, c) of the array as drawn covers [c, c + 1] x [r, r + 1]
and its value sits at the centre (c + 1/2, r + 1/2).  The level line is traced
between the pixel centres by linear interpolation along each cell's edges;
a saddle cell (two diagonal corners above the level) is resolved by the mean
of its corners.  Images are small (at most a few thousand pixels), so plain
numpy per cell row is fast enough and needs no extra dependency.
"""
from __future__ import annotations

import numpy as np

__all__ = ["level_segments"]

# per cell, the corners (bottom-left, bottom-right, top-right, top-left) above the level as bits
# 1, 2, 4, 8 -> the edges the line crosses (0 bottom, 1 right, 2 top, 3 left), in pairs
_EDGES = {
    1: [(3, 0)], 2: [(0, 1)], 3: [(3, 1)], 4: [(1, 2)], 6: [(0, 2)], 7: [(3, 2)], 8: [(2, 3)],
    9: [(2, 0)], 11: [(2, 1)], 12: [(1, 3)], 13: [(1, 0)], 14: [(0, 3)],
}
# saddles: which pairs, when the cell's mean is above (True) or below (False) the level
_SADDLES = {5: {True: [(3, 2), (1, 0)], False: [(3, 0), (1, 2)]},
            10: {True: [(0, 3), (2, 1)], False: [(0, 1), (2, 3)]}}


def level_segments(image, level: float = 0.5) -> tuple[list, list]:
    """(xs, ys): the segments of the ``level`` line of ``image`` (h, w) as drawn (module docstring),
    each a two-point list, ready for Bokeh's ``multi_line``.  NaN pixels break the line."""
    z = np.asarray(image, dtype=float)
    xs, ys = [], []
    if z.ndim != 2 or min(z.shape) < 2:
        return xs, ys
    h, w = z.shape
    for r in range(h - 1):
        for c in range(w - 1):
            bl, br, tr, tl = z[r, c], z[r, c + 1], z[r + 1, c + 1], z[r + 1, c]
            corners = (bl, br, tr, tl)
            if not all(np.isfinite(corners)):
                continue
            code = (bl > level) * 1 + (br > level) * 2 + (tr > level) * 4 + (tl > level) * 8
            if code in (0, 15):
                continue
            pairs = _SADDLES[code][bool(np.mean(corners) > level)] if code in _SADDLES else _EDGES[code]
            for a, b in pairs:
                pa, pb = _crossing(a, r, c, corners, level), _crossing(b, r, c, corners, level)
                xs.append([pa[0], pb[0]])
                ys.append([pa[1], pb[1]])
    return xs, ys


def _crossing(edge, r, c, corners, level):
    """Where the level crosses an edge of cell (r, c), in drawn coordinates (pixel centres at +1/2)."""
    bl, br, tr, tl = corners
    ends = {0: ((0, 0, bl), (1, 0, br)), 1: ((1, 0, br), (1, 1, tr)),
            2: ((1, 1, tr), (0, 1, tl)), 3: ((0, 1, tl), (0, 0, bl))}[edge]
    (x0, y0, v0), (x1, y1, v1) = ends
    t = 0.5 if v1 == v0 else (level - v0) / (v1 - v0)
    return c + 0.5 + x0 + t * (x1 - x0), r + 0.5 + y0 + t * (y1 - y0)
