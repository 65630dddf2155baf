"""Sidebar cards: Data, Model and Training controls."""
from __future__ import annotations

import panel as pn
import param

from ..session import INITS, KERNELS, MODELS, OPTIMIZERS
from ..viewmodel import NO_LABEL, ExplorerState
from .common import OUTLINE, SMALL_MD, STATUS_STYLES, STYLESHEET, sync


class DataPanel(pn.viewable.Viewer):
    """Pick a sample or upload a file; label column, standardisation, summary, errors."""

    vm = param.ClassSelector(class_=ExplorerState)

    def __init__(self, **params):
        super().__init__(**params)
        vm = self.vm
        self.sample_select = pn.widgets.Select(
            label="Data set (bundled sample or your file)", options=vm.sample_titles(), value=vm.sample, sizing_mode="stretch_width"
        )
        sync(self.sample_select, vm, "sample")
        self.file_input = pn.widgets.FileInput(
            accept=".csv,.tsv,.txt,.npy,.npz", multiple=False, sizing_mode="stretch_width",
            label="Upload a file",
        )
        self.file_input.param.watch(self._on_upload, "value")
        self.label_select = pn.widgets.Select(
            label="Label column (colours only)", options=list(vm.param.label_column.objects),
            value=vm.label_column, sizing_mode="stretch_width", visible=False,
        )
        sync(self.label_select, vm, "label_column")
        self.standardize = pn.widgets.Checkbox.from_param(vm.param.standardize, label="Standardise features")
        self.summary = pn.pane.Markdown(vm.data_summary_markdown(), sizing_mode="stretch_width",
                                        stylesheets=[SMALL_MD], margin=(0, 10))
        self.warnings = pn.pane.Alert("", alert_type="warning", visible=False, sizing_mode="stretch_width")
        self.error = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width",
                                   css_classes=["gx-data-error"])
        vm.param.watch(self._refresh, ["dataset", "data_error", "data_version", "train_state"])
        self._refresh()

    def _on_upload(self, event):
        if event.new is None:
            return
        self.vm.load_upload(event.new, self.file_input.filename or "upload")

    def _refresh(self, *events):
        vm = self.vm
        self.summary.object = vm.data_summary_markdown()
        ds = vm.dataset
        warns = list(getattr(ds, "warnings", []) or []) if ds is not None else []
        self.warnings.object = "\n".join(f"- {w}" for w in warns)
        self.warnings.visible = bool(warns)
        self.error.object = vm.data_error
        self.error.visible = bool(vm.data_error)
        opts = list(vm.param.label_column.objects)
        self.label_select.options = opts
        self.label_select.value = vm.label_column if vm.label_column in opts else NO_LABEL
        self.label_select.visible = vm.data_source == "upload" and len(opts) > 1
        busy = vm.training_active
        for w in (self.sample_select, self.file_input, self.label_select, self.standardize):
            w.disabled = busy

    def __panel__(self):
        return pn.Column(
            self.sample_select,
            pn.pane.HTML("<div class='gx-or'>or upload CSV / TSV / NPY / NPZ</div>", margin=(0, 10)),
            self.file_input,
            self.label_select,
            self.standardize,
            self.error,
            self.summary,
            self.warnings,
            sizing_mode="stretch_width",
        )


class ModelPanel(pn.viewable.Viewer):
    """Model kind, kernel, Q, M, initialisation, optimiser, iterations, seed."""

    vm = param.ClassSelector(class_=ExplorerState)

    def __init__(self, **params):
        super().__init__(**params)
        vm = self.vm
        inv = lambda d: {v: k for k, v in d.items()}  # noqa: E731
        self.model = pn.widgets.Select(label="Model", options=inv(MODELS), value=vm.model, sizing_mode="stretch_width")
        sync(self.model, vm, "model")
        self.kernel = pn.widgets.Select(label="Kernel", options=self._kernel_options(), value=vm.kernel,
                                        sizing_mode="stretch_width")
        sync(self.kernel, vm, "kernel")
        self.bias = pn.widgets.Checkbox.from_param(vm.param.bias, label="+ bias")
        self.white = pn.widgets.Checkbox.from_param(vm.param.white, label="+ white noise")
        self.latent_dim = pn.widgets.IntSlider.from_param(vm.param.latent_dim, label="Latent dimensions Q",
                                                          sizing_mode="stretch_width")
        self.num_inducing = pn.widgets.IntInput.from_param(vm.param.num_inducing, label="Inducing points M",
                                                           sizing_mode="stretch_width")
        self.init = pn.widgets.Select(label="Initialisation", options=inv(INITS), value=vm.init,
                                      sizing_mode="stretch_width")
        sync(self.init, vm, "init")
        self.optimizer = pn.widgets.Select(label="Optimiser", options=inv(OPTIMIZERS), value=vm.optimizer,
                                           sizing_mode="stretch_width")
        sync(self.optimizer, vm, "optimizer")
        self.max_iters = pn.widgets.IntInput.from_param(vm.param.max_iters, label="Iterations", step=50,
                                                        sizing_mode="stretch_width")
        self.seed = pn.widgets.IntInput.from_param(vm.param.seed, label="Seed", sizing_mode="stretch_width")
        self.notes = pn.pane.Alert("", alert_type="info", visible=False, sizing_mode="stretch_width")
        self.errors = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width")
        vm.param.watch(self._refresh, ["model", "config_errors", "config_notes", "train_state"])
        self._refresh()

    def _kernel_options(self):
        return {KERNELS[k]: k for k in self.vm.allowed_kernels()}

    def _refresh(self, *events):
        vm = self.vm
        opts = self._kernel_options()
        if set(self.kernel.options.values() if isinstance(self.kernel.options, dict) else self.kernel.options) != set(opts.values()):
            self.kernel.options = opts
        if self.kernel.value != vm.kernel:
            self.kernel.value = vm.kernel
        self.num_inducing.visible = vm.model != "gplvm"
        self.notes.object = " ".join(vm.config_notes)
        self.notes.visible = bool(vm.config_notes)
        errs = [e for e in vm.config_errors if e != "Load data first."]
        self.errors.object = " ".join(errs)
        self.errors.visible = bool(errs)
        busy = vm.training_active
        for w in (self.model, self.kernel, self.bias, self.white, self.latent_dim, self.num_inducing,
                  self.init, self.optimizer, self.max_iters, self.seed):
            w.disabled = busy

    def __panel__(self):
        return pn.Column(
            self.model,
            self.kernel,
            pn.Row(self.bias, self.white, sizing_mode="stretch_width"),
            self.latent_dim,
            self.num_inducing,
            pn.Row(self.init, self.optimizer, sizing_mode="stretch_width"),
            pn.Row(self.max_iters, self.seed, sizing_mode="stretch_width"),
            self.notes,
            self.errors,
            sizing_mode="stretch_width",
        )


class TrainingPanel(pn.viewable.Viewer):
    """Train / Pause / Resume / Stop and the training messages."""

    vm = param.ClassSelector(class_=ExplorerState)

    def __init__(self, **params):
        super().__init__(**params)
        vm = self.vm
        self.train_btn = pn.widgets.Button(label="▶ Train", color="primary", sizing_mode="stretch_width",
                                           css_classes=["gx-train"])
        self.pause_btn = pn.widgets.Button(label="❚❚ Pause", color="default", sizing_mode="stretch_width",
                                           disabled=True)
        self.stop_btn = pn.widgets.Button(label="■ Stop", color="danger", sizing_mode="stretch_width",
                                          disabled=True, **OUTLINE)
        self.train_btn.on_click(lambda e: vm.train())
        self.pause_btn.on_click(self._on_pause)
        self.stop_btn.on_click(lambda e: vm.stop())
        self.message = pn.pane.Alert("", alert_type="info", visible=False, sizing_mode="stretch_width",
                                     css_classes=["gx-train-message"])
        self.warmup = pn.pane.HTML("", visible=False, sizing_mode="stretch_width", stylesheets=[STYLESHEET])
        vm.param.watch(self._refresh, ["train_state", "train_message", "train_message_kind", "warmup_text",
                                       "config_errors"])
        self._refresh()

    def _on_pause(self, event):
        if self.vm.train_state == "paused":
            self.vm.resume()
        else:
            self.vm.pause()

    def _refresh(self, *events):
        vm = self.vm
        st = vm.train_state
        active = st in ("starting", "running", "paused", "stopping")
        self.train_btn.disabled = active or bool(vm.config_errors)
        self.pause_btn.disabled = st not in ("running", "paused", "starting")
        self.pause_btn.label = "▶ Resume" if st == "paused" else "❚❚ Pause"
        self.stop_btn.disabled = st not in ("running", "paused", "starting")
        kind = vm.train_message_kind if vm.train_message_kind in ("info", "warning", "danger", "success") else "info"
        self.message.alert_type = kind
        self.message.object = vm.train_message
        self.message.visible = bool(vm.train_message)
        self.warmup.object = (
            f"<div class='gx-spinner'></div><span>{vm.warmup_text}</span>" if vm.warmup_text else ""
        )
        self.warmup.visible = bool(vm.warmup_text)

    def __panel__(self):
        return pn.Column(
            self.train_btn,
            pn.Row(self.pause_btn, self.stop_btn, sizing_mode="stretch_width"),
            self.warmup,
            self.message,
            sizing_mode="stretch_width",
        )


class StatusBar(pn.viewable.Viewer):
    """Progress bar with iteration, objective, iterations per second, elapsed time."""

    vm = param.ClassSelector(class_=ExplorerState)

    def __init__(self, **params):
        super().__init__(**params)
        vm = self.vm
        self.bar = pn.indicators.Progress(value=0, max=max(1, vm.progress_max), bar_color="primary",
                                          sizing_mode="stretch_width", height=12, margin=(6, 10, 2, 10))
        self.text = pn.pane.HTML("", sizing_mode="stretch_width", stylesheets=[STYLESHEET], margin=(0, 10))
        vm.param.watch(self._refresh, ["progress", "progress_max", "progress_text", "train_state", "warmup_text"])
        self._refresh()

    def _refresh(self, *events):
        vm = self.vm
        self.bar.max = max(1, vm.progress_max)
        self.bar.value = int(min(vm.progress, self.bar.max))
        if vm.train_state in ("starting",) and vm.progress == 0:
            self.bar.value = -1  # indeterminate while the model is built
        self.bar.bar_color = {"error": "danger", "finished": "success", "stopped": "secondary",
                              "paused": "warning"}.get(vm.train_state, "primary")
        badge = {"idle": "ready", "starting": "starting", "running": "training", "paused": "paused",
                 "stopping": "stopping", "finished": "finished", "stopped": "stopped",
                 "error": "error"}.get(vm.train_state, vm.train_state)
        warm = f" <span class='gx-warm'>· {vm.warmup_text}</span>" if vm.warmup_text else ""
        self.text.object = (
            f"<span class='gx-badge gx-{vm.train_state}'>{badge}</span> "
            f"<span class='gx-progress-text'>{vm.progress_text}</span>{warm}"
        )

    def __panel__(self):
        return pn.Column(self.text, self.bar, sizing_mode="stretch_width", styles=STATUS_STYLES)
