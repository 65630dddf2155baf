"""LoadedData: the data set on show -- a bundled sample or the user's file.

On any failure the previous data set stays loaded and ``error`` says why.
Every user string here (file name, headers, labels) is plain text; views
render it as text.
"""
from __future__ import annotations

import logging
import zlib

import numpy as np
import param

from .. import data as data_mod
from ..data import images, units
from ..text import plain
from .labels import LabelColouring, colour_labels

logger = logging.getLogger(__name__)

__all__ = ["LoadedData", "NO_LABEL", "UPLOADED_FILE"]

#: The sample-picker entry that stands for the last uploaded file.
UPLOADED_FILE = "uploaded-file"
NO_LABEL = "(none)"
_LABEL_GUESSES = ("label", "labels", "class", "target", "y", "category")


class LoadedData(param.Parameterized):
    """The current :class:`~gplvm_explorer.data.Dataset` and how it was loaded.

    The loading options a user picks (standardise, the image shape) belong to
    the data set they were picked for: the next data set starts from its own
    defaults, and picking the first one again brings its choices back.
    Standardising is on by default when the columns' spreads differ by more
    than an order of magnitude (:mod:`gplvm_explorer.data.units`);
    ``units_note`` says so.  Rows are images when the file says so (column
    names, :mod:`gplvm_explorer.data.images`) or the user picks a shape;
    ``image_hint`` asks about a square number of columns.
    """

    sample = param.Selector(default=None, objects=[], doc="Bundled sample, or UPLOADED_FILE.")
    standardize = param.Boolean(default=False, doc="Scale every feature to zero mean, unit variance "
                                                   "(per data set; see the class doc).")
    label_column = param.Selector(default=NO_LABEL, objects=[NO_LABEL], doc="Column with labels (uploads).")
    dataset = param.Parameter(default=None, doc="The current Dataset (immutable).")
    labels = param.Parameter(default=None, doc="LabelColouring of the current dataset.")
    source = param.Selector(default="sample", objects=["sample", "upload"])
    upload_name = param.String(default="")
    units_note = param.String(default="", doc="One line about the columns' units (plain text), or ''.")
    image_shape = param.String(default="none", doc="The rows' image shape ('8x8'), or 'none'; a file's "
                                                   "may be changed (the loaded data set shows its own).")
    image_hint = param.String(default="", doc="A question about a square number of columns being images, "
                                              "or '' (plain text).")
    model = param.String(default="", doc="The catalog key of the model the loaded sample is made for, or ''.")
    error = param.String(default="", doc="Last loading error; the previous data stays loaded.")
    locked = param.Boolean(default=False, doc="True while a training runs: loading is refused.")
    saved_model = param.Parameter(default=None, doc="(bytes, file name) of an uploaded saved model, "
                                                    "for the explorer to open (`gplvm_explorer.saved_model`).")

    def __init__(self, **params):
        super().__init__(**params)
        self._pending_upload: tuple[bytes, str] | None = None
        self._given = None  # (loader, name, columns) of data handed over by explore() / gplvm-explorer FILE
        self._quiet = False
        self._key = None  # which data set is loaded (see _choices)
        self._choices: dict[tuple, dict] = {}  # data set key -> the options the user picked for it
        self._setting_options = False  # the options are being set to the loaded data set's, not picked
        try:
            self._samples = list(data_mod.samples())
        except Exception as exc:  # pragma: no cover - data layer broken
            logger.exception("Could not list the bundled samples")
            self._samples = []
            self.error = f"Could not list the bundled samples: {exc}"
        self.param.sample.objects = [s.name for s in self._samples] + [UPLOADED_FILE]
        self.param.watch(self._on_sample, ["sample"])
        self.param.watch(self._on_prepare_option, ["standardize", "label_column", "image_shape"])

    # ---- what the picker shows ----------------------------------------------------------
    def sample_titles(self) -> dict:
        """Select options: title -> name (the last entry stands for the uploaded file)."""
        titles = {(s.title or s.name): s.name for s in self._samples}
        if self._given:
            mine = f"Your data: {self._given[1]}"
        else:
            mine = f"Your file: {self.upload_name}" if self.upload_name else "Your uploaded file"
        titles[mine] = UPLOADED_FILE
        return titles

    def load_default(self) -> None:
        if self._samples:
            self.sample = self._samples[0].name

    # ---- loading -------------------------------------------------------------------------
    def load_given(self, loader, name: str, columns=(), label=None, standardize: bool | None = None) -> bool:
        """Data handed over by a program (``explore(...)``, ``gplvm-explorer FILE``), not uploaded.

        ``loader(label_column, standardize)`` returns the `Dataset` (it is
        called again when the label column or standardisation changes, and
        with ``image_shape=`` (h, w) or False when the user picks an image
        shape); ``columns`` are offered as label columns; ``standardize``
        (None: the data set's default) is the program's choice. It takes the
        picker's "your file" entry; on failure the current data stays.
        """
        if not self._may_load():
            return False
        key = ("given", name)
        if standardize is not None:
            self._choices.setdefault(key, {})["standardize"] = bool(standardize)
        try:
            ds, options = self._with_options(key, _given_load(loader, label))
        except Exception as exc:
            self._fail(exc, name)
            return False
        self._pending_upload = None
        self._given = (loader, name, list(columns))
        self.upload_name = name
        self._show_in_picker(UPLOADED_FILE)
        with param.parameterized.discard_events(self):
            self.param.label_column.objects = [NO_LABEL] + [c for c in columns if c != NO_LABEL]
            self.label_column = label if label in self.param.label_column.objects else NO_LABEL
        self._set(ds, "upload", key, options)
        return True

    def load_sample(self, name: str) -> bool:
        if not self._may_load():
            return False
        key = ("sample", name)
        info = next((s for s in self._samples if s.name == name), None)
        try:
            ds, options = self._with_options(key, lambda s, img: data_mod.load_sample(name, standardize=s),
                                             by_spread=info is not None and not info.shared_units)
        except Exception as exc:
            self._fail(exc, f"sample {name!r}")
            return False
        with param.parameterized.discard_events(self):
            self.param.label_column.objects = [NO_LABEL]
            self.label_column = NO_LABEL
        self._show_in_picker(name)
        self._set(ds, "sample", key, options, model=(info.model or "") if info is not None else "")
        return True

    def load_upload(self, content: bytes, filename: str) -> bool:
        """Parse an uploaded file; on failure keep the current dataset."""
        if not self._may_load():
            return False
        if not content:
            self.error = f"{filename or 'The file'} is empty."
            return False
        from ..saved_model import is_model_file

        if is_model_file(content):  # a trained model, not data: the explorer opens it
            self.error = ""
            self.saved_model = (content, filename)
            return not self.error
        columns: list[str] = []
        if str(filename).lower().endswith((".csv", ".tsv", ".txt", ".parquet", ".pq")):
            try:
                columns = list(data_mod.csv_columns(content, filename))
            except Exception as exc:
                self._fail(exc, filename)
                return False
        label = self._guess_label(columns)
        key = ("upload", filename, len(content), zlib.crc32(content))
        try:
            ds, options = self._with_options(key, _file_load(content, filename, label))
        except Exception as exc:
            self._fail(exc, filename)
            return False
        self._pending_upload = (content, filename)
        self._given = None
        self.upload_name = filename
        self._show_in_picker(UPLOADED_FILE)
        with param.parameterized.discard_events(self):
            self.param.label_column.objects = [NO_LABEL] + columns
            self.label_column = label if label is not None else NO_LABEL
        self._set(ds, "upload", key, options)
        return True

    # ---- internals -----------------------------------------------------------------------
    def _with_options(self, key: tuple, load, by_spread: bool = True) -> tuple:
        """(Dataset, options) of the data set ``key``: ``load(standardize, image_shape)`` with the user's
        choices for it -- else standardised when its columns' spreads differ tenfold (`units`; ``by_spread``
        False: a sample whose columns share one unit), and images when the file says so."""
        chosen = self._choices.get(key, {})
        choice, image = chosen.get("standardize"), chosen.get("image_shape")
        ds = load(bool(choice), image)
        options = {"standardize": bool(choice), "automatic": choice is None, "by_spread": by_spread,
                   "image_chosen": image is not None}
        if choice is None and by_spread and units.standardise_by_default(ds):
            ds, options["standardize"] = data_mod.prepare(ds, standardize=True), True
        return ds, options

    def _may_load(self) -> bool:
        if self.locked:
            self.error = "Stop the training before loading other data."
            return False
        return True

    def _fail(self, exc: BaseException, what: str) -> None:
        if isinstance(exc, data_mod.DataError):
            self.error = f"Could not load {what}: {exc}"
        else:
            logger.exception("Unexpected error loading %s", what)
            self.error = f"Could not load {what} ({type(exc).__name__}): {exc}"

    def _set(self, ds, source: str, key: tuple, options: dict, model: str = "") -> None:
        labels: LabelColouring = colour_labels(ds.labels, ds.n, name=ds.label_name or "")
        self.error = ""
        self._key = key
        self._show_options(options, ds)
        with param.parameterized.batch_call_watchers(self):
            self.source = source
            self.labels = labels
            self.units_note = (units.spread_note(ds, options["standardize"], options["automatic"])
                               if options["by_spread"] else "")
            self.image_hint = _image_hint(ds) if source == "upload" and not options["image_chosen"] else ""
            self.model = model
            self.dataset = ds

    def _show_options(self, options: dict, ds=None) -> None:
        """The option widgets show the loaded data set's options (without loading it again)."""
        self._setting_options = True
        try:
            self.standardize = options["standardize"]
            if ds is not None:
                self.image_shape = "none" if ds.image_shape is None else "{}x{}".format(*ds.image_shape)
        finally:
            self._setting_options = False

    def image_choices(self) -> dict:
        """Label -> value of the image shapes the loaded file's columns fit ({} when none, or a sample)."""
        ds = self.dataset
        if ds is None or self.source != "upload":
            return {}
        d = ds.file_columns or ds.d
        shapes = images.shape_choices(d)
        if ds.image_shape is not None and tuple(ds.image_shape) not in shapes:
            shapes.insert(0, tuple(ds.image_shape))
        if not shapes:
            return {}
        return {"not images": "none", **{images.shape_label(s): "{}x{}".format(*s) for s in shapes}}

    def _show_in_picker(self, name: str) -> None:
        if self.sample == name:
            return
        self._quiet = True
        try:
            self.sample = name
        finally:
            self._quiet = False

    def _guess_label(self, columns):
        if self.label_column in columns and self.label_column != NO_LABEL:
            return self.label_column
        for c in columns:
            if c.strip().lower() in _LABEL_GUESSES:
                return c
        return images.column_beside_pixels(columns)  # e.g. 'digit' beside pixel_0_0 ... pixel_7_7

    def _on_sample(self, event):
        if self._quiet or not event.new:
            return
        if event.new == UPLOADED_FILE:
            if self._pending_upload is None and self._given is not None:
                loader, name, columns = self._given
                label = None if self.label_column == NO_LABEL else self.label_column
                ok = self.load_given(loader, name, columns, label)
            elif self._pending_upload is None:
                self.error = "No file uploaded yet: choose one with the upload button below."
                ok = False
            else:
                ok = self.load_upload(*self._pending_upload)
        else:
            ok = self.load_sample(event.new)
        if not ok:
            self._show_in_picker(event.old)

    def _on_prepare_option(self, event):
        if self._setting_options:
            return
        if self.locked:
            return
        key = self._key
        chosen = self._choices.setdefault(key, {})
        before = dict(chosen)
        if event.name == "standardize":  # the user's choice for this data set
            chosen["standardize"] = bool(event.new)
        elif event.name == "image_shape":
            try:
                shape = images.parse_shape(event.new)
            except ValueError as exc:
                self.error = str(exc)
                self._show_options({"standardize": self.standardize}, self.dataset)
                return
            chosen["image_shape"] = False if shape is None else shape
        label = None if self.label_column == NO_LABEL else self.label_column
        if self.source == "upload" and self._pending_upload is None and self._given is not None:
            loader, name, _ = self._given
            what, load = name, _given_load(loader, label)
        elif self.source == "upload" and self._pending_upload is not None:
            content, filename = self._pending_upload
            what, load = filename, _file_load(content, filename, label)
        elif self.sample and self.sample != UPLOADED_FILE:
            self.load_sample(self.sample)
            return
        else:
            return
        try:
            ds, options = self._with_options(key, load)
        except Exception as exc:
            self._fail(exc, what)
            self._choices[key] = before  # the data on show keep their options, and the widgets show them
            if self.dataset is not None:
                self._show_options({"standardize": self.dataset.scale is not None}, self.dataset)
            return
        self._set(ds, "upload", key, options)

    def summary_lines(self) -> list[str]:
        """Plain-text facts about the data set (the first line is its name)."""
        ds = self.dataset
        if ds is None:
            return ["No data loaded."]
        lines = [str(ds.name), f"N = {ds.n} points, D = {ds.d} features"]
        lab = self.labels
        if ds.labels is None:
            lines.append("no labels")
        elif ds.labels.dtype.kind == "f":
            lines.append(f"labels: {ds.label_name or 'label'} (continuous)")
        else:
            shown = "" if lab is None or not lab.capped else f" (colours for the {len(lab.categories) - 1} most frequent)"
            lines.append(f"labels: {ds.label_name or 'label'}, {int(np.unique(ds.labels).size)} distinct{shown}")
        if ds.image_shape is not None:
            lines.append(f"images of {ds.image_shape[0]} × {ds.image_shape[1]} pixels")
        if ds.scale is not None:
            lines.append("standardised (zero mean, unit variance)")
        lines += missing_lines(ds)
        return lines


def _given_load(loader, label):
    """``load(standardize, image_shape)`` of a program's loader (asked for an image shape only when one is chosen)."""
    def load(standardize, image_shape):
        if image_shape is None:
            return loader(label, standardize)
        return loader(label, standardize, image_shape=image_shape)
    return load


def _file_load(content: bytes, filename: str, label):
    """``load(standardize, image_shape)`` of an uploaded file."""
    def load(standardize, image_shape):
        return data_mod.load_file(content, filename, label_column=label, standardize=standardize,
                                  image_shape=image_shape)
    return load


def _image_hint(ds) -> str:
    """The question for a file whose square number of columns could be images it does not name as such."""
    if ds.image_shape is not None:
        return ""
    shape = images.square_shape(ds.file_columns or 0)
    if shape is None:
        return ""
    return f"{ds.file_columns} columns: are the rows {images.shape_label(shape)} images?"


def missing_lines(ds, limit: int = 8) -> list[str]:
    """Plain-text lines about missing cells: the total, then the count per column (the first ``limit``)."""
    if ds is None or not ds.has_missing:
        return []
    per = ds.missing_by_column()
    rows = int(ds.missing_mask.any(axis=1).sum())
    lines = [f"missing: {ds.n_missing} cell(s) in {rows} of {ds.n} rows (rows kept), in {len(per)} column(s)"]
    lines += [f"missing in {plain(name, 40)}: {count}" for name, count in per[:limit]]
    if len(per) > limit:
        lines.append(f"… and {len(per) - limit} more column(s) with missing cells")
    return lines
