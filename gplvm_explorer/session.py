"""Compatibility name for the command line's ``--max-trainings``; see :mod:`gplvm_explorer.training.worker`."""
from .training.worker import configure_limiter, default_limiter

__all__ = ["configure_limiter", "default_limiter"]
