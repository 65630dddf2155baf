"""ShownData: which data the page shows, and the colours of their points.

The data the model on show was trained on (held-out rows left out, missing
cells dealt with), else the loaded data; the map's points are those of the
result its view was computed from.
"""
from __future__ import annotations

from .labels import LabelColouring, colour_labels

__all__ = ["ShownData"]


class ShownData:
    """The data on show, from the page's ``data`` (LoadedData), ``training`` (TrainingRun) and ``latent``
    (LatentSlice); read on the page thread."""

    def __init__(self, data, training, latent):
        self._data, self._training, self._latent = data, training, latent
        self._cache = None  # (dataset, colouring) of the last data set coloured other than the loaded one

    @property
    def dataset(self):
        """The data the model on show was trained on, else the loaded data (None before any)."""
        tr = self._training
        return tr.dataset if tr.dataset is not None and tr.result is not None else self._data.dataset

    def colouring(self, dataset=None) -> LabelColouring | None:
        """Point colours for ``dataset`` (default: the data of the map on show, else `dataset`)."""
        if dataset is None:
            view = self._latent.view
            dataset = view.result.dataset if view is not None else self.dataset
        if dataset is None:
            return None
        if dataset is self._data.dataset:
            return self._data.labels
        if self._cache is None or self._cache[0] is not dataset:
            self._cache = (dataset, colour_labels(dataset.labels, dataset.n, dataset.label_name or ""))
        return self._cache[1]

    def close(self) -> None:
        self._cache = None
