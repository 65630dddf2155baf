"""What kind of values a data set holds, and the noise model (likelihood) that fits them.

Binary answers (0/1), counts (0, 1, 2, ...) and real measurements call for
different noise models (Lawrence 2005, section 5): a Gaussian one predicts
values outside [0, 1] for binary data and negative counts.  The page proposes
the likelihood that matches the data (the user can override it):

* every observed value 0 or 1                    -> "bernoulli"
* every observed value a whole number >= 0       -> "poisson"
* anything else                                  -> "gaussian"

Missing (NaN) entries are ignored.  The check reads the values as loaded,
before any standardisation (which would turn 0/1 into other numbers).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["LikelihoodProposal", "likelihood_for", "propose_likelihood"]

#: Largest count the Poisson proposal accepts: beyond it a count is as well served by a Gaussian.
_LARGEST_COUNT = 1e6


class LikelihoodProposal(NamedTuple):
    """``likelihood``: "gaussian", "bernoulli" or "poisson"; ``reason``: one plain-text line saying why."""

    likelihood: str
    reason: str


def propose_likelihood(values) -> LikelihoodProposal:
    """The likelihood that matches ``values`` (N, D) (module docstring), with a one-line reason."""
    arr = np.asarray(values, dtype=float)
    observed = arr[~np.isnan(arr)]
    if observed.size == 0:
        return LikelihoodProposal("gaussian", "")
    if np.all((observed == 0.0) | (observed == 1.0)):
        return LikelihoodProposal(
            "bernoulli", "Every value is 0 or 1: a Bernoulli likelihood models binary data "
                         "(predictions are probabilities; a Gaussian one can predict values outside [0, 1]).")
    whole = observed == np.round(observed)
    if np.all(whole) and observed.min() >= 0.0 and observed.max() <= _LARGEST_COUNT:
        return LikelihoodProposal(
            "poisson", "Every value is a whole number of at least 0: a Poisson likelihood models counts "
                       "(predictions are expected counts; a Gaussian one can predict negative counts).")
    return LikelihoodProposal("gaussian", "")


def likelihood_for(dataset) -> LikelihoodProposal:
    """The likelihood that matches a `Dataset`'s values as loaded (standardisation undone)."""
    values = dataset.values
    if dataset.scale is not None:  # undone to within rounding: 0/1 and counts come back whole
        values = np.round(dataset.unstandardize(values), 9)
    return propose_likelihood(values)
