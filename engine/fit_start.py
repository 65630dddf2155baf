"""A fit whose start the numbers refuse falls back to another start instead of failing.

The first evaluation of a collapsed model factorises Kmm and I + beta A with
the jitter policy of :mod:`engine.linalg` (raised tenfold up to
``JITTER_LIMIT`` of the matrix's mean diagonal).  When even that fails --
typically a smooth kernel (long lengthscales, a large variance) against a
small noise variance, where Kmm is numerically of low rank and rounding in
Psi2, magnified by Kmm's inverse and by beta, makes I + beta A indefinite --
:func:`start_model` builds the model again, in this order:

1. from a random start instead of the one asked for (PCA of data of lower rank
   than Q puts many inducing points close together);
2. with half the inducing points, and again, down to ``MIN_INDUCING``
   (fewer points in the same region: a better conditioned Kmm).

Each attempt is the fit's own first evaluation (:func:`engine.fit` with
``max_iters=0``), so a model that starts here also starts in the fit.  What was changed is returned as a note for people.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

from .errors import NumericalError

__all__ = ["MIN_INDUCING", "Start", "start_model"]

#: Fewest inducing points a fallback goes down to.
MIN_INDUCING = 4


class Start(NamedTuple):
    """A model whose start evaluates, its objective there, the settings it was built with, and a note."""

    model: Any
    objective: float
    init: str
    num_inducing: int | None
    note: str  # '' when the start asked for worked


def _attempts(init: str, num_inducing: int | None):
    """(init, num_inducing) to try after the one asked for, in order."""
    if init != "random":
        yield "random", num_inducing
    m = num_inducing
    while m is not None and m // 2 >= MIN_INDUCING:
        m //= 2
        yield "random" if init != "random" else init, m


def start_model(build: Callable[[str, int | None], Any], init: str = "pca", num_inducing: int | None = None, *,
                optimizer: str | None = None, stop=None) -> Start | None:
    """``build(init, num_inducing)``, evaluated at its start; on a NumericalError there, the fallbacks.

    The evaluation is :func:`engine.fit` with ``max_iters=0`` (the fit's own jitter
    choice and first evaluation; ``stop`` reaches inside it: None is returned when
    it is set).  ``num_inducing`` is None for models without inducing points (only
    the random start is tried).  Raises the first NumericalError when no fallback
    starts either; other errors (impossible settings) are raised at once.
    """
    from .optimize import fit

    def evaluate(model) -> float | None:
        result = fit(model, optimizer=optimizer, max_iters=0, stop=stop)
        return None if result.stopped else float(result.objective)

    try:
        model = build(init, num_inducing)
        value = evaluate(model)
        return None if value is None else Start(model, value, init, num_inducing, "")
    except NumericalError as exc:
        first = exc
    for alt_init, alt_m in _attempts(init, num_inducing):
        try:
            model = build(alt_init, alt_m)
            value = evaluate(model)
        except NumericalError:
            continue
        if value is None:
            return None
        changes = []
        if alt_init != init:
            changes.append(f"a {alt_init} start instead of {init}")
        if alt_m != num_inducing:
            changes.append(f"M={alt_m} inducing points instead of {num_inducing}")
        reason = str(first).split(". Try")[0].rstrip(".")
        return Start(model, value, alt_init, alt_m,
                     f"The start asked for could not be evaluated ({reason}); training from "
                     f"{' and '.join(changes)}.")
    raise first
