"""Small helpers shared by the views."""
from __future__ import annotations

import logging
from pathlib import Path

import panel as pn
import param

from ..text import escape, plain  # noqa: F401  (re-exported for the views)

logger = logging.getLogger(__name__)

ACCENT = "#1f5f8b"


class Reads(param.ClassSelector):
    """A view's parameter holding one state object it reads (named as the page's part it is: ``data``,
    ``settings``, ``training``, ``latent``, ...)."""


class StateView(pn.viewable.Viewer):
    """A thin view of the state objects it reads (its `Reads` parameters), never of the whole page."""

    @classmethod
    def reads(cls) -> tuple:
        """The names of the state objects this view reads."""
        return tuple(name for name, p in cls.param.objects("existing").items() if isinstance(p, Reads))

    @classmethod
    def of(cls, page, **params):
        """This view of ``page``'s state objects (its attributes named as the view's `reads`; a view of the
        page's own state, e.g. its summary, reads ``page`` itself); ``params`` give the view's other parameters."""
        parts = {name: page if name == "page" else getattr(page, name) for name in cls.reads() if name not in params}
        return cls(**parts, **params)


def _read_css() -> str:
    try:
        return (Path(__file__).resolve().parents[2] / "assets" / "style.css").read_text()
    except OSError:  # pragma: no cover - assets missing from an install
        return ""


#: The app's stylesheet; components render in shadow DOM, so panes that use
#: its classes get it through ``stylesheets=[STYLESHEET]``.
STYLESHEET = _read_css()

#: Outline buttons: ``variant`` in Panel >= 1.10, ``button_style`` before.
OUTLINE = {"variant": "outline"} if "variant" in pn.widgets.Button.param else {"button_style": "outline"}

#: Stylesheets for Markdown panes (their content lives in the pane's shadow root).
SMALL_MD = "p, li { font-size: .88rem; line-height: 1.4; margin: 0 0 .25em 0; } ul { padding-left: 18px; margin: 2px 0; }"
MUTED_MD = "p { font-size: .86rem; color: #5b6b7c; margin: 2px 0; }"
#: A one-line note under a control (e.g. why an option is on by default).
NOTE_MD = "p { font-size: .82rem; color: #1f5f8b; margin: 0 0 4px 0; line-height: 1.3; }"
STATUS_STYLES = {"background": "#f6f8fb", "border": "1px solid #e2e8f0", "border-radius": "10px",
                 "padding": "4px 2px"}

#: Inline styles of the white "cards" in the main area.
PANEL_STYLES = {"background": "#ffffff", "border": "1px solid #e2e8f0", "border-radius": "10px",
                "box-shadow": "0 1px 2px rgba(16,24,40,.05)", "padding": "2px 6px 6px 6px"}


def on_click(button: pn.widgets.Button, action) -> None:
    """``button.on_click(action)``, with the page changes ``action(event)`` makes held and sent together.

    Panel runs a click that reaches the server while a widget's change is still waiting for its
    debounce (a value typed and Train clicked at once) as a next-tick callback *without* the
    document lock; a direct change to a Bokeh model there raises in Bokeh's session. Held changes
    are written by Panel itself, locked or not.
    """

    def clicked(event):
        with pn.io.unlocked():
            action(event)

    button.on_click(clicked)


def sync(widget, vm: param.Parameterized, name: str, wattr: str = "value", to_widget=None, to_vm=None):
    """Keep ``widget.<wattr>`` and ``vm.<name>`` equal, both ways, without loops."""
    to_widget = to_widget or (lambda v: v)
    to_vm = to_vm or (lambda v: v)
    busy = {"flag": False}

    def w2v(event):
        if busy["flag"]:
            return
        busy["flag"] = True
        try:
            setattr(vm, name, to_vm(event.new))
        finally:
            busy["flag"] = False

    def v2w(event):
        if busy["flag"]:
            return
        busy["flag"] = True
        try:
            setattr(widget, wattr, to_widget(event.new))
        finally:
            busy["flag"] = False

    widget.param.watch(w2v, wattr)
    vm.param.watch(v2w, name)
    return widget


def title_with_help(title: str, help_md: str, level: int = 3) -> pn.Row:
    """A heading with a small (i) tooltip holding the explanation."""
    return pn.Row(
        pn.pane.HTML(f"<h{level} class='gx-title'>{title}</h{level}>", margin=(0, 0, 0, 5),
                     stylesheets=[STYLESHEET]),
        pn.widgets.TooltipIcon(value=help_md, margin=(12, 0, 0, 2)),
        align="center",
        sizing_mode="stretch_width",
        css_classes=["gx-title-row"],
    )


def help_card(help_md: str, title: str = "What am I looking at?") -> pn.Card:
    return pn.Card(
        pn.pane.Markdown(help_md, sizing_mode="stretch_width", stylesheets=[SMALL_MD]),
        title=title,
        collapsed=True,
        sizing_mode="stretch_width",
        css_classes=["gx-help-card"],
        margin=(2, 5),
    )


def _sheet_keys(sheets) -> list:
    return [s if isinstance(s, str) else (type(s).__name__, getattr(s, "url", None), getattr(s, "css", None))
            for s in sheets or []]


class LiveHTML(pn.pane.HTML):
    """An HTML pane for text that changes often (the status line, click and hover readouts).

    Panel sends a pane's stylesheets again with every text update, as new
    Bokeh models, and Bokeh then walks every model of the page (hundreds of
    them) to find the new ones: tenths of a second per line of text, on the
    page's thread.  This pane sends them only when its ``stylesheets`` changed.
    """

    def __init__(self, object=None, **params):
        super().__init__(object, **params)
        self._sheets_rendered = _sheet_keys(self.stylesheets)
        self._sheets_sent: dict = {}  # per rendered model (ref): the stylesheets it has

    def _update(self, ref, model) -> None:
        if self.enable_streaming:  # pragma: no cover - not used by the app
            return super()._update(ref, model)
        self._raw_html = None
        props = self._get_properties(model.document)
        keys = _sheet_keys(self.stylesheets)
        if keys == self._sheets_sent.get(ref, self._sheets_rendered):
            props.pop("stylesheets", None)
        else:
            self._sheets_sent[ref] = keys
        model.update(**props)


#: At most this many features get their names on a profile's axis; more get numbered ticks.
NAMED_FEATURES = 16


def label_feature_axis(axis, names, d: int, width: int = 20) -> None:
    """Ticks of a feature-index axis: every feature by name for a few, numbers for many.

    Every index 0..d-1 gets an explicit label, so labels of an earlier data set
    can never survive in the browser (an emptied override dict did not always
    reach it, and the old names stayed on the new ticks).
    """
    from bokeh.models import BasicTicker, FixedTicker

    names = list(names or [])
    d = int(d)
    if d <= NAMED_FEATURES and len(names) == d:
        axis.ticker = FixedTicker(ticks=list(range(d)))
        axis.major_label_overrides = {i: plain(n, width) for i, n in enumerate(names)}
        axis.major_label_orientation = 0.8
    else:
        axis.ticker = FixedTicker(ticks=list(range(d))) if d <= NAMED_FEATURES else BasicTicker()
        axis.major_label_overrides = {i: str(i) for i in range(d)}
        axis.major_label_orientation = "horizontal"
