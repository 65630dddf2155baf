"""Background training: one job per Train click, its events and results, the process-wide limiter,
the prepared start of the next click."""
from .events import ACTIVE, ProgressEvent, ResultEvent, Status, StatusEvent
from .job import TrainingJob
from .limiter import Limiter, configure_limiter, default_limiter
from .messages import explain_error
from .result import TrainedResult

__all__ = ["ACTIVE", "Limiter", "ProgressEvent", "ResultEvent", "Status", "StatusEvent", "TrainedResult",
           "TrainingJob", "configure_limiter", "default_limiter", "explain_error"]
