"""ModelInputs: what a model needs besides the data matrix -- a time per row, or views of the columns.

The catalog says which inputs a model takes (``ModelSpec.inputs``):

* ``"time"`` (the dynamical GP-LVM): the row order, the label (when it is a
  number, e.g. the ``walking-gap`` sample's time in seconds) or one of the
  data's columns (taken out of the data the model reconstructs);
* ``"views"`` (MRD): the columns split into views -- by default the data's
  column groups (an NPZ with ``view_0``, ``view_1``, ... or a sample that has
  them), else two halves; a column belongs to one view at most, columns in
  no view are left out.

:meth:`ModelInputs.apply` turns the loaded data and the settings into the
dataset the model trains on (columns in view order, the time column taken
out) and the :class:`~gplvm_explorer.catalog.ModelConfig` carrying the times
or view sizes.  Column names are user text: only plain strings here.
"""
from __future__ import annotations

import logging

import numpy as np
import param

from ..catalog import ModelConfig, ModelSpec
from ..text import plain, quote

logger = logging.getLogger(__name__)

__all__ = ["LABEL", "ModelInputs", "ROW_ORDER", "column_key"]

ROW_ORDER = "::row-order"
LABEL = "::label"
_COLUMN = "::column::"
_TIME_WORDS = ("time", "t", "times", "timestamp", "seconds", "frame", "date")
MAX_VIEWS = 4


def column_key(name: str) -> str:
    """The time_source value of a data column."""
    return _COLUMN + str(name)


class ModelInputs(param.Parameterized):
    """The chosen time source and view split, for the loaded dataset."""

    time_source = param.String(default=ROW_ORDER, doc="ROW_ORDER, LABEL or column_key(name).")
    views = param.List(default=[], doc="Column names of each view (a list per view).")
    view_names = param.List(default=[], doc="One name per view.")
    dataset = param.Parameter(default=None, doc="The dataset the choices refer to.")

    # ---- the data changed ---------------------------------------------------------------
    def set_dataset(self, ds) -> None:
        """Defaults for ``ds``: a time-like label or column, and the data's column groups (or halves)."""
        with param.parameterized.batch_call_watchers(self):
            self.dataset = ds
            if ds is None:
                self.time_source, self.views, self.view_names = ROW_ORDER, [], []
                return
            self.time_source = self._guess_time(ds)
            self.reset_views()

    def reset_views(self) -> None:
        ds = self.dataset
        if ds is None:
            return
        groups = ds.groups_present()
        names = list(ds.feature_names)
        if len(groups) >= 2:
            self.view_names = [g[0] for g in groups[:MAX_VIEWS]]
            self.views = [[names[j] for j in g[1]] for g in groups[:MAX_VIEWS]]
        else:
            half = max(1, len(names) // 2)
            self.view_names = ["view 0", "view 1"]
            self.views = [names[:half], names[half:]]

    @staticmethod
    def _guess_time(ds) -> str:
        if ds.labels is not None and ds.labels.dtype.kind in "if":
            words = str(ds.label_name or "").strip().lower()
            if words.split(" ")[0] in _TIME_WORDS:
                return LABEL
        for name in ds.feature_names:
            if str(name).strip().lower() in _TIME_WORDS:
                return column_key(name)
        return ROW_ORDER

    # ---- choices --------------------------------------------------------------------------
    def time_options(self) -> dict:
        """Label shown -> time_source value (labels are plain text)."""
        ds = self.dataset
        opts = {"Row order (0, 1, 2, …)": ROW_ORDER}
        if ds is None:
            return opts
        if ds.labels is not None and ds.labels.dtype.kind in "if":
            opts[f"Label: {plain(ds.label_name or 'label', 80)}"] = LABEL
        for name in ds.feature_names:
            opts[f"Column: {plain(name, 200)}"] = column_key(name)
        return opts

    def set_view(self, v: int, columns) -> None:
        """View ``v`` takes ``columns`` (data column names); they leave every other view."""
        ds = self.dataset
        known = set(ds.feature_names) if ds is not None else set()
        cols = [str(c) for c in columns if str(c) in known]
        taken = set(cols)
        views = [[c for c in view if c not in taken] for view in self.views]
        while len(views) <= v:
            views.append([])
        views[v] = cols
        names = list(self.view_names) + [f"view {k}" for k in range(len(self.view_names), len(views))]
        with param.parameterized.batch_call_watchers(self):
            self.view_names = names[:len(views)]
            self.views = views

    def set_num_views(self, count: int) -> None:
        count = int(min(max(count, 2), MAX_VIEWS))
        views = [list(v) for v in self.views[:count]]
        if len(self.views) > count:  # the columns of dropped views go to the last kept view
            for extra in self.views[count:]:
                views[-1] += list(extra)
        views += [[] for _ in range(count - len(views))]
        names = list(self.view_names[:count]) + [f"view {k}" for k in range(len(self.view_names), count)]
        with param.parameterized.batch_call_watchers(self):
            self.view_names = names
            self.views = views

    # ---- validation and the training data ---------------------------------------------------
    def errors(self, spec: ModelSpec, ds=None) -> list[str]:
        """Why ``spec`` cannot train on ``ds`` (default: the current dataset) with these choices."""
        ds = self.dataset if ds is None else ds
        if ds is None:
            return []
        errs = []
        if "time" in spec.inputs:
            src = self.time_source
            if src == LABEL:
                if ds.labels is None or ds.labels.dtype.kind not in "if":
                    errs.append("The time must be a number: the data have no numeric label. "
                                "Choose a column or the row order.")
            elif src.startswith(_COLUMN):
                name = src[len(_COLUMN):]
                if name not in ds.feature_names:
                    errs.append(f"The time column {quote(name, 40)} is not in the data; choose another.")
                else:
                    col = ds.values[:, ds.feature_names.index(name)]
                    if np.isnan(col).any():
                        errs.append(f"The time column {quote(name, 40)} has missing values; "
                                    "give every row a time.")
                    elif ds.d - 1 < 1:
                        errs.append("Nothing is left to model once the time column is taken out.")
        if "views" in spec.inputs:
            present = set(ds.feature_names)
            views = [[c for c in v if c in present] for v in self.views]
            if len(views) < 2:
                errs.append("MRD needs at least two views; put columns into two views.")
            empty = [str(self._name(k)) for k, v in enumerate(views) if not v]
            if empty:
                errs.append("Every view needs at least one column; empty: " + ", ".join(empty) + ".")
        return errs

    def _name(self, k: int) -> str:
        return self.view_names[k] if k < len(self.view_names) else f"view {k}"

    def apply(self, ds, spec: ModelSpec, config: ModelConfig):
        """(dataset to train on, config with the extra inputs); ValueError says what is wrong."""
        errs = self.errors(spec, ds)
        if errs:
            raise ValueError(" ".join(errs))
        if "time" in spec.inputs:
            src = self.time_source
            if src == LABEL:
                times, name = np.asarray(ds.labels, dtype=float), str(ds.label_name or "label")
            elif src.startswith(_COLUMN):
                name = src[len(_COLUMN):]
                j = ds.feature_names.index(name)
                times = ds.values[:, j].copy()
                if ds.scale is not None:  # the times in the file's units
                    times = times * ds.scale[j] + (0.0 if ds.mean is None else ds.mean[j])
                ds = _take_columns(ds, [k for k in range(ds.d) if k != j])
            else:
                times, name = np.arange(ds.n, dtype=float), "row order"
            config = _replace(config, times=tuple(float(x) for x in times), time_name=name)
        if "views" in spec.inputs:
            where = {c: j for j, c in enumerate(ds.feature_names)}
            views = [[where[c] for c in v if c in where] for v in self.views]
            groups = {g[0]: g for g in (ds.column_groups or ())}
            names = [self._name(k) for k in range(len(views))]
            new_groups = []
            for k, idx in enumerate(views):
                cols = tuple(ds.feature_names[j] for j in idx)
                g = groups.get(names[k])
                shape = g[2] if g is not None and tuple(g[1]) == cols else None
                new_groups.append((names[k], cols, shape))
            ds = _take_columns(ds, [j for idx in views for j in idx], column_groups=tuple(new_groups))
            config = _replace(config, view_sizes=tuple(len(v) for v in views), view_names=tuple(names))
        return ds, config


def _replace(config: ModelConfig, **changes) -> ModelConfig:
    import dataclasses

    return dataclasses.replace(config, **changes)


def _take_columns(ds, cols: list[int], column_groups=None):
    """``ds`` with only ``cols`` (in that order); the image shape survives only when nothing changed."""
    cols = list(cols)
    same = cols == list(range(ds.d))
    return ds.replace(
        values=np.ascontiguousarray(ds.values[:, cols]),
        feature_names=[ds.feature_names[j] for j in cols],
        image_shape=ds.image_shape if same else None,
        mean=None if ds.mean is None else ds.mean[cols],
        scale=None if ds.scale is None else ds.scale[cols],
        imputed=None if ds.imputed is None else ds.imputed[:, cols],
        column_groups=column_groups if column_groups is not None else ds.column_groups,
    )
