"""LatentSlice: the 2-D slice of the latent space the map shows, and what it takes to draw it.

For each (trained result, slice) pair -- shown dims, values of the other dims,
grid resolution, shading -- a background thread computes, once:

* the shading grid (``resolution`` x ``resolution`` over the map's extent): the
  predictive variance, or the magnification factor sqrt(det G) of the expected
  metric G in the two shown dims (:mod:`engine.geometry`; models without a
  metric are shaded by variance, and ``shading_note`` says so), and
* a KD-tree over the shown latent means (nearest point for hover and click);

then hands a consistent :class:`SliceView` to the page thread.  A
reconstruction at a clicked location is one ``predict`` at one point plus one
KD-tree query on that view.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
import param
from scipy.spatial import cKDTree

from ..dispatch import Dispatcher
from ..training.result import TrainedResult
from .background import LatestOnly

logger = logging.getLogger(__name__)

__all__ = ["LatentSlice", "NearestIndex", "Reconstruction", "SHADINGS", "ShadingGrid", "SliceView", "most_relevant"]

MARGIN = 0.15  # padding around the latent points, as a fraction of their span
#: What the map's background can show.
SHADINGS = ("variance", "magnification")


def most_relevant(relevance, k: int = 2) -> list[int]:
    """Indices of the ``k`` largest relevances (ties: lower index first)."""
    rel = np.nan_to_num(np.asarray(relevance, dtype=float).ravel(), nan=0.0)
    return sorted(range(rel.size), key=lambda i: (-rel[i], i))[:k]


def padded_extent(X2: np.ndarray, margin: float = MARGIN) -> tuple:
    """(x0, y0, x1, y1): a padded box around 2-D points.

    Above a thousand points the box spans the 0.5-99.5% quantiles, so a few
    far-away points do not shrink the bulk to a corner of the map.
    """
    out = []
    for col in (X2[:, 0], X2[:, 1]):
        if col.size > 1000:
            lo, hi = (float(v) for v in np.quantile(col, [0.005, 0.995]))
        else:
            lo, hi = float(np.min(col)), float(np.max(col))
        span = hi - lo
        if not np.isfinite(span) or span < 1e-9:
            span = 1.0
        out.append((lo - margin * span, hi + margin * span))
    return (out[0][0], out[1][0], out[0][1], out[1][1])


class NearestIndex:
    """Nearest training point in the shown plane: a KD-tree over (N, 2) latent means."""

    def __init__(self, X2: np.ndarray):
        X2 = np.asarray(X2, dtype=float)
        if X2.ndim != 2 or X2.shape[1] != 2 or X2.shape[0] < 1:
            raise ValueError(f"Expected (N, 2) points with N >= 1, got shape {X2.shape} instead.")
        self._tree = cKDTree(X2)
        self.n = X2.shape[0]

    def nearest(self, x: float, y: float) -> tuple[int, float]:
        """(index, distance) of the point nearest ``(x, y)``."""
        dist, idx = self._tree.query([float(x), float(y)])
        return int(idx), float(dist)

    def within(self, x: float, y: float, radius: float) -> int | None:
        """The nearest point if it lies within ``radius``, else None."""
        idx, dist = self.nearest(x, y)
        return idx if dist <= radius else None


@dataclass(frozen=True, eq=False)
class ShadingGrid:
    """The map's shading over a regular grid (cell centres) of the shown plane.

    ``kind`` "variance": the predictive variance (mean over outputs, model units);
    "magnification": sqrt(det G) of the expected metric in the shown dims (data units per latent area).
    """

    xs: np.ndarray  # (R,)
    ys: np.ndarray  # (R,)
    values: np.ndarray  # (R, R), rows follow ys
    kind: str = "variance"

    @property
    def resolution(self) -> int:
        return int(self.xs.size)


@dataclass(frozen=True, eq=False)
class SliceView:
    """Everything the map draws, from one result and one slice: always consistent."""

    result: TrainedResult
    dims: tuple  # (x_dim, y_dim)
    fixed: tuple  # (Q,) values of every latent dim; the shown two are replaced by the click
    extent: tuple  # (x0, y0, x1, y1)
    grid: ShadingGrid | None
    index: NearestIndex
    points: np.ndarray  # (N, 2) latent means in the shown dims (read-only)
    shading: str = "variance"  # what was asked for (the grid's kind may fall back to variance)


@dataclass(frozen=True, eq=False)
class Reconstruction:
    """The model's prediction at one latent location, beside the nearest training row."""

    location: np.ndarray  # (Q,)
    click: tuple  # (x, y) in the shown plane
    mean: np.ndarray  # (D,) original units
    std: np.ndarray  # (D,) predictive standard deviation, original units
    variance: float  # mean predictive variance (model units; of the latent f under a non-Gaussian likelihood)
    nearest_index: int
    nearest_xy: tuple
    nearest_values: np.ndarray  # (D,) original units
    nearest_label: str
    image_shape: tuple | None
    feature_names: list
    drawn_in_page: bool = False  # the page drew mean and std itself; the server adds the rest
    likelihood: str = "gaussian"  # the model's noise model: "bernoulli" means are P(y = 1)

    @property
    def is_image(self) -> bool:
        return self.image_shape is not None


def no_metric(result: TrainedResult) -> str:
    """Why the result's model has no magnification ("" if it has one)."""
    from engine.errors import UnsupportedOperationError

    model = result.model
    if not callable(getattr(model, "magnification", None)):
        return f"{type(model).__name__} has no latent metric"
    try:
        model.geometry()
    except UnsupportedOperationError as exc:
        return str(exc).split(":")[0]
    return ""


def _shading_grid(result: TrainedResult, shading: str, dims, fixed, extent, resolution: int) -> ShadingGrid:
    x0, y0, x1, y1 = extent
    R = int(resolution)
    xs = x0 + (np.arange(R) + 0.5) * (x1 - x0) / R
    ys = y0 + (np.arange(R) + 0.5) * (y1 - y0) / R
    gx, gy = np.meshgrid(xs, ys)
    Xg = np.tile(np.asarray(fixed, dtype=float), (R * R, 1))
    Xg[:, dims[0]] = gx.ravel()
    Xg[:, dims[1]] = gy.ravel()
    if shading == "magnification" and not no_metric(result):
        # the metric's factors are formed once per model state (an M x M matrix); per grid: O(R^2 M (M + Q))
        mag = result.model.magnification(Xg, dims=tuple(int(d) for d in dims))
        return ShadingGrid(xs, ys, mag.reshape(R, R).astype(np.float32), "magnification")
    predict_f = getattr(result.model, "predict_f", None)
    if callable(predict_f):  # a non-Gaussian likelihood: the latent functions' variance, not p (1 - p)
        _, var = predict_f(Xg)
    else:
        _, var = result.predict(Xg)  # the result's cached factors: no pass over the N rows per grid
    var = var.mean(axis=1)  # per-output variances: shade by their mean
    return ShadingGrid(xs, ys, var.reshape(R, R).astype(np.float32), "variance")


class LatentSlice(param.Parameterized):
    """Which slice to show, and the :class:`SliceView` computed for it."""

    auto_dims = param.Boolean(default=True, doc="Show the two most relevant latent dimensions.")
    x_dim = param.Integer(default=0, bounds=(0, None))
    y_dim = param.Integer(default=1, bounds=(0, None))
    fixed = param.List(default=[], doc="Value of every latent dim (the shown two come from the map).")
    resolution = param.Integer(default=128, bounds=(100, 400), doc="Shading grid cells per side.")
    shading = param.Selector(default="variance", objects=list(SHADINGS), doc=(
        "The map's background: the predictive variance, or the magnification factor of the expected metric."))
    shading_note = param.String(default="", doc="Why the shading on show is not the one asked for.")
    latent_dim = param.Integer(default=0, doc="Q of the result on show (0: none).")
    view = param.Parameter(default=None, doc="The SliceView on show (None before training).")
    computing = param.Boolean(default=False)
    cost = param.Number(default=0.0, doc="Seconds the last view took: background computation plus drawing.")
    error = param.String(default="")
    reconstruction = param.Parameter(default=None)

    def __init__(self, dispatcher: Dispatcher, **params):
        super().__init__(**params)
        self._result: TrainedResult | None = None
        self._last: SliceView | None = None  # the newest view computed (on show, or about to be)
        self._runner = LatestOnly(dispatcher, self._compute_timed, self._apply, name="gplvm-latent-slice",
                                  on_idle=self._on_idle)

    # ---- inputs (page thread) ----------------------------------------------------------
    @property
    def shown_dims(self) -> tuple:
        v = self.view
        return tuple(v.dims) if v is not None else (int(self.x_dim), int(self.y_dim))

    def offer(self, result: TrainedResult | None) -> None:
        """A new result to show (or None: nothing trained)."""
        if result is None:
            self._result = self._last = None
            self._runner.drop()
            with param.parameterized.batch_call_watchers(self):
                self.view = None
                self.reconstruction = None
                self.latent_dim = 0
            return
        Q = result.latent_dim
        if Q != self.latent_dim:
            with param.parameterized.discard_events(self):
                self.fixed = [0.0] * Q
                self.x_dim, self.y_dim = 0, min(1, Q - 1)
            self.latent_dim = Q
        self._result = result
        self._request()

    def set_fixed_from_nearest(self) -> bool:
        """Hold the other dims at the latent position of the last clicked point's neighbour."""
        rec, v = self.reconstruction, self.view
        if rec is None or v is None:
            return False
        self.fixed = [float(x) for x in v.result.X_mean[rec.nearest_index]]
        return True

    def set_fixed_value(self, dim: int, value: float) -> None:
        vals = list(self.fixed) if len(self.fixed) == self.latent_dim else [0.0] * self.latent_dim
        vals[int(dim)] = float(value)
        self.fixed = vals

    def reset_fixed(self) -> None:
        self.fixed = [0.0] * self.latent_dim

    @param.depends("auto_dims", "x_dim", "y_dim", "fixed", "resolution", "shading", watch=True)
    def _on_slice(self) -> None:
        if self._result is not None:
            self._request()

    # ---- background computation ----------------------------------------------------------
    def _request(self) -> None:
        self._runner.submit((self._result, bool(self.auto_dims), (int(self.x_dim), int(self.y_dim)),
                             tuple(float(v) for v in self.fixed), int(self.resolution), str(self.shading)))
        self.computing = self._runner.busy

    def _compute_timed(self, wanted) -> tuple:
        """(view, seconds it took) on the background thread; the view before it is the previous one."""
        t0 = time.perf_counter()
        view = self._compute(wanted, self._last)
        self._last = view
        return view, time.perf_counter() - t0

    def _compute(self, wanted, previous: SliceView | None) -> SliceView:
        result, auto, dims, fixed, resolution, shading = wanted
        Q = result.latent_dim
        if Q < 2:
            raise ValueError("The latent map needs at least two latent dimensions.")
        dims = self._resolve_dims(result, auto, dims, previous)
        fixed = np.zeros(Q) if len(fixed) != Q else np.asarray(fixed, dtype=float)
        points = np.ascontiguousarray(result.X_mean[:, list(dims)])
        points.setflags(write=False)
        extent = padded_extent(points)
        if previous is not None and tuple(previous.dims) == tuple(dims) and previous.result.run_id == result.run_id:
            extent = _stable_extent(previous.extent, extent)
        same = (previous is not None and previous.result is result and tuple(previous.dims) == tuple(dims)
                and previous.extent == extent and previous.grid is not None and previous.shading == shading
                and previous.grid.resolution == resolution and tuple(previous.fixed) == tuple(fixed))
        grid = previous.grid if same else _shading_grid(result, shading, dims, fixed, extent, resolution)
        index = previous.index if (previous is not None and previous.points is not None and previous.result is result
                                   and tuple(previous.dims) == tuple(dims)) else NearestIndex(points)
        return SliceView(result, tuple(int(d) for d in dims), tuple(float(v) for v in fixed), extent, grid, index,
                         points, shading)

    @staticmethod
    def _resolve_dims(result, auto, dims, previous) -> tuple:
        Q = result.latent_dim
        if auto:
            best = most_relevant(result.relevance, 2)
            if previous is not None and previous.result.run_id == result.run_id:
                # keep the current pair unless another dim is clearly more relevant (no flicker)
                rel = np.asarray(result.relevance, dtype=float)
                cur = tuple(previous.dims)
                if max(cur) < Q and set(cur) != set(best) and min(rel[list(cur)]) >= 0.9 * rel[best[1]]:
                    return cur
            return (best[0], best[1])
        x, y = int(dims[0]) % Q, int(dims[1]) % Q
        if x == y:
            y = (x + 1) % Q
        return (x, y)

    def _apply(self, outcome) -> None:
        """Show the computed view, or say why there is none (page thread; the previous view stays)."""
        if isinstance(outcome, Exception):
            self.error = f"Could not shade the latent map: {outcome}"
            return
        view, seconds = outcome
        t0 = time.perf_counter()
        with param.parameterized.batch_call_watchers(self):
            self.error = ""
            self.shading_note = self._note(view)
            self.view = view
            if self.auto_dims:
                with param.parameterized.discard_events(self):
                    self.x_dim, self.y_dim = view.dims
        self.cost = seconds + time.perf_counter() - t0  # the views drew it meanwhile

    def _on_idle(self) -> None:
        self.computing = False

    @staticmethod
    def _note(view: SliceView) -> str:
        if view.grid is None or view.grid.kind == view.shading:
            return ""
        return f"{no_metric(view.result)}: the map is shaded by the predictive variance."

    def show_dim(self, axis: str, dim: int) -> None:
        """Put latent dimension ``dim`` on the ``axis`` ("x" or "y") of the map (automatic dims off);
        the other axis's dimension swaps the two, so both axes always differ."""
        name, other = ("x_dim", "y_dim") if axis == "x" else ("y_dim", "x_dim")
        dim = int(dim)
        if not 0 <= dim < max(self.latent_dim, 1):
            return
        if self.auto_dims:  # the pair on show becomes the picked pair (picked dims may be ahead of the view)
            current = self.shown_dims
            with param.parameterized.discard_events(self):
                self.x_dim, self.y_dim = current
            self.auto_dims = False
        if dim == getattr(self, other):
            self.param.update(**{name: dim, other: getattr(self, name)})
        else:
            setattr(self, name, dim)

    def wait(self, timeout: float = 30.0) -> bool:
        """Wait for the background work and apply it (tests and non-served use)."""
        return self._runner.wait(timeout)

    def close(self) -> None:
        """The page is gone: forget the results (their models and arrays can be freed)."""
        self._runner.close()
        self._result = self._last = None

    # ---- questions the views ask (page thread) ---------------------------------------------
    def nearest_point(self, x: float, y: float, radius: float | None = None) -> int | None:
        v = self.view
        if v is None:
            return None
        if radius is None:
            return v.index.nearest(x, y)[0]
        return v.index.within(x, y, radius)

    def reconstruct_at(self, x: float, y: float, drawn_in_page: bool = False) -> Reconstruction | None:
        """Predict the output at ``(x, y)`` of the shown plane: one predict, one KD-tree query.

        ``drawn_in_page``: the page has drawn this prediction itself (the views add only the rest).
        """
        v = self.view
        if v is None:
            return None
        xd, yd = v.dims
        loc = np.array(v.fixed, dtype=float)
        loc[xd], loc[yd] = float(x), float(y)
        mean, var = v.result.predict(loc[None, :])
        mean, var = mean[0], np.maximum(var[0], 0.0)
        predict_f = getattr(v.result.model, "predict_f", None)  # a non-Gaussian likelihood: f's variance
        confidence = np.maximum(predict_f(loc[None, :])[1][0], 0.0) if callable(predict_f) else var
        ds = v.result.dataset
        j, _ = v.index.nearest(x, y)
        scale = getattr(ds, "scale", None)
        std = np.sqrt(var) * (1.0 if scale is None else np.asarray(scale, dtype=float))
        if ds is not None:
            mean_orig = ds.unstandardize(mean[None, :])[0]
            nearest = ds.unstandardize(ds.values[j:j + 1])[0]
            labels = ds.labels
        else:  # pragma: no cover - results always carry their dataset in the app
            mean_orig, nearest, labels = mean, np.full_like(mean, np.nan), None
        label = "" if labels is None else (f"{labels[j]:.3g}" if labels.dtype.kind == "f" else str(labels[j]))
        rec = Reconstruction(
            location=loc, click=(float(x), float(y)), mean=mean_orig, std=std, variance=float(np.mean(confidence)),
            nearest_index=int(j), nearest_xy=(float(v.points[j, 0]), float(v.points[j, 1])),
            nearest_values=np.asarray(nearest, dtype=float), nearest_label=label,
            image_shape=None if ds is None else ds.image_shape,
            feature_names=[] if ds is None else list(ds.feature_names or []), drawn_in_page=bool(drawn_in_page),
            likelihood=str(getattr(v.result.model, "likelihood", "gaussian")))
        self.reconstruction = rec
        return rec


def _stable_extent(old: tuple, new: tuple) -> tuple:
    """Keep the old box while the points still fill it well (the axes do not jump every update)."""
    ox0, oy0, ox1, oy1 = old
    nx0, ny0, nx1, ny1 = new
    inside = nx0 >= ox0 and ny0 >= oy0 and nx1 <= ox1 and ny1 <= oy1
    fills = (nx1 - nx0) >= 0.6 * (ox1 - ox0) and (ny1 - ny0) >= 0.6 * (oy1 - oy0)
    return old if inside and fills else new
