"""``explore(data, labels=None, **settings)``: the app, preloaded, in a notebook or a script.

    import gplvm_explorer as gx
    app = gx.explore(df, labels="species", model="bayesian", latent_dim=3)
    app                # renders inline in Jupyter
    app.servable()     # or serve it: panel serve my_script.py

``data`` is a NumPy array (rows = points), a pandas DataFrame or a path to a
file the app reads (CSV, TSV, TXT, NPY, NPZ, Parquet). It is the same page as
``gplvm-explorer`` serves (`gplvm_explorer.app.create_app`), with the data
shown as "your data" and the settings applied; ``app.explorer`` is its state.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["explore", "SETTINGS", "data_loader", "apply_settings"]

#: Keywords ``explore`` (and the command line) accept, as on the page's model card.
SETTINGS = ("model", "kernel", "bias", "white", "latent_dim", "num_inducing", "init", "optimizer",
            "max_iters", "seed")
#: Data options (the data card).
DATA_OPTIONS = ("standardize",)


def data_loader(data, labels=None):
    """(loader, name, label columns, label) for `LoadedData.load_given`.

    ``loader(label_column, standardize)`` returns a `Dataset`; it raises the
    data layer's `DataError` for data it cannot use.
    """
    from .data import load_file
    from .data.frames import _is_frame, from_array, from_frame, label_candidates

    if isinstance(data, (str, os.PathLike)):
        from .data import csv_columns
        from .serving import CLI_LIMITS

        path = Path(data).expanduser()
        if labels is not None and not isinstance(labels, (str, int)):
            raise TypeError("With a file, labels= is the name (or index) of its label column.")

        def loader(label, standardize):
            return load_file(path, label_column=label, standardize=standardize, limits=CLI_LIMITS)

        first = loader(labels, False)  # fails early, with the data layer's error
        try:
            columns = csv_columns(path, limits=CLI_LIMITS)
        except Exception:
            columns = []
        return _first(loader, first, labels), path.name, columns, labels
    if _is_frame(data):
        if labels is not None and not isinstance(labels, (str, int)):
            raise TypeError("With a DataFrame, labels= is the name (or index) of its label column.")
        candidates = label_candidates(data)
        if labels is None and candidates:
            import pandas as pd

            cats = [c for c in data.columns if isinstance(data[c].dtype, pd.CategoricalDtype)]
            labels = str(cats[0]) if cats else None
        frame = data.copy()

        def loader(label, standardize):
            return from_frame(frame, label, name="DataFrame", standardize=standardize)

        first = loader(labels, False)
        return _first(loader, first, labels), "DataFrame", candidates, labels
    import numpy as np

    values = np.array(data, copy=True)
    label_values = None if labels is None else np.asarray(labels).copy()

    def loader(label, standardize):
        return from_array(values, label_values, name="array", standardize=standardize)

    first = loader(None, False)
    return _first(loader, first, None), "array", [], None


def _first(loader, first, label):
    """``loader``, answering its first call (already made) from ``first``."""
    cache = {(label, False): first}

    def cached(label_column, standardize):
        key = (label_column, bool(standardize))
        if key in cache:
            return cache.pop(key)
        return loader(label_column, standardize)

    return cached


def apply_settings(explorer, settings: Mapping) -> None:
    """Set the page's model settings (``SETTINGS`` keys); unknown keys raise TypeError, bad values ValueError."""
    unknown = sorted(set(settings) - set(SETTINGS) - set(DATA_OPTIONS))
    if unknown:
        raise TypeError(f"Unknown setting(s): {', '.join(unknown)}. "
                        f"Known settings: {', '.join(SETTINGS + DATA_OPTIONS)}.")
    ms = explorer.settings
    ordered = [k for k in SETTINGS if k in settings]  # model first: it may switch the kernel
    for key in ordered:
        value = settings[key]
        try:
            setattr(ms, key, value)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"Bad value for {key}: {value!r} ({exc})") from None
    ms.validate()


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython

        ip = get_ipython()
    except Exception:
        return False
    return ip is not None and getattr(ip, "kernel", None) is not None


def explore(data, labels=None, **settings):
    """The GPLVM Explorer page with ``data`` loaded and ``settings`` applied.

    data      NumPy array (rows = points), pandas DataFrame, or a path (CSV, TSV,
              TXT, NPY, NPZ, Parquet).
    labels    array: one label per row; DataFrame / file: the label column's
              name (a DataFrame's first category-dtype column by default; its
              category and text columns are offered as labels on the page).
    settings  model, kernel, bias, white, latent_dim, num_inducing, init,
              optimizer, max_iters, seed (as on the page), standardize (default:
              on when the columns' spreads differ more than tenfold, as on the page).

    Returns the page (a Panel template): display it in Jupyter, or call
    ``.servable()`` / ``.show()``. Raises `gplvm_explorer.data.DataError`
    for data the app cannot use, TypeError for an unknown setting, and
    ValueError for a bad setting value.
    """
    unknown = sorted(set(settings) - set(SETTINGS) - set(DATA_OPTIONS))
    if unknown:
        raise TypeError(f"explore() got unknown setting(s): {', '.join(unknown)}. "
                        f"Known settings: {', '.join(SETTINGS + DATA_OPTIONS)}.")
    loader, name, columns, label = data_loader(data, labels)
    import panel as pn

    from .app import create_app

    if _in_notebook():
        pn.extension("filedropper", notifications=False, design="bootstrap")
    page = create_app()
    ex = page.explorer
    standardize = bool(settings["standardize"]) if "standardize" in settings else None
    if not ex.data.load_given(loader, name, columns, label, standardize=standardize):
        ex.close()
        raise ValueError(ex.data.error or f"Could not load {name}.")
    try:
        apply_settings(ex, {k: v for k, v in settings.items() if k in SETTINGS})
    except Exception:
        ex.close()
        raise
    return page
