"""Live training plots: the objective curve and the ARD bars."""
from __future__ import annotations

import holoviews as hv
import numpy as np
import panel as pn
import param
from bokeh.models import BasicTickFormatter, ColumnDataSource, HoverTool, Range1d
from bokeh.plotting import figure

from .. import help_texts
from ..viewmodel import ExplorerState
from .common import ACCENT, OUTLINE, PANEL_STYLES, title_with_help


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


class ObjectivePlot(pn.viewable.Viewer):
    """ELBO / log-likelihood per iteration.

    A plain Bokeh figure fed by ``ColumnDataSource.stream`` from the
    view-model's ``Buffer``: each poll sends only the new points, and a
    stream touches no model references, so the curve can refresh at the full
    poll rate without re-rendering anything.
    """

    vm = param.ClassSelector(class_=ExplorerState)

    def __init__(self, **params):
        super().__init__(**params)
        vm = self.vm
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
        self.figure = fig
        self.plot = pn.pane.Bokeh(fig, sizing_mode="stretch_width", height=250)
        self.title = title_with_help("Objective", help_texts.OBJECTIVE)
        self._n = 0
        self._values = np.empty(0)
        vm.objective_buffer.add_subscriber(self._on_buffer)
        vm.param.watch(self._on_label, ["objective_label"])
        self._on_label()
        self._on_buffer(data=vm.objective_buffer.data)

    def _on_label(self, *events):
        label = self.vm.objective_label
        self.figure.title.text = f"{label} per iteration"
        self.figure.yaxis.axis_label = label

    def _on_buffer(self, data=None, **kwargs):
        if data is None:
            return
        n = len(data)
        if n < self._n or n == 0:  # cleared: a new training
            self._n = 0
            self._values = np.empty(0)
            self.source.data = {"iteration": [], "objective": []}
            if n == 0:
                return
        new = data.iloc[self._n:]
        if len(new):
            self.source.stream({"iteration": new["iteration"].to_numpy(dtype=float),
                                "objective": new["objective"].to_numpy(dtype=float)})
            self._values = np.r_[self._values, new["objective"].to_numpy(dtype=float)]
            self._n = n
            lo, hi = zoom_range(self._values)
            if lo is None:
                v = self._values[np.isfinite(self._values)]
                if v.size:
                    lo, hi = float(v.min()), float(v.max())
                    pad = 0.05 * (hi - lo) if hi > lo else max(1.0, abs(hi) * 0.05)
                    lo, hi = lo - pad, hi + pad
            if lo is not None:
                self.y_range.start, self.y_range.end = lo, hi

    def __panel__(self):
        return pn.Column(self.title, self.plot, sizing_mode="stretch_width", styles=PANEL_STYLES)


class ARDPlot(pn.viewable.Viewer):
    """One bar per latent dimension: relevance or lengthscale (switchable)."""

    vm = param.ClassSelector(class_=ExplorerState)

    def __init__(self, **params):
        super().__init__(**params)
        vm = self.vm
        dmap = hv.DynamicMap(self._bars, streams=[vm.ard_pipe])
        self.plot = pn.pane.HoloViews(dmap, sizing_mode="stretch_width", height=230, linked_axes=False)
        self.mode = pn.widgets.RadioButtonGroup(
            options={"Relevance": "relevance", "Lengthscale": "lengthscale"}, value=vm.relevance_mode,
            **OUTLINE, color="primary", margin=(8, 5, 0, 5), width=190, height=30,
        )
        self.mode.link(vm, value="relevance_mode")
        self.title = pn.Row(title_with_help("ARD", help_texts.ARD), self.mode, sizing_mode="stretch_width")
        vm.param.watch(lambda e: vm.ard_pipe.send(vm.ard_pipe.data), "shown_dims")

    def _bars(self, data):
        mode = self.vm.relevance_mode
        ylabel = "relevance (1/ℓ²)" if mode == "relevance" else "lengthscale ℓ"
        shown = set(self.vm.shown_dims) if self.vm.model_Q >= 2 else set()
        if len(data):
            data = data.copy()
            data["shown"] = ["shown in map" if i in shown else "other" for i in range(len(data))]
        else:
            data = data.assign(shown=[])
        bars = hv.Bars(data, kdims=[hv.Dimension("dimension", label="latent dimension")],
                       vdims=[hv.Dimension("value", label=ylabel), "shown"])
        return bars.opts(
            color="shown", cmap={"shown in map": ACCENT, "other": "#9fb3c8"}, responsive=True, height=220,
            framewise=True, tools=["hover"], show_grid=True, title="ARD: " + ylabel, toolbar="above",
            default_tools=["save", "reset"], show_legend=False, line_color=None,
        )

    def __panel__(self):
        return pn.Column(self.title, self.plot, sizing_mode="stretch_width", styles=PANEL_STYLES)
