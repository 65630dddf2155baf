"""Columns in different units: the page's default map of a mixed-units table, standardised or not.

For each table, the file is uploaded to a headless page (the app's state
objects, as a browser session has them), trained with the page's default
settings, and the leave-one-out 1-NN label errors are counted among the latent
means in the two most relevant dimensions (the two the map shows) -- once as
the page loads it (standardised by default when the columns' spreads differ
more than tenfold) and once with "Standardise features" unticked (the raw
units, the page's default before).

Tables: the generated wine-like table of the tests (13 columns, spreads from
0.05 to 800, the widest column mostly noise; seeds 0..3), and, when
scikit-learn is installed, the UCI wine data it ships (178 rows, 13 chemistry
columns, 3 cultivars).

Usage: ``python benchmarks/bench_units.py [--seeds 0 1 2 3] [--no-wine]``
"""
from __future__ import annotations

import argparse
import io
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent), str(ROOT / "tests")]

from _common import header  # noqa: E402


def wine_csv() -> bytes | None:
    """scikit-learn's copy of the UCI wine data as a CSV with a ``class`` column, or None."""
    try:
        from sklearn.datasets import load_wine
    except ImportError:
        print("scikit-learn not importable: the UCI wine data skipped")
        return None
    bunch = load_wine()
    buf = io.StringIO()
    buf.write(",".join(["class"] + list(bunch.feature_names)) + "\n")
    for label, row in zip(bunch.target, bunch.data):
        buf.write(f"c{label + 1}," + ",".join(f"{v:.6g}" for v in row) + "\n")
    return buf.getvalue().encode()


def page_fit(content: bytes, name: str, standardize: bool | None) -> dict:
    """Upload, train with the page's defaults (``standardize`` None: the page's choice), count errors."""
    from engine.metrics import one_nn_errors
    from gplvm_explorer.explorer import Explorer
    from gplvm_explorer.state.latent import most_relevant

    ex = Explorer()
    try:
        if not ex.data.load_upload(content, name):
            raise RuntimeError(ex.data.error)
        if standardize is not None and ex.data.standardize != standardize:
            ex.data.standardize = standardize
        chosen = ex.data.standardize
        t0 = time.perf_counter()
        if not ex.train():
            raise RuntimeError(ex.training.message)
        while ex.training.active or ex.training.status == "idle":
            ex.dispatcher.flush()
            time.sleep(0.01)
        seconds = time.perf_counter() - t0
        result = ex.training.result
        dims = most_relevant(result.relevance, 2)
        labels = ex.data.dataset.labels
        errors = int(one_nn_errors(np.asarray(result.X_mean)[:, dims], labels))
        return {"standardised": chosen, "errors": errors, "n": int(labels.size), "seconds": seconds,
                "iterations": int(ex.training.iteration), "status": ex.training.status}
    finally:
        ex.close()
        ex.training.join(30)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    p.add_argument("--no-wine", action="store_true", help="leave out scikit-learn's UCI wine data")
    args = p.parse_args(argv)
    from gplvm_explorer import warmup
    from gplvm_explorer.data import load_file
    from gplvm_explorer.data.units import column_spread
    from userdata import mixed_units_csv

    header("Mixed units: LOO 1-NN errors in the two most relevant dims, the page's defaults")
    warmup.start()
    warmup.wait(timeout=600)
    tables = [(f"wine-like seed {s}", mixed_units_csv(seed=s)) for s in args.seeds]
    wine = None if args.no_wine else wine_csv()
    if wine is not None:
        tables.append(("UCI wine (scikit-learn)", wine))
    print(f"{'table':26s} {'spreads':>9s} {'page (std)':>16s} {'raw units':>16s}  iterations  seconds")
    totals = {True: [0, 0], False: [0, 0]}
    for title, content in tables:
        spread = column_spread(load_file(content, "t.csv", label_column="class"))
        page = page_fit(content, "t.csv", None)
        raw = page_fit(content, "t.csv", False)
        assert page["standardised"], f"{title}: the page did not standardise"
        for run in (page, raw):
            totals[run["standardised"]][0] += run["errors"]
            totals[run["standardised"]][1] += run["n"]
        cell = lambda r: f"{r['errors']:3d}/{r['n']} {100 * r['errors'] / r['n']:5.1f}%"  # noqa: E731
        print(f"{title:26s} {spread.ratio:8,.0f}x {cell(page):>16s} {cell(raw):>16s}  "
              f"{page['iterations']:4d} / {raw['iterations']:4d}  {page['seconds']:5.1f} / {raw['seconds']:5.1f}")
    for std, (e, n) in totals.items():
        print(f"all tables, {'standardised' if std else 'raw units'}: {e} of {n} ({100 * e / max(n, 1):.1f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
