"""What a training job reports, in order, each with a sequence number: status, progress, results.

* :class:`StatusEvent` -- queued (with the position), starting, running,
  paused, stopping, finished, stopped, failed (with a message for people);
* :class:`ProgressEvent` -- the objective points since the last event
  (coalesced: never one event per iteration) and the latest iteration;
* :class:`ResultEvent` -- an immutable :class:`~gplvm_explorer.training.result.TrainedResult`.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from .result import TrainedResult

__all__ = ["ACTIVE", "ProgressEvent", "ResultEvent", "Status", "StatusEvent"]


class Status(str, enum.Enum):
    IDLE = "idle"
    QUEUED = "queued"
    STARTING = "starting"
    RUNNING = "running"
    PAUSED = "paused"
    STOPPING = "stopping"
    FINISHED = "finished"
    STOPPED = "stopped"
    FAILED = "failed"

    def __str__(self) -> str:
        return self.value



ACTIVE = frozenset({Status.QUEUED, Status.STARTING, Status.RUNNING, Status.PAUSED, Status.STOPPING})


@dataclass(frozen=True)
class StatusEvent:
    run_id: int
    seq: int
    status: Status
    message: str = ""
    position: int = 0  # place in the queue (1 = next), when queued
    details: str = ""  # traceback of a failure (for the log and the page's details)
    reason: str = ""  # why a finished fit ended (engine FitResult.reason: "converged", "max_iters", ...)


@dataclass(frozen=True)
class ProgressEvent:
    run_id: int
    seq: int
    iterations: np.ndarray  # new points of the objective trace
    objectives: np.ndarray
    iteration: int
    objective: float
    elapsed: float
    evaluations: int
    epoch: float = 0.0  # passes over the rows so far (minibatch models); 0 for the others
    #: the best objective's relative rise over the convergence rule's window (engine Snapshot.change):
    #: the run converges when it falls to the rule's rtol; NaN without a rule or before a full window
    change: float = float("nan")


@dataclass(frozen=True)
class ResultEvent:
    run_id: int
    seq: int
    result: TrainedResult
