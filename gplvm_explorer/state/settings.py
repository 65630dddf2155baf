"""ModelSettings: what to train, validated against the data's shape and the session's budget."""
from __future__ import annotations

import dataclasses
import logging

import param

from .. import catalog
from ..catalog import CATALOG, INITS, KERNELS, LIKELIHOODS, OPTIMIZERS, RUN_LENGTH, Budget, ModelConfig

logger = logging.getLogger(__name__)

__all__ = ["ModelSettings", "CONFIG_SETTINGS"]

#: The model card's settings: one per field of ModelConfig (its defaults), but the models' extra inputs.
CONFIG_SETTINGS = tuple(f for f in dataclasses.fields(ModelConfig) if not f.metadata.get("input"))

_CHOICES = {"model": CATALOG, "kernel": KERNELS, "init": INITS, "optimizer": OPTIMIZERS, "likelihood": LIKELIHOODS}
_BOUNDS = {"latent_dim": (2, 12), "num_inducing": (1, 500), "max_iters": (1, 100000), "seed": (0, None),
           "batch_size": (1, 100000)}
_DOCS = {
    "max_iters": "The most iterations; with until_converged the run ends sooner once converged.",
    "until_converged": "End the run once the bound has converged.",
    "batch_size": "Rows per iteration (minibatch models).",
    "likelihood": "The noise model; used by the models that take one (ModelSpec.likelihoods).",
}


def _setting(f: dataclasses.Field) -> param.Parameter:
    """The parameter of ModelConfig's field ``f``: a choice, a switch or a whole number, with its default."""
    doc = _DOCS.get(f.name)
    if f.name in _CHOICES:
        return param.Selector(default=f.default, objects=list(_CHOICES[f.name]), doc=doc)
    if isinstance(f.default, bool):
        return param.Boolean(default=f.default, doc=doc)
    return param.Integer(default=f.default, bounds=_BOUNDS[f.name], doc=doc)


class ModelSettings(param.Parameterized):
    """Model, kernel, Q, M, likelihood, initialisation, optimiser, iterations and seed.

    One parameter per setting of `ModelConfig` (`CONFIG_SETTINGS`, added below the class),
    plus ``layers``, the text the deep GP's ``layer_dims`` are read from.
    ``errors`` make training impossible (too big for the budget, M > N, ...);
    ``notes`` explain automatic adjustments and costs.  Call
    :meth:`set_data_shape` when the data change, and :meth:`propose_likelihood`
    with the noise model that fits them (the user may choose another one).
    """

    suggestion = param.String(default="", doc="Key of a model the catalog proposes for these data (or '').")
    layers = param.String(default="5, 2", doc="Each layer's latent dims, data side first (models with layers).")
    proposed_likelihood = param.String(default="gaussian", doc="The likelihood the loaded data's values call for.")
    likelihood_reason = param.String(default="", doc="One line: why the data call for the proposed likelihood "
                                                     "(plain text; '' for real values).")
    errors = param.List(default=["Load data first."])
    notes = param.List(default=[])
    locked = param.Boolean(default=False, doc="True while a training runs.")

    #: What a user chooses on the model card (a lesson step's or a saved file's settings too).
    CHOSEN = tuple(f.name for f in CONFIG_SETTINGS) + ("layers",)
    #: The choices that decide the model and its start (a prepared start is made again when one changes).
    START = tuple(name for name in CHOSEN if name not in RUN_LENGTH)

    def __init__(self, budget: Budget | None = None, **params):
        super().__init__(**params)
        self.budget = budget or Budget.from_env()
        self._shape: tuple[int, int] | None = None
        self._extra_notes: list[str] = []
        self._standardised = False  # the loaded data are standardised (not their values as loaded)
        self.timing = None  # catalog.StartTiming: the page's measured start (set_timing)
        self._adjusting = False
        self.param.watch(self._on_change, list(self.CHOSEN))

    @property
    def spec(self) -> catalog.ModelSpec:
        return catalog.spec(self.model)

    def kernel_options(self) -> dict:
        """Label -> key of the kernels the chosen model takes."""
        return {KERNELS[k]: k for k in self.spec.kernels}

    def layer_dims(self) -> tuple:
        """The parsed ``layers`` text; ValueError says what is wrong with it."""
        return catalog.parse_layer_dims(self.layers)

    def config(self) -> ModelConfig:
        latent_dim, layer_dims = int(self.latent_dim), None
        if "layers" in self.spec.inputs:
            try:
                layer_dims = self.layer_dims()
                latent_dim = layer_dims[-1]  # the top layer is the one the latent map shows
            except ValueError:
                layer_dims = ()  # catalog.check reports it
        chosen = {f.name: type(f.default)(getattr(self, f.name)) for f in CONFIG_SETTINGS}
        return ModelConfig(**{**chosen, "latent_dim": latent_dim, "layer_dims": layer_dims,
                              "likelihood": self.likelihood if self.takes_likelihood() else "gaussian"})

    def apply(self, config: ModelConfig, keep: tuple = (), why: str = "") -> None:
        """Take ``config``'s settings (but ``keep``); a value the card cannot show (e.g. Q=1, below its
        range) is left as it is and logged with ``why``."""
        for f in CONFIG_SETTINGS:
            if f.name in keep:
                continue
            try:
                setattr(self, f.name, getattr(config, f.name))
            except ValueError as exc:
                logger.info("%s: setting %s not applied (%s)", why or "Settings", f.name, exc)
        self.validate()

    def takes_likelihood(self) -> bool:
        """The chosen model trains with a likelihood other than the Gaussian one."""
        return len(self.spec.likelihoods) > 1

    def propose_likelihood(self, proposal, standardised: bool = False) -> None:
        """The loaded data call for ``proposal`` (`data.value_kind.LikelihoodProposal`): choose it,
        unless the data are ``standardised`` (a non-Gaussian likelihood models the values as loaded:
        the Gaussian one stays, and the note says how to use the proposed one)."""
        self._standardised = bool(standardised)
        with param.parameterized.batch_call_watchers(self):
            self.proposed_likelihood = proposal.likelihood
            self.likelihood_reason = proposal.reason
            self.likelihood = "gaussian" if self._standardised else proposal.likelihood
        self.validate(self._extra_notes)

    def likelihood_note(self) -> str:
        """One line for the likelihood choice (plain text): why it is proposed, why it is not
        available for the chosen model, or '' when there is nothing to say."""
        label = lambda key: LIKELIHOODS[key].split(" (")[0]  # noqa: E731
        if not self.takes_likelihood():
            if self.proposed_likelihood == "gaussian":
                return ""
            others = catalog.likelihood_models(self.proposed_likelihood)
            return (f"{self.likelihood_reason} The {self.spec.display_name} takes only the Gaussian likelihood: "
                    f"choose {others} for a {label(self.proposed_likelihood)} one.")
        if self.proposed_likelihood == "gaussian":
            return ""
        if self._standardised and self.likelihood == "gaussian":
            return (f"{self.likelihood_reason} Untick 'Standardise features' on the Data card to use a "
                    f"{label(self.proposed_likelihood)} likelihood (it models the values as loaded).")
        if self.likelihood != self.proposed_likelihood:
            return f"Proposed: {label(self.proposed_likelihood)}. {self.likelihood_reason}"
        return self.likelihood_reason
    def set_timing(self, timing) -> None:
        """The page timed a prepared start (catalog.StartTiming): estimates and the proposal follow it."""
        self.timing = timing
        self.validate(self._extra_notes)

    def estimate(self, model: str | None = None) -> catalog.Estimate | None:
        """The default run of the current settings (with ``model`` instead, if given) on the loaded data."""
        if self._shape is None:
            return None
        config = self.config()
        if model is not None and model != config.model:
            config = dataclasses.replace(config, model=model, optimizer=catalog.spec(model).optimizers[0])
        return catalog.estimate(config, *self._shape, self.timing)

    def eta_note(self) -> str:
        """One line: the estimated run until converged of each model that can train on these data
        ('' before data are loaded); measured once the page has timed a start here."""
        if self._shape is None:
            return ""
        parts = []
        for key, spec in CATALOG.items():
            if spec.inputs:  # needs a time per row, views or layers: not a like-for-like figure
                continue
            config = dataclasses.replace(self.config(), model=key, optimizer=spec.optimizers[0])
            if catalog.check(config, *self._shape, budget=self.budget)[0]:
                continue  # cannot train here (too big for this server, M > N, ...)
            parts.append(f"{spec.short_name} {catalog.format_seconds(self.estimate(key).seconds)}")
        how = "measured on these data" if self.timing is not None else "estimated"
        run = "until converged" if self.until_converged else f"of {self.max_iters} iterations"
        return f"A run {run} ({how}): " + " · ".join(parts) + "."

    def set_data_shape(self, n: int, d: int) -> None:
        self._shape = (int(n), int(d))
        self.timing = None  # measured on other data: the page times these data's start next
        self.param.num_inducing.bounds = (1, max(1, int(n)))
        if self.num_inducing > n:
            self.num_inducing = max(1, min(int(n), 30))
        self.validate()

    def validate(self, extra_notes: list[str] | None = None) -> bool:
        if self._shape is None:
            self.errors = ["Load data first."]
            return False
        self._extra_notes = list(extra_notes or [])
        config = self.config()
        errors, notes = catalog.check(config, *self._shape, budget=self.budget)
        errors += self._likelihood_data_errors(config.likelihood)
        self.suggestion = catalog.suggestion(self.config(), *self._shape, self.timing)
        if "layers" in self.spec.inputs:
            try:
                self.layer_dims()
            except ValueError as exc:  # the specific reason, instead of the generic one
                errors = [str(exc)] + [e for e in errors if "each layer's latent dimensions" not in e]
        self.notes = list(extra_notes or []) + notes + [self.eta_note()]
        self.errors = errors
        return not errors

    def _likelihood_data_errors(self, likelihood: str) -> list[str]:
        """Why the loaded data cannot be modelled with ``likelihood`` ([] when they can)."""
        if likelihood == "gaussian":
            return []
        label = LIKELIHOODS[likelihood].split(" (")[0]
        fits = {"bernoulli": ("bernoulli",), "poisson": ("bernoulli", "poisson")}[likelihood]
        if self.proposed_likelihood not in fits:
            what = "0 or 1" if likelihood == "bernoulli" else "whole numbers of at least 0 (counts)"
            return [f"A {label} likelihood needs every value to be {what}; these data are not: "
                    "choose the Gaussian likelihood."]
        if self._standardised:
            return [f"A {label} likelihood models the values as loaded, not standardised ones: untick "
                    "'Standardise features' on the Data card, or choose the Gaussian likelihood."]
        return []

    def _on_change(self, event):
        if self._adjusting:
            return
        notes = []
        if event.name == "model" and self.kernel not in self.spec.kernels:
            old = KERNELS[self.kernel]
            self._adjusting = True
            try:
                self.kernel = self.spec.kernels[0]
            finally:
                self._adjusting = False
            notes.append(f"{old} has no closed-form expectations in the {self.spec.display_name}; "
                         f"switched to {KERNELS[self.kernel]}.")
        if event.name == "model" and self.optimizer not in self.spec.optimizers:
            self._adjusting = True
            try:
                self.optimizer = self.spec.optimizers[0]
            finally:
                self._adjusting = False
        self.validate(notes)


for _f in CONFIG_SETTINGS:
    ModelSettings.param.add_parameter(_f.name, _setting(_f))
