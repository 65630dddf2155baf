"""Columns in different units: how far their spreads differ, and whether to standardise by default.

A model with one noise variance and shared kernel lengthscales sees a column
measured in thousands as a thousand times more important than one measured
in units: the map then follows the big column.  When the columns' spreads
differ by more than `SPREAD_RATIO`, the page standardises by default and
says so (`standardise_by_default`, `spread_note`).  Images are left alone:
their pixels share one unit, and a nearly constant border pixel blown up to
unit variance would be noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..text import quote
from .dataset import Dataset

__all__ = ["SPREAD_RATIO", "ColumnSpread", "column_spread", "spread_note", "standardise_by_default"]

#: Spreads (standard deviations) differing by more than this factor: standardise by default.
SPREAD_RATIO = 10.0


@dataclass(frozen=True)
class ColumnSpread:
    """The widest and narrowest spread among a data set's varying columns, in the file's units."""

    ratio: float  # widest / narrowest standard deviation
    widest: str  # its column's name
    narrowest: str

    @property
    def mixed(self) -> bool:
        """True when the columns' spreads differ by more than an order of magnitude (`SPREAD_RATIO`)."""
        return self.ratio > SPREAD_RATIO


def column_spread(ds: Dataset) -> ColumnSpread | None:
    """How far the spreads of ``ds``'s columns differ, in the units of the file; None with fewer
    than two varying columns.

    A standardised data set carries its columns' spreads in ``ds.scale``.
    """
    stats = ds.column_stats
    sd = np.asarray(ds.scale, dtype=float) if ds.scale is not None else stats.std
    # constant columns (kept in images, or a standardised constant column's unit scale) do not count
    unit_sd = stats.std
    varying = np.nonzero((sd > 0) & (unit_sd > 0) & np.isfinite(sd))[0]
    if varying.size < 2:
        return None
    wide = varying[np.argmax(sd[varying])]
    narrow = varying[np.argmin(sd[varying])]
    names = ds.feature_names
    return ColumnSpread(float(sd[wide] / sd[narrow]), names[wide], names[narrow])


def standardise_by_default(ds: Dataset) -> bool:
    """Whether the page standardises ``ds`` unless the user says otherwise: mixed spreads, not images."""
    if ds.image_shape is not None:
        return False
    spread = column_spread(ds)
    return spread is not None and spread.mixed


def _times(ratio: float) -> str:
    return f"{ratio:,.0f}" if ratio >= 10 else f"{ratio:.1f}"


def spread_note(ds: Dataset | None, standardised: bool, automatic: bool) -> str:
    """One line of plain text about the columns' units for the data card ('' when there is nothing to say).

    ``standardised``: ``ds`` is standardised; ``automatic``: by default, not by the user's choice.
    """
    if ds is None or ds.image_shape is not None:
        return ""
    spread = column_spread(ds)
    if spread is None or not spread.mixed:
        return ""
    which = f"{quote(spread.widest, 30)} vs {quote(spread.narrowest, 30)}"
    if standardised and automatic:
        return (f"Standardised by default: the columns' spreads differ {_times(spread.ratio)}-fold ({which}). "
                "Untick to model the raw units.")
    if not standardised:
        return (f"The columns' spreads differ {_times(spread.ratio)}-fold ({which}): unstandardised, the "
                "widest columns dominate the map.")
    return ""
