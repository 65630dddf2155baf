"""RunPair: two runs of the runs table side by side, their latent maps linked row by row.

Two runs trained on the same rows put every data row at a point in each map; the page draws both maps
from one table of points (row n: its place in the left map and in the right one), so selecting or
hovering a row in one map marks the same row in the other.  Each map shows its run's two most relevant
latent dimensions (the latent map's default slice) at the run's final latent means.
"""
from __future__ import annotations

import numpy as np
import param

__all__ = ["RunPair", "pair_points", "same_rows"]


def same_rows(a, b) -> bool:
    """Whether data sets ``a`` and ``b`` hold the same rows in the same order (the same object, or equal values)."""
    if a is b:
        return True
    va, vb = getattr(a, "values", None), getattr(b, "values", None)
    if va is None or vb is None or np.shape(va) != np.shape(vb):
        return False
    return bool(np.array_equal(np.asarray(va), np.asarray(vb), equal_nan=True))


def shown_dims(result) -> tuple[int, ...]:
    """The two latent dimensions a run's map shows: its most relevant ones (one when Q = 1)."""
    from engine.metrics import most_relevant_dims

    Q = int(result.X_mean.shape[1])
    relevance = np.asarray(result.relevance, dtype=float).ravel() if result.relevance is not None else None
    if relevance is None or relevance.size != Q or not np.all(np.isfinite(relevance)):
        return tuple(range(min(2, Q)))
    return tuple(int(i) for i in most_relevant_dims(relevance, min(2, Q)))


def pair_points(left, right) -> dict:
    """The points of two runs' maps by data row: ``x_left``, ``y_left``, ``x_right``, ``y_right`` (N,)
    (the second coordinate is 0 for a one-dimensional latent space) and ``row`` (N,) (0-based)."""
    out = {"row": np.arange(left.X_mean.shape[0])}
    for side, result in (("left", left), ("right", right)):
        X = np.asarray(result.X_mean, dtype=float)
        dims = shown_dims(result)
        out[f"x_{side}"] = X[:, dims[0]]
        out[f"y_{side}"] = X[:, dims[1]] if len(dims) > 1 else np.zeros(X.shape[0])
    return out


def run_label(record) -> str:
    c = record.cells
    return f"Run {record.number}: {c['model']}, {c['kernel']}, Q={c['Q']} (seed {c['seed']})"


def run_title(record) -> str:
    c = record.cells
    return f"Run {record.number}: {c['model']}, Q={c['Q']}"


class RunPair(param.Parameterized):
    """Which two runs are shown side by side, and their linked points (page thread)."""

    shown = param.Boolean(default=False, doc="Two runs' maps are on show side by side.")
    left = param.Integer(default=0, doc="Run number of the left map (0: none chosen).")
    right = param.Integer(default=0, doc="Run number of the right map (0: none chosen).")
    choices = param.Dict(default={}, doc="Run number -> label of every kept run, in the table's order.")
    points = param.Dict(default=None, allow_None=True, doc="pair_points() of the two runs, or None.")
    dims = param.Parameter(default=None, doc="((i, j), (k, l)): the latent dimensions each map shows, or None.")
    dataset = param.Parameter(default=None, doc="The data set both runs were trained on (for colours), or None.")
    titles = param.Parameter(default=None, doc="(left, right): the maps' short titles, or None.")
    message = param.String(default="", doc="Why there are no maps (plain text), or ''.")

    def __init__(self, runs, **params):
        super().__init__(**params)
        self._runs = runs
        runs.param.watch(self._on_table, ["table"])
        self.param.watch(self._update, ["shown", "left", "right"])
        self._on_table()

    def choose(self, left: int, right: int) -> None:
        """Show runs ``left`` and ``right`` side by side."""
        with param.parameterized.batch_call_watchers(self):
            self.left, self.right, self.shown = int(left), int(right), True

    def _on_table(self, *events) -> None:
        runs = [r for r in self._runs.records if not r.is_pca]
        self.choices = {r.number: run_label(r) for r in runs}
        self._update()

    def _update(self, *events) -> None:
        if self.shown and not (self.left and self.right):
            runs = [r for r in self._runs.records if not r.is_pca]
            if len(runs) >= 2:  # the one not chosen: the latest other run (both: the two latest)
                def latest_but(n):
                    return next(r.number for r in reversed(runs) if r.number != n)
                if not self.left and not self.right:
                    left, right = runs[-2].number, runs[-1].number
                else:
                    left, right = self.left or latest_but(self.right), self.right or latest_but(self.left)
                with param.parameterized.batch_call_watchers(self):
                    self.left, self.right = left, right  # (calls this again)
                return
        points = dims = dataset = titles = None
        message = ""
        if self.shown:
            a, b = self._runs.record(self.left), self._runs.record(self.right)
            if not self.left or not self.right:
                message = "Choose two runs (train at least two)."
            elif a is None or b is None:
                gone = self.left if a is None else self.right
                message = f"Run {gone} is no longer kept: choose another."
            elif not same_rows(a.result.dataset, b.result.dataset) \
                    or a.result.X_mean.shape[0] != b.result.X_mean.shape[0]:
                message = (f"Runs {a.number} and {b.number} were trained on different rows: their maps cannot "
                           "be linked row by row. Choose two runs of the same data.")
            else:
                points = pair_points(a.result, b.result)
                dims = (shown_dims(a.result), shown_dims(b.result))
                dataset = a.result.dataset
                titles = (run_title(a), run_title(b))
        if (points is None and self.points is None and message == self.message
                and dims == self.dims and dataset is self.dataset):
            return
        with param.parameterized.batch_call_watchers(self):
            self.points, self.dims, self.dataset, self.titles, self.message = points, dims, dataset, titles, message
