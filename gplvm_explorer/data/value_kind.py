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

from .column_stats import blocks_of

__all__ = ["LikelihoodProposal", "likelihood_for", "propose_likelihood"]

#: Largest count the Poisson proposal accepts: beyond it a count is as well served by a Gaussian.
_LARGEST_COUNT = 1e6


class LikelihoodProposal(NamedTuple):
    """``likelihood``: "gaussian", "bernoulli" or "poisson"; ``reason``: one plain-text line saying why."""

    likelihood: str
    reason: str


def propose_likelihood(values, restore=None) -> LikelihoodProposal:
    """The likelihood that matches ``values`` (N, D) (module docstring), with a one-line reason.

    The values are read a block of rows at a time (a memory-mapped file is not copied), each block
    passed through ``restore`` first when given; the reading stops once neither binary values nor
    counts are possible.
    """
    seen, binary, counts = False, True, True
    for block in blocks_of(values):
        part = np.asarray(values[block], dtype=float)
        if restore is not None:
            part = restore(part)
        observed = part[~np.isnan(part)]
        if observed.size == 0:
            continue
        seen = True
        binary = binary and bool(np.all((observed == 0.0) | (observed == 1.0)))
        counts = counts and bool(np.all(observed == np.round(observed)) and observed.min() >= 0.0
                                 and observed.max() <= _LARGEST_COUNT)
        if not (binary or counts):
            break
    if not seen:
        return LikelihoodProposal("gaussian", "")
    if binary:
        return LikelihoodProposal(
            "bernoulli", "Every value is 0 or 1: a Bernoulli likelihood models binary data "
                         "(predictions are probabilities; a Gaussian one can predict values outside [0, 1]).")
    if counts:
        return LikelihoodProposal(
            "poisson", "Every value is a whole number of at least 0: a Poisson likelihood models counts "
                       "(predictions are expected counts; a Gaussian one can predict negative counts).")
    return LikelihoodProposal("gaussian", "")


def likelihood_for(dataset) -> LikelihoodProposal:
    """The likelihood that matches a `Dataset`'s values as loaded (standardisation undone)."""
    if dataset.scale is None:
        return propose_likelihood(dataset.values)
    # undone to within rounding: 0/1 and counts come back whole
    return propose_likelihood(dataset.values, lambda part: np.round(dataset.unstandardize(part), 9))
