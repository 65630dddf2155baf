"""Exports (CSV, NPZ, PNG, HTML) and the copyable model summary."""
from __future__ import annotations

import io
import logging
import os
import tempfile

import holoviews as hv
import panel as pn
import param

from .. import export, help_texts
from ..explorer import Explorer
from ..state.latent import LatentSlice
from ..state.shown import ShownData
from ..state.training import TrainingRun
from .common import OUTLINE, PANEL_STYLES, Reads, StateView, escape, title_with_help

logger = logging.getLogger(__name__)


class ExportPanel(StateView):
    training = Reads(class_=TrainingRun)
    latent = Reads(class_=LatentSlice)
    shown = Reads(class_=ShownData)
    page = Reads(class_=Explorer, doc="The page's own state (its warming up, summary, errors).")

    def __init__(self, **params):
        super().__init__(**params)
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
        self.summary = pn.widgets.TextAreaInput(value="", sizing_mode="stretch_width", height=170,
                                                label="Settings and results (copy as text)",
                                                placeholder="Train a model to see its summary here.")
        self.copy = pn.widgets.Button(label="Copy summary", color="default", **OUTLINE, width=140)
        self.copy.js_on_click(args={"ta": self.summary}, code="""
            const text = ta.value;
            if (navigator.clipboard && window.isSecureContext) { navigator.clipboard.writeText(text); }
            else { const t = document.createElement('textarea'); t.value = text; document.body.appendChild(t);
                   t.select(); document.execCommand('copy'); document.body.removeChild(t); }
        """)
        self.page.param.watch(self._refresh, ["summary"])
        self.latent.param.watch(self._refresh, ["view"])
        self.training.param.watch(self._refresh, ["result"])
        self._refresh()

    def _refresh(self, *events):
        self.summary.value = self.page.summary
        result = self.training.result
        self.csv.disabled = result is None
        self.png.disabled = self.html.disabled = self.latent.view is None
        self.npz.disabled = result is None or not result.final

    def _guard(self, build):
        try:
            self.error.visible = False
            return io.BytesIO(build())
        except Exception as exc:
            logger.exception("Export failed")
            self.error.object = escape(f"Export failed: {exc}", None)
            self.error.visible = True
            return io.BytesIO(b"")

    def _csv(self):
        return self._guard(lambda: export.latents_csv(self.training.result))

    def _npz(self):
        tr = self.training
        return self._guard(lambda: export.model_npz(tr.result, tr.trace.data))

    def _png(self):
        return self._guard(lambda: export.latent_png(self.latent.view, self.shown.colouring()))

    def _html(self):

        def build():
            view = self.latent.view
            if view is None:
                raise ValueError("Train a model first.")
            rgb = export.latent_rgba(view, self.shown.colouring(), size=700)
            x0, y0, x1, y1 = view.extent
            xd, yd = view.dims
            plot = hv.RGB(rgb, bounds=(x0, y0, x1, y1), kdims=[f"latent x{xd + 1}", f"latent x{yd + 1}"]).opts(
                width=760, height=700, title="GPLVM Explorer latent map")
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "latent-map.html")
                hv.save(plot, path, backend="bokeh", resources="inline", title="GPLVM Explorer latent map")
                with open(path, "rb") as fh:
                    return fh.read()
        return self._guard(build)

    def __panel__(self):
        return pn.Column(
            title_with_help("Export & summary", help_texts.EXPORT),
            pn.Row(pn.Column(self.csv, self.npz, self.png, self.html, self.error, width=260),
                   pn.Column(self.summary, self.copy, sizing_mode="stretch_width"), sizing_mode="stretch_width"),
            sizing_mode="stretch_width", styles=PANEL_STYLES,
        )
