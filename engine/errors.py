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


class ParameterError(EngineError, KeyError):
    """A parameter name is unknown to the model (e.g. in ``set_parameters`` or ``fix``)."""

    def __str__(self):  # KeyError would show the message quoted
        return str(self.args[0]) if self.args else ""


class ConfigurationError(EngineError, ValueError, TypeError):
    """An impossible setting: an unknown optimiser, option or kernel type, a value of the wrong
    type or range (a ValueError and a TypeError, so either ``except`` catches it)."""


class UnsupportedOperationError(EngineError, NotImplementedError):
    """The model cannot do this by its nature (e.g. uncertain inputs to a point-latent model)."""


class ModelFileError(EngineError, ValueError):
    """The file is not a model saved by ``engine.io.save_model``, is damaged, or describes a model
    that cannot be built (refused before anything of its size is allocated)."""
