"""Background training: the worker thread, the process-wide limiter, events and results."""
from .worker import (ACTIVE, Limiter, ProgressEvent, ResultEvent, Status, StatusEvent, TrainedResult, TrainingJob,
                     configure_limiter, default_limiter, explain_error)

__all__ = ["ACTIVE", "Limiter", "ProgressEvent", "ResultEvent", "Status", "StatusEvent", "TrainedResult",
           "TrainingJob", "configure_limiter", "default_limiter", "explain_error"]
