"""GPLVM Explorer: the Panel app.

Serve with ``panel serve gplvm_explorer/app.py``, ``gplvm-explorer`` or
``make serve``.  :func:`create_app` builds a fresh page (with its own
view-model and training session) for every browser session; this module only
assembles the template.
"""
from __future__ import annotations

import base64
from pathlib import Path

import holoviews as hv
import panel as pn

from gplvm_explorer import help_texts, warmup
from gplvm_explorer.viewmodel import ExplorerState
from gplvm_explorer.views import (
    ARDPlot,
    DataPanel,
    ExportPanel,
    LatentMap,
    ModelPanel,
    ObjectivePlot,
    ReconstructionView,
    StatusBar,
    TrainingPanel,
)
from gplvm_explorer.views.common import title_with_help

ASSETS = Path(__file__).resolve().parent.parent / "assets"
TITLE = "GPLVM Explorer"
POLL_MS = 250  # UI refresh: 4 Hz

hv.extension("bokeh", logo=False)
pn.extension(notifications=False, design="bootstrap")


def _asset_text(name: str) -> str:
    try:
        return (ASSETS / name).read_text()
    except OSError:
        return ""


def _data_uri(name: str, mime: str = "image/svg+xml") -> str:
    try:
        raw = (ASSETS / name).read_bytes()
    except OSError:
        return ""
    return f"data:{mime};base64," + base64.b64encode(raw).decode()


def create_app(session=None):
    """Build one page.  ``session`` (a TrainingSession) is for tests."""
    vm = ExplorerState(session=session)
    latent = LatentMap(vm=vm)
    def card(view, title, help_md):
        return pn.Card(view, header=title_with_help(title, help_md, level=4), sizing_mode="stretch_width",
                       collapsible=True, margin=(6, 4))

    sidebar = [
        card(DataPanel(vm=vm), "1 · Data", help_texts.DATA),
        card(ModelPanel(vm=vm), "2 · Model", help_texts.MODEL),
        card(TrainingPanel(vm=vm), "3 · Training", help_texts.TRAINING),
    ]
    main = [
        StatusBar(vm=vm),
        pn.Row(
            pn.Column(latent, sizing_mode="stretch_width", min_width=440),
            pn.Column(ReconstructionView(vm=vm), ARDPlot(vm=vm), width=400),
            sizing_mode="stretch_width",
        ),
        ObjectivePlot(vm=vm),
        ExportPanel(vm=vm, latent_map=latent),
    ]
    template = pn.template.FastListTemplate(
        title=TITLE,
        sidebar=sidebar,
        main=main,
        sidebar_width=340,
        accent_base_color="#1f5f8b",
        header_background="#1f5f8b",
        logo=_data_uri("logo.svg"),
        # Panel infers the favicon type from the URL's ending; the fragment keeps the data URI intact
        favicon=_data_uri("favicon.svg") + "#favicon.svg",
        raw_css=[_asset_text("style.css")],
        theme_toggle=False,
        main_layout=None,
    )
    if pn.state.curdoc is not None and pn.state.curdoc.session_context is not None:
        cb = pn.state.add_periodic_callback(vm.poll, period=POLL_MS)

        def _destroyed(session_context, vm=vm, cb=cb):
            cb.stop()
            vm.close()

        pn.state.on_session_destroyed(_destroyed)
    template.vm = vm  # handy for tests and debugging
    return template


# Compile the numerical kernels in the background, once per process.
warmup.start()

if __name__.startswith("bokeh_app") or __name__ == "__main__":
    create_app().servable(title=TITLE)
