"""Explorer: the state objects of one browser session, wired in one direction.

file -> LoadedData -> ModelSettings -> TrainingRun -> TrainedResult -> LatentSlice -> views.

Each arrow is a ``param`` watcher (or ``param.bind``) set up here; each view is
given the state objects it reads (``View.of(explorer)``), reads their public
params and acts through their methods.  Nothing is shared between sessions
except the process-wide training limiter.
"""
from __future__ import annotations

import logging
import threading

import numpy as np
import param

from engine.errors import EngineError

from . import warmup
from .catalog import CATALOG, LIKELIHOODS, Budget
from .dispatch import Dispatcher
from .export import latent_nn_errors, latent_nn_errors_apply, summary_text
from .data import DataError, Limits
from .data.mapped import training_dataset
from .data.value_kind import likelihood_for
from .state.background import LatestOnly
from .state.data import LoadedData
from .state.deep import DeepLayers
from .state.held_out import HeldOutRows
from .state.imputation import ImputedValues, MissingValues
from .state.dynamics import Dynamics
from .state.geodesic import GeodesicWalk
from .state.latent import LatentSlice
from .state.model_inputs import ModelInputs
from .state.multiview import MultiView
from .state.restarts import Restarts
from .state.runs import RunsTable
from .state.settings import ModelSettings
from .state.shown import ShownData
from .state.training import Status, TrainingRun
from .text import quote
from .training.events import ACTIVE
from .training.limiter import Limiter

logger = logging.getLogger(__name__)

__all__ = ["Explorer"]


class Explorer(param.Parameterized):
    """One page's state."""

    page_error = param.String(default="", doc="An unexpected error in a page update, shown at the top.")
    warming_up = param.Boolean(default=False, doc="The numerical kernels are still compiling.")
    summary = param.String(default="", doc="Settings and results as text (after a run ends).")
    result_source = param.Parameter(default=None, doc="The loaded data set the result on show came from "
                                    "(another one loaded since: the page says the result is the old data's).")

    def __init__(self, doc=None, limiter: Limiter | None = None, build=None, budget: Budget | None = None,
                 publish_interval: float = 1.0, notify_interval: float = 0.2, **params):
        super().__init__(**params)
        self.dispatcher = Dispatcher(doc, on_error=self._on_page_error)
        self._summary_args = None  # the arguments of the summary on show (its 1-NN line comes later)
        self._nn_errors = LatestOnly(self.dispatcher, lambda args: (args, latent_nn_errors(args[0])),
                                     self._apply_nn_errors, name="gplvm-summary")
        self._sample_model = None  # the model a sample selected (see _select_sample_model)
        self.opening = None  # the saved model being opened on a thread (open_saved)
        self.data = LoadedData()
        self.settings = ModelSettings(budget=budget)
        self.training = TrainingRun(self.dispatcher, limiter=limiter, build=build,
                                    publish_interval=publish_interval, notify_interval=notify_interval)
        self.latent = LatentSlice(self.dispatcher)
        self.geodesic = GeodesicWalk(self.dispatcher, self.latent)  # geodesic mode of the latent map
        self.missing = MissingValues()
        self.imputation = ImputedValues(self.training)
        self.inputs = ModelInputs()  # time / views for the models that need them
        self.dynamics = Dynamics(self.dispatcher)
        self.multiview = MultiView(self.dispatcher)
        self.deep = DeepLayers(self.dispatcher)  # per-layer maps of models with layers
        self.runs = RunsTable(self.dispatcher)  # every finished or stopped run, to compare and show again
        self.held_out = HeldOutRows()  # a seeded 10% of the rows kept out of training, to score runs on
        self.shown = ShownData(self.data, self.training, self.latent)  # the data on show and their colours
        self.data.param.watch(self._on_dataset, ["dataset"])
        self.data.param.watch(self._on_saved_model, ["saved_model"])
        self.training.param.watch(self._on_status, ["status"])
        self.training.param.watch(self._on_result, ["result"])
        self.runs.connect(self)
        self.restarts = Restarts(self)  # "best of K": K seeds trained one after the other, each a row
        param.bind(self.training.set_result_cost, self.latent.param.cost, watch=True)
        # the page timed a prepared start: estimates and the big-data proposal follow the measurement
        param.bind(self.settings.set_timing, self.training.param.timing, watch=True)
        # what Train would do changed: prepare its start again (once per page update)
        prepare = lambda *events: self.dispatcher.soon(self._prepare)  # noqa: E731
        self.data.param.watch(prepare, ["dataset"])
        self.settings.param.watch(prepare, ["errors", *ModelSettings.START])
        self.missing.param.watch(prepare, list(self.missing.param)[1:])
        self.inputs.param.watch(prepare, list(self.inputs.param)[1:])
        self.held_out.param.watch(prepare, ["enabled", "seed"])
        self.data.load_default()
        self.warming_up = not warmup.done()
        self._unsubscribe_warmup = warmup.on_done(lambda: self.dispatcher.soon(self._on_warm))

    # ---- actions ----------------------------------------------------------------------
    def train(self) -> bool:
        """Start training with the current data and settings; messages explain refusals."""
        tr = self.training
        ds = self.data.dataset
        if ds is None:
            tr.message, tr.message_kind = "Load data first.", "warning"
            return False
        if not self.settings.validate():
            tr.message, tr.message_kind = " ".join(self.settings.errors), "danger"
            return False
        try:
            ds, config = self._training_input(ds)
        except (DataError, ValueError) as exc:
            tr.message, tr.message_kind = str(exc), "danger"
            return False
        with self.dispatcher.batch():  # the whole page turns to "training": many models change
            started = tr.start(ds, config)
            if started:
                self.result_source = self.data.dataset
            return started

    @property
    def result_is_stale(self) -> bool:
        """A result is on show, and other data has been loaded since it was trained or opened."""
        return self.training.result is not None and self.data.dataset is not self.result_source

    def _training_input(self, ds):
        """(dataset, config) a Train click with ``ds`` and the current settings trains on;
        DataError or ValueError say why it cannot."""
        # the held-out rows (when chosen) never reach the model
        ds = self.held_out.training_rows(ds, self.settings.spec)
        # a model that cannot use missing cells trains on a completed copy
        ds = self.missing.training_data(ds, self.settings.spec)
        likelihood = self.settings.config().likelihood
        if likelihood != "gaussian" and ds.imputed is not None and ds.imputed.any():
            label = LIKELIHOODS[likelihood].split(" (")[0]
            raise ValueError(f"A {label} likelihood cannot train on missing cells filled with their column "
                             "mean: drop the rows with missing cells, or choose the Bayesian GP-LVM (it trains "
                             "on the missing cells as they are).")
        # a time per row, or the columns split into views (ModelSpec.inputs)
        ds, config = self.inputs.apply(ds, self.settings.spec, self.settings.config())
        # a minibatch model reads the command-line .npy file memory-mapped, never copied
        return training_dataset(ds, self.settings.spec), config

    def _prepare(self) -> None:
        """Get the next Train click's model and first objective value ready (in the background)."""
        ds = self.data.dataset
        if ds is None or self.training.active or self.settings.errors:
            self.training.cancel_prepared()
            return
        try:
            ds, config = self._training_input(ds)
        except (DataError, ValueError):  # Train will say why
            self.training.cancel_prepared()
            return
        self.training.prepare(ds, config)

    def close(self) -> None:
        """The browser session ended: stop the fit, forget pending page updates."""
        self._unsubscribe_warmup()
        self.training.close()  # also drops a prepared start
        self.latent.close()
        self.geodesic.close()
        self._nn_errors.close()
        self.shown.close()
        self.dispatcher.close()

    # ---- wiring -----------------------------------------------------------------------
    def _on_dataset(self, event) -> None:
        ds = event.new
        self.inputs.set_dataset(ds)
        if ds is not None:
            self.settings.set_data_shape(ds.n, ds.d)
            # binary or count values call for a Bernoulli or Poisson likelihood: proposed, the user may override
            self.settings.propose_likelihood(likelihood_for(ds), ds.scale is not None)
        self._select_sample_model()
        # a click, its pictures and the pointer's caption belong to the data they were made on
        self.latent.reconstruction = None

    def _select_sample_model(self) -> None:
        """A sample made for a model selects it; the next data set goes back to the default model,
        unless the user has picked another model meanwhile."""
        wanted, chosen = self.data.model, self._sample_model
        if wanted and wanted in CATALOG:
            self.settings.model = wanted
            self._sample_model = wanted
        elif chosen is not None:
            if self.settings.model == chosen:
                self.settings.model = ModelSettings.param.model.default
            self._sample_model = None

    def _on_saved_model(self, event) -> None:
        if event.new is None:
            return
        from . import saved_model

        content, name = event.new
        self.data.saved_model = None  # taken: the same file uploaded again opens again
        budget = self.settings.budget

        def read():  # the arrays of an upload may unpack to at most a few times the upload limit
            model = saved_model.load(content, name, max_unpacked=8 * Limits().max_bytes, budget=budget)
            return model, saved_model.read_context(content, model.num_data, model.output_dim)

        self.open_saved(read, name)

    # ---- saved models -----------------------------------------------------------------
    def open_saved(self, read, name: str) -> bool:
        """Show the saved model ``read()`` returns as ``(model, context)`` as a finished result.

        The page shows the model's own data as the loaded data, its settings on the model card and
        the model as a finished result (``context``, from `saved_model.read_context`, brings back
        the data's names, labels, image shape and standardisation, the objective trace, the
        iterations and the settings).  Everything is computed before the page changes: when it
        cannot be shown, the data and the result on show stay as they were and the Data card says
        why (False).  On a served page, reading and computing (an exact GP-LVM's kernel matrix and
        factors: seconds for a few thousand rows) happen on a thread of their own, so no session
        is held up; the page changes once they are done, unless another file was opened
        meanwhile (True: the opening started).  Elsewhere (tests, notebooks) on the calling thread.
        """
        max_iters, run_id = self.settings.max_iters, self.training.run_id + 1
        if not self.dispatcher.served:
            return self._show_saved(name, *_prepare_saved(read, name, max_iters, run_id))
        if self.training.active:
            self.data.error = f"Could not open {quote(name)}: stop the training first."
            return False
        token = self.opening = object()  # the newest file opened wins
        self.training.message, self.training.message_kind = f"Opening {quote(name)}…", "info"

        def work():
            outcome = _prepare_saved(read, name, max_iters, run_id)

            def apply():
                if self.opening is token:
                    self.opening = None
                    self.training.message = ""
                    self._show_saved(name, *outcome)
            self.dispatcher.soon(apply)

        threading.Thread(target=work, name="gplvm-open-model", daemon=True).start()
        return True

    def _show_saved(self, name: str, error, reading: bool, context, prepared) -> bool:
        """Show a saved model `_prepare_saved` got ready, or say in the Data card why not."""
        if error is not None and reading:  # the reader's own messages name the file
            return self._refuse_saved(name, error, reading=True)
        if self.training.active:
            self.data.error = f"Could not open {quote(name)}: stop the training first."
            return False
        if error is not None:
            return self._refuse_saved(name, error)
        config, dataset, result = prepared
        standardised = dataset.scale is not None

        def loader(label_column, standardize, image_shape=None):  # the model's data, in the units it was trained in
            if bool(standardize) != standardised:
                raise DataError("a saved model's data stay in the units the model was trained in "
                                f"({'standardised' if standardised else 'not standardised'}).")
            if image_shape is not None:  # only how the columns are drawn changes
                return dataset.replace(image_shape=image_shape or None)
            return dataset

        if not self.data.load_given(loader, name, (), None, standardize=standardised):
            return False
        # a saved file does not say how its run was to end: the page's choice stays
        self.settings.apply(config, keep=("until_converged",), why=f"Saved model {name}")
        trace = None if context.trace_iteration is None else (context.trace_iteration, context.trace_objective)
        if not self.training.show_result(result, name, trace=trace):
            return False
        self.result_source = self.data.dataset
        return True

    def _refuse_saved(self, name: str, exc: BaseException, reading: bool = False) -> bool:
        if not isinstance(exc, (DataError, EngineError)):
            logger.error("Could not open the saved model %s", name, exc_info=exc)
        self.data.error = str(exc) if reading and isinstance(exc, DataError) else f"Could not open {quote(name)}: {exc}"
        return False

    def _on_status(self, event) -> None:
        status = Status(event.new)
        busy = status in ACTIVE
        self.data.locked = busy
        self.settings.locked = busy
        if status in (Status.FINISHED, Status.STOPPED, Status.FAILED):
            tr = self.training
            args = (tr.result, status.value, tr.elapsed, tr.message if status == Status.FAILED else "")
            self.summary = summary_text(*args)
            if latent_nn_errors_apply(tr.result):
                # O(N^2): counted on a thread; the page stays responsive and gets the line when it is ready
                self._summary_args = args
                self._nn_errors.submit(args)
        elif status in (Status.STARTING, Status.QUEUED):
            self.summary = ""
            self._summary_args = None

    def _apply_nn_errors(self, outcome) -> None:
        if isinstance(outcome, Exception):  # logged; the summary stays without the line
            return
        args, errors = outcome
        if args is self._summary_args:  # still the summary on show
            self.summary = summary_text(*args, nn_errors=errors)

    def _on_result(self, event) -> None:
        self.latent.offer(event.new)
        self.dynamics.offer(event.new)
        self.multiview.offer(event.new)
        self.deep.offer(event.new)

    def _on_warm(self) -> None:
        self.warming_up = False

    def _on_page_error(self, where: str, exc: BaseException) -> None:
        self.page_error = f"Something went wrong while updating the page ({type(exc).__name__}: {exc})."


def _prepare_saved(read, name: str, max_iters: int, run_id: int):
    """(error, reading, context, (config, dataset, result)) of the saved model ``read()`` returns:
    everything the page shows of it, computed off the page (``error`` says why it cannot be shown;
    ``reading``: the reading failed)."""
    from . import saved_model
    from .saved_context import SavedContext

    try:
        model, context = read()
    except Exception as exc:  # noqa: BLE001 - the message names the file and says why
        return exc, True, None, None
    context = context or SavedContext()
    try:
        return None, False, context, saved_model.prepare_opening(model, name, None, None, max_iters, run_id, context)
    except Exception as exc:  # noqa: BLE001 - any failure: nothing on the page changes, and it says why
        return exc, False, context, None
