"""Options applied to a loaded `Dataset`: subsample, drop constant columns,
standardise. Used by both `load_file` and `load_sample`.
"""

from __future__ import annotations

import numpy as np

from ..text import quote
from .column_stats import ColumnStats, blocks_of, column_stats
from .dataset import MIN_ROWS, Dataset
from .errors import DataError


MISSING_MODES = ("keep", "drop-rows", "impute-mean")
MIN_ABS = 1e-150  # smaller magnitudes underflow when squared (variances, kernels)


def _names(names, limit=8):
    shown = ", ".join(quote(s, 40) for s in names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def column_scale(values: np.ndarray) -> np.ndarray:
    """(D,) largest absolute observed value per column (0 for an all-zero column)."""
    return column_stats(values).scale


def column_mean_std(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-column mean and standard deviation of the observed values.

    Computed on each column divided by its own largest magnitude, then scaled
    back, so that columns of tiny (1e-300) or huge magnitude neither
    underflow nor overflow when squared (`column_stats`, read in blocks of rows).
    """
    stats = column_stats(values)
    return stats.mean, stats.std


def _constant(stats: ColumnStats) -> np.ndarray:
    return (stats.scale == 0) | (stats.unit_std <= 1e-12)


def _tiny(stats: ColumnStats) -> np.ndarray:
    return (stats.scale > 0) & (stats.scale < MIN_ABS)


def constant_columns(values: np.ndarray) -> np.ndarray:
    """Boolean (D,) mask of columns whose observed values do not vary.

    Constancy is relative to the column's own scale: a column is constant
    when its spread is below 1e-12 of its largest magnitude (an all-zero
    column, a column with a single observed value, or a column repeating one
    number). Values all around 1e-300 that differ from each other are
    *not* constant.
    """
    return _constant(column_stats(values))


def tiny_columns(values: np.ndarray) -> np.ndarray:
    """Boolean (D,) mask of non-zero columns whose every value is below MIN_ABS in size."""
    return _tiny(column_stats(values))


def standardised(values, mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """(values - mean) / sd as a new C-contiguous float64 array, written block by block of rows
    (``values`` may be a memory-mapped file: no temporary of its size)."""
    out = np.empty(values.shape, dtype=np.float64)
    for block in blocks_of(values):
        np.subtract(values[block], mean, out=out[block])
        out[block] /= sd
    return out


def _handle_missing(values, labels, imputed, missing: str, warnings_out: list[str]):
    nan = np.isnan(values)
    if not nan.any() or missing == "keep":
        return values, labels, imputed, None
    if missing == "drop-rows":
        bad = nan.any(axis=1)
        n_bad = int(bad.sum())
        left = values.shape[0] - n_bad
        if left < MIN_ROWS:
            raise DataError(
                f"Only {left} of {values.shape[0]} row(s) have no missing value; at least "
                f"{MIN_ROWS} complete rows are needed to drop the others. Fill the missing "
                "values with the column means instead, or use a model that handles missing values."
            )
        warnings_out.append(f"Dropped {n_bad} row(s) with missing values ({left} complete rows left)")
        keep = ~bad
        return (values[keep], None if labels is None else labels[keep],
                None if imputed is None else imputed[keep], keep)
    # impute-mean
    mu, _ = column_mean_std(values)
    filled = np.where(nan, mu, values)
    warnings_out.append(
        f"Filled {int(nan.sum())} missing cell(s) with their column means"
    )
    imputed = nan if imputed is None else (imputed | nan)
    return filled, labels, imputed, None


def check_seed(seed) -> int:
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise DataError(f"Expected a non-negative integer seed, got {seed!r} instead.")
    return int(seed)


def prepare(
    dataset: Dataset,
    *,
    standardize: bool = False,
    drop_constant: bool = True,
    max_rows: int | None = None,
    seed: int = 0,
    missing: str = "keep",
) -> Dataset:
    """Return a new `Dataset` with the options applied (the input is untouched).

    Steps, in order: keep at most ``max_rows`` rows (a seeded random subset,
    original order kept); deal with missing values (``missing``); drop
    constant columns (``drop_constant``); scale each column to zero mean and
    unit variance (``standardize``, from the observed values; missing cells
    stay NaN).

    ``missing`` is one of `MISSING_MODES`:
      "keep"         missing cells stay NaN (for models that handle them);
      "drop-rows"    rows with any missing cell are removed (refused when
                     fewer than 3 complete rows would be left);
      "impute-mean"  missing cells get their column's mean; the filled cells
                     are marked in ``Dataset.imputed``.

    Constancy is judged relative to each column's own magnitude, so data all
    around 1e-300 is modelled (after standardising). Without
    ``standardize``, columns whose values are all smaller than 1e-150 in size
    are refused, naming them: their squares underflow, so the model could not
    see them vary.

    Image data keep their constant pixels (dropping them would break the
    image shape); standardising leaves those pixels at 0.  Without
    ``drop_constant``, standardising a non-image dataset with a constant
    column raises `DataError`.  Apply options to the dataset as loaded, not
    to one that was already prepared, or the notes accumulate.
    """
    seed = check_seed(seed)
    if missing not in MISSING_MODES:
        raise DataError(
            f"Expected missing to be one of {', '.join(MISSING_MODES)}, got {missing!r} instead."
        )
    values = dataset.values
    labels = dataset.labels
    names = list(dataset.feature_names)
    warnings = list(dataset.warnings)
    image_shape = dataset.image_shape
    mean, scale = dataset.mean, dataset.scale
    imputed = dataset.imputed
    changed = False

    if max_rows is not None:
        if isinstance(max_rows, bool) or not isinstance(max_rows, (int, np.integer)):
            raise DataError(f"Expected an integer max_rows, got {max_rows!r} instead.")
        if max_rows < MIN_ROWS:
            raise DataError(
                f"max_rows must be at least {MIN_ROWS}, got {max_rows}. Choose a larger subsample."
            )
        if values.shape[0] > max_rows:
            rng = np.random.default_rng(seed)
            keep = np.sort(rng.choice(values.shape[0], size=int(max_rows), replace=False))
            warnings.append(
                f"Subsampled {values.shape[0]} rows to {max_rows} (random subset, seed {seed})"
            )
            values = values[keep]
            labels = None if labels is None else labels[keep]
            imputed = None if imputed is None else imputed[keep]
            changed = True

    stats = dataset.column_stats if values is dataset.values else column_stats(values)
    if missing != "keep" and stats.missing.any():
        before = values
        values, labels, imputed, _ = _handle_missing(values, labels, imputed, missing, warnings)
        if values is not before:
            changed = True
            stats = column_stats(values)

    const = _constant(stats)
    if const.any():
        const_names = [s for s, c in zip(names, const) if c]
        if image_shape is not None:
            if drop_constant or standardize:
                warnings.append(
                    f"Kept {len(const_names)} constant pixel(s) so the images keep their "
                    f"{image_shape[0]}x{image_shape[1]} shape"
                )
        elif drop_constant:
            if const.sum() > values.shape[1] - 2:
                raise DataError(
                    f"{int(const.sum())} of {values.shape[1]} columns are constant "
                    f"({_names(const_names)}); fewer than 2 varying columns are left to model. "
                    "Use data whose features vary between rows."
                )
            values = values[:, ~const]
            stats = stats.take(~const)
            names = [s for s, c in zip(names, const) if not c]
            if imputed is not None:
                imputed = imputed[:, ~const]
            if mean is not None:
                mean, scale = mean[~const], scale[~const]
            warnings.append(f"Dropped {len(const_names)} constant column(s): {_names(const_names)}")
            const = np.zeros(values.shape[1], dtype=bool)
            changed = True
        elif standardize:
            raise DataError(
                f"Cannot standardise: column(s) {_names(const_names)} are constant, so their "
                "variance is zero and dividing by it is undefined. Enable dropping constant "
                "columns, or turn standardising off."
            )

    if not standardize:
        tiny = _tiny(stats)
        if tiny.any():
            tiny_names = [s for s, t in zip(names, tiny) if t]
            biggest = float(stats.scale[tiny].max())
            raise DataError(
                f"Column(s) {_names(tiny_names)} hold only values smaller than {MIN_ABS:.0e} in size "
                f"(the largest is {biggest:.3g}): squared, they underflow to zero, so a model "
                "cannot see them vary. Turn on standardising (each column is rescaled by its "
                "own spread), or change the column's units."
            )

    if standardize:
        mu, sd = stats.mean, stats.std
        sd = np.where(const | (sd == 0), 1.0, sd)
        values = standardised(values, mu, sd)
        if mean is not None:  # compose with an earlier standardisation
            mu, sd = mean + scale * mu, scale * sd
        mean, scale = mu, sd
        changed = True

    if not changed and len(warnings) == len(dataset.warnings):
        return dataset
    return dataset.replace(
        values=np.ascontiguousarray(values),
        labels=labels,
        feature_names=names,
        image_shape=image_shape,
        warnings=warnings,
        mean=mean,
        scale=scale,
        imputed=imputed,
    )
