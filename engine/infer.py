"""Projection of new data into a trained model, many rows at once: the one multi-start driver.

``infer_latent(model, Ynew, observed=None)`` finds, for every row y*_n of
``Ynew`` (n, D), the latent point (or q(x*_n)) that explains its observed
entries O_n, with the model's parameters fixed.  The rows are conditionally
independent given the trained model, so each row has its own objective; the
model states it (``model.projection_problem``, below) and this module only
drives it: every row starts from the latents of the training rows nearest to
it on its observed entries (``model.nearest_rows``) and from the prior;
``num_starts`` candidates are scored by the row's objective in one batched
evaluation, the best ``num_optimised`` of them are optimised together by one
batched L-BFGS (:func:`engine.row_optimize.minimize_rows`, one memory, line
search and stopping test per row) and each row keeps its best optimum.

The problem protocol (``problem = model.projection_problem(Yc, mask)`` for the
centred new rows Yc (n, D), 0 where unobserved, and their mask (n, D))::

    problem.value_and_grad(rows, theta, with_grad=True) -> (values (r,), gradients (r, P) or None)
        the objective of the new rows ``rows`` (indices into 0..n-1) at theta (r, P), to maximise;
        a non-finite value is -inf
    problem.starts(idx) -> (k, P)    theta of the training rows ``idx`` (their latents)
    problem.prior_start(n) -> (n, P) the prior's mean (and variance)
    problem.scales(theta0) -> (k, P) a diagonal preconditioner: theta = theta0 + scales * u
    problem.unpack(theta) -> (mean (n, Q), variance (n, Q))
    problem.log_density(theta) -> (n,)   what LatentInference reports (nats)
    problem.first_stage() -> a problem to optimise first from the starts, or None
    problem.latent_variance          True if q(x*) has a variance (predict under it)

The Bayesian models' problem is the bound with the row added minus the
training bound (Titsias & Lawrence 2010, section 4; :mod:`engine.models.bayesian`);
MRD sums its views' terms (one KL for the shared q(x*)); the stochastic model's
is its row bound under the explicit q(u); the GP-LVM and the sparse GP-LVM
find the MAP point of the predictive density plus the N(0, I) prior
(:mod:`engine.models.gplvm`).  This module imports no model.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._threads import blas_pinned
from .errors import NumericalError, ShapeError
from .row_optimize import RowsResult, minimize_rows
from .validation import real_array

__all__ = ["LatentInference", "check_new_data", "infer_latent", "log_density"]


@dataclass(frozen=True)
class LatentInference:
    """Result of :func:`infer_latent`, one row per new output vector.

    mean, variance: (n, Q) moments of q(x*_n) (variance is 0 for the GP-LVM
    and the sparse GP-LVM, whose latent points are point estimates);
    log_density: (n,) nats, F(X, x*) - F(X) for the Bayesian GP-LVM (eq. 20),
    log p(y*_O | x*, model) at the MAP point otherwise; observed: (n, D) bool
    mask; prediction, prediction_variance: (n, D) predictive moments of every
    output at x*_n (data units, noise included).  A single (D,) input gives
    n = 1: every array keeps its leading axis.
    """

    mean: np.ndarray
    variance: np.ndarray
    log_density: np.ndarray
    observed: np.ndarray
    prediction: np.ndarray
    prediction_variance: np.ndarray

    def __len__(self) -> int:
        return self.mean.shape[0]

    @property
    def reconstruction(self) -> np.ndarray:
        """Predicted values of the unobserved entries, row by row, flat (count of unobserved,)."""
        return self.prediction[~self.observed]

    @property
    def reconstruction_variance(self) -> np.ndarray:
        return self.prediction_variance[~self.observed]

    def completed(self, Ynew) -> np.ndarray:
        """``Ynew`` (n, D) or (D,) with its unobserved entries replaced by the prediction, (n, D)."""
        Y = np.array(np.atleast_2d(np.asarray(Ynew, dtype=float)))
        if Y.shape != self.prediction.shape:
            raise ShapeError(f"Expected Ynew of shape {self.prediction.shape}, got {np.shape(Ynew)} instead.")
        Y[~self.observed] = self.prediction[~self.observed]
        return Y


# --------------------------------------------------------------------- input check


def check_new_data(model, Ynew, observed=None) -> tuple[np.ndarray, np.ndarray]:
    """(Y (n, D) with 0.0 at unobserved entries, mask (n, D) bool), or ShapeError.

    ``Ynew`` is (n, D) or (D,) with D = ``model.output_dim``.  Unobserved
    entries are the NaN ones when ``observed`` is None, else where ``observed``
    (a boolean mask of Ynew's shape; 0/1 integers pass) is False: their values
    are never read.  Every row needs at least one observed entry.
    """
    D = model.output_dim
    Y = real_array(Ynew, "Ynew")
    if Y.ndim == 1:
        Y = Y[None, :]
    if Y.ndim != 2 or Y.shape[1] != D or Y.shape[0] < 1:
        raise ShapeError(f"Expected Ynew of shape (n, {D}) or ({D},), got shape {np.shape(Ynew)} instead.")
    Y = np.array(Y, dtype=np.float64)
    if observed is None:
        if np.any(np.isinf(Y)):
            raise ShapeError("Ynew contains infinite values; mark unobserved entries with NaN.")
        mask = ~np.isnan(Y)
    else:
        mask = np.asarray(observed)
        if mask.dtype != bool:
            if np.issubdtype(mask.dtype, np.integer) and np.all((mask == 0) | (mask == 1)):
                mask = mask.astype(bool)
            else:
                raise ShapeError(f"Expected `observed` as a boolean mask, got dtype {mask.dtype} instead.")
        if mask.ndim == 1:
            mask = mask[None, :]
        if mask.shape != Y.shape:
            raise ShapeError(f"Expected `observed` of the same shape as Ynew {np.shape(Ynew)}, "
                             f"got {np.shape(observed)} instead.")
        mask = mask.copy()
        if not np.all(np.isfinite(Y[mask])):
            raise ShapeError("The observed entries of Ynew must be finite (mark missing ones in `observed`).")
    empty = np.flatnonzero(~mask.any(axis=1))
    if empty.size:
        raise ShapeError(f"Every row of Ynew needs at least one observed entry; rows {empty[:10].tolist()} "
                         f"have none.")
    Y[~mask] = 0.0
    return Y, mask


# --------------------------------------------------------------------- the driver


@blas_pinned
def best_starts(problem, theta_all: np.ndarray, n: int, K: int, keep: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``keep`` best of ``K`` starts per row by ``problem.value_and_grad`` (higher is better).

    ``theta_all`` (n*K, P) holds row i's starts at i*K .. i*K+K-1.  Returns
    ``rows`` (n*keep,), the new row each kept start belongs to, and the starts
    (n*keep, P), row-major as given.  A non-finite score ranks last.
    """
    rows_all = np.repeat(np.arange(n), K)
    if K <= keep:
        return rows_all, theta_all
    score, _ = problem.value_and_grad(rows_all, theta_all, with_grad=False)
    score = np.where(np.isfinite(score), score, -np.inf).reshape(n, K)
    best = np.argsort(-score, axis=1, kind="stable")[:, :keep]
    chosen = (np.arange(n)[:, None] * K + best).ravel()
    return rows_all[chosen], theta_all[chosen]


def best_of_optimised(res: RowsResult, n: int, keep: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the index (into the n*keep problems) of the lowest final value, and the values (n, keep).

    Raises NumericalError when every start of some row ended non-finite.
    """
    fvals = np.where(np.isfinite(res.f), res.f, np.inf).reshape(n, keep)
    pick = np.argmin(fvals, axis=1)
    if not np.all(np.isfinite(fvals[np.arange(n), pick])):
        raise NumericalError("Projection failed: the objective is not finite at any start of some rows.")
    return np.arange(n) * keep + pick, fvals


def _maximise(problem, rows, theta0, scale, **options) -> RowsResult:
    """L-BFGS on -problem over theta = theta0 + scale * u, from u = 0, every start at once."""
    def negative(idx, U):
        v, g = problem.value_and_grad(rows[idx], theta0[idx] + scale[idx] * U)
        return -v, -g * scale[idx]

    return minimize_rows(negative, np.zeros_like(theta0), **options)


@blas_pinned
def infer_latent(model, Ynew, observed=None, *, num_starts=5, num_optimised=2, max_iters=300,
                 prior_start=True, gtol=1e-5, ftol=2.2e-9, memory=10, return_details=False):
    """Project the rows of ``Ynew`` (n, D) or (D,) into the latent space of a trained ``model``.

    NaN entries of Ynew are unobserved, or pass ``observed``, a boolean mask of
    Ynew's shape (then the unobserved entries are never read).  Each row is
    projected independently given the model (module docstring); all rows are
    optimised together.  ``num_starts`` training points nearest to each row
    (on its observed entries), and the prior's mean with ``prior_start``, are
    scored and the best ``num_optimised`` are optimised with at most
    ``max_iters`` L-BFGS iterations each (stopping at max|gradient| <=
    ``gtol``); the best optimum is kept.

    Returns :class:`LatentInference` with arrays of n rows (n = 1 for a (D,)
    input).  ``return_details=True`` also returns a dict with the optimiser's
    iterations, convergence flags and evaluation count per problem.
    Raises ShapeError for a wrong shape, a row with nothing observed, or
    non-finite observed values.  BLAS is held to one thread meanwhile (many
    small factorisations; see engine._threads).
    """
    Y, mask = check_new_data(model, Ynew, observed)
    if callable(getattr(model, "copy", None)):
        model = model.copy()  # one consistent set of parameters, even while the original trains on
    Yc = np.where(mask, Y - model.Y_mean, 0.0)
    problem = model.projection_problem(Yc, mask)
    n = Y.shape[0]
    cand = model.nearest_rows(Yc, mask, int(max(1, num_starts)))  # (n, K)
    K = cand.shape[1]
    theta_all = problem.starts(cand.ravel())
    if prior_start:  # one more candidate per row: the prior N(0, I) (its mean for point models)
        theta_all = np.concatenate([theta_all.reshape(n, K, -1), problem.prior_start(n)[:, None, :]], axis=1)
        theta_all = theta_all.reshape(n * (K + 1), -1)
        K += 1
    keep = int(min(max(1, num_optimised), K))
    rows, theta0 = best_starts(problem, theta_all, n, K, keep)
    options = dict(max_iters=max_iters, memory=memory, gtol=gtol, ftol=ftol)
    first = problem.first_stage()
    if first is not None:  # e.g. reconstruct first, then weigh the predictive variance too
        staged = _maximise(first, rows, theta0, np.ones_like(theta0), **options)
        theta0 = np.where(np.isfinite(staged.f)[:, None], theta0 + staged.x, theta0)
    scale = problem.scales(theta0)
    res = _maximise(problem, rows, theta0, scale, **options)
    winners, fvals = best_of_optimised(res, n, keep)
    theta = (theta0 + scale * res.x)[winners]
    mean, variance = problem.unpack(theta)
    density = problem.log_density(theta)
    pred, pred_var = model.predict(mean, variance if problem.latent_variance else None, include_noise=True)
    pred = np.asarray(pred, dtype=float)
    pred_var = np.asarray(pred_var, dtype=float)
    if pred_var.ndim == 1:
        pred_var = pred_var[:, None]
    pred_var = np.broadcast_to(pred_var, pred.shape).copy()
    out = LatentInference(mean=mean, variance=variance, log_density=density, observed=mask,
                          prediction=pred, prediction_variance=pred_var)
    if return_details:
        details = {"iterations": res.iterations.reshape(n, keep), "converged": res.converged.reshape(n, keep),
                   "evaluations": res.evaluations, "objective": -fvals, "start_index": cand}
        return out, details
    return out


def log_density(model, Ynew, observed=None, **options) -> np.ndarray:
    """(n,) log density of each row's observed entries at its projection, nats.

    Bayesian GP-LVM: F(X, x*) - F(X) (eq. 20), a lower bound on log p(y*_O | Y)
    up to the bound's own gap; point models: log p(y*_O | x*, model) at the MAP x*.
    """
    return infer_latent(model, Ynew, observed=observed, **options).log_density
