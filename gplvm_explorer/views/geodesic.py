"""Geodesic mode: the shortest path between two picked places of the map, and a walk along it.

The toggle sits in the map's controls; in geodesic mode two clicks on the map
pick the ends (a click near a point picks that training row).  The path is
drawn over the map beside the straight segment, with its length under the
model's expected metric next to the straight segment's, and the model's output
along the path plays as a sequence: images as a filmstrip and a frame that the
player moves along the path, other data as a profile the player moves.  The
map marks the frame's place on the path.
"""
from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.models import ColumnDataSource, LinearColorMapper, Range1d
from bokeh.plotting import figure

from .. import help_texts
from ..state.geodesic import GeodesicWalk
from ..state.latent import LatentSlice
from .common import (ACCENT, MUTED_MD, OUTLINE, PANEL_STYLES, LiveHTML, Reads, StateView, escape, label_feature_axis,
                     sync)
from .common import title_with_help
from .reconstruction import GREYS

__all__ = ["GeodesicView", "STRIP_FRAMES"]

#: Thumbnails in an image walk's filmstrip.
STRIP_FRAMES = 8
PATH_COLOUR = "#9d174d"  # stands out on both shadings and on the label colours
HINT = "Click the map twice: where the path starts, then where it ends (a click near a point picks that row)."


def _no_xy() -> dict:
    return {"x": [], "y": []}


class GeodesicView(StateView):
    """The geodesic's card: its lengths and the walk along it; draws the path on the map's figure."""

    latent = Reads(class_=LatentSlice)
    geodesic = Reads(class_=GeodesicWalk)

    def __init__(self, **params):
        super().__init__(**params)
        walk = self.geodesic
        self.toggle = sync(pn.widgets.Toggle(label="Geodesic", value=walk.active, **OUTLINE, color="primary",
                                             margin=(8, 5, 0, 8), height=30, width=100), walk, "active")
        # drawn on the map's figure (draw_on)
        self.path_source = ColumnDataSource(_no_xy(), name="geodesic-path")
        self.straight_source = ColumnDataSource(_no_xy(), name="geodesic-straight")
        self.ends_source = ColumnDataSource(_no_xy(), name="geodesic-ends")
        self.frame_source = ColumnDataSource(_no_xy(), name="geodesic-frame")
        self.title = title_with_help("Geodesic", help_texts.GEODESIC)
        self.text = LiveHTML(escape(HINT), sizing_mode="stretch_width", margin=(0, 10), stylesheets=[MUTED_MD],
                             css_classes=["gx-geodesic-text"])
        self.lengths = LiveHTML("", sizing_mode="stretch_width", margin=(0, 0, 0, 10),
                                css_classes=["gx-geodesic-lengths"])
        self.lengths_help = pn.widgets.TooltipIcon(value=help_texts.GEODESIC_LENGTHS, margin=(4, 0, 0, 2))
        self.player = pn.widgets.Player(start=0, end=1, value=0, interval=120, loop_policy="once",
                                        show_loop_controls=False, width=330, height=70, margin=(4, 10),
                                        visible_buttons=["first", "previous", "pause", "play", "next", "last"],
                                        css_classes=["gx-geodesic-player"])
        sync(self.player, walk, "frame")
        # images: a filmstrip along the path and the frame the player is at
        self.mapper = LinearColorMapper(palette=GREYS, low=0, high=1)
        self.strip_source = ColumnDataSource({"image": [], "x": [], "dw": [], "dh": []}, name="geodesic-strip")
        self.frame_image_source = ColumnDataSource({"image": [], "dw": [], "dh": []}, name="geodesic-frame-image")
        self.strip_fig = self._strip_figure()
        self.frame_fig = self._frame_figure()
        # other data: the profile at the frame, beside the ends' profiles
        self.profile_source = ColumnDataSource({"x": [], "frame": [], "start": [], "end": []},
                                               name="geodesic-profile")
        self.profile_fig = self._profile_figure()
        self.images = pn.Column(pn.pane.Bokeh(self.strip_fig, sizing_mode="stretch_width", height=90),
                                pn.pane.Bokeh(self.frame_fig, width=170, height=170),
                                sizing_mode="stretch_width", visible=False)
        self.profile = pn.Column(pn.pane.Bokeh(self.profile_fig, sizing_mode="stretch_width", height=230),
                                 sizing_mode="stretch_width", visible=False)
        self.walk_row = pn.Column(self.player, self.images, self.profile, sizing_mode="stretch_width",
                                  visible=False)
        self._layout = pn.Column(self.title, self.text, pn.Row(self.lengths, self.lengths_help),
                                 self.walk_row, sizing_mode="stretch_width", styles=PANEL_STYLES, visible=False)
        walk.param.watch(self._on_path, ["path"])
        walk.param.watch(self._on_state, ["active", "ends", "computing", "error"])
        walk.param.watch(self._on_frame, ["frame"])

    # ---- on the map ---------------------------------------------------------------------------
    def draw_on(self, fig) -> None:
        """The straight segment (dashed), the path, its ends and the walk's frame on the map's figure."""
        fig.line("x", "y", source=self.straight_source, color="#111827", line_dash="dashed", line_width=1.5,
                 alpha=0.8)
        fig.line("x", "y", source=self.path_source, color="white", line_width=6.0, alpha=0.9)  # a halo
        fig.line("x", "y", source=self.path_source, color=PATH_COLOUR, line_width=3.0)
        fig.scatter("x", "y", source=self.ends_source, marker="square", size=11, fill_color=PATH_COLOUR,
                    line_color="white", line_width=1.5)
        fig.scatter("x", "y", source=self.frame_source, marker="circle", size=12, fill_color="white",
                    line_color=PATH_COLOUR, line_width=3.0)

    def on_map_click(self, x: float, y: float) -> None:
        """A click on the map: in geodesic mode it picks an end."""
        walk = self.geodesic
        if walk.active:
            walk.pick(x, y)

    # ---- figures -------------------------------------------------------------------------------
    def _strip_figure(self):
        fig = figure(height=86, sizing_mode="stretch_width", toolbar_location=None, x_range=Range1d(0, 1),
                     y_range=Range1d(0, 1), title="Along the path: start → end")
        fig.image("image", x="x", y=0, dw="dw", dh="dh", source=self.strip_source, color_mapper=self.mapper)
        fig.axis.visible = False
        fig.grid.visible = False
        fig.title.text_font_size = "9pt"
        return fig

    def _frame_figure(self):
        fig = figure(width=166, height=166, toolbar_location=None, x_range=Range1d(0, 1), y_range=Range1d(0, 1),
                     title="At the marked point", match_aspect=True)
        fig.image("image", x=0, y=0, dw="dw", dh="dh", source=self.frame_image_source, color_mapper=self.mapper)
        fig.axis.visible = False
        fig.grid.visible = False
        fig.title.text_font_size = "9pt"
        return fig

    def _profile_figure(self):
        fig = figure(height=220, sizing_mode="stretch_width", toolbar_location=None, x_axis_label="feature",
                     y_axis_label="value", title="Predicted features at the marked point")
        fig.line("x", "start", source=self.profile_source, color="#94a3b8", line_dash="dotted", line_width=1.2,
                 legend_label="start")
        fig.line("x", "end", source=self.profile_source, color="#475569", line_dash="dashed", line_width=1.2,
                 legend_label="end")
        fig.line("x", "frame", source=self.profile_source, color=ACCENT, line_width=2.2, legend_label="on the path")
        fig.legend.orientation = "horizontal"
        fig.legend.label_text_font_size = "8pt"
        fig.add_layout(fig.legend[0], "above")
        fig.title.text_font_size = "9pt"
        return fig

    # ---- updates --------------------------------------------------------------------------------
    def _on_state(self, *events) -> None:
        walk = self.geodesic
        self._layout.visible = walk.active or walk.path is not None
        if walk.error:
            self.text.object = escape(walk.error)
        elif walk.active and len(walk.ends) < 2:
            self.text.object = escape(HINT if not walk.ends else "Now click where the path ends.")
        elif walk.computing and walk.path is None:
            self.text.object = escape("Computing the geodesic…")
        if len(walk.ends) < 2:
            self._draw_ends()

    def _draw_ends(self) -> None:
        walk, v = self.geodesic, self.latent.view
        if v is None or not walk.ends:
            self.ends_source.data = _no_xy()
            if walk.path is None:
                self.path_source.data = self.straight_source.data = self.frame_source.data = _no_xy()
            return
        xy = [e.position(v) for e in walk.ends]
        self.ends_source.data = {"x": [p[0] for p in xy], "y": [p[1] for p in xy]}
        if walk.path is None:
            self.path_source.data = self.straight_source.data = self.frame_source.data = _no_xy()

    def _on_path(self, *events) -> None:
        walk = self.geodesic
        p = walk.path
        self._on_state()
        if p is None:
            self.walk_row.visible = False
            self.lengths.object = ""
            self._draw_ends()
            return
        self.path_source.data = {"x": p.xy[:, 0], "y": p.xy[:, 1]}
        self.straight_source.data = {"x": [p.xy[0, 0], p.xy[-1, 0]], "y": [p.xy[0, 1], p.xy[-1, 1]]}
        self.ends_source.data = {"x": [p.xy[0, 0], p.xy[-1, 0]], "y": [p.xy[0, 1], p.xy[-1, 1]]}
        ds = p.view.result.dataset
        units = "units of the standardised data" if ds is not None and ds.scale is not None else "data units"
        self.lengths.object = (f"<span class='gx-geodesic-length'>Geodesic length <b>{p.length:.4g}</b></span> · "
                               f"<span class='gx-straight-length'>straight segment <b>{p.straight_length:.4g}"
                               f"</b></span> <span style='color:#5b6b7c'>({units}; "
                               f"{p.straight_length / max(p.length, 1e-300):.2f}× the geodesic)</span>")
        self.text.object = escape("The path drawn on the map is the shortest under the model's expected metric "
                                  "(dashed: the straight segment). Play the walk to see the model's output along it.")
        self.player.end = p.num_points - 1
        is_image = ds is not None and ds.image_shape is not None
        self.images.visible = is_image
        self.profile.visible = not is_image
        if is_image:
            self._show_strip(p, ds.image_shape)
        elif ds is not None:
            label_feature_axis(self.profile_fig.xaxis[0], ds.feature_names, ds.d)
        self.walk_row.visible = True
        self._on_frame()

    def _show_strip(self, p, shape) -> None:
        h, w = shape
        picks = np.linspace(0, p.num_points - 1, STRIP_FRAMES).round().astype(int)
        gap = 0.15 * w
        lo, hi = float(np.nanmin(p.mean)), float(np.nanmax(p.mean))
        self.mapper.update(low=lo, high=hi if hi > lo else lo + 1.0)
        # row 0 of an image is its top row; Bokeh draws row 0 at the bottom
        self.strip_source.data = {"image": [p.mean[i].reshape(h, w)[::-1] for i in picks],
                                  "x": [k * (w + gap) for k in range(STRIP_FRAMES)], "dw": [w] * STRIP_FRAMES,
                                  "dh": [h] * STRIP_FRAMES}
        self.strip_fig.x_range.update(start=-gap / 2, end=STRIP_FRAMES * (w + gap) - gap / 2)
        self.strip_fig.y_range.update(start=0, end=h)
        self.frame_fig.x_range.update(start=0, end=w)
        self.frame_fig.y_range.update(start=0, end=h)

    def _on_frame(self, *events) -> None:
        walk = self.geodesic
        p = walk.path
        if p is None:
            return
        i = int(min(max(walk.frame, 0), p.num_points - 1))
        self.frame_source.data = {"x": [p.xy[i, 0]], "y": [p.xy[i, 1]]}
        ds = p.view.result.dataset
        if ds is not None and ds.image_shape is not None:
            h, w = ds.image_shape
            self.frame_image_source.data = {"image": [p.mean[i].reshape(h, w)[::-1]], "dw": [w], "dh": [h]}
            self.frame_fig.title.text = f"Point {i + 1} of {p.num_points}"
        else:
            x = np.arange(p.mean.shape[1])
            self.profile_source.data = {"x": x, "frame": p.mean[i], "start": p.mean[0], "end": p.mean[-1]}
            self.profile_fig.title.text = f"Predicted features at point {i + 1} of {p.num_points} along the path"

    def __panel__(self):
        return self._layout
