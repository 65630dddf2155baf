"""The latent map: predictive-variance shading, labelled points, click to reconstruct."""
from __future__ import annotations

import warnings

import holoviews as hv
import numpy as np
import panel as pn
import param

from .. import help_texts
from ..viewmodel import PALETTE, VARIANCE_CMAP, ExplorerState
from .common import OUTLINE, PANEL_STYLES, title_with_help

MAP_TITLE = "Latent space"
PLACEHOLDER = "Press ▶ Train to map the data"

# The empty map is an all-NaN image (drawn in the clipping colour); numpy's
# nan-reductions inside HoloViews warn about it on every render.
warnings.filterwarnings("ignore", message="All-NaN slice encountered", category=RuntimeWarning)


class LatentMap(pn.viewable.Viewer):
    """``hv.Image`` of the predictive variance under ``hv.Points`` coloured by label.

    The view-model's ``Tap`` (and, when "follow the pointer" is on,
    ``PointerXY``) streams are attached to the image, so a click anywhere in
    the frame asks the view-model for a reconstruction.
    """

    vm = param.ClassSelector(class_=ExplorerState)

    def __init__(self, **params):
        super().__init__(**params)
        vm = self.vm
        image = hv.DynamicMap(self._image, streams=[vm.image_pipe])
        points = hv.DynamicMap(self._points, streams=[vm.points_pipe])
        markers = hv.DynamicMap(self._markers, streams=[vm.marker_pipe])
        hint = hv.DynamicMap(self._hint, streams=[vm.image_pipe])
        vm.tap.source = image
        vm.pointer.source = image
        overlay = (image * points * markers * hint).opts(
            hv.opts.Overlay(responsive=True, height=470, show_legend=False, title=MAP_TITLE, toolbar="above")
        )
        self.plot = pn.pane.HoloViews(overlay, sizing_mode="stretch_width", height=470, linked_axes=False)
        self.auto = pn.widgets.Checkbox.from_param(vm.param.auto_dims, label="Two most relevant dims",
                                                   margin=(8, 10, 0, 8))
        self.x_sel = pn.widgets.Select(options={}, width=80, disabled=True, margin=(2, 4))
        self.y_sel = pn.widgets.Select(options={}, width=80, disabled=True, margin=(2, 4))
        self.x_sel.param.watch(lambda e: self._set_dim("x_dim", e.new), "value")
        self.y_sel.param.watch(lambda e: self._set_dim("y_dim", e.new), "value")
        self.follow = pn.widgets.Checkbox.from_param(vm.param.follow_pointer, label="Follow the pointer",
                                                     margin=(8, 10, 0, 14))
        self.from_click = pn.widgets.Button(label="Set other dims from clicked point", color="default",
                                            **OUTLINE, margin=(18, 5, 0, 5), disabled=True)
        self.from_click.on_click(lambda e: vm.set_fixed_from_nearest())
        self.reset_fixed = pn.widgets.Button(label="Reset to 0", color="default", **OUTLINE,
                                             margin=(18, 5, 0, 5))
        self.reset_fixed.on_click(lambda e: setattr(vm, "fixed", [0.0] * vm.model_Q))
        self.sliders = pn.Column(sizing_mode="stretch_width")
        self.slider_card = pn.Card(
            self.sliders, pn.Row(self.from_click, self.reset_fixed),
            title="Other latent dimensions (held fixed)", collapsed=True, sizing_mode="stretch_width",
            margin=(2, 5), visible=False,
        )
        self.title = title_with_help(MAP_TITLE, help_texts.LATENT)
        self.legend = pn.pane.HTML("", sizing_mode="stretch_width", margin=(0, 10, 4, 10))
        vm.param.watch(self._on_legend, ["label_colours"])
        self._slider_widgets = {}
        vm.param.watch(self._on_model_q, ["model_Q"])
        vm.param.watch(self._on_dims, ["shown_dims", "auto_dims"])
        vm.param.watch(self._on_fixed, ["fixed"])
        vm.param.watch(self._on_recon, ["reconstruction"])
        self._on_model_q()
        self._on_legend()

    # ---- plot callbacks ------------------------------------------------------
    def _dims(self):
        xd, yd = self.vm.shown_dims
        return (hv.Dimension("lx", label=f"latent x{xd + 1}"), hv.Dimension("ly", label=f"latent x{yd + 1}"))

    def _image(self, data):
        # Every frame has the same structure and options (HoloViews fixes plot
        # options at the first frame); the colour range follows each frame.
        kx, ky = self._dims()
        vdim = hv.Dimension("variance", label="predictive variance")
        if data is None:
            img = hv.Image(np.full((2, 2), np.nan), bounds=(-1, -1, 1, 1), kdims=[kx, ky], vdims=[vdim])
        else:
            img = hv.Image((data.xs, data.ys, data.variance), kdims=[kx, ky], vdims=[vdim])
        return img.opts(
            cmap=VARIANCE_CMAP, colorbar=True, framewise=True, aspect=None, data_aspect=None, responsive=True,
            colorbar_position="bottom", tools=["tap"], clipping_colors={"NaN": "#f7f9fb"},
            default_tools=["pan", "wheel_zoom", "box_zoom", "reset", "save"],
            colorbar_opts={"title": "predictive variance (light = confident)"},
        )

    def _points(self, data):
        kx, ky = self._dims()
        pts = hv.Points(data.rename(columns={"x": "lx", "y": "ly"}), kdims=[kx, ky],
                        vdims=[hv.Dimension("label"), hv.Dimension("index")])
        cmap = dict(self.vm.label_colours) if len(data) and self.vm.label_colours else PALETTE
        return pts.opts(
            color="label", cmap=cmap, size=7, framewise=True, line_color="white", line_width=0.6,
            tools=["hover"], alpha=0.9, show_legend=False,
            hover_tooltips=[("index", "@index"), ("label", "@label")],
        )

    def _hint(self, data):
        kx, ky = self._dims()
        text = PLACEHOLDER if data is None else ""
        return hv.Text(0, 0, text, kdims=[kx, ky]).opts(text_color="#5b6b7c", text_font_size="13pt")

    def _markers(self, data):
        kx, ky = self._dims()
        click_pt = [data["click"]] if data else []
        near_pt = [data["nearest"]] if data else []
        click = hv.Points(click_pt, kdims=[kx, ky]).opts(
            marker="x", size=18, color="#d55e00", line_width=3, framewise=True)
        near = hv.Points(near_pt, kdims=[kx, ky]).opts(
            marker="circle", size=18, fill_alpha=0, line_color="#d55e00", line_width=2, framewise=True)
        return click * near

    def static_overlay(self):
        """The map as it is now, as a plain (non-streaming) HoloViews overlay."""
        vm = self.vm
        return (self._image(vm.image_pipe.data) * self._points(vm.points_pipe.data)).opts(
            hv.opts.Overlay(width=760, height=620, legend_position="right", title=MAP_TITLE)
        )

    # ---- controls -------------------------------------------------------------
    def _set_dim(self, name, value):
        if value is None or self.vm.auto_dims:
            return
        setattr(self.vm, name, int(value))

    def _on_model_q(self, *events):
        Q = self.vm.model_Q
        opts = {f"x{i + 1}": i for i in range(Q)}
        self.x_sel.options = opts
        self.y_sel.options = opts
        self._on_dims()
        self._slider_widgets = {}
        self.sliders.clear()
        X = self.vm.X_mean
        for i in range(Q):
            lo, hi = (-3.0, 3.0)
            if X is not None:
                lo = float(min(-0.5, X[:, i].min() * 1.2))
                hi = float(max(0.5, X[:, i].max() * 1.2))
            s = pn.widgets.FloatSlider(label=f"x{i + 1}", start=round(lo, 2), end=round(hi, 2), step=0.01,
                                       value=float(self.vm.fixed[i]) if len(self.vm.fixed) == Q else 0.0,
                                       sizing_mode="stretch_width")
            s.param.watch(lambda e, i=i: self.vm.set_fixed_value(i, e.new), "value_throttled")
            self._slider_widgets[i] = s
            self.sliders.append(s)
        self.slider_card.visible = Q > 2
        self._on_dims()

    def _on_dims(self, *events):
        vm = self.vm
        xd, yd = vm.shown_dims
        self.x_sel.disabled = self.y_sel.disabled = vm.auto_dims or vm.model_Q < 2
        if vm.model_Q >= 2:
            self.x_sel.value, self.y_sel.value = xd, yd
        for i, s in self._slider_widgets.items():
            s.visible = i not in (xd, yd)

    def _on_fixed(self, *events):
        fixed = self.vm.fixed
        for i, s in self._slider_widgets.items():
            if i < len(fixed):
                v = float(fixed[i])
                if v < s.start:
                    s.start = v
                if v > s.end:
                    s.end = v
                s.value = v

    def _on_legend(self, *events):
        vm = self.vm
        ds = vm._trained_dataset
        name = (getattr(ds, "label_name", None) or "label") if ds is not None and ds.labels is not None else ""
        items = "".join(
            f"<span style='display:inline-flex;align-items:center;margin:0 10px 2px 0;white-space:nowrap'>"
            f"<span style='width:11px;height:11px;border-radius:50%;background:{c};display:inline-block;"
            f"margin-right:4px;border:1px solid #fff;box-shadow:0 0 0 1px #cbd5e1'></span>{label}</span>"
            for label, c in vm.label_colours.items()
        )
        head = f"<span style='color:#5b6b7c;margin-right:8px'>{name}:</span>" if name else ""
        self.legend.object = (f"<div style='font-size:.82rem;display:flex;flex-wrap:wrap;align-items:center'>"
                              f"{head}{items}</div>") if items and name else ""

    def _on_recon(self, *events):
        self.from_click.disabled = self.vm.reconstruction is None

    def __panel__(self):
        return pn.Column(
            pn.Row(self.title, sizing_mode="stretch_width"),
            pn.FlexBox(self.auto, pn.pane.HTML("<span style='font-size:.85rem;color:#5b6b7c'>horizontal</span>",
                                               margin=(8, 0, 0, 6)), self.x_sel,
                       pn.pane.HTML("<span style='font-size:.85rem;color:#5b6b7c'>vertical</span>",
                                    margin=(8, 0, 0, 6)), self.y_sel, self.follow,
                       align_items="center", sizing_mode="stretch_width"),
            self.plot,
            self.legend,
            self.slider_card,
            sizing_mode="stretch_width",
            styles=PANEL_STYLES,
        )


