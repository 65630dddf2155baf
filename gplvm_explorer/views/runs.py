"""The runs table: every finished or stopped run of the session, its scores, CSV export; a click
on a run shows it again (its map, ARD bars, objective curve and reconstructions)."""
from __future__ import annotations

import io
import logging

import panel as pn

from ..state.data import LoadedData
from ..state.held_out import HeldOutRows
from ..state.restarts import Restarts
from ..state.runs import COLUMNS, RunsTable
from ..state.training import TrainingRun
from .common import OUTLINE, PANEL_STYLES, Reads, StateView, escape, title_with_help

logger = logging.getLogger(__name__)

HELP = (
    "Every run that finishes or is stopped gets a row; each data set gets one **PCA** row "
    "(probabilistic PCA with two components: its log-likelihood per row is the bound to beat). "
    "**Bound per row** is the final objective divided by the rows trained on. **Dims in use**: "
    "ARD relevance above 5% of the largest. **1-NN errors**: leave-one-out nearest-neighbour label "
    "errors among the latent means, in the map's two most relevant dimensions and in all of them "
    "(data with categorical labels). Click a run's row to show it again without training. "
    "The table keeps the last 20 runs of this page; a reload of the page in this browser within an hour "
    "brings them back (runs of data over 4 MB excepted). **Best of K restarts** trains the model card's "
    "settings with K seeds (the card's seed, the next one, ...), one after the other: every restart is a "
    "row, and when the last one ends the run with the highest bound is shown again and marked "
    "'best of K'. Stop ends the current restart and cancels the rest."
)

HELD_OUT_HELP = (
    " With **Hold out 10% of rows** on the Data card, Train fits the other rows and each run is scored "
    "on the held-out ones: **Held-out log p / row** is the mean log density of a whole row (Titsias & "
    "Lawrence 2010, eq. 20, for the Bayesian models; the predictive density at the best latent point for "
    "the others), **Held-out RMSE** the error of half of each row's entries predicted from the other half "
    "(in the units trained on)."
)

#: Cells with the user's words (data set names) and our own labels: always text, never HTML.
_TEXT = {"type": "plaintext"}
#: The table's columns in the page are named with this prefix: page probes that look for a source by a
#: column name (e.g. the objective curve's 'objective') never find the runs table instead.
PREFIX = "runs_"

#: Short headers for the page (the CSV keeps the long ones of COLUMNS).
_TITLES = {**dict(COLUMNS), "iterations": "Iters", "time_s": "Time (s)", "bound_per_row": "Bound / row",
           "dims_in_use": "Dims used", "nn_errors_2d": "1-NN err (2 dims)", "nn_errors_all": "1-NN err (all)",
           "held_out_log_density": "Held-out log p / row", "held_out_rmse": "Held-out RMSE"}
_DECIMALS = {"time_s": "0.0", "objective": "0.0", "bound_per_row": "0.000", "held_out_log_density": "0.000",
             "held_out_rmse": "0.0000"}


def _formatters() -> dict:
    from bokeh.models.widgets.tables import NumberFormatter

    out = {PREFIX + key: _TEXT for key, _ in COLUMNS}
    out.update({PREFIX + key: NumberFormatter(format=fmt, nan_format="", null_format="")
                for key, fmt in _DECIMALS.items()})
    return out


class RunsView(StateView):
    runs = Reads(class_=RunsTable)
    restarts = Reads(class_=Restarts)
    training = Reads(class_=TrainingRun)

    def __init__(self, **params):
        super().__init__(**params)
        runs = self.runs
        self.table = pn.widgets.Tabulator(
            runs.table.add_prefix(PREFIX), show_index=False, disabled=True, selectable=1,
            sizing_mode="stretch_width", height=230, layout="fit_data", frozen_columns=[PREFIX + "run"],
            titles={PREFIX + k: v for k, v in _TITLES.items()}, widths={PREFIX + "data": 150, PREFIX + "kernel": 170},
            formatters=_formatters(), css_classes=["gx-runs-table"],
        )
        self.table.on_click(self._on_click)
        self.csv = pn.widgets.FileDownload(callback=self._csv, filename="runs.csv", label="Runs table (CSV)",
                                           **OUTLINE, color="primary", width=200, margin=(4, 5))
        self.note = pn.pane.Alert("", alert_type="info", visible=False, sizing_mode="stretch_width")
        restarts = self.restarts
        self.restart_count = pn.widgets.IntInput.from_param(restarts.param.count, label="Restarts K", width=90,
                                                            margin=(4, 5))
        self.restart_btn = pn.widgets.Button(label="Best of K restarts", **OUTLINE, color="primary", width=170,
                                             margin=(4, 5))
        self.restart_btn.on_click(lambda event: self.restarts.start())
        self.restart_text = pn.pane.HTML("", styles={"font-size": "13px"}, margin=(0, 10), visible=False,
                                         sizing_mode="stretch_width")
        runs.param.watch(self._on_table, ["table"])
        runs.param.watch(self._on_note, ["note"])
        runs.param.watch(self._on_restored, ["restored"])
        restarts.param.watch(self._on_restarts, ["active", "message"])
        self.training.param.watch(self._on_restarts, ["status"])
        self._on_table()
        self._on_note()
        self._on_restarts()

    def _on_table(self, *events):
        frame = self.runs.table
        self.table.value = frame.add_prefix(PREFIX)
        self.csv.disabled = len(frame) == 0

    def _on_note(self, *events):
        text = self.runs.note
        self.note.object = escape(text, None) if text else ""
        self.note.visible = bool(text)

    def _on_restored(self, *events):
        """The run on show again (a click, or the best of K restarts) is the table's selected row."""
        number = self.runs.restored
        index = next((i for i, r in enumerate(self.runs.records) if not r.is_pca and r.number == number), None)
        self.table.selection = [] if index is None else [index]

    def _on_restarts(self, *events):
        restarts = self.restarts
        self.restart_btn.disabled = restarts.active or self.training.active
        self.restart_count.disabled = restarts.active
        self.restart_text.object = escape(restarts.message, None)
        self.restart_text.visible = bool(restarts.message)

    def _on_click(self, event):
        runs = self.runs
        records = runs.records
        if not 0 <= event.row < len(records):
            return
        record = records[event.row]
        if record.is_pca:
            runs.note = "The PCA row has no map of its own: it is the baseline every run is read against."
            return
        runs.restore(record.number)

    def _csv(self):
        try:
            return io.BytesIO(self.runs.csv())
        except Exception as exc:  # noqa: BLE001 - the table stays; the note says why
            logger.exception("Runs CSV failed")
            self.runs.note = f"Export failed: {exc}"
            return io.BytesIO(b"")

    def __panel__(self):
        return pn.Column(
            title_with_help("Runs", HELP + HELD_OUT_HELP),
            self.table, pn.Row(self.csv, pn.Spacer(width=20), self.restart_btn, self.restart_count),
            self.restart_text, self.note,
            sizing_mode="stretch_width", styles=PANEL_STYLES,
        )


def keep_runs_across_reloads(runs, doc, store=None) -> str | None:
    """Give the served page ``doc`` its browser's runs from before a reload and keep its runs for the next
    page (:meth:`RunsTable.keep_in`).  The browser's token comes from its cookie; without a valid one the
    page makes a token and sets the cookie once it has loaded.  Returns the token (None: not served)."""
    from bokeh.models import CustomJS

    from ..state.run_store import COOKIE, COOKIE_MAX_AGE, default_store, new_token, valid_token

    context = getattr(doc, "session_context", None) if doc is not None else None
    if context is None:
        return None
    request = getattr(context, "request", None)
    token = (getattr(request, "cookies", None) or {}).get(COOKIE)
    if not valid_token(token):
        token = new_token()
        cookie = f"{COOKIE}={token}; path=/; max-age={COOKIE_MAX_AGE}; SameSite=Strict"
        doc.js_on_event("document_ready", CustomJS(args={"cookie": cookie}, code="document.cookie = cookie;"))
    try:
        runs.keep_in(store if store is not None else default_store(), token)
    except Exception:  # noqa: BLE001 - the page works without it: a reload starts an empty table
        logger.exception("Could not keep the runs table across reloads")
    return token


class HeldOutChoice(StateView):
    """The Data card's "hold out 10% of rows" checkbox and its seed."""

    held_out = Reads(class_=HeldOutRows)
    data = Reads(class_=LoadedData)

    def __init__(self, **params):
        super().__init__(**params)
        held = self.held_out
        self.enabled = pn.widgets.Checkbox.from_param(held.param.enabled, label="Hold out 10% of rows (scored in Runs)")
        self.seed = pn.widgets.IntInput.from_param(held.param.seed, label="Held-out seed", width=110)
        self.note = pn.pane.Str("", visible=False, sizing_mode="stretch_width", styles={"font-size": "12px"})
        held.param.watch(self._refresh, ["enabled", "note"])
        self.data.param.watch(self._refresh, ["locked"])
        self._refresh()

    def _refresh(self, *events):
        held, locked = self.held_out, self.data.locked
        self.enabled.disabled = self.seed.disabled = locked
        self.seed.visible = held.enabled
        self.note.object = held.note
        self.note.visible = bool(held.note)

    def __panel__(self):
        return pn.Column(self.enabled, self.seed, self.note, sizing_mode="stretch_width", margin=0)
