"""RunStore: the runs table of a browser kept on the server across page reloads, for a while.

A page reload is a new session with a new, empty :class:`~gplvm_explorer.state.runs.RunsTable`.  Each
browser carries a random token in a cookie (set by the page when it has none); the table's runs are
kept under that token in one process-wide store, and the next page of the same browser starts from
them.  Another browser (another token, or none) never sees them.

The store is bounded: at most ``max_browsers`` tokens, each forgotten ``ttl`` seconds after its last
use, and at most ``max_bytes`` of arrays in all (latents, parameters, curves and the data sets the
runs were trained on, each array counted once); beyond that the least recently used browsers go first.
A run whose data set alone is over ``max_data_bytes`` is not kept across a reload (the page says so):
the store never holds on to a big upload after its page is gone.
"""
from __future__ import annotations

import dataclasses
import re
import secrets
import threading
import time

import numpy as np

__all__ = ["COOKIE", "RunStore", "SavedRuns", "default_store", "new_token", "valid_token"]

#: The cookie that carries a browser's token.
COOKIE = "gx_runs"
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
#: How long the browser keeps its cookie (the server's store forgets sooner: ``ttl``).
COOKIE_MAX_AGE = 7 * 24 * 3600


def new_token() -> str:
    """A random token for a browser (24 URL-safe characters, 144 bits)."""
    return secrets.token_urlsafe(18)


def valid_token(text) -> bool:
    return isinstance(text, str) and bool(_TOKEN.match(text))


@dataclasses.dataclass(frozen=True)
class SavedRuns:
    """What a RunsTable needs to start again: its runs (RunRecords, oldest first), its PCA rows by data set
    and the number its last run got."""

    records: tuple
    pca: dict
    last_number: int


def _arrays(value):
    """The numpy arrays inside a RunRecord (or any value of one), as found."""
    if isinstance(value, np.ndarray):
        yield value
    elif isinstance(value, (tuple, list, frozenset, set)):
        for v in value:
            yield from _arrays(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _arrays(v)


def record_arrays(record) -> list:
    """The arrays a kept run holds on to: its latents, parameters, curve and the data sets it came from."""
    out = list(_arrays(record.state)) + list(_arrays(record.trace))
    result = record.result
    if result is not None:
        out += [a for a in (result.X_mean, result.X_variance, result.relevance, result.view_relevance)
                if isinstance(a, np.ndarray)]
        out += list(_arrays(result.parameters))
    out += data_arrays(record)
    return out


def data_arrays(record) -> list:
    out = []
    for ds in (getattr(record.result, "dataset", None), record.source):
        for name in ("values", "labels", "times"):
            a = getattr(ds, name, None)
            if isinstance(a, np.ndarray):
                out.append(a)
    return out


def nbytes(arrays) -> int:
    """Bytes of distinct arrays (an array shared by several runs counts once; views count their base)."""
    seen, total = set(), 0
    for a in arrays:
        base = a
        while isinstance(base.base, np.ndarray):
            base = base.base
        if id(base) not in seen:
            seen.add(id(base))
            total += int(base.nbytes)
    return total


class RunStore:
    """Process-wide, thread-safe: token -> the runs table of that browser (SavedRuns), bounded."""

    def __init__(self, max_browsers: int = 64, ttl: float = 3600.0, max_bytes: int = 64 * 2**20,
                 max_data_bytes: int = 4 * 2**20, clock=time.monotonic):
        self.max_browsers = int(max_browsers)
        self.ttl = float(ttl)
        self.max_bytes = int(max_bytes)
        self.max_data_bytes = int(max_data_bytes)
        self._clock = clock
        self._lock = threading.Lock()
        self._kept: dict[str, tuple[float, SavedRuns, int]] = {}  # token -> (last use, runs, bytes), LRU order

    def keeps(self, record) -> bool:
        """Whether ``record`` may outlive its page: its data sets are small enough."""
        return nbytes(data_arrays(record)) <= self.max_data_bytes

    def put(self, token: str, records, pca: dict, last_number: int) -> int:
        """Keep ``token``'s runs (the ones :meth:`keeps`); returns how many were left out."""
        kept = tuple(r for r in records if self.keeps(r))
        keys = {r.pca_key for r in kept}
        saved = SavedRuns(kept, {k: v for k, v in pca.items() if k in keys}, int(last_number))
        size = nbytes(a for r in (*kept, *saved.pca.values()) for a in record_arrays(r))
        with self._lock:
            self._kept.pop(token, None)
            if size <= self.max_bytes:
                self._kept[token] = (self._clock(), saved, size)
            self._trim()
        return len(records) - len(kept)

    def get(self, token: str) -> SavedRuns | None:
        """``token``'s runs (None: none kept, or forgotten); a use that keeps them longer."""
        with self._lock:
            self._trim()
            entry = self._kept.pop(token, None)
            if entry is None:
                return None
            self._kept[token] = (self._clock(), entry[1], entry[2])
            return entry[1]

    def forget(self, token: str) -> None:
        with self._lock:
            self._kept.pop(token, None)

    def __len__(self) -> int:
        with self._lock:
            self._trim()
            return len(self._kept)

    @property
    def bytes(self) -> int:
        with self._lock:
            return sum(size for _, _, size in self._kept.values())

    def _trim(self) -> None:
        now = self._clock()
        for token in [t for t, (used, _, _) in self._kept.items() if now - used > self.ttl]:
            del self._kept[token]
        total = sum(size for _, _, size in self._kept.values())
        while self._kept and (len(self._kept) > self.max_browsers or total > self.max_bytes):
            oldest = next(iter(self._kept))  # least recently used first (insertion order, moved on use)
            total -= self._kept.pop(oldest)[2]


_default: RunStore | None = None
_default_lock = threading.Lock()


def default_store() -> RunStore:
    """The server's store (one per process)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = RunStore()
        return _default
