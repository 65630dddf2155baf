"""Exports (CSV, NPZ, PNG, HTML) and the copyable model summary."""
from __future__ import annotations

import io
import os
import tempfile

import holoviews as hv
import panel as pn
import param

from .. import help_texts
from ..viewmodel import ExplorerState
from .common import OUTLINE, PANEL_STYLES, title_with_help


class ExportPanel(pn.viewable.Viewer):
    vm = param.ClassSelector(class_=ExplorerState)
    latent_map = param.Parameter(default=None, doc="The LatentMap view (for the HTML export).")

    def __init__(self, **params):
        super().__init__(**params)
        vm = self.vm
        kw = dict(**OUTLINE, color="primary", sizing_mode="stretch_width", margin=(4, 5))
        self.csv = pn.widgets.FileDownload(callback=self._csv, filename="latents.csv",
                                           label="Latent coordinates (CSV)", **kw)
        self.npz = pn.widgets.FileDownload(callback=self._npz, filename="model.npz",
                                           label="Trained model (NPZ)", **kw)
        self.png = pn.widgets.FileDownload(callback=self._png, filename="latent-map.png",
                                           label="Latent map (PNG)", **kw)
        self.html = pn.widgets.FileDownload(callback=self._html, filename="latent-map.html",
                                            label="Latent map (HTML)", **kw)
        self.error = pn.pane.Alert("", alert_type="warning", visible=False, sizing_mode="stretch_width")
        self.summary = pn.widgets.TextAreaInput(value=vm.summary_text, sizing_mode="stretch_width", height=170,
                                                label="Settings and results (copy as text)",
                                                placeholder="Train a model to see its summary here.")
        self.copy = pn.widgets.Button(label="Copy summary", color="default", **OUTLINE, width=140)
        self.copy.js_on_click(args={"ta": self.summary}, code="""
            const text = ta.value;
            if (navigator.clipboard && window.isSecureContext) { navigator.clipboard.writeText(text); }
            else { const t = document.createElement('textarea'); t.value = text; document.body.appendChild(t);
                   t.select(); document.execCommand('copy'); document.body.removeChild(t); }
        """)
        vm.param.watch(self._refresh, ["summary_text", "train_state", "model_Q"])
        self._refresh()

    def _refresh(self, *events):
        vm = self.vm
        self.summary.value = vm.summary_text
        has_latents = vm.X_mean is not None
        finished = vm.train_state in ("finished", "stopped")
        self.csv.disabled = self.png.disabled = self.html.disabled = not has_latents
        self.npz.disabled = not finished

    def _guard(self, fn):
        try:
            self.error.visible = False
            return fn()
        except Exception as exc:
            self.error.object = f"Export failed: {exc}"
            self.error.visible = True
            return io.BytesIO(b"")

    def _csv(self):
        return self._guard(lambda: io.BytesIO(self.vm.latents_csv()))

    def _npz(self):
        return self._guard(lambda: io.BytesIO(self.vm.model_npz()))

    def _png(self):
        return self._guard(lambda: io.BytesIO(self.vm.latent_png()))

    def _html(self):
        def build():
            if self.latent_map is None:
                raise ValueError("No latent map.")
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "latent-map.html")
                hv.save(self.latent_map.static_overlay(), path, backend="bokeh", resources="inline",
                        title="GPLVM Explorer latent map")
                with open(path, "rb") as fh:
                    return io.BytesIO(fh.read())
        return self._guard(build)

    def __panel__(self):
        return pn.Column(
            title_with_help("Export & summary", help_texts.EXPORT),
            pn.Row(
                pn.Column(self.csv, self.npz, self.png, self.html, self.error, width=260),
                pn.Column(self.summary, self.copy, sizing_mode="stretch_width"),
                sizing_mode="stretch_width",
            ),
            sizing_mode="stretch_width",
            styles=PANEL_STYLES,
        )
