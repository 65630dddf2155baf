"""The model's output at the clicked latent location, beside the nearest training row.

Plain Bokeh figures whose sources are replaced per click: a click sends D
numbers (or a few small images), not a re-rendered plot.  Images show three
pictures: the predicted image, its ±2σ image (twice the predictive standard
deviation of every pixel, on a scale from 0 to the data's range, so its
brightness says how sure the model is there) and the nearest training row.
Where the page predicts by itself (:mod:`.page_prediction`), the click's mean
and ±2σ (or predicted and ±2σ images) are drawn by the page into
``profile_source`` (``pred_source``, ``std_source``) and the server adds the
nearest training row (``nearest_source``, ``near_source``).

A model with a Bernoulli likelihood predicts probabilities P(y = 1): the
predicted image is a probability map on a fixed 0..1 scale with its 0.5
contour (:mod:`.contour`), and a profile is drawn as bars in [0, 1]
(``probability_source``) instead of a line with a ±2σ band.
"""
from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.models import ColumnDataSource, DataRange1d, LinearColorMapper, Range1d
from bokeh.plotting import figure

from .. import help_texts
from ..state.data import LoadedData
from ..state.latent import LatentSlice
from ..state.shown import ShownData
from ..state.training import TrainingRun
from .common import (ACCENT, MUTED_MD, PANEL_STYLES, LiveHTML, Reads, StateView, escape, label_feature_axis, plain,
                     title_with_help)
from .contour import level_segments
from .page_prediction import in_standard_units, page_drawn_source

GREYS = ["#%02x%02x%02x" % (v, v, v) for v in np.linspace(0, 255, 256).astype(int)]
#: The ±2σ image: white where the model is sure, dark orange where it is not.
UNCERTAINTY = ["#%02x%02x%02x" % (255 - int(t * 42), 255 - int(t * 161), 255 - int(t * 255))
               for t in np.linspace(0, 1, 256)]
#: Width and height of each of the three images' figures.
IMAGE_FIGURE = (124, 150)
HINT = "Click the latent map to see the model's output there."
#: Colour of the 0.5 contour drawn on a probability map.
CONTOUR = "#d55e00"


def nearest_title(index: int, label, width: int = 18) -> str:
    """The nearest image's title: "Nearest: #index" and, on a second line, the label cut to ``width``
    characters (ending in an ellipsis) -- the three images' figures are narrow."""
    head = f"Nearest: #{index}"
    return f"{head}\n{plain(label, width)}" if label else head


class ReconstructionView(StateView):
    """An image pair for image data; otherwise a feature profile with a ±2σ band."""

    data = Reads(class_=LoadedData)
    training = Reads(class_=TrainingRun)
    latent = Reads(class_=LatentSlice)
    shown = Reads(class_=ShownData)

    def __init__(self, **params):
        super().__init__(**params)
        self.text = LiveHTML(HINT, sizing_mode="stretch_width", stylesheets=[MUTED_MD], margin=(0, 10),
                                 css_classes=["gx-recon-text"])
        self.title = title_with_help("Reconstruction", help_texts.RECONSTRUCTION)
        # image data: prediction and nearest example
        self.mapper = LinearColorMapper(palette=GREYS, low=0, high=1)
        self.std_mapper = LinearColorMapper(palette=UNCERTAINTY, low=0, high=1)
        self.pred_source = page_drawn_source({"image": [np.full((1, 1), 0.5)], "dw": [1], "dh": [1]},
                                             name="reconstruction-image")
        self.std_source = page_drawn_source({"image": [np.zeros((1, 1))], "dw": [1], "dh": [1]},
                                            name="reconstruction-std-image")
        self.near_source = ColumnDataSource({"image": [np.full((1, 1), 0.5)], "dw": [1], "dh": [1]},
                                            name="reconstruction-nearest-image")
        # two-line titles: the figures stay aligned whatever the click's titles say
        self.pred_fig = self._image_figure("Prediction\n", self.pred_source, self.mapper)
        # a probability map's 0.5 contour (Bernoulli likelihood)
        self.contour_source = ColumnDataSource({"xs": [], "ys": []}, name="reconstruction-contour")
        self.pred_fig.multi_line("xs", "ys", source=self.contour_source, line_color=CONTOUR, line_width=2)
        self.std_fig = self._image_figure("±2σ\n", self.std_source, self.std_mapper)
        self.near_fig = self._image_figure("Nearest example\n", self.near_source, self.mapper)
        # other data: a profile of all D features
        # named: the browser tests and benchmarks find them by name
        self.profile_source = page_drawn_source(self._no_profile(), name="reconstruction-profile")
        self.probability_source = ColumnDataSource({"x": [], "p": []}, name="reconstruction-probabilities")
        self.nearest_source = ColumnDataSource(self._no_nearest(), name="reconstruction-nearest")
        self.profile_fig = self._profile_figure()
        w, h = IMAGE_FIGURE
        self.images = pn.Row(*(pn.pane.Bokeh(f, width=w + 4, height=h + 4, margin=(0, 1))
                               for f in (self.pred_fig, self.std_fig, self.near_fig)), visible=False)
        # visibility is toggled on a layout: toggling it on a Bokeh pane trips Panel
        self.profile = pn.Column(pn.pane.Bokeh(self.profile_fig, sizing_mode="stretch_width", height=300),
                                 sizing_mode="stretch_width", visible=False)
        self.latent.param.watch(self._on_reconstruction, ["reconstruction"])
        self.training.param.watch(self._on_dataset, ["dataset", "result"])  # a no-op unless the data changed
        self.data.param.watch(self._on_dataset, ["dataset"])
        self._shown_dataset = self  # the data set the axes show (none yet)
        self._on_dataset()

    def _image_figure(self, title, source, mapper):
        w, h = IMAGE_FIGURE
        fig = figure(title=title, width=w, height=h, toolbar_location=None, x_range=Range1d(0, 1),
                     y_range=Range1d(0, 1), match_aspect=True, min_border=2)
        fig.title.text_font_size = "9pt"
        fig.image("image", x=0, y=0, dw="dw", dh="dh", source=source, color_mapper=mapper)
        fig.axis.visible = False
        fig.grid.visible = False
        return fig

    def _profile_figure(self):
        fig = figure(title="Predicted features at the click", height=290, sizing_mode="stretch_width",
                     toolbar_location="above", tools="pan,wheel_zoom,box_zoom,reset,save",
                     x_axis_label="feature", y_axis_label="value")
        self._band = fig.varea("x", "lower", "upper", source=self.profile_source, fill_color=ACCENT, fill_alpha=0.2,
                               legend_label="±2σ")
        self._line = fig.line("x", "mean", source=self.profile_source, color=ACCENT, line_width=2,
                              legend_label="prediction")
        self._bars = fig.vbar("x", top="p", bottom=0.0, width=0.7, source=self.probability_source,
                              fill_color=ACCENT, fill_alpha=0.6, line_color=None, legend_label="P(y = 1)",
                              visible=False)
        self._near_line = fig.line("x", "nearest", source=self.nearest_source, color="#d55e00",
                                   line_dash="dashed", line_width=1.5, legend_label="nearest training row")
        fig.legend.location = "top_left"
        fig.legend.orientation = "horizontal"
        fig.legend.label_text_font_size = "8pt"
        fig.legend.background_fill_alpha = 0.6
        fig.add_layout(fig.legend[0], "above")
        items = fig.legend[0].items
        self._near_item = next(item for item in items if self._near_line in item.renderers)
        self._bars_item = next(item for item in items if self._bars in item.renderers)
        self._bars_item.visible = False  # a Bernoulli model's only
        self._gaussian_items = [item for item in items if {self._band, self._line} & set(item.renderers)]
        return fig

    @staticmethod
    def _no_profile() -> dict:
        return {"x": [], "mean": [], "lower": [], "upper": []}

    @staticmethod
    def _no_nearest() -> dict:
        return {"x": [], "nearest": []}

    def _on_dataset(self, *events) -> None:
        ds = self.shown.dataset
        if ds is self._shown_dataset:  # e.g. Train on the data on show: nothing to redraw
            return
        self._shown_dataset = ds
        is_image = ds is not None and ds.image_shape is not None
        self.images.visible = is_image
        self.profile.visible = ds is not None and not is_image
        if ds is not None and not is_image:
            label_feature_axis(self.profile_fig.xaxis[0], ds.feature_names, ds.d)
            self.profile_fig.yaxis.axis_label = "standardised value" if in_standard_units(ds) else "value"
        if is_image:  # per data set, before any click: the page may draw a prediction before the server answers
            h, w = ds.image_shape
            for fig in (self.pred_fig, self.std_fig, self.near_fig):
                fig.x_range.update(start=0, end=w)
                fig.y_range.update(start=0, end=h)
            # ±2σ from 0 to the data's range: its brightness compares with the images' contrast
            values = ds.unstandardize(ds.values) if ds.n * ds.d <= 10_000_000 else None
            span = float(np.nanmax(values) - np.nanmin(values)) if values is not None else 0.0
            self.std_mapper.update(low=0.0, high=span if np.isfinite(span) and span > 0 else 1.0)
        if self.latent.reconstruction is None:
            self.text.object = escape(HINT)

    def _on_reconstruction(self, *events) -> None:
        rec = self.latent.reconstruction
        if rec is None:  # nothing clicked (yet, or since other data were loaded): no picture of another click
            self.text.object = escape(HINT)
            self.profile_source.data = self._no_profile()
            self.nearest_source.data = self._no_nearest()
            for source, fill in ((self.pred_source, 0.5), (self.std_source, 0.0), (self.near_source, 0.5)):
                source.data = {"image": [np.full((1, 1), fill)], "dw": [1], "dh": [1]}
            self.pred_fig.title.text, self.std_fig.title.text = "Prediction", "±2σ"
            self.near_fig.title.text = "Nearest example"
            return
        xd, yd = self.latent.shown_dims
        shown = f" (label {escape(rec.nearest_label, 60)})" if rec.nearest_label else ""
        what = {"bernoulli": "probabilities P(y = 1) (Bernoulli likelihood); latent variance",
                "poisson": "expected counts (Poisson likelihood); latent variance"}.get(rec.likelihood,
                                                                                      "predictive variance")
        self.text.object = (f"At x{xd + 1} = {rec.click[0]:.3g}, x{yd + 1} = {rec.click[1]:.3g}: {what} "
                            f"{rec.variance:.3g}. Nearest training point #{rec.nearest_index}{shown}.")
        if rec.is_image:
            h, w = rec.image_shape
            # the nearest training image may have missing (NaN) pixels
            lo = float(min(np.nanmin(rec.mean), np.nanmin(rec.nearest_values, initial=np.inf)))
            hi = float(max(np.nanmax(rec.mean), np.nanmax(rec.nearest_values, initial=-np.inf)))
            self.mapper.update(low=lo, high=hi if hi > lo else lo + 1.0)
            # row 0 of an image is its top row; Bokeh draws row 0 at the bottom
            if not rec.drawn_in_page:
                self.pred_source.data = {"image": [rec.mean.reshape(h, w)[::-1]], "dw": [w], "dh": [h]}
                self.std_source.data = {"image": [2 * rec.std.reshape(h, w)[::-1]], "dw": [w], "dh": [h]}
            self.near_source.data = {"image": [rec.nearest_values.reshape(h, w)[::-1]], "dw": [w], "dh": [h]}
            self.pred_fig.title.text = "Predicted\nat the click"
            if rec.likelihood == "bernoulli":  # a probability map on a fixed scale, with its 0.5 contour
                self.mapper.update(low=0.0, high=1.0)
                xs, ys = level_segments(rec.mean.reshape(h, w)[::-1], 0.5)
                self.contour_source.data = {"xs": xs, "ys": ys}
                self.pred_fig.title.text = "P(y = 1), 0.5\ncontour"
            else:
                self.contour_source.data = {"xs": [], "ys": []}
            self.std_fig.title.text = f"±2σ\n≤ {2 * float(np.max(rec.std)):.2g}"
            self.near_fig.title.text = nearest_title(rec.nearest_index, rec.nearest_label)
        else:
            x = np.arange(rec.mean.size)
            mean, std, nearest = rec.mean, rec.std, rec.nearest_values
            ds = self._shown_dataset
            if in_standard_units(ds) and ds.d == mean.size:  # the file's units -> the columns' z-scores
                mean, std, nearest = (mean - ds.mean) / ds.scale, std / ds.scale, (nearest - ds.mean) / ds.scale
            if not rec.drawn_in_page:
                self.profile_source.data = {"x": x, "mean": mean, "lower": mean - 2 * std, "upper": mean + 2 * std}
            self.nearest_source.data = {"x": x, "nearest": nearest}
            self._near_item.label = {"value": f"nearest #{rec.nearest_index}"}
            self._show_probabilities(rec, x)

    def _show_probabilities(self, rec, x) -> None:
        """A Bernoulli model's profile: bars of P(y = 1) in [0, 1] in place of the line and its band."""
        binary = rec.likelihood == "bernoulli"
        self._band.visible = self._line.visible = not binary
        for item in self._gaussian_items:
            item.visible = not binary
        self._bars.visible = self._bars_item.visible = binary
        self.probability_source.data = {"x": x, "p": rec.mean} if binary else {"x": [], "p": []}
        fig = self.profile_fig
        if binary:
            if not isinstance(fig.y_range, Range1d):
                fig.y_range = Range1d(-0.05, 1.05)
            fig.yaxis.axis_label = "P(y = 1)"
            fig.title.text = "P(y = 1) of every feature at the click"
        elif fig.yaxis.axis_label == "P(y = 1)":  # the previous click's model was binary: back to the data's axis
            fig.y_range = DataRange1d()
            fig.yaxis.axis_label = "standardised value" if in_standard_units(self._shown_dataset) else "value"
            fig.title.text = "Predicted features at the click"

    def page_targets(self) -> dict:
        """The sources the page draws a click's prediction into (see :mod:`.page_prediction`)."""
        return {"profile": self.profile_source, "image": self.pred_source, "std_image": self.std_source}

    def __panel__(self):
        return pn.Column(self.title, self.text, self.images, self.profile, sizing_mode="stretch_width",
                         styles=PANEL_STYLES)
