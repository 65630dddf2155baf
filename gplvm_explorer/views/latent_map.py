"""The latent map: variance or magnification shading, the points, click to reconstruct.

* The shading is an image of the slice's shading grid (computed in a
  background thread by LatentSlice) with a continuous colour map: the
  predictive variance (linear), or the magnification factor of the expected
  metric (log scale).
* Above ``RASTER_ABOVE`` points the points are rasterised by datashader
  (counts per label category, spread where sparse) on a background thread
  (:mod:`gplvm_explorer.raster`), again after a zoom or pan: the browser
  receives an image of O(pixels) per update, never the points, and the page's
  thread only swaps the image in.  The image travels zlib-compressed
  (``packed_source``, ~40x smaller than raw RGBA); a small script in the page
  unpacks it into the ImageRGBA glyph's source, pixel for pixel.
  Below, they are glyphs whose colours and labels are sent once per data set;
  an update sends only the new coordinates.
* Hover (raster mode) and click are answered by the slice's KD-tree.
* Given the page's :class:`ReconstructionView` (``reconstruction``), the map
  also sends the shown result's prediction factors, and a click's prediction
  is computed and drawn by the page itself (:mod:`.page_prediction`); the
  server's answer adds the nearest training row.

One plain Bokeh figure, built once: an update replaces the data of a few
sources (the grid, the image of the points, or the glyphs' coordinates) and
the axes' ranges, so the page's thread spends milliseconds per snapshot and a
click never waits long behind one.
"""
from __future__ import annotations

import logging
import time
import warnings

import numpy as np
import panel as pn
import param
from bokeh.events import DoubleTap, MouseMove, RangesUpdate, Tap
from bokeh.models import (ColorBar, ColumnDataSource, CustomJS, HoverTool, Label, LinearColorMapper,
                          LogColorMapper, PrintfTickFormatter, Range1d, TapTool)
from bokeh.plotting import figure

from .. import help_texts
from ..dispatch import Dispatcher
from ..export import MAGNIFICATION_CMAP, VARIANCE_CMAP
from ..raster import BackgroundRaster, PointRaster
from ..state.data import LoadedData
from ..state.labels import LabelColouring
from ..state.latent import LatentSlice
from ..state.shown import ShownData
from ..state.training import TrainingRun
from .common import (MUTED_MD, OUTLINE, PANEL_STYLES, LiveHTML, Reads, StateView, escape, on_click, plain, sync,
                     title_with_help)
from .page_prediction import (CLICK_JS, no_predictor, page_drawn_source, page_units, predictor_columns,
                              slice_columns)

logger = logging.getLogger(__name__)

MAP_TITLE = "Latent space"
PLACEHOLDER = "Press ▶ Train to map the data"
#: The empty map's hint while a run is on its way to its first result (at 10^6 rows, several seconds).
PLACEHOLDER_TRAINING = "Training… the map appears with the first result"
_TRAINING = ("queued", "starting", "running")
#: Above this many points the map is rasterised (datashader) instead of drawn as glyphs.
RASTER_ABOVE = 3000
HEIGHT = 430  # with its controls and legend, the card fits a 1280 x 720 screen
#: Pixels of the points' raster (about the map's frame at the page's usual width).
RASTER_SIZE = (640, 400)

#: Unpacks the points' image in the browser (DecompressionStream: zlib) into the ImageRGBA glyph's
#: source; of several images on their way only the newest is shown.
UNPACK_JS = """
const get = (d, k) => (d instanceof Map ? d.get(k) : d[k]);
const d = packed.data;
const gen = (packed._gx_gen = (packed._gx_gen || 0) + 1);
const bytes = get(d, "packed");
if (!bytes || bytes.length === 0) {
  target.data = {image: [], x: [], y: [], dw: [], dh: []};
  return;
}
const [w, h] = [get(d, "width")[0], get(d, "height")[0]];
const place = {x: [get(d, "x")[0]], y: [get(d, "y")[0]], dw: [get(d, "dw")[0]], dh: [get(d, "dh")[0]]};
const stream = new Blob([bytes[0]]).stream().pipeThrough(new DecompressionStream("deflate"));
new Response(stream).arrayBuffer().then((buf) => {
  if (packed._gx_gen !== gen) return;  // a newer image is on its way
  const {ndarray} = Bokeh.require("core/util/ndarray");
  target.data = {image: [ndarray(buf, {dtype: "uint32", shape: [h, w]})], ...place};
});
"""

# The empty map is an all-NaN image; numpy's nan-reductions inside HoloViews warn about it.
warnings.filterwarnings("ignore", message="All-NaN slice encountered", category=RuntimeWarning)


def _smooth_cmap(stops, n=256) -> list[str]:
    rgb = np.array([[int(c[i:i + 2], 16) for i in (1, 3, 5)] for c in stops], dtype=float)
    pos = np.linspace(0, len(stops) - 1, n)
    i0 = np.clip(np.floor(pos).astype(int), 0, len(stops) - 2)
    f = (pos - i0)[:, None]
    out = (rgb[i0] * (1 - f) + rgb[i0 + 1] * f).round().astype(int)
    return ["#%02x%02x%02x" % tuple(c) for c in out]


SHADING = _smooth_cmap(VARIANCE_CMAP)
MAGNIFICATION = _smooth_cmap(MAGNIFICATION_CMAP)
#: Colour bar titles per shading.
SHADING_TITLES = {"variance": "predictive variance (light = confident)",
                  "magnification": "magnification, log scale (dark = most stretched)"}


class LatentMap(StateView):
    """The map of one page's LatentSlice."""

    data = Reads(class_=LoadedData)
    training = Reads(class_=TrainingRun)
    latent = Reads(class_=LatentSlice)
    shown = Reads(class_=ShownData)
    dispatcher = Reads(class_=Dispatcher)
    raster_above = param.Integer(default=RASTER_ABOVE)
    reconstruction = param.Parameter(default=None, doc=(
        "The page's ReconstructionView: clicks are predicted and drawn by the page into its sources."))
    geodesic = param.Parameter(default=None, doc=(
        "The page's GeodesicView: its path is drawn over the map and, in its mode, clicks pick its ends."))

    def __init__(self, **params):
        super().__init__(**params)
        lat = self.latent
        self.glyph_source = ColumnDataSource({"x": [], "y": [], "colour": [], "label": [], "index": []},
                                             name="latent-points")
        self.marker_source = page_drawn_source({"x": [], "y": [], "marker": [], "colour": []})
        # the points' image: sent packed, unpacked by the page into raster_source (never sent back)
        self.packed_source = ColumnDataSource(self._no_packed())
        self.raster_source = ColumnDataSource({"image": [], "x": [], "y": [], "dw": [], "dh": []}, syncable=False)
        self.packed_source.js_on_change("data", CustomJS(args=dict(packed=self.packed_source,
                                                                  target=self.raster_source), code=UNPACK_JS))
        self.variance_source = ColumnDataSource(self._no_image(), name="latent-variance")
        self.magnification_source = ColumnDataSource(self._no_image(), name="latent-magnification")
        # the shown result's prediction factors and slice, for predictions in the page (never sent back)
        self.predictor_source = ColumnDataSource(no_predictor(), syncable=False)
        self.slice_source = ColumnDataSource(slice_columns(None), syncable=False)
        self._page_result = None  # the result whose factors the page holds
        self.page_predicts = False
        self._raster = BackgroundRaster(self.dispatcher, self._apply_raster, on_error=self._raster_failed)
        self._raster_asked = None  # (view, extent) of the newest raster request
        self._mode = (False, self._colouring())  # (raster?, colouring) of the points on show
        self._last_pointer = 0.0
        self._pointer_xy = None
        self.figure = self._figure()
        self.plot = pn.pane.Bokeh(self.figure, sizing_mode="stretch_width", height=HEIGHT)
        self.auto = pn.widgets.Checkbox.from_param(lat.param.auto_dims, label="Two most relevant dims",
                                                   margin=(8, 10, 0, 8))
        self.x_sel = pn.widgets.Select(label="horizontal", options={}, width=80, disabled=True, margin=(2, 4))
        self.y_sel = pn.widgets.Select(label="vertical", options={}, width=80, disabled=True, margin=(2, 4))
        self.x_sel.param.watch(lambda e: self._set_dim("x_dim", e.new), "value")
        self.y_sel.param.watch(lambda e: self._set_dim("y_dim", e.new), "value")
        self.shade = sync(pn.widgets.RadioButtonGroup(
            options={"Variance": "variance", "Magnification": "magnification"}, value=lat.shading, **OUTLINE,
            color="primary", margin=(8, 5, 0, 8), height=30), lat, "shading")
        self.shade_note = pn.pane.HTML("", sizing_mode="stretch_width", margin=(0, 10), visible=False,
                                       stylesheets=[MUTED_MD], css_classes=["gx-shade-note"])
        lat.param.watch(self._on_shade_note, ["shading_note"])
        self.follow = pn.widgets.Checkbox(label="Follow the pointer", value=False, margin=(8, 10, 0, 14))
        self.follow.param.watch(lambda e: self._show_slice(), "value")
        self.from_click = pn.widgets.Button(label="Set other dims from clicked point", color="default",
                                            **OUTLINE, margin=(18, 5, 0, 5), disabled=True)
        on_click(self.from_click, lambda e: lat.set_fixed_from_nearest())
        self.reset_fixed = pn.widgets.Button(label="Reset to 0", color="default", **OUTLINE, margin=(18, 5, 0, 5))
        on_click(self.reset_fixed, lambda e: lat.reset_fixed())
        self.sliders = pn.Column(sizing_mode="stretch_width")
        self.slider_card = pn.Card(self.sliders, pn.Row(self.from_click, self.reset_fixed),
                                   title="Other latent dimensions (held fixed)", collapsed=True,
                                   sizing_mode="stretch_width", margin=(2, 5), visible=False)
        self.title = title_with_help(MAP_TITLE, help_texts.LATENT)
        self.legend = pn.pane.HTML("", sizing_mode="stretch_width", margin=(0, 10, 4, 10),
                                   css_classes=["gx-legend"])
        self.hover_text = LiveHTML("", sizing_mode="stretch_width", margin=(0, 10),
                                       css_classes=["gx-hover"])
        self._slider_widgets: dict[int, pn.widgets.FloatSlider] = {}
        lat.param.watch(self._on_view, ["view"])
        lat.param.watch(self._on_latent_dim, ["latent_dim"])
        lat.param.watch(self._on_dims, ["auto_dims", "x_dim", "y_dim"])
        lat.param.watch(self._on_fixed, ["fixed"])
        lat.param.watch(self._on_reconstruction, ["reconstruction"])
        self.training.param.watch(self._on_legend, ["dataset"])
        self.training.param.watch(self._on_status, ["status"])
        self.data.param.watch(self._on_legend, ["labels"])
        self.data.param.watch(self._clear_hover, ["dataset"])  # "Point #j" named a row of the data before
        self._on_latent_dim()
        self._on_legend()

    # ---- the plot ------------------------------------------------------------------------
    def _colouring(self) -> LabelColouring | None:
        return self.shown.colouring()

    def _figure(self):
        """The map's figure, built once: variance image, points' image, glyphs, markers, colour bar."""
        fig = figure(title=MAP_TITLE, height=HEIGHT, sizing_mode="stretch_width", toolbar_location="above",
                     tools="pan,wheel_zoom,box_zoom,reset,save", x_range=Range1d(-1, 1), y_range=Range1d(-1, 1),
                     x_axis_label="latent x1", y_axis_label="latent x2")
        # a click only asks for a reconstruction: selecting would send the picked pixels of both images
        # back to the server before the click itself (four messages, tens of milliseconds per click)
        fig.add_tools(TapTool(behavior="inspect"))
        # one image and colour bar per shading, the other one empty and hidden: a glyph keeps the colour
        # mapper it was drawn with in the page, so the mapper is never swapped under an image
        self.mapper = LinearColorMapper(palette=SHADING, low=0.0, high=1.0, nan_color="#f7f9fb")
        self.log_mapper = LogColorMapper(palette=MAGNIFICATION, low=0.1, high=1.0, nan_color="#f7f9fb")
        self.shade_renderers, self.colour_bars = {}, {}
        for kind, source, mapper in (("variance", self.variance_source, self.mapper),
                                     ("magnification", self.magnification_source, self.log_mapper)):
            self.shade_renderers[kind] = fig.image(image="image", x="x", y="y", dw="dw", dh="dh", source=source,
                                                   color_mapper=mapper, visible=kind == "variance")
            # %.3g: short ticks at any scale (the default wrote 2.000e-33.000e-3 on a narrow map)
            self.colour_bars[kind] = ColorBar(color_mapper=mapper, title=SHADING_TITLES[kind],
                                              orientation="horizontal", height=10, padding=4,
                                              formatter=PrintfTickFormatter(format="%.3g"), visible=kind == "variance")
            fig.add_layout(self.colour_bars[kind], "below")
        raster = fig.image_rgba(image="image", x="x", y="y", dw="dw", dh="dh", source=self.raster_source)
        raster.tags = [self.packed_source]  # a model of the page only if a model of the page refers to it
        r = fig.scatter("x", "y", source=self.glyph_source, color="colour", size=7, line_color="white",
                        line_width=0.6, alpha=0.9)
        fig.add_tools(HoverTool(renderers=[r], tooltips=[("index", "@index"), ("label", "@label")]))
        # the click's and the pointer's markers on the overlay layer: a click (drawn by the page, then
        # answered by the server) and a hover repaint only that layer, not the images, axes and colour bar
        self.marker_renderer = fig.scatter("x", "y", source=self.marker_source, marker="marker", size=18,
                                           line_color="colour", fill_alpha=0, line_width=2.5, level="overlay")
        if self.geodesic is not None:
            self.geodesic.draw_on(fig)
        self.hint = Label(x=0, y=0, text=PLACEHOLDER, text_color="#5b6b7c", text_font_size="13pt",
                          text_align="center", text_baseline="middle")
        fig.add_layout(self.hint)
        fig.title.text_font_size = "12pt"
        # a click goes straight to this handler, run by Bokeh under the document's lock; a second
        # click soon after the first arrives as a double tap: it is a click at a new place all the same
        if self.reconstruction is not None:
            targets = self.reconstruction.page_targets()
            click = CustomJS(args=dict(predictor=self.predictor_source, slice=self.slice_source,
                                       marker=self.marker_source, **targets), code=CLICK_JS)
            fig.js_on_event(Tap, click)
            fig.js_on_event(DoubleTap, click)
            fig.js_on_event(MouseMove, click)  # acts only while following the pointer
        fig.on_event(Tap, self._on_tap)
        fig.on_event(DoubleTap, self._on_tap)
        fig.on_event(RangesUpdate, self._on_ranges)
        fig.on_event(MouseMove, self._on_pointer)
        return fig

    def _show_grid(self, v) -> None:
        """The variance grid of view ``v`` (None: the empty map with its hint), the axes at its extent."""
        fig = self.figure
        xd, yd = self.latent.shown_dims
        fig.xaxis.axis_label, fig.yaxis.axis_label = f"latent x{xd + 1}", f"latent x{yd + 1}"
        if v is None or v.grid is None:
            for source in (self.variance_source, self.magnification_source):
                if len(source.data["image"]):
                    source.data = self._no_image()
            self.hint.visible = v is None
            self.hint.text = self._hint_text()
            self.hint.x, self.hint.y = 0.0, 0.0
            fig.x_range.update(start=-1.0, end=1.0)
            fig.y_range.update(start=-1.0, end=1.0)
            return
        self.hint.visible = False
        g = v.grid
        x0, y0, x1, y1 = v.extent
        values = g.values
        log = g.kind == "magnification"
        finite = values[np.isfinite(values) & (values > 0)] if log else values[np.isfinite(values)]
        lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.1 if log else 0.0, 1.0)
        mapper = self.log_mapper if log else self.mapper
        mapper.update(low=lo, high=hi if hi > lo else lo * (1 + 1e-9) + 1e-12)
        for kind, renderer in self.shade_renderers.items():
            shown = kind == g.kind
            renderer.visible = self.colour_bars[kind].visible = shown
            source = renderer.data_source
            if shown:
                source.data = {"image": [values], "x": [x0], "y": [y0], "dw": [x1 - x0], "dh": [y1 - y0]}
            elif len(source.data["image"]):
                source.data = self._no_image()
        fig.x_range.update(start=x0, end=x1)
        fig.y_range.update(start=y0, end=y1)

    # ---- updates ---------------------------------------------------------------------------
    def _hint_text(self) -> str:
        return PLACEHOLDER_TRAINING if self.training.status in _TRAINING else PLACEHOLDER

    def _on_status(self, *events) -> None:
        text = self._hint_text()
        if self.hint.text != text:
            self.hint.text = text

    def _clear_hover(self, *events) -> None:
        self.hover_text.object = ""

    def _on_view(self, *events) -> None:
        v = self.latent.view
        old = events[0].old if events else None
        if v is None or old is None or old.result.run_id != v.result.run_id:
            self._clear_hover()  # the caption named a point of another run's map
        self._on_dims()  # automatic dims change with the view
        self._show_predictor(v)
        if v is None:
            self.glyph_source.data = {"x": [], "y": [], "colour": [], "label": [], "index": []}
            self.marker_source.data = {"x": [], "y": [], "marker": [], "colour": []}
            self._clear_raster()
            self._show_grid(None)
            return
        colouring = self._colouring()
        raster = v.points.shape[0] > self.raster_above
        full = (raster, colouring) != self._mode
        self._mode = (raster, colouring)
        self._set_glyphs(v, colouring, full=full)
        if raster:
            asked = self._raster_asked
            if asked is None or tuple(asked[0].dims) != tuple(v.dims) or full:
                self._clear_raster()  # another plane or colouring: no stale image meanwhile
            self._request_raster(v, v.extent)
        else:
            self._clear_raster()
        self._show_grid(v)

    def _show_predictor(self, v) -> None:
        """The factors of the view's result (once per result) and its slice, for the page's predictions."""
        if self.reconstruction is None:
            return
        result = None if v is None else v.result
        if result is not self._page_result:
            self._page_result = result
            columns = None if result is None else predictor_columns(result.predictor, page_units(result.dataset))
            self.page_predicts = columns is not None
            self.predictor_source.data = columns if columns is not None else no_predictor()
        self._show_slice()

    def _show_slice(self) -> None:
        if self.reconstruction is not None:
            self.slice_source.data = slice_columns(self.latent.view, self.follow.value)

    # ---- the points' raster ------------------------------------------------------------------
    def _request_raster(self, v, extent) -> None:
        col = self._mode[1]
        n = v.points.shape[0]
        if col is None or col.n != n:
            codes, cats, colours = np.zeros(n, dtype=np.int32), ("points",), ("#0072B2",)
        else:
            codes, cats, colours = col.codes, col.categories, col.colours
        self._raster_asked = (v, tuple(float(e) for e in extent))
        self._raster.request(v.points, codes, cats, colours, extent, RASTER_SIZE, key=self._raster_asked)

    def _apply_raster(self, done: PointRaster) -> None:
        if done.key is not self._raster_asked:
            return  # an older request finished late: the newest one follows
        x0, y0, x1, y1 = done.extent
        h, w = done.rgba.shape
        self.packed_source.data = {"packed": [np.frombuffer(done.packed, dtype=np.uint8)], "width": [w],
                                   "height": [h], "x": [x0], "y": [y0], "dw": [x1 - x0], "dh": [y1 - y0]}

    @staticmethod
    def _no_image() -> dict:
        return {"image": [], "x": [], "y": [], "dw": [], "dh": []}

    @staticmethod
    def _no_packed() -> dict:
        return {"packed": [], "width": [], "height": [], "x": [], "y": [], "dw": [], "dh": []}

    def _raster_failed(self, exc: Exception) -> None:
        self.latent.error = f"Could not draw the latent points: {exc}"

    def _clear_raster(self) -> None:
        self._raster_asked = None
        if len(self.packed_source.data["packed"]):
            self.packed_source.data = self._no_packed()

    def _on_ranges(self, event) -> None:
        """A zoom or pan: the points again at the visible range (Bokeh calls this under the document lock)."""
        v = self.latent.view
        if v is None or not self._mode[0] or None in (event.x0, event.x1, event.y0, event.y1):
            return
        extent = (float(event.x0), float(event.y0), float(event.x1), float(event.y1))
        asked = self._raster_asked
        if asked is not None and asked[0] is v and np.allclose(asked[1], extent, rtol=1e-9, atol=1e-12):
            return
        self._request_raster(v, extent)

    def wait_raster(self, timeout: float = 30.0) -> bool:
        """Wait for the points' raster (tests and non-served use)."""
        return self._raster.wait(timeout)

    def _set_glyphs(self, v, colouring: LabelColouring, full: bool) -> None:
        raster = self._mode[0]
        n = v.points.shape[0]
        if raster:
            if len(self.glyph_source.data["x"]):
                self.glyph_source.data = {"x": [], "y": [], "colour": [], "label": [], "index": []}
            return
        if full or len(self.glyph_source.data["x"]) != n:
            labels = v.result.dataset.labels if v.result.dataset is not None else None
            if colouring is None or colouring.n != n:
                colours = np.array(["#0072B2"] * n, dtype=object)
                names = np.array([""] * n, dtype=object)
            else:
                colours = np.asarray(colouring.colours, dtype=object)[colouring.codes]
                names = (np.array([plain(x, 60) for x in labels.astype(str)], dtype=object)
                         if labels is not None else np.array([""] * n, dtype=object))
            self.glyph_source.data = {"x": v.points[:, 0], "y": v.points[:, 1], "colour": colours,
                                      "label": names, "index": np.arange(n)}
        else:  # only the coordinates travel
            self.glyph_source.data.update({"x": v.points[:, 0], "y": v.points[:, 1]})

    def _set_markers(self, rec=None, hover_xy=None) -> None:
        xs, ys, marker, colour = [], [], [], []
        if rec is not None:
            xs += [rec.click[0], rec.nearest_xy[0]]
            ys += [rec.click[1], rec.nearest_xy[1]]
            marker += ["x", "circle"]
            colour += ["#d55e00", "#d55e00"]
        if hover_xy is not None:
            xs.append(hover_xy[0])
            ys.append(hover_xy[1])
            marker.append("circle")
            colour.append("#1f5f8b")
        self.marker_source.data = {"x": xs, "y": ys, "marker": marker, "colour": colour}

    def _on_shade_note(self, *events) -> None:
        note = self.latent.shading_note
        self.shade_note.object = escape(note)
        self.shade_note.visible = bool(note)

    def _on_tap(self, event) -> None:
        if event.x is None or event.y is None:
            return
        from panel.io.state import set_curdoc

        try:
            with set_curdoc(self.figure.document):
                self.latent.reconstruct_at(float(event.x), float(event.y), drawn_in_page=self.page_predicts)
                if self.geodesic is not None:
                    self.geodesic.on_map_click(float(event.x), float(event.y))
        except Exception as exc:  # Bokeh would only log it: show it in the page too
            logger.exception("Reconstruction at a click failed")
            self.latent.error = f"Could not reconstruct at this point: {exc}"

    def _on_pointer(self, event) -> None:
        """Mouse moves (at most ten a second are looked at); the hover is answered on the next tick."""
        x, y = event.x, event.y
        if x is None or y is None or self.latent.view is None:
            return
        now = time.perf_counter()
        if now - self._last_pointer < 0.1:
            return
        self._last_pointer = now
        self._pointer_xy = (float(x), float(y))
        self.dispatcher.soon(self._apply_pointer)

    def _apply_pointer(self) -> None:
        xy, self._pointer_xy = self._pointer_xy, None
        lat = self.latent
        v = lat.view
        if xy is None or v is None:
            return
        x, y = xy
        if self.follow.value:
            lat.reconstruct_at(x, y, drawn_in_page=self.page_predicts)
        if self._mode[0]:  # raster: hover answered by the KD-tree
            x0, y0, x1, y1 = v.extent
            j = lat.nearest_point(x, y, radius=0.015 * float(np.hypot(x1 - x0, y1 - y0)))
            if j is None:
                self.hover_text.object = ""
                self._set_markers(lat.reconstruction)
                return
            ds_ = v.result.dataset
            label = "" if ds_ is None or ds_.labels is None else f" · label {escape(ds_.labels[j])}"
            self.hover_text.object = f"<span class='gx-hover-text'>Point #{j}{label}</span>"
            self._set_markers(lat.reconstruction, (v.points[j, 0], v.points[j, 1]))

    def _on_reconstruction(self, *events) -> None:
        rec = self.latent.reconstruction
        self.from_click.disabled = rec is None
        self._set_markers(rec)

    # ---- controls --------------------------------------------------------------------------
    def _set_dim(self, name, value) -> None:
        """A picked axis: the other axis's dim swaps the two, so both axes always differ."""
        lat = self.latent
        if value is None or lat.auto_dims:
            return
        lat.show_dim("x" if name == "x_dim" else "y", int(value))

    def _on_latent_dim(self, *events) -> None:
        lat = self.latent
        Q = lat.latent_dim
        opts = {f"x{i + 1}": i for i in range(Q)}
        self.x_sel.options = opts
        self.y_sel.options = opts
        self._slider_widgets = {}
        sliders = []
        for i in range(Q):
            s = pn.widgets.FloatSlider(label=f"x{i + 1}", start=-3.0, end=3.0, step=0.01,
                                       value=float(lat.fixed[i]) if len(lat.fixed) == Q else 0.0,
                                       sizing_mode="stretch_width")
            s.param.watch(lambda e, i=i: lat.set_fixed_value(i, e.new), "value_throttled")
            self._slider_widgets[i] = s
            sliders.append(s)
        self.sliders[:] = sliders
        self.slider_card.visible = Q > 2
        self._on_dims()

    def _on_dims(self, *events) -> None:
        lat = self.latent
        # picked dims show at once: the view on show may still be the previous pair's, and
        # writing its dims back into the pickers would undo the pick
        picked = (int(lat.x_dim), int(lat.y_dim))
        manual = not lat.auto_dims and picked[0] != picked[1] and max(picked) < lat.latent_dim
        xd, yd = picked if manual else lat.shown_dims
        self.x_sel.disabled = self.y_sel.disabled = lat.auto_dims or lat.latent_dim < 2
        if lat.latent_dim >= 2:
            self.x_sel.value, self.y_sel.value = xd, yd
        for i, s in self._slider_widgets.items():
            s.visible = i not in (xd, yd)

    def _on_fixed(self, *events) -> None:
        fixed = self.latent.fixed
        for i, s in self._slider_widgets.items():
            if i < len(fixed):
                v = float(fixed[i])
                s.start, s.end = min(s.start, v), max(s.end, v)
                s.value = v

    def _on_legend(self, *events) -> None:
        col = self._colouring()
        if col is None or not col.name:
            self.legend.object = ""
            return
        if col.continuous:
            lo, hi = col.value_range
            stops = ", ".join(col.colours)
            self.legend.object = (
                f"<div class='gx-legend-bar' style='font-size:.82rem;display:flex;align-items:center;gap:6px'>"
                f"<span style='color:#5b6b7c'>{escape(col.name)}:</span><span>{lo:.3g}</span>"
                f"<span style='display:inline-block;width:180px;height:10px;border-radius:3px;"
                f"background:linear-gradient(to right, {stops})'></span><span>{hi:.3g}</span></div>")
            return
        items = "".join(
            f"<span style='display:inline-flex;align-items:center;margin:0 10px 2px 0;white-space:nowrap'>"
            f"<span style='width:11px;height:11px;border-radius:50%;background:{c};display:inline-block;"
            f"margin-right:4px;border:1px solid #fff;box-shadow:0 0 0 1px #cbd5e1'></span>{escape(label, 40)}</span>"
            for label, c in zip(col.categories, col.colours))
        more = (f"<span style='color:#5b6b7c'>({col.distinct} distinct labels; the "
                f"{len(col.categories) - 1} most frequent shown)</span>") if col.capped else ""
        self.legend.object = (f"<div style='font-size:.82rem;display:flex;flex-wrap:wrap;align-items:center'>"
                              f"<span style='color:#5b6b7c;margin-right:8px'>{escape(col.name)}:</span>"
                              f"{items}{more}</div>")

    def __panel__(self):
        return pn.Column(
            pn.Row(self.title, sizing_mode="stretch_width"),
            pn.FlexBox(self.auto, self.x_sel, self.y_sel, self.follow, self.shade,
                       *([] if self.geodesic is None else [self.geodesic.toggle]), align_items="center",
                       sizing_mode="stretch_width"),
            self.plot, self.shade_note, self.hover_text, self.legend, self.slider_card,
            sizing_mode="stretch_width", styles=PANEL_STYLES,
        )
