"""Several views of the same rows (MRD): which columns each view has, and one view predicted from another.

* :func:`view_layout` -- name, columns and image shape of each view of a
  result (the training data's columns are in view order);
* :func:`split` -- a row of all columns cut into views;
* :func:`cross_predict` -- "given this row of view A, what does view B look
  like": q(x*) inferred from the row's view A alone
  (``infer_latent(Y_a, view=a)``), view B predicted from it
  (``predict(mean, variance, view=b)``), beside the row's own view B.

Values are in the units of the user's file (standardisation undone).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import param

from ..catalog import view_split
from ..dispatch import Dispatcher
from .background import LatestOnly

logger = logging.getLogger(__name__)

__all__ = ["CrossPrediction", "MultiView", "ViewInfo", "cross_predict", "is_multiview", "split", "view_layout"]


def is_multiview(result) -> bool:
    return result is not None and result.config.spec.panel == "views"


@dataclass(frozen=True)
class ViewInfo:
    name: str
    columns: slice  # of the training data's columns
    image_shape: tuple | None
    feature_names: tuple

    @property
    def size(self) -> int:
        return self.columns.stop - self.columns.start


def view_layout(result) -> list[ViewInfo]:
    ds = result.dataset
    d = ds.d if ds is not None else int(result.model.Y.shape[1])
    sizes = view_split(d, result.config.view_sizes)
    names = list(result.config.view_names or ())
    groups = {g[0]: g for g in ((ds.column_groups or ()) if ds is not None else ())}
    out, start = [], 0
    for v, size in enumerate(sizes):
        name = names[v] if v < len(names) else f"view {v}"
        g = groups.get(name)
        shape = g[2] if g is not None and len(g[1]) == size else None
        fnames = tuple(ds.feature_names[start:start + size]) if ds is not None else ()
        out.append(ViewInfo(name, slice(start, start + size), shape, fnames))
        start += size
    return out


def split(values: np.ndarray, layout: list[ViewInfo]) -> list[np.ndarray]:
    values = np.asarray(values)
    return [values[..., v.columns] for v in layout]


@dataclass(frozen=True, eq=False)
class CrossPrediction:
    row: int
    source: int
    target: int
    source_values: np.ndarray  # (D_a,) the row's view A, file units
    latent_mean: np.ndarray  # (Q,) q(x*) from view A
    latent_var: np.ndarray  # (Q,)
    mean: np.ndarray  # (D_b,) view B predicted, file units
    std: np.ndarray  # (D_b,)
    actual: np.ndarray  # (D_b,) the row's own view B, file units
    rmse: float  # of the prediction against the row's view B


def cross_predict(result, row: int, source: int, target: int, **options) -> CrossPrediction:
    ds = result.dataset
    layout = view_layout(result)
    src, dst = layout[source], layout[target]
    row = int(row)
    Ya = ds.values[row:row + 1, src.columns]
    inf = result.model.infer_latent(Ya, view=int(source), **options)
    mean, var = result.model.predict(inf.mean, inf.variance, view=int(target))
    mean = np.asarray(mean, float)[0]
    std = np.sqrt(np.maximum(np.asarray(var, float)[0], 0.0))
    full_mean = np.zeros(ds.d)
    full_mean[dst.columns] = mean
    orig = ds.unstandardize(full_mean[None])[0][dst.columns]
    if ds.scale is not None:
        std = std * np.asarray(ds.scale, float)[dst.columns]
    values = ds.unstandardize(ds.values[row:row + 1])[0]
    actual = values[dst.columns]
    return CrossPrediction(row, int(source), int(target), values[src.columns], np.asarray(inf.mean, float)[0],
                           np.asarray(inf.variance, float)[0], orig, std, actual,
                           float(np.sqrt(np.nanmean((orig - actual) ** 2))))


class MultiView(param.Parameterized):
    """The cross-view question of the result on show: row, source and target views, the answer."""

    row = param.Integer(default=0, bounds=(0, None))
    source = param.Integer(default=1, bounds=(0, None))
    target = param.Integer(default=0, bounds=(0, None))
    result = param.Parameter(default=None, doc="Latest multi-view result (or None).")
    layout = param.List(default=[], doc="ViewInfo of each view of `result`.")
    cross = param.Parameter(default=None, doc="CrossPrediction for (row, source, target), or None.")
    computing = param.Boolean(default=False)
    error = param.String(default="")

    def __init__(self, dispatcher: Dispatcher, **params):
        super().__init__(**params)
        self._questions = LatestOnly(dispatcher, lambda wanted: cross_predict(*wanted, num_starts=3), self._apply,
                                     name="gplvm-cross-view", on_idle=self._settled)

    def offer(self, result) -> None:
        if not is_multiview(result):
            with param.parameterized.batch_call_watchers(self):
                self.result, self.layout, self.cross = None, [], None
            return
        layout = view_layout(result)
        V = len(layout)
        with param.parameterized.batch_call_watchers(self):
            if [v.name for v in layout] != [v.name for v in self.layout]:
                self.layout = layout
            if self.source >= V or self.target >= V or self.source == self.target:
                self.source, self.target = min(1, V - 1), 0
            if result.dataset is not None and self.row >= result.dataset.n:
                self.row = 0
            self.result = result
        if result.final:  # inferring a row is an optimisation: once per finished fit, or when asked
            self.ask()

    def ask(self) -> None:
        """Compute the cross-view prediction for the current row, source and target (background)."""
        result = self.result
        if result is None:
            return
        if self.source == self.target:
            self.error = "Choose two different views."
            return
        self.computing = True
        self._questions.submit((result, int(self.row), int(self.source), int(self.target)))

    def _apply(self, done) -> None:
        if isinstance(done, Exception):
            self.error = f"Could not predict one view from another: {done}"
            return
        with param.parameterized.batch_call_watchers(self):
            self.error = ""
            self.cross = done

    def _settled(self) -> None:
        self.computing = self._questions.busy

    def wait(self, timeout: float = 60.0) -> bool:
        return self._questions.wait(timeout)
