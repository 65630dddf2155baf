"""Models with layers (a deep GP): the layers text in the Model card, and one latent map per layer.

* :class:`DeepLayersInput` -- "Layer dims (data side first)", e.g. ``5, 2``,
  shown for models whose catalog entry takes ``"layers"``;
* :class:`DeepLayersView` -- shown for results of models whose catalog entry
  has ``panel == "deep"``: per layer, side by side from the data side up, its
  latent map (the two most relevant dims, shaded by the layer's own
  predictive variance, light = confident; points coloured by label) and its
  ARD bars, both updating live while the model trains.  Clicking a point in
  the top layer marks where that row sits in every layer below and shows its
  reconstruction in data space next to the row itself.
"""
from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.events import Tap
from bokeh.models import ColumnDataSource, FactorRange, FixedTicker, LinearColorMapper, Range1d
from bokeh.plotting import figure

from ..state.deep import DeepLayers
from ..state.settings import ModelSettings
from ..state.shown import ShownData
from .common import ACCENT, MUTED_MD, PANEL_STYLES, Reads, StateView, escape, plain, sync, title_with_help
from .reconstruction import GREYS

HELP = """**Deep GP: one map per layer.** The data are generated from the first hidden layer, that
layer from the one above it, and so on up to the top layer (a standard normal prior). Each map shows
one layer's latent means on its two most relevant dimensions (by that layer's ARD), shaded by the
predictive variance of the GP that maps the layer to the one below (light = confident). Points are
coloured by label in every layer, so you can see how the representation changes going up.
Click a point in the **top** layer: its row is marked in every layer, and the model's reconstruction
of it in data space is shown beside the row itself."""

#: light = low variance (confident), as in the main latent map
SHADES = GREYS[90:][::-1]
MARKER = "#d55e00"
POINT_LIMIT = 5000  # points drawn per layer (a regular subsample above it)


def _layer_title(index: int, count: int) -> str:
    if count == 1:
        return "Layer 1 (the only layer)"
    if index == 0:
        return "Layer 1 (data side)"
    if index == count - 1:
        return f"Layer {index + 1} (top): click a point"
    return f"Layer {index + 1}"


class DeepLayersInput(StateView):
    """The layers text of the Model card (only for models whose catalog entry takes layers)."""

    settings = Reads(class_=ModelSettings)

    def __init__(self, **params):
        super().__init__(**params)
        s = self.settings
        self.text = pn.widgets.TextInput(label="Layer dims, data side first (e.g. 5, 2)", value=s.layers,
                                         sizing_mode="stretch_width", css_classes=["gx-layers"])
        sync(self.text, s, "layers")
        self.note = pn.pane.HTML(escape("One number per layer: the first layer generates the data, "
                                        "the last is the top layer shown on the main latent map."),
                                 sizing_mode="stretch_width", stylesheets=[MUTED_MD], margin=(0, 10))
        s.param.watch(self._refresh, ["model", "locked"])
        self._refresh()

    def _refresh(self, *events):
        s = self.settings
        show = "layers" in s.spec.inputs
        self.text.visible = self.note.visible = show
        self.text.disabled = s.locked

    def __panel__(self):
        return pn.Column(self.text, self.note, sizing_mode="stretch_width")


class _LayerPlot:
    """One layer: the variance image, the points, the picked row's marker, and the ARD bars."""

    def __init__(self, index: int, count: int):
        self.index = index
        self.mapper = LinearColorMapper(palette=SHADES, low=0, high=1)
        self.image_src = ColumnDataSource({"image": [], "x": [], "y": [], "dw": [], "dh": []})
        self.point_src = ColumnDataSource({"x": [], "y": [], "colour": [], "label": [], "row": []})
        self.marker_src = ColumnDataSource({"x": [], "y": []})
        self.x_range, self.y_range = Range1d(-1, 1), Range1d(-1, 1)
        f = figure(title=_layer_title(index, count), width=300, height=290, x_range=self.x_range,
                   y_range=self.y_range, tools="pan,wheel_zoom,reset,save", toolbar_location="right",
                   name=f"gx-deep-layer-{index}", match_aspect=False)
        f.image("image", x="x", y="y", dw="dw", dh="dh", source=self.image_src, color_mapper=self.mapper)
        f.scatter("x", "y", source=self.point_src, color="colour", size=5, line_color="white", line_width=0.4,
                  alpha=0.9)
        f.scatter("x", "y", source=self.marker_src, marker="circle_cross", size=18, line_color=MARKER,
                  fill_alpha=0, line_width=2.5)
        f.grid.visible = False
        self.fig = f
        self.ard_src = ColumnDataSource({"dim": [], "value": [], "colour": []})
        self.ard = figure(x_range=FactorRange(factors=[]), y_range=Range1d(0, 1.1), width=300, height=130,
                          toolbar_location=None, title="ARD (relevance / largest)",
                          name=f"gx-deep-ard-{index}")
        self.ard.vbar(x="dim", top="value", width=0.8, source=self.ard_src, color="colour")
        self.ard.xgrid.grid_line_color = None
        self.ard.title.text_font_size = "9pt"
        self.pane = pn.Column(pn.pane.Bokeh(f, width=305, height=295), pn.pane.Bokeh(self.ard, width=305, height=135),
                              width=310, css_classes=[f"gx-deep-layer-{index}"])

    def show(self, layer, colours, labels, count: int) -> None:
        xd, yd = layer.dims
        self.fig.title.text = _layer_title(self.index, count)
        self.fig.xaxis.axis_label = f"x{xd + 1}"
        self.fig.yaxis.axis_label = f"x{yd + 1}" if yd is not None else ""
        x0, y0, x1, y1 = layer.extent
        self.x_range.update(start=x0, end=x1)
        self.y_range.update(start=y0, end=y1)
        if layer.variance is not None:
            v = np.asarray(layer.variance, dtype=float)
            lo, hi = float(np.nanmin(v)), float(np.nanmax(v))
            self.mapper.update(low=lo, high=hi if hi > lo else lo + 1e-12)
            self.image_src.data = {"image": [v], "x": [x0], "y": [y0], "dw": [x1 - x0], "dh": [y1 - y0]}
        else:
            self.image_src.data = {"image": [], "x": [], "y": [], "dw": [], "dh": []}
        pts = layer.points
        rows = np.arange(len(pts))
        if len(rows) > POINT_LIMIT:
            rows = rows[:: int(np.ceil(len(rows) / POINT_LIMIT))]
        self.point_src.data = {"x": pts[rows, 0], "y": pts[rows, 1], "colour": [colours[r] for r in rows],
                               "label": [labels[r] for r in rows], "row": rows}
        rel = np.asarray(layer.relevance, dtype=float)
        top = float(rel.max()) if rel.size and rel.max() > 0 else 1.0
        dims = [f"x{q + 1}" for q in range(rel.size)]
        if list(self.ard.x_range.factors) != dims:
            self.ard.x_range.factors = dims
        shown = {xd, yd}
        self.ard_src.data = {"dim": dims, "value": rel / top,
                             "colour": [ACCENT if q in shown else "#9fb3c8" for q in range(rel.size)]}

    def mark(self, layer, location) -> None:
        if location is None:
            self.marker_src.data = {"x": [], "y": []}
            return
        xd, yd = layer.dims
        self.marker_src.data = {"x": [float(location[xd])], "y": [float(location[yd]) if yd is not None else 0.0]}


class DeepLayersView(StateView):
    """Per-layer latent maps side by side, with the top layer's picked row through every layer."""

    deep = Reads(class_=DeepLayers)
    shown = Reads(class_=ShownData)

    def __init__(self, **params):
        super().__init__(**params)
        self.title = title_with_help("Layers: one latent map per layer", HELP)
        self.text = pn.pane.HTML(escape("Train a deep GP to see its layers."), sizing_mode="stretch_width",
                                 stylesheets=[MUTED_MD], margin=(0, 10), css_classes=["gx-deep-text"])
        self.legend = pn.pane.HTML("", sizing_mode="stretch_width", stylesheets=[MUTED_MD], margin=(0, 10),
                                   css_classes=["gx-deep-legend"])
        self.maps_row = pn.Row(sizing_mode="stretch_width", scroll=True, css_classes=["gx-deep-maps"])
        self.recon_row = pn.FlexBox(sizing_mode="stretch_width", css_classes=["gx-deep-recon"])  # wraps when narrow
        self._plots: list[_LayerPlot] = []
        self._recon_key = None
        self._recon = None
        self.layout = pn.Column(self.title, self.text, self.maps_row, self.legend, self.recon_row, sizing_mode="stretch_width",
                                styles=PANEL_STYLES, visible=False, css_classes=["gx-deep"])
        self.deep.param.watch(self._on_maps, ["maps"])
        self.deep.param.watch(self._on_selection, ["selection"])
        self.deep.param.watch(self._on_error, ["error"])
        self._on_maps()

    # ---- updates ------------------------------------------------------------------------------
    def _colours(self, result):
        ds = result.dataset
        n = len(result.X_mean)
        col = self.shown.colouring(ds) if ds is not None else None
        if col is None or col.n != n:
            return [ACCENT] * n, [""] * n
        colours = [col.colours[c] for c in col.codes]
        labels = [col.categories[c] for c in col.codes]
        return colours, labels

    def _on_maps(self, *events):
        deep = self.deep
        maps, result = deep.maps, deep.result
        self.layout.visible = bool(maps)
        if not maps:
            return
        count = len(maps)
        if len(self._plots) != count:
            self._plots = [_LayerPlot(l, count) for l in range(count)]
            self._plots[-1].fig.on_event(Tap, self._on_tap)
            self.maps_row.objects = [p.pane for p in self._plots]
        colours, labels = self._colours(result)
        self.legend.object = self._legend(result)
        for plot, layer in zip(self._plots, maps):
            plot.show(layer, colours, labels, count)
        self.text.object = escape(f"{count} layers, data side first (left) to the top (right); iteration "
                                  f"{result.iteration}. Click a point in the top layer to follow it down.")
        self._on_selection()

    def _legend(self, result) -> str:
        """Label colours as HTML: the colours are the app's palette, the names are escaped user text."""
        ds = result.dataset
        col = self.shown.colouring(ds) if ds is not None else None
        if col is None or not col.name or col.n != len(result.X_mean):
            return ""
        items = "".join(f"<span style='white-space:nowrap;margin-right:10px'><span style='display:inline-block;"
                        f"width:10px;height:10px;border-radius:50%;background:{c}'></span> {escape(name, 30)}</span>"
                        for name, c in list(zip(col.categories, col.colours))[:12])
        return f"<p>{escape(col.name, 40)}: {items}</p>"

    def _on_tap(self, event):
        deep = self.deep
        row = deep.nearest_top(float(event.x), float(event.y))
        if row is not None:
            deep.select(row)

    def _on_error(self, *events):
        err = self.deep.error
        if err:
            self.text.object = escape(err)

    def _on_selection(self, *events):
        deep = self.deep
        sel, maps = deep.selection, deep.maps
        for plot, layer in zip(self._plots, maps):
            plot.mark(layer, None if sel is None else sel.locations[layer.index])
        if sel is None:
            self.recon_row.objects = []
            self._recon_key = None
            return
        key = (sel.image_shape, len(sel.mean))
        if self._recon_key != key:
            self._recon = _Reconstruction(sel.image_shape, sel.feature_names)
            self._recon_key = key
            self.recon_row.objects = self._recon.panes
        self._recon.show(sel)

    def __panel__(self):
        return self.layout


class _Reconstruction:
    """The picked row reconstructed from its top-layer mean, beside the row itself."""

    def __init__(self, image_shape, names):
        self.image_shape = image_shape
        self.caption = pn.pane.HTML("", stylesheets=[MUTED_MD], margin=(0, 10), width=220,
                                    css_classes=["gx-deep-recon-text"])
        if image_shape is not None:
            h, w = image_shape
            self.mapper = LinearColorMapper(palette=GREYS, low=0, high=1)
            self.srcs = [ColumnDataSource({"image": [np.zeros((h, w))], "dw": [w], "dh": [h]}) for _ in range(2)]
            figs = []
            for title, src in zip(("Reconstruction", "The row"), self.srcs):
                f = figure(title=title, width=170, height=190, toolbar_location=None, x_range=Range1d(0, w),
                           y_range=Range1d(0, h), name="gx-deep-recon")
                f.image("image", x=0, y=0, dw="dw", dh="dh", source=src, color_mapper=self.mapper)
                f.axis.visible = False
                f.grid.visible = False
                figs.append(pn.pane.Bokeh(f, width=175, height=195))
            self.panes = [self.caption, *figs]
        else:
            self.src = ColumnDataSource({"x": [], "mean": [], "lower": [], "upper": [], "actual": []})
            f = figure(title="Reconstruction (line, ±2σ) and the row (dashed)", height=220, width=520,
                       toolbar_location=None, x_axis_label="column", y_axis_label="value", name="gx-deep-recon")
            f.varea("x", "lower", "upper", source=self.src, fill_color=ACCENT, fill_alpha=0.2)
            f.line("x", "mean", source=self.src, color=ACCENT, line_width=2)
            f.line("x", "actual", source=self.src, color=MARKER, line_dash="dashed")
            if 0 < len(names) <= 16:
                f.xaxis.ticker = FixedTicker(ticks=list(range(len(names))))
                f.xaxis.major_label_overrides = {j: plain(n, 14) for j, n in enumerate(names)}
                f.xaxis.major_label_orientation = 0.8
            self.panes = [self.caption, pn.pane.Bokeh(f, width=525, height=225)]

    def show(self, sel) -> None:
        where = " → ".join(f"layer {l + 1}: (" + ", ".join(f"{v:.2f}" for v in loc[:3])
                           + (", …" if len(loc) > 3 else "") + ")"
                           for l, loc in reversed(list(enumerate(sel.locations))))
        self.caption.object = escape(f"Row {sel.row}, from the top down: {where}", 400)
        if self.image_shape is not None:
            h, w = self.image_shape
            both = np.concatenate([sel.mean, sel.actual])
            lo, hi = float(np.nanmin(both)), float(np.nanmax(both))
            self.mapper.update(low=lo, high=hi if hi > lo else lo + 1.0)
            for src, values in zip(self.srcs, (sel.mean, sel.actual)):
                src.data = {"image": [np.asarray(values, dtype=float).reshape(h, w)[::-1]], "dw": [w], "dh": [h]}
        else:
            n = len(sel.mean)
            self.src.data = {"x": np.arange(n), "mean": sel.mean, "lower": sel.mean - 2 * sel.std,
                             "upper": sel.mean + 2 * sel.std, "actual": sel.actual}
