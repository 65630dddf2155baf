"""Lesson files: a guided lesson as data (JSON), read and checked here.

The format (``docs/lessons.md`` describes it for lecturers)::

    {"format": "gplvm-explorer-lesson/1",          optional; if given, this value
     "title": "From PCA to deep GPs",
     "steps": [{"title": "...", "text": "...",       text: paragraphs split by blank lines
                "sample": "rotating-glyph",          optional: a bundled sample (absent: the data on the page)
                "settings": {"model": "gplvm", ...}, optional: model-card settings (ModelSettings' names)
                "pace": 5,                           optional: iterations per second (0: real time;
                                                     absent: the page's own pace)
                "views": ["map", "ard"]}]}           optional: the views the step is about

Everything is checked when the file is read, so a lecturer hears of a typo
before the lecture: :class:`LessonError` names the step and the field.
Settings that depend on the data (more inducing points than rows, too big
for the server) are checked when the step runs, as on the model card.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..data import samples
from .settings import ModelSettings

__all__ = ["FORMAT", "LessonError", "LessonPlan", "LessonStep", "VIEWS", "default_lesson", "load_lesson",
           "parse_lesson", "SETTING_NAMES", "DEFAULT_LESSON"]

FORMAT = "gplvm-explorer-lesson/1"
DEFAULT_LESSON = Path(__file__).resolve().parent.parent / "lessons" / "default.json"
#: The largest lesson file read (bytes): a lesson is text, not data.
MAX_BYTES = 1_000_000
MAX_STEPS = 200
MAX_TEXT = 5000
MAX_TITLE = 200
MAX_PACE = 100.0

#: Views a step may point at: key -> what the page calls it.
VIEWS = {
    "map": "the latent map",
    "reconstruction": "the reconstruction",
    "ard": "the ARD bars",
    "objective": "the objective curve",
    "dynamics": "the dynamics panel",
    "views": "the views panel (MRD)",
    "deep": "the layers panel",
    "imputation": "the missing-values panel",
    "pca": "the PCA map beside the model's",  # naming it also shows it
}

#: The settings a step may give: the model card's (ModelSettings' own parameter names).
SETTING_NAMES = ModelSettings.CHOSEN
_STEP_FIELDS = {"title", "text", "sample", "settings", "pace", "views"}
_TOP_FIELDS = {"format", "title", "steps"}


class LessonError(ValueError):
    """A lesson file that cannot be used; the message names the step and the field."""


@dataclass(frozen=True)
class LessonStep:
    title: str
    text: str
    sample: str | None = None  # a bundled sample's name; None: the data on the page
    settings: dict = field(default_factory=dict)  # ModelSettings names -> values, applied model first
    pace: float | None = None  # iterations per second while the step trains; 0: real time; None: the page's
    views: tuple = ("map",)  # keys of VIEWS

    def ordered_settings(self) -> list[tuple[str, object]]:
        """(name, value) in the order to apply them: the model first (it may switch the kernel and the
        optimiser), then the kernel, then the rest."""
        first = [k for k in ("model", "kernel") if k in self.settings]
        return [(k, self.settings[k]) for k in first] + [(k, v) for k, v in self.settings.items() if k not in first]


@dataclass(frozen=True)
class LessonPlan:
    title: str
    steps: tuple
    source: str = ""  # the file it came from (a name, for messages)


def _text(value, where: str, limit: int, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise LessonError(f"{where} must be a non-empty text, got {_show(value)} instead.")
    if len(value) > limit:
        raise LessonError(f"{where} is {len(value)} characters long; the most allowed is {limit}.")
    return value.strip()


def _show(value) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_settings(raw, where: str) -> dict:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise LessonError(f"{where}: 'settings' must be an object of model-card settings, got {_show(raw)} instead.")
    unknown = [k for k in raw if k not in SETTING_NAMES]
    if unknown:
        raise LessonError(f"{where}: unknown setting {unknown[0]!r}. Known settings: {', '.join(SETTING_NAMES)}.")
    step = LessonStep("", "", settings=dict(raw))
    probe = ModelSettings()
    for key, value in step.ordered_settings():
        if isinstance(value, bool) and not isinstance(getattr(probe, key), bool):
            raise LessonError(f"{where}: bad value for {key}: {_show(value)}.")
        try:
            setattr(probe, key, value)
        except (ValueError, TypeError) as exc:
            reason = str(exc).split("\n")[0]
            raise LessonError(f"{where}: bad value for {key}: {_show(value)} ({reason})") from None
    return dict(raw)


def _check_step(raw, i: int, sample_names: list[str]) -> LessonStep:
    where = f"Step {i + 1}"
    if not isinstance(raw, dict):
        raise LessonError(f"{where} must be an object with 'title' and 'text', got {_show(raw)} instead.")
    unknown = sorted(set(raw) - _STEP_FIELDS)
    if unknown:
        raise LessonError(f"{where}: unknown field {unknown[0]!r}. A step has: {', '.join(sorted(_STEP_FIELDS))}.")
    title = _text(raw.get("title"), f"{where}: 'title'", MAX_TITLE)
    text = _text(raw.get("text"), f"{where}: 'text'", MAX_TEXT)
    sample = raw.get("sample")
    if sample is not None and sample not in sample_names:
        raise LessonError(f"{where}: unknown sample {_show(sample)}. Bundled samples: {', '.join(sample_names)}.")
    pace = raw.get("pace")
    if pace is not None and (isinstance(pace, bool) or not isinstance(pace, (int, float))
                             or not math.isfinite(pace) or not 0 <= pace <= MAX_PACE):
        raise LessonError(f"{where}: 'pace' must be a number of iterations per second from 0 (real time) "
                          f"to {MAX_PACE:g}, got {_show(pace)} instead.")
    views = raw.get("views", ["map"])
    if not isinstance(views, list) or not all(isinstance(v, str) for v in views):
        raise LessonError(f"{where}: 'views' must be a list of view names, got {_show(views)} instead.")
    bad = [v for v in views if v not in VIEWS]
    if bad:
        raise LessonError(f"{where}: unknown view {bad[0]!r}. Views: {', '.join(VIEWS)}.")
    settings = _check_settings(raw.get("settings"), where)
    return LessonStep(title, text, sample, settings, None if pace is None else float(pace), tuple(views))


def parse_lesson(content, name: str = "lesson") -> LessonPlan:
    """The lesson in ``content`` (JSON text or bytes); LessonError says what is wrong with it."""
    if isinstance(content, (bytes, bytearray)):
        if len(content) > MAX_BYTES:
            raise LessonError(f"{name} is {len(content):,} bytes; a lesson file may be at most {MAX_BYTES:,}.")
        try:
            content = bytes(content).decode("utf-8")
        except UnicodeDecodeError:
            raise LessonError(f"{name} is not UTF-8 text; a lesson file is JSON.") from None
    elif len(content) > MAX_BYTES:
        raise LessonError(f"{name} is {len(content):,} characters; a lesson file may be at most {MAX_BYTES:,}.")
    try:
        raw = json.loads(content)
    except json.JSONDecodeError as exc:
        raise LessonError(f"{name} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}.") from None
    if not isinstance(raw, dict):
        raise LessonError(f"{name}: a lesson file is a JSON object with 'title' and 'steps', "
                          f"got {type(raw).__name__} instead.")
    unknown = sorted(set(raw) - _TOP_FIELDS)
    if unknown:
        raise LessonError(f"{name}: unknown field {unknown[0]!r}. A lesson has: {', '.join(sorted(_TOP_FIELDS))}.")
    if "format" in raw and raw["format"] != FORMAT:
        raise LessonError(f"{name}: format {_show(raw['format'])} is not one this version reads ({FORMAT!r}).")
    title = _text(raw.get("title"), f"{name}: 'title'", MAX_TITLE)
    steps = raw.get("steps")
    if not isinstance(steps, list) or not steps:
        raise LessonError(f"{name}: 'steps' must be a non-empty list of steps, got {_show(steps)} instead.")
    if len(steps) > MAX_STEPS:
        raise LessonError(f"{name} has {len(steps)} steps; the most allowed is {MAX_STEPS}.")
    names = [s.name for s in samples()]
    try:
        parsed = tuple(_check_step(s, i, names) for i, s in enumerate(steps))
    except LessonError as exc:
        raise LessonError(f"{name}: {exc}") from None
    return LessonPlan(title, parsed, name)


def load_lesson(path) -> LessonPlan:
    """Read a lesson file from disk; LessonError (never OSError) says why it cannot be used."""
    p = Path(path).expanduser()
    try:
        if not p.is_file():
            raise LessonError(f"{p.name or p}: no such file." if not p.exists() else f"{p.name}: not a regular file.")
        size = p.stat().st_size
        if size > MAX_BYTES:
            raise LessonError(f"{p.name} is {size:,} bytes; a lesson file may be at most {MAX_BYTES:,}.")
        content = p.read_bytes()
    except OSError as exc:
        raise LessonError(f"Cannot read {p.name}: {exc.strerror or exc}.") from None
    return parse_lesson(content, p.name)


def default_lesson() -> LessonPlan:
    """The lesson that comes with the app (``gplvm_explorer/lessons/default.json``)."""
    return load_lesson(DEFAULT_LESSON)
