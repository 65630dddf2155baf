"""Minibatch models in the Model card: the minibatch size, and the catalog's proposal for big data.

* the minibatch size, shown for models whose catalog entry trains by
  minibatches (``ModelSpec.minibatch``);
* when the chosen model's run until converged would take minutes on these
  data (``catalog.suggestion``: estimated, then measured from the start the
  page prepares), a visible proposal of the model the catalog names
  (``scales_to``), both runs' ETAs, and a button that switches to it.
"""
from __future__ import annotations

import panel as pn
import param

from ..catalog import format_seconds, spec as model_spec
from ..state.data import LoadedData
from ..state.settings import ModelSettings
from .common import MUTED_MD, Reads, StateView, escape, on_click


class MinibatchPanel(StateView):
    settings = Reads(class_=ModelSettings)
    data = Reads(class_=LoadedData)

    def __init__(self, **params):
        super().__init__(**params)
        s = self.settings
        self.batch = pn.widgets.IntInput.from_param(s.param.batch_size, label="Minibatch (rows per iteration)",
                                                    sizing_mode="stretch_width", css_classes=["gx-batch"])
        self.batch_note = pn.pane.HTML(escape("One iteration is one minibatch; an epoch is one pass over all rows. "
                                              "The objective shown while training is the minibatch estimate."),
                                       sizing_mode="stretch_width", stylesheets=[MUTED_MD], margin=(0, 10))
        self.proposal = pn.pane.Alert("", alert_type="warning", visible=False, sizing_mode="stretch_width",
                                      css_classes=["gx-suggestion"])
        self.switch = pn.widgets.Button(label="Use the proposed model", color="warning", visible=False,
                                        sizing_mode="stretch_width", css_classes=["gx-suggestion-use"])
        on_click(self.switch, self._on_switch)
        s.param.watch(self._refresh, ["model", "suggestion", "locked", "latent_dim", "num_inducing", "notes"])
        self._refresh()

    def _on_switch(self, event):
        s = self.settings
        if s.suggestion and not s.locked:
            s.model = s.suggestion

    def _refresh(self, *events):
        s = self.settings
        minibatch = s.spec.minibatch
        self.batch.visible = self.batch_note.visible = minibatch
        self.batch.disabled = s.locked
        key = s.suggestion
        if key:
            ds = self.data.dataset
            rows = f"{ds.n:,} rows" if ds is not None else "many rows"
            mine, theirs = s.estimate(), s.estimate(key)
            how = "measured here" if mine.measured else "estimated"
            per = f"{mine.seconds_per_iteration:.2g} s per iteration, {how}"
            self.proposal.object = escape(
                f"Big data: {rows}. A run of the {s.spec.display_name} until converged would take "
                f"{format_seconds(mine.seconds)} ({per}); {model_spec(key).short_name}: "
                f"{format_seconds(theirs.seconds)}. Proposed model: {model_spec(key).display_name}. It trains on "
                "minibatches of rows, so an iteration costs the same whatever the number of rows.", 500)
        self.proposal.visible = self.switch.visible = bool(key)
        self.switch.disabled = s.locked

    def __panel__(self):
        return pn.Column(self.proposal, self.switch, self.batch, self.batch_note, sizing_mode="stretch_width")
