"""DeepLayers: what the page shows of a model with layers (a deep GP), one map per layer.

For every new result of a model whose catalog entry has ``panel == "deep"``,
a background thread computes once, per layer (data side first):

* the layer's latent means (N, Q_l) and its ARD relevance (Q_l,);
* the two dims shown (the two most relevant; one dim is drawn against 0);
* the layer's own predictive variance on a grid over those dims (the other
  dims at 0): how sure the GP from this layer to the one below is there.

:meth:`DeepLayers.select` picks a row in the top layer: where it sits in every
layer (its row's means) and its reconstruction in data space (the model's
moment-matched ``predict`` from the row's top-layer mean), in file units.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import param

from ..dispatch import Dispatcher
from .background import LatestOnly

logger = logging.getLogger(__name__)

__all__ = ["DeepLayers", "DeepSelection", "LayerMap", "has_layers", "layer_maps"]

GRID = 28  # grid points per axis of a layer's variance image


def has_layers(result) -> bool:
    return result is not None and result.config.spec.panel == "deep" and hasattr(result.model, "layers")


@dataclass(frozen=True, eq=False)
class LayerMap:
    index: int  # 0 = next to the data
    X_mean: np.ndarray  # (N, Q_l)
    relevance: np.ndarray  # (Q_l,)
    dims: tuple  # (x dim, y dim or None)
    points: np.ndarray  # (N, 2) the shown dims (y = 0 when the layer has one dim)
    extent: tuple  # (x0, y0, x1, y1)
    variance: np.ndarray | None  # (GRID, GRID) rows along y, or None when it could not be computed

    @property
    def latent_dim(self) -> int:
        return int(self.X_mean.shape[1])


@dataclass(frozen=True, eq=False)
class DeepSelection:
    row: int
    locations: tuple  # per layer (Q_l,) the row's means, data side first
    mean: np.ndarray  # (D,) reconstruction, file units
    std: np.ndarray  # (D,)
    actual: np.ndarray  # (D,) the row itself, file units
    image_shape: tuple | None
    feature_names: tuple


def _dims(rel: np.ndarray) -> tuple:
    order = np.argsort(-np.asarray(rel, dtype=float), kind="stable")
    return (int(order[0]), int(order[1])) if rel.size >= 2 else (0, None)


def _extent(points: np.ndarray) -> tuple:
    lo, hi = np.nanmin(points, axis=0), np.nanmax(points, axis=0)
    span = np.maximum(hi - lo, 1e-6)
    lo, hi = lo - 0.1 * span, hi + 0.1 * span
    if not np.isfinite(lo).all() or not np.isfinite(hi).all():
        return (-1.0, -1.0, 1.0, 1.0)
    return (float(lo[0]), float(lo[1]), float(hi[0]), float(hi[1]))


def layer_maps(result, grid: int = GRID, shade: bool = True) -> list[LayerMap]:
    """One :class:`LayerMap` per layer of ``result.model`` (data side first)."""
    model = result.model
    out = []
    for l, layer in enumerate(model.layers):
        X = np.asarray(layer.X_mean, dtype=float)
        rel = np.asarray(layer.relevance, dtype=float).ravel()
        xd, yd = _dims(rel)
        pts = np.column_stack([X[:, xd], X[:, yd] if yd is not None else np.zeros(len(X))])
        ext = _extent(pts)
        var = None
        if shade:
            try:
                x0, y0, x1, y1 = ext
                gx, gy = np.meshgrid(np.linspace(x0, x1, grid), np.linspace(y0, y1, grid))
                G = np.zeros((grid * grid, X.shape[1]))
                G[:, xd] = gx.ravel()
                if yd is not None:
                    G[:, yd] = gy.ravel()
                # the first step down from layer l: the GP of this layer, its own variance
                _, v = model.predict_layers(G, layer=l)[0]
                v = np.asarray(v, dtype=float)
                var = (v.mean(axis=1) if v.ndim == 2 else v).reshape(grid, grid)
            except Exception:  # the points are still worth showing
                logger.exception("Could not compute the variance of layer %d", l)
        for arr in (X, rel, pts):
            arr.setflags(write=False)
        out.append(LayerMap(l, X, rel, (xd, yd), pts, ext, var))
    return out


class DeepLayers(param.Parameterized):
    """Per-layer maps of the latest deep result, and the row picked in the top layer."""

    maps = param.List(default=[], doc="[LayerMap] of the latest result, data side first.")
    result = param.Parameter(default=None, doc="The TrainedResult the maps belong to.")
    selection = param.Parameter(default=None, doc="DeepSelection of the picked row (or None).")
    error = param.String(default="")

    def __init__(self, dispatcher: Dispatcher, **params):
        super().__init__(**params)
        self._maps = LatestOnly(dispatcher, lambda result: (result, layer_maps(result)), self._apply,
                                name="gplvm-deep-layers")

    def offer(self, result) -> None:
        """A new result: its layers' maps in the background (a model without layers clears them)."""
        if not has_layers(result):
            self._maps.drop()
            if self.maps or self.result is not None:
                with param.parameterized.batch_call_watchers(self):
                    self.maps, self.result, self.selection = [], None, None
            return
        self._maps.submit(result)

    def _apply(self, done) -> None:
        if isinstance(done, Exception):  # the previous maps stay
            self.error = f"Could not draw the layers: {done}"
            return
        result, maps = done
        old = self.result
        with param.parameterized.batch_call_watchers(self):
            self.error = ""
            self.result = result
            self.maps = maps
        sel = self.selection
        if sel is not None:  # follow the picked row as the model moves (a new run forgets it)
            if old is not None and old.run_id == result.run_id and sel.row < len(maps[-1].X_mean):
                self.select(sel.row)
            else:
                self.selection = None

    def wait(self, timeout: float = 30.0) -> bool:
        return self._maps.wait(timeout)

    # ---- the picked row ------------------------------------------------------------------
    def nearest_top(self, x: float, y: float) -> int | None:
        """The row nearest to ``(x, y)`` in the top layer's map."""
        if not self.maps:
            return None
        pts = self.maps[-1].points
        x0, y0, x1, y1 = self.maps[-1].extent
        d = ((pts[:, 0] - x) / max(x1 - x0, 1e-12)) ** 2 + ((pts[:, 1] - y) / max(y1 - y0, 1e-12)) ** 2
        return int(np.argmin(d)) if d.size else None

    def select(self, row: int | None) -> DeepSelection | None:
        """Row ``row``: its means in every layer and its reconstruction from the top layer's mean."""
        result, maps = self.result, self.maps
        if row is None or result is None or not maps:
            self.selection = None
            return None
        row = int(row)
        if not 0 <= row < len(maps[-1].X_mean):
            raise ValueError(f"Row {row} is not in the data (0 to {len(maps[-1].X_mean) - 1}).")
        locations = tuple(np.array(m.X_mean[row], dtype=float) for m in maps)
        try:
            mean, var = result.predict(locations[-1][None, :])
        except Exception as exc:
            logger.exception("Could not reconstruct row %d", row)
            self.error = f"Could not reconstruct row {row}: {exc}"
            return None
        mean, var = mean[0], np.maximum(var[0], 0.0)
        ds = result.dataset
        scale = getattr(ds, "scale", None)
        std = np.sqrt(var) * (1.0 if scale is None else np.asarray(scale, dtype=float))
        if ds is not None:
            mean = ds.unstandardize(mean[None, :])[0]
            actual = ds.unstandardize(np.asarray(ds.values[row:row + 1], dtype=float))[0]
            shape, names = ds.image_shape, tuple(ds.feature_names or ())
        else:  # pragma: no cover - results carry their dataset in the app
            actual, shape, names = np.full_like(mean, np.nan), None, ()
        sel = DeepSelection(row, locations, np.asarray(mean, dtype=float), np.asarray(std, dtype=float),
                            np.asarray(actual, dtype=float), shape, names)
        self.selection = sel
        return sel
