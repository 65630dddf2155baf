"""Options applied to a loaded `Dataset`: subsample, drop constant columns,
standardise. Used by both `load_file` and `load_sample`.
"""

from __future__ import annotations

import numpy as np

from .dataset import MIN_ROWS, Dataset
from .errors import DataError


def _names(names, limit=8):
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def constant_columns(values: np.ndarray) -> np.ndarray:
    """Boolean (D,) mask of columns whose spread is zero (relative to their size)."""
    std = values.std(axis=0)
    size = np.abs(values).max(axis=0)
    return std <= 1e-12 * size


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
) -> Dataset:
    """Return a new `Dataset` with the options applied (the input is untouched).

    Steps, in order: keep at most ``max_rows`` rows (a seeded random subset,
    original order kept); drop constant columns (``drop_constant``); scale
    each column to zero mean and unit variance (``standardize``).

    Image data keep their constant pixels (dropping them would break the
    image shape); standardising leaves those pixels at 0.  Without
    ``drop_constant``, standardising a non-image dataset with a constant
    column raises `DataError`.  Apply options to the dataset as loaded, not
    to one that was already prepared, or the notes accumulate.
    """
    seed = check_seed(seed)
    values = dataset.values
    labels = dataset.labels
    names = list(dataset.feature_names)
    warnings = list(dataset.warnings)
    image_shape = dataset.image_shape
    mean, scale = dataset.mean, dataset.scale
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
            changed = True

    const = constant_columns(values)
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
            names = [s for s, c in zip(names, const) if not c]
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

    if standardize:
        mu = values.mean(axis=0)
        sd = values.std(axis=0)
        sd = np.where(const, 1.0, sd)
        values = (values - mu) / sd
        if mean is not None:  # compose with an earlier standardisation
            mu, sd = mean + scale * mu, scale * sd
        mean, scale = mu, sd
        warnings.append(f"Standardised {values.shape[1]} columns to zero mean and unit variance")
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
    )
