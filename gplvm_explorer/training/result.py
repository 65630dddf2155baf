"""TrainedResult: an immutable view of a model at one iteration, as the page shows it."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..catalog import ModelConfig

__all__ = ["TrainedResult"]


@dataclass(frozen=True, eq=False)
class TrainedResult:
    """A consistent, immutable view of a model at one iteration.

    ``model`` is a frozen copy (``predict`` is safe on any thread; nothing
    changes it afterwards); the arrays are read-only.  ``final`` marks the
    state after the fit ended.  :meth:`from_model` builds one from a model (and
    the fit's snapshot while it trains).
    """

    run_id: int
    iteration: int
    objective: float
    objective_name: str
    model: Any
    X_mean: np.ndarray  # (N, Q)
    X_variance: np.ndarray | None  # (N, Q) or None
    relevance: np.ndarray  # (Q,); for several views (MRD), each dim's largest over the views
    parameters: dict
    config: ModelConfig
    dataset: Any = None
    final: bool = False
    jitter: float = 0.0
    view_relevance: np.ndarray | None = None  # (V, Q) per view (MRD), else None
    _predictor_lock: Any = field(default_factory=threading.Lock, init=False, repr=False)

    @classmethod
    def from_model(cls, model, *, run_id: int, config: ModelConfig, dataset=None, iteration: int = 0,
                   objective: float | None = None, final: bool = True, snapshot=None) -> "TrainedResult":
        """The result of ``model`` as it is, or at ``snapshot`` (an engine Snapshot taken while it trains:
        its arrays are handed over as they are, nothing of size N is copied).

        ``objective`` None: the snapshot's, else the model's own (one evaluation).  Arrays are made
        read-only; the latent parameters are left out of ``parameters`` (they are X_mean and
        X_variance); a relevance with one row per view (MRD) is kept as ``view_relevance`` and
        ``relevance`` is each dimension's largest over the views.
        """
        if snapshot is not None:
            X_mean, X_var, rel = snapshot.X_mean, snapshot.X_variance, snapshot.relevance
            params = dict(snapshot.parameters)
            iteration = int(snapshot.iteration)
            objective = float(snapshot.objective) if objective is None else objective
        else:
            state = model.snapshot_state()
            X_mean, X_var, rel = (np.array(state["X_mean"], dtype=float), state.get("X_variance"),
                                  np.array(state["relevance"], dtype=float))
            X_var = None if X_var is None else np.array(X_var, dtype=float)
            params = dict(state.get("parameters", {}))
            params.pop("X_mean", None)
            params.pop("X_variance", None)
            objective = float(model.objective()) if objective is None else objective
        view_rel = None
        if rel is not None and np.ndim(rel) == 2:  # one row per view: (Q,) is the largest of them
            view_rel = np.array(rel, dtype=float)
            rel = view_rel.max(axis=0)
        for arr in (X_mean, X_var, rel, view_rel):
            if arr is not None:
                arr.setflags(write=False)
        return cls(run_id=run_id, iteration=int(iteration), objective=float(objective),
                   objective_name=getattr(model, "objective_name", config.spec.objective_name), model=model, X_mean=X_mean,
                   X_variance=X_var, relevance=rel, parameters=params, config=config, dataset=dataset,
                   final=final, jitter=float(getattr(model, "jitter", 0.0) or 0.0), view_relevance=view_rel)

    @property
    def latent_dim(self) -> int:
        return int(self.X_mean.shape[1])

    @property
    def predictor(self):
        """The model's :class:`engine.predictor.Predictor`, taken once (thread-safe); None where the
        model predicts by other means (``model.predictor()`` is None or absent).

        The first call may cost a pass over the data (the latent map's thread makes it);
        afterwards a prediction at n points is O(n M^2 D), independent of N.
        """
        cache = self.__dict__.get("_predictor")
        if cache is None:
            with self._predictor_lock:
                cache = self.__dict__.get("_predictor")
                if cache is None:
                    make = getattr(self.model, "predictor", None)
                    cache = (make() if callable(make) else None,)
                    self.__dict__["_predictor"] = cache  # frozen dataclass: a cache, not a field
        return cache[0]

    def predict(self, Xnew: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean (n, D) and variance (n, D) of f at latent points (n, Q) (noise not included)."""
        predictor = self.predictor
        if predictor is not None:
            return predictor.predict(Xnew)
        mean, var = self.model.predict(np.atleast_2d(Xnew))
        mean = np.atleast_2d(np.asarray(mean, dtype=float))
        var = np.asarray(var, dtype=float)
        if var.ndim == 1:
            var = np.repeat(var[:, None], mean.shape[1], axis=1)
        return mean, var
