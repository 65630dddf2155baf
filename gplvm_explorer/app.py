"""GPLVM Explorer: the Panel app.

Serve with ``panel serve gplvm_explorer/app.py``, ``gplvm-explorer`` or
``make serve``.  :func:`create_app` builds a fresh page -- its own
:class:`~gplvm_explorer.explorer.Explorer` and views -- for every browser
session; this module only assembles the template.  Nothing polls: background
threads hand their results to the page through the session's event loop, and
closing the tab stops the session's training.
"""
from __future__ import annotations

import base64
import logging
from pathlib import Path

import holoviews as hv
import panel as pn

from gplvm_explorer import help_texts, interpreter, memory, warmup
from gplvm_explorer.explorer import Explorer
from gplvm_explorer.views import (
    ARDPlot,
    DataPanel,
    ExportPanel,
    ImputationView,
    LatentMap,
    MissingDataChoice,
    ModelPanel,
    ObjectivePlot,
    PageErrors,
    ReconstructionView,
    StatusBar,
    TrainingPanel,
)
from gplvm_explorer.views.common import title_with_help
from gplvm_explorer.views.deep_layers import DeepLayersInput, DeepLayersView
from gplvm_explorer.views.dynamics import DynamicsView
from gplvm_explorer.views.geodesic import GeodesicView
from gplvm_explorer.views.lesson import LessonButton, LessonCard, LessonLayout
from gplvm_explorer.views.model_inputs import ModelInputsPanel
from gplvm_explorer.views.pca_beside import PCABesideView
from gplvm_explorer.views.run_pair import RunPairView
from gplvm_explorer.views.runs import HeldOutChoice, RunsView, keep_runs_across_reloads
from gplvm_explorer.views.svi import MinibatchPanel
from gplvm_explorer.views.views_mrd import MultiViewView

logger = logging.getLogger(__name__)

ASSETS = Path(__file__).resolve().parent.parent / "assets"
TITLE = "GPLVM Explorer"

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


def _served_doc():
    doc = pn.state.curdoc
    return doc if doc is not None and doc.session_context is not None else None


SYSTEM_FONTS = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"


class Fast(pn.theme.Fast):
    """Panel's Fast design without its Google web font (the page loads nothing from elsewhere).

    Same class name as Panel's: Panel finds a design's own files by the lower-cased class name.
    """

    _resources = {**pn.theme.Fast._resources, "font": {}}


def create_app(lesson=None, **explorer_options):
    """Build one page.  ``lesson``: a LessonPlan to open at once (``gplvm-explorer --lesson``), else the bundled
    one behind the Lesson button; ``explorer_options`` go to :class:`Explorer` (tests pass a limiter or a
    model builder)."""
    from gplvm_explorer.state.lesson import Lesson
    from gplvm_explorer.state.pca_beside import PCABeside
    from gplvm_explorer.state.run_pair import RunPair

    doc = _served_doc()
    ex = Explorer(doc=doc, **explorer_options)
    keep_runs_across_reloads(ex.runs, doc)  # this browser's runs from before a reload, and kept for the next
    ex.pca = PCABeside(ex)  # the PCA map of the same data, beside the model's (a toggle; lesson steps show it)
    ex.lesson = Lesson(ex, plan=lesson, pca=ex.pca, shown=lesson is not None)
    parts = LessonLayout(ex.lesson)  # the step's views outlined; presenter view shows the essential ones
    part = parts.frame

    def card(view, title, help_md, **kw):
        return pn.Card(view, header=title_with_help(title, help_md, level=4), sizing_mode="stretch_width",
                       collapsible=True, margin=(6, 4), **kw)

    sidebar = [
        part("lesson", card(LessonCard(lesson=ex.lesson, training=ex.training, pace=ex.training.pace), "Lesson",
                            help_texts.LESSON, css_classes=["gx-lesson-card"]), wrap=False),
        part("data", card(pn.Column(DataPanel.of(ex), HeldOutChoice.of(ex), sizing_mode="stretch_width"),
                          "1 · Data", help_texts.DATA), wrap=False),
        part("model", card(pn.Column(ModelPanel.of(ex), MinibatchPanel.of(ex),
                                     ModelInputsPanel.of(ex), DeepLayersInput.of(ex),
                                     MissingDataChoice.of(ex), sizing_mode="stretch_width"),
                           "2 · Model", help_texts.MODEL), wrap=False),
        # kept in sight at the sidebar's foot (style.css): Train is on the first screen, whatever the height
        part("training", card(TrainingPanel.of(ex, train=ex.train), "3 · Training", help_texts.TRAINING,
                              css_classes=["gx-train-card"]), wrap=False),
    ]
    reconstruction = ReconstructionView.of(ex)
    geodesic = GeodesicView.of(ex)
    main = [
        PageErrors.of(ex),
        part("status", StatusBar.of(ex)),  # presenter view: the lesson card shows the progress
        # the map and, beside it or (narrow screens) below it, the reconstruction and the ARD bars
        pn.FlexBox(
            part("map", pn.Column(LatentMap.of(ex, reconstruction=reconstruction, geodesic=geodesic), geodesic,
                                  sizing_mode="stretch_width", min_width=440, styles={"flex": "1 1 440px"}),
                 wrap=False),
            pn.Column(part("reconstruction", reconstruction), part("ard", ARDPlot.of(ex)), width=400,
                      styles={"flex": "0 0 400px"}),
            flex_wrap="wrap", align_items="flex-start", sizing_mode="stretch_width",
        ),
        part("pca", PCABesideView.of(ex)),
        part("dynamics", DynamicsView.of(ex)),  # shown for the models whose catalog entry has panel="dynamics"
        part("views", MultiViewView.of(ex)),  # ... panel="views"
        part("deep", DeepLayersView.of(ex)),  # ... panel="deep"
        part("objective", ObjectivePlot.of(ex)),
        part("runs", RunsView.of(ex)),  # every finished or stopped run: compare, show again, export
        RunPairView.of(ex, pair=RunPair(ex.runs)),  # two runs' maps side by side, linked row by row
        part("imputation", ImputationView.of(ex)),
        part("export", ExportPanel.of(ex)),
    ]
    template = pn.template.FastListTemplate(
        title=TITLE,
        sidebar=sidebar,
        main=main,
        header=[LessonButton(lesson=ex.lesson)],
        sidebar_width=340,
        accent_base_color="#1f5f8b",
        header_background="#1f5f8b",
        logo=_data_uri("logo.svg"),
        # Panel infers the favicon type from the URL's ending; the fragment keeps the data URI intact
        favicon=_data_uri("favicon.svg") + "#favicon.svg",
        raw_css=[_asset_text("style.css"), _asset_text("presenter.css")],
        theme_toggle=False,
        main_layout=None,
        # no web font: the page makes no request outside its own server (offline rooms, firewalls)
        design=Fast,
        font_url="",
        font=SYSTEM_FONTS,
    )
    if doc is not None:
        def _destroyed(session_context, ex=ex, log=logger):
            log.debug("Session %s destroyed", getattr(session_context, "id", "?"))
            ex.close()
            memory.release_soon()  # its arrays, once the session is gone, back to the system

        pn.state.on_session_destroyed(_destroyed)
    template.explorer = ex  # handy for tests and debugging
    return template


# Compile the numerical kernels in the background, once per process; the process's memory in few heaps;
# the imported libraries' objects out of the garbage collector's full scans; the page's threads get the
# interpreter from a training thread within a millisecond.
warmup.start()
memory.limit_arenas()
memory.freeze_imports()
interpreter.share_interpreter()

if __name__.startswith("bokeh_app") or __name__ == "__main__":
    create_app().servable(title=TITLE)
