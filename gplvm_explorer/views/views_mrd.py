"""The multi-view model's view (MRD): per-view ARD, per-view reconstructions, one view from another.

* ARD bars of every view side by side, per latent dimension, each view's
  relevances scaled to its largest: a dimension with tall bars in several
  views is shared, one tall in a single view is private to it;
* the point clicked on the latent map (any two dims) reconstructed in every
  view (an image for an image view, a profile with ±2σ otherwise);
* "given this row of view A, what does view B look like": q(x*) inferred
  from the row's view A alone, view B predicted from it, beside the row's own.
"""
from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.models import (CategoricalColorMapper, ColumnDataSource, FactorRange, FixedTicker, LinearColorMapper,
                          Range1d)
from bokeh.plotting import figure

from ..state.labels import PALETTE
from ..state.latent import LatentSlice
from ..state.multiview import MultiView, split
from .common import ACCENT, MUTED_MD, PANEL_STYLES, Reads, StateView, escape, on_click, plain, title_with_help
from .reconstruction import GREYS

HELP = """**Several views (MRD).** One latent space is shared by all views; each view has its own ARD
kernel. The bars show each view's relevance of every latent dimension, scaled to that view's largest:
tall bars in several views mark a *shared* dimension, a tall bar in one view a *private* one. Click the
latent map to see that point reconstructed in every view. Below, pick a row and a view to start from:
the latent point is inferred from that view alone and the other view is predicted from it."""

SHARED = 0.1  # relevance above this share of a view's largest counts as "used by the view"


def _short(name: str) -> str:
    return plain(name, 24)


class _ViewPlot:
    """One view's values: an image, or a profile with a ±2σ band and a dashed comparison."""

    def __init__(self, title: str, image_shape, names, role: str = "click", view: str = ""):
        self.image_shape = image_shape
        self.tag = {"role": [role], "view": [view]}  # lets tests and tools find one view's plot
        if image_shape is not None:
            h, w = image_shape
            self.mapper = LinearColorMapper(palette=GREYS, low=0, high=1)
            self.src = ColumnDataSource({"vimage": [np.zeros((h, w))], "dw": [w], "dh": [h], **self.tag})
            f = figure(title=plain(title, 40), width=170, height=190, toolbar_location=None,
                       x_range=Range1d(0, w), y_range=Range1d(0, h))
            f.image("vimage", x=0, y=0, dw="dw", dh="dh", source=self.src, color_mapper=self.mapper)
            f.axis.visible = False
            f.grid.visible = False
            self.pane = pn.pane.Bokeh(f, width=175, height=195)
        else:
            self.src = ColumnDataSource({"vx": [], "vmean": [], "vlower": [], "vupper": [], "vother": [],
                                         "role": [], "view": []})
            f = figure(title=plain(title, 40), height=210, width=260, toolbar_location=None,
                       x_axis_label="column", y_axis_label="value")
            f.varea("vx", "vlower", "vupper", source=self.src, fill_color=ACCENT, fill_alpha=0.2)
            f.line("vx", "vmean", source=self.src, color=ACCENT, line_width=2)
            f.line("vx", "vother", source=self.src, color="#d55e00", line_dash="dashed")
            if 0 < len(names) <= 16:
                f.xaxis.ticker = FixedTicker(ticks=list(range(len(names))))
                f.xaxis.major_label_overrides = {j: plain(n, 14) for j, n in enumerate(names)}
                f.xaxis.major_label_orientation = 0.8
                f.xaxis.axis_label = None
            self.pane = pn.pane.Bokeh(f, width=265, height=215)
        self.fig = f

    def show(self, mean, std=None, other=None, title=None):
        mean = np.asarray(mean, dtype=float)
        if title is not None:
            self.fig.title.text = plain(title, 60)
        if self.image_shape is not None:
            h, w = self.image_shape
            lo, hi = float(np.nanmin(mean)), float(np.nanmax(mean))
            self.mapper.update(low=lo, high=hi if hi > lo else lo + 1.0)
            self.src.data = {"vimage": [mean.reshape(h, w)[::-1]], "dw": [w], "dh": [h], **self.tag}
        else:
            std = np.zeros_like(mean) if std is None else np.asarray(std, dtype=float)
            other = np.full_like(mean, np.nan) if other is None else np.asarray(other, dtype=float)
            n = mean.size
            self.src.data = {"vx": np.arange(n), "vmean": mean, "vlower": mean - 2 * std,
                             "vupper": mean + 2 * std, "vother": other, "role": self.tag["role"] * n,
                             "view": self.tag["view"] * n}


class MultiViewView(StateView):
    """Shown for results of models whose catalog entry has ``panel == "views"``."""

    latent = Reads(class_=LatentSlice)
    multiview = Reads(class_=MultiView)

    def __init__(self, **params):
        super().__init__(**params)
        mv = self.multiview
        self.title = title_with_help("Views: shared and private latent dimensions", HELP)
        self.ard_src = ColumnDataSource({"ard_x": [], "ard_value": [], "ard_view": []})
        self.ard_fig = figure(x_range=FactorRange(factors=[]), height=240, sizing_mode="stretch_width",
                              title="ARD per view (relevance / the view's largest)", toolbar_location=None,
                              y_range=Range1d(0, 1.15))
        self.ard_fig.xgrid.grid_line_color = None
        self.ard_fig.xaxis.major_label_orientation = 0.0
        # the bars exist from the start (a figure without renderers is a Bokeh warning at every page
        # build); the views' names, hence the colours' factors, come with the first result
        self.ard_colours = CategoricalColorMapper(palette=PALETTE[:3], factors=[])
        self.ard_fig.vbar(x="ard_x", top="ard_value", width=0.85, source=self.ard_src, line_color=None,
                          fill_color={"field": "ard_view", "transform": self.ard_colours}, legend_field="ard_view")
        self.ard_fig.legend.location = "top_right"
        self.ard_fig.legend.orientation = "horizontal"
        self.ard_fig.legend.label_text_font_size = "8pt"
        self.ard_note = pn.pane.HTML("", sizing_mode="stretch_width", stylesheets=[MUTED_MD], margin=(0, 10),
                                     css_classes=["gx-ard-note"])
        self.click_text = pn.pane.HTML(escape("Click the latent map to reconstruct that point in every view."),
                                       sizing_mode="stretch_width", stylesheets=[MUTED_MD], margin=(0, 10),
                                       css_classes=["gx-views-click"])
        # one picture per view, wrapping onto the next line on a narrow screen
        self.click_row = pn.FlexBox(sizing_mode="stretch_width", css_classes=["gx-views-recon"], visible=False)
        self.row = pn.widgets.IntInput(label="Row", value=0, start=0, width=90)
        self.source = pn.widgets.Select(label="From view", options={}, width=140)
        self.target = pn.widgets.Select(label="Predict view", options={}, width=140)
        self.go = pn.widgets.Button(label="Predict", color="primary", width=90, margin=(24, 5, 5, 5),
                                    css_classes=["gx-cross-go"])
        on_click(self.go, self._on_go)
        self.cross_text = pn.pane.HTML("", sizing_mode="stretch_width", stylesheets=[MUTED_MD], margin=(0, 10),
                                       css_classes=["gx-cross-text"])
        self.cross_row = pn.FlexBox(sizing_mode="stretch_width", css_classes=["gx-cross"])
        self._layout_key = None
        self._click_plots: list[_ViewPlot] = []
        self.layout = pn.Column(
            self.title, pn.pane.Bokeh(self.ard_fig, sizing_mode="stretch_width", height=250), self.ard_note,
            pn.pane.HTML("<b>The clicked latent point in every view</b>", margin=(4, 10)),
            self.click_text, self.click_row,
            pn.pane.HTML("<b>Given this row of one view, what does the other look like?</b>", margin=(4, 10)),
            pn.FlexBox(self.row, self.source, self.target, self.go, align_items="flex-start"), self.cross_text,
            self.cross_row,
            sizing_mode="stretch_width", styles=PANEL_STYLES, visible=False, css_classes=["gx-views"])
        mv.param.watch(self._on_result, ["result"])
        mv.param.watch(self._on_cross, ["cross", "error", "computing"])
        self.latent.param.watch(self._on_click, ["reconstruction"])

    # ---- the result -------------------------------------------------------------------------
    def _on_result(self, *events):
        mv = self.multiview
        r = mv.result
        self.layout.visible = r is not None
        if r is None:
            return
        layout = mv.layout
        key = tuple((v.name, v.size, v.image_shape) for v in layout)
        if key != self._layout_key:
            self._layout_key = key
            opts = {_short(v.name): k for k, v in enumerate(layout)}
            self.source.options, self.target.options = opts, opts
            self._click_plots = [_ViewPlot(v.name, v.image_shape, v.feature_names, "click", v.name) for v in layout]
            self.click_row.objects = [p.pane for p in self._click_plots]
            self.click_row.visible = False  # empty plots until a click
            self.click_text.object = escape("Click the latent map to reconstruct that point in every view.")
            self.cross_row.objects = []
        self.source.value, self.target.value = mv.source, mv.target
        self.row.end = max(0, r.dataset.n - 1) if r.dataset is not None else 0
        self._draw_ard()

    def _draw_ard(self):
        mv = self.multiview
        r = mv.result
        R = np.asarray(r.view_relevance if r.view_relevance is not None else r.relevance[None], dtype=float)
        R = R / np.maximum(R.max(axis=1, keepdims=True), 1e-300)
        V, Q = R.shape
        names = [_short(v.name) for v in mv.layout] or [f"view {v}" for v in range(V)]
        dims = [f"x{q + 1}" for q in range(Q)]
        factors = [(d, n) for d in dims for n in names]
        self.ard_fig.x_range.factors = factors
        self.ard_colours.update(palette=PALETTE[:max(V, 3)], factors=names)
        self.ard_src.data = {"ard_x": factors, "ard_value": [float(R[v, q]) for q in range(Q) for v in range(V)],
                             "ard_view": [n for _ in dims for n in names]}
        used = R > SHARED
        parts = []
        for q in range(Q):
            who = [names[v] for v in range(V) if used[v, q]]
            if len(who) >= 2:
                parts.append(f"x{q + 1}: shared ({', '.join(who)})")
            elif len(who) == 1:
                parts.append(f"x{q + 1}: private to {who[0]}")
        off = [f"x{q + 1}" for q in range(Q) if not used[:, q].any()]
        if off:
            parts.append("switched off: " + ", ".join(off))
        self.ard_note.object = escape("; ".join(parts) + ".")

    # ---- the clicked point in every view ----------------------------------------------------
    def _on_click(self, *events):
        mv = self.multiview
        rec = self.latent.reconstruction
        if mv.result is None or rec is None or not self._click_plots:
            return
        if rec.mean.size != sum(v.size for v in mv.layout):
            return
        means, stds = split(rec.mean, mv.layout), split(rec.std, mv.layout)
        nears = split(rec.nearest_values, mv.layout)
        for p, v, m, s, nv in zip(self._click_plots, mv.layout, means, stds, nears):
            p.show(m, s, nv, title=f"{v.name}: predicted")
        self.click_row.visible = True
        self.click_text.object = escape(
            f"At the clicked latent point (dashed: nearest training row #{rec.nearest_index}).")

    # ---- one view from another ------------------------------------------------------------
    def _on_go(self, event=None):
        mv = self.multiview
        with param.parameterized.batch_call_watchers(mv):
            mv.row = int(self.row.value)
            mv.source = int(self.source.value or 0)
            mv.target = int(self.target.value or 0)
        mv.ask()

    def _on_cross(self, *events):
        mv = self.multiview
        if mv.error:
            self.cross_text.object = escape(mv.error)
            return
        if mv.computing:
            self.cross_text.object = escape("Inferring the latent point from one view…")
        c = mv.cross
        if c is None or not mv.layout or mv.computing:
            return
        src, dst = mv.layout[c.source], mv.layout[c.target]
        a = _ViewPlot(f"row {c.row}: {src.name} (given)", src.image_shape, src.feature_names, "given", src.name)
        a.show(c.source_values)
        b = _ViewPlot(f"{dst.name} predicted", dst.image_shape, dst.feature_names, "predicted", dst.name)
        b.show(c.mean, c.std, None if dst.image_shape is not None else c.actual)
        parts = [a.pane, b.pane]
        if dst.image_shape is not None:
            t = _ViewPlot(f"row {c.row}: {dst.name} (actual)", dst.image_shape, dst.feature_names, "actual",
                          dst.name)
            t.show(c.actual)
            parts.append(t.pane)
        self.cross_row.objects = parts
        self.cross_text.object = escape(
            f"Row {c.row}: latent point inferred from {src.name} alone; {dst.name} predicted from it "
            f"(RMSE {c.rmse:.3g} against the row's own {dst.name}"
            + ("" if dst.image_shape is not None else ", dashed") + ").")

    def __panel__(self):
        return self.layout
