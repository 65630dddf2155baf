"""Sidebar cards (Data, Model, Training), the status bar and the page's error banner."""
from __future__ import annotations

import numpy as np
import panel as pn
import param

from ..catalog import CATALOG, INITS, LIKELIHOODS, OPTIMIZERS, format_seconds
from ..catalog import spec as model_spec
from ..data.images import shape_label, square_shape
from ..explorer import Explorer
from ..serving import upload_hint, upload_widget, uploaded_file
from ..state.data import NO_LABEL, LoadedData
from ..state.latent import LatentSlice
from ..state.settings import ModelSettings
from ..state.training import TrainingRun
from ..training.events import ACTIVE, Status
from .common import (MUTED_MD, NOTE_MD, OUTLINE, SMALL_MD, STATUS_STYLES, STYLESHEET, LiveHTML, Reads, StateView,
                     escape, on_click, plain, sync)

_ACTIVE = {s.value for s in ACTIVE}

# the upload widget's refusal ("Maximum file size is 20 MB") is faint and tiny by default
_DROPPER_CSS = (".filepond--file-status .filepond--file-status-sub, .filepond--file-info .filepond--file-info-sub "
                "{ opacity: 1; font-size: .75rem; }")


def _alert_text(text: str) -> str:
    return escape(text, None, multiline=True)


class DataPanel(StateView):
    """Pick a sample or upload a file; label column, standardisation, summary, errors."""

    data = Reads(class_=LoadedData)

    def __init__(self, **params):
        super().__init__(**params)
        data = self.data
        self.sample_select = pn.widgets.Select(label="Data set (bundled sample or your file)",
                                               options=data.sample_titles(), value=data.sample,
                                               sizing_mode="stretch_width")
        sync(self.sample_select, data, "sample")
        data.param.watch(self._on_name, ["dataset"])  # the picker names the file given or uploaded
        # a FileDropper: a file over the upload limit is refused in the browser before anything is
        # sent, and accepted files travel in chunks well under the websocket's message limit
        self.file_input = self._new_dropper()
        self._dropper_slot = pn.Column(self.file_input, sizing_mode="stretch_width", margin=0)
        self.upload_hint = pn.pane.HTML(f"<p>{escape(upload_hint())}</p>", margin=(0, 10),
                                        sizing_mode="stretch_width", stylesheets=[MUTED_MD],
                                        css_classes=["gx-upload-hint"])
        self.label_select = pn.widgets.Select(label="Label column (colours only)", options=[NO_LABEL],
                                              value=NO_LABEL, sizing_mode="stretch_width", visible=False)
        sync(self.label_select, data, "label_column")
        # files: whether the rows are images, and their shape (a square number of columns asks first)
        self.image_select = pn.widgets.Select(label="Rows are images", options={"not images": "none"},
                                              value="none", sizing_mode="stretch_width", visible=False)
        self.image_select.param.watch(self._on_image_pick, "value")
        self.image_hint = pn.pane.HTML("", sizing_mode="stretch_width", stylesheets=[NOTE_MD], margin=(0, 10),
                                       css_classes=["gx-image-hint"], visible=False)
        self.image_confirm = pn.widgets.Button(label="Show as images", color="primary", **OUTLINE,
                                               sizing_mode="stretch_width", visible=False, margin=(0, 10, 6, 10))
        on_click(self.image_confirm, self._on_image_confirm)
        self._showing_image = False
        self.standardize = pn.widgets.Checkbox.from_param(data.param.standardize, label="Standardise features")
        # one line on the columns' units: why standardising is on by default, or what leaving it off does
        self.units_note = pn.pane.HTML("", sizing_mode="stretch_width", stylesheets=[NOTE_MD], margin=(0, 10),
                                       css_classes=["gx-units-note"], visible=False)
        self.summary = pn.pane.HTML("", sizing_mode="stretch_width", stylesheets=[SMALL_MD], margin=(0, 10),
                                    css_classes=["gx-summary"])
        self.warnings = pn.pane.Alert("", alert_type="warning", visible=False, sizing_mode="stretch_width")
        self.error = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width",
                                   css_classes=["gx-data-error"])
        data.param.watch(self._refresh, ["dataset", "error", "label_column", "units_note", "image_hint",
                                         "image_shape"])
        data.param.watch(self._on_locked, ["locked"])  # every Train click: only the widgets' state
        self._refresh()

    def _on_name(self, *events):
        self.sample_select.options = self.data.sample_titles()

    def _new_dropper(self):
        dropper = upload_widget(sizing_mode="stretch_width", stylesheets=[_DROPPER_CSS])
        dropper.param.watch(self._on_upload, "value")
        return dropper

    def _on_upload(self, event):
        got = uploaded_file(event.new)
        if got is None:
            return
        name, content = got
        # taken out of the dropper: the value is announced again when the dropper later reports the
        # file removed (replaced by the next one), and must not load twice; the bytes are not kept twice
        event.obj.value.pop(name, None)
        if not self.data.load_upload(content, name):
            # refused: the dropper would keep the file's green "Upload complete" tile beside the error,
            # and it cannot be told to drop it, so an empty dropper takes its place
            self.file_input = self._new_dropper()
            self._dropper_slot[:] = [self.file_input]
            self._on_locked()

    def _refresh(self, *events):
        data = self.data
        lines = data.summary_lines()
        head, rest = lines[0], lines[1:]
        self.summary.object = (f"<p><b>{escape(head)}</b></p><ul>"
                               + "".join(f"<li>{escape(line)}</li>" for line in rest) + "</ul>")
        ds = data.dataset
        warns = list(ds.warnings) if ds is not None else []
        self.warnings.object = "\n".join(f"- {escape(w, 400)}" for w in warns)
        self.warnings.visible = bool(warns)
        self.units_note.object = f"<p>{escape(data.units_note)}</p>" if data.units_note else ""
        self.units_note.visible = bool(data.units_note)
        self.error.object = _alert_text(data.error)
        self.error.visible = bool(data.error)
        opts = list(data.param.label_column.objects)
        self.label_select.options = opts
        self.label_select.value = data.label_column if data.label_column in opts else NO_LABEL
        self.label_select.visible = data.source == "upload" and len(opts) > 1
        self._show_image_options()
        self._on_locked()

    def _show_image_options(self) -> None:
        data = self.data
        choices = data.image_choices()
        self._showing_image = True
        try:
            self.image_select.options = choices or {"not images": "none"}
            self.image_select.value = data.image_shape if data.image_shape in choices.values() else "none"
        finally:
            self._showing_image = False
        self.image_select.visible = bool(choices)
        self.image_hint.object = f"<p>{escape(data.image_hint)}</p>" if data.image_hint else ""
        self.image_hint.visible = self.image_confirm.visible = bool(data.image_hint)
        shape = square_shape(data.dataset.file_columns or 0) if data.image_hint else None
        if shape is not None:
            self.image_confirm.label = f"Show as {shape_label(shape)} images"

    def _on_image_pick(self, event) -> None:
        if not self._showing_image:
            self.data.image_shape = event.new

    def _on_image_confirm(self, event) -> None:
        ds = self.data.dataset
        shape = None if ds is None else square_shape(ds.file_columns or 0)
        if shape is not None:
            self.data.image_shape = "{}x{}".format(*shape)

    def _on_locked(self, *events):
        for w in (self.sample_select, self.file_input, self.label_select, self.standardize, self.image_select,
                  self.image_confirm):
            w.disabled = self.data.locked

    def __panel__(self):
        return pn.Column(
            self.sample_select,
            pn.pane.HTML("<div class='gx-or'>or upload CSV / TSV / NPY / NPZ / Parquet</div>", margin=(0, 10),
                         stylesheets=[STYLESHEET]),
            self._dropper_slot, self.upload_hint, self.label_select, self.standardize, self.units_note,
            self.image_select, self.image_hint, self.image_confirm, self.error, self.summary,
            self.warnings, sizing_mode="stretch_width",
        )


class ModelPanel(StateView):
    """Model kind, kernel, likelihood, Q, M, initialisation, optimiser, iterations, seed."""

    settings = Reads(class_=ModelSettings)

    def __init__(self, **params):
        super().__init__(**params)
        s = self.settings
        inv = lambda d: {v: k for k, v in d.items()}  # noqa: E731
        self.model = pn.widgets.Select(label="Model", options={m.display_name: k for k, m in CATALOG.items()},
                                       value=s.model, sizing_mode="stretch_width")
        sync(self.model, s, "model")
        self.kernel = pn.widgets.Select(label="Kernel", options=s.kernel_options(), value=s.kernel,
                                        sizing_mode="stretch_width")
        sync(self.kernel, s, "kernel")
        # the noise model: proposed from the data's values (one line says why), hidden for the models
        # that take only the Gaussian one (the line says which can)
        self.likelihood = pn.widgets.Select(label="Likelihood (noise model)", options=inv(LIKELIHOODS),
                                            value=s.likelihood, sizing_mode="stretch_width",
                                            css_classes=["gx-likelihood"])
        sync(self.likelihood, s, "likelihood")
        self.likelihood_note = pn.pane.HTML("", sizing_mode="stretch_width", stylesheets=[NOTE_MD], margin=(0, 10),
                                            css_classes=["gx-likelihood-note"], visible=False)
        self.bias = pn.widgets.Checkbox.from_param(s.param.bias, label="+ bias")
        self.white = pn.widgets.Checkbox.from_param(s.param.white, label="+ white noise")
        self.latent_dim = pn.widgets.IntSlider.from_param(s.param.latent_dim, label="Latent dimensions Q",
                                                          sizing_mode="stretch_width")
        self.num_inducing = pn.widgets.IntInput.from_param(s.param.num_inducing, label="Inducing points M",
                                                           sizing_mode="stretch_width")
        self.init = pn.widgets.Select(label="Initialisation", options=inv(INITS), value=s.init,
                                      sizing_mode="stretch_width")
        sync(self.init, s, "init")
        self.optimizer = pn.widgets.Select(label="Optimiser", options=inv(OPTIMIZERS), value=s.optimizer,
                                           sizing_mode="stretch_width")
        sync(self.optimizer, s, "optimizer")
        self.max_iters = pn.widgets.IntInput.from_param(s.param.max_iters, label="Iterations", step=50,
                                                        sizing_mode="stretch_width",
                                                        description="The most iterations; with 'until converged' "
                                                                    "the run ends sooner, once the bound has "
                                                                    "converged. Raise it for a longer run.")
        self.until_converged = pn.widgets.Checkbox.from_param(s.param.until_converged, label="until converged",
                                                              css_classes=["gx-until-converged"])
        self.seed = pn.widgets.IntInput.from_param(s.param.seed, label="Seed", sizing_mode="stretch_width")
        self.notes = pn.pane.Alert("", alert_type="info", visible=False, sizing_mode="stretch_width")
        self.errors = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width",
                                    css_classes=["gx-model-errors"])
        s.param.watch(self._refresh, ["model", "errors", "notes", "likelihood", "likelihood_reason"])
        s.param.watch(self._on_locked, ["locked"])  # every Train click: only the widgets' state
        self._refresh()

    def _refresh(self, *events):
        s = self.settings
        opts = s.kernel_options()
        if set(self.kernel.options.values()) != set(opts.values()):
            self.kernel.options = opts
        if self.kernel.value != s.kernel:
            self.kernel.value = s.kernel
        self.num_inducing.visible = s.spec.uses_inducing
        optimizers = {OPTIMIZERS[o]: o for o in s.spec.optimizers}
        if set(self.optimizer.options.values()) != set(optimizers.values()):
            self.optimizer.options = optimizers
        if self.optimizer.value != s.optimizer:
            self.optimizer.value = s.optimizer
        self.latent_dim.visible = "layers" not in s.spec.inputs  # models with layers give their dims as text
        self.likelihood.visible = s.takes_likelihood()  # else the note says which models take one
        note = s.likelihood_note()
        self.likelihood_note.object = f"<p>{escape(note, None)}</p>" if note else ""
        self.likelihood_note.visible = bool(note)
        self.notes.object = _alert_text(" ".join(s.notes))
        self.notes.visible = bool(s.notes)
        errs = [e for e in s.errors if e != "Load data first."]
        self.errors.object = _alert_text(" ".join(errs))
        self.errors.visible = bool(errs)
        self._on_locked()

    def _on_locked(self, *events):
        s = self.settings
        for w in (self.model, self.kernel, self.bias, self.white, self.latent_dim, self.num_inducing,
                  self.init, self.optimizer, self.max_iters, self.until_converged, self.seed):
            w.disabled = s.locked
        self.likelihood.disabled = s.locked

    def __panel__(self):
        return pn.Column(
            self.model, self.likelihood, self.likelihood_note, self.kernel,
            pn.Row(self.bias, self.white, sizing_mode="stretch_width"),
            self.latent_dim, self.num_inducing,
            pn.Row(self.init, self.optimizer, sizing_mode="stretch_width"),
            pn.Row(self.max_iters, self.seed, sizing_mode="stretch_width"), self.until_converged,
            self.notes, self.errors, sizing_mode="stretch_width",
        )


class TrainingPanel(StateView):
    """Train / Pause / Resume / Stop and the training messages."""

    settings = Reads(class_=ModelSettings)
    training = Reads(class_=TrainingRun)
    train = param.Callable(doc="Train with the page's data and settings (Explorer.train).")

    def __init__(self, **params):
        super().__init__(**params)
        self.train_btn = pn.widgets.Button(label="▶ Train", color="primary", sizing_mode="stretch_width",
                                           css_classes=["gx-train"])
        self.pause_btn = pn.widgets.Button(label="❚❚ Pause", color="default", sizing_mode="stretch_width",
                                           disabled=True)
        self.stop_btn = pn.widgets.Button(label="■ Stop", color="danger", sizing_mode="stretch_width",
                                          disabled=True, **OUTLINE)
        on_click(self.train_btn, lambda e: self.train())
        on_click(self.pause_btn, self._on_pause)
        on_click(self.stop_btn, lambda e: self.training.stop())
        self.message = pn.pane.Alert("", alert_type="info", visible=False, sizing_mode="stretch_width",
                                     css_classes=["gx-train-message"])
        self.training.param.watch(self._refresh, ["status", "message", "message_kind"])
        self.settings.param.watch(self._refresh, ["errors"])
        self._refresh()

    def _on_pause(self, event):
        tr = self.training
        if tr.status == Status.PAUSED.value:
            tr.resume()
        else:
            tr.pause()

    def _refresh(self, *events):
        st = self.training.status
        self.train_btn.disabled = st in _ACTIVE or bool(self.settings.errors)
        controllable = st in ("queued", "starting", "running", "paused")
        self.pause_btn.disabled = not controllable
        self.pause_btn.label = "▶ Resume" if st == "paused" else "❚❚ Pause"
        self.stop_btn.disabled = not controllable
        self.message.alert_type = self.training.message_kind
        self.message.object = _alert_text(self.training.message)
        self.message.visible = bool(self.training.message)

    def __panel__(self):
        return pn.Column(self.train_btn, pn.Row(self.pause_btn, self.stop_btn, sizing_mode="stretch_width"),
                         self.message, sizing_mode="stretch_width")


def _fmt(x, digits=6) -> str:
    if x is None:
        return "–"
    x = float(x)
    return f"{x:.{digits}g}" if abs(x) < 1e5 else f"{x:.{digits}e}"


def _duration(seconds: float) -> str:
    m, s = divmod(int(round(max(0.0, seconds))), 60)
    return f"{m:d}:{s:02d}"


def _epochs(tr) -> tuple[float, float] | None:
    """(epochs done, epochs in all) of a minibatch model's run, else None."""
    cfg, ds = tr.config, tr.dataset
    if cfg is None or ds is None or not cfg.spec.minibatch:
        return None
    n = max(1, int(ds.n))
    per = min(max(1, int(cfg.batch_size)), n) / n
    return tr.iteration * per, tr.max_iters * per


def _rule(tr):
    """The run's convergence rule (engine.Convergence), or None."""
    return tr.config.convergence() if getattr(tr, "config", None) is not None else None


def _converging(tr) -> str:
    """How close the run is to its convergence rule (plain text; '' without a rule or a full window)."""
    rule, change = _rule(tr), getattr(tr, "change", float("nan"))
    if rule is None or not np.isfinite(change) or tr.objective is None:
        return ""
    scale = max(abs(float(tr.objective)), 1.0)
    return (f"converging: +{_fmt(change * scale, 2)} nats over the last {rule.window} iterations "
            f"(ends below {_fmt(rule.rtol * scale, 2)})")


def _eta(tr) -> str:
    """Time to the cap at the (steady) rate shown; '≤' when the rule may end the run sooner."""
    if not tr.rate > 0:
        return "ETA –"
    left = (tr.max_iters - tr.iteration) / tr.rate
    return f"ETA ≤ {_duration(left)}" if _rule(tr) is not None else f"ETA {_duration(left)}"


def progress_text(tr) -> str:
    """One line about the run (plain text)."""
    st = tr.status
    if st == "idle":
        return "Data loaded. Press Train."
    if st == "queued":
        return f"Waiting in the server's queue: number {tr.queue_position}."
    if st == "starting":
        return "Building the model…"
    name = tr.objective_name
    if st == "finished" and getattr(tr, "restored", ""):
        return (f"{tr.restored} shown again from the runs table · {name} {_fmt(tr.objective)} · "
                "press Train to fit the settings on the model card")
    if st == "finished" and tr.opened:
        return (f"Saved model {tr.opened} opened · {name} {_fmt(tr.objective)} · explore it, "
                "or press Train to fit again")
    if st in ("finished", "stopped"):
        word = "Finished" if st == "finished" else "Stopped"
        if st == "finished" and getattr(tr, "end_reason", "") == "converged":
            word = "Converged"
        if tr.iteration == 0 and tr.objective is None:
            return f"{word} before the first iteration."
        epochs = _epochs(tr)
        passes = f" ({epochs[0]:.2f} epochs)" if epochs is not None else ""
        cap = " (the most allowed: raise Iterations to go on)" if (
            st == "finished" and getattr(tr, "end_reason", "") == "max_iters" and _rule(tr) is not None) else ""
        if st == "finished" and getattr(tr, "end_reason", "") == "stalled":
            cap = " (no step the optimiser tried improved the " + name + ": more iterations would not help)"
        return (f"{word} after {tr.iteration} iterations{passes}{cap} · {name} {_fmt(tr.objective)} · "
                f"{tr.rate:.1f} it/s · {_duration(tr.elapsed)}")
    if st == "failed":
        return "Training failed; the page stays usable. Change the settings and train again."
    if tr.objective is None:
        return "Training… waiting for the first evaluation."
    epochs = _epochs(tr)
    if epochs is not None:  # minibatch models: passes over the rows, and the time left
        done, total = epochs
        return (f"Epoch {done:.2f} / {total:.2f} (iteration {tr.iteration} / {tr.max_iters}) · {name} "
                f"(minibatch estimate) {_fmt(tr.objective)} · {tr.rate:.1f} it/s · {_eta(tr)} · "
                f"{_duration(tr.elapsed)} elapsed")
    converging = _converging(tr)
    of = f"of at most {tr.max_iters}" if _rule(tr) is not None else f"/ {tr.max_iters}"
    return " · ".join(part for part in (
        f"Iteration {tr.iteration} {of}", f"{name} {_fmt(tr.objective)}", converging,
        f"{tr.rate:.1f} it/s", _eta(tr), f"{_duration(tr.elapsed)} elapsed") if part)


def proposal_text(settings) -> str:
    """The catalog's proposal for big data in one line of the status bar (plain text; '' when none): the
    proposal itself sits in the Model card, often below the sidebar's first screen."""
    key = settings.suggestion
    if not key:
        return ""
    mine, theirs = settings.estimate(), settings.estimate(key)
    if mine is None or theirs is None:
        return ""
    return (f"Big data: the {settings.spec.short_name} would take {format_seconds(mine.seconds)} until converged; "
            f"the Model card proposes {model_spec(key).short_name} ({format_seconds(theirs.seconds)}).")


def stale_text(trained, loaded) -> str:
    """Why the views show another data set's model (plain text): ``trained`` and ``loaded`` are Datasets."""
    old = plain(trained.name, 60)
    new = plain(loaded.name, 60) if loaded is not None else "new data"
    return f"The map and plots show the model of {old}; press Train to fit {new}."


class StatusBar(StateView):
    """Progress bar with iteration, objective, iterations per second, elapsed time."""

    data = Reads(class_=LoadedData)
    settings = Reads(class_=ModelSettings)
    training = Reads(class_=TrainingRun)
    page = Reads(class_=Explorer, doc="The page's own state (its warming up, summary, errors).")

    def __init__(self, **params):
        super().__init__(**params)
        self.bar = pn.indicators.Progress(value=0, max=1, bar_color="primary", sizing_mode="stretch_width",
                                          height=12, margin=(6, 10, 2, 10))
        self.text = LiveHTML("", sizing_mode="stretch_width", stylesheets=[STYLESHEET], margin=(0, 10))
        self.training.param.watch(self._refresh, ["status", "iteration", "max_iters", "objective", "queue_position"])
        self.page.param.watch(self._refresh, ["warming_up", "result_source"])
        self.data.param.watch(self._refresh, ["dataset"])
        self.settings.param.watch(self._refresh, ["suggestion", "notes"])
        self._refresh()

    def _refresh(self, *events):
        tr = self.training
        st = tr.status
        self.bar.max = max(1, tr.max_iters)
        self.bar.value = -1 if st in ("starting", "queued") else int(min(tr.iteration, self.bar.max))
        self.bar.bar_color = {"failed": "danger", "finished": "success", "stopped": "secondary",
                              "paused": "warning", "queued": "warning"}.get(st, "primary")
        badge = {"idle": "ready", "running": "training"}.get(st, st)
        warm = (" <span class='gx-warm'>· Compiling numerical kernels… (once per server start)</span>"
                if self.page.warming_up else "")
        stale = ""
        if self.page.result_is_stale and st not in ACTIVE:
            stale = f" <span class='gx-stale'>· {escape(stale_text(tr.result.dataset, self.data.dataset))}</span>"
        proposal = proposal_text(self.settings) if st == "idle" else ""
        if proposal:
            proposal = f" <span class='gx-proposal'>· {escape(proposal)}</span>"
        self.text.object = (f"<span class='gx-badge gx-{st}'>{badge}</span> "
                            f"<span class='gx-progress-text'>{escape(progress_text(tr))}</span>{stale}"
                            f"{proposal}{warm}")

    def __panel__(self):
        return pn.Column(self.text, self.bar, sizing_mode="stretch_width", styles=STATUS_STYLES)


class PageErrors(StateView):
    """Unexpected errors in page updates: logged on the server and shown here."""

    latent = Reads(class_=LatentSlice)
    page = Reads(class_=Explorer, doc="The page's own state (its warming up, summary, errors).")

    def __init__(self, **params):
        super().__init__(**params)
        self.alert = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width",
                                   css_classes=["gx-page-error"])
        self.page.param.watch(self._refresh, ["page_error"])
        self.latent.param.watch(self._refresh, ["error"])

    def _refresh(self, *events):
        text = " ".join(t for t in (self.page.page_error, self.latent.error) if t)
        self.alert.object = _alert_text(text)
        self.alert.visible = bool(text)

    def __panel__(self):
        return self.alert
