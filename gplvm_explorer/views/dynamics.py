"""The dynamical model's view: the latent trajectory over time and the output at any time.

* left: the latent trajectory q(x(t)) drawn as a path over the predictive
  variance shading of the latent map (same dims), the frames' latent points,
  and a marker with its ±2σ ellipse at the chosen time;
* a time slider and a play button move the marker; times between frames, in
  gaps and beyond both ends are allowed;
* right: the output at that time with its ±2σ band beside the observed frame
  nearest in time, and one output over time (band, data, the chosen time).
"""
from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.models import (BoxAnnotation, ColumnDataSource, Legend, LegendItem,
                          LinearColorMapper, Range1d, Span)
from bokeh.plotting import figure

from ..state.dynamics import Dynamics, is_dynamical
from ..state.latent import LatentSlice
from .common import ACCENT, MUTED_MD, PANEL_STYLES, Reads, StateView, escape, label_feature_axis, plain, title_with_help
from .reconstruction import GREYS

HELP = """**Dynamics.** The dynamical GP-LVM puts a Gaussian-process prior over time on the latent
points, so the latent position is a smooth function of time. The path is the mean of q(x(t)) on a
fine grid of times, from before the first frame to after the last; the ellipse marks ±2σ at the
chosen time. Move the time slider (or press play): inside a gap or beyond the ends no frame
constrains the position, the ellipse and the output's ±2σ band widen, and the reconstruction is
the model's guess at a frame nobody recorded."""

_BLUES = ["#%02x%02x%02x" % (int(255 - 200 * f), int(255 - 140 * f), int(255 - 60 * f))
          for f in np.linspace(0.0, 1.0, 64)]


def _legend_below(fig, items) -> None:
    """A one-line legend under the plot (inside it would hide the data)."""
    legend = Legend(items=[LegendItem(label=label, renderers=r if isinstance(r, list) else [r]) for label, r in items],
                    orientation="horizontal", label_text_font_size="8pt", margin=0, padding=2, spacing=8)
    fig.add_layout(legend, "below")


class DynamicsView(StateView):
    """Shown for results of models whose catalog entry has ``panel == "dynamics"``."""

    latent = Reads(class_=LatentSlice)
    dynamics = Reads(class_=Dynamics)

    def __init__(self, **params):
        super().__init__(**params)
        dyn = self.dynamics
        self.title = title_with_help("Dynamics: the latent trajectory over time", HELP)
        self.text = pn.pane.HTML("", sizing_mode="stretch_width", stylesheets=[MUTED_MD], margin=(0, 10),
                                 css_classes=["gx-dyn-text"])
        self.slider = pn.widgets.FloatSlider(label="Time", start=0.0, end=1.0, step=0.01, value=0.0,
                                             sizing_mode="stretch_width", css_classes=["gx-time-slider"])
        self.player = pn.widgets.Player(start=0, end=240, value=0, interval=120, loop_policy="loop",
                                        show_value=False, width=330, height=70,
                                        visible_buttons=["previous", "play", "pause", "next"],
                                        show_loop_controls=False, css_classes=["gx-time-player"])
        self.feature = pn.widgets.Select(label="Output over time", options={}, width=220)
        self._syncing = False
        self.slider.param.watch(self._on_slider, "value")
        self.player.param.watch(self._on_player, "value")
        self.feature.param.watch(lambda e: self._draw_series(), "value")
        # latent trajectory
        self.mapper = LinearColorMapper(palette=_BLUES, low=0, high=1)
        self.grid_src = ColumnDataSource({"image": [np.zeros((1, 1))], "x": [0], "y": [0], "dw": [1], "dh": [1]})
        self.path_src = ColumnDataSource({"x": [], "y": [], "t": []})
        self.data_src = ColumnDataSource({"x": [], "y": [], "t": []})
        self.marker_src = ColumnDataSource({"x": [], "y": [], "w": [], "h": [], "marker_t": []})
        f = figure(title="Latent trajectory", height=330, sizing_mode="stretch_width", match_aspect=False,
                   tools="pan,wheel_zoom,box_zoom,reset,save", toolbar_location="above")
        f.image("image", x="x", y="y", dw="dw", dh="dh", source=self.grid_src, color_mapper=self.mapper)
        path = f.line("x", "y", source=self.path_src, color=ACCENT, line_width=2)
        frames = f.scatter("x", "y", source=self.data_src, size=4, color="#333333", alpha=0.6)
        band = f.ellipse("x", "y", width="w", height="h", source=self.marker_src, fill_color="#d55e00",
                         fill_alpha=0.15, line_color="#d55e00")
        now = f.scatter("x", "y", source=self.marker_src, size=11, color="#d55e00")
        _legend_below(f, [("q(x(t)) mean", path), ("frames", frames), ("chosen time ±2σ", [now, band])])
        self.latent_fig = f
        # output at the chosen time (profile) or as an image
        self.frame_src = ColumnDataSource({"x": [], "at_mean": [], "at_lower": [], "at_upper": [], "at_nearest": []})
        g = figure(title="Output at the chosen time", height=330, sizing_mode="stretch_width",
                   tools="pan,wheel_zoom,box_zoom,reset,save", toolbar_location="above", y_axis_label="value")
        area = g.varea("x", "at_lower", "at_upper", source=self.frame_src, fill_color=ACCENT, fill_alpha=0.2)
        pred = g.line("x", "at_mean", source=self.frame_src, color=ACCENT, line_width=2)
        near = g.line("x", "at_nearest", source=self.frame_src, color="#d55e00", line_dash="dashed")
        _legend_below(g, [("predicted ±2σ", [pred, area]), ("nearest frame in time", near)])
        self.frame_fig = g
        self.img_mapper = LinearColorMapper(palette=GREYS, low=0, high=1)
        self.img_src = ColumnDataSource({"at_image": [np.zeros((1, 1))], "dw": [1], "dh": [1]})
        im = figure(title="Predicted frame", width=220, height=230, toolbar_location=None,
                    x_range=Range1d(0, 1), y_range=Range1d(0, 1))
        im.image("at_image", x=0, y=0, dw="dw", dh="dh", source=self.img_src, color_mapper=self.img_mapper)
        im.axis.visible = False
        im.grid.visible = False
        self.img_fig = im
        # one output over time
        self.series_src = ColumnDataSource({"t": [], "ts_mean": [], "ts_lower": [], "ts_upper": []})
        self.obs_src = ColumnDataSource({"t": [], "y": []})
        h = figure(title="One output over time", height=230, sizing_mode="stretch_width",
                   tools="pan,wheel_zoom,box_zoom,reset,save", toolbar_location="above",
                   x_axis_label="time", y_axis_label="value")
        h.varea("t", "ts_lower", "ts_upper", source=self.series_src, fill_color=ACCENT, fill_alpha=0.2)
        h.line("t", "ts_mean", source=self.series_src, color=ACCENT, line_width=2)
        h.scatter("t", "y", source=self.obs_src, size=4, color="#333333")
        self.now = Span(location=0, dimension="height", line_color="#d55e00", line_width=2)
        h.add_layout(self.now)
        self.series_fig = h
        self._gap_boxes: list = []
        self.profile_box = pn.Column(pn.pane.Bokeh(self.frame_fig, sizing_mode="stretch_width", height=340),
                                     sizing_mode="stretch_width")
        self.image_box = pn.Column(pn.pane.Bokeh(self.img_fig, width=225, height=235), visible=False)
        self.body = pn.Column(
            self.text,
            pn.Row(self.slider, self.player, sizing_mode="stretch_width"),
            # side by side, or one under the other on a narrow screen (never cut off)
            pn.FlexBox(pn.Column(pn.pane.Bokeh(self.latent_fig, sizing_mode="stretch_width", height=340),
                                 sizing_mode="stretch_width", min_width=380, styles={"flex": "1 1 380px"}),
                       pn.Column(self.profile_box, self.image_box, sizing_mode="stretch_width", min_width=380,
                                 styles={"flex": "1 1 380px"}),
                   sizing_mode="stretch_width"),
            self.feature,
            pn.pane.Bokeh(self.series_fig, sizing_mode="stretch_width", height=240),
            sizing_mode="stretch_width",
        )
        self.layout = pn.Column(self.title, self.body, sizing_mode="stretch_width", styles=PANEL_STYLES,
                                visible=False, css_classes=["gx-dynamics"])
        dyn.param.watch(self._on_trajectory, ["trajectory"])
        dyn.param.watch(self._on_frame, ["frame"])
        self.latent.param.watch(lambda e: self._draw_latent(), ["view"])

    # ---- time controls ----------------------------------------------------------------
    def _grid_index(self, t: float) -> int:
        tr = self.dynamics.trajectory
        return 0 if tr is None else int(np.argmin(np.abs(tr.times - t)))

    def _on_slider(self, event):
        if not self._syncing:
            self.dynamics.time = float(event.new)

    def _on_player(self, event):
        tr = self.dynamics.trajectory
        if self._syncing or tr is None:
            return
        i = int(min(max(event.new, 0), tr.times.size - 1))
        self.dynamics.time = float(tr.times[i])

    # ---- drawing ------------------------------------------------------------------------
    def _on_trajectory(self, *events):
        tr = self.dynamics.trajectory
        self.layout.visible = tr is not None
        if tr is None:
            return
        ds = tr.result.dataset
        lo, hi = tr.span
        self._syncing = True
        try:
            self.slider.start, self.slider.end = lo, hi
            self.slider.step = float((hi - lo) / (tr.times.size - 1))
            self.player.end = tr.times.size - 1
        finally:
            self._syncing = False
        names = list(ds.feature_names) if ds is not None else [f"x{j + 1}" for j in range(tr.mean.shape[1])]
        opts = {plain(n, 40): j for j, n in enumerate(names)}
        if list(self.feature.options.values()) != list(opts.values()):
            self.feature.options = opts
            self.feature.value = 0
        is_image = ds is not None and ds.image_shape is not None
        self.image_box.visible = is_image
        self.profile_box.visible = not is_image
        if not is_image:
            D = len(names)
            self.frame_fig.x_range.update(start=-0.5, end=D - 0.5)
            label_feature_axis(self.frame_fig.xaxis[0], names, D, width=16)
        for box in self._gap_boxes:
            box.visible = False
        for k, (a, b) in enumerate(tr.gaps):
            if k >= len(self._gap_boxes):
                box = BoxAnnotation(fill_color="#f0e442", fill_alpha=0.25)
                self.series_fig.add_layout(box)
                self._gap_boxes.append(box)
            self._gap_boxes[k].update(left=a, right=b, visible=True)
        self._draw_latent()
        self._draw_series()

    def _dims(self):
        tr = self.dynamics.trajectory
        Q = tr.latent_mean.shape[1]
        xd, yd = self.latent.shown_dims
        return (xd % Q, yd % Q) if Q > 1 else (0, 0)

    def _draw_latent(self):
        tr = self.dynamics.trajectory
        if tr is None:
            return
        xd, yd = self._dims()
        self.path_src.data = {"x": tr.latent_mean[:, xd], "y": tr.latent_mean[:, yd], "t": tr.times}
        X = tr.result.X_mean
        self.data_src.data = {"x": X[:, xd], "y": X[:, yd], "t": tr.data_times}
        self.latent_fig.xaxis.axis_label = f"x{xd + 1}"
        self.latent_fig.yaxis.axis_label = f"x{yd + 1}"
        view = self.latent.view
        # the map's variance shading under the trajectory (not its magnification: this view's scale is variance)
        if view is not None and view.grid is not None and view.grid.kind == "variance" \
                and tuple(view.dims) == (xd, yd) and view.result.run_id == tr.result.run_id:
            g = view.grid
            x0, y0, x1, y1 = view.extent
            self.mapper.update(low=float(np.min(g.values)), high=float(np.max(g.values)) + 1e-12)
            self.grid_src.data = {"image": [np.asarray(g.values, dtype=float)], "x": [x0], "y": [y0],
                                  "dw": [x1 - x0], "dh": [y1 - y0]}
        self._on_frame()

    def _draw_series(self):
        tr = self.dynamics.trajectory
        if tr is None or self.feature.value is None:
            return
        j = int(self.feature.value)
        m, s = tr.mean[:, j], tr.std[:, j]
        self.series_src.data = {"t": tr.times, "ts_mean": m, "ts_lower": m - 2 * s, "ts_upper": m + 2 * s}
        ds = tr.result.dataset
        if ds is not None:
            self.obs_src.data = {"t": tr.data_times, "y": ds.unstandardize(ds.values)[:, j]}
        self.series_fig.yaxis.axis_label = plain(ds.feature_names[j], 40) if ds is not None else "value"

    def _on_frame(self, *events):
        dyn = self.dynamics
        fr, tr = dyn.frame, dyn.trajectory
        if fr is None or tr is None:
            return
        self._syncing = True
        try:
            self.slider.value = float(fr.time)
            i = self._grid_index(fr.time)
            if self.player.value != i:
                self.player.value = i
        finally:
            self._syncing = False
        xd, yd = self._dims()
        self.marker_src.data = {"x": [fr.latent_mean[xd]], "y": [fr.latent_mean[yd]],
                                "w": [4 * np.sqrt(fr.latent_var[xd])], "h": [4 * np.sqrt(fr.latent_var[yd])],
                                "marker_t": [fr.time]}
        self.now.location = float(fr.time)
        ds = tr.result.dataset
        if ds is not None and ds.image_shape is not None:
            h, w = ds.image_shape
            self.img_mapper.update(low=float(np.min(fr.mean)), high=float(np.max(fr.mean)) + 1e-12)
            self.img_fig.x_range.update(start=0, end=w)
            self.img_fig.y_range.update(start=0, end=h)
            self.img_src.data = {"at_image": [fr.mean.reshape(h, w)[::-1]], "dw": [w], "dh": [h]}
        else:
            x = np.arange(fr.mean.size)
            self.frame_src.data = {"x": x, "at_mean": fr.mean, "at_lower": fr.mean - 2 * fr.std,
                                   "at_upper": fr.mean + 2 * fr.std, "at_nearest": fr.nearest_values}
        self.text.object = escape(
            f"t = {fr.time:.3g} ({fr.where}); mean output σ {float(np.mean(fr.std)):.3g}; "
            f"nearest frame #{fr.nearest_index} at t = {fr.nearest_time:.3g}.")

    def __panel__(self):
        return self.layout
