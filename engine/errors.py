"""Typed exceptions raised by the engine.

Every failure the engine can predict is one of these, so callers (the app, a
script) can catch ``EngineError`` and show its message.
"""


class EngineError(Exception):
    """Base class of every error the engine raises on purpose."""


class ShapeError(EngineError, ValueError):
    """An array argument has the wrong shape, dtype or non-finite values."""


class UnsupportedKernelError(EngineError, TypeError):
    """The model cannot use this kernel (e.g. no closed-form psi statistics)."""


class NumericalError(EngineError, ArithmeticError):
    """A factorisation failed even after jitter escalation, or a value is NaN/inf."""


class OptimizationError(EngineError, RuntimeError):
    """The optimiser met a non-finite objective or gradient and stopped."""
