"""The explorer's state objects together, without a browser (the test plays the page's event loop)."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from gplvm_explorer import export
from gplvm_explorer.catalog import Budget
from gplvm_explorer.explorer import Explorer
from gplvm_explorer.training import Limiter

pytestmark = pytest.mark.timeout(300)


def test_train_live_stop_reconstruct_and_export_with_the_engine(make_explorer, pump):
    ex = make_explorer(publish_interval=0.2)
    assert ex.data.dataset.name == "rotating-glyph" and ex.settings.errors == []
    ex.settings.max_iters = 5000
    assert ex.train(), ex.training.message
    sizes = []
    assert pump(ex, lambda: (sizes.append(len(ex.training.trace.data)) or len({s for s in sizes if s}) >= 3),
                timeout=180)
    assert ex.training.status in ("running", "starting")
    assert ex.data.locked and ex.settings.locked
    assert pump(ex, lambda: ex.training.result is not None and ex.latent.wait(0) is not None
                and ex.latent.view is not None, timeout=60)
    ex.training.stop()
    assert pump(ex, lambda: ex.training.status == "stopped", timeout=30)
    assert ex.latent.wait() and ex.training.result.final
    assert not ex.data.locked and "ELBO" in ex.summary
    v = ex.latent.view
    x0, y0, x1, y1 = v.extent
    rec = ex.latent.reconstruct_at((x0 + x1) / 2, (y0 + y1) / 2)
    assert rec.is_image and rec.mean.shape == (256,) and np.all(np.isfinite(rec.mean))
    csv = export.latents_csv(ex.training.result).decode().splitlines()
    assert csv[0].startswith("index,label,x1") and len(csv) == ex.data.dataset.n + 1
    assert export.latent_png(v, ex.shown.colouring())[:8] == b"\x89PNG\r\n\x1a\n"
    assert export.model_npz(ex.training.result)[:2] == b"PK"


def test_quick_fits_many_times_never_leave_the_page_training(make_explorer, fake_build, pump):
    """The state arrives as events: a fit that starts and ends between two page updates still ends."""
    ex = make_explorer(build=fake_build())
    ex.settings.model, ex.settings.optimizer, ex.settings.max_iters = "gplvm", "adam", 2
    seen = []
    ex.training.param.watch(lambda e: seen.append(e.new), "status")
    for i in range(30):
        seen.clear()
        assert ex.train(), ex.training.message
        assert ex.training.join(5)  # the whole fit happens before the page looks
        ex.dispatcher.flush()
        assert ex.training.status == "finished", (i, seen)
        assert seen[-1] == "finished"
        assert not ex.training.active and not ex.data.locked
    assert ex.training.run_id == 30


def test_size_guard_refuses_with_a_suggestion(make_explorer):
    ex = make_explorer(budget=Budget(memory_bytes=20e6, seconds_per_iteration=60))
    ex.settings.model = "gplvm"
    assert ex.settings.errors and "sparse or Bayesian" in ex.settings.errors[0]
    assert ex.train() is False
    assert ex.training.status == "idle" and "memory" in ex.training.message


def test_queue_position_is_shown_when_the_server_is_busy(make_explorer, fake_build, pump):
    limiter = Limiter(1)
    first = make_explorer(limiter=limiter, build=fake_build(delay=0.002))
    second = make_explorer(limiter=limiter, build=fake_build())
    for ex in (first, second):
        ex.settings.model, ex.settings.optimizer, ex.settings.max_iters = "gplvm", "adam", 100_000
    assert first.train()
    assert pump(first, lambda: first.training.status == "running")
    assert second.train()
    assert pump(second, lambda: second.training.status == "queued")
    assert second.training.queue_position == 1 and "queue" in second.training.message
    first.close()  # the tab closes: its fit stops within a second and the next one starts
    assert first.training.join(1.0)
    assert pump(second, lambda: second.training.status == "running", timeout=5)
    second.training.stop()
    assert pump(second, lambda: second.training.status == "stopped", timeout=5)


def test_errors_in_page_updates_are_logged_and_shown(make_explorer, caplog):
    ex = make_explorer()

    def broken():
        raise ZeroDivisionError("boom")
    ex.dispatcher.soon(broken)
    ex.dispatcher.flush()
    assert "ZeroDivisionError" in ex.page_error
    assert any("boom" in (r.exc_text or "") or r.exc_info for r in caplog.records)


def test_closed_session_ignores_later_updates(make_explorer, fake_build):
    ex = make_explorer(build=fake_build(delay=0.002))
    ex.settings.model, ex.settings.optimizer, ex.settings.max_iters = "gplvm", "adam", 100_000
    assert ex.train()
    time.sleep(0.1)
    t0 = time.monotonic()
    ex.close()
    assert ex.training.join(1.0) and time.monotonic() - t0 < 1.0
    assert ex.dispatcher.pending() == 0
    ex.dispatcher.soon(lambda: None)
    assert ex.dispatcher.pending() == 0


def test_data_errors_keep_the_previous_data_and_labels_are_capped(make_explorer):
    ex = make_explorer()
    before = ex.data.dataset
    assert ex.data.load_upload(b"a,b,c\n1,2\n\x00\x01garbage", "broken.csv") is False
    assert ex.data.error and ex.data.dataset is before
    rows = "\n".join(f"{i},{(i * 7) % 11},{(i * 3) % 5},lab{i}" for i in range(3000))
    assert ex.data.load_upload(("f1,f2,f3,label\n" + rows).encode(), "many.csv"), ex.data.error
    assert ex.data.label_column == "label" and ex.data.labels.capped
    assert len(ex.data.labels.categories) <= 10
    assert any("distinct" in line for line in ex.data.summary_lines())
    assert ex.settings.errors == []  # M bounded by N, shape known


def test_a_closed_session_is_freed(fake_build, pump):
    import gc
    import weakref

    ex = Explorer(limiter=Limiter(1), build=fake_build(delay=0.002))
    ex.settings.model, ex.settings.optimizer, ex.settings.max_iters = "gplvm", "adam", 100_000
    assert ex.train()
    assert pump(ex, lambda: ex.training.result is not None)
    ref = weakref.ref(ex)
    model_ref = weakref.ref(ex.training.result.model)
    ex.close()
    assert ex.training.join(1.0) and ex.latent.wait(5.0)  # its threads end
    del ex
    gc.collect()
    assert ref() is None and model_ref() is None  # nothing process-wide keeps the session or its models


def test_summary_counts_1nn_errors_off_the_page_thread(make_explorer, fake_build, pump, monkeypatch):
    """The O(N^2) 1-NN count never runs inside a page update: the summary is shown at once, the line follows."""
    from engine.metrics import one_nn_errors
    from gplvm_explorer import explorer as explorer_mod

    release, counted_on = threading.Event(), []

    def slow_count(result):  # the real count, held until the test has looked at the page
        counted_on.append(threading.current_thread())
        assert release.wait(30)
        return export.latent_nn_errors(result)
    monkeypatch.setattr(explorer_mod, "latent_nn_errors", slow_count)
    ex = make_explorer(build=fake_build())
    rng = np.random.default_rng(4)
    rows = "\n".join(f"{a:.4f},{b:.4f},{c:.4f},{'ab'[i % 2]}" for i, (a, b, c) in
                     enumerate(rng.standard_normal((200, 3))))
    assert ex.data.load_upload(f"a,b,c,kind\n{rows}\n".encode(), "kinds.csv"), ex.data.error
    ex.data.label_column = "kind"
    assert ex.data.dataset.labels is not None
    ex.settings.model, ex.settings.optimizer, ex.settings.max_iters = "gplvm", "adam", 2
    assert ex.train(), ex.training.message
    assert ex.training.join(10)
    ex.dispatcher.flush()  # the end of the run: the summary at once, without the count
    assert ex.training.status == "finished" and "model summary" in ex.summary
    assert "1-NN" not in ex.summary and "Iterations: 2" in ex.summary
    ex.settings.max_iters = 3  # a second run ends while the first count is still going
    assert ex.train(), ex.training.message
    assert ex.training.join(10)
    ex.dispatcher.flush()
    assert "Iterations: 3" in ex.summary and "1-NN" not in ex.summary
    release.set()
    assert pump(ex, lambda: "1-NN" in ex.summary, timeout=30)
    assert len(counted_on) == 2 and threading.main_thread() not in counted_on
    for t in counted_on:
        t.join(10)
    ex.dispatcher.flush()
    result = ex.training.result
    expected = one_nn_errors(result.X_mean, result.dataset.labels)
    assert "Iterations: 3" in ex.summary  # the late count of the first run is not shown
    assert f"1-NN errors in the latent space: {expected} of 200" in ex.summary


def test_the_next_train_click_is_prepared_after_each_change_and_trains_that_model(make_explorer, pump):
    made = []

    def build(Y, config):
        made.append(config.spec.build(Y, config))
        return made[-1]
    ex = make_explorer(build=build)
    ex.settings.max_iters = 3
    ex.dispatcher.flush()
    first = ex.training.prepared
    assert first is not None and first.matches(ex.data.dataset.values, ex.settings.config())
    ex.settings.num_inducing = 12  # another model: the start prepared before no longer serves
    ex.dispatcher.flush()
    second = ex.training.prepared
    assert second is not first and not first.matches(ex.data.dataset.values, ex.settings.config())
    assert second.matches(ex.data.dataset.values, ex.settings.config())
    assert second.wait(120) and second.ready
    builds = len(made)
    assert ex.train(), ex.training.message
    assert ex.training.prepared is None
    assert pump(ex, lambda: ex.training.status == "finished", timeout=120), ex.training.message
    assert len(made) == builds and ex.training.result.model is made[-1]  # trained the prepared model
    assert ex.training.trace.data["objective"].iloc[0] == second.value
    assert ex.training.trace.data["iteration"].iloc[0] == 0
    ex.dispatcher.flush()
    assert ex.training.prepared is None  # a finished run prepares nothing until something changes


def test_a_result_gets_a_page_update_of_its_own_after_the_points_before_it(fake_build):
    """The first point must not wait for the page to take in a result; the order of events is kept."""
    from gplvm_explorer.catalog import ModelConfig
    from gplvm_explorer.dispatch import Dispatcher
    from gplvm_explorer.state.training import TrainingRun

    d = Dispatcher()
    tr = TrainingRun(d, limiter=Limiter(1), build=fake_build(), publish_interval=0.0)
    seen = []  # watchers run at the end of each page update: what had arrived by then
    tr.param.watch(lambda e: seen.append(("points", tr.result is not None)), ["objective"])
    tr.param.watch(lambda e: seen.append((e.new, tr.result is not None and tr.result.final)), ["status"])
    ex = Explorer()
    assert tr.start(ex.data.dataset, ModelConfig(model="gplvm", latent_dim=2, optimizer="adam", max_iters=20))
    assert tr.join(30)
    d.flush()  # the page's updates, as notified by the run: every event arrives in the end
    assert tr.status == "finished" and tr.result.final and tr.iteration == 20
    assert next(x for x in seen if x[0] == "points") == ("points", False), seen  # the first points came alone
    assert seen[-1] == ("finished", True)  # the final result was there before the final status
    # pump() itself still applies everything at once (pause, stop and tests call it)
    tr2 = TrainingRun(Dispatcher(), limiter=Limiter(1), build=fake_build(), publish_interval=0.0)
    assert tr2.start(ex.data.dataset, ModelConfig(model="gplvm", latent_dim=2, optimizer="adam", max_iters=20))
    assert tr2.join(30)
    tr2.pump()
    assert tr2.status == "finished" and tr2.result.final


@pytest.mark.parametrize("cost", [0.0, 0.02])
def test_results_come_at_most_every_twenty_times_what_showing_one_costs(fake_build, cost):
    from gplvm_explorer.catalog import ModelConfig
    from gplvm_explorer.dispatch import Dispatcher
    from gplvm_explorer.state.training import TrainingRun

    d = Dispatcher()
    tr = TrainingRun(d, limiter=Limiter(1), build=fake_build(delay=0.01), publish_interval=0.0)
    results = []
    tr.param.watch(lambda e: results.append(time.perf_counter()) if e.new is not None else None, ["result"])
    ex = Explorer()
    assert tr.start(ex.data.dataset, ModelConfig(model="gplvm", latent_dim=2, optimizer="adam", max_iters=250))
    while tr.status not in ("running", "finished"):
        d.flush()
        time.sleep(0.005)
    tr.set_result_cost(cost)  # what the latent map reports after showing a result
    d.flush()  # results published before the cost was set (a backlog on a busy machine) are not the throttle's
    t0 = time.perf_counter()
    while not tr.join(0.01):
        d.flush()
    d.flush()
    elapsed = time.perf_counter() - t0
    during = [t for t in results[:-1] if t >= t0]  # the last one is the final result
    if cost:
        assert len(during) <= elapsed / (20.0 * cost) + 2, (len(during), elapsed)
    else:
        assert len(during) > elapsed / (20.0 * 0.02) + 2, (len(during), elapsed)  # unthrottled
