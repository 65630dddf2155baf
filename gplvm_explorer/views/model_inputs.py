"""The Model card's extra inputs: the time of a dynamical model, the views of a multi-view model."""
from __future__ import annotations

import panel as pn
import param

from ..state.model_inputs import MAX_VIEWS, ModelInputs
from ..state.settings import ModelSettings
from .common import SMALL_MD, Reads, StateView, escape, on_click


#: A view of an image has hundreds of columns: its chosen columns scroll in a box of their own.
_SCROLL = ".choices__inner { max-height: 124px; overflow-y: auto; }"


class ModelInputsPanel(StateView):
    """Shown only for models whose catalog entry lists inputs ("time", "views")."""

    inputs = Reads(class_=ModelInputs)
    settings = Reads(class_=ModelSettings)

    def __init__(self, **params):
        super().__init__(**params)
        inputs = self.inputs
        self.time = pn.widgets.Select(label="Time of each row", options=inputs.time_options(),
                                      value=inputs.time_source, sizing_mode="stretch_width",
                                      css_classes=["gx-time-source"])
        self.time.param.watch(lambda e: setattr(inputs, "time_source", e.new), "value")
        self.num_views = pn.widgets.IntInput(label="Views", value=2, start=2, end=MAX_VIEWS, width=80)
        self.num_views.param.watch(lambda e: inputs.set_num_views(e.new), "value")
        self.reset = pn.widgets.Button(label="Views from the data", width=150, margin=(26, 5, 5, 5))
        on_click(self.reset, lambda e: inputs.reset_views())
        self.choosers = pn.Column(sizing_mode="stretch_width")
        self.view_box = pn.Column(pn.Row(self.num_views, self.reset, sizing_mode="stretch_width"), self.choosers,
                                  sizing_mode="stretch_width")
        self.errors = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width",
                                    css_classes=["gx-inputs-errors"])
        self.note = pn.pane.HTML("", sizing_mode="stretch_width", stylesheets=[SMALL_MD], margin=(0, 10))
        self._widgets: list = []
        self._labels: list = []
        inputs.param.watch(self._refresh, ["dataset", "time_source", "views", "view_names"])
        self.settings.param.watch(self._refresh, ["model", "locked"])
        self._refresh()

    def _on_view(self, v, event):
        self.inputs.set_view(v, event.new)

    def _refresh(self, *events):
        inputs, spec = self.inputs, self.settings.spec
        names = [e.name for e in events]
        need_time, need_views = "time" in spec.inputs, "views" in spec.inputs
        self.time.visible = need_time
        self.view_box.visible = need_views
        if not events or "dataset" in names:
            self.time.options = inputs.time_options()
        if self.time.value != inputs.time_source:
            self.time.value = inputs.time_source
        ds = inputs.dataset
        cols = list(ds.feature_names) if ds is not None else []
        views = inputs.views
        if len(self._widgets) != len(views) or not events or "dataset" in names:
            self._widgets = []
            for v in range(len(views)):
                # MultiChoice (Choices.js) renders option labels as HTML: escaped labels, raw values
                w = pn.widgets.MultiChoice(label="", options={escape(c, 60): c for c in cols}, value=[],
                                           sizing_mode="stretch_width", max_items=None,
                                           css_classes=[f"gx-view-{v}"], stylesheets=[_SCROLL])
                w.param.watch(lambda e, v=v: self._on_view(v, e), "value")
                self._widgets.append(w)
            # a view of an image has hundreds of columns: each chooser scrolls in a box of its own
            self._labels = [pn.pane.HTML("", margin=(6, 10, 0, 10), css_classes=[f"gx-view-label-{v}"])
                            for v in range(len(views))]
            self.choosers.objects = [obj for v, w in enumerate(self._widgets)
                                     for obj in (self._labels[v], w)]
        if self.num_views.value != len(views) and views:
            self.num_views.value = len(views)
        for v, w in enumerate(self._widgets):
            label = inputs.view_names[v] if v < len(inputs.view_names) else f"view {v}"
            self._labels[v].object = escape(f"View {v + 1}: {label} ({len(views[v])} columns)", 80)
            if list(w.value) != list(views[v]):
                w.value = list(views[v])
            w.disabled = self.settings.locked
        for w in (self.time, self.num_views, self.reset):
            w.disabled = self.settings.locked
        errs = inputs.errors(spec) if (need_time or need_views) else []
        self.errors.object = escape(" ".join(errs), None, multiline=True) if errs else ""
        self.errors.visible = bool(errs)
        if need_time:
            self.note.object = escape("The chosen column is the time, not a feature: it is left out of the "
                                      "data the model reconstructs.")
        elif need_views:
            self.note.object = escape("Each column belongs to at most one view; columns in no view are left out.")
        self.note.visible = need_time or need_views

    def __panel__(self):
        return pn.Column(self.time, self.view_box, self.note, self.errors, sizing_mode="stretch_width")
