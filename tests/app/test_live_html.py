"""LiveHTML: a text update in the served page does not make Bokeh walk every model of the page."""
from __future__ import annotations

import bokeh.document.models as doc_models
import panel as pn
import pytest
from bokeh.document import Document
from panel.io.state import set_curdoc

from gplvm_explorer.app import create_app
from gplvm_explorer.views.common import LiveHTML

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def recomputes(monkeypatch):
    calls = []
    original = doc_models.DocumentModelManager.recompute

    def counting(self):
        calls.append(1)
        return original(self)
    monkeypatch.setattr(doc_models.DocumentModelManager, "recompute", counting)
    return calls


def test_text_updates_in_the_page_leave_the_document_alone(recomputes):
    page = create_app()
    live, plain = LiveHTML("start"), pn.pane.HTML("start")
    page.main.append(pn.Column(live, plain))
    doc = Document()
    page.server_doc(doc)
    live_model = next(iter(live._models.values()))[0]
    plain_model = next(iter(plain._models.values()))[0]
    sheets = list(live_model.stylesheets)
    with set_curdoc(doc):
        recomputes.clear()
        plain.object = "<b>one</b>"
        assert recomputes, "Panel's own pane sends new stylesheets (the cost LiveHTML avoids)"
        assert "one" in plain_model.text
        recomputes.clear()
        for i in range(5):
            live.object = f"<span>step {i}</span>"
        page.explorer.training.iteration = 3  # the page's status line is a LiveHTML
        assert recomputes == []
        assert "step 4" in live_model.text and live_model.stylesheets == sheets
        live.stylesheets = [".gx-y { color: red; }"]  # a real change still goes through
        live.object = "after the change"
        assert any("gx-y" in str(getattr(sh, "css", sh)) for sh in live_model.stylesheets)
