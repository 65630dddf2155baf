"""Stochastic variational inference: the minibatch loop, beside :mod:`engine.optimize`'s.

``fit_svi(model, ...)`` is what ``engine.fit(m, optimizer="svi")`` runs for a
model trained by minibatches of rows (:class:`engine.StochasticBayesianGPLVM`,
Hensman, Fusi & Lawrence 2013).  One iteration reads one minibatch of B rows
drawn uniformly without replacement and makes three updates:

* the global parameters (kernel, Z, noise): one Adam step (Kingma & Ba 2015)
  on the minibatch estimate of the bound, at a rate that decays
  geometrically over the fit, in log coordinates for the positive ones
  (:class:`LogSteps`) unless ``positive_steps="free"``;
* q(u): the model's natural-gradient step of size rho towards the
  minibatch's optimum (rho = 1 at the first iteration);
* the minibatch rows' q(x_n): the model's natural-gradient steps on each
  row's own term, or Adam with per-row moments (``local_optimizer="adam"``).

After the iterations, when they read the rows often enough (``polish_passes``),
a short full-data polish: q(u) to its closed-form optimum over all rows and
one step on every row's q(x_n) per pass (``model.refine``).

The iterations are booked by :class:`engine.optimize.Run`, as every other
optimiser's: history, snapshots to ``callback``, ``pause`` and ``stop``
between iterations (``stop`` also reaches inside one, through
``engine._cancel``), elapsed time without the pauses.

The model protocol (beside ``engine.optimize``'s)::

    model.global_packer                     ParameterPacker of the global parameters
    model.minibatch_state(idx) -> (x_global (P_g,), mu (B, Q), s (B, Q))   copies; s unconstrained
    model.source.read(idx) -> (B, D)        the rows, centred
    model.minibatch_terms(values, idx, mu, S, Yb) -> (estimate, grads, dE/dmu, dE/dS, natural target)
    model.local_natural_steps(values, Yb, mu, S, steps, rho, move_mu, move_S) -> (mu, S)
    model.local_natural_step(mu, S, gmu, gS, rho, move_mu, move_S) -> (mu, S)
    model.q_u_natural_step(values, rho, target) -> (q_mu, q_sqrt)
    model.write_minibatch(x_global, idx, mu, S)   one locked update of the globals and the rows
    model.closed_form_q_u, model.refine(passes) -> full bound   the polish (optional)
"""
from __future__ import annotations

import math

import numpy as np

from ._cancel import Cancelled, watching
from ._threads import single_blas_thread
from .errors import ConfigurationError, OptimizationError
from .optimize import FitResult, Run, Stopped
from .transforms import POSITIVE, Softplus
from .validation import fraction, integer, positive_number

__all__ = ["LogSteps", "fit_svi"]


class LogSteps:
    """Adam's coordinates for the positive global parameters: log(value - lower), not softplus's.

    A softplus is linear for large values, so a step of Adam's size moves a
    lengthscale of 100 by the same amount as one of 1; in log coordinates the
    steps are relative.  ``gradient(x, g)`` maps dF/d(free x) to dF/d(log
    coordinate) for those entries (others unchanged); ``move(x, step, mask)``
    takes ``step`` in these coordinates on the entries of ``mask`` and returns
    the new free vector.  x, g, step: (P,) over ``packer``'s vector; mask: (P,) bool.
    """

    _softplus = Softplus(lower=0.0)  # value - lower = softplus(free x)

    def __init__(self, packer):
        self.mask = np.zeros(packer.size, dtype=bool)
        self.lower = np.zeros(packer.size)
        for s in packer.specs:
            if isinstance(s.transform, Softplus):
                sl = packer.slice(s.name)
                self.mask[sl] = True
                self.lower[sl] = s.transform.lower

    def gradient(self, x, g):
        out = g.copy()
        pos = self.mask
        out[pos] = g[pos] / Softplus.grad_factor(x[pos]) * self._softplus.forward(x[pos])
        return out

    def move(self, x, step, mask):
        out = x.copy()
        free = mask & ~self.mask
        out[free] += step[free]
        pos = mask & self.mask
        out[pos] = self._softplus.inverse(self._softplus.forward(x[pos]) * np.exp(step[pos]))
        return out


class _Adam:
    """Adam's moments over a vector (maximising): ``step(g, t, rate, mask) -> (P,)`` the step (0 off ``mask``)."""

    def __init__(self, size, betas, eps):
        self.b1, self.b2 = betas
        self.eps = eps
        self.m1 = np.zeros(size)
        self.m2 = np.zeros(size)

    def step(self, g, t, rate, mask):
        b1, b2 = self.b1, self.b2
        self.m1[mask] = b1 * self.m1[mask] + (1 - b1) * g[mask]
        self.m2[mask] = b2 * self.m2[mask] + (1 - b2) * g[mask] ** 2
        return rate * (self.m1 / (1 - b1 ** t)) / (np.sqrt(self.m2 / (1 - b2 ** t)) + self.eps)


def _betas(betas):
    b1, b2 = (float(b) for b in betas)
    if not (0 <= b1 < 1 and 0 <= b2 < 1):
        raise ConfigurationError(f"Expected betas in [0, 1), got {betas!r} instead.")
    return b1, b2


def _choice(value, name, options):
    if value not in options:
        raise ConfigurationError(f"Expected {name} {' or '.join(map(repr, options))}, got {value!r} instead.")
    return value


def _geometric(start, end, max_iters):
    """The factor per iteration that takes ``start`` to ``end`` over ``max_iters`` iterations."""
    return 1.0 if max_iters < 2 else (end / start) ** (1.0 / (max_iters - 1))


def fit_svi(model, max_iters=1000, callback=None, stop=None, pause=None, *, batch_size=None,
            learning_rate=0.02, final_learning_rate=None, natgrad_step=0.3, final_natgrad_step=None,
            local_step=0.5, local_iters=2, local_optimizer="natgrad", local_learning_rate=None,
            positive_steps="log", betas=(0.9, 0.999), eps=1e-8, warm_up_iters=None,
            warm_up_fixed=("noise_variance",), seed=None, evaluate_final=True, tol=None,
            polish_passes=None) -> FitResult:
    """Stochastic variational inference on ``model`` (module docstring); what ``engine.fit(m, optimizer="svi")`` runs.

    One iteration = one minibatch of ``batch_size`` rows (default: the
    model's) drawn uniformly without replacement.

    learning_rate, betas, eps : Adam for the kernel, Z and the noise.  The
        rate decays geometrically to ``final_learning_rate`` (default: a
        quarter of it) at ``max_iters``; pass ``final_learning_rate=
        learning_rate`` for a constant rate.
    positive_steps : "log" (default): Adam's coordinates for the positive
        globals (kernel variance, lengthscales, noise) are log(value -
        lower), so its steps are relative; "free": the model's softplus
        coordinates, in which a lengthscale of 100 moves as slowly as one
        of 1 (ARD dimensions then switch on and off slowly).
    natgrad_step : rho in (0, 1] of q(u)'s natural-gradient step.  The first
        iteration takes rho = 1 (q(u) jumps to that minibatch's optimum);
        rho then changes geometrically to ``final_natgrad_step`` (default:
        rho, a constant step).  A small rho averages the minibatch targets
        over many batches but they are stale: each was computed for the
        rows' q(x_n), the kernel and Z of its own iteration (on oil flow
        rho decaying to 0.003 ended ~400 nats below a constant 0.3).
    local_step, local_iters : the rows' natural-gradient step size and
        steps per visit (all but the last with the globals as they were
        before the visit).  A full step (1) is Newton's step with the
        expected Hessian, which overshoots where a row's term is not
        concave: started at a converged collapsed fit of oil flow with the
        globals held, full steps lost 740 nats, half steps none.
    local_optimizer : "natgrad" (default, no per-row state) or "adam" (per-row
        moments and bias correction, counted per visit: twice the memory of
        the local parameters, for this fit; on oil flow a worse optimum), at
        ``local_learning_rate`` (default 0.5), decaying with the globals'
        rate.  A row steps once per N / B iterations, so its rate must be far
        above the globals': on oil flow, 2000 iterations, 0.02 left the rows
        near their start (bound 3848 nats against natgrad's 7079), 0.2
        reached 6057 and 0.5 7007.
    warm_up_iters, warm_up_fixed : ``warm_up_fixed`` are held for the first
        ``warm_up_iters`` iterations (default ``model.warm_up_iters``, at most
        half of ``max_iters``).
    seed : of the minibatch sampler (default: the model's seed).
    polish_passes : full-data passes after the iterations, each q(u) set to
        its optimum over all rows and then one natural-gradient step on
        every row's q(x_n) with the kernel, Z and the noise held
        (``model.refine``, row chunks in a fixed order).  A minibatch row
        moves only when it is drawn, once per N / B iterations; a pass
        moves every row and costs less than an epoch of iterations (large
        chunks, no global step).  None (default): one
        pass per :data:`EPOCHS_PER_POLISH_PASS` epochs the iterations
        read (iterations x B / N), at most :data:`MAX_POLISH_PASSES`, so
        the polish costs a small share of the fit and none when the fit
        reads less than that (e.g. 10^6 rows); only for a model whose q(u)
        has a closed-form optimum (``model.closed_form_q_u``); 0: none.
        Skipped when the fit is stopped; ``stop`` also ends a pass between
        its row chunks.
    evaluate_final : see below.  ``tol`` is accepted for the common
        signature and unused (SVI has no convergence test).

    Fixed parameters (``model.fix``) are not moved; fixing ``q_mu`` or
    ``q_sqrt`` moves the other one by Adam.  Snapshots (``callback``) and
    the history report the minibatch estimate of the bound (noisy,
    unbiased).  ``FitResult.objective`` is the full bound at the end (one
    chunked pass) when ``evaluate_final`` or after a polish, else the mean
    estimate over the last min(iterations, N / B) iterations.  The model is left at the last
    iterate (SVI keeps no "best" point).  ``stop`` ends the fit after the
    current iteration; ``pause`` blocks between iterations.
    """
    max_iters = integer(max_iters, "max_iters", minimum=0)
    N = model.num_data
    B = min(N, integer(model.batch_size if batch_size is None else batch_size, "batch_size"))
    natgrad_step = fraction(natgrad_step, "natgrad_step")
    local_step = fraction(local_step, "local_step")
    learning_rate = positive_number(learning_rate, "learning_rate")
    final_learning_rate = positive_number(learning_rate / 4.0 if final_learning_rate is None else final_learning_rate,
                                          "final_learning_rate")
    final_natgrad_step = fraction(natgrad_step if final_natgrad_step is None else final_natgrad_step,
                                  "final_natgrad_step")
    rho_decay = _geometric(natgrad_step, final_natgrad_step, max_iters)
    decay = _geometric(learning_rate, final_learning_rate, max_iters)
    betas = _betas(betas)
    local_iters = integer(local_iters, "local_iters")
    _choice(positive_steps, "positive_steps", ("log", "free"))
    local_adam = _choice(local_optimizer, "local_optimizer", ("natgrad", "adam")) == "adam"
    local_lr = positive_number(0.5 if local_learning_rate is None else local_learning_rate, "local_learning_rate")
    rng = np.random.default_rng(model.seed if seed is None else seed)
    warm_up = min(int(model.warm_up_iters if warm_up_iters is None else warm_up_iters), max_iters // 2)
    polish_passes = _checked_polish(polish_passes, model)
    fixed = model.fixed
    held = [n for n in warm_up_fixed if n in model.parameter_names and n not in fixed]

    model.begin_fit()
    gp = model.global_packer
    natgrad_q = "q_mu" not in fixed and "q_sqrt" not in fixed
    adam_names = [s.name for s in gp.specs if s.name not in fixed and not (natgrad_q and s.name in ("q_mu", "q_sqrt"))]
    adam_mask = gp.mask(adam_names)
    held_mask = gp.mask([n for n in held if n in adam_names])
    move_mu, move_S = "X_mean" not in fixed, "X_variance" not in fixed
    log_steps = LogSteps(gp) if positive_steps == "log" else None
    adam = _Adam(gp.size, betas, eps)
    if local_adam:  # per-row Adam moments: twice the size of the local parameters, for this fit only
        Q = model.latent_dim
        rows_adam = _Adam((N, 2 * Q), betas, eps)
        visits = np.zeros(N, dtype=np.int64)
    run = Run(model, "svi", None, callback, stop, pause, copy_state=False)
    recent = []
    window = max(1, int(math.ceil(N / B)))
    stopped = False
    try:
        with single_blas_thread(), watching(stop):
            for it in range(1, max_iters + 1):
                if run.stop_requested():
                    raise Stopped
                idx = np.sort(rng.choice(N, B, replace=False))
                xg, mu, s = model.minibatch_state(idx)
                values = gp.unpack(xg)
                S = POSITIVE.forward(s)
                Yb = model.source.read(idx)
                if local_iters > 1 and not local_adam and (move_mu or move_S):
                    mu, S = model.local_natural_steps(values, Yb, mu, S, local_iters - 1, local_step, move_mu, move_S)
                    s = POSITIVE.inverse(np.maximum(S, 2.0 * POSITIVE.lower))
                value, grads, gmu, gS, target = model.minibatch_terms(values, idx, mu, S, Yb)
                g = gp.pack_gradient(xg, grads)
                if log_steps is not None:
                    g = log_steps.gradient(xg, g)
                if not (math.isfinite(value) and np.all(np.isfinite(g[adam_mask]))):
                    raise OptimizationError(
                        f"SVI met a non-finite minibatch bound or gradient at iteration {it}; the model was left "
                        "at the previous iterate. Try standardising the data, a smaller learning_rate or "
                        "natgrad_step, or fewer inducing points.")
                # globals: Adam (maximising), the held ones only during the warm-up
                mask = adam_mask & ~held_mask if it <= warm_up else adam_mask
                step = adam.step(g, it, learning_rate * decay ** (it - 1), mask)
                if log_steps is not None:
                    x_new = log_steps.move(xg, step, mask)
                else:
                    x_new = xg.copy()
                    x_new[mask] += step[mask]
                # q(u): natural-gradient step towards the minibatch optimum
                if natgrad_q:
                    rho = 1.0 if it == 1 else natgrad_step * rho_decay ** (it - 1)
                    new_values = gp.unpack(x_new)
                    new_values["q_mu"], new_values["q_sqrt"] = model.q_u_natural_step(values, rho, target)
                    x_new = gp.pack(new_values)
                # the minibatch's q(x_n): a step on each row's own term
                if local_adam:
                    gl = np.concatenate([gmu - mu, (gS - 0.5 * (1.0 - 1.0 / S)) * POSITIVE.grad_factor(s)], axis=1)
                    visits[idx] += 1
                    d = _row_adam_step(rows_adam, idx, gl, visits[idx], local_lr * decay ** (it - 1))
                    mu_new = mu + d[:, :Q] if move_mu else mu
                    S_new = POSITIVE.forward(s + d[:, Q:]) if move_S else S
                else:
                    mu_new, S_new = model.local_natural_step(mu, S, gmu, gS, local_step, move_mu, move_S)
                model.write_minibatch(x_new, idx, mu_new, S_new)
                run.n_evaluations += 1
                recent.append(value)
                if len(recent) > window:
                    recent.pop(0)
                run.record(None, -value, g[adam_mask])
    except (Stopped, Cancelled):
        stopped = True
    polished = None
    passes = 0 if stopped else _polish_passes(polish_passes, model, run.iteration * B / max(N, 1))
    if passes:
        try:
            with single_blas_thread(), watching(stop):
                polished = model.refine(passes=passes)
        except Cancelled:
            stopped = True
    if polished is not None:
        objective = polished
    elif evaluate_final and not stopped:
        objective = model.objective()
    else:
        objective = float(np.mean(recent)) if recent else (model.objective() if evaluate_final else math.nan)
    message = (f"Stopped on request after {run.iteration} iterations." if stopped
               else f"Stopped after max_iters={max_iters} SVI iterations (SVI has no convergence test)"
                    + (f" and {passes} full-data polish pass{'es' if passes > 1 else ''}." if passes else "."))
    return FitResult(objective=float(objective), iterations=run.iteration, n_evaluations=run.n_evaluations,
                     elapsed=run.elapsed(), stopped=stopped, converged=False, message=message, history=run.history)


#: The automatic polish: one full-data pass per this many epochs the iterations read ...
EPOCHS_PER_POLISH_PASS = 2
#: ... and at most this many passes.
MAX_POLISH_PASSES = 3


def _checked_polish(polish_passes, model):
    """``fit_svi``'s ``polish_passes`` checked before anything moves: None (automatic) or a count."""
    if polish_passes is None:
        return None
    passes = integer(polish_passes, "polish_passes", minimum=0)
    if passes and not getattr(model, "closed_form_q_u", False):
        raise ConfigurationError(
            f"polish_passes={passes} needs a model whose q(u) has a closed-form optimum over all rows "
            f"(the Gaussian likelihood); {type(model).__name__} has none: pass polish_passes=0.")
    return passes


def _polish_passes(polish_passes, model, epochs):
    """How many full-data polish passes follow iterations that read ``epochs`` times the rows."""
    if polish_passes is not None:
        return polish_passes
    if not getattr(model, "closed_form_q_u", False):
        return 0
    return min(MAX_POLISH_PASSES, int(epochs // EPOCHS_PER_POLISH_PASS))


def _row_adam_step(adam, idx, g, t, rate):
    """Adam over the rows ``idx`` of per-row moments (N, P), each bias-corrected by its own visit count t (B,)."""
    b1, b2 = adam.b1, adam.b2
    tb = t[:, None].astype(float)
    adam.m1[idx] = b1 * adam.m1[idx] + (1 - b1) * g
    adam.m2[idx] = b2 * adam.m2[idx] + (1 - b2) * g * g
    return rate * (adam.m1[idx] / (1 - b1 ** tb)) / (np.sqrt(adam.m2[idx] / (1 - b2 ** tb)) + adam.eps)
