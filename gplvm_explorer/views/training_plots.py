"""Live training plots: the objective curve and the ARD bars (a click on a bar picks a map axis)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import panel as pn
import param
from bokeh.events import Tap
from bokeh.models import BasicTickFormatter, ColumnDataSource, FactorRange, HoverTool, Range1d, TapTool, Title
from bokeh.plotting import figure

from .. import help_texts
from ..state.latent import LatentSlice
from ..state.settings import ModelSettings
from ..state.training import TrainingRun
from .common import ACCENT, OUTLINE, PANEL_STYLES, Reads, StateView, title_with_help


def zoom_range(values) -> tuple:
    """A y-range that shows the informative part of an objective curve.

    The first iterations of a GP-LVM fit often sit orders of magnitude below
    the rest, flattening everything after them; once there are enough points
    the range starts at the lowest value after the first 5% of iterations.
    """
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size < 8:
        return (None, None)
    tail = v[max(2, int(0.05 * v.size)):]
    lo, hi = float(tail.min()), float(v.max())
    if lo >= hi:
        return (None, None)
    pad = 0.05 * (hi - lo)
    return (lo - pad, hi + pad)


class ObjectivePlot(StateView):
    """ELBO / log-likelihood per iteration.

    A plain Bokeh figure fed by ``ColumnDataSource.stream`` from the
    view-model's ``Buffer``: each poll sends only the new points, and a
    stream touches no model references, so the curve can refresh at the full
    poll rate without re-rendering anything.
    """

    training = Reads(class_=TrainingRun)

    def __init__(self, **params):
        super().__init__(**params)
        tr = self.training
        self.source = ColumnDataSource(data={"iteration": [], "objective": []})
        self.y_range = Range1d(0, 1)
        fig = figure(
            title="objective per iteration", height=250, sizing_mode="stretch_width", y_range=self.y_range,
            tools="pan,wheel_zoom,box_zoom,reset,save", toolbar_location="above",
            x_axis_label="iteration", y_axis_label="objective",
        )
        fig.line("iteration", "objective", source=self.source, line_width=2, color=ACCENT)
        fig.add_tools(HoverTool(tooltips=[("iteration", "@iteration"), ("value", "@objective{0.000}")],
                                mode="vline"))
        fig.title.text_font_size = "12pt"
        fig.yaxis.formatter = BasicTickFormatter(precision=3, use_scientific=False)
        fig.min_border_left = 60
        # an opened saved model has no trace: say so where the curve would be
        self.note = Title(text="", text_color="#5b6b7c", text_font_size="11pt", text_font_style="normal",
                          visible=False)
        fig.add_layout(self.note, "above")
        self.figure = fig
        self.plot = pn.pane.Bokeh(fig, sizing_mode="stretch_width", height=250)
        self.title = title_with_help("Objective", help_texts.OBJECTIVE)
        self._n = 0  # points of the trace already in the browser
        tr.trace.add_subscriber(self._on_buffer)
        tr.param.watch(self._on_label, ["objective_name"])
        tr.param.watch(self._on_opened, ["opened"])  # set with its bound; cleared when a run starts
        self._on_label()
        self._on_opened()
        self._on_buffer(data=tr.trace.data)

    def _on_label(self, *events):
        label = self.training.objective_name
        self.figure.title.text = f"{label} per iteration"
        self.figure.yaxis.axis_label = label

    def _on_opened(self, *events):
        """Shown while a saved model without a trace is on show and nothing has been trained since."""
        tr = self.training
        untraced = bool(tr.opened) and len(tr.trace.data) == 0
        if untraced:
            self.note.text = (f"{tr.opened}: {tr.objective_name} {tr.objective:.6g} "
                              "(the file holds no trace; Train goes on from here)")
        self.note.visible = untraced

    def _on_buffer(self, data=None, **kwargs):
        if data is None:
            return
        n = len(data)
        if n < self._n or n == 0:  # cleared: a new training
            self._n = 0
            self.source.data = {"iteration": [], "objective": []}
            if n == 0:
                return
        new = data.iloc[self._n:]
        if len(new):
            columns = {"iteration": new["iteration"].to_numpy(dtype=float),
                       "objective": new["objective"].to_numpy(dtype=float)}
            if self._n == 0:  # the first points of a curve replace the data: a stream right after the
                self.source.data = columns  # clearing (an opened model's trace) could reach the page before it
            else:
                self.source.stream(columns)
            self._n = n
            values = data["objective"].to_numpy(dtype=float)
            lo, hi = zoom_range(values)
            if lo is None:
                v = values[np.isfinite(values)]
                if v.size:
                    lo, hi = float(v.min()), float(v.max())
                    pad = 0.05 * (hi - lo) if hi > lo else max(1.0, abs(hi) * 0.05)
                    lo, hi = lo - pad, hi + pad
            if lo is not None:
                self.y_range.update(start=lo, end=hi)

    def __panel__(self):
        return pn.Column(self.title, self.plot, sizing_mode="stretch_width", styles=PANEL_STYLES)


class ARDPlot(StateView):
    """One bar per latent dimension: relevance or lengthscale (switchable), shown dims highlighted.

    A plain Bokeh figure whose source is replaced only when the bars change
    (a new result, other shown dims, the other mode): an update sends Q numbers.
    A click on a bar puts its dimension on the map's horizontal axis, Shift+click
    on the vertical one (as GPy's lvm_dimselect did with the mouse buttons).
    """

    settings = Reads(class_=ModelSettings)
    training = Reads(class_=TrainingRun)
    latent = Reads(class_=LatentSlice)

    def __init__(self, **params):
        super().__init__(**params)
        self.mode = pn.widgets.RadioButtonGroup(
            options={"Relevance": "relevance", "Lengthscale": "lengthscale"}, value="relevance",
            **OUTLINE, color="primary", margin=(8, 5, 0, 5), width=190, height=30,
        )
        self.source = ColumnDataSource({"dimension": [], "value": [], "shown": [], "colour": []}, name="ard-bars")
        fig = figure(x_range=FactorRange(factors=[]), height=220, sizing_mode="stretch_width",
                     tools="save,reset", toolbar_location="above", x_axis_label="latent dimension")
        fig.vbar(x="dimension", top="value", width=0.8, source=self.source, color="colour", line_color=None)
        fig.add_tools(HoverTool(tooltips=[("dimension", "@dimension"), ("value", "@value{0.000}"),
                                          ("", "@shown"), ("", "click: horizontal axis, Shift+click: vertical")]))
        fig.add_tools(TapTool(behavior="inspect"))
        fig.on_event(Tap, self._on_tap)
        fig.y_range.start = 0
        fig.xgrid.grid_line_color = None
        self.figure = fig
        self.plot = pn.pane.Bokeh(fig, sizing_mode="stretch_width", height=230)
        self.mode.param.watch(self._send, "value")
        self.title = pn.Row(title_with_help("ARD", help_texts.ARD), self.mode, sizing_mode="stretch_width")
        self.training.param.watch(self._send, ["result"])
        self.settings.param.watch(self._send, ["latent_dim"])
        self.latent.param.watch(self._send, ["view"])
        self._shown = None  # the frame on show
        self._send()

    def _frame(self) -> pd.DataFrame:
        result = self.training.result
        view = self.latent.view
        shown = set(view.dims) if view is not None else set()
        if result is None:
            q = int(self.settings.latent_dim)  # placeholder bars keep the axis categorical
            value = np.zeros(q)
        else:
            rel = np.asarray(result.relevance, dtype=float)
            if self.mode.value == "lengthscale":
                with np.errstate(divide="ignore"):
                    value = np.minimum(np.where(rel > 0, 1.0 / np.sqrt(np.maximum(rel, 1e-300)), np.inf), 1e6)
            else:
                value = rel
        return pd.DataFrame({"dimension": [f"x{i + 1}" for i in range(len(value))], "value": value,
                             "shown": ["shown in map" if i in shown else "other" for i in range(len(value))]})

    def _on_tap(self, event) -> None:
        """A click on the bars: the bar's dimension on a map axis (category i spans [i, i + 1))."""
        if event.x is None:
            return
        dim = int(np.floor(event.x))
        q = len(self.source.data["dimension"])
        if not 0 <= dim < q or self.training.result is None:
            return
        from panel.io.state import set_curdoc

        shift = bool((getattr(event, "modifiers", None) or {}).get("shift"))
        with set_curdoc(self.figure.document):
            self.latent.show_dim("y" if shift else "x", dim)

    def _send(self, *events):
        frame = self._frame()
        if self._shown is not None and frame.equals(self._shown):  # e.g. a new map of the same result
            return
        self._shown = frame
        dims = list(frame["dimension"])
        if list(self.figure.x_range.factors) != dims:
            self.figure.x_range.factors = dims
        ylabel = "lengthscale ℓ" if self.mode.value == "lengthscale" else "relevance (1/ℓ²)"
        self.figure.title.text = "ARD: " + ylabel
        self.figure.yaxis.axis_label = ylabel
        colours = [ACCENT if s == "shown in map" else "#9fb3c8" for s in frame["shown"]]
        self.source.data = {"dimension": dims, "value": frame["value"].to_numpy(dtype=float),
                            "shown": list(frame["shown"]), "colour": colours}

    def __panel__(self):
        return pn.Column(self.title, self.plot, sizing_mode="stretch_width", styles=PANEL_STYLES)
