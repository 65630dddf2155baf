"""Lesson: a guided lesson on the page -- which step is on show, and "Run this step".

A step (:class:`~gplvm_explorer.state.lesson_file.LessonStep`) loads its
sample, sets the model card's settings and the pace, and trains, through the
same methods the page's cards use.  A running fit is stopped first; the step
then starts once the page has heard that it ended.  A lesson file that cannot
be used leaves the lesson on show as it was, and ``error`` says why.
"""
from __future__ import annotations

import logging

import param

from .lesson_file import VIEWS, LessonError, LessonPlan, LessonStep, default_lesson, parse_lesson

logger = logging.getLogger(__name__)

__all__ = ["Lesson"]


class Lesson(param.Parameterized):
    """The lesson of one page (``explorer``: the page's :class:`~gplvm_explorer.explorer.Explorer`)."""

    plan = param.Parameter(default=None, doc="The LessonPlan on show.")
    index = param.Integer(default=0, bounds=(0, None), doc="The step on show (0-based).")
    shown = param.Boolean(default=False, doc="The lesson card is open.")
    presenter = param.Boolean(default=False, doc="Presenter view: large text, the essential cards only.")
    error = param.String(default="", doc="Why the last lesson file or step could not be used (plain text).")
    message = param.String(default="", doc="What Run this step did (plain text).")
    ran = param.Integer(default=-1, doc="The step whose run is the page's current run (-1: none).")

    def __init__(self, explorer, plan: LessonPlan | None = None, pca=None, **params):
        super().__init__(**params)
        self.explorer = explorer
        self.pca = pca  # the page's PCABeside, if it has one: a step naming the "pca" view shows it
        self._pending: int | None = None  # a step waiting for the running fit to stop
        self._paced: tuple | None = None  # (the page's pace before, the pace a step set) while a step's pace holds
        if plan is None:
            try:
                plan = default_lesson()
            except LessonError as exc:  # pragma: no cover - the bundled file is tested
                logger.exception("The bundled lesson cannot be read")
                self.error = str(exc)
        self.plan = plan
        explorer.training.param.watch(self._on_status, ["status"])

    # ---- what is on show --------------------------------------------------------------
    @property
    def step(self) -> LessonStep | None:
        return None if self.plan is None else self.plan.steps[self.index]

    @property
    def count(self) -> int:
        return 0 if self.plan is None else len(self.plan.steps)

    def view_names(self) -> list[str]:
        """What the page calls the step's views, in the step's order."""
        return [VIEWS[v] for v in self.step.views] if self.step is not None else []

    # ---- navigation -------------------------------------------------------------------
    def go(self, index: int) -> None:
        if self.plan is not None:
            self.index = max(0, min(int(index), self.count - 1))
            self.message = self.error = ""

    def next(self) -> None:
        self.go(self.index + 1)

    def back(self) -> None:
        self.go(self.index - 1)

    def open(self, plan: LessonPlan) -> None:
        """Show ``plan`` from its first step."""
        with param.parameterized.batch_call_watchers(self):
            self.index = 0
            self.plan = plan
            self.error = self.message = ""
            self.ran = -1
            self.shown = True

    def open_text(self, content, name: str) -> bool:
        """A lesson file's content (an upload); on failure the lesson on show stays and ``error`` says why."""
        try:
            plan = parse_lesson(content, name)
        except LessonError as exc:
            self.error = str(exc)
            return False
        self.open(plan)
        return True

    # ---- Run this step ----------------------------------------------------------------
    def run(self) -> bool:
        """Load the step's sample, set its settings and pace, and train (a running fit is stopped first)."""
        step = self.step
        if step is None:
            return False
        tr = self.explorer.training
        if tr.active:
            self._pending = self.index
            self.message = "Stopping the current run; the step starts as soon as it has ended."
            tr.stop()
            return True
        return self._run(self.index)

    def _run(self, index: int) -> bool:
        try:
            return self._start(index)
        except Exception as exc:  # noqa: BLE001 - shown in the lesson card; the page stays usable
            logger.exception("Lesson step %d failed", index + 1)
            self.error = f"Step {index + 1} failed: {type(exc).__name__}: {exc}"
            return False

    def _on_status(self, event) -> None:
        if not self.explorer.training.active and self._pending is None:
            self.message = ""  # "Step 3 is training." is over
        if self._pending is not None and not self.explorer.training.active:
            index, self._pending = self._pending, None
            # after the page has taken the ended run in (data and settings unlock on the same event)
            self.explorer.dispatcher.soon(lambda: self._run(index))

    def apply(self, index: int | None = None) -> bool:
        """Load step ``index``'s sample (default: the step on show) and set its settings and pace, without
        training; False (``error`` says why) when the page refuses them."""
        index = self.index if index is None else int(index)
        if self.plan is None or not 0 <= index < self.count:
            return False
        step = self.plan.steps[index]
        ex = self.explorer
        self.error = ""
        if step.sample is not None and not ex.data.load_sample(step.sample):
            self.error = f"Step {index + 1}: {ex.data.error or 'its sample could not be loaded.'}"
            return False
        try:
            for key, value in step.ordered_settings():  # as on the model card: each one checked in turn
                setattr(ex.settings, key, value)
        except (ValueError, TypeError) as exc:  # checked when the file was read; a changed app may refuse
            self.error = f"Step {index + 1}: a setting could not be applied ({exc})."
            return False
        if "pca" in step.views and self.pca is not None:
            self.pca.shown = True
        pace = ex.training.pace
        if self._paced is not None and pace.rate == self._paced[1]:
            pace.rate = self._paced[0]  # the last step's own pace ends with it, unless changed by hand since
        self._paced = None
        if step.pace is not None:
            self._paced = (pace.rate, step.pace)
            pace.rate = step.pace
        return True

    def _start(self, index: int) -> bool:
        if not self.apply(index):
            return False
        ex = self.explorer
        if not ex.train():
            self.error = f"Step {index + 1} could not train: {ex.training.message}"
            return False
        self.ran = index
        rate = ex.training.pace.rate
        self.message = f"Step {index + 1} is training" + (f" at {rate:g} iterations per second." if rate else ".")
        return True
