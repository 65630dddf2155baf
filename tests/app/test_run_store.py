"""The runs table across page reloads without a browser: a second page with the same browser token starts
from the first page's runs, another token does not; the store's caps and expiry."""
from __future__ import annotations

import numpy as np
import pytest

from gplvm_explorer.state.run_store import RunStore, nbytes, new_token, record_arrays, valid_token

pytestmark = pytest.mark.timeout(300)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def train_runs(ex, pump, count):
    ex.settings.model, ex.settings.optimizer, ex.settings.max_iters = "gplvm", "adam", 2
    for _ in range(count):
        assert ex.train(), ex.training.message
        assert ex.training.join(10)
        assert pump(ex, lambda: not ex.training.active, timeout=30)
    assert pump(ex, lambda: ex.runs.table["nn_errors_all"].notna().all(), timeout=30)


def test_a_page_of_the_same_browser_starts_from_its_runs_and_another_browser_does_not(make_explorer, fake_build,
                                                                                        pump):
    store = RunStore()
    first = make_explorer(build=fake_build())
    assert first.runs.keep_in(store, "browser-a-0123456789") == 0
    train_runs(first, pump, 2)
    before = first.runs.table.copy()
    first.close()

    again = make_explorer(build=fake_build())  # the page loaded again: a new session, the same cookie
    assert again.runs.keep_in(store, "browser-a-0123456789") == 2
    assert "2 runs of this browser kept" in again.runs.note
    assert again.runs.table.to_dict("records") == before.to_dict("records")  # PCA row and both runs
    # a click on a kept run shows it in the new page, built again from its parameters
    assert again.runs.restore(2)
    assert pump(again, lambda: again.training.restored == "Run 2", timeout=30), again.runs.note
    np.testing.assert_array_equal(again.training.result.model.get_free(), again.runs.record(2).state[0])
    # its next run is number 3, and the store now holds three
    train_runs(again, pump, 1)
    assert [r.number for r in again.runs.records] == [0, 1, 2, 3]
    assert [r.number for r in store.get("browser-a-0123456789").records] == [1, 2, 3]

    other = make_explorer(build=fake_build())  # another browser
    assert other.runs.keep_in(store, "browser-b-0123456789") == 0
    assert len(other.runs.table) == 0 and not other.runs.note


def test_the_store_forgets_a_browser_after_its_time_and_the_least_recent_beyond_its_caps(make_explorer,
                                                                                        fake_build, pump):
    ex = make_explorer(build=fake_build())
    train_runs(ex, pump, 1)
    records, pca = ex.runs._records, ex.runs._pca
    size = nbytes(a for r in (*records, *pca.values()) for a in record_arrays(r))
    assert size >= ex.data.dataset.values.nbytes  # the data set it was trained on is counted
    clock = Clock()
    store = RunStore(max_browsers=2, ttl=60, max_bytes=10 * size, clock=clock)
    for name in "abc":
        store.put(f"browser-{name}-0123456789", records, pca, 1)
        clock.now += 1
    assert len(store) == 2 and store.get("browser-a-0123456789") is None  # the least recent went first
    assert store.get("browser-b-0123456789") is not None  # a use: b is now the most recent
    store.put("browser-d-0123456789", records, pca, 1)
    assert store.get("browser-c-0123456789") is None and store.get("browser-b-0123456789") is not None
    clock.now += 61
    assert store.get("browser-b-0123456789") is None and len(store) == 0  # forgotten after its time
    # the byte cap: two browsers' runs do not fit in 1.5 runs' worth (the same arrays count once per browser)
    small = RunStore(max_bytes=int(1.5 * size), clock=clock)
    small.put("browser-e-0123456789", records, pca, 1)
    small.put("browser-f-0123456789", records, pca, 1)
    assert small.get("browser-e-0123456789") is None and small.get("browser-f-0123456789") is not None
    assert small.bytes == size
    # runs of a data set over the data cap are never kept; the page says so
    tight = RunStore(max_data_bytes=ex.data.dataset.values.nbytes - 1)
    assert tight.put("browser-g-0123456789", records, pca, 1) == 1
    assert tight.get("browser-g-0123456789").records == ()
    ex.runs.keep_in(tight, "browser-g-0123456789")
    assert ex.runs.note.startswith("Run 1 will not be kept if the page is loaded again")


def test_tokens():
    tokens = {new_token() for _ in range(100)}
    assert len(tokens) == 100 and all(valid_token(t) for t in tokens)
    for bad in (None, "", "short", "x" * 65, "abc def ghi jkl mno", "a;b=c0123456789abcdef", 12345678901234567):
        assert not valid_token(bad)
