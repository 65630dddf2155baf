"""HeldOutRows: a seeded tenth of the loaded rows kept out of training, to score runs on rows they never saw.

When on, Train fits the other rows; the runs table scores each run on the held-out rows with
:func:`engine.metrics.held_out` (log density per row, reconstruction RMSE of a hidden half of each
row's entries).  The split is made once per loaded data set and seed, so every run of the same data
trains on the same rows (one copy of them, shared by the runs).
"""
from __future__ import annotations

import numpy as np
import param

__all__ = ["HeldOutRows", "FRACTION"]

#: The share of rows held out.
FRACTION = 0.1
#: Fewer rows than this: nothing is held out (too few to train on and score).
MIN_ROWS = 20


class HeldOutRows(param.Parameterized):
    """The data card's "hold out 10% of rows" choice and the split it makes."""

    enabled = param.Boolean(default=False, doc="Hold out a seeded 10% of the rows from training.")
    seed = param.Integer(default=0, bounds=(0, None), doc="Seed of the rows held out.")
    note = param.String(default="", doc="Why nothing is held out for the current data and model (plain text).")

    def __init__(self, **params):
        super().__init__(**params)
        self._split = None  # (loaded dataset, seed, training dataset, held-out rows (k, D), held-out labels)

    @staticmethod
    def applies(spec) -> bool:
        """Models fitted to rows alone (no times, views or minibatches read from a file)."""
        return not spec.inputs and not spec.minibatch

    def training_rows(self, ds, spec):
        """``ds`` without its held-out rows when the choice is on and applies, else ``ds`` itself."""
        if not self.enabled or ds is None:
            self.note = ""
            return ds
        if not self.applies(spec):
            self.note = f"{spec.display_name} is trained on every row: held-out rows apply to the other models."
            return ds
        if ds.n < MIN_ROWS:
            self.note = f"Held-out rows need at least {MIN_ROWS} rows; these data have {ds.n}."
            return ds
        self.note = ""
        split = self._split
        if split is None or split[0] is not ds or split[1] != self.seed:
            split = self._split = (ds, self.seed, *self._make(ds, self.seed))
        return split[2]

    def test_rows(self, training_ds) -> np.ndarray | None:
        """The held-out rows (k, D) of a training data set this object made, else None."""
        split = self._split
        return split[3] if split is not None and split[2] is training_ds else None

    @staticmethod
    def _make(ds, seed: int):
        n = ds.n
        k = max(1, int(round(FRACTION * n)))
        held = np.zeros(n, dtype=bool)
        held[np.random.default_rng(seed).choice(n, size=k, replace=False)] = True
        keep = ~held
        changes = dict(values=np.ascontiguousarray(ds.values[keep]), name=f"{ds.name} ({n - k} of {n} rows)")
        if ds.labels is not None:
            changes["labels"] = ds.labels[keep]
        if ds.imputed is not None:
            changes["imputed"] = ds.imputed[keep]
        test = np.array(ds.values[held], dtype=float)
        test.setflags(write=False)
        return ds.replace(**changes), test
