"""Restarts: "best of K" -- train the current settings with K seeds, one after the other, keep the best.

Each restart is an ordinary Train with the next seed (so it waits for the server's training limiter
like any other run, and becomes a row of the runs table); when the last one ends, the run with the
highest objective is shown again (as a click on its row would) and its row says it was the best of K.
A Stop ends the current restart and cancels the ones still to come.
"""
from __future__ import annotations

import math

import param

__all__ = ["MAX_RESTARTS", "Restarts"]

#: At most this many restarts per series (the runs table keeps more than this many runs).
MAX_RESTARTS = 10

_ENDED = ("finished", "stopped", "failed")


class Restarts(param.Parameterized):
    """The page's "best of K restarts" (page thread)."""

    count = param.Integer(default=3, bounds=(2, MAX_RESTARTS), doc="How many seeds to train (K).")
    active = param.Boolean(default=False, doc="A series of restarts is under way.")
    done = param.Integer(default=0, doc="Restarts that have ended in the current series.")
    best = param.Integer(default=0, doc="Run number of the best restart of the last series (0: none).")
    message = param.String(default="", doc="Progress or outcome of the series (plain text).")

    def __init__(self, explorer, **params):
        super().__init__(**params)
        self._explorer = explorer
        self._seeds: list[int] = []  # seeds still to train
        self._runs: list[int] = []  # run numbers (runs table) of this series' restarts, in order
        self._first_seed = 0
        self._last_number = 0  # the runs table's last run number when the current restart started
        explorer.training.param.watch(self._on_status, ["status"])

    # ---- actions ----------------------------------------------------------------------
    def start(self) -> bool:
        """Train ``count`` seeds from the model card's seed on; False (and a message) if it cannot start."""
        ex = self._explorer
        if self.active or ex.training.active:
            self.message = "A training is running: wait for it or stop it first."
            return False
        self._first_seed = int(ex.settings.seed)
        self._seeds = [self._first_seed + k for k in range(int(self.count))]
        self._runs = []
        self.done, self.best = 0, 0
        self.active = True
        return self._next()

    def cancel(self) -> None:
        """No more restarts after the current one (a Stop of the current one also cancels the rest)."""
        self._seeds = []

    @property
    def total(self) -> int:
        """Restarts in the current series (the ones ended, the running one and the ones to come)."""
        return self.done + (1 if self._explorer.training.active else 0) + len(self._seeds)

    # ---- the series ---------------------------------------------------------------------
    def _next(self) -> bool:
        ex = self._explorer
        if not self._seeds:
            self._finish()
            return False
        seed = self._seeds.pop(0)
        ex.settings.seed = seed
        self._last_number = ex.runs.last_number
        position = self.done + 1
        if not ex.train():
            self._seeds = []
            self._finish(f"Restart {position} could not start: {ex.training.message}")
            return False
        self.message = f"Restart {position} of {position + len(self._seeds)}: seed {seed}."
        return True

    def _on_status(self, event) -> None:
        tr = self._explorer.training
        if not self.active or event.new not in _ENDED or tr.restored or tr.opened:
            return
        if event.new == "stopped":
            self._seeds = []  # the user's Stop ends the series
        # after every watcher of this status change has run (the runs table adds the row)
        self._explorer.dispatcher.soon(self._ended)

    def _ended(self) -> None:
        if not self.active:
            return
        record = self._explorer.runs.latest()
        if record is not None and record.number > self._last_number:
            self._runs.append(record.number)
        self.done += 1
        self._next()

    def _finish(self, why: str = "") -> None:
        ex = self._explorer
        self.active = False
        records = [r for r in (ex.runs.record(n) for n in self._runs) if r is not None]
        records = [r for r in records if math.isfinite(r.cells.get("objective") or math.nan)]
        if not records:
            ex.settings.seed = self._first_seed
            self.message = why or "No restart ended with a result."
            return
        best = max(records, key=lambda r: r.cells["objective"])
        ex.settings.seed = int(best.cells["seed"])  # Train again reproduces the best
        self.best = best.number
        ex.runs.mark_best(best.number, len(records))
        self.message = (f"{why + ' ' if why else ''}Best of {len(records)} restarts: run {best.number} "
                        f"(seed {best.cells['seed']}, objective {best.cells['objective']:.6g}), shown again.")
        ex.runs.restore(best.number)
