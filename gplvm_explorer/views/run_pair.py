"""Two runs side by side: their latent maps drawn from one table of points, so a selection (box, lasso,
tap) in one map is the same rows' selection in the other, and the row under the pointer is ringed in both."""
from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.layouts import row as bokeh_row
from bokeh.models import BoxSelectTool, ColumnDataSource, CustomJS, HoverTool, LassoSelectTool, TapTool
from bokeh.plotting import figure

from ..state.run_pair import RunPair
from ..state.shown import ShownData
from .common import MUTED_MD, PANEL_STYLES, Reads, StateView, escape, title_with_help

__all__ = ["RunPairView", "PAIR_COLUMNS"]

HELP = """\
**Two runs side by side.** Pick two runs of the table: each map shows its run's two most relevant
latent dimensions. Both maps are drawn from the same rows, so selecting points in one (box or lasso
select, or a click) selects the same data rows in the other, and the row under the pointer is ringed
in both: see where a cluster of one model lies in the other. The runs must be trained on the same rows."""

#: The shared source's columns (prefixed: the page's probes find sources by column name).
PAIR_COLUMNS = ("pair_row", "pair_x_left", "pair_y_left", "pair_x_right", "pair_y_right", "pair_colour",
                "pair_label")
_HOVERED = ("pair_hx_left", "pair_hy_left", "pair_hx_right", "pair_hy_right")

# the hovered rows of either map, drawn as rings in both
_ON_HOVER = """
const rows = cb_data.index.indices;
const d = points.data, out = {pair_hx_left: [], pair_hy_left: [], pair_hx_right: [], pair_hy_right: []};
for (const i of rows) {
  out.pair_hx_left.push(d.pair_x_left[i]); out.pair_hy_left.push(d.pair_y_left[i]);
  out.pair_hx_right.push(d.pair_x_right[i]); out.pair_hy_right.push(d.pair_y_right[i]);
}
hovered.data = out;
"""


def point_colours(colouring, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(colours (n,), label texts (n,)) of ``n`` points coloured as the latent map (one colour without labels)."""
    if colouring is None or colouring.n != n:
        return np.full(n, "#1f5f8b", dtype=object), np.full(n, "", dtype=object)
    colours = np.asarray(colouring.colours, dtype=object)[colouring.codes]
    if not len(colouring.categories):
        return colours, np.full(n, "", dtype=object)
    categories = np.asarray(colouring.categories, dtype=object)
    return colours, categories[np.minimum(colouring.codes, len(categories) - 1)]


def _empty(columns) -> dict:
    return {c: [] for c in columns}


class RunPairView(StateView):
    """A checkbox, the two runs' selectors and (when both are chosen) their two linked maps."""

    shown = Reads(class_=ShownData)
    pair = param.ClassSelector(class_=RunPair)

    def __init__(self, **params):
        super().__init__(**params)
        pair = self.pair
        self.toggle = pn.widgets.Checkbox.from_param(pair.param.shown, label="Show two runs side by side",
                                                     css_classes=["gx-pair-toggle"])
        self.left = pn.widgets.Select(label="Left map", options={}, width=300)
        self.right = pn.widgets.Select(label="Right map", options={}, width=300)
        self.left.param.watch(lambda e: setattr(self.pair, "left", int(e.new or 0)), ["value"])
        self.right.param.watch(lambda e: setattr(self.pair, "right", int(e.new or 0)), ["value"])
        self.source = ColumnDataSource(_empty(PAIR_COLUMNS))
        self.hovered = ColumnDataSource(_empty(_HOVERED))
        self.figures = [self._figure(side) for side in ("left", "right")]
        layout = bokeh_row(*self.figures, sizing_mode="stretch_width")
        # shown and hidden through a Column: toggling a Bokeh pane's own visibility fails in Panel 1.10
        self.plot = pn.Column(pn.pane.Bokeh(layout, sizing_mode="stretch_width"), sizing_mode="stretch_width",
                              visible=False, margin=0)
        self.note = pn.pane.HTML("", sizing_mode="stretch_width", margin=(0, 10), stylesheets=[MUTED_MD])
        pair.param.watch(self._on_choices, ["choices", "left", "right", "shown"])
        pair.param.watch(self._refresh, ["points", "message", "shown"])
        self._on_choices()
        self._refresh()

    def _figure(self, side: str):
        fig = figure(title=f"{side} run", height=340, sizing_mode="stretch_width", toolbar_location="above",
                     tools="pan,wheel_zoom,reset,save", name=f"pair-{side}")
        box, lasso = BoxSelectTool(), LassoSelectTool()
        fig.add_tools(box, lasso, TapTool())
        fig.toolbar.active_drag = box  # choosing rows is what the two maps are for
        r = fig.scatter(f"pair_x_{side}", f"pair_y_{side}", source=self.source, color="pair_colour", size=7,
                        line_color="white", line_width=0.6, alpha=0.9, nonselection_alpha=0.12,
                        selection_line_color="black", name=f"pair-points-{side}")
        fig.scatter(f"pair_hx_{side}", f"pair_hy_{side}", source=self.hovered, size=16, fill_alpha=0,
                    line_color="black", line_width=2.5, name=f"pair-hovered-{side}")
        fig.add_tools(HoverTool(renderers=[r], tooltips=[("row", "@pair_row"), ("label", "@pair_label")],
                                callback=CustomJS(args={"points": self.source, "hovered": self.hovered},
                                                  code=_ON_HOVER)))
        fig.title.text_font_size = "11pt"
        return fig

    def _on_choices(self, *events) -> None:
        pair = self.pair
        options = {"(choose a run)": 0, **{label: number for number, label in pair.choices.items()}}
        for widget, value in ((self.left, pair.left), (self.right, pair.right)):
            widget.options = options
            widget.value = value if value in pair.choices else 0
            widget.visible = pair.shown

    def _refresh(self, *events) -> None:
        pair = self.pair
        self.plot.visible = pair.shown and pair.points is not None
        self.hovered.data = _empty(_HOVERED)
        if not pair.shown or pair.points is None:
            self.source.data = _empty(PAIR_COLUMNS)
            self.note.object = f"<p>{escape(pair.message, None)}</p>" if pair.shown and pair.message else ""
            return
        points = pair.points
        colours, labels = point_colours(self.shown.colouring(pair.dataset), points["row"].shape[0])
        self.source.selected.indices = []
        self.source.data = {"pair_row": points["row"], "pair_x_left": points["x_left"],
                            "pair_y_left": points["y_left"], "pair_x_right": points["x_right"],
                            "pair_y_right": points["y_right"], "pair_colour": colours, "pair_label": labels}
        for fig, title, dims in zip(self.figures, pair.titles, pair.dims):
            fig.title.text = title
            fig.xaxis.axis_label = f"latent x{dims[0] + 1}"
            fig.yaxis.axis_label = f"latent x{dims[1] + 1}" if len(dims) > 1 else ""
        self.note.object = ("<p>Each map: its run's two most relevant latent dimensions. Select points in one "
                            "map (box, lasso or click) to see the same rows in the other.</p>")

    def __panel__(self):
        return pn.Column(title_with_help("Two runs side by side", HELP), self.toggle,
                         pn.Row(self.left, self.right), self.plot, self.note,
                         sizing_mode="stretch_width", styles=PANEL_STYLES, css_classes=["gx-run-pair"])
