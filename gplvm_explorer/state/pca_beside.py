"""PCABeside: the PCA map of the data the model on show was trained on, for comparison with the model's map.

Principal components of the (centred) rows, by a thin SVD; missing cells are
filled with their column's mean first (a map, not an imputation). Computed on
the page's thread when shown: O(N D min(N, D)), refused above ``MAX_CELLS``.
"""
from __future__ import annotations

import logging

import numpy as np
import param

logger = logging.getLogger(__name__)

__all__ = ["PCABeside", "pca_map", "MAX_CELLS"]

#: The most cells (N x D) the page projects at once (a few tenths of a second).
MAX_CELLS = 5_000_000


def pca_map(Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(points (N, 2), explained variance fractions (2,)) of the rows of ``Y`` (N, D), NaN cells mean-filled."""
    Y = np.asarray(Y, dtype=float)
    if np.isnan(Y).any():
        means = np.nanmean(np.where(np.isnan(Y).all(0), 0.0, Y), axis=0)
        Y = np.where(np.isnan(Y), means, Y)
    Yc = Y - Y.mean(axis=0)
    U, s, _ = np.linalg.svd(Yc, full_matrices=False)
    k = min(2, s.size)
    points = np.zeros((Y.shape[0], 2))
    points[:, :k] = U[:, :k] * s[:k]
    total = float(np.sum(s ** 2))
    frac = np.zeros(2)
    if total > 0:
        frac[:k] = s[:k] ** 2 / total
    return points, frac


class PCABeside(param.Parameterized):
    """Whether the PCA map is shown, and the map of ``dataset`` (the trained model's data, else the loaded)."""

    shown = param.Boolean(default=False, doc="The PCA map is on show beside the model's.")
    points = param.Parameter(default=None, doc="(N, 2) PCA coordinates, or None.")
    explained = param.Parameter(default=None, doc="(2,) fractions of the variance the two components explain.")
    dataset = param.Parameter(default=None, doc="The Dataset the points belong to.")
    message = param.String(default="", doc="Why there is no map (plain text), or ''.")

    def __init__(self, explorer, **params):
        super().__init__(**params)
        self.explorer = explorer
        explorer.data.param.watch(self._update, ["dataset"])
        explorer.training.param.watch(self._update, ["dataset", "result"])  # a no-op unless the data changed
        self.param.watch(self._update, ["shown"])

    def source(self):
        """The data set to project: the one the model on show was trained on, else the loaded one."""
        return self.explorer.shown.dataset

    def _update(self, *events) -> None:
        if not self.shown:
            return
        ds = self.source()
        if ds is self.dataset and (self.points is not None or self.message):
            return
        points = explained = None
        message = ""
        if ds is None:
            message = "Load data first."
        elif ds.n * ds.d > MAX_CELLS:
            message = f"{ds.n} x {ds.d} values are more than the page projects here ({MAX_CELLS:,})."
        else:
            try:
                points, explained = pca_map(np.asarray(ds.values))
            except (np.linalg.LinAlgError, ValueError) as exc:
                logger.warning("PCA of the data failed: %s", exc)
                message = f"PCA failed on these data: {exc}"
        with param.parameterized.batch_call_watchers(self):
            self.dataset, self.points, self.explained, self.message = ds, points, explained, message
