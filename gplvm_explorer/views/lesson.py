"""The lesson card, the page's Lesson button, the pace control and the step's highlighted views.

Thin views of :class:`~gplvm_explorer.state.lesson.Lesson` and the training's
:class:`~gplvm_explorer.training.pace.Pace`; every action goes through their methods.
A step's text is the lecturer's: rendered as text (``**bold**`` and ``*italic*``
only), never as HTML.
"""
from __future__ import annotations

import re

import panel as pn
import param

from ..state.lesson import Lesson
from ..state.training import TrainingRun
from ..training.pace import PACE_CHOICES
from .common import OUTLINE, LiveHTML, Reads, StateView, escape, on_click, sync
from .controls import progress_text

__all__ = ["LessonCard", "LessonButton", "LessonLayout", "PaceControl", "step_html"]

_EMPHASIS = re.compile(r"\*\*(.+?)\*\*|\*(.+?)\*")
#: The outline of a view the step is about.
HIGHLIGHT = {"outline": "3px solid #e8a33d", "outline-offset": "2px", "border-radius": "10px"}
#: ... and of the others (a key left out would keep the outline the browser was given before).
PLAIN = {"outline": "none"}

_CARD_CSS = """
:host { display: block; }
.gx-lesson-count { font-size: .78rem; font-weight: 600; letter-spacing: .05em; text-transform: uppercase;
                   color: #1f5f8b; margin: 0; }
.gx-lesson-title { font-size: 1.08rem; font-weight: 700; color: #111827; margin: 2px 0 4px 0; line-height: 1.25; }
.gx-lesson-text p { font-size: .9rem; line-height: 1.45; color: #1d2733; margin: 0 0 .5em 0; }
.gx-lesson-look { font-size: .84rem; color: #8a5a00; font-weight: 600; margin: 2px 0; }
"""
_PRESENTER_CSS = """
.gx-presenting .gx-lesson-count { font-size: .95rem; color: #000; }
.gx-presenting .gx-lesson-title { font-size: 1.4rem; color: #000; }
.gx-presenting .gx-lesson-text p { font-size: 1.1rem; line-height: 1.4; color: #000; }
.gx-presenting .gx-lesson-look { font-size: 1.05rem; color: #6b3000; }
"""


def _inert(text: str) -> str:
    """``escape`` keeping the spaces at the ends (they separate the text from its emphasised words)."""
    core = escape(text.strip(), None, multiline=True)
    return (" " if text[:1].isspace() else "") + core + (" " if text[-1:].isspace() and core else "")


def step_html(text: str) -> str:
    """A step's text as inert HTML: paragraphs at blank lines, ``**bold**`` and ``*italic*``, nothing else."""
    out = []
    for para in re.split(r"\n\s*\n", text.strip()):
        parts, pos = [], 0
        for m in _EMPHASIS.finditer(para):
            parts.append(_inert(para[pos:m.start()]))
            bold, italic = m.group(1), m.group(2)
            parts.append(f"<b>{escape(bold, None)}</b>" if bold is not None else f"<i>{escape(italic, None)}</i>")
            pos = m.end()
        parts.append(_inert(para[pos:]))
        out.append("<p>" + "".join(parts) + "</p>")
    return "".join(out)


class PaceControl(pn.viewable.Viewer):
    """Real time, or a slow pace a room can follow (iterations per second)."""

    pace = param.Parameter()

    def __init__(self, **params):
        super().__init__(**params)
        self.select = pn.widgets.Select(label="Speed", options=dict(PACE_CHOICES), value=0.0,
                                        sizing_mode="stretch_width", css_classes=["gx-pace"])
        self.select.value = self._option(self.pace.rate)
        sync(self.select, self.pace, "rate", to_widget=self._option)

    def _option(self, rate: float) -> float:
        if rate not in self.select.options.values():  # a lesson's own pace: offered as it is
            self.select.options = {**PACE_CHOICES, f"{rate:g} iterations/s": rate}
        return rate

    def __panel__(self):
        return self.select


class LessonLayout:
    """The page's parts as the lesson sees them: the step's views outlined, and in presenter view only the
    essential ones shown.  ``frame(key, obj)`` wraps a part (``wrap=False``: takes the layout itself)."""

    #: Shown in presenter view (besides the step's own views).
    ESSENTIAL = ("lesson", "map", "reconstruction", "ard", "objective")

    def __init__(self, lesson: Lesson):
        self.lesson = lesson
        self._frames: dict = {}
        self._base: dict = {}
        lesson.param.watch(self._refresh, ["index", "plan", "shown", "presenter"])

    def frame(self, key: str, obj, wrap: bool = True, **kw):
        if wrap:
            kw.setdefault("sizing_mode", "stretch_width")
            obj = pn.Column(obj, margin=0, **kw)
        self._frames[key] = obj
        self._base[key] = (dict(obj.styles), list(obj.css_classes), obj.visible)
        self._refresh()
        return obj

    def highlighted(self) -> list[str]:
        step = self.lesson.step
        return [k for k in step.views if k in self._frames] if self.lesson.shown and step is not None else []

    def hidden(self) -> list[str]:
        """The parts presenter view leaves out."""
        if not self.lesson.presenter:
            return [] if self.lesson.shown else ["lesson"]
        keep = set(self.ESSENTIAL) | set(self.highlighted())
        return [k for k in self._frames if k not in keep]

    def _refresh(self, *events) -> None:
        on, off = set(self.highlighted()), set(self.hidden())
        for key, obj in self._frames.items():
            styles, classes, visible = self._base[key]
            styles = {**styles, **(HIGHLIGHT if key in on else PLAIN)}
            if obj.styles != styles:
                obj.styles = styles
            classes = classes + [f"gx-part-{key}"] + (["gx-highlighted"] if key in on else [])
            if obj.css_classes != classes:
                obj.css_classes = classes
            obj.visible = visible and key not in off


class LessonButton(pn.viewable.Viewer):
    """The page's "Lesson" button: opens and closes the lesson card."""

    lesson = param.ClassSelector(class_=Lesson)

    def __init__(self, **params):
        super().__init__(**params)
        self.button = pn.widgets.Toggle(label="Lesson", value=self.lesson.shown, width=110, margin=(10, 12),
                                        color="light", css_classes=["gx-lesson-button"],
                                        stylesheets=[".bk-btn { font-weight: 600; font-size: 1rem; }"])
        sync(self.button, self.lesson, "shown")

    def __panel__(self):
        return self.button


class LessonCard(StateView):
    """One step: its text, Back / Run this step / Next, the pace, a lesson file of one's own, presenter view."""

    lesson = Reads(class_=Lesson)
    training = Reads(class_=TrainingRun)
    pace = param.Parameter()

    def __init__(self, **params):
        super().__init__(**params)
        ls = self.lesson
        self.count = pn.pane.HTML("", margin=(4, 10, 0, 10), stylesheets=[_CARD_CSS, _PRESENTER_CSS])
        self.jump = pn.widgets.Select(options={}, sizing_mode="stretch_width", margin=(2, 10),
                                      css_classes=["gx-lesson-jump"])
        self.jump.param.watch(lambda e: ls.go(e.new) if e.new is not None else None, "value")
        self.text = pn.pane.HTML("", sizing_mode="stretch_width", margin=(0, 10), stylesheets=[_CARD_CSS, _PRESENTER_CSS],
                                 css_classes=["gx-lesson-step"])
        self.back_btn = pn.widgets.Button(label="◀ Back", color="default", **OUTLINE, sizing_mode="stretch_width",
                                          css_classes=["gx-lesson-back"])
        self.run_btn = pn.widgets.Button(label="▶ Run this step", color="primary", sizing_mode="stretch_width",
                                         css_classes=["gx-lesson-run"])
        self.next_btn = pn.widgets.Button(label="Next ▶", color="default", **OUTLINE, sizing_mode="stretch_width",
                                          css_classes=["gx-lesson-next"])
        on_click(self.back_btn, lambda e: ls.back())
        on_click(self.next_btn, lambda e: ls.next())
        on_click(self.run_btn, lambda e: ls.run())
        self.stop_btn = pn.widgets.Button(label="■ Stop", color="danger", **OUTLINE, sizing_mode="stretch_width",
                                          disabled=True, css_classes=["gx-lesson-stop"])
        on_click(self.stop_btn, lambda e: self.training.stop())
        self.training.param.watch(self._on_status, ["status"])
        # presenter view leaves the status bar out: the run's progress in one line here instead
        self.progress = LiveHTML("", sizing_mode="stretch_width", margin=(0, 10), visible=False,
                                 css_classes=["gx-lesson-progress"],
                                 stylesheets=["p { font-size: 1rem; font-weight: 600; color: #000; margin: 2px 0; }"])
        self.training.param.watch(self._on_progress, ["status", "iteration", "objective"])
        self.pace_control = PaceControl(pace=self.pace)
        self.presenter = pn.widgets.Toggle(label="Presenter view", value=ls.presenter, width=140,
                                           css_classes=["gx-presenter-toggle"])
        sync(self.presenter, ls, "presenter")
        # larger type and high contrast for the whole page (assets/presenter.css), in the browser
        self.presenter.jscallback(value="document.body.classList.toggle('gx-presenter', !!cb_obj.active)")
        self.message = pn.pane.Alert("", alert_type="info", visible=False, sizing_mode="stretch_width",
                                     css_classes=["gx-lesson-message"])
        self.error = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width",
                                   css_classes=["gx-lesson-error"])
        self.file = pn.widgets.FileInput(accept=".json", sizing_mode="stretch_width", margin=(2, 10),
                                         css_classes=["gx-lesson-file"])
        self.file.param.watch(self._on_file, "value")
        self.file_label = pn.pane.HTML("<p>Open a lesson file of your own (JSON):</p>", margin=(6, 10, 0, 10),
                                       stylesheets=["p { font-size: .8rem; color: #5b6b7c; margin: 0; }"])
        ls.param.watch(self._refresh, ["plan", "index", "error", "message", "presenter"])
        self._refresh()
        self._body = pn.Column(sizing_mode="stretch_width", css_classes=["gx-lesson"])
        ls.param.watch(self._fill, ["shown"])
        self._fill()

    def _on_status(self, *events) -> None:
        self.stop_btn.disabled = not self.training.active

    def _on_progress(self, *events) -> None:
        self.progress.visible = self.lesson.presenter
        if self.lesson.presenter:
            self.progress.object = f"<p>{escape(progress_text(self.training), None)}</p>"

    def _on_file(self, event) -> None:
        if event.new:
            self.lesson.open_text(event.new, self.file.filename or "lesson file")

    def _refresh(self, *events) -> None:
        ls = self.lesson
        step = ls.step
        wrap = "gx-presenting" if ls.presenter else "gx-lesson-normal"
        if step is None:
            self.count.object = "<p class='gx-lesson-count'>No lesson</p>"
            self.text.object = ""
        else:
            title = escape(ls.plan.title, 120)
            self.count.object = (f"<div class='{wrap}'><p class='gx-lesson-count'>{title} · "
                                 f"step {ls.index + 1} of {ls.count}</p></div>")
            look = ", ".join(ls.view_names())
            self.text.object = (f"<div class='{wrap}'><div class='gx-lesson-title'>{escape(step.title, None)}</div>"
                                f"<div class='gx-lesson-text'>{step_html(step.text)}</div>"
                                + (f"<p class='gx-lesson-look'>Look at: {escape(look, None)}</p>" if look else "")
                                + "</div>")
            options = {f"{i + 1}. {s.title}": i for i, s in enumerate(ls.plan.steps)}
            if self.jump.options != options:
                self.jump.options = options
            self.jump.value = ls.index
        self.back_btn.disabled = step is None or ls.index == 0
        self.next_btn.disabled = step is None or ls.index >= ls.count - 1
        self.run_btn.disabled = step is None
        self.message.object = escape(ls.message, None)
        self.message.visible = bool(ls.message) and not ls.error
        self.error.object = escape(ls.error, None, multiline=True)
        self.error.visible = bool(ls.error)
        big = {"font-size": "1.15rem"} if ls.presenter else {}
        sheet = (f".bk-btn {{ font-size: {'1.2rem' if ls.presenter else '.95rem'}; "
                 f"padding: {'10px 8px' if ls.presenter else '6px 8px'}; font-weight: 600; }}")
        for btn in (self.back_btn, self.run_btn, self.stop_btn, self.next_btn):
            if btn.stylesheets != [sheet]:  # new stylesheets cost the page a walk over its models: only on a change
                btn.stylesheets = [sheet]
        self.message.styles = big
        self._on_progress()

    def _fill(self, *events) -> None:
        """The card's widgets reach the page the first time the lesson opens: until then the page has
        no second file input and no second Stop button."""
        if not self.lesson.shown or len(self._body):
            return
        self._body[:] = [
            # the buttons before the text: in sight at a projector's 1280 x 720 however long the text
            self.count, self.jump,
            pn.Row(self.run_btn, sizing_mode="stretch_width", margin=(4, 6, 0, 6)),
            pn.Row(self.back_btn, self.stop_btn, self.next_btn, sizing_mode="stretch_width", margin=(0, 6)),
            self.progress, self.message, self.error, self.text,
            pn.Row(self.pace_control, self.presenter, sizing_mode="stretch_width", align="end"),
            self.file_label, self.file,
        ]

    def __panel__(self):
        return self._body
