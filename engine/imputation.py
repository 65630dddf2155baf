"""Filling in missing outputs from a trained model.

Two predictions of a missing entry y_nd, both in data units:

``"latent"``
    The predictive moments of y_nd under the row's own q(x_n) (Titsias &
    Lawrence 2010, section 4).  q(x_n) is one Gaussian, fitted to the row's
    observed entries: when those entries fit two regions of the latent space
    about equally well, q(x_n) settles in one of them and the prediction is
    confidently wrong if the missing entry is what tells them apart.

``"mixture"``
    The posterior mean of y_nd when the prior over the row's latent is the
    model's aggregate posterior over the *other* rows,
    p(x) ~ (1/K) sum_m q(x_m).  Each candidate m is weighted by how well it
    predicts the row's observed entries,

        w_nm  ~  prod_{d observed in n} N(y_nd | mu_md, s_md),

    where (mu_m, s_m) are the predictive moments under q(x_m) with the noise
    included, and the row's missing entries get the moments of the mixture:
    mean sum_m w_nm mu_md, variance sum_m w_nm (s_md + mu_md^2) - mean^2.
    The row's own q(x_n) is left out: it was fitted to the same observed
    entries and would count them twice.  This posterior is multi-modal, so a
    row whose observed entries are ambiguous gets a hedged prediction with a
    wide std instead of one mode's.

With N above ``max_candidates`` a fixed random subset of the rows are the
candidates (a Monte Carlo estimate of the same mixture).
"""
from __future__ import annotations

import numpy as np

from .errors import ConfigurationError

#: Methods of :func:`mixture_moments` / ``model.impute``.
IMPUTE_METHODS = ("mixture", "latent")

#: Candidate rows at most (a fixed random subset above it); costs rows x candidates x D.
MAX_CANDIDATES = 4096

_ROW_CHUNK = 256


def check_method(method: str) -> str:
    if method not in IMPUTE_METHODS:
        raise ConfigurationError(f"Expected method as one of {IMPUTE_METHODS}, got {method!r} instead.")
    return method


def candidate_rows(N: int, max_candidates: int = MAX_CANDIDATES, seed: int = 0) -> np.ndarray:
    """Sorted indices (K,) of the rows whose q(x_m) form the mixture: all rows, or a fixed random subset."""
    if max_candidates < 2:
        raise ConfigurationError(f"Expected max_candidates of at least 2, got {max_candidates} instead.")
    if N <= max_candidates:
        return np.arange(N)
    return np.sort(np.random.default_rng(seed).choice(N, size=max_candidates, replace=False))


def mixture_moments(Y: np.ndarray, observed: np.ndarray, rows: np.ndarray,
                    cand_rows: np.ndarray, cand_mean: np.ndarray, cand_var: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Mixture mean and variance (len(rows), D) of each row of ``rows`` (see the module docstring).

    Y (N, D) data units (missing entries are ignored); observed (N, D) bool;
    rows (R,) row indices; cand_rows (K,) the candidates' row indices, with
    cand_mean, cand_var (K, D) their predictive moments (noise included, > 0).
    A row is never its own candidate.  Observed entries get their mixture
    moments as well; callers keep the data there.
    """
    rows = np.asarray(rows, dtype=np.intp)
    mean = np.empty((rows.size, Y.shape[1]))
    var = np.empty_like(mean)
    inv_var = 1.0 / cand_var
    # -0.5 sum_d o_d (y_d - mu_md)^2 / s_md + log s_md, expanded into three products with the candidates
    a_term = (inv_var).T                                  # multiplies o * y^2
    b_term = (cand_mean * inv_var).T                      # multiplies o * y
    c_term = (cand_mean**2 * inv_var + np.log(cand_var)).T  # multiplies o
    second = cand_var + cand_mean**2
    for lo in range(0, rows.size, _ROW_CHUNK):
        r = rows[lo:lo + _ROW_CHUNK]
        o = observed[r].astype(float)
        y = np.where(observed[r], Y[r], 0.0)
        log_w = -0.5 * ((o * y * y) @ a_term - 2.0 * (o * y) @ b_term + o @ c_term)
        log_w[cand_rows[None, :] == r[:, None]] = -np.inf
        log_w -= log_w.max(axis=1, keepdims=True)
        w = np.exp(log_w)
        w /= w.sum(axis=1, keepdims=True)
        mean[lo:lo + r.size] = w @ cand_mean
        var[lo:lo + r.size] = np.maximum(w @ second - mean[lo:lo + r.size] ** 2, 0.0)
    return mean, var
