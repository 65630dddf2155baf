"""RunsTable: every finished or stopped run of the session, one row each, to compare and restore.

A run keeps what shows it again -- its final :class:`TrainedResult` without
the model (latents, relevances, named parameters), the model's unconstrained
parameter vector, jitter and fixed names, and its objective curve -- never a
copy of the data (a trained model holds a centred copy of its data, so the
model itself is not kept).  Showing a run again builds its model anew from the
data set it was trained on and sets those parameters: the same model, no
training.  Each data set
gets one PCA row (computed once) so every model is read against it.  At most
``cap`` runs are kept; the oldest goes first and the table says so.

Scores that cost O(N^2) (leave-one-out 1-NN errors) or a projection (held-out
scores) are computed on a thread and arrive later through the dispatcher;
until then their cells are empty.
"""
from __future__ import annotations

import dataclasses
import io
import logging
import threading

import numpy as np
import pandas as pd
import param

from ..catalog import KERNELS
from ..data.column_stats import blocks_of
from .run_pair import same_rows

logger = logging.getLogger(__name__)

__all__ = ["COLUMNS", "RunRecord", "RunsTable", "pca_record", "dims_in_use"]

#: The table's columns, in order: (key, header).
COLUMNS = (
    ("run", "Run"),
    ("data", "Data"),
    ("model", "Model"),
    ("kernel", "Kernel"),
    ("Q", "Q"),
    ("M", "M"),
    ("bound_per_row", "Bound per row"),
    ("dims_in_use", "Dims in use"),
    ("nn_errors_2d", "1-NN errors (2 dims)"),
    ("nn_errors_all", "1-NN errors (all dims)"),
    ("held_out_log_density", "Held-out log density per row"),
    ("held_out_rmse", "Held-out RMSE"),
    ("likelihood", "Likelihood"),
    ("seed", "Seed"),
    ("iterations", "Iterations"),
    ("time_s", "Time (s)"),
    ("status", "Status"),
    ("objective", "Objective"),
)

#: Relevance above this fraction of the largest counts a dimension as in use (the summary's rule).
IN_USE = 0.05
#: Labels are counted up to this many rows (O(N^2) distances).
NN_MAX_ROWS = 20000
#: The PCA row's probabilistic PCA needs the data in memory: at most this many values.
PCA_MAX_VALUES = 50_000_000


def dims_in_use(relevance) -> int:
    """How many latent dimensions have relevance above 5% of the largest (0 when none is positive)."""
    rel = np.asarray(relevance, dtype=float).ravel()
    if rel.size == 0 or not np.all(np.isfinite(rel)) or rel.max() <= 0:
        return 0
    return int(np.count_nonzero(rel > IN_USE * rel.max()))


@dataclasses.dataclass
class RunRecord:
    """One row: the settings and scores (``cells``) and, for a trained run, what restores it."""

    number: int  # 1, 2, ... in the order the runs ended; 0 for a PCA row
    cells: dict
    result: object = None  # TrainedResult (final) without its model, None for a PCA row
    state: tuple | None = None  # (unconstrained vector (P,), jitter, fixed names) of the model
    trace: tuple | None = None  # (iterations (k,), objectives (k,)) of the objective curve
    source: object = None  # the loaded data set the run was trained from (the page's, before any held-out split)
    pca_key: int = 0  # the key of its data set's PCA row (RunsTable._pca)

    @property
    def is_pca(self) -> bool:
        return self.result is None


def _labels_for_nn(dataset):
    labels = getattr(dataset, "labels", None)
    if labels is None or labels.dtype.kind == "f" or dataset.n > NN_MAX_ROWS:
        return None
    return labels


def _kernel_text(config) -> str:
    text = KERNELS.get(config.kernel, config.kernel)
    if config.bias:
        text += " + bias"
    if config.white:
        text += " + white"
    return text


def _inducing(model):
    """M as a number, or per layer as text ("30, 20") for models with layers."""
    m = getattr(model, "num_inducing", None)
    if m is None:
        return None
    if np.ndim(m):
        return ", ".join(str(int(v)) for v in np.ravel(m))
    return int(m)


def run_cells(result, number: int, status: str, elapsed: float) -> dict:
    """The cells of a trained run's row (scores that need a thread are None)."""
    config, ds, model = result.config, result.dataset, result.model
    spec = config.spec
    n = int(result.X_mean.shape[0])
    likelihood = getattr(model, "likelihood", None)
    likelihood = likelihood if isinstance(likelihood, str) else getattr(likelihood, "name", None) or "gaussian"
    return {
        "run": number,
        "data": getattr(ds, "name", ""),
        "model": spec.display_name,
        "kernel": _kernel_text(config),
        "likelihood": likelihood,
        "Q": int(result.latent_dim),
        "M": _inducing(model) if spec.uses_inducing else None,
        "seed": int(config.seed),
        "iterations": int(result.iteration),
        "time_s": round(float(elapsed), 2),
        "status": status,
        "objective": float(result.objective),
        "bound_per_row": float(result.objective) / n,
        "dims_in_use": dims_in_use(result.relevance),
        "nn_errors_2d": None,
        "nn_errors_all": None,
        "held_out_log_density": None,
        "held_out_rmse": None,
    }


def run_scores(result) -> dict:
    """Leave-one-out 1-NN errors among the latent means: in the two most relevant dimensions (the map's
    default slice) and in all of them; {} without categorical labels."""
    from engine.metrics import most_relevant_dims, one_nn_errors

    labels = _labels_for_nn(result.dataset)
    if labels is None:
        return {}
    X = np.asarray(result.X_mean, dtype=float)
    shown = most_relevant_dims(result.relevance, min(2, X.shape[1]))
    return {"nn_errors_2d": int(one_nn_errors(X[:, shown], labels)), "nn_errors_all": int(one_nn_errors(X, labels))}


def held_out_scores(model, test) -> dict:
    """The run's scores on the held-out rows ``test`` (k, D): :func:`engine.metrics.held_out` with seed 0."""
    from engine import single_blas_thread
    from engine.metrics import held_out

    with single_blas_thread():
        score = held_out(model, test, seed=0)
    return {"held_out_log_density": score.mean_log_density, "held_out_rmse": score.rmse}


def ppca_held_out(mean, C, test) -> dict:
    """Held-out scores of a Gaussian N(mean, C) (probabilistic PCA) on ``test`` (k, D): the mean log
    density of the rows' present entries and the RMSE of the conditional mean of a hidden half of each
    row's entries given the other half (the same halves as :func:`engine.metrics.held_out`, seed 0)."""
    from scipy.stats import multivariate_normal

    from engine.metrics import half_observed

    present = ~np.isnan(test)
    seen = half_observed(present, 0)
    density, errors = [], []
    for y, p, o in zip(test, present, seen):
        density.append(multivariate_normal(mean[p], C[np.ix_(p, p)]).logpdf(y[p]))
        h = p & ~o
        cond = mean[h] + C[np.ix_(h, o)] @ np.linalg.solve(C[np.ix_(o, o)], y[o] - mean[o])
        errors.append(cond - y[h])
    errors = np.concatenate(errors)
    return {"held_out_log_density": float(np.mean(density)), "held_out_rmse": float(np.sqrt(np.mean(errors ** 2)))}


def pca_record(dataset, test=None) -> RunRecord:
    """The PCA row of ``dataset``: probabilistic PCA with two components (Tipping & Bishop 1999, its
    maximum log-likelihood per row as the bound), 1-NN errors in the two principal components and in
    the data's own D dimensions (all components); with held-out rows ``test`` (k, D), its held-out
    scores (:func:`ppca_held_out`).  Missing cells take their column's mean.

    The sample covariance is summed over blocks of rows (``dataset.values`` may be a memory-mapped
    file of a million rows: no centred copy of it is made)."""
    values = dataset.values
    N, D = values.shape
    cells = {key: None for key, _ in COLUMNS}
    cells.update(run=0, data=dataset.name, model="PCA", kernel="", likelihood="gaussian", Q=min(2, D), status="",
                 iterations=None, time_s=None)
    if N * D > PCA_MAX_VALUES:
        return RunRecord(0, cells)
    mean = dataset.column_stats.mean

    def centred(block):
        rows = np.asarray(values[block], dtype=float) - mean
        return np.where(np.isnan(rows), 0.0, rows)  # a missing cell takes its column's mean

    scatter = np.zeros((D, D))
    for block in blocks_of(values):
        rows = centred(block)
        scatter += rows.T @ rows
    lam, V = np.linalg.eigh(scatter / N)
    lam, V = np.maximum(lam[::-1], 0.0), V[:, ::-1]  # eigenvalues of the sample covariance, descending
    Vt = V.T
    q = min(2, D - 1)
    sigma2 = float(lam[q:].mean())
    if sigma2 > 0 and np.all(lam[:q] > 0):
        log_det = float(np.sum(np.log(lam[:q]))) + (D - q) * np.log(sigma2)
        cells["objective"] = -0.5 * N * (D * np.log(2 * np.pi) + log_det + D)
        cells["bound_per_row"] = cells["objective"] / N
        if test is not None and len(test) and D >= 2:
            V = Vt[:q].T
            C = (V * (lam[:q] - sigma2)) @ V.T + sigma2 * np.eye(D)
            cells.update(ppca_held_out(mean, C, np.asarray(test, dtype=float)))
    cells["dims_in_use"] = int(min(2, D))
    labels = _labels_for_nn(dataset)
    if labels is not None:  # at most NN_MAX_ROWS rows
        from engine.metrics import one_nn_errors

        Yc = centred(slice(0, N))
        cells["nn_errors_2d"] = int(one_nn_errors(Yc @ Vt[:2].T, labels))
        cells["nn_errors_all"] = int(one_nn_errors(Yc, labels))
    return RunRecord(0, cells, source=dataset)


class RunsTable(param.Parameterized):
    """The session's runs (page thread); :meth:`add` takes a finished run, :meth:`restore` shows one again."""

    cap = param.Integer(default=20, bounds=(1, None), doc="Runs kept; the oldest is dropped beyond this.")
    table = param.DataFrame(default=None, doc="One row per PCA / run, COLUMNS' keys as columns.")
    note = param.String(default="", doc="What the table last dropped or could not do (plain text).")
    restored = param.Integer(default=0, doc="The run on show after a restore (0: none).")

    def __init__(self, dispatcher, **params):
        super().__init__(**params)
        self._dispatcher = dispatcher
        self._records: list[RunRecord] = []
        self._pca: dict[int, RunRecord] = {}  # id(dataset) -> its PCA row (the data set is kept alive by it)
        self._count = 0
        self._lock = threading.Lock()
        self._updates: list = []  # (record, cells) computed on threads, applied on the page thread
        self._explorer = None
        self._store = None  # (RunStore, token): where this browser's runs outlive the page (keep_in)
        self._unkept: set[int] = set()  # runs the store does not keep (said once)
        self.table = self._frame()

    # ---- reading ----------------------------------------------------------------------
    @property
    def records(self) -> list[RunRecord]:
        """PCA rows first (one per data set, in the order the data sets were first trained on), then runs."""
        return [*self._pca.values(), *self._records]

    def record(self, number: int) -> RunRecord | None:
        return next((r for r in self._records if r.number == number), None)

    def latest(self) -> RunRecord | None:
        """The run that ended last (None: no run kept)."""
        return self._records[-1] if self._records else None

    @property
    def last_number(self) -> int:
        """The number the last run added got (0: none yet); the next run gets the one after."""
        return self._count

    def csv(self) -> bytes:
        """The table as CSV (every column, headers as shown, UTF-8)."""
        frame = self.table.rename(columns=dict(COLUMNS))
        buf = io.StringIO()
        frame.to_csv(buf, index=False)
        return buf.getvalue().encode("utf-8")

    # ---- changes (page thread) -------------------------------------------------------------
    def add(self, result, status: str, elapsed: float, trace=None, source=None) -> RunRecord:
        """Take a finished or stopped run (``result``: its final TrainedResult; ``trace``: its objective
        curve; ``source``: the loaded data set it came from).  Starts its scores on a thread."""
        self._count += 1
        model = result.model
        state = (np.array(model._free, dtype=float), float(getattr(model, "jitter", 0.0) or 0.0),
                 frozenset(getattr(model, "fixed", ())))
        record = RunRecord(self._count, run_cells(result, self._count, status, elapsed),
                           result=dataclasses.replace(result, model=None), state=state, trace=trace,
                           source=source if source is not None else result.dataset)
        self._records.append(record)
        dropped = []
        while len(self._records) > self.cap:
            dropped.append(self._records.pop(0).number)
        if dropped:
            self.note = (f"Run {', '.join(map(str, dropped))} dropped: the table keeps the last {self.cap} runs "
                         "(save a model to keep it).")
        ds = result.dataset
        record.pca_key = self._pca_key(ds)
        needs_pca = ds is not None and record.pca_key not in self._pca and getattr(ds, "values", None) is not None
        if needs_pca:
            self._pca[record.pca_key] = RunRecord(0, {**{k: None for k, _ in COLUMNS}, "data": ds.name,
                                                      "model": "PCA"}, source=ds)
        self._forget_unused_pca()
        self.table = self._frame()
        test = self._held_out_rows(ds)
        threading.Thread(target=self._score, args=(record, needs_pca, model, test), name="gplvm-runs",
                         daemon=True).start()
        return record

    def mark_best(self, number: int, of: int) -> None:
        """Say in run ``number``'s status that it was the best of ``of`` restarts."""
        record = self.record(number)
        if record is not None:
            record.cells["status"] = f"{record.cells['status']}, best of {of}"
            self.table = self._frame()

    def _pca_key(self, dataset) -> int:
        """The key of ``dataset``'s PCA row: that of a PCA row of the same rows if there is one (the same
        data loaded again, e.g. by the page after a reload), else ``id(dataset)``."""
        for key, pca in self._pca.items():
            ds = pca.source
            same_name = getattr(ds, "name", None) == getattr(dataset, "name", None)
            if ds is dataset or (same_name and same_rows(ds, dataset)):
                return key
        return id(dataset)

    def _forget_unused_pca(self) -> None:
        """A PCA row goes with the last run of its data set."""
        used = {r.pca_key for r in self._records}
        for key in [k for k in self._pca if k not in used]:
            del self._pca[key]

    def _held_out_rows(self, dataset):
        chooser = getattr(self._explorer, "held_out", None)
        return chooser.test_rows(dataset) if chooser is not None else None

    def _score(self, record: RunRecord, with_pca: bool, model=None, test=None) -> None:  # a thread
        updates = []
        try:
            if with_pca:
                pca = pca_record(record.result.dataset, test)
                updates.append((record.pca_key, pca.cells))
            updates.append((record, run_scores(record.result)))
            if test is not None and model is not None:
                updates.append((record, held_out_scores(model, test)))
        except Exception as exc:  # noqa: BLE001 - the row stays, without its scores, and the table says why
            logger.exception("Scores of run %d failed", record.number)
            updates.append((None, {"note": f"Scores of run {record.number} failed: {type(exc).__name__}: {exc}"}))
        with self._lock:
            self._updates.extend(updates)
        self._dispatcher.soon(self._apply_updates)

    def _apply_updates(self) -> None:
        with self._lock:
            updates, self._updates = self._updates, []
        for target, cells in updates:
            if target is None:
                self.note = cells["note"]
            elif isinstance(target, RunRecord):
                target.cells.update(cells)
            elif target in self._pca:
                self._pca[target].cells.update(cells)
        self.table = self._frame()

    # ---- the page ----------------------------------------------------------------------
    def connect(self, explorer) -> None:
        """Take every run of ``explorer`` that finishes or stops (not a saved model opened, not a
        restored row) and let :meth:`restore` show rows on its page."""
        self._explorer = explorer
        explorer.training.param.watch(self._on_status, ["status"])

    def _on_status(self, event) -> None:
        tr = self._explorer.training
        if event.new not in ("finished", "stopped") or tr.result is None or tr.opened or tr.restored:
            return
        data = tr.trace.data
        trace = (data["iteration"].to_numpy(dtype=float, copy=True), data["objective"].to_numpy(dtype=float, copy=True))
        try:
            self.add(tr.result, event.new, tr.elapsed, trace=trace, source=self._explorer.result_source)
        except Exception as exc:  # noqa: BLE001 - the run on show stays; the table says why it has no row
            logger.exception("Could not add the run to the runs table")
            self.note = f"This run could not be added to the table: {type(exc).__name__}: {exc}"

    def restore(self, number: int) -> bool:
        """Show run ``number`` again (its map, ARD bars, objective curve and reconstructions) without
        training: its model is built again on a thread and set to the run's final parameters; the page
        changes when it is ready.  False (and a note) when the run is gone or a training is running."""
        record = self.record(number)
        if record is None:
            self.note = f"Run {number} is no longer kept."
            return False
        if self._explorer.training.active:
            self.note = "A training is running: stop it before showing another run."
            return False
        self.note = f"Showing run {number} again…"
        threading.Thread(target=self._rebuild, args=(record,), name="gplvm-runs-restore", daemon=True).start()
        return True

    def rebuilt(self, record: RunRecord):
        """``record``'s TrainedResult with its model built again at the run's final parameters (any thread)."""
        from engine import single_blas_thread

        old = record.result
        training = self._explorer.training
        with single_blas_thread():
            model = training.build_model(old.dataset.values, old.config)
            free, jitter, fixed = record.state
            model._free = free.copy()
            model.jitter = jitter
            if hasattr(model, "_version"):  # what it computed while being built belongs to other parameters
                model._version += 1
                model._cache = None
            if hasattr(model, "_set_fixed"):
                model._set_fixed(fixed)
            return dataclasses.replace(old, model=model)

    def _rebuild(self, record: RunRecord) -> None:  # a thread
        try:
            result = self.rebuilt(record)
        except Exception as exc:  # noqa: BLE001 - the page keeps what it shows; the note says why
            logger.exception("Could not show run %d again", record.number)
            message = f"Could not show run {record.number} again: {type(exc).__name__}: {exc}"
            self._dispatcher.soon(lambda: setattr(self, "note", message))
            return
        self._dispatcher.soon(lambda: self._show(record, result))

    def _show(self, record: RunRecord, result) -> None:
        ex = self._explorer
        if ex.training.active:
            self.note = "A training started meanwhile: the run was not shown."
            return
        name = f"Run {record.number}"
        if ex.training.show_result(result, name, trace=record.trace, restored=True):
            ex.result_source = record.source
            self.restored = record.number
            self.note = ""

    # ---- across page reloads ---------------------------------------------------------------
    def keep_in(self, store, token: str) -> int:
        """Start from the runs ``store`` keeps for ``token`` (this browser's earlier pages) and keep this
        table's runs there from now on; returns how many runs came back."""
        saved = store.get(token)
        back = 0
        if saved is not None and not self._records and saved.records:
            self._records, self._pca = list(saved.records[-self.cap:]), dict(saved.pca)
            self._count = max(self._count, saved.last_number)
            self._forget_unused_pca()
            back = len(self._records)
            self.note = (f"{back} run{'s' if back != 1 else ''} of this browser kept from before the page was "
                         "loaded again; click one to show it.")
            self.table = self._frame()
        self._store = (store, token)
        self.param.watch(self._save, ["table"])
        self._save()
        return back

    def _save(self, *events) -> None:
        store, token = self._store
        store.put(token, self._records, self._pca, self._count)
        unkept = [r.number for r in self._records if r.number not in self._unkept and not store.keeps(r)]
        if unkept:
            self._unkept.update(unkept)
            self.note = (f"Run {', '.join(map(str, unkept))} will not be kept if the page is loaded again: its "
                         f"data are over {store.max_data_bytes // 2**20} MB (save the model to keep it).")

    def clear(self) -> None:
        self._records, self._pca = [], {}
        self.note = ""
        self.table = self._frame()

    def _frame(self) -> pd.DataFrame:
        rows = [r.cells for r in self.records]
        frame = pd.DataFrame(rows, columns=[k for k, _ in COLUMNS])
        return frame.astype(object).where(frame.notna(), None) if len(frame) else frame
