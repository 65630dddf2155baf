"""The registry of bundled samples: `samples()` and `load_sample()`.

The digits sample is listed only when scikit-learn is importable. Generated
data are cached per (name, seed) with read-only arrays; callers get copies.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from typing import Callable

from .dataset import Dataset, SampleInfo
from .errors import DataError
from .generators import (
    ANGLE_BUCKET, FLOW_D, FLOW_PER_CLASS, GLYPH_N, GLYPH_SCALED_N, GLYPH_SIZE, SWISS_BUCKETS,
    SWISS_N, TWO_VIEW_GRID, TWO_VIEW_N, TWO_VIEW_SENSORS, binary_glyph, occluded_glyph, rotating_glyph,
    rotating_scaled_glyph, sklearn_digits, swiss_roll, three_phase_flow, two_views, walking_gap,
)
from .prepare import check_seed, prepare


@dataclass(frozen=True)
class _Sample:
    info: SampleInfo
    make: Callable[[int], Dataset]
    requires: str | None = None  # importable module needed to list it


_REGISTRY: tuple[_Sample, ...] = (
    _Sample(
        SampleInfo("rotating-glyph", "Rotating glyph (images)",
                   "A drawn '7' rotated through a full turn: a closed 1-D loop of images.",
                   (GLYPH_N, GLYPH_SIZE ** 2), (GLYPH_SIZE, GLYPH_SIZE),
                   f"angle ({ANGLE_BUCKET} degree bucket)"),
        rotating_glyph,
    ),
    _Sample(
        SampleInfo("rotating-scaled-glyph", "Rotating and scaled glyph (images)",
                   "A drawn '7' at random angles and sizes: a 2-D cylinder of images.",
                   (GLYPH_SCALED_N, GLYPH_SIZE ** 2), (GLYPH_SIZE, GLYPH_SIZE),
                   f"angle ({ANGLE_BUCKET} degree bucket)"),
        rotating_scaled_glyph,
    ),
    _Sample(
        SampleInfo("three-phase-flow", "Three-phase flow (synthetic, 12-D)",
                   "Three classes on curved 2-D sheets in 12 dimensions, oil-flow-like.",
                   (3 * FLOW_PER_CLASS, FLOW_D), None, "class"),
        three_phase_flow,
    ),
    _Sample(
        SampleInfo("swiss-roll", "Swiss roll (3-D)",
                   "A rolled-up 2-D sheet; PCA initialisation fails, Isomap works.",
                   (SWISS_N, 3), None, f"position along roll ({SWISS_BUCKETS} segments)"),
        swiss_roll,
    ),
    _Sample(
        SampleInfo("occluded-glyph", "Glyph with hidden quarters (missing pixels)",
                   "The rotating '7' with a quarter of every second image missing: the model fills it in.",
                   (GLYPH_N, GLYPH_SIZE ** 2), (GLYPH_SIZE, GLYPH_SIZE),
                   f"angle ({ANGLE_BUCKET} degree bucket)"),
        occluded_glyph,
    ),
    _Sample(
        SampleInfo("binary-glyph", "Binary glyph (0/1 pixels: Bernoulli vs Gaussian)",
                   "The rotating '7' in black and white, 5% of the pixels flipped: compare a Bernoulli "
                   "likelihood's probabilities with a Gaussian one's grey values.",
                   (GLYPH_N, GLYPH_SIZE ** 2), (GLYPH_SIZE, GLYPH_SIZE),
                   f"angle ({ANGLE_BUCKET} degree bucket)"),
        binary_glyph,
    ),
    _Sample(
        SampleInfo("walking-gap", "Walking, with a gap in time (for the dynamical model)",
                   "A generated walk, 13 marker coordinates per frame, no frames for 1.6 s: "
                   "the dynamical GP-LVM fills the gap.",
                   (131, 13), None, "time (s)", model="gpds"),
        walking_gap,
    ),
    _Sample(
        SampleInfo("two-views", "Two views: image and sensors (for MRD)",
                   "An image view and a sensor view of the same rows: one shared factor, one private to each.",
                   (TWO_VIEW_N, TWO_VIEW_GRID ** 2 + TWO_VIEW_SENSORS), None, "shared factor s (quarter)",
                   model="mrd"),
        two_views,
    ),
    _Sample(
        SampleInfo("digits", "Handwritten digits 8x8 (scikit-learn)",
                   "scikit-learn's 1797 handwritten digits, ten classes.",
                   (1797, 64), (8, 8), "digit"),
        sklearn_digits,
        requires="sklearn",
    ),
)


def _available() -> list[_Sample]:
    return [s for s in _REGISTRY if s.requires is None or importlib.util.find_spec(s.requires) is not None]


def samples() -> list[SampleInfo]:
    """The bundled samples available here, in a stable order; the first is the default."""
    return [s.info for s in _available()]


@functools.lru_cache(maxsize=32)
def _generate(name: str, seed: int) -> Dataset:
    sample = next(s for s in _REGISTRY if s.info.name == name)
    ds = sample.make(seed)
    for arr in (ds.values, ds.labels):
        if arr is not None:
            arr.setflags(write=False)
    return ds


def load_sample(
    name: str,
    seed: int = 0,
    *,
    standardize: bool = False,
    drop_constant: bool = True,
    max_rows: int | None = None,
) -> Dataset:
    """Load a bundled sample by name (see `samples()`), then apply `prepare` options.

    The same (name, seed) always gives the same data; the returned arrays are
    fresh copies, so changing them does not affect later calls.
    """
    seed = check_seed(seed)
    known = [s.info.name for s in _available()]
    if name not in known:
        if name == "digits":
            sklearn_digits(seed)  # raises the install hint
        raise DataError(f"Unknown sample {name!r}. Available samples: {', '.join(known)}.")
    base = _generate(name, seed).copy()
    return prepare(base, standardize=standardize, drop_constant=drop_constant, max_rows=max_rows, seed=seed)
