"""Missing values: what a model that cannot use them trains on, and what a trained model fills in.

Rows with missing cells (NaN in ``Dataset.values``) are kept all the way to
training.  A model whose catalog entry ``handles_missing`` (the Bayesian and
sparse GP-LVMs) trains on them as they are; for the others the user picks
:data:`MISSING_CHOICES` (column means, or dropping the incomplete rows) in
:class:`MissingValues`.  After training, :class:`ImputedValues` holds one
row's observed and filled-in values with their predictive standard
deviations; :func:`imputed_table` gives every row (for the CSV export).

Everything here is in the units of the user's file (standardisation undone),
like the reconstruction view.
"""
from __future__ import annotations

import logging
import time
import warnings
from dataclasses import dataclass

import numpy as np
import param

from .. import data as data_mod
from ..catalog import ModelSpec

logger = logging.getLogger(__name__)

__all__ = ["ImputedValues", "MISSING_CHOICES", "MissingValues", "RowImputation", "imputed_table",
           "missing_cells", "model_likelihood", "row_imputation", "training_data"]

#: What to do with missing cells for a model that cannot use them: prepare() mode -> label.
MISSING_CHOICES = {
    "impute-mean": "Fill missing cells with their column mean",
    "drop-rows": "Drop the rows with missing cells",
}


def training_data(dataset, spec: ModelSpec, choice: str = "impute-mean"):
    """The data a model of ``spec`` trains on.

    The dataset as loaded when nothing is missing or the model handles
    missing cells; otherwise the complete copy ``prepare(missing=choice)``
    makes (filled cells are marked in ``Dataset.imputed``).  Raises
    ``DataError`` when dropping would leave too few rows.
    """
    if dataset is None or spec.handles_missing or not dataset.has_missing:
        return dataset
    if choice not in MISSING_CHOICES:
        raise ValueError(f"Expected a choice in {sorted(MISSING_CHOICES)}, got {choice!r} instead.")
    return data_mod.prepare(dataset, missing=choice, drop_constant=False)


def missing_cells(dataset) -> np.ndarray:
    """(N, D) bool: cells the model did not see -- missing (NaN) or filled before training."""
    miss = dataset.missing_mask
    if dataset.imputed is not None:
        miss = miss | dataset.imputed
    return miss


def incomplete_rows(dataset) -> np.ndarray:
    """(K,) int: the rows with a cell the model did not see (see :func:`missing_cells`).

    Without missing or filled cells, none, and the cells are not scanned: the
    column statistics read at load already count the missing ones, and at
    10^6 x 30 a scan takes a few hundred ms of the page's thread.
    """
    if not dataset.has_missing and dataset.imputed is None:
        return np.empty(0, dtype=np.intp)
    return np.nonzero(missing_cells(dataset).any(axis=1))[0]


def _scale(dataset) -> np.ndarray | float:
    return 1.0 if dataset.scale is None else np.asarray(dataset.scale, dtype=float)


def _column_std(dataset, cols=None) -> np.ndarray:
    """Spread of each column's observed (not filled-in) values, in model units."""
    cols = slice(None) if cols is None else cols
    v = np.where(missing_cells(dataset)[:, cols], np.nan, dataset.values[:, cols])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a column with nothing observed
        return np.nan_to_num(np.nanstd(v, axis=0))


@dataclass(frozen=True, eq=False)
class RowImputation:
    """One row of the training data: observed values and the filled-in ones, original units."""

    row: int
    values: np.ndarray  # (D,) observed values where present, the model's fill elsewhere
    std: np.ndarray  # (D,) predictive standard deviation of the filled cells (0 where observed)
    missing: np.ndarray  # (D,) bool: filled in (not observed)
    method: str  # "model": the model's prediction; "column mean": filled before training; "" nothing missing
    feature_names: list
    image_shape: tuple | None
    label: str
    likelihood: str = "gaussian"  # the model's noise model: "bernoulli" fills cells with P(y = 1)

    @property
    def n_missing(self) -> int:
        return int(self.missing.sum())

    @property
    def observed_values(self) -> np.ndarray:
        """(D,) the row as given: NaN where missing."""
        return np.where(self.missing, np.nan, self.values)

    @property
    def is_image(self) -> bool:
        return self.image_shape is not None

    @property
    def probabilities(self) -> bool:
        """The filled-in cells are probabilities P(y = 1) (a Bernoulli model), not values ± 2σ."""
        return self.likelihood == "bernoulli"


def _label(dataset, row: int) -> str:
    labels = dataset.labels
    if labels is None:
        return ""
    return f"{labels[row]:.3g}" if labels.dtype.kind == "f" else str(labels[row])


def row_imputation(result, row: int) -> RowImputation:
    """Observed and filled-in values of training row ``row`` of ``result`` (original units)."""
    ds = result.dataset
    row = int(row)
    if not 0 <= row < ds.n:
        raise IndexError(f"Expected a row between 0 and {ds.n - 1}, got {row} instead.")
    y = ds.values[row]
    nan = np.isnan(y)
    filled_before = np.zeros(ds.d, dtype=bool) if ds.imputed is None else ds.imputed[row]
    values, std = y.copy(), np.zeros(ds.d)
    method = ""
    if nan.any():
        if hasattr(result.model, "impute"):
            filled, sd = result.model.impute(rows=[row])  # the engine's imputation, for one row
            values[nan], std[nan] = filled[0, nan], sd[0, nan]
            method = "model"
        else:  # cannot happen in the app: such models train on a complete copy
            std[nan] = np.nan
            method = "none"
    elif filled_before.any():
        std[filled_before] = _column_std(ds, np.nonzero(filled_before)[0])
        method = "column mean"
    values = ds.unstandardize(values[None, :])[0]
    std = std * _scale(ds)
    return RowImputation(row=row, values=values, std=std, missing=nan | filled_before, method=method,
                         feature_names=list(ds.feature_names), image_shape=ds.image_shape,
                         label=_label(ds, row), likelihood=model_likelihood(result.model))


def model_likelihood(model) -> str:
    """The noise model of a trained model: "gaussian", "bernoulli" (predictions are P(y = 1)) or "poisson"."""
    return str(getattr(model, "likelihood", "gaussian"))


def imputed_table(result) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values, std, missing), each (N, D), for every training row of ``result`` (original units).

    Missing cells get the model's prediction (``model.impute()``: for a
    Bernoulli model the probability P(y = 1)) with its predictive standard
    deviation (Bernoulli: sqrt(p (1 - p))); cells filled with the column mean before
    training get the column's spread; observed cells keep their value with
    std 0.
    """
    if result is None:
        raise ValueError("Train a model first.")
    ds = result.dataset
    nan = ds.missing_mask
    values, std = ds.values.copy(), np.zeros(ds.shape)
    if nan.any():
        if not hasattr(result.model, "impute"):
            raise ValueError("This model cannot fill in missing values.")
        filled, sd = result.model.impute()
        values = np.where(nan, filled, values)
        std = np.where(nan, sd, 0.0)
    if ds.imputed is not None and ds.imputed.any():
        std = np.where(ds.imputed, _column_std(ds)[None, :], std)
    return ds.unstandardize(values), std * _scale(ds), nan | (ds.imputed if ds.imputed is not None else False)


class MissingValues(param.Parameterized):
    """The user's choice for models that cannot train on missing cells."""

    choice = param.Selector(default="impute-mean", objects=list(MISSING_CHOICES),
                            doc="How the data is completed for a model that cannot use missing cells.")

    def training_data(self, dataset, spec: ModelSpec):
        """See :func:`training_data` (with the current choice)."""
        return training_data(dataset, spec, self.choice)

    def advice(self, dataset, spec: ModelSpec) -> str:
        """Plain text for the Model card ("" when nothing is missing)."""
        if dataset is None or not dataset.has_missing:
            return ""
        rows = int(dataset.missing_mask.any(axis=1).sum())
        what = f"{dataset.n_missing} missing cell(s) in {rows} of {dataset.n} rows"
        if spec.handles_missing:
            return (f"The {spec.display_name} trains on the data as it is: {what} are treated as missing "
                    "(the bound uses only the observed cells). After training, see 'Imputed values'.")
        return (f"The {spec.display_name} cannot use missing values ({what}). Choose how to complete the "
                f"data before training ({dataset.n - rows} complete rows would be left after dropping), "
                "or pick the Bayesian or sparse GP-LVM to keep every row.")


class ImputedValues(param.Parameterized):
    """The imputed-values view's state: which training row is shown, and its values.

    Follows a :class:`~gplvm_explorer.state.training.TrainingRun`'s ``result``,
    including the snapshots published while training as long as one row's
    prediction stays cheap (below ``live_budget`` seconds; with many
    missingness patterns it is not, and the view waits for the final result).
    """

    live_budget = 0.05

    row = param.Integer(default=0, bounds=(0, None), doc="Training row on show.")
    imputation = param.Parameter(default=None, doc="RowImputation of the row on show, or None.")
    result = param.Parameter(default=None, doc="The TrainedResult the values come from.")
    incomplete_rows = param.Parameter(default=None, doc="(K,) indices of the rows with filled-in cells.")
    error = param.String(default="")

    def __init__(self, training=None, **params):
        super().__init__(**params)
        self._dataset = None
        self._cost = 0.0  # seconds the last row took
        if training is not None:
            param.bind(self.offer, training.param.result, watch=True)
            if training.result is not None:
                self.offer(training.result)

    def offer(self, result) -> None:
        """Show ``result`` (None clears); a new dataset jumps to its first row with filled-in cells."""
        if result is None or getattr(result, "dataset", None) is None:
            with param.parameterized.batch_call_watchers(self):
                self.result, self.imputation, self.incomplete_rows, self.error = None, None, None, ""
            self._dataset = None
            return
        ds = result.dataset
        if not result.final and ds is self._dataset and self._cost > self.live_budget:
            return  # too dear to follow every snapshot: the final result comes
        with param.parameterized.batch_call_watchers(self):
            self.result = result
            row = self.row
            if ds is not self._dataset:
                self._dataset = ds
                self.imputation = None  # of another data set: views wait for the new one
                rows = incomplete_rows(ds)
                self.incomplete_rows = rows
                self.param.row.bounds = (0, ds.n - 1)
                row = int(rows[0]) if rows.size else 0
            if row != self.row:
                self.row = row  # its watcher updates the imputation
            else:
                self._update()

    def step(self, direction: int) -> None:
        """Go to the next (``+1``) or previous (``-1``) row with filled-in cells, wrapping around."""
        rows = self.incomplete_rows
        if rows is None or not len(rows):
            return
        if direction >= 0:
            later = rows[rows > self.row]
            self.row = int(later[0] if later.size else rows[0])
        else:
            earlier = rows[rows < self.row]
            self.row = int(earlier[-1] if earlier.size else rows[-1])

    @param.depends("row", watch=True)
    def _update(self) -> None:
        result = self.result
        if result is None:
            self.imputation = None
            return
        row = min(max(int(self.row), 0), result.dataset.n - 1)
        try:
            t0 = time.perf_counter()
            self.imputation = row_imputation(result, row)
            self._cost = time.perf_counter() - t0
            self.error = ""
        except Exception as exc:
            logger.exception("Imputing row %d failed", row)
            self.imputation = None
            self.error = f"Could not fill in row {row} ({type(exc).__name__}): {exc}"
