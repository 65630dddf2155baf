"""Dynamics: the dynamical GP-LVM's latent trajectory over time and the output at any time.

For a result of a model whose catalog entry has ``panel == "dynamics"``
(the engine's ``latent_at_times`` / ``predict_at_times``):

* :func:`trajectory` -- q(x(t)) and the predicted outputs on a regular grid
  of times from before the first frame to after the last (the gaps between
  frames included), computed once per result on a background thread;
* :func:`frame_at` -- the output at one time with its standard deviation,
  and the observed frame nearest in time (one small prediction, on the page
  thread when the time slider moves).

Outputs are in the units of the user's file (standardisation undone).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import param

from ..dispatch import Dispatcher
from .background import LatestOnly

logger = logging.getLogger(__name__)

__all__ = ["Dynamics", "Frame", "Trajectory", "find_gaps", "frame_at", "is_dynamical", "trajectory"]

GRID = 241  # times on the trajectory
PAD = 0.15  # extrapolation before and after the data, as a fraction of their span


def is_dynamical(result) -> bool:
    return result is not None and result.config.spec.panel == "dynamics"


def _times(result) -> np.ndarray:
    return np.asarray(result.model.t, dtype=float).ravel()


def find_gaps(times: np.ndarray, factor: float = 4.0) -> list[tuple[float, float]]:
    """Intervals between consecutive (sorted) times longer than ``factor`` x the median spacing."""
    ts = np.sort(np.asarray(times, dtype=float))
    if ts.size < 3:
        return []
    d = np.diff(ts)
    med = float(np.median(d[d > 0])) if np.any(d > 0) else 0.0
    if med <= 0:
        return []
    return [(float(ts[i]), float(ts[i + 1])) for i in np.flatnonzero(d > factor * med)]


def _unstd(ds, mean, std):
    if ds is None:
        return mean, std
    scale = 1.0 if ds.scale is None else np.asarray(ds.scale, dtype=float)
    return ds.unstandardize(mean), std * scale


@dataclass(frozen=True, eq=False)
class Trajectory:
    """q(x(t)) and the outputs on a grid of times (read-only arrays)."""

    result: object
    times: np.ndarray  # (n,)
    latent_mean: np.ndarray  # (n, Q)
    latent_var: np.ndarray  # (n, Q)
    mean: np.ndarray  # (n, D) file units
    std: np.ndarray  # (n, D)
    data_times: np.ndarray  # (N,) the frames' times (training order)
    gaps: tuple  # ((start, end), ...) gaps between frames

    @property
    def span(self) -> tuple[float, float]:
        return float(self.times[0]), float(self.times[-1])


def trajectory(result, n: int = GRID, pad: float = PAD) -> Trajectory:
    model = result.model
    t = _times(result)
    lo, hi = float(t.min()), float(t.max())
    span = hi - lo if hi > lo else 1.0
    grid = np.linspace(lo - pad * span, hi + pad * span, int(n))
    lm, lv = model.latent_at_times(grid)
    mean, var = model.predict_at_times(grid)
    mean, std = _unstd(result.dataset, np.asarray(mean, dtype=float), np.sqrt(np.maximum(var, 0.0)))
    arrays = [grid, np.asarray(lm, float), np.asarray(lv, float), mean, std, t]
    for a in arrays:
        a.setflags(write=False)
    return Trajectory(result, *arrays, tuple(find_gaps(t)))


@dataclass(frozen=True, eq=False)
class Frame:
    """The model at one time, beside the observed frame nearest in time."""

    time: float
    latent_mean: np.ndarray  # (Q,)
    latent_var: np.ndarray  # (Q,)
    mean: np.ndarray  # (D,) file units
    std: np.ndarray  # (D,)
    nearest_index: int
    nearest_time: float
    nearest_values: np.ndarray  # (D,) file units
    where: str  # "at a frame", "in a gap", "between frames", "before the data", "after the data"


def frame_at(result, time: float) -> Frame:
    model = result.model
    t = _times(result)
    tt = np.array([float(time)])
    lm, lv = model.latent_at_times(tt)
    mean, var = model.predict_at_times(tt)
    mean, std = _unstd(result.dataset, np.asarray(mean, float)[0], np.sqrt(np.maximum(var[0], 0.0)))
    j = int(np.argmin(np.abs(t - time)))
    ds = result.dataset
    nearest = ds.unstandardize(ds.values[j:j + 1])[0] if ds is not None else np.full_like(mean, np.nan)
    ts = np.sort(t)
    spacing = float(np.median(np.diff(ts))) if ts.size > 1 else 1.0
    if time < ts[0] - 0.5 * spacing:
        where = "before the data"
    elif time > ts[-1] + 0.5 * spacing:
        where = "after the data"
    elif any(a < time < b for a, b in find_gaps(t)):
        where = "in a gap"
    elif abs(t[j] - time) <= 0.05 * spacing:
        where = "at a frame"
    else:
        where = "between frames"
    return Frame(float(time), np.asarray(lm, float)[0], np.asarray(lv, float)[0], mean, std, j, float(t[j]),
                 np.asarray(nearest, dtype=float), where)


class Dynamics(param.Parameterized):
    """The trajectory of the result on show and the frame at the chosen time."""

    time = param.Number(default=0.0)
    trajectory = param.Parameter(default=None, doc="Trajectory of the latest dynamical result (or None).")
    frame = param.Parameter(default=None, doc="Frame at `time` (or None).")
    error = param.String(default="")

    def __init__(self, dispatcher: Dispatcher, **params):
        super().__init__(**params)
        self._trajectories = LatestOnly(dispatcher, trajectory, self._apply, name="gplvm-dynamics")

    def offer(self, result) -> None:
        """A new result: compute its trajectory in the background (None or a static model: clear)."""
        if not is_dynamical(result):
            self._trajectories.drop()
            self.trajectory, self.frame = None, None
            return
        self._trajectories.submit(result)

    def _apply(self, done) -> None:
        if isinstance(done, Exception):  # the previous trajectory stays
            self.error = f"Could not compute the trajectory over time: {done}"
            return
        old = self.trajectory
        self.error = ""
        self.trajectory = done
        lo, hi = done.span
        if old is None or old.result.run_id != done.result.run_id or not lo <= self.time <= hi:
            gaps = done.gaps
            # start inside the first gap: the frames nobody observed are the point of the model
            start = 0.5 * (gaps[0][0] + gaps[0][1]) if gaps else float(done.data_times.min())
            if start != self.time:
                self.time = start
                return
        self._update_frame()

    @param.depends("time", watch=True)
    def _update_frame(self) -> None:
        tr = self.trajectory
        if tr is None:
            self.frame = None
            return
        try:
            self.frame = frame_at(tr.result, float(self.time))
        except Exception as exc:
            logger.exception("Could not predict at t=%s", self.time)
            self.error = f"Could not predict at time {self.time:.4g}: {exc}"

    def wait(self, timeout: float = 30.0) -> bool:
        return self._trajectories.wait(timeout)
