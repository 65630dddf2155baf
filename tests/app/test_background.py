"""LatestOnly: newest request only, outcomes applied on the page thread, errors delivered."""
from __future__ import annotations

import threading

from gplvm_explorer.dispatch import Dispatcher
from gplvm_explorer.state.background import LatestOnly


class Recorder:
    def __init__(self):
        self.applied = []
        self.threads = []
        self.idle_calls = 0

    def apply(self, outcome):
        self.applied.append(outcome)
        self.threads.append(threading.current_thread())

    def idle(self):
        self.idle_calls += 1


def test_requests_waiting_behind_a_running_one_collapse_to_the_newest():
    release = threading.Event()
    started = threading.Event()
    computed = []

    def compute(request):
        computed.append(request)
        started.set()
        release.wait(10)
        return request * 10

    rec = Recorder()
    runner = LatestOnly(Dispatcher(), compute, rec.apply, name="test-latest")
    runner.submit(1)
    assert started.wait(10)
    for r in (2, 3, 4):  # arrive while 1 runs
        runner.submit(r)
    assert runner.busy
    release.set()
    assert runner.wait(10)
    assert computed == [1, 4]
    assert rec.applied[-1] == 40  # the newest outcome wins
    assert not runner.busy


def test_outcomes_are_applied_on_the_flushing_thread_never_the_worker():
    rec = Recorder()
    d = Dispatcher()
    runner = LatestOnly(d, lambda r: r + 1, rec.apply, name="test-latest")
    runner.submit(1)
    runner._idle.wait(10)
    assert rec.applied == []  # nothing applied until the page thread runs the dispatcher
    assert d.flush() >= 1
    assert rec.applied == [2]
    assert rec.threads == [threading.current_thread()]


def test_an_exception_is_delivered_as_the_outcome_and_the_runner_keeps_working():
    rec = Recorder()

    def compute(request):
        if request == "bad":
            raise ValueError("no good")
        return request

    runner = LatestOnly(Dispatcher(), compute, rec.apply, name="test-latest", on_idle=rec.idle)
    runner.submit("bad")
    assert runner.wait(10)
    assert isinstance(rec.applied[-1], ValueError) and "no good" in str(rec.applied[-1])
    runner.submit("good")
    assert runner.wait(10)
    assert rec.applied[-1] == "good"
    assert rec.idle_calls >= 2


def test_drop_discards_the_waiting_request_and_the_running_outcome():
    release = threading.Event()
    started = threading.Event()
    computed = []

    def compute(request):
        computed.append(request)
        started.set()
        release.wait(10)
        return request

    rec = Recorder()
    runner = LatestOnly(Dispatcher(), compute, rec.apply, name="test-latest")
    runner.submit("old")
    assert started.wait(10)
    runner.submit("waiting")
    runner.drop()
    release.set()
    assert runner.wait(10)
    assert computed == ["old"]
    assert rec.applied == []


def test_close_forgets_everything_and_refuses_new_requests():
    computed = []
    rec = Recorder()
    runner = LatestOnly(Dispatcher(), computed.append, rec.apply, name="test-latest")
    runner.close()
    runner.submit("after close")
    assert runner.wait(1)
    assert computed == [] and rec.applied == []


def test_a_batch_defers_the_documents_model_graph_to_its_end():
    """Page updates changing many models recompute Bokeh's model graph once, not after every change."""
    from bokeh.document import Document
    from bokeh.models import Column, Div

    doc = Document()
    col = Column()
    doc.add_root(col)
    div = Div()
    with Dispatcher(doc).batch():
        col.children = [div]
        assert doc.models.get_by_id(div.id) is None  # not yet recomputed
    assert doc.models.get_by_id(div.id) is div
    with Dispatcher().batch():  # not served: nothing to defer
        pass
