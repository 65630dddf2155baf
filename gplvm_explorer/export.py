"""Exports as plain functions: latent coordinates (CSV), imputed data (CSV), the model (NPZ), the map (PNG),
a summary."""
from __future__ import annotations

import io
import logging
import os
import tempfile

import numpy as np
import pandas as pd

from .state.labels import LabelColouring
from .state.latent import SliceView
from .text import spreadsheet_safe
from .training.result import TrainedResult

logger = logging.getLogger(__name__)

__all__ = ["imputed_csv", "latent_nn_errors", "latent_nn_errors_apply", "latent_png", "latent_rgba", "latents_csv",
           "model_npz", "shading_levels", "summary_text", "MAGNIFICATION_CMAP", "VARIANCE_CMAP"]

#: Variance shading: light = confident (low variance), dark = uncertain.
VARIANCE_CMAP = ["#ffffff", "#eef2f7", "#d9e2ec", "#bccada", "#9fb3c8", "#7f98b2", "#5f7d9e", "#34506f"]
#: Magnification shading (log scale): light = little stretching, dark = the map stretches the latent space most.
MAGNIFICATION_CMAP = ["#fffbf2", "#fdebd0", "#f9d3a5", "#f2b474", "#e58f4b", "#cc6a30", "#a34d22", "#6e3317"]


def shading_levels(grid) -> tuple:
    """(t (R, R) in [0, 1], cmap): a shading grid's values placed on its colour map (NaN: no value).

    Magnification runs on a log scale (it spans orders of magnitude); variance on a linear one.
    """
    v = np.asarray(grid.values, dtype=float)
    if grid.kind == "magnification":
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.where(v > 0, np.log10(v), np.nan)
    finite = v[np.isfinite(v)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    t = (v - lo) / (hi - lo) if hi > lo else np.zeros_like(v)
    return t, MAGNIFICATION_CMAP if grid.kind == "magnification" else VARIANCE_CMAP


def latents_csv(result: TrainedResult) -> bytes:
    """Latent means (and variances, labels) of a result as CSV."""
    if result is None:
        raise ValueError("Train a model first.")
    X, S = result.X_mean, result.X_variance
    frame = {"index": np.arange(X.shape[0])}
    labels = getattr(result.dataset, "labels", None)
    if labels is not None:
        frame["label"] = [spreadsheet_safe(v) for v in labels.astype(str)] if labels.dtype.kind in "US" else labels
    for q in range(X.shape[1]):
        frame[f"x{q + 1}"] = X[:, q]
    if S is not None:
        for q in range(X.shape[1]):
            frame[f"var_x{q + 1}"] = S[:, q]
    buf = io.StringIO()
    pd.DataFrame(frame).to_csv(buf, index=False, float_format="%.8g")
    return buf.getvalue().encode()


def imputed_csv(result: TrainedResult) -> bytes:
    """The training data with its missing cells filled in, as CSV in the file's units.

    Columns: ``index``, ``label`` (when there are labels), then for every
    feature its value and ``<feature>_std``: 0 for an observed value, the
    predictive standard deviation for a value the model filled in (the
    column's spread for a cell filled with the column mean before training).
    A Bernoulli model fills a cell with its probability P(y = 1) (its
    ``_std`` is sqrt(p (1 - p))): a binary file comes back with 0, 1 and the
    probabilities of the cells it lacked.
    """
    from .state.imputation import imputed_table

    values, std, _ = imputed_table(result)
    ds = result.dataset
    frame = {"index": np.arange(values.shape[0])}
    labels = ds.labels
    if labels is not None:
        frame["label"] = [spreadsheet_safe(v) for v in labels.astype(str)] if labels.dtype.kind in "US" else labels
    names = [spreadsheet_safe(f"{n}{suffix}") for n in ds.feature_names for suffix in ("", "_std")]
    interleaved = np.stack([values, std], axis=2).reshape(values.shape[0], -1)  # value, std per feature
    table = pd.concat([pd.DataFrame(frame), pd.DataFrame(interleaved, columns=names)], axis=1)
    buf = io.StringIO()
    table.to_csv(buf, index=False, float_format="%.8g")
    return buf.getvalue().encode()


def model_npz(result: TrainedResult, trace=None) -> bytes:
    """The trained model as an .npz the engine loads again (no pickle), with what the app shows about it
    (`saved_context`: the data's names, labels, image shape, standardisation, the run's objective
    ``trace`` -- a frame with ``iteration`` and ``objective`` -- its iterations and settings)."""
    if result is None or not result.final:
        raise ValueError("Export the model once training has finished or been stopped.")
    from .saved_context import context_of
    from .saved_model import write

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.npz")
        write(result.model, path, context=context_of(result, trace))
        with open(path, "rb") as fh:
            return fh.read()


def _hex_rgb(colours) -> np.ndarray:
    return np.array([[int(c[i:i + 2], 16) for i in (1, 3, 5)] for c in colours], dtype=float)


def latent_rgba(view: SliceView, labels: LabelColouring, size: int = 640) -> np.ndarray:
    """(size, size, 3) uint8: the map's shading with the points rasterised on top (row 0 at the top)."""
    import datashader as ds
    import datashader.transfer_functions as tf

    x0, y0, x1, y1 = view.extent
    if view.grid is not None:
        t, colours = shading_levels(view.grid)
        cmap = _hex_rgb(colours)
        pos = np.nan_to_num(t, nan=0.0) * (len(cmap) - 1)
        i0 = np.clip(np.floor(pos).astype(int), 0, len(cmap) - 2)
        f = (pos - i0)[..., None]
        shade = cmap[i0] * (1 - f) + cmap[i0 + 1] * f  # (R, R, 3), row 0 = lowest y
        R = shade.shape[0]
        idx = np.clip(((np.arange(size) + 0.5) / size * R).astype(int), 0, R - 1)
        base = shade[(R - 1 - idx)][:, idx]  # image row 0 = highest y
    else:
        base = np.full((size, size, 3), 247.0)
    codes = labels.codes if labels.n == view.points.shape[0] else np.zeros(view.points.shape[0], dtype=np.int32)
    cats = list(labels.categories) if labels.n == view.points.shape[0] else ["all points"]
    frame = pd.DataFrame({"x": view.points[:, 0], "y": view.points[:, 1],
                          "cat": pd.Categorical.from_codes(codes, categories=cats)})
    canvas = ds.Canvas(plot_width=size, plot_height=size, x_range=(x0, x1), y_range=(y0, y1))
    agg = canvas.points(frame, "x", "y", ds.count_cat("cat"))
    key = dict(zip(cats, labels.colours)) if len(cats) == len(labels.colours) else {cats[0]: "#0072B2"}
    img = tf.spread(tf.shade(agg, color_key=key, min_alpha=200), px=2)
    rgba = img.to_numpy().view(np.uint8).reshape(size, size, 4)[::-1].astype(float)
    alpha = rgba[..., 3:4] / 255.0
    out = base * (1 - alpha) + rgba[..., :3] * alpha
    return out.astype(np.uint8)


def latent_png(view: SliceView, labels: LabelColouring, size: int = 640) -> bytes:
    """A PNG of the latent map (variance shading + points), drawn on the server."""
    from PIL import Image

    if view is None:
        raise ValueError("Train a model first.")
    buf = io.BytesIO()
    Image.fromarray(latent_rgba(view, labels, size), "RGB").save(buf, format="PNG")
    return buf.getvalue()


def _fmt(x, digits=4) -> str:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return str(x)
    if not np.isfinite(x):
        return str(x)
    return f"{x:.{digits}g}" if abs(x) < 1e5 else f"{x:.{digits}e}"


#: Rows up to which the summary counts leave-one-out 1-NN errors (the count is O(N^2)).
NN_ERRORS_MAX_ROWS = 20000


def latent_nn_errors_apply(result: TrainedResult | None) -> bool:
    """Whether :func:`latent_nn_errors` has something to count: categorical labels, at most
    ``NN_ERRORS_MAX_ROWS`` rows."""
    labels = getattr(getattr(result, "dataset", None), "labels", None)
    return labels is not None and labels.dtype.kind != "f" and result.X_mean.shape[0] <= NN_ERRORS_MAX_ROWS


def latent_nn_errors(result: TrainedResult | None) -> int | None:
    """Leave-one-out 1-NN label errors among the latent means (None where it does not apply).

    O(N^2 Q): seconds at 20,000 rows, so the page counts them on a background thread.
    """
    if not latent_nn_errors_apply(result):
        return None
    from engine.metrics import one_nn_errors

    return int(one_nn_errors(result.X_mean, result.dataset.labels))


def summary_text(result: TrainedResult | None, status: str, elapsed: float, error: str = "",
                 nn_errors: int | None = None) -> str:
    """Settings and results as plain text (for copying); ``nn_errors`` from :func:`latent_nn_errors`."""
    lines = ["GPLVM Explorer — model summary", ""]
    if result is None:
        lines.append(f"Status: {status}")
        if error:
            lines.append(f"Error: {error}")
        return "\n".join(lines)
    ds = result.dataset
    if ds is not None:
        std = ", standardised" if getattr(ds, "scale", None) is not None else ""
        lines.append(f"Data: {ds.name} (N={ds.n}, D={ds.d}{std})")
        if ds.has_missing:
            rows = int(ds.missing_mask.any(axis=1).sum())
            lines.append(f"Missing cells: {ds.n_missing} in {rows} rows, trained on as missing "
                         "(see Imputed values for the model's fill)")
        if ds.imputed is not None and ds.imputed.any():
            lines.append(f"Missing cells filled with their column mean before training: {int(ds.imputed.sum())}")
    lines.append(f"Model: {result.config.describe()}")
    lines.append(f"Status: {status}")
    lines.append(f"Iterations: {result.iteration}; time {elapsed:.1f} s")
    lines.append(f"Final {result.objective_name}: {_fmt(result.objective, 8)}")
    noise = result.parameters.get("noise_variance")
    if noise is not None:
        lines.append(f"Noise variance: {_fmt(noise)}")
    rel = np.asarray(result.relevance, dtype=float)
    lines.append("ARD relevance (1/lengthscale² or linear variance): "
                 + ", ".join(f"x{i + 1}={_fmt(r, 3)}" for i, r in enumerate(rel)))
    if rel.size and np.max(rel) > 0:
        act = [i for i in range(rel.size) if rel[i] > 0.05 * np.max(rel)]
        lines.append(f"Dimensions in use (relevance > 5% of the largest): {len(act)} of {len(rel)} "
                     f"({', '.join(f'x{i + 1}' for i in act)})")
    if nn_errors is not None:
        lines.append(f"Leave-one-out 1-NN errors in the latent space: {nn_errors} of {result.X_mean.shape[0]}")
    if result.jitter > 0:
        lines.append(f"Jitter added: {result.jitter:.1e}")
    if error:
        lines.append(f"Error: {error}")
    return "\n".join(lines)
