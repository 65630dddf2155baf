"""The model's output at the clicked latent location, beside the nearest example."""
from __future__ import annotations

import holoviews as hv
import numpy as np
import panel as pn
import param

from .. import help_texts
from ..viewmodel import ExplorerState
from .common import ACCENT, MUTED_MD, PANEL_STYLES, title_with_help

IMAGE_CMAP = "Greys_r"


class ReconstructionView(pn.viewable.Viewer):
    """An image pair for image data; otherwise a feature profile with a ±2σ band."""

    vm = param.ClassSelector(class_=ExplorerState)

    def __init__(self, **params):
        super().__init__(**params)
        vm = self.vm
        self.text = pn.pane.Markdown(vm.recon_text, sizing_mode="stretch_width", stylesheets=[MUTED_MD],
                                     margin=(0, 10))
        self.body = pn.Column(sizing_mode="stretch_width")
        self._kind = None
        self.title = title_with_help("Reconstruction", help_texts.RECONSTRUCTION)
        vm.param.watch(lambda e: setattr(self.text, "object", e.new), "recon_text")
        vm.param.watch(self._maybe_rebuild, ["dataset", "reconstruction"])
        self._maybe_rebuild()

    def _dataset_kind(self):
        ds = self.vm._trained_dataset or self.vm.dataset
        if ds is None:
            return None
        return ("image", tuple(ds.image_shape)) if ds.image_shape is not None else ("profile", ds.d)

    def _maybe_rebuild(self, *events):
        rec = self.vm.reconstruction
        kind = (("image", tuple(rec.image_shape)) if rec.is_image else ("profile", rec.mean.size)) if rec else \
            self._dataset_kind()
        if kind == self._kind:
            return
        self._kind = kind
        if kind is None:
            self.body[:] = []
            return
        if kind[0] == "image":
            pred = hv.DynamicMap(self._pred_image, streams=[self.vm.recon_pipe])
            near = hv.DynamicMap(self._near_image, streams=[self.vm.recon_pipe])
            self.body[:] = [pn.Row(
                pn.pane.HoloViews(pred, width=178, height=205, linked_axes=False),
                pn.pane.HoloViews(near, width=178, height=205, linked_axes=False),
                sizing_mode="stretch_width",
            )]
        else:
            prof = hv.DynamicMap(self._profile, streams=[self.vm.recon_pipe])
            self.body[:] = [pn.pane.HoloViews(prof, sizing_mode="stretch_width", height=300, linked_axes=False)]

    # ---- image data ------------------------------------------------------------
    def _img(self, arr, title, clim):
        h, w = arr.shape
        return hv.Image(arr, bounds=(0, 0, w, h), kdims=["col", "row"], vdims=["value"]).opts(
            cmap=IMAGE_CMAP, xaxis=None, yaxis=None, title=title, width=172, height=200, toolbar=None,
            clim=clim, framewise=True, data_aspect=1, clipping_colors={"NaN": "#f3f5f8"},
        )

    def _shape(self):
        kind = self._kind
        return kind[1] if kind and kind[0] == "image" else (1, 1)

    def _clim(self, rec):
        lo = float(min(rec.mean.min(), rec.nearest_values.min()))
        hi = float(max(rec.mean.max(), rec.nearest_values.max()))
        return (lo, hi if hi > lo else lo + 1.0)

    def _pred_image(self, data):
        if data is None or not data.is_image:
            return self._img(np.full(self._shape(), 0.96), "Prediction", (0, 1))
        return self._img(data.mean_image, "Predicted at click", self._clim(data))

    def _near_image(self, data):
        if data is None or not data.is_image:
            return self._img(np.full(self._shape(), 0.96), "Nearest example", (0, 1))
        return self._img(data.nearest_image, f"Nearest: #{data.nearest_index} ({data.nearest_label})",
                         self._clim(data))

    # ---- other data ------------------------------------------------------------
    def _profile(self, data):
        fx = hv.Dimension("feature", label="feature")
        fy = hv.Dimension("value", label="value")
        if data is None or data.is_image:
            return (hv.Curve([], fx, fy) * hv.Curve([], fx, fy)).opts(
                hv.opts.Curve(responsive=True, height=290, title="Click the latent map", show_grid=True))
        D = data.mean.size
        idx = np.arange(D)
        band = hv.Spread((idx, data.mean, 2 * data.std), fx, [fy, "err"], label="±2σ").opts(
            color=ACCENT, alpha=0.2, line_alpha=0, framewise=True)
        mean = hv.Curve((idx, data.mean), fx, fy, label="prediction").opts(color=ACCENT, line_width=2, framewise=True)
        near = hv.Curve((idx, data.nearest_values), fx, fy,
                        label=f"nearest #{data.nearest_index} ({data.nearest_label})").opts(
            color="#d55e00", line_dash="dashed", line_width=1.5, framewise=True)
        names = data.feature_names if len(data.feature_names) == D else [str(i) for i in idx]
        ticks = [(i, names[i]) for i in idx] if D <= 16 else None
        return (band * mean * near).opts(
            hv.opts.Overlay(responsive=True, height=290, legend_position="top_left", show_grid=True,
                            title="Predicted features at the click", framewise=True, toolbar="above",
                            xticks=ticks, xrotation=45 if ticks else 0))

    def __panel__(self):
        return pn.Column(self.title, self.text, self.body, sizing_mode="stretch_width",
                         styles=PANEL_STYLES)
