"""The PCA map of the same data beside the model's map: same points, same colours (a thin view of PCABeside)."""
from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.models import ColumnDataSource, HoverTool
from bokeh.plotting import figure

from ..state.pca_beside import PCABeside
from ..state.shown import ShownData
from .common import MUTED_MD, PANEL_STYLES, Reads, StateView, escape, title_with_help

__all__ = ["PCABesideView", "PCA_TITLE"]

PCA_TITLE = "PCA of the same data"
HELP = """\
**PCA beside the model.** The data's two principal components: the linear map the
GP-LVM starts from (its PCA initialisation) and generalises. Points are coloured as
in the latent map, so the two maps can be compared point for point."""


class PCABesideView(StateView):
    """A checkbox, and (when ticked) the PCA scatter of the data the model on show was trained on."""

    shown = Reads(class_=ShownData)
    pca = Reads(class_=PCABeside)

    def __init__(self, **params):
        super().__init__(**params)
        self.toggle = pn.widgets.Checkbox.from_param(self.pca.param.shown, label="Show the PCA map of the same data",
                                                     css_classes=["gx-pca-toggle"])
        self.source = ColumnDataSource({"pca_x": [], "pca_y": [], "pca_colour": [], "pca_label": []})
        fig = figure(title=PCA_TITLE, height=360, sizing_mode="stretch_width", toolbar_location="above",
                     tools="pan,wheel_zoom,box_zoom,reset,save", x_axis_label="PC 1", y_axis_label="PC 2")
        r = fig.scatter("pca_x", "pca_y", source=self.source, color="pca_colour", size=7, line_color="white",
                        line_width=0.6, alpha=0.9)
        fig.add_tools(HoverTool(renderers=[r], tooltips=[("label", "@pca_label")]))
        fig.title.text_font_size = "12pt"
        self.figure = fig
        # shown and hidden through a Column: toggling a Bokeh pane's own visibility fails in Panel 1.10
        self.plot = pn.Column(pn.pane.Bokeh(fig, sizing_mode="stretch_width"), sizing_mode="stretch_width",
                              visible=False, margin=0)
        self.note = pn.pane.HTML("", sizing_mode="stretch_width", margin=(0, 10), stylesheets=[MUTED_MD])
        self.pca.param.watch(self._refresh, ["points", "message", "shown"])
        self._refresh()

    def _refresh(self, *events) -> None:
        pca = self.pca
        self.plot.visible = pca.shown and pca.points is not None
        if not pca.shown or pca.points is None:
            self.source.data = {"pca_x": [], "pca_y": [], "pca_colour": [], "pca_label": []}
            self.note.object = f"<p>{escape(pca.message, None)}</p>" if pca.shown and pca.message else ""
            return
        ds, pts = pca.dataset, pca.points
        colouring = self.shown.colouring(ds)
        n = pts.shape[0]
        if colouring is not None and colouring.n == n:
            colours = np.asarray(colouring.colours, dtype=object)[colouring.codes]
            labels = np.asarray(colouring.categories, dtype=object)[np.minimum(colouring.codes,
                                                                               len(colouring.categories) - 1)] \
                if len(colouring.categories) else np.full(n, "", dtype=object)
        else:
            colours, labels = np.full(n, "#1f5f8b", dtype=object), np.full(n, "", dtype=object)
        self.source.data = {"pca_x": pts[:, 0], "pca_y": pts[:, 1], "pca_colour": colours, "pca_label": labels}
        e = pca.explained
        self.note.object = (f"<p>PC 1 explains {100 * e[0]:.0f}% of the variance, PC 2 {100 * e[1]:.0f}%. "
                            "Same colours as the latent map.</p>")

    def __panel__(self):
        return pn.Column(title_with_help("PCA beside the model", HELP), self.toggle, self.plot, self.note,
                         sizing_mode="stretch_width", styles=PANEL_STYLES, css_classes=["gx-pca"])
