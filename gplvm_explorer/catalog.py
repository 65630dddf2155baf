"""What the app can train: one :class:`ModelSpec` per model, kernels, initialisations, optimisers.

The UI asks this catalog -- which kernels a model takes, whether it has
inducing points, what its objective is called, what it would cost -- and
never compares model names.  A new model is one more entry in ``CATALOG``.

Costs are rough, deliberately pessimistic estimates used to refuse a
training that would not fit the per-session :class:`Budget` before it starts
(the exact GP-LVM needs O(N^2) memory and O(N^3) time per iteration; the
collapsed models O(N M + M^2) memory and O(N M^2 Q) time).
"""
from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from engine.build import view_split

logger = logging.getLogger(__name__)

__all__ = [
    "Budget",
    "CATALOG",
    "Cost",
    "INITS",
    "KERNELS",
    "LIKELIHOODS",
    "ModelConfig",
    "ModelSpec",
    "OPTIMIZERS",
    "budget_excess",
    "check",
    "format_bytes",
    "open_excess",
    "parse_layer_dims",
    "spec",
    "suggestion",
    "view_split",
]

#: Kernel families: key -> label shown to people.
KERNELS = {
    "rbf": "RBF (ARD)",
    "linear": "Linear (ARD)",
    "matern32": "Matérn 3/2 (ARD)",
    "matern52": "Matérn 5/2 (ARD)",
    "mlp": "MLP",
}
INITS = {"pca": "PCA", "random": "Random", "isomap": "Isomap"}
OPTIMIZERS = {"lbfgs": "L-BFGS", "scg": "Scaled conjugate gradients", "adam": "Adam",
              "svi": "Stochastic (SVI, minibatches)"}
FULL_BATCH = ("lbfgs", "scg", "adam")  # optimisers of the models that see all rows per iteration
#: Noise models (likelihoods): key -> label shown to people (Lawrence 2005, section 5).
LIKELIHOODS = {"gaussian": "Gaussian (real values)", "bernoulli": "Bernoulli (binary 0/1)",
               "poisson": "Poisson (counts)"}
_ANY_LIKELIHOOD = tuple(LIKELIHOODS)  # the models with an explicit q(u) (Bayesian) or a Laplace fit (exact)

try:  # the engine states how many points Isomap accepts
    from engine.init import ISOMAP_MAX_POINTS
except ImportError:  # pragma: no cover - older engine
    ISOMAP_MAX_POINTS = 3000

_BYTES = 8  # float64

#: The default run: at most this many iterations, ending sooner once the bound has converged
#: (engine.Convergence(): the engine's default rule).
DEFAULT_MAX_ITERS = 5000


#: Field metadata of a `ModelConfig` entry that is an extra input of a model (ModelSpec.inputs), not a
#: setting of the model card (state.settings.ModelSettings has one parameter per other field).
INPUT = {"input": True}
#: The fields that say how long a run goes on: they leave the model and its start alone (`ModelConfig.model_key`).
RUN_LENGTH = ("max_iters", "until_converged")


@dataclass(frozen=True)
class ModelConfig:
    """Everything needed to build and fit one model (plain values only)."""

    model: str = "bayesian"
    kernel: str = "rbf"
    bias: bool = True
    white: bool = True
    latent_dim: int = 5
    num_inducing: int = 30
    init: str = "pca"
    optimizer: str = "lbfgs"
    max_iters: int = DEFAULT_MAX_ITERS  # the cap: the run ends sooner once converged (until_converged)
    seed: int = 0
    until_converged: bool = True  # end when the bound has converged (engine.Convergence); else run max_iters
    # extra inputs of the models that need them (ModelSpec.inputs); plain values, not the model card's
    times: tuple | None = field(default=None, metadata=INPUT)  # "time": one time per row (None: 0, 1, 2, ...)
    time_name: str = field(default="", metadata=INPUT)  # where the times came from, for describe()
    view_sizes: tuple | None = field(default=None, metadata=INPUT)  # "views": columns per view, in view order
    view_names: tuple | None = field(default=None, metadata=INPUT)  # one name per view (describe(), the panels)
    # "layers": latent dims of each layer from the data side up (deep GP; the card's ``layers`` text)
    layer_dims: tuple | None = field(default=None, metadata=INPUT)
    batch_size: int = 256  # rows per iteration of the models trained by minibatches (ModelSpec.minibatch)
    likelihood: str = "gaussian"  # the noise model (LIKELIHOODS): one of the spec's ``likelihoods``

    @property
    def spec(self) -> "ModelSpec":
        return spec(self.model)

    def model_key(self) -> "ModelConfig":
        """What decides the model and its start: everything but the run's length (`RUN_LENGTH`)."""
        return dataclasses.replace(self, max_iters=0, until_converged=True)

    def convergence(self):
        """The rule that ends the run once the bound has converged (engine.Convergence), or None:
        none when ``until_converged`` is off, and none for minibatch models (their objective is an
        estimate from one minibatch)."""
        if not self.until_converged or self.spec.minibatch or self.optimizer == "svi":
            return None
        import engine

        return engine.Convergence()

    def settings(self):
        """What the engine's factory builds the model from (:class:`engine.build.Settings`)."""
        from engine.build import Settings

        return Settings(model=self.model, latent_dim=int(self.latent_dim), kernel=self.kernel, bias=bool(self.bias),
                        white=bool(self.white), num_inducing=int(self.num_inducing), init=self.init,
                        seed=int(self.seed), batch_size=int(self.batch_size), likelihood=self.likelihood)

    def describe(self) -> str:
        """One line, e.g. ``Bayesian GP-LVM, RBF (ARD) + bias + white, Q=5, M=30, ...``."""
        s = self.spec
        kern = KERNELS.get(self.kernel, self.kernel)
        if self.bias:
            kern += " + bias"
        if self.white:
            kern += " + white"
        parts = [s.display_name, kern, f"Q={self.latent_dim}"]
        if "layers" in s.inputs and self.layer_dims:
            parts[-1] = "layers=" + ", ".join(str(q) for q in self.layer_dims) + " (data side first)"
        if s.uses_inducing:
            parts.append(f"M={self.num_inducing}")
        if s.minibatch:
            parts.append(f"batch={self.batch_size}")
        if self.likelihood != "gaussian":
            parts.append(f"likelihood={LIKELIHOODS.get(self.likelihood, self.likelihood).split(' (')[0]}")
        if "time" in s.inputs:
            parts.append(f"time={self.time_name or 'row order'}")
        if "views" in s.inputs and self.view_sizes:
            names = self.view_names or tuple(f"view {v}" for v in range(len(self.view_sizes)))
            parts.append("views=" + " + ".join(f"{n} ({d})" for n, d in zip(names, self.view_sizes)))
        parts += [f"init={INITS.get(self.init, self.init)}",
                  f"optimiser={OPTIMIZERS.get(self.optimizer, self.optimizer)}",
                  f"at most {self.max_iters} iterations, until converged" if self.convergence() is not None
                  else f"{self.max_iters} iterations", f"seed={self.seed}"]
        return ", ".join(parts)


@dataclass(frozen=True)
class Cost:
    """Estimated peak memory (bytes) and time per iteration (seconds) of one fit."""

    memory_bytes: float
    seconds_per_iteration: float


@dataclass(frozen=True)
class ModelSpec:
    """One trainable model: how to name it, build it and what it costs.

    ``memory`` and ``seconds`` are functions of ``(N, D, Q, M)``.
    ``handles_missing``: the model trains on data with missing (NaN) cells as
    they are; for the others the app fills or drops them first.
    ``inputs``: what the model needs besides the data matrix -- ``"time"``
    (one time per row, :attr:`ModelConfig.times`) or ``"views"`` (the columns
    split into views, :attr:`ModelConfig.view_sizes`).  ``panel``: the key of
    the extra view the page shows for this model's results (``""``: none).
    Every model is built by the engine's one factory (:func:`engine.build.build`),
    as the command line and scikit-learn build theirs.  ``distributable``: the
    engine class takes ``backend=`` (its row sums can run on a dask cluster).
    """

    key: str
    display_name: str
    objective_name: str
    engine_class: str  # attribute of the ``engine`` package
    kernels: tuple
    uses_inducing: bool
    uncertain_latents: bool  # q(X) with variances (Bayesian) or points
    memory: Callable[[int, int, int, int], float] = field(repr=False)
    seconds: Callable[[int, int, int, int], float] = field(repr=False)
    cheaper: str = ""  # what to suggest when it is too big
    handles_missing: bool = False  # trains on NaN entries as missing (others need complete data)
    inputs: tuple = ()  # "time", "views"
    panel: str = ""  # "dynamics", "views"
    optimizers: tuple = FULL_BATCH  # what it can be trained with (the first is its default)
    minibatch: bool = False  # an iteration is one minibatch of ModelConfig.batch_size rows (progress in epochs)
    comfortable: Cost | None = None  # beyond this memory (or a default run of minutes), propose ``scales_to``
    scales_to: str = ""  # key of the model to propose for data beyond ``comfortable``
    distributable: bool = False  # the engine class takes backend= (e.g. engine.DaskBackend)
    short_name: str = ""  # for lists of models (the display name when empty)
    likelihoods: tuple = ("gaussian",)  # the noise models it takes (LIKELIHOODS; the first is the default)

    def __post_init__(self):
        if not self.short_name:
            object.__setattr__(self, "short_name", self.display_name)

    def comfortable_rows(self, config: "ModelConfig", d: int, timing: "StartTiming | None" = None) -> int | None:
        """The most rows this model trains comfortably with ``config``: its default run within
        PROPOSE_ABOVE_SECONDS (measured with ``timing`` when given) and its memory within
        ``comfortable``; None: no limit."""
        if self.comfortable is None:
            return None

        def fits(n):
            return (self.config_cost(config, n, d).memory_bytes <= self.comfortable.memory_bytes
                    and estimate(config, n, d, timing).seconds <= PROPOSE_ABOVE_SECONDS)

        if not fits(1):
            return 0
        lo, hi = 1, 2
        while fits(hi) and hi < 10 ** 12:
            lo, hi = hi, hi * 2
        while hi - lo > 1:  # costs grow with N: bisect
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid)
        return lo

    def cost(self, n: int, d: int, q: int, m: int) -> Cost:
        m = m if self.uses_inducing else 0
        return Cost(float(self.memory(n, d, q, m)), float(self.seconds(n, d, q, m)))

    def config_cost(self, config: "ModelConfig", n: int, d: int) -> Cost:
        """The cost of ``config``: for a stack of layers, the sum of one collapsed layer each
        (layer l maps Q_l inputs to the layer below: D outputs for the first, Q_{l-1} above)."""
        m = int(config.num_inducing)
        if "layers" in self.inputs and config.layer_dims:
            outs = (d,) + tuple(config.layer_dims[:-1])
            costs = [self.cost(n, o, int(q), m) for o, q in zip(outs, config.layer_dims)]
            return Cost(sum(c.memory_bytes for c in costs), sum(c.seconds_per_iteration for c in costs))
        return self.cost(n, d, int(config.latent_dim), m)

    def build(self, Y: np.ndarray, config: ModelConfig, backend=None):
        """The engine model (not fitted) this spec and ``config`` describe (:func:`engine.build.build`).

        ``backend`` (an engine backend) is used only when the spec is ``distributable`` and the
        likelihood Gaussian (the backend sums the Gaussian bound's statistics).
        """
        from engine.build import build

        distributed = self.distributable and config.likelihood == "gaussian"
        return build(Y, config.settings(), times=config.times, view_sizes=config.view_sizes,
                     layer_dims=config.layer_dims, backend=backend if distributed else None)


# Calibrated on a 2-core machine (20,000 x 30, Q=10, M=50: ~0.25 s per L-BFGS iteration
# of the Bayesian model); iterations take a few evaluations, so these are per iteration.
_COLLAPSED_RATE = 5e-10  # seconds per N M^2 Q
_EXACT_RATE = 3e-10  # seconds per N^3 (Cholesky plus the dense gradient products)


def _collapsed_memory(n, d, q, m):
    # data, Psi1 and its gradient, latent means/variances, optimiser history (L-BFGS keeps
    # 50 pairs of parameter-sized vectors), M x M factors; plus a fixed overhead
    params = n * q * 2 + m * q + q + 3
    return _BYTES * (3 * n * d + 4 * n * m + 6 * n * q + 110 * params + 20 * m * m) + 50e6


def _gpds_memory(n, d, q, m):
    # per latent dimension the N x N time kernel factors S_q and B_q^-1, plus their work arrays
    return _collapsed_memory(n, d, q, m) + _BYTES * (3 * q + 4) * n * n


MAX_LAYERS = 4


def parse_layer_dims(text) -> tuple:
    """``"5, 2"`` -> ``(5, 2)``: each layer's latent dims from the data side up; ValueError says why not."""
    raw = str(text if text is not None else "").replace(";", ",").strip()
    if not raw:
        raise ValueError("Give each layer's latent dimensions, data side first, e.g. \"5, 2\".")
    parts = [p.strip() for p in raw.split(",")]
    dims = []
    for p in parts:
        try:
            q = int(p)
        except ValueError:
            raise ValueError(f"Layer dimensions are whole numbers separated by commas (e.g. \"5, 2\"); "
                             f"could not read {p[:20]!r}.") from None
        if not 1 <= q <= 20:
            raise ValueError(f"Each layer needs between 1 and 20 latent dimensions, got {q}.")
        dims.append(q)
    if not 1 <= len(dims) <= MAX_LAYERS:
        raise ValueError(f"Choose between 1 and {MAX_LAYERS} layers, got {len(dims)}.")
    return tuple(dims)


_SVI_BATCH = 256  # the default minibatch, for the cost per iteration


def _svi_memory(n, d, q, m):
    # the data stay where they are (a memory-mapped file is read a minibatch at a time); per row q(x_n)
    # (means, variances), their packed copy and a snapshot; per iteration a minibatch and its Psi1;
    # q(u): M x D means and an M x M factor
    b = min(n, _SVI_BATCH)
    return _BYTES * (8 * n * q + 3 * b * d + 4 * b * m + 4 * m * d + 12 * m * m) + 50e6


#: Where the collapsed models stop being comfortable: 2 GB of memory (or a default run longer than
#: PROPOSE_ABOVE_SECONDS: :func:`suggestion`).
_COMFORTABLE = Cost(memory_bytes=2e9, seconds_per_iteration=float("inf"))


def _exact_memory(n, d, q, m):
    # K, its Cholesky factor and dL/dK are N x N; plus data and optimiser history
    return _BYTES * (4 * n * n + 3 * n * d + 110 * n * q) + 50e6


CATALOG: dict[str, ModelSpec] = {
    s.key: s
    for s in (
        ModelSpec(
            key="bayesian", display_name="Bayesian GP-LVM", objective_name="ELBO",
            engine_class="BayesianGPLVM", kernels=("rbf", "linear"), uses_inducing=True,
            uncertain_latents=True, memory=_collapsed_memory,
            seconds=lambda n, d, q, m: _COLLAPSED_RATE * n * max(m, 1) ** 2 * q + 1e-7 * n * d,
            handles_missing=True, comfortable=_COMFORTABLE, scales_to="svi",
            distributable=True, likelihoods=_ANY_LIKELIHOOD,
        ),
        ModelSpec(
            key="sparse", display_name="Sparse GP-LVM", objective_name="ELBO",
            engine_class="SparseGPLVM", kernels=("rbf", "linear"), uses_inducing=True,
            uncertain_latents=False, memory=_collapsed_memory,
            seconds=lambda n, d, q, m: 0.5 * _COLLAPSED_RATE * n * max(m, 1) ** 2 * q + 1e-7 * n * d,
            handles_missing=True, comfortable=_COMFORTABLE, scales_to="svi",
            distributable=True,
        ),
        ModelSpec(
            key="svi", display_name="Bayesian GP-LVM, stochastic (SVI: minibatches, big data)",
            objective_name="ELBO", engine_class="StochasticBayesianGPLVM", kernels=("rbf", "linear"),
            uses_inducing=True, uncertain_latents=True, memory=_svi_memory,
            # one minibatch per iteration: the cost does not grow with N
            seconds=lambda n, d, q, m: 3 * _COLLAPSED_RATE * min(n, _SVI_BATCH) * max(m, 1) ** 2 * q
            + 3e-7 * min(n, _SVI_BATCH) * d,
            optimizers=("svi",), minibatch=True, short_name="Stochastic (SVI)", likelihoods=_ANY_LIKELIHOOD,
        ),
        ModelSpec(
            key="gplvm", display_name="GP-LVM (exact)", objective_name="log-likelihood",
            engine_class="GPLVM", kernels=tuple(KERNELS), uses_inducing=False,
            uncertain_latents=False, memory=_exact_memory,
            seconds=lambda n, d, q, m: _EXACT_RATE * n ** 3 + 2e-9 * n * n * (d + q),
            cheaper="the sparse or Bayesian GP-LVM (their cost grows linearly with N)",
            likelihoods=_ANY_LIKELIHOOD,
        ),
        ModelSpec(
            key="gpds", display_name="GP-LVM with dynamics (GPDS)", objective_name="ELBO",
            engine_class="DynamicalBGPLVM", kernels=("rbf", "linear"), uses_inducing=True,
            uncertain_latents=True, memory=_gpds_memory,
            seconds=lambda n, d, q, m: (_COLLAPSED_RATE * n * max(m, 1) ** 2 * q + 1e-7 * n * d
                                        + 1e-9 * q * n ** 3),
            cheaper="fewer frames (its cost grows with N^3 per latent dimension), or a static model",
            inputs=("time",), panel="dynamics",
        ),
        ModelSpec(
            key="mrd", display_name="MRD (shared and private latent dims of several views)",
            objective_name="ELBO", engine_class="MRD", kernels=("rbf", "linear"), uses_inducing=True,
            uncertain_latents=True,
            memory=lambda n, d, q, m: 2 * _collapsed_memory(n, d, q, m),
            seconds=lambda n, d, q, m: 2 * _COLLAPSED_RATE * n * max(m, 1) ** 2 * q + 2e-7 * n * d,
            inputs=("views",), panel="views",
        ),
        ModelSpec(
            key="deep", display_name="Deep GP (stacked Bayesian GP-LVMs)", objective_name="ELBO",
            engine_class="DeepGP", kernels=("rbf",), uses_inducing=True, uncertain_latents=True,
            # per layer; ModelSpec.config_cost sums the layers
            memory=_collapsed_memory,
            seconds=lambda n, d, q, m: _COLLAPSED_RATE * n * max(m, 1) ** 2 * q + 1e-7 * n * d,
            cheaper="fewer or smaller layers, fewer inducing points M, or a subsample of the data",
            inputs=("layers",), panel="deep",
        ),
    )
}


def spec(key: str) -> ModelSpec:
    try:
        return CATALOG[key]
    except KeyError:
        raise ValueError(f"Expected a model in {sorted(CATALOG)}, got {key!r} instead.") from None


# --------------------------------------------------------------------------
# The measured cost model: the page times the start it prepares, the estimates follow
# --------------------------------------------------------------------------

#: Objective evaluations per iteration, per optimiser (L-BFGS: the line search's occasional extra
#: evaluation; SCG: a curvature probe and a step; Adam: one).
EVALUATIONS_PER_ITERATION = {"lbfgs": 1.1, "scg": 2.0, "adam": 1.0, "svi": 1.0}

#: Iterations the default run (until converged) takes, for its ETA before it starts: the median of
#: the data sets measured (bundled samples and oil flow, the default settings, the default rule).
TYPICAL_ITERATIONS = 2000

#: Propose the stochastic model when the chosen model's default run would take longer than this.
PROPOSE_ABOVE_SECONDS = 120.0


@dataclass(frozen=True)
class StartTiming:
    """What the page measured when it prepared a start: ``config`` on ``n`` x ``d`` data.

    ``seconds_per_evaluation``: one objective-and-gradient evaluation in the steady state (a
    second one: the first, in ``first_seconds`` with the model's build where the page prepares it,
    may include one-off costs); numba's compilation is done at server start, apart.
    ``objective``: the value at the start.
    """

    config: ModelConfig
    n: int
    d: int
    seconds_per_evaluation: float
    first_seconds: float
    objective: float

    def seconds_per_iteration(self) -> float:
        return self.seconds_per_evaluation * EVALUATIONS_PER_ITERATION.get(self.config.optimizer, 1.0)


@dataclass(frozen=True)
class Estimate:
    """The default run of a config: seconds per iteration, the iterations expected, their seconds.

    ``measured``: scaled from a :class:`StartTiming` on this machine and these data (else the
    catalog's formulas alone); ``timed``: the timing was of this very model.
    """

    seconds_per_iteration: float
    iterations: int
    measured: bool = False
    timed: bool = False

    @property
    def seconds(self) -> float:
        return self.seconds_per_iteration * self.iterations


def time_start(model, config: ModelConfig, n: int, d: int, stop=None, first_seconds: float | None = None) -> StartTiming:
    """Time one evaluation of ``model``'s start (``engine.fit(max_iters=0)``: the jitter, one
    evaluation): the steady cost of an evaluation on this machine.  Unless ``first_seconds`` says
    how long the caller's own first evaluation took (the model is then already evaluated once),
    the start is evaluated once before, as its fit will, and that is timed apart."""
    import time

    import engine

    if first_seconds is None:
        t0 = time.perf_counter()
        engine.fit(model, optimizer=config.optimizer, max_iters=0, stop=stop)
        first_seconds = time.perf_counter() - t0
    t1 = time.perf_counter()
    result = engine.fit(model, optimizer=config.optimizer, max_iters=0, stop=stop)
    return StartTiming(config=config, n=int(n), d=int(d), seconds_per_evaluation=time.perf_counter() - t1,
                       first_seconds=float(first_seconds), objective=float(result.objective))


def expected_iterations(config: ModelConfig) -> int:
    """Iterations of a run with ``config``: all ``max_iters`` without a convergence rule, else the typical count."""
    cap = int(config.max_iters)
    return min(cap, TYPICAL_ITERATIONS) if config.convergence() is not None else cap


def estimate(config: ModelConfig, n: int, d: int, timing: StartTiming | None = None) -> Estimate:
    """The default run of ``config`` on ``n`` x ``d`` data: from the catalog's formulas, scaled to
    this machine and these data by ``timing`` (the page's measured start of some model) when given."""
    formula = spec(config.model).config_cost(config, n, d).seconds_per_iteration
    iterations = expected_iterations(config)
    if timing is None or timing.seconds_per_evaluation <= 0:
        return Estimate(formula, iterations)
    timed = timing.config.model_key() == config.model_key() and (timing.n, timing.d) == (n, d)
    if timed:
        return Estimate(timing.seconds_per_iteration(), iterations, measured=True, timed=True)
    reference = spec(timing.config.model).config_cost(timing.config, timing.n, timing.d).seconds_per_iteration
    factor = timing.seconds_per_iteration() / reference if reference > 0 else 1.0
    return Estimate(formula * factor, iterations, measured=True)


def suggestion(config: ModelConfig, n: int, d: int, timing: StartTiming | None = None) -> str:
    """Key of the model to propose instead of ``config.model`` for ``n`` rows (``""``: none): the
    catalog's ``scales_to`` when the default run would take more than PROPOSE_ABOVE_SECONDS (measured
    with ``timing`` when given) and the proposed model's less than half that, or when the chosen
    model needs more memory than is comfortable."""
    s = CATALOG.get(config.model)
    if s is None or not s.scales_to or s.scales_to not in CATALOG:
        return ""
    if s.comfortable is not None:
        if s.config_cost(config, n, d).memory_bytes > s.comfortable.memory_bytes:
            return s.scales_to
    mine = estimate(config, n, d, timing).seconds
    if mine <= PROPOSE_ABOVE_SECONDS:
        return ""
    other = dataclasses.replace(config, model=s.scales_to, optimizer=spec(s.scales_to).optimizers[0])
    # only a model that would finish in well under the time (a slow machine slows both alike)
    return s.scales_to if estimate(other, n, d, timing).seconds < mine / 2 else ""


# --------------------------------------------------------------------------
# Budget and validation
# --------------------------------------------------------------------------

def _machine_memory() -> float:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return 8e9


def parse_bytes(text: str) -> float:
    """``"4G"``, ``"512M"``, ``"2.5e9"`` -> bytes."""
    s = str(text).strip().upper().removesuffix("B")
    mult = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}.get(s[-1:], None)
    if mult is not None:
        s = s[:-1]
    value = float(s) * (mult or 1.0)
    if not value > 0:
        raise ValueError(f"Expected a positive size, got {text!r} instead.")
    return value


def format_seconds(seconds: float) -> str:
    """An estimated duration for people: '≈ 40 s', '≈ 7 min', '≈ 2.5 h'."""
    if seconds < 90:
        return f"≈ {max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"≈ {round(seconds / 60)} min"
    return f"≈ {seconds / 3600:.1f} h"


def format_bytes(n: float) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


@dataclass(frozen=True)
class Budget:
    """What one session may spend on one training.

    ``memory_bytes`` defaults to a quarter of the machine's memory;
    ``seconds_per_iteration`` to 60 s.  The server sets them with the
    environment variables ``GPLVM_EXPLORER_SESSION_MEMORY`` (e.g. ``4G``) and
    ``GPLVM_EXPLORER_MAX_SECONDS_PER_ITERATION``.
    """

    memory_bytes: float
    seconds_per_iteration: float = 60.0
    #: Whose memory it is, in the messages: "... more than the 5.9 GB {holder}".
    holder: str = "a session may use"

    @classmethod
    def machine(cls) -> "Budget":
        """The whole machine's memory and no time limit: the command line's fit has the machine to itself."""
        return cls(_machine_memory(), float("inf"), "this machine has")

    @classmethod
    def from_env(cls, environ=None) -> "Budget":
        env = os.environ if environ is None else environ
        memory = 0.25 * _machine_memory()
        seconds = 60.0
        raw = env.get("GPLVM_EXPLORER_SESSION_MEMORY")
        if raw:
            try:
                memory = parse_bytes(raw)
            except ValueError:
                logger.warning("Ignoring GPLVM_EXPLORER_SESSION_MEMORY=%r (not a size)", raw)
        raw = env.get("GPLVM_EXPLORER_MAX_SECONDS_PER_ITERATION")
        if raw:
            try:
                seconds = float(raw)
            except ValueError:
                logger.warning("Ignoring GPLVM_EXPLORER_MAX_SECONDS_PER_ITERATION=%r", raw)
        return cls(memory, seconds)


def budget_excess(s: ModelSpec, cost: Cost, n: int, budget: Budget) -> str:
    """Why ``cost`` of model ``s`` on ``n`` rows does not fit ``budget`` (a clause), or '' when it fits."""
    if cost.memory_bytes > budget.memory_bytes:
        return (f"the {s.display_name} on N={n:,} points needs about {format_bytes(cost.memory_bytes)} of memory, "
                f"more than the {format_bytes(budget.memory_bytes)} {budget.holder}")
    if cost.seconds_per_iteration > budget.seconds_per_iteration:
        return (f"the {s.display_name} on N={n:,} points would take about {cost.seconds_per_iteration:.0f} s per "
                f"iteration (limit {budget.seconds_per_iteration:.0f} s)")
    return ""


def open_excess(key: str, n: int, d: int, q: int, m: int, budget: Budget | None = None) -> str:
    """Why a saved model ``key`` of these sizes would not be trained here (a clause), or '' when it would.

    The training's own guard, applied to a model file before it is built: more
    inducing points than rows, or a cost over the session's ``budget``.
    """
    s = spec(key)
    if s.uses_inducing and m > n:
        return f"its M={m:,} inducing points are more than its N={n:,} data rows"
    return budget_excess(s, s.cost(n, d, q, m), n, budget or Budget.from_env())


def likelihood_models(likelihood: str) -> str:
    """The models that train with ``likelihood``, as a phrase ("the A, the B or the C")."""
    names = [f"the {m.display_name}" for m in CATALOG.values() if likelihood in m.likelihoods]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def likelihood_errors(config: ModelConfig) -> list[str]:
    """Why ``config``'s model cannot train with its likelihood ([] when it can)."""
    s, lik = spec(config.model), config.likelihood
    if lik not in LIKELIHOODS:
        return [f"Expected a likelihood in {sorted(LIKELIHOODS)}, got {lik!r} instead."]
    label = LIKELIHOODS[lik].split(" (")[0]
    if lik not in s.likelihoods:
        return [f"The {s.display_name} takes only the Gaussian likelihood; a {label} one needs "
                f"{likelihood_models(lik)}."]
    if lik != "gaussian" and s.uncertain_latents and config.kernel != "rbf":
        # the explicit q(u) needs the closed-form expectations of the RBF kernel
        return [f"The {s.display_name} with a {label} likelihood takes the RBF kernel (with bias and white "
                "noise, if you like); choose it, or the Gaussian likelihood."]
    return []


def check(config: ModelConfig, n: int, d: int, budget: Budget | None = None) -> tuple[list[str], list[str]]:
    """Validate ``config`` for data of shape ``(n, d)`` within ``budget``.

    Returns ``(errors, notes)``: errors make training impossible (shown with
    the Train button); notes are information (cost, adjustments).
    """
    errors: list[str] = []
    notes: list[str] = []
    if config.model not in CATALOG:
        return [f"Expected a model in {sorted(CATALOG)}, got {config.model!r} instead."], notes
    s = spec(config.model)
    if config.kernel not in s.kernels:
        allowed = ", ".join(KERNELS[k] for k in s.kernels)
        errors.append(f"The {s.display_name} needs closed-form kernel expectations; choose one of: {allowed}.")
    if config.optimizer not in s.optimizers:
        allowed = ", ".join(OPTIMIZERS[o] for o in s.optimizers)
        errors.append(f"The {s.display_name} trains with: {allowed}.")
    errors += likelihood_errors(config)
    if s.minibatch and config.batch_size < 1:
        errors.append("The minibatch needs at least 1 row.")
    if config.latent_dim < 1:
        errors.append("The latent dimensionality Q must be at least 1.")
    if "layers" in s.inputs and not config.layer_dims:
        errors.append("Give each layer's latent dimensions, data side first, e.g. \"5, 2\".")
    if n < 3:
        errors.append(f"Need at least 3 data points to train, got {n}.")
    if s.uses_inducing:
        if config.num_inducing < 1:
            errors.append("The number of inducing points M must be at least 1.")
        elif config.num_inducing > n:
            errors.append(f"M={config.num_inducing} inducing points is more than the {n} data points; "
                          f"choose M ≤ {n}.")
    if config.init == "isomap" and n > ISOMAP_MAX_POINTS:
        errors.append(f"Isomap initialisation is limited to {ISOMAP_MAX_POINTS} points (N={n}); "
                      "use PCA or subsample the data.")
    if config.max_iters < 1:
        errors.append("The number of iterations must be at least 1.")
    cost = s.config_cost(config, n, d)
    budget = budget or Budget.from_env()
    instead = s.cheaper or "fewer inducing points M, a smaller Q, or a subsample of the data"
    bigger = suggestion(config, n, d)
    if bigger:  # the page proposes it beside its own button (views.svi); not repeated in the notes
        instead = f"the {spec(bigger).display_name}, or {instead}"
    excess = budget_excess(s, cost, n, budget)
    if excess:
        kind = "Too big" if cost.memory_bytes > budget.memory_bytes else "Too slow"
        errors.append(f"{kind} for this server: {excess}. Use {instead}.")
    elif cost.seconds_per_iteration > 2.0:
        notes.append(f"Expect about {cost.seconds_per_iteration:.0f} s per iteration "
                     f"({format_bytes(cost.memory_bytes)} of memory).")
    return errors, notes
