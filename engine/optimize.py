"""One optimiser driver for every model: L-BFGS, scaled conjugate gradients, Adam.

``fit(model, optimizer=...)`` maximises ``model``'s objective (log-likelihood
or ELBO, in nats) over its flat unconstrained parameter vector.  Internally
the optimisers minimise ``f = -objective``; everything reported (snapshots,
history, the result) is the objective itself.

The model protocol::

    model.get_free() -> (P,) array                  unconstrained parameters
    model.set_free(x)
    model.objective_and_gradient(x) -> (float, (P,) array)   objective to MAXIMISE
    model.snapshot_state() -> dict with "parameters" (name -> constrained value),
        "X_mean" (N, Q), "X_variance" (N, Q) or None, "relevance" (Q,)

What one *iteration* is, and what ``tol`` means, per optimiser:

``"lbfgs"``  one L-BFGS iteration (a new iterate accepted by its line search):
             scipy's L-BFGS-B below :data:`COMPACT_LBFGS_FROM` parameters,
             :func:`engine.lbfgs.minimize_compact` from there on (same memory,
             strong Wolfe steps and stopping rules; a third of the bookkeeping).
             ``tol`` is both ``ftol`` (relative reduction of the objective) and
             ``gtol`` (largest gradient entry), as
             ``scipy.optimize.minimize(tol=...)`` does.  Options: ``maxcor``,
             ``ftol``, ``gtol``, ``maxfun``, ``maxls``.
``"scg"``    one step of Møller's (1993) scaled conjugate gradients, accepted
             *or rejected* (a rejected step leaves the point unchanged and
             raises the scale ``lambda``); each step costs two evaluations.
             Converged when an accepted step changes the objective by less
             than ``ftol`` and no parameter by more than ``xtol`` (both default
             to ``tol``), or the gradient vanishes.  Options: ``ftol``,
             ``xtol``, ``sigma0``.
``"adam"``   one Adam step (Kingma & Ba 2015), one evaluation.  Converged when
             the largest gradient entry is at most ``tol``.  Options:
             ``learning_rate`` (0.01), ``betas`` ((0.9, 0.999)), ``eps`` (1e-8).

Until converged: with ``convergence=Convergence(window, rtol)`` a fit also ends
when the best objective rose by at most ``rtol * max(|F|, 1)`` over the last
``window`` iterations (:class:`Convergence`); ``max_iters`` is then a cap.
Every snapshot carries that relative rise (``Snapshot.change``), so a caller
can show how close the fit is, and ``FitResult.reason`` says why it ended.

The noise warm-up: from a start whose latent means explain little of the data
(random latents), an optimiser that may move the noise at once explains
everything as noise and stalls; :func:`fit` then holds the noise for
``model.warm_up_iters`` iterations first.  From a start that already explains
the data (PCA, Isomap) it does not: holding the noise there costs the
Bayesian GP-LVM hundreds of nats on oil flow (:func:`start_explains`).

Observing and interrupting a fit: ``callback(snapshot)`` runs after every
iteration; ``stop`` (a ``threading.Event``) is checked after every iteration
and before every objective evaluation, so a fit ends at most one iteration
after it is set, an unfinished iteration being abandoned; ``pause`` blocks
between iterations while it is set (``stop`` still ends the fit).  However the
fit ends -- converged, out of iterations, stopped, a non-finite value
(:class:`~engine.errors.OptimizationError`) or an exception from the model or
the callback -- the model is left at the best point accepted so far.
"""
from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize

from ._cancel import Cancelled, watching
from ._threads import single_blas_thread
from .errors import ConfigurationError, OptimizationError
from .lbfgs import minimize_compact
from .validation import integer
from .validation import integer, positive_number

OPTIMIZERS = ("lbfgs", "scg", "adam")

_PAUSE_POLL = 0.05  # seconds between checks of ``pause`` / ``stop`` while paused


@dataclass(frozen=True)
class Snapshot:
    """The state after one completed iteration, as sent to the callback.

    ``iteration`` counts completed iterations from 1; ``objective`` is the value
    being maximised at the accepted point and ``grad_norm`` the Euclidean norm
    of its gradient there; ``elapsed`` is seconds since the fit began, paused
    time excluded.  ``parameters`` (name -> constrained value), ``X_mean``
    (N, Q), ``X_variance`` (N, Q) or None and ``relevance`` (Q,) are copies of
    ``model.snapshot_state()`` at the accepted point.

    Those four are read from the model when first asked for: a callback that
    reads only the scalars pays nothing for them (copying a million rows' latents
    costs several times an SVI iteration).  A snapshot the callback keeps is
    completed when the callback returns, before the model moves on, so it holds
    its own iteration's state whenever it is read.
    """

    iteration: int
    objective: float
    grad_norm: float
    elapsed: float
    n_evaluations: int
    optimizer: str
    #: The best objective's rise over the last ``Convergence.window`` iterations over max(|F|, 1):
    #: the fit converges when it falls to ``Convergence.rtol``; NaN without a rule or before a full window.
    change: float = math.nan
    #: () -> dict of the four arrays above, read from the model at this iteration (see the class doc)
    read_state: object = field(default=None, repr=False, compare=False)

    def settle(self) -> dict:
        """The four model-state values (read now, once)."""
        state = self.__dict__.get("_state")
        if state is None:
            state = self.read_state()
            object.__setattr__(self, "_state", state)
        return state

    @property
    def parameters(self) -> dict:
        return self.settle()["parameters"]

    @property
    def X_mean(self) -> np.ndarray:
        return self.settle()["X_mean"]

    @property
    def X_variance(self) -> np.ndarray | None:
        return self.settle()["X_variance"]

    @property
    def relevance(self) -> np.ndarray:
        return self.settle()["relevance"]


@dataclass
class FitResult:
    """Outcome of :func:`fit`.

    ``objective`` is the best objective reached (the model is left there);
    ``stopped`` is True when ``stop`` ended the fit; ``converged`` when the
    :class:`Convergence` rule or the optimiser's own criterion was met;
    ``reason`` is why the fit ended: "converged" (the rule), "optimizer" (the
    optimiser ended on its own: its convergence test when ``converged``, else it
    found no step that improved the objective, e.g. a failed line search, or
    reached its evaluation limit), "max_iters", "stopped" or "jitter" (an
    internal restart); ``history`` holds one ``(iteration, objective, elapsed)``
    tuple per completed iteration; ``warm_up`` the iterations the noise was held.
    """

    objective: float
    iterations: int
    n_evaluations: int
    elapsed: float
    stopped: bool
    converged: bool
    message: str
    history: list = field(default_factory=list)
    jitter_raised: bool = False  # the last phase ended because the model raised its jitter
    reason: str = ""
    warm_up: int = 0


@dataclass(frozen=True)
class Convergence:
    """Train until the bound has converged: the best objective rose by at most
    ``rtol * max(|F|, 1)`` over the last ``window`` iterations (F the best objective now).

    A relative rule, so it means the same for a bound of -10^5 nats and one of 10^3.
    The best objective never falls, so a fit whose objective oscillates without
    progress also ends; one still rising by more than that does not.
    """

    window: int = 50
    rtol: float = 1e-5

    def __post_init__(self):
        integer(self.window, "window")
        if not (isinstance(self.rtol, (int, float, np.floating)) and self.rtol >= 0):
            raise ConfigurationError(f"Expected rtol >= 0, got {self.rtol!r} instead.")

    def change(self, best: list) -> float:
        """Relative rise of ``best`` (best objective after each iteration) over the last window; NaN before one."""
        if len(best) <= self.window:
            return math.nan
        now, then = best[-1], best[-1 - self.window]
        return (now - then) / max(abs(now), 1.0)

    def describe(self) -> str:
        return f"the bound rose by less than {self.rtol:g} of itself over {self.window} iterations"


class Stopped(Exception):
    """Raised inside the loop when ``stop`` is set; caught by :func:`fit`."""


class _Converged(Exception):
    """Raised inside the loop when the :class:`Convergence` rule is met; caught by :func:`fit`."""


class _JitterRaised(Exception):
    """Raised inside the loop when the model raised its jitter: the objective changed."""


def _copy(value):
    return None if value is None else np.array(value, dtype=float, copy=True)


class Run:
    """Bookkeeping shared by every optimiser (the three here and SVI, :mod:`engine.svi`).

    It evaluates the model (counting evaluations, rejecting non-finite values,
    honouring ``stop``), records each completed iteration (best point, history,
    snapshot, callback, pause, stop) and restores the best point at the end.
    Everything here is in terms of ``f = -objective`` (minimised).  A loop that
    moves the model itself (SVI) records ``x=None`` (the model is already at the
    point: nothing is set, no best point is kept) and passes ``copy_state=False``
    when ``model.snapshot_state()`` already returns fresh arrays.
    """

    def __init__(self, model, optimizer, x0, callback, stop, pause, after=None, convergence=None,
                 copy_state=True):
        self.model, self.optimizer = model, optimizer
        self.convergence = convergence
        self._best_trace: list = []  # best objective after each iteration of this run (the rule's window)
        self.callback, self.stop, self.pause = callback, stop, pause
        # ``after``: the FitResult of an earlier phase of the same fit, continued here
        self.iteration = after.iterations if after else 0
        self.n_evaluations = after.n_evaluations if after else 0
        self._elapsed0 = after.elapsed if after else 0.0
        self.history = list(after.history) if after else []
        # the start stands as the best point until it is evaluated and beaten
        self.best_x, self.best_f, self.best_iteration = np.array(x0, dtype=float), math.inf, 0
        self._last = None  # (x, f, g) of the latest evaluation, reused when asked again
        self._jitter = getattr(model, "jitter", None)  # part of the objective: a change restarts the run
        self._copy_state = copy_state
        self._t0 = time.perf_counter()
        self._paused = 0.0

    def elapsed(self) -> float:
        return self._elapsed0 + time.perf_counter() - self._t0 - self._paused

    def stop_requested(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    def evaluate(self, x):
        """``(f, g)`` at ``x`` for minimisation: the negated objective and gradient."""
        x = np.asarray(x, dtype=float)
        if self._last is not None and np.array_equal(x, self._last[0]):
            return self._last[1], self._last[2].copy()
        if self._last is not None and self.stop_requested():
            raise Stopped
        value, grad = self.model.objective_and_gradient(x.copy())
        self.n_evaluations += 1
        if getattr(self.model, "jitter", None) != self._jitter:
            if self._last is None:  # the start itself: this phase simply runs on the new objective
                self._jitter = self.model.jitter
            else:
                raise _JitterRaised
        grad = np.asarray(grad, dtype=float)
        if grad.shape != x.shape:
            raise ConfigurationError(f"Expected a gradient of shape {x.shape}, got {grad.shape} instead.")
        value = float(value)
        if not (math.isfinite(value) and np.all(np.isfinite(grad))):
            self._raise_non_finite(value, grad)
        f, g = -value, -grad
        self._last = (x.copy(), f, g)
        return f, g.copy()

    def start(self):
        """Evaluate the starting point; it is the best point until one beats it."""
        f0, g0 = self.evaluate(self.best_x)
        self.best_f = f0
        return f0, g0

    def record(self, x, f, g):
        """Book one completed iteration at the accepted point ``(x, f, g)``."""
        self.iteration += 1
        if x is not None and f < self.best_f:
            self.best_x, self.best_f, self.best_iteration = np.array(x, dtype=float), f, self.iteration
        t = self.elapsed()
        self.history.append((self.iteration, -f, t))
        change = math.nan
        if self.convergence is not None:
            self._best_trace.append(-self.best_f)
            change = self.convergence.change(self._best_trace)
        if self.callback is not None:
            snapshot = self._snapshot(x, f, g, t, change)
            self.callback(snapshot)
            if sys.getrefcount(snapshot) > 2:  # kept by the callback: its state is read before the model moves
                snapshot.settle()
            del snapshot
        self._wait_while_paused()
        if self.stop_requested():
            raise Stopped
        if self.convergence is not None and change <= self.convergence.rtol:
            raise _Converged

    def restore_best(self):
        self.model.set_free(self.best_x.copy())

    def _snapshot(self, x, f, g, elapsed, change=math.nan) -> Snapshot:
        if x is not None:
            self.model.set_free(np.array(x, dtype=float))
        model = self.model
        copy = _copy if self._copy_state else (lambda v: v)

        def read_state():
            state = model.snapshot_state()
            return {"parameters": {k: (copy(v) if np.ndim(v) else float(v)) for k, v in state["parameters"].items()},
                    "X_mean": copy(state["X_mean"]), "X_variance": copy(state.get("X_variance")),
                    "relevance": copy(state["relevance"])}

        return Snapshot(
            iteration=self.iteration, objective=-f, grad_norm=float(np.linalg.norm(g)),
            elapsed=elapsed, n_evaluations=self.n_evaluations, optimizer=self.optimizer, change=float(change),
            read_state=read_state)

    def _wait_while_paused(self):
        if self.pause is None or not self.pause.is_set():
            return
        began = time.perf_counter()
        while self.pause.is_set() and not self.stop_requested():
            if self.stop is not None:
                self.stop.wait(_PAUSE_POLL)
            else:
                time.sleep(_PAUSE_POLL)
        self._paused += time.perf_counter() - began

    def _raise_non_finite(self, value, grad):
        what = f"objective ({value})" if not math.isfinite(value) else (
            f"gradient ({int(np.sum(~np.isfinite(grad)))} of {grad.size} entries)")
        if not math.isfinite(self.best_f):
            where = "at the starting point; the model was left unchanged"
        else:
            where = (f"at iteration {self.iteration + 1} ({self.n_evaluations} evaluations); "
                     f"the model was left at its best point (objective {-self.best_f:.6g}, "
                     f"iteration {self.best_iteration})")
        raise OptimizationError(
            f"The {self.optimizer} optimiser met a non-finite {what} {where}. "
            "Try standardising the data, fewer inducing points or latent dimensions, "
            "a different initialisation, a smaller learning rate, or another optimiser.")


# --- the optimisers: each takes (run, x0, f0, g0, max_iters, tol, **options) and
# returns (converged, message); every completed iteration goes through run.record.

#: From this many parameters on, "lbfgs" runs :func:`engine.lbfgs.minimize_compact` instead of
#: scipy's L-BFGS-B: with 50 pairs, setulb's own work grows to rival the bound's evaluation
#: (on a 2-core AVX2 machine ~33 ms of CPU per iteration at 10^5 parameters and ~190 ms at
#: 5 x 10^5, the Bayesian GP-LVM at 50k rows, Q=5), a third of that in minimize_compact
#: (benchmarks/bench_lbfgs.py).  Below, scipy's path is kept: both are
#: the same algorithm, and small fits' iterates stay those they have been.
COMPACT_LBFGS_FROM = 100_000

# 50 stored corrections (scipy's default is 10): on latent variable models with
# ~10^4 parameters it reaches the same bound in about half the iterations.
def _lbfgs(run, x0, f0, g0, max_iters, tol, *, maxcor=50, ftol=None, gtol=None,
           maxfun=15000, maxls=20):
    def callback(intermediate_result):
        x = intermediate_result.x
        f, g = run.evaluate(x)  # the line search's last evaluation: reused, not recomputed
        run.record(x, f, g)

    ftol = tol if ftol is None else ftol
    gtol = tol if gtol is None else gtol
    if x0.size >= COMPACT_LBFGS_FROM:
        return minimize_compact(run, x0, f0, g0, max_iters, maxcor=maxcor, ftol=ftol, gtol=gtol,
                                maxfun=maxfun, maxls=maxls)
    options = dict(maxiter=max_iters, maxcor=maxcor, maxfun=maxfun, maxls=maxls, ftol=ftol, gtol=gtol)
    res = minimize(run.evaluate, x0, jac=True, method="L-BFGS-B", callback=callback,
                   options=options)
    return bool(res.success), str(res.message)


_LAMBDA_MIN, _LAMBDA_MAX = 1e-15, 1e100


def _scg(run, x, f, g, max_iters, tol, *, ftol=None, xtol=None, sigma0=1e-4):
    """Scaled conjugate gradients, following the steps of Møller (1993), Neural Networks 6.

    Notation of the paper: r = -gradient, p the search direction, lam the
    scale (Levenberg-Marquardt-like) parameter, delta the scaled curvature
    p^T (H + lam I) p, estimated from a gradient difference along p.
    """
    ftol = tol if ftol is None else ftol
    xtol = tol if xtol is None else xtol
    n_params = x.size
    lam = 1.0
    r = -g
    p = r.copy()
    success, n_success = True, 0
    for _ in range(max_iters):
        if success:  # step 2: second-order information along p
            mu = p @ r
            if mu <= 0:  # not a descent direction: restart along the gradient
                p, mu = r.copy(), r @ r
            kappa = p @ p
            if kappa < np.finfo(float).eps:
                return True, "Converged: the gradient vanished."
            sigma = sigma0 / math.sqrt(kappa)
            _, g_plus = run.evaluate(x + sigma * p)
            gamma = p @ (g_plus - g) / sigma  # p^T H p, unscaled
        delta = gamma + lam * kappa  # step 3: scale
        if delta <= 0:  # step 4: make the scaled Hessian positive definite
            lam = 2.0 * (lam - delta / kappa)
            delta = gamma + lam * kappa
        alpha = mu / delta  # step 5: step size
        x_new = x + alpha * p
        f_new, g_new = run.evaluate(x_new)
        Delta = 2.0 * delta * (f - f_new) / mu**2  # step 6: comparison parameter
        success = Delta >= 0
        if success:  # step 7: accept the step
            step, df = alpha * p, f_new - f
            r_old = r
            x, f, g, r = x_new, f_new, g_new, -g_new
            n_success += 1
        run.record(x, f, g)
        if success:
            if np.max(np.abs(step)) < xtol and abs(df) < ftol:
                return True, ("Converged: the last step changed the objective by less than "
                              "ftol and every parameter by less than xtol.")
            if not np.any(r):
                return True, "Converged: the gradient vanished."
            if n_success >= n_params:  # restart every P accepted steps
                p, n_success = r.copy(), 0
            else:
                beta = (r @ r - r @ r_old) / mu
                p = r + beta * p
            if Delta >= 0.75:
                lam = max(lam / 4.0, _LAMBDA_MIN)
        if Delta < 0.25:  # step 8: increase the scale
            lam = min(lam + delta * (1.0 - Delta) / kappa, _LAMBDA_MAX)
    return False, f"Stopped after max_iters={max_iters} iterations."


def _adam(run, x, f, g, max_iters, tol, *, learning_rate=0.01, betas=(0.9, 0.999), eps=1e-8):
    """Adam (Kingma & Ba 2015) on ``f``; the iterate after each step is evaluated and recorded."""
    b1, b2 = (float(b) for b in betas)
    learning_rate = positive_number(learning_rate, "learning_rate")
    if not (0 <= b1 < 1 and 0 <= b2 < 1):
        raise ConfigurationError(f"Expected betas in [0, 1), got {betas!r} instead.")
    m = np.zeros_like(x)
    v = np.zeros_like(x)
    for t in range(1, max_iters + 1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        x = x - learning_rate * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
        f, g = run.evaluate(x)
        run.record(x, f, g)
        if np.max(np.abs(g), initial=0.0) <= tol:
            return True, f"Converged: largest gradient entry at most tol={tol:g}."
    return False, f"Stopped after max_iters={max_iters} iterations."


_IMPLEMENTATIONS = {"lbfgs": _lbfgs, "scg": _scg, "adam": _adam}
_OPTIONS = {"lbfgs": ("maxcor", "ftol", "gtol", "maxfun", "maxls"),
            "scg": ("ftol", "xtol", "sigma0"),
            "adam": ("learning_rate", "betas", "eps")}


def fit(model, optimizer=None, max_iters=1000, callback=None, stop=None, pause=None,
        tol=1e-9, warm_up_iters=None, warm_up_fixed=None, convergence=None, **options) -> FitResult:
    """Maximise ``model``'s objective; leave the model at the best point found.

    Parameters
    ----------
    model : object following the protocol in this module's docstring.
    optimizer : "lbfgs", "scg" or "adam"; "svi" for models with ``fit_svi`` (stochastic
        variational inference, which takes its own options: see that method).
        None: the model's ``default_optimizer`` ("lbfgs" when it has none).
    max_iters : at most this many iterations (see the module docstring for
        what an iteration is per optimiser); 0 only evaluates the start.
    callback : called with a :class:`Snapshot` after every iteration; an
        exception it raises ends the fit and propagates (the model is left
        at its best point first).
    stop, pause : ``threading.Event`` or None (see the module docstring).
    tol : convergence tolerance; its meaning per optimiser is in the module docstring.
    warm_up_iters, warm_up_fixed : hold the parameters ``warm_up_fixed`` (default:
        ``model.warm_up_fixed``, else the noise variance; those the
        model has and does not already fix) for the first ``warm_up_iters``
        iterations (at most half of ``max_iters``), then release them and go
        on.  From a poor start (e.g. random latents) an optimiser that may move
        the noise at once explains everything as noise and stalls (kernel
        variance -> 0); holding the noise first lets the latents organise.
        None (the default): ``model.warm_up_iters`` when the start needs it --
        its latent means explain less than :data:`HOLD_NOISE_BELOW` of the
        data's variance (:func:`start_explains`), or ``model.always_warm_up``
        -- else none.  With a
        ``convergence`` rule the warm-up also ends when it has converged.
        Iterations, history and snapshots run on across the two phases; each
        phase is its own optimiser run.
    convergence : a :class:`Convergence` rule: the fit also ends when the bound has
        converged (``max_iters`` is then a cap); None: only the optimiser's own
        criterion and ``max_iters`` end it.  Not used by "svi" (its objective is
        a minibatch estimate).
    **options : optimiser-specific settings (``maxcor``; ``xtol``; ``learning_rate`` ...).

    Raises
    ------
    ConfigurationError : unknown optimiser, unknown option or invalid setting.
    OptimizationError : a non-finite objective or gradient was met.

    ``stop`` also reaches inside one evaluation: models check it between the
    stages of an evaluation, so a fit at 10^5 rows stops within a fraction of
    one evaluation.  The model's jitter is chosen once, before the first
    evaluation (``model.begin_fit()``), and kept for the whole fit.
    """
    if optimizer is None:
        optimizer = getattr(model, "default_optimizer", "lbfgs")
    name = str(optimizer).lower()
    if name == "svi":
        if not callable(getattr(model, "fit_svi", None)):
            raise ConfigurationError(f"optimizer='svi' needs a model trained by minibatches (e.g. "
                                     f"StochasticBayesianGPLVM), got {type(model).__name__} instead.")
        if warm_up_fixed is None:  # the model's own choice, as for the other optimisers
            warm_up_fixed = getattr(model, "warm_up_fixed", ("noise_variance",))
        return model.fit_svi(max_iters=max_iters, callback=callback, stop=stop, pause=pause, tol=tol,
                             warm_up_iters=warm_up_iters, warm_up_fixed=warm_up_fixed, **options)
    if name not in _IMPLEMENTATIONS:
        raise ConfigurationError(f"Expected optimizer to be one of {', '.join(map(repr, OPTIMIZERS))}, "
                         f"got {optimizer!r} instead.")
    unknown = sorted(set(options) - set(_OPTIONS[name]))
    if unknown:
        raise ConfigurationError(f"Unknown option(s) {unknown} for optimizer {name!r}; "
                        f"valid options are {list(_OPTIONS[name])}.")
    max_iters = integer(max_iters, "max_iters", minimum=0)
    if not tol >= 0:
        raise ConfigurationError(f"Expected tol >= 0, got {tol!r} instead.")
    if convergence is not None and not isinstance(convergence, Convergence):
        raise ConfigurationError(f"Expected convergence as an engine.Convergence or None, "
                                 f"got {type(convergence).__name__} instead.")

    if hasattr(model, "begin_fit"):
        model.begin_fit()
    if warm_up_fixed is None:  # the model's own choice (a deep GP holds every layer's noise)
        warm_up_fixed = getattr(model, "warm_up_fixed", ("noise_variance",))
    hold = _warm_up_hold(model, warm_up_fixed)
    if warm_up_iters is None:
        warm_up_iters = int(getattr(model, "warm_up_iters", 0)) if hold and _start_needs_hold(model) else 0
    warm_up = min(int(warm_up_iters), int(max_iters) // 2)
    args = (model, name, callback, stop, pause, tol, options, convergence)
    if not (hold and warm_up > 0):
        return _fit_phases(*args, int(max_iters))
    model.fix(*hold)
    try:
        first = _fit_phases(*args, warm_up)
    finally:
        model.unfix(*hold)
    if first.stopped:
        first.warm_up = first.iterations
        return first
    result = _fit_phases(*args, int(max_iters) - first.iterations, after=first)
    result.warm_up = first.iterations
    return result


#: The start needs the noise held when its latent means explain less than this share of the
#: data's variance.  Measured shares: PCA and Isomap starts 0.23-1.0 on oil flow, digits, images,
#: flows and a swiss roll (Q=2 and 10); random latents about Q/N (0.002-0.02).
HOLD_NOISE_BELOW = 0.1


def start_explains(model) -> float | None:
    """The share of the (centred) data's variance the model's latent means explain linearly,
    in [0, 1]: ||P Y||^2 / ||Y||^2 with P the projection on the centred columns of X_mean (N, Q).

    A signal-to-noise check of the start: random latents explain about Q/N by chance, a PCA
    start the top Q components' share.  None when the model offers no in-memory ``Y`` (N, D)
    and ``X_mean`` (N, Q) of the same rows (the caller then assumes the start needs help).
    """
    Y, X = getattr(model, "Y", None), getattr(model, "X_mean", None)
    if not (isinstance(Y, np.ndarray) and isinstance(X, np.ndarray) and Y.ndim == X.ndim == 2
            and Y.shape[0] == X.shape[0] and not isinstance(Y, np.memmap)):
        return None
    total = float(np.sum((Y - Y.mean(axis=0)) ** 2))
    if not total > 0:
        return None
    Xc = X - X.mean(axis=0)
    Q_, _ = np.linalg.qr(Xc)  # orthonormal basis of the latent columns (N, Q)
    explained = float(np.sum((Q_.T @ (Y - Y.mean(axis=0))) ** 2))
    return min(max(explained / total, 0.0), 1.0)


def _start_needs_hold(model) -> bool:
    if getattr(model, "always_warm_up", False):
        return True
    explained = start_explains(model)
    return explained is None or explained < HOLD_NOISE_BELOW


#: Optimiser restarts allowed in one fit because the model raised its jitter.
_MAX_JITTER_RESTARTS = 8


def _fit_phases(model, name, callback, stop, pause, tol, options, convergence, max_iters, after=None) -> FitResult:
    """:func:`_fit_phase`, restarted from the best point whenever the model raises its jitter.

    A raised jitter is a (slightly) different objective: the optimiser's memory
    and the best value so far belong to the old one, so the run starts again
    from the best point, and the result reports values of the final objective.
    """
    for _ in range(_MAX_JITTER_RESTARTS):
        result = _fit_phase(model, name, callback, stop, pause, tol, options, convergence, max_iters, after)
        if not result.jitter_raised or result.stopped:
            break
        max_iters -= result.iterations - (after.iterations if after else 0)
        after = result
        if max_iters <= 0:  # no iteration left: report the best point's value under the new jitter
            result.objective = float(model.objective_and_gradient(model.get_free())[0])
            break
    return result


def _warm_up_hold(model, names) -> list:
    """The parameters to hold during the warm-up: those of ``names`` the model has and does not fix already."""
    if not hasattr(model, "fix"):
        return []
    present = set(getattr(model, "parameter_names", ()))
    return [n for n in names if n in present and n not in model.fixed]


def _fit_phase(model, name, callback, stop, pause, tol, options, convergence, max_iters,
               after=None) -> FitResult:
    """One optimiser run over the model's free parameters, continuing ``after`` if given."""
    x0 = np.array(model.get_free(), dtype=float).ravel()
    run = Run(model, name, x0, callback, stop, pause, after, convergence)
    stopped = converged = jitter_raised = False
    try:
        with single_blas_thread(), watching(stop):
            converged, message = _run_optimizer(run, name, x0, max_iters, tol, options)
        ran = run.iteration - (after.iterations if after else 0)
        # the cap, or the optimiser's own end: its convergence test, or no step it could find
        # improved the objective (a line search that failed: more iterations would not help)
        reason = "max_iters" if not converged and ran >= max_iters else "optimizer"
    except (Stopped, Cancelled):
        stopped, reason, message = True, "stopped", f"Stopped on request after {run.iteration} iterations."
    except _Converged:
        converged, reason = True, "converged"
        message = f"Converged after {run.iteration} iterations: {convergence.describe()}."
    except _JitterRaised:
        jitter_raised, reason = True, "jitter"
        message = f"The model raised its jitter to {model.jitter:.3g}; restarting."
    finally:
        run.restore_best()
    return FitResult(objective=-run.best_f, iterations=run.iteration,
                     n_evaluations=run.n_evaluations, elapsed=run.elapsed(), stopped=stopped,
                     converged=converged and not stopped, message=message, history=run.history,
                     jitter_raised=jitter_raised, reason=reason)


def _run_optimizer(run, name, x0, max_iters, tol, options):
    """Evaluate the start, then run the chosen optimiser; returns (converged, message)."""
    f0, g0 = run.start()
    if run.stop_requested():
        raise Stopped
    if max_iters == 0:
        return False, "max_iters=0: only the starting point was evaluated."
    return _IMPLEMENTATIONS[name](run, x0, f0, g0, max_iters, tol, **options)
