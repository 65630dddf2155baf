"""GeodesicWalk: the shortest path between two picked places of the latent map, and the walk along it.

In geodesic mode two clicks on the map pick the ends; a click near a training
point picks that row (its latent position in the shown dims, so during training
the end follows the row).  A background thread computes, for the newest
(result, slice, ends), the geodesic under the model's expected metric in the
two shown dims with the other dims at the slice (``model.geodesic``,
:mod:`engine.geometry`), and the model's predictions along it (the
reconstructions of the walk, in the file's units).  Every new snapshot of a
training run computes it again, so the path follows the fit live.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import param

from ..dispatch import Dispatcher
from .background import LatestOnly
from .latent import LatentSlice, SliceView, no_metric

__all__ = ["End", "GeodesicPath", "GeodesicWalk", "NUM_POINTS"]

#: Points along a geodesic (and reconstructions in the walk).
NUM_POINTS = 64
#: A click within this fraction of the map's diagonal from a training point picks that row.
SNAP = 0.02


@dataclass(frozen=True)
class End:
    """One picked end: a training row (``row``), or a place (``xy``) of the shown plane."""

    xy: tuple
    row: int | None = None

    def position(self, view: SliceView) -> tuple:
        """(x, y) in the shown plane of ``view`` (a row's latent mean, which moves while training)."""
        if self.row is not None and self.row < view.points.shape[0]:
            return (float(view.points[self.row, 0]), float(view.points[self.row, 1]))
        return self.xy


@dataclass(frozen=True, eq=False)
class GeodesicPath:
    """A geodesic of one result and slice, with the model's output along it."""

    view: SliceView
    ends: tuple  # (End, End)
    path: np.ndarray  # (T, Q) latent points
    xy: np.ndarray  # (T, 2) the path in the shown plane
    length: float  # under the metric, in the model's data units
    straight_length: float
    mean: np.ndarray  # (T, D) predictions along the path, in the file's units
    seconds: float  # to compute (geodesic and predictions)

    @property
    def num_points(self) -> int:
        return int(self.path.shape[0])


class GeodesicWalk(param.Parameterized):
    """Geodesic mode, its picked ends, and the path computed for them."""

    active = param.Boolean(default=False, doc="Geodesic mode: clicks on the map pick the path's ends.")
    ends = param.List(default=[], doc="The picked ends (End), at most two.")
    path = param.Parameter(default=None, doc="The GeodesicPath on show (None: none).")
    computing = param.Boolean(default=False)
    error = param.String(default="")
    frame = param.Integer(default=0, bounds=(0, None), doc="The point along the path shown by the walk.")

    def __init__(self, dispatcher: Dispatcher, latent: LatentSlice, **params):
        super().__init__(**params)
        self._latent = latent
        self._runner = LatestOnly(dispatcher, lambda wanted: compute_path(*wanted), self._apply,
                                  name="gplvm-geodesic", on_idle=self._on_idle)
        latent.param.watch(self._on_view, ["view"])
        self.param.watch(self._on_active, ["active"])

    # ---- inputs (page thread) -------------------------------------------------------------
    def pick(self, x: float, y: float) -> None:
        """A click at (x, y) of the shown plane: the first end, the second (then the path), or a new first."""
        v = self._latent.view
        if v is None:
            return
        x0, y0, x1, y1 = v.extent
        row = self._latent.nearest_point(x, y, radius=SNAP * float(np.hypot(x1 - x0, y1 - y0)))
        end = End((float(x), float(y)), row)
        ends = [end] if len(self.ends) != 1 else [self.ends[0], end]
        with param.parameterized.batch_call_watchers(self):
            self.ends = ends
            self.error = ""
            if len(ends) == 1:
                self.path = None
        if len(ends) == 2:
            self._request(v)

    def pick_rows(self, first: int, second: int) -> None:
        """Pick two training rows as the ends (their latent positions in the shown plane)."""
        v = self._latent.view
        if v is None:
            return
        ends = [End(tuple(float(c) for c in v.points[int(r)]), int(r)) for r in (first, second)]
        self.ends = ends
        self._request(v)

    def clear(self) -> None:
        with param.parameterized.batch_call_watchers(self):
            self.ends = []
            self.path = None
            self.error = ""

    def _on_active(self, event) -> None:
        if not event.new:
            self.clear()

    def _on_view(self, event) -> None:
        """A new map: the path again for it (a new snapshot, slice or plane; other dims: start afresh)."""
        v, old = event.new, event.old
        if v is None or (old is not None and (tuple(old.dims) != tuple(v.dims)
                                              or old.result.run_id != v.result.run_id)):
            self.clear()
            return
        p = self.path
        same = (p is not None and p.view.result is v.result and tuple(p.view.dims) == tuple(v.dims)
                and tuple(p.view.fixed) == tuple(v.fixed))
        if len(self.ends) == 2 and not same:
            self._request(v)

    # ---- background computation ------------------------------------------------------------
    def _request(self, view: SliceView) -> None:
        self.computing = True
        self._runner.submit((view, tuple(self.ends)))

    def _apply(self, done) -> None:
        if isinstance(done, Exception):  # shown in the page; the previous path stays
            self.error = f"Could not compute the geodesic: {done}"
        elif tuple(done.ends) == tuple(self.ends):  # not for ends picked since
            with param.parameterized.batch_call_watchers(self):
                self.error = ""
                self.path = done
                self.frame = min(self.frame, done.num_points - 1)

    def _on_idle(self) -> None:
        self.computing = False

    def wait(self, timeout: float = 30.0) -> bool:
        """Wait for the background work and apply it (tests and non-served use)."""
        return self._runner.wait(timeout)

    def close(self) -> None:
        self._runner.close()


def compute_path(view: SliceView, ends: tuple, num_points: int = NUM_POINTS) -> GeodesicPath:
    """The geodesic between two ends in the plane of ``view`` (other dims at its slice), and the
    model's predictions along it."""
    t0 = time.perf_counter()
    result = view.result
    reason = no_metric(result)
    if reason:
        raise ValueError(f"{reason}, so it has no geodesics.")
    dims = tuple(int(d) for d in view.dims)
    points = []
    for end in ends:
        p = np.array(view.fixed, dtype=float)
        p[list(dims)] = end.position(view)
        points.append(p)
    g = result.model.geodesic(points[0], points[1], num_points=num_points, dims=dims)
    mean, _ = result.predict(g.path)
    ds = result.dataset
    if ds is not None:
        mean = ds.unstandardize(mean)
    xy = np.ascontiguousarray(g.path[:, list(dims)])
    return GeodesicPath(view, tuple(ends), g.path, xy, float(g.length), float(g.straight_length),
                        np.asarray(mean, dtype=float), time.perf_counter() - t0)
