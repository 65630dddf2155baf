"""Label colouring: categories, palette and a legend that stays small.

Built once per dataset (labels never travel to the browser per update):

* categorical labels: the ``max_categories - 1`` most frequent values keep a
  colour of their own, every other value is drawn as "other" (grey);
* numeric labels with many distinct values (a measured quantity): cut into
  quantile ranges coloured along a sequential scale, shown as a colour bar.

``codes[i]`` is the index of point ``i``'s category in ``categories``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["LabelColouring", "NO_LABELS", "OTHER", "PALETTE", "SEQUENTIAL", "colour_labels"]

#: Okabe & Ito's colour-blind-safe palette (black moved last), then two more.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
           "#8c564b", "#17becf"]
#: A sequential scale (viridis stops) for numeric labels.
SEQUENTIAL = ["#440154", "#46327e", "#365c8d", "#277f8e", "#1fa187", "#4ac16d", "#a0da39", "#fde725"]
OTHER = "other"
OTHER_COLOUR = "#9aa5b1"
NO_LABELS = "all points"


@dataclass(frozen=True, eq=False)
class LabelColouring:
    """How points are coloured: per-point category codes and a capped legend."""

    name: str  # the label column's name ("" when there are no labels)
    categories: tuple  # display strings, one per colour
    colours: tuple  # one per category
    counts: tuple  # points per category
    codes: np.ndarray  # (N,) int, index into categories
    continuous: bool  # numeric ranges along a sequential scale (draw as a colour bar)
    distinct: int  # distinct label values in the data
    value_range: tuple | None = None  # (min, max) of numeric labels

    @property
    def n(self) -> int:
        return int(self.codes.shape[0])

    @property
    def capped(self) -> bool:
        return (not self.continuous) and self.distinct > len(self.categories)

    def colour_key(self) -> dict:
        """Category -> colour, for datashader and the glyphs."""
        return dict(zip(self.categories, self.colours))

    def label_of(self, index: int, labels) -> str:
        """The original label of point ``index`` as text (not the capped category)."""
        if labels is None:
            return ""
        v = labels[int(index)]
        return _fmt(v) if isinstance(v, (float, np.floating)) else str(v)


def _fmt(x, digits=3) -> str:
    x = float(x)
    if not np.isfinite(x):
        return str(x)
    return f"{x:.{digits}g}" if abs(x) < 1e5 else f"{x:.{digits}e}"


def colour_labels(labels, n: int, name: str = "", max_categories: int = 10, bins: int = 8) -> LabelColouring:
    """Colour ``n`` points by ``labels`` (None, ints, strings or floats)."""
    if max_categories < 2:
        raise ValueError(f"Expected max_categories >= 2, got {max_categories} instead.")
    if labels is None:
        return LabelColouring("", (NO_LABELS,), (PALETTE[0],), (n,), np.zeros(n, dtype=np.int32), False, 0)
    labels = np.asarray(labels)
    if labels.shape != (n,):
        raise ValueError(f"Expected {n} labels, got shape {labels.shape} instead.")
    values, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    distinct = len(values)
    numeric = labels.dtype.kind in "fiu"
    if numeric and (labels.dtype.kind == "f" or distinct > max_categories):
        return _binned(labels.astype(float), name, bins, distinct)
    if distinct <= max_categories:
        keep = np.arange(distinct)  # natural (sorted) order
    else:
        by_count = np.argsort(-counts, kind="stable")
        keep = np.sort(by_count[: max_categories - 1])
    lut = np.full(distinct, len(keep), dtype=np.int32)
    lut[keep] = np.arange(len(keep), dtype=np.int32)
    codes = lut[inverse]
    cats = [str(values[k]) for k in keep]
    cols = [PALETTE[i % len(PALETTE)] for i in range(len(keep))]
    cnts = [int(counts[k]) for k in keep]
    if len(keep) < distinct:
        cats.append(OTHER if OTHER not in cats else f"({OTHER})")
        cols.append(OTHER_COLOUR)
        cnts.append(int(n - sum(cnts)))
    return LabelColouring(name, tuple(cats), tuple(cols), tuple(cnts), codes, False, distinct)


def _binned(values: np.ndarray, name: str, bins: int, distinct: int) -> LabelColouring:
    lo, hi = float(values.min()), float(values.max())
    edges = np.unique(np.quantile(values, np.linspace(0, 1, bins + 1)))
    if len(edges) < 2:
        edges = np.array([lo, hi if hi > lo else lo + 1.0])
    k = len(edges) - 1
    codes = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, k - 1).astype(np.int32)
    cats = tuple(f"{_fmt(edges[i])}–{_fmt(edges[i + 1])}" for i in range(k))
    idx = np.linspace(0, len(SEQUENTIAL) - 1, k).round().astype(int) if k > 1 else np.array([len(SEQUENTIAL) // 2])
    cols = tuple(SEQUENTIAL[i] for i in idx)
    cnts = tuple(int(c) for c in np.bincount(codes, minlength=k))
    return LabelColouring(name, cats, cols, cnts, codes, True, distinct, (lo, hi))
