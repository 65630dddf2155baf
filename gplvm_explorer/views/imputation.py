"""Missing values in the page: the choice for models that cannot use them, and the imputed values.

:class:`MissingDataChoice` sits in the Model card: it says whether the chosen
model trains on missing cells as they are, and otherwise offers filling them
with column means or dropping the incomplete rows.  :class:`ImputationView`
shows, for one training row, the observed values beside the ones the model
filled in (±2σ) -- for images, the picture with its missing pixels marked and
filled in -- and downloads the completed data as CSV.
"""
from __future__ import annotations

import io
import logging

import numpy as np
import panel as pn
import param
from bokeh.models import ColumnDataSource, DataRange1d, LinearColorMapper, Range1d
from bokeh.palettes import Inferno256
from bokeh.plotting import figure

from .. import export, help_texts
from ..state.data import LoadedData
from ..state.imputation import MISSING_CHOICES, ImputedValues, MissingValues
from ..state.settings import ModelSettings
from .common import (ACCENT, MUTED_MD, OUTLINE, PANEL_STYLES, SMALL_MD, Reads, StateView, escape, label_feature_axis,
                     on_click, sync, title_with_help)
from .reconstruction import GREYS

logger = logging.getLogger(__name__)

__all__ = ["ImputationView", "MissingDataChoice"]

#: Colour of missing / filled-in cells (colour-blind safe against the grey images and the blue accent).
MARK = "#e66100"
HINT = ("Train a model on data with missing cells to see them filled in here "
        "(try the sample \u201cGlyph with hidden quarters\u201d with the Bayesian GP-LVM).")
MAX_LISTED = 12


class MissingDataChoice(StateView):
    """Model card: how the chosen model deals with the data's missing cells."""

    data = Reads(class_=LoadedData)
    settings = Reads(class_=ModelSettings)
    missing = Reads(class_=MissingValues)

    def __init__(self, **params):
        super().__init__(**params)
        self.note = pn.pane.Alert("", alert_type="info", visible=False, sizing_mode="stretch_width",
                                  css_classes=["gx-missing-note"])
        self.choice = pn.widgets.RadioButtonGroup(options={label: key for key, label in MISSING_CHOICES.items()},
                                                  value=self.missing.choice, orientation="vertical", color="primary",
                                                  **OUTLINE, visible=False, sizing_mode="stretch_width",
                                                  css_classes=["gx-missing-choice"])
        sync(self.choice, self.missing, "choice")
        self.data.param.watch(self._refresh, ["dataset"])
        self.settings.param.watch(self._refresh, ["model", "locked"])
        self._refresh()

    def _refresh(self, *events):
        spec, ds = self.settings.spec, self.data.dataset
        text = self.missing.advice(ds, spec)
        self.note.object = escape(text, None)
        self.note.alert_type = "info" if spec.handles_missing else "warning"
        self.note.visible = bool(text)
        self.choice.visible = bool(text) and not spec.handles_missing
        self.choice.disabled = self.settings.locked

    def __panel__(self):
        return pn.Column(self.note, self.choice, sizing_mode="stretch_width", margin=(0, 0, 4, 0))


class ImputationView(StateView):
    """Observed vs filled-in values of one training row, and the CSV download."""

    imputation = Reads(class_=ImputedValues)

    def __init__(self, **params):
        super().__init__(**params)
        state = self.imputation
        self.title = title_with_help("Imputed values", help_texts.IMPUTATION)
        self.text = pn.pane.HTML(escape(HINT), sizing_mode="stretch_width", stylesheets=[MUTED_MD],
                                 margin=(0, 10), css_classes=["gx-imputed-text"])
        self.table = pn.pane.HTML("", sizing_mode="stretch_width", stylesheets=[SMALL_MD], margin=(0, 10),
                                  css_classes=["gx-imputed-table"], visible=False)
        self.row = pn.widgets.IntInput(label="Row", value=state.row, start=0, width=110)
        sync(self.row, state, "row")
        self.prev_btn = pn.widgets.Button(label="◀ Previous incomplete row", color="default", **OUTLINE,
                                          width=200, margin=(26, 5, 5, 5))
        self.next_btn = pn.widgets.Button(label="Next incomplete row ▶", color="default", **OUTLINE,
                                          width=200, margin=(26, 5, 5, 5))
        on_click(self.prev_btn, lambda e: state.step(-1))
        on_click(self.next_btn, lambda e: state.step(+1))
        self.download = pn.widgets.FileDownload(callback=self._csv, filename="imputed.csv",
                                                label="Imputed data (CSV)", color="primary", **OUTLINE,
                                                width=200, margin=(26, 5, 5, 15), disabled=True)
        self.error = pn.pane.Alert("", alert_type="warning", visible=False, sizing_mode="stretch_width")
        # rows that wrap: on a narrow screen the controls and images go one under the other (never cut off)
        self.controls = pn.FlexBox(self.row, self.prev_btn, self.next_btn, self.download, visible=False,
                                   sizing_mode="stretch_width", align_items="flex-start")

        # images: observed (missing marked), filled in (filled pixels outlined), 2σ
        self.mapper = LinearColorMapper(palette=GREYS, low=0, high=1, nan_color=MARK)
        self.std_mapper = LinearColorMapper(palette=Inferno256, low=0, high=1)
        self.observed_source = ColumnDataSource({"image": [np.full((1, 1), 0.5)], "dw": [1], "dh": [1]})
        self.filled_source = ColumnDataSource({"image": [np.full((1, 1), 0.5)], "dw": [1], "dh": [1]})
        self.std_source = ColumnDataSource({"image": [np.zeros((1, 1))], "dw": [1], "dh": [1]})
        self.outline_source = ColumnDataSource({"x0": [], "y0": [], "x1": [], "y1": []})
        self.observed_fig = self._image_figure("Observed (missing in orange)", self.observed_source, self.mapper)
        self.filled_fig = self._image_figure("Filled in (outlined)", self.filled_source, self.mapper)
        self.filled_fig.segment("x0", "y0", "x1", "y1", source=self.outline_source, line_color=MARK,
                                line_width=2)
        self.std_fig = self._image_figure("2σ of the filled pixels", self.std_source, self.std_mapper)
        panes = [pn.pane.Bokeh(f, width=214, height=240) for f in (self.observed_fig, self.filled_fig, self.std_fig)]
        self._std_pane = panes[2]  # a Bernoulli model's filled pixels are probabilities: no 2σ image
        self.images = pn.FlexBox(*panes, visible=False, sizing_mode="stretch_width")

        # other data: one point per feature
        self.obs_points = ColumnDataSource({"x": [], "observed": []})
        self.imp_points = ColumnDataSource({"x": [], "imputed": [], "lower": [], "upper": []})
        self.profile_fig = self._profile_figure()
        self.profile = pn.Column(pn.pane.Bokeh(self.profile_fig, sizing_mode="stretch_width", height=280),
                                 sizing_mode="stretch_width", visible=False)
        state.param.watch(self._refresh, ["imputation", "error", "result", "incomplete_rows"])
        self._shown_dataset = None
        self._refresh()

    # ---- figures ---------------------------------------------------------------------
    def _image_figure(self, title, source, mapper):
        fig = figure(title=title, width=208, height=236, toolbar_location=None, x_range=Range1d(0, 1),
                     y_range=Range1d(0, 1), match_aspect=True)
        fig.image("image", x=0, y=0, dw="dw", dh="dh", source=source, color_mapper=mapper)
        fig.axis.visible = False
        fig.grid.visible = False
        fig.title.text_font_size = "9pt"
        return fig

    def _profile_figure(self):
        fig = figure(title="Observed and filled-in values of the row", height=270, sizing_mode="stretch_width",
                     toolbar_location="above", tools="pan,wheel_zoom,box_zoom,reset,save",
                     x_axis_label="feature", y_axis_label="value")
        fig.segment("x", "lower", "x", "upper", source=self.imp_points, line_color=MARK, line_width=2,
                    legend_label="±2σ")
        fig.scatter("x", "observed", source=self.obs_points, size=7, color=ACCENT, legend_label="observed")
        fig.scatter("x", "imputed", source=self.imp_points, size=11, marker="diamond", color=MARK,
                    legend_label="filled in")
        legend = fig.legend[0]
        legend.label_text_font_size = "8pt"
        legend.border_line_alpha = 0
        fig.add_layout(legend, "right")  # beside the plot: it never hides a point
        return fig

    # ---- updates ---------------------------------------------------------------------
    def _refresh(self, *events):
        state = self.imputation
        result = state.result
        self.error.object = escape(state.error, None)
        self.error.visible = bool(state.error)
        self.download.disabled = result is None
        rows = state.incomplete_rows
        has_missing = rows is not None and len(rows) > 0
        if result is None:
            self.text.object = escape(HINT)
            self.controls.visible = self.images.visible = self.profile.visible = self.table.visible = False
            return
        ds = result.dataset
        self.row.end = ds.n - 1
        self.controls.visible = True
        self.prev_btn.disabled = self.next_btn.disabled = not has_missing
        if not has_missing:
            self.text.object = escape("No missing cells in the data this model was trained on: nothing to fill "
                                      "in. " + HINT)
            self.images.visible = self.profile.visible = self.table.visible = False
            return
        if ds is not self._shown_dataset:
            self._shown_dataset = ds
            self._set_axes(ds)
        imp = state.imputation
        if imp is None:
            return
        self.text.object = self._describe(result, imp, len(rows))
        if imp.is_image:
            self._show_image(imp)
        else:
            self._show_profile(imp)

    def _describe(self, result, imp, n_rows) -> str:
        label = f" (label {escape(imp.label, 60)})" if imp.label else ""
        live = "" if result.final else f" (iteration {result.iteration}, still training)"
        head = f"Row {imp.row}{label}: "
        if imp.n_missing == 0:
            body = "complete, nothing filled in."
        elif imp.method == "model":
            what = "pixel(s)" if imp.is_image else "value(s)"
            how = (" as probabilities P(y = 1) (Bernoulli likelihood)" if imp.probabilities else ", with ±2σ")
            body = (f"{imp.n_missing} of {imp.values.size} {what} filled in by the "
                    f"{escape(result.config.spec.display_name)}{live}{how}.")
        elif imp.method == "column mean":
            body = (f"{imp.n_missing} value(s) were filled with their column mean before training (the "
                    f"{escape(result.config.spec.display_name)} cannot use missing values); ±2σ is the column's "
                    "spread.")
        else:
            body = f"{imp.n_missing} value(s) missing; this model cannot fill them in."
        return f"{head}{body} {n_rows} row(s) have filled-in cells."

    def _set_axes(self, ds) -> None:
        if ds.image_shape is not None:
            h, w = ds.image_shape
            for fig in (self.observed_fig, self.filled_fig, self.std_fig):
                fig.x_range.update(start=0, end=w)
                fig.y_range.update(start=0, end=h)
            return
        label_feature_axis(self.profile_fig.xaxis[0], ds.feature_names, ds.d)

    def _show_image(self, imp) -> None:
        h, w = imp.image_shape
        self.images.visible, self.profile.visible, self.table.visible = True, False, False
        filled = imp.values.reshape(h, w)
        lo, hi = float(np.nanmin(filled)), float(np.nanmax(filled))
        if imp.probabilities:  # 0/1 pixels and probabilities on one fixed scale
            lo, hi = 0.0, 1.0
        self.mapper.update(low=lo, high=hi if hi > lo else lo + 1.0)
        self._std_pane.visible = not imp.probabilities
        self.filled_fig.title.text = ("Filled in: P(y = 1) (outlined)" if imp.probabilities
                                      else "Filled in (outlined)")
        two_sd = np.where(imp.missing, 2.0 * imp.std, np.nan).reshape(h, w)
        top = float(np.nanmax(two_sd)) if imp.missing.any() else 0.0
        self.std_mapper.update(low=0.0, high=top if top > 0 else 1.0, nan_color="#000000")
        # row 0 of an image is its top row; Bokeh draws row 0 at the bottom
        self.observed_source.data = {"image": [imp.observed_values.reshape(h, w)[::-1]], "dw": [w], "dh": [h]}
        self.filled_source.data = {"image": [filled[::-1]], "dw": [w], "dh": [h]}
        self.std_source.data = {"image": [two_sd[::-1]], "dw": [w], "dh": [h]}
        self.outline_source.data = outline_segments(imp.missing.reshape(h, w))
        self.std_fig.title.text = f"2σ of the filled pixels (max {top:.2g})" if top > 0 else "2σ (nothing filled)"

    def _show_profile(self, imp) -> None:
        self.images.visible, self.profile.visible = False, True
        x = np.arange(imp.values.size)
        obs = ~imp.missing
        m = imp.missing
        self.obs_points.data = {"x": x[obs], "observed": imp.values[obs]}
        spread = 0.0 if imp.probabilities else 2 * imp.std[m]  # a probability carries its own uncertainty
        self.imp_points.data = {"x": x[m], "imputed": imp.values[m], "lower": imp.values[m] - spread,
                                "upper": imp.values[m] + spread}
        self._probability_axis(imp.probabilities)
        idx = np.nonzero(m)[0]
        if idx.size:
            if imp.probabilities:
                cells = "".join(f"<li><b>{escape(imp.feature_names[j], 40)}</b>: P(y = 1) = {imp.values[j]:.3f}</li>"
                                for j in idx[:MAX_LISTED])
                head = "Filled in (the probability of a 1):"
            else:
                cells = "".join(
                    f"<li><b>{escape(imp.feature_names[j], 40)}</b> = {imp.values[j]:.4g} ± {2 * imp.std[j]:.2g}</li>"
                    for j in idx[:MAX_LISTED])
                head = "Filled in (value ± 2σ):"
            more = f"<li>… and {idx.size - MAX_LISTED} more</li>" if idx.size > MAX_LISTED else ""
            self.table.object = f"<p>{head}</p><ul>{cells}{more}</ul>"
            self.table.visible = True
        else:
            self.table.visible = False

    def _probability_axis(self, probabilities: bool) -> None:
        """A Bernoulli model's profile on a fixed [0, 1] axis of P(y = 1); else the data's own axis."""
        fig = self.profile_fig
        if probabilities:
            if not isinstance(fig.y_range, Range1d):
                fig.y_range = Range1d(-0.05, 1.05)
            fig.yaxis.axis_label = "value, or P(y = 1)"
        elif isinstance(fig.y_range, Range1d):
            fig.y_range = DataRange1d()
            fig.yaxis.axis_label = "value"
        fig.legend[0].items[0].visible = not probabilities  # "±2σ": none around a probability

    # ---- export ----------------------------------------------------------------------
    def _csv(self):
        try:
            self.error.visible = False
            return io.BytesIO(export.imputed_csv(self.imputation.result))
        except Exception as exc:
            logger.exception("Imputed-data export failed")
            self.error.object = escape(f"Export failed: {exc}", None)
            self.error.visible = True
            return io.BytesIO(b"")

    def __panel__(self):
        return pn.Column(self.title, self.text, self.controls, self.error, self.images, self.profile, self.table,
                         sizing_mode="stretch_width", styles=PANEL_STYLES, css_classes=["gx-imputation"])


def outline_segments(mask: np.ndarray) -> dict:
    """Edges between a True cell of ``mask`` (h, w; row 0 at the top) and a False one or the border.

    Returned as Bokeh segment columns in image coordinates (x right, y up, one
    unit per pixel), so the outline of each filled-in region is drawn once.
    """
    h, w = mask.shape
    padded = np.pad(mask, 1, constant_values=False)
    inner = padded[1:-1, 1:-1]
    x0, y0, x1, y1 = [], [], [], []

    def add(rows, cols, dx0, dy0, dx1, dy1):
        # cell (r, c) spans x in [c, c+1], y in [h-r-1, h-r]
        x0.extend(cols + dx0)
        y0.extend(h - rows - 1 + dy0)
        x1.extend(cols + dx1)
        y1.extend(h - rows - 1 + dy1)

    r, c = np.nonzero(inner & ~padded[:-2, 1:-1])  # top edge
    add(r, c, 0, 1, 1, 1)
    r, c = np.nonzero(inner & ~padded[2:, 1:-1])  # bottom edge
    add(r, c, 0, 0, 1, 0)
    r, c = np.nonzero(inner & ~padded[1:-1, :-2])  # left edge
    add(r, c, 0, 0, 0, 1)
    r, c = np.nonzero(inner & ~padded[1:-1, 2:])  # right edge
    add(r, c, 1, 0, 1, 1)
    as_float = lambda v: np.asarray(v, dtype=float)  # noqa: E731
    return {"x0": as_float(x0), "y0": as_float(y0), "x1": as_float(x1), "y1": as_float(y1)}
