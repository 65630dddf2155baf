"""What people read when a fit ends badly: the page's messages and the command line's lines."""
from __future__ import annotations

import numpy as np

__all__ = ["explain_error", "stopped_early_note"]


def stopped_early_note(iteration: int, exc: BaseException, kept: str) -> str:
    """What people read when the numbers ended a fit after ``iteration`` iterations (a NumericalError
    ``exc``; its best point is kept, as ``kept`` says): the page's note and the command line's line."""
    reason = str(exc).split(". Try")[0].rstrip(".")
    return (f"Stopped early at iteration {iteration}: {reason}. {kept}; standardising the data, fewer inducing "
            "points or a smaller Q may let it train longer.")



def explain_error(exc: BaseException) -> str:
    """A message for people: what happened and, where possible, what to try."""
    from engine.errors import EngineError, NumericalError, OptimizationError, ShapeError, UnsupportedKernelError

    msg = str(exc).strip() or type(exc).__name__
    if isinstance(exc, NumericalError):
        return (f"Numerical failure: {msg} Try: standardise the data (Data card), add a white-noise term to "
                "the kernel, use fewer inducing points M or a smaller Q, or a different seed/initialisation.")
    if isinstance(exc, OptimizationError):
        return (f"The optimiser stopped: {msg} "
                "Try: standardise the data, add a white-noise term, or a different optimiser or seed.")
    if isinstance(exc, UnsupportedKernelError):
        return f"Kernel not supported by this model: {msg}"
    if isinstance(exc, ShapeError):
        return f"The data or settings do not fit together: {msg}"
    if isinstance(exc, EngineError):
        return f"Training failed: {msg}"
    if isinstance(exc, (np.linalg.LinAlgError, FloatingPointError)):
        return (f"Numerical failure ({type(exc).__name__}: {msg}). "
                "Try: standardise the data, add a white-noise term, or use fewer inducing points.")
    if isinstance(exc, MemoryError):
        return "Out of memory: use fewer data points (subsample) or the sparse or Bayesian model."
    return f"Unexpected error in training ({type(exc).__name__}): {msg}"
