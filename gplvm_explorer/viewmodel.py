"""The explorer's state: one ``param.Parameterized`` per browser session.

Views read and write this object only.  It owns

* the dataset (from :mod:`gplvm_explorer.data`) and the model settings;
* one :class:`~gplvm_explorer.session.TrainingSession` (the background fit);
* the HoloViews streams the plots draw from (``Buffer`` for the objective
  curve, ``Pipe`` for ARD bars, latent points, variance image, markers and the
  reconstruction) and the ``Tap`` / ``PointerXY`` streams of the latent map.

:meth:`ExplorerState.poll` is called from the server's event loop a few times
per second (``pn.state.add_periodic_callback``); it moves whatever the
training thread published into the streams.  Nothing here runs on the
training thread.
"""
from __future__ import annotations

import io
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import numpy as np
import pandas as pd
import param
import holoviews as hv

from . import data as data_mod
from . import warmup
from .session import (
    ACTIVE_STATES,
    INITS,
    KERNELS,
    MODELS,
    OPTIMIZERS,
    Busy,
    ModelConfig,
    SliceSpec,
    TrainingSession,
    check_config,
    compute_variance_grid,
    kernels_for,
    latent_bounds,
    most_relevant,
    slice_dims,
)

#: The sample-picker entry that stands for the last uploaded file.
UPLOADED_FILE = "uploaded-file"
NO_LABEL = "(none)"

#: Okabe & Ito's colour-blind-safe palette (black moved last).
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
#: Variance shading: light = confident (low variance), dark = uncertain.
VARIANCE_CMAP = ["#ffffff", "#e3e9f0", "#bccada", "#8fa6bf", "#5f7d9e", "#34506f"]


@dataclass
class Reconstruction:
    """The model's prediction at one latent location, with its nearest example."""

    location: np.ndarray  # (Q,)
    mean: np.ndarray  # (D,) in the data's original units
    std: np.ndarray  # (D,) predictive standard deviation (original units)
    variance: float  # the shared predictive variance (model units)
    nearest_index: int
    nearest_values: np.ndarray  # (D,) original units
    nearest_label: str
    image_shape: tuple | None
    feature_names: list

    @property
    def is_image(self) -> bool:
        return self.image_shape is not None

    @property
    def mean_image(self) -> np.ndarray:
        return self.mean.reshape(self.image_shape)

    @property
    def nearest_image(self) -> np.ndarray:
        return self.nearest_values.reshape(self.image_shape)


def natural_key(s: str):
    """Sort key: numbers (and ranges such as "0.1–0.5") by value, then text."""
    s = str(s)
    head = s.split("–")[0] if "–" in s[1:] else s
    try:
        return (0, float(head), s)
    except ValueError:
        return (1, 0.0, s)


def _fmt(x, digits=4) -> str:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return str(x)
    if not np.isfinite(x):
        return str(x)
    return f"{x:.{digits}g}" if abs(x) < 1e5 else f"{x:.{digits}e}"


def _duration(seconds: float) -> str:
    seconds = max(0.0, float(seconds))
    m, s = divmod(int(round(seconds)), 60)
    return f"{m:d}:{s:02d}"


class ExplorerState(param.Parameterized):
    """All state of one explorer page."""

    # ---- data ---------------------------------------------------------------
    sample = param.Selector(default=None, objects=[], doc="Bundled sample to load, or UPLOADED_FILE for the last uploaded file.")
    standardize = param.Boolean(default=False, doc="Scale every feature to zero mean, unit variance.")
    label_column = param.Selector(default=NO_LABEL, objects=[NO_LABEL], doc="Column with labels (uploads).")
    dataset = param.Parameter(default=None, doc="The current gplvm_explorer.data.Dataset.")
    data_source = param.String(default="sample", doc="'sample' or 'upload'.")
    upload_name = param.String(default="")
    data_error = param.String(default="", doc="Last data error; the previous data stays loaded.")
    data_version = param.Integer(default=0)

    # ---- model settings -----------------------------------------------------
    model = param.Selector(default="bayesian", objects=list(MODELS))
    kernel = param.Selector(default="rbf", objects=list(KERNELS))
    bias = param.Boolean(default=True)
    white = param.Boolean(default=True)
    latent_dim = param.Integer(default=5, bounds=(2, 12))
    num_inducing = param.Integer(default=30, bounds=(1, 500))
    init = param.Selector(default="pca", objects=list(INITS))
    optimizer = param.Selector(default="lbfgs", objects=list(OPTIMIZERS))
    max_iters = param.Integer(default=300, bounds=(1, 100000))
    seed = param.Integer(default=0, bounds=(0, None))
    config_errors = param.List(default=[])
    config_notes = param.List(default=[])

    # ---- training -----------------------------------------------------------
    train_state = param.String(default="idle")
    train_message = param.String(default="", doc="Busy / error / info message for the training card.")
    train_message_kind = param.String(default="info")
    progress = param.Integer(default=0)
    progress_max = param.Integer(default=300)
    progress_text = param.String(default="Not trained yet.")
    warmup_text = param.String(default="")
    objective_label = param.String(default="objective")
    model_Q = param.Integer(default=0, doc="Latent dimensionality of the model on show.")
    summary_text = param.String(default="")

    # ---- latent map ---------------------------------------------------------
    auto_dims = param.Boolean(default=True, doc="Show the two most relevant latent dimensions.")
    x_dim = param.Integer(default=0, bounds=(0, None))
    y_dim = param.Integer(default=1, bounds=(0, None))
    shown_dims = param.Tuple(default=(0, 1), length=2)
    fixed = param.List(default=[], doc="Values of the latent dims not shown (one per dim).")
    relevance_mode = param.Selector(default="relevance", objects=["relevance", "lengthscale"])
    follow_pointer = param.Boolean(default=False)
    pointer_interval = param.Number(default=0.15, doc="Seconds between pointer reconstructions.")
    reconstruction = param.Parameter(default=None)
    label_colours = param.Dict(default={}, doc="Label (as shown) -> colour, for the map and its legend.")
    recon_text = param.String(default="Click the latent map to see the model's output there.")

    def __init__(self, session: TrainingSession | None = None, **params):
        super().__init__(**params)
        self.session = session if session is not None else TrainingSession()
        self.objective_buffer = hv.streams.Buffer(
            pd.DataFrame({"iteration": np.array([], dtype=float), "objective": np.array([], dtype=float)}),
            length=1_000_000,
            index=False,
        )
        self.ard_pipe = hv.streams.Pipe(data=self._ard_frame(None))
        self.points_pipe = hv.streams.Pipe(data=self._empty_points())
        self.image_pipe = hv.streams.Pipe(data=None)
        self.marker_pipe = hv.streams.Pipe(data=None)
        self.recon_pipe = hv.streams.Pipe(data=None)
        self.tap = hv.streams.Tap(x=None, y=None)
        self.pointer = hv.streams.PointerXY(x=None, y=None)
        self.tap.add_subscriber(self._on_tap)
        self.pointer.add_subscriber(self._on_pointer)
        self._hist_len = 0
        self._seen_snapshot = None
        self._seen_grid = 0
        self._seen_state = None
        self._last_points = 0.0
        self._last_ard = 0.0
        self._next_heavy = 0.0
        self._last_pointer = 0.0
        self._relevance = None
        self._X_mean = None
        self._X_variance = None
        self._trained_labels = None
        self._trained_dataset = None
        self._pending_upload = None  # (bytes, filename)
        self._samples = []
        try:
            self._samples = list(data_mod.samples())
        except Exception as exc:  # pragma: no cover - data layer broken
            self.data_error = f"Could not list the bundled samples: {exc}"
        names = [s.name for s in self._samples]
        self._quiet_sample = False
        self.param.sample.objects = names + [UPLOADED_FILE]
        self.param.watch(self._on_sample, ["sample"])
        self.param.watch(self._on_prepare_option, ["standardize", "label_column"])
        self.param.watch(
            self._on_config,
            ["model", "kernel", "bias", "white", "latent_dim", "num_inducing", "init", "optimizer", "max_iters", "seed"],
        )
        self.param.watch(self._on_slice, ["auto_dims", "x_dim", "y_dim", "fixed"])
        self.param.watch(self._on_relevance_mode, ["relevance_mode"])
        if names:
            self.sample = names[0]  # loads it
        self._update_warmup()

    # =====================================================================
    # data
    # =====================================================================
    @property
    def samples_info(self):
        return list(self._samples)

    def sample_titles(self) -> dict:
        """Select-widget options: title -> name (the last entry stands for the uploaded file)."""
        titles = {getattr(s, "title", s.name) or s.name: s.name for s in self._samples}
        titles["Your uploaded file"] = UPLOADED_FILE
        return titles

    def _select_sample_quietly(self, name):
        """Show ``name`` in the sample picker without loading anything."""
        self._quiet_sample = True
        try:
            self.sample = name
        finally:
            self._quiet_sample = False

    def _on_sample(self, event):
        if self._quiet_sample or not event.new:
            return
        if event.new == UPLOADED_FILE:
            if self._pending_upload is None:
                self.data_error = "No file uploaded yet: choose one with the upload button below."
                self._select_sample_quietly(event.old)
            elif not self.load_upload(*self._pending_upload):
                self._select_sample_quietly(event.old)
            return
        if not self.load_sample(event.new):
            self._select_sample_quietly(event.old)

    def load_sample(self, name: str) -> bool:
        if self.training_active:
            self.data_error = "Stop the training before loading other data."
            return False
        try:
            ds = data_mod.load_sample(name, standardize=bool(self.standardize))
        except Exception as exc:
            self.data_error = self._data_error_text(exc, f"sample {name!r}")
            return False
        self.data_source = "sample"
        with param.parameterized.discard_events(self):
            self.param.label_column.objects = [NO_LABEL]
            self.label_column = NO_LABEL
        if self.sample != name:
            self._select_sample_quietly(name)
        self._set_dataset(ds)
        return True

    def load_upload(self, content: bytes, filename: str) -> bool:
        """Parse an uploaded file; on failure keep the current dataset."""
        if self.training_active:
            self.data_error = "Stop the training before loading other data."
            return False
        if not content:
            self.data_error = f"{filename or 'The file'} is empty."
            return False
        columns = []
        if str(filename).lower().endswith((".csv", ".tsv", ".txt")):
            try:
                columns = list(data_mod.csv_columns(content, filename))
            except Exception as exc:
                self.data_error = self._data_error_text(exc, filename)
                return False
        label = self._guess_label(columns)
        try:
            ds = data_mod.load_file(
                content,
                filename,
                label_column=label,
                standardize=self.standardize,
            )
        except Exception as exc:
            self.data_error = self._data_error_text(exc, filename)
            return False
        self._pending_upload = (content, filename)
        self.upload_name = filename
        self.data_source = "upload"
        self._select_sample_quietly(UPLOADED_FILE)
        with param.parameterized.discard_events(self):
            self.param.label_column.objects = [NO_LABEL] + columns
            self.label_column = label if label is not None else NO_LABEL
        self._set_dataset(ds)
        return True

    def _guess_label(self, columns):
        if self.label_column in columns and self.label_column != NO_LABEL:
            return self.label_column
        for c in columns:
            if c.strip().lower() in ("label", "labels", "class", "target", "y", "category"):
                return c
        return None

    def _on_prepare_option(self, event):
        if self.training_active:
            return
        if self.data_source == "upload" and self._pending_upload is not None:
            content, filename = self._pending_upload
            label = None if self.label_column == NO_LABEL else self.label_column
            try:
                ds = data_mod.load_file(content, filename, label_column=label, standardize=self.standardize)
            except Exception as exc:
                self.data_error = self._data_error_text(exc, filename)
                return
            self._set_dataset(ds)
        elif self.sample:
            self.load_sample(self.sample)

    @staticmethod
    def _data_error_text(exc, what) -> str:
        if isinstance(exc, data_mod.DataError):
            return f"Could not load {what}: {exc}"
        return f"Could not load {what} ({type(exc).__name__}): {exc}"

    def _set_dataset(self, ds):
        self.data_error = ""
        self.dataset = ds
        self.data_version += 1
        n = ds.n
        self.param.num_inducing.bounds = (1, max(1, n))
        if self.num_inducing > n:
            self.num_inducing = max(1, min(n, 30))
        self._validate_config()
        self.progress_text = "Data loaded. Press Train." if self.session.state == "idle" else self.progress_text
        # a new dataset invalidates the latent map of a model trained on other data
        if self._trained_dataset is not None and self._trained_dataset is not ds:
            self._clear_model_views()
            self.progress_text = "Data loaded. Press Train."
        self._show_data_points()

    def data_summary_markdown(self) -> str:
        ds = self.dataset
        if ds is None:
            return "No data loaded."
        rows = [f"**{ds.name}**", "", f"- **N** = {ds.n} points, **D** = {ds.d} features"]
        if ds.labels is not None:
            classes = np.unique(ds.labels)
            if ds.labels.dtype.kind == "f":
                rows.append(f"- labels: *{ds.label_name or 'label'}* (continuous)")
            else:
                rows.append(f"- labels: *{ds.label_name or 'label'}*, {len(classes)} distinct")
        else:
            rows.append("- no labels")
        if ds.image_shape is not None:
            rows.append(f"- images of {ds.image_shape[0]} × {ds.image_shape[1]} pixels")
        if getattr(ds, "scale", None) is not None:
            rows.append("- standardised (zero mean, unit variance)")
        return "\n".join(rows)

    # =====================================================================
    # model settings
    # =====================================================================
    def config(self) -> ModelConfig:
        return ModelConfig(
            model=self.model,
            kernel=self.kernel,
            bias=self.bias,
            white=self.white,
            latent_dim=int(self.latent_dim),
            num_inducing=int(self.num_inducing),
            init=self.init,
            optimizer=self.optimizer,
            max_iters=int(self.max_iters),
            seed=int(self.seed),
        )

    def allowed_kernels(self) -> list[str]:
        return kernels_for(self.model)

    def _on_config(self, event):
        if event.name == "latent_dim" and self._relevance is None:
            self.ard_pipe.send(self._ard_frame(None))
        if event.name == "model":
            allowed = kernels_for(self.model)
            if self.kernel not in allowed:
                old = KERNELS[self.kernel]
                self.kernel = allowed[0]
                self.config_notes = [
                    f"{old} has no closed-form expectations in the {MODELS[self.model]}; switched to {KERNELS[self.kernel]}."
                ]
                self._validate_config(keep_notes=True)
                return
        self._validate_config()

    def _validate_config(self, keep_notes=False):
        ds = self.dataset
        if ds is None:
            self.config_errors = ["Load data first."]
            return
        errors, notes = check_config(self.config(), ds.n, ds.d)
        self.config_errors = errors
        self.config_notes = (list(self.config_notes) if keep_notes else []) + notes

    # =====================================================================
    # training control
    # =====================================================================
    @property
    def training_active(self) -> bool:
        return self.session.state in ACTIVE_STATES

    def train(self) -> bool:
        """Start a fit with the current data and settings; messages explain refusals."""
        if self.training_active:
            self._message("A training is already running; stop it first.", "warning")
            return False
        ds = self.dataset
        if ds is None:
            self._message("Load data first.", "warning")
            return False
        self._validate_config()
        if self.config_errors:
            self._message(" ".join(self.config_errors), "danger")
            return False
        cfg = self.config()
        try:
            self.session.start(ds.values, cfg)
        except Busy as exc:
            self._message(str(exc), "warning")
            return False
        except Exception as exc:  # pragma: no cover - thread could not start
            self._message(f"Could not start training: {exc}", "danger")
            return False
        self._clear_model_views()
        self._trained_dataset = ds
        self._trained_labels = ds.labels
        self.progress = 0
        self.progress_max = cfg.max_iters
        self.objective_label = "ELBO" if cfg.model == "bayesian" else "log-likelihood"
        if warmup.done():
            self._message("", "info")
            self.progress_text = "Building the model…"
        else:
            self._message("Compiling numerical kernels (first run only); training starts once they are ready.", "info")
            self.progress_text = "Waiting for the numerical kernels to compile…"
        self.train_state = self.session.state
        self.summary_text = ""
        return True

    def pause(self):
        self.session.pause()
        self._next_heavy = 0.0
        self.poll()

    def resume(self):
        self.session.resume()
        self._next_heavy = 0.0
        self.poll()

    def stop(self):
        self.session.stop()
        self._next_heavy = 0.0
        self.poll()

    def close(self):
        """The browser session ended: stop the thread."""
        self.session.close()

    def _message(self, text, kind="info"):
        self.train_message_kind = kind
        self.train_message = text

    def _clear_model_views(self):
        self.objective_buffer.clear()
        self._hist_len = 0
        self._seen_snapshot = None
        self._seen_grid = 0
        self._relevance = None
        self._X_mean = None
        self._X_variance = None
        self.model_Q = 0
        self.ard_pipe.send(self._ard_frame(None))
        self.image_pipe.send(None)
        self.marker_pipe.send(None)
        self.recon_pipe.send(None)
        self.reconstruction = None
        self.recon_text = "Click the latent map to see the model's output there."
        self.progress = 0

    # =====================================================================
    # polling (event loop, ~4 Hz)
    # =====================================================================
    #: Seconds between two ARD / scatter refreshes while training (each costs
    #: a HoloViews re-render; the objective curve streams at the poll rate).
    ard_interval = 1.0
    points_interval = 1.0
    #: The poll keeps the event loop at most ~1/(1+factor) busy (half by
    #: default, leaving the rest for clicks and widgets): after a poll
    #: that took d seconds, the next one waits at least factor·d.
    poll_budget_factor = 1.0

    def poll(self) -> None:
        """Move what the training thread published into the streams.

        Two tiers: the objective curve and the progress line are cheap (a
        ``ColumnDataSource.stream`` and a text) and go out on every poll; the
        ARD bars, the latent scatter and the variance image re-render plots,
        so they are refreshed at most every ``ard_interval`` /
        ``points_interval`` seconds, inside one frozen, held document (one
        reference recomputation, one websocket message), and a slow refresh
        (busy server) pushes the next one back by ``poll_budget_factor`` times
        its duration.  The page stays responsive however fast the optimiser runs.
        """
        now = time.perf_counter()
        heavy = now >= self._next_heavy
        with self._batch(freeze=heavy):
            did_heavy = self._poll(heavy)
        if did_heavy:
            took = time.perf_counter() - now
            self._next_heavy = time.perf_counter() + min(2.0, self.poll_budget_factor * took)

    @contextmanager
    def _batch(self, freeze: bool = True):
        """Group the model changes of one UI step (served page only).

        Inside a held, frozen Bokeh document the references are recomputed
        once and the browser receives one combined message, instead of one
        per stream event.
        """
        doc = None
        try:
            import panel as pn

            doc = pn.state.curdoc
        except Exception:  # pragma: no cover
            doc = None
        if doc is None or getattr(doc, "session_context", None) is None:
            yield
            return
        with ExitStack() as stack:
            stack.enter_context(pn.io.hold(doc))
            models = getattr(doc, "models", None)
            if freeze and models is not None and hasattr(models, "freeze"):
                stack.enter_context(models.freeze())
            yield

    def _poll(self, heavy: bool = True) -> bool:
        """One poll; returns whether plot re-renders (the heavy tier) happened."""
        did_heavy = False
        self._update_warmup()
        p = self.session.poll(self._hist_len)
        if len(p.iterations):
            self.objective_buffer.send(
                pd.DataFrame({"iteration": p.iterations.astype(float), "objective": p.objectives})
            )
            self._hist_len = p.history_length
        snap = p.snapshot
        state_changed = p.state != self._seen_state
        if snap is not None and snap is not self._seen_snapshot:
            self._seen_snapshot = snap
            self._relevance = np.asarray(snap.relevance, dtype=float)
            self._X_mean = np.asarray(snap.X_mean, dtype=float)
            self._X_variance = None if snap.X_variance is None else np.asarray(snap.X_variance, dtype=float)
            Q = self._X_mean.shape[1]
            if self.model_Q != Q:
                with param.parameterized.discard_events(self):
                    self.fixed = [0.0] * Q
                self.model_Q = Q
            now = time.perf_counter()
            final = p.state not in ACTIVE_STATES
            if (heavy and now - self._last_ard >= self.ard_interval) or final:
                self._last_ard = now
                self.ard_pipe.send(self._ard_frame(self._relevance))
                did_heavy = True
            if (heavy and now - self._last_points >= self.points_interval) or final:
                self._last_points = now
                self._refresh_dims()
                self._send_points()
                did_heavy = True
            self.progress = int(min(snap.iteration, self.progress_max))
            rate = snap.iteration / snap.elapsed if snap.elapsed > 0 else 0.0
            self.progress_text = (
                f"Iteration {snap.iteration} / {self.progress_max} · {self.objective_label} {_fmt(snap.objective, 6)}"
                f" · {rate:.1f} it/s · {_duration(snap.elapsed)} elapsed"
            )
        new_grid = p.grid is not None and p.grid.version != self._seen_grid
        if new_grid and (heavy or p.state not in ACTIVE_STATES):
            self._seen_grid = p.grid.version
            if p.state in ACTIVE_STATES or self._grid_matches(p.grid):
                self.image_pipe.send(p.grid)
            else:
                self._recompute_grid()
            did_heavy = True
        if state_changed:
            self._seen_state = p.state
            self.train_state = p.state
            self._on_state(p)
            did_heavy = True
        return did_heavy

    def _on_state(self, p):
        if self._relevance is not None:
            self.ard_pipe.send(self._ard_frame(self._relevance))
        if p.state == "running" and not self.train_message_kind == "danger":
            self._message("", "info")
            if self._seen_snapshot is None:
                self.progress_text = "Training… waiting for the first iteration."
        elif p.state == "paused":
            self._message("Paused. Resume to continue, or Stop to keep the current fit.", "info")
        elif p.state == "stopping":
            self._message("Stopping after the current iteration…", "info")
        elif p.state in ("finished", "stopped"):
            word = "Finished" if p.state == "finished" else "Stopped"
            self._message("", "info")
            snap = p.snapshot
            if snap is not None:
                rate = snap.iteration / snap.elapsed if snap.elapsed > 0 else 0.0
                self.progress_text = (
                    f"{word} after {snap.iteration} iterations · {self.objective_label} {_fmt(snap.objective, 6)}"
                    f" · {rate:.1f} it/s · {_duration(snap.elapsed)}"
                )
            else:
                self.progress_text = f"{word} before the first iteration."
            jit = self.session.jitter
            if jit and jit > 0:
                self._message(f"Note: jitter {jit:.1e} was added to keep the kernel matrices positive definite.", "info")
            self._refresh_dims()
            self._send_points()
            self._recompute_grid()
            self.summary_text = self.summary()
        elif p.state == "error":
            self._message(p.error or "Training failed.", "danger")
            self.progress_text = "Training failed; the page stays usable. Change the settings and train again."
            if self._X_mean is not None:
                self._recompute_grid()
            self.summary_text = self.summary()

    def _update_warmup(self):
        st = warmup.status()
        if st == "running":
            self.warmup_text = "Compiling numerical kernels… (once per server start)"
        elif st == "failed":
            self.warmup_text = "Kernel warm-up failed; the first training will compile them (slower start)."
        else:
            self.warmup_text = ""

    # =====================================================================
    # ARD
    # =====================================================================
    def _ard_frame(self, relevance) -> pd.DataFrame:
        if relevance is None or len(relevance) == 0:
            # placeholder bars keep the axis categorical before the first snapshot
            q = int(self.latent_dim)
            return pd.DataFrame({"dimension": [f"x{i + 1}" for i in range(q)], "value": np.zeros(q)})
        rel = np.asarray(relevance, dtype=float)
        if self.relevance_mode == "lengthscale":
            with np.errstate(divide="ignore"):
                value = np.where(rel > 0, 1.0 / np.sqrt(np.maximum(rel, 1e-300)), np.inf)
            value = np.minimum(value, 1e6)
        else:
            value = rel
        return pd.DataFrame({"dimension": [f"x{i + 1}" for i in range(len(rel))], "value": value})

    def _on_relevance_mode(self, event):
        self.ard_pipe.send(self._ard_frame(self._relevance))

    def active_dims(self, threshold: float = 0.05) -> list[int]:
        """Latent dims whose relevance exceeds ``threshold`` × the largest."""
        rel = self._relevance
        if rel is None or rel.size == 0 or np.max(rel) <= 0:
            return []
        return [i for i in range(rel.size) if rel[i] > threshold * np.max(rel)]

    # =====================================================================
    # latent map
    # =====================================================================
    def _slice_spec(self) -> SliceSpec:
        return SliceSpec(
            x_dim=int(self.x_dim), y_dim=int(self.y_dim), fixed=tuple(self.fixed), auto=bool(self.auto_dims)
        )

    def _refresh_dims(self):
        Q = self.model_Q
        if Q < 2:
            return
        dims = slice_dims(self._slice_spec(), self._relevance, Q)
        if tuple(dims) != tuple(self.shown_dims):
            self.shown_dims = tuple(int(d) for d in dims)
        if self.auto_dims:
            with param.parameterized.discard_events(self):
                self.x_dim, self.y_dim = dims
        self.session.set_slice(self._slice_spec())

    def _grid_matches(self, grid) -> bool:
        return (grid.x_dim, grid.y_dim) == tuple(self.shown_dims)

    def _on_slice(self, event=None):
        if self.model_Q < 2:
            return
        with self._batch():
            self._refresh_dims()
            self._send_points()
            self._recompute_grid()

    def _recompute_grid(self):
        """Shade the slice now with the frozen predictor (UI thread; cheap at 60×60)."""
        predictor = self.session.predictor
        if predictor is None or self._X_mean is None:
            return
        try:
            grid = compute_variance_grid(predictor, self._X_mean, self._relevance, self._slice_spec())
        except Exception as exc:
            self._message(f"Could not shade the latent map: {exc}", "warning")
            return
        self.image_pipe.send(grid)

    def _empty_points(self) -> pd.DataFrame:
        # label as text even when empty: the colour mapper stays categorical
        return pd.DataFrame({"x": np.array([], dtype=float), "y": np.array([], dtype=float),
                             "label": np.array([], dtype=object), "index": np.array([], dtype=int)})

    def label_strings(self, labels) -> np.ndarray | None:
        if labels is None:
            return None
        labels = np.asarray(labels)
        if labels.dtype.kind == "f":
            return np.array([_fmt(v, 3) for v in labels])
        return labels.astype(str)

    @staticmethod
    def colour_labels(labels, n: int, bins: int = 8) -> np.ndarray:
        """Labels as strings for a categorical palette.

        Continuous labels (non-integral numbers, or more than 20 distinct
        numbers) are cut into ``bins`` quantile ranges, e.g. ``"0.1–0.5"``.
        """
        if labels is None:
            return np.array(["all points"] * n)
        labels = np.asarray(labels)
        uniq = np.unique(labels)
        if labels.dtype.kind in "fiu" and (labels.dtype.kind == "f" or len(uniq) > 20):
            edges = np.unique(np.quantile(labels.astype(float), np.linspace(0, 1, bins + 1)))
            if len(edges) < 2:
                return np.array([_fmt(labels[0], 3)] * n)
            idx = np.clip(np.searchsorted(edges, labels, side="right") - 1, 0, len(edges) - 2)
            names = [f"{_fmt(edges[i], 3)}–{_fmt(edges[i + 1], 3)}" for i in range(len(edges) - 1)]
            return np.array([names[i] for i in idx])
        return labels.astype(str)

    def label_is_categorical(self) -> bool:
        labels = self._current_labels()
        if labels is None:
            return True
        return labels.dtype.kind != "f" and len(np.unique(labels)) <= 20

    def _current_labels(self):
        if self._X_mean is not None:
            return self._trained_labels
        ds = self.dataset
        return None if ds is None else ds.labels

    def _show_data_points(self):
        """Before training: show nothing on the map (there are no latents yet)."""
        if self._X_mean is None:
            self.points_pipe.send(self._empty_points())

    def _send_points(self):
        X = self._X_mean
        if X is None or X.shape[1] < 2:
            self.points_pipe.send(self._empty_points())
            return
        xd, yd = self.shown_dims
        n = X.shape[0]
        labels = self.colour_labels(self._trained_labels, n)
        frame = {"x": X[:, xd], "y": X[:, yd], "index": np.arange(n), "label": labels.astype(object)}
        classes = sorted(set(labels.tolist()), key=natural_key)
        colours = {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(classes)}
        if colours != self.label_colours:
            self.label_colours = colours
        self.points_pipe.send(pd.DataFrame(frame))

    def latent_extent(self):
        """(x0, y0, x1, y1) of the slice on show, or None."""
        if self._X_mean is None or self.model_Q < 2:
            return None
        xd, yd = self.shown_dims
        return latent_bounds(self._X_mean, xd, yd)

    @property
    def X_mean(self):
        return self._X_mean

    @property
    def X_variance(self):
        return self._X_variance

    @property
    def relevance(self):
        return self._relevance

    def set_fixed_from_nearest(self) -> bool:
        """Set the hidden dims' sliders from the training point nearest the last click."""
        rec = self.reconstruction
        if rec is None or self._X_mean is None:
            return False
        self.fixed = [float(v) for v in self._X_mean[rec.nearest_index]]
        return True

    def set_fixed_value(self, dim: int, value: float):
        vals = list(self.fixed) if len(self.fixed) == self.model_Q else [0.0] * self.model_Q
        vals[dim] = float(value)
        self.fixed = vals

    # =====================================================================
    # reconstruction
    # =====================================================================
    def _on_tap(self, x=None, y=None, **kwargs):
        if x is None or y is None:
            return
        self.reconstruct_at(float(x), float(y))

    def _on_pointer(self, x=None, y=None, **kwargs):
        if not self.follow_pointer or x is None or y is None:
            return
        now = time.perf_counter()
        if now - self._last_pointer < self.pointer_interval:
            return
        self._last_pointer = now
        self.reconstruct_at(float(x), float(y))

    def reconstruct_at(self, x: float, y: float) -> Reconstruction | None:
        """Predict the output at (x, y) of the slice on show.

        Not wrapped in ``_batch``: a tap arrives inside HoloViews' own stream
        callback, and holding and freezing the document there occasionally
        kept the first reconstruction after Stop from ever reaching the browser.
        """
        return self._reconstruct_at(x, y)

    def _reconstruct_at(self, x: float, y: float) -> Reconstruction | None:
        predictor = self.session.predictor
        ds = self._trained_dataset
        if predictor is None or self._X_mean is None or ds is None:
            self.recon_text = "Train a model first; then click the latent map."
            return None
        Q = self._X_mean.shape[1]
        xd, yd = self.shown_dims
        loc = np.zeros(Q)
        if len(self.fixed) == Q:
            loc[:] = self.fixed
        loc[xd], loc[yd] = x, y
        try:
            mean, var = predictor.predict(loc[None, :])
        except Exception as exc:
            self.recon_text = f"Could not predict at this point: {exc}"
            return None
        mean = np.asarray(mean, dtype=float).reshape(-1)
        var = float(np.asarray(var, dtype=float).reshape(-1)[0])
        scale = getattr(ds, "scale", None)
        std = np.sqrt(max(var, 0.0)) * (np.ones_like(mean) if scale is None else np.asarray(scale))
        try:
            mean_orig = ds.unstandardize(mean[None, :])[0]
            nearest_vals_model = ds.values
        except Exception:
            mean_orig = mean
            nearest_vals_model = ds.values
        d2 = (self._X_mean[:, xd] - x) ** 2 + (self._X_mean[:, yd] - y) ** 2
        j = int(np.argmin(d2))
        try:
            nearest = ds.unstandardize(nearest_vals_model[j : j + 1])[0]
        except Exception:
            nearest = nearest_vals_model[j]
        labels = self._trained_labels
        lab = "–" if labels is None else str(self.label_strings(labels[j : j + 1])[0])
        rec = Reconstruction(
            location=loc,
            mean=mean_orig,
            std=std,
            variance=var,
            nearest_index=j,
            nearest_values=np.asarray(nearest, dtype=float),
            nearest_label=lab,
            image_shape=ds.image_shape,
            feature_names=list(ds.feature_names or []),
        )
        self.reconstruction = rec
        self.recon_pipe.send(rec)
        self.marker_pipe.send({"click": (x, y), "nearest": (self._X_mean[j, xd], self._X_mean[j, yd])})
        self.recon_text = (
            f"At x{xd + 1} = {x:.3g}, x{yd + 1} = {y:.3g}: predictive variance {var:.3g}. "
            f"Nearest training point #{j} (label {lab})."
        )
        return rec

    # =====================================================================
    # text summary and exports
    # =====================================================================
    def summary(self) -> str:
        cfg = self.session.config or self.config()
        ds = self._trained_dataset or self.dataset
        lines = ["GPLVM Explorer — model summary", ""]
        if ds is not None:
            lines.append(f"Data: {ds.name} (N={ds.n}, D={ds.d}{', standardised' if getattr(ds, 'scale', None) is not None else ''})")
        lines.append(f"Model: {cfg.describe()}")
        snap = self.session.snapshot
        st = self.session.state
        lines.append(f"Status: {st}")
        if snap is not None:
            lines.append(f"Iterations: {snap.iteration}; time {snap.elapsed:.1f} s")
            lines.append(f"Final {self.objective_label}: {_fmt(snap.objective, 8)}")
            params = getattr(snap, "parameters", {}) or {}
            noise = params.get("noise_variance")
            if noise is not None:
                lines.append(f"Noise variance: {_fmt(noise)}")
        if self._relevance is not None:
            rel = self._relevance
            lines.append("ARD relevance (1/lengthscale² or linear variance): " + ", ".join(
                f"x{i + 1}={_fmt(r, 3)}" for i, r in enumerate(rel)))
            act = self.active_dims()
            lines.append(f"Dimensions in use (relevance > 5% of the largest): {len(act)} of {len(rel)} "
                         f"({', '.join(f'x{i + 1}' for i in act)})")
        labels = self._trained_labels
        if self._X_mean is not None and labels is not None and labels.dtype.kind != "f":
            try:
                from engine.metrics import one_nn_errors

                errs = one_nn_errors(self._X_mean, labels)
                lines.append(f"Leave-one-out 1-NN errors in the latent space: {errs} of {len(labels)}")
            except Exception:
                pass
        if self.session.error:
            lines.append(f"Error: {self.session.error}")
        return "\n".join(lines)

    def latents_csv(self) -> bytes:
        """Latent means (and variances, labels) as CSV."""
        X = self._X_mean
        if X is None:
            raise ValueError("Train a model first.")
        Q = X.shape[1]
        frame = {"index": np.arange(X.shape[0])}
        if self._trained_labels is not None:
            frame["label"] = self._trained_labels
        for q in range(Q):
            frame[f"x{q + 1}"] = X[:, q]
        if self._X_variance is not None:
            for q in range(Q):
                frame[f"var_x{q + 1}"] = self._X_variance[:, q]
        buf = io.StringIO()
        pd.DataFrame(frame).to_csv(buf, index=False, float_format="%.8g")
        return buf.getvalue().encode()

    def model_npz(self) -> bytes:
        """The trained model as an .npz the engine can load again."""
        model = self.session.final_model
        if model is None:
            raise ValueError("Export the model once training has finished or been stopped.")
        import tempfile, os
        from engine import io as engine_io

        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.npz")
            engine_io.save_model(model, path)
            with open(path, "rb") as fh:
                return fh.read()

    def latent_png(self, size: int = 640) -> bytes:
        """A PNG of the latent map (variance shading + points), drawn server-side."""
        from PIL import Image, ImageDraw

        X = self._X_mean
        predictor = self.session.predictor
        if X is None or predictor is None:
            raise ValueError("Train a model first.")
        grid = compute_variance_grid(predictor, X, self._relevance, self._slice_spec())
        v = grid.variance
        lo, hi = float(np.min(v)), float(np.max(v))
        t = (v - lo) / (hi - lo) if hi > lo else np.zeros_like(v)
        cmap = np.array([[int(c[i:i + 2], 16) for i in (1, 3, 5)] for c in VARIANCE_CMAP], dtype=float)
        pos = t * (len(cmap) - 1)
        i0 = np.clip(np.floor(pos).astype(int), 0, len(cmap) - 2)
        f = (pos - i0)[..., None]
        rgb = (cmap[i0] * (1 - f) + cmap[i0 + 1] * f).astype(np.uint8)
        img = Image.fromarray(rgb[::-1], "RGB").resize((size, size), Image.NEAREST)
        draw = ImageDraw.Draw(img)
        x0, y0, x1, y1 = grid.bounds
        labels = self._trained_labels
        classes = [] if labels is None else list(np.unique(labels))
        for j in range(X.shape[0]):
            px = (X[j, grid.x_dim] - x0) / (x1 - x0) * size
            py = (1 - (X[j, grid.y_dim] - y0) / (y1 - y0)) * size
            if labels is None or len(classes) > 20:
                col = PALETTE[0]
            else:
                col = PALETTE[classes.index(labels[j]) % len(PALETTE)]
            draw.ellipse([px - 3, py - 3, px + 3, py + 3], fill=col, outline="#333333")
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        return buf.getvalue()
