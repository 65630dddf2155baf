"""Rows that are images: recognised from the column names, or shapes a user may pick.

A file of images stored one pixel per column names its columns after the
pixels, e.g. ``pixel_3_4`` / ``px_3_4`` / ``r3c4`` / ``3x4`` (row 3, column 4)
or ``pixel0`` ... ``pixel63`` (row-major index of a square image).
`image_shape_from_names` reads the shape from such names and the order that
puts the columns row by row.  Without such names a square number of columns
may still be images: `square_shape` proposes the shape, and the user
confirms it (the page); `shape_choices` lists every shape the columns fit.
"""

from __future__ import annotations

import math
import re

import numpy as np

__all__ = ["IMAGE_PREFIXES", "MIN_PIXELS", "column_beside_pixels", "image_shape_from_names", "parse_shape",
           "shape_choices", "shape_label", "square_shape"]

#: Name prefixes that mark a single pixel index (``pixel12``) as a pixel of a square image.
IMAGE_PREFIXES = ("pixel", "pixels", "pix", "pxl", "px", "image", "img")
#: Fewest pixels (columns) read or proposed as an image.
MIN_PIXELS = 9

_TWO = re.compile(r"^(\D*?)(\d+)(\D+)(\d+)(\D*)$")  # prefix, row, separator, column, suffix
_ONE = re.compile(r"^(\D*?)(\d+)$")  # prefix, index


def _full_range(values: np.ndarray) -> bool:
    """The integers are consecutive, each once."""
    return values.size > 0 and np.array_equal(np.sort(values), np.arange(values.min(), values.min() + values.size))


def _two_index(names: list[str]):
    parts = [_TWO.match(n) for n in names]
    if not all(parts):
        return None
    skeletons = {(p.group(1).lower(), p.group(3).lower(), p.group(5).lower()) for p in parts}
    if len(skeletons) != 1:
        return None
    rows = np.array([int(p.group(2)) for p in parts])
    cols = np.array([int(p.group(4)) for p in parts])
    r_vals, c_vals = np.unique(rows), np.unique(cols)
    h, w = r_vals.size, c_vals.size
    if h < 2 or w < 2 or h * w != len(names) or not (_full_range(r_vals) and _full_range(c_vals)):
        return None
    flat = (rows - r_vals[0]) * w + (cols - c_vals[0])
    if np.unique(flat).size != flat.size:
        return None
    return (h, w), np.argsort(flat, kind="stable")


def _one_index(names: list[str]):
    parts = [_ONE.match(n) for n in names]
    if not all(parts):
        return None
    prefixes = {p.group(1).lower().strip(" _-.") for p in parts}
    if len(prefixes) != 1 or prefixes.pop() not in IMAGE_PREFIXES:
        return None
    index = np.array([int(p.group(2)) for p in parts])
    side = math.isqrt(len(names))
    if side * side != len(names) or not _full_range(index):
        return None
    return (side, side), np.argsort(index, kind="stable")


def image_shape_from_names(names) -> tuple[tuple[int, int], np.ndarray] | None:
    """((h, w), order) when the column ``names`` name the pixels of h x w images, else None.

    ``order`` (D,) puts the columns row by row: column ``order[k]`` holds pixel
    ``(k // w, k % w)``.  Two numbers in a name are (row, column) -- every name
    of the same shape around them (``pixel_0_0`` ... ``pixel_7_7``, ``r0c0`` ...)
    and every pixel of a full grid present once; one number is a row-major
    index after a pixel prefix (`IMAGE_PREFIXES`: ``pixel0`` ... ``pixel63``)
    with a square number of pixels.  At least `MIN_PIXELS` pixels.
    """
    names = [str(n).strip() for n in names]
    if len(names) < MIN_PIXELS:
        return None
    return _two_index(names) or _one_index(names)


def _skeleton(name: str):
    """What a pixel name looks like without its numbers (None: no pixel name)."""
    two = _TWO.match(name)
    if two:
        return ("two", two.group(1).lower(), two.group(3).lower(), two.group(5).lower())
    one = _ONE.match(name)
    return ("one", one.group(1).lower().strip(" _-.")) if one else None


def column_beside_pixels(names) -> str | None:
    """The one column of ``names`` that is not a pixel when all the others name an image's pixels, else None.

    A file of images often carries one more column -- the digit, the class, an id -- that no
    label guess by name finds (``digit``); left among the pixels it keeps the rows from being
    images.  The page offers it as the label column.
    """
    names = [str(n).strip() for n in names]
    if len(names) <= MIN_PIXELS:
        return None
    shapes = [_skeleton(n) for n in names]
    common = max(set(shapes), key=shapes.count)
    others = [j for j, s in enumerate(shapes) if s != common or s is None]
    if common is None or len(others) != 1:
        return None
    rest = names[:others[0]] + names[others[0] + 1:]
    return names[others[0]] if image_shape_from_names(rest) is not None else None


def square_shape(d: int) -> tuple[int, int] | None:
    """(s, s) when ``d`` columns could be square images (a square number, at least `MIN_PIXELS`), else None."""
    side = math.isqrt(int(d))
    return (side, side) if d >= MIN_PIXELS and side * side == d else None


def shape_choices(d: int) -> list[tuple[int, int]]:
    """Every (h, w) with h * w == ``d`` and both sides at least 2, the squarest first (none below `MIN_PIXELS`)."""
    if d < MIN_PIXELS:
        return []
    pairs = [(h, d // h) for h in range(2, d // 2 + 1) if d % h == 0 and d // h >= 2]
    return sorted(pairs, key=lambda hw: (abs(hw[0] - hw[1]), -hw[1]))


def shape_label(shape) -> str:
    """``(8, 8)`` -> ``"8 × 8"``."""
    return f"{int(shape[0])} × {int(shape[1])}"


def parse_shape(text) -> tuple[int, int] | None:
    """``"8x8"``, ``"8 × 8"``, ``"8, 8"`` -> (8, 8); '' or 'none' -> None; ValueError for anything else."""
    raw = str(text or "").strip().lower()
    if raw in ("", "none"):
        return None
    found = re.fullmatch(r"(\d+)\s*[x×*, ]\s*(\d+)", raw)
    if not found or int(found.group(1)) < 1 or int(found.group(2)) < 1:
        raise ValueError(f"An image shape is height x width, e.g. 8x8; could not read {raw[:20]!r}.")
    return int(found.group(1)), int(found.group(2))
