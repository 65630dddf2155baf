"""The training worker: ordered events, throttled snapshots, the limiter's queue, stop/pause, failures."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from engine.errors import NumericalError, OptimizationError
from gplvm_explorer.catalog import ModelConfig
from gplvm_explorer.training import (Limiter, ProgressEvent, ResultEvent, Status, StatusEvent, TrainingJob)
from gplvm_explorer.training.prepared import PreparedStart

pytestmark = pytest.mark.timeout(120)

Y = np.random.default_rng(1).standard_normal((40, 4))
CFG = ModelConfig(model="gplvm", latent_dim=2, optimizer="adam", max_iters=200)


def run_job(job, timeout=30.0):
    job.start()
    assert job.join(timeout), "the job did not end"
    return job.drain()


def test_events_are_ordered_and_the_trace_is_complete(fake_build):
    build = fake_build(delay=0.002)
    job = TrainingJob(1, Y, CFG, build=build, limiter=Limiter(1), publish_interval=0.1)
    events = []
    job.start()
    while job.alive:  # drain while it runs, as the page does
        events += job.drain()
        time.sleep(0.03)
    events += job.drain()
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    statuses = [e.status for e in events if isinstance(e, StatusEvent)]
    assert statuses == [Status.STARTING, Status.RUNNING, Status.FINISHED]
    its = np.concatenate([e.iterations for e in events if isinstance(e, ProgressEvent)])
    assert its.tolist() == list(range(0, 201))  # iteration 0 = the first evaluation, then every iteration once
    # the final result comes before the final status
    last_result = max(i for i, e in enumerate(events) if isinstance(e, ResultEvent))
    assert events[last_result].result.final and isinstance(events[-1], StatusEvent)


def test_results_are_throttled_frozen_copies(fake_build):
    build = fake_build(delay=0.004)  # ~0.9 s of fitting
    job = TrainingJob(1, Y, CFG, build=build, limiter=Limiter(1), publish_interval=0.25)
    t0 = time.monotonic()
    events = run_job(job)
    seconds = time.monotonic() - t0  # ~0.9 s, longer on a loaded machine: the throttle is per 0.25 s
    results = [e.result for e in events if isinstance(e, ResultEvent)]
    assert 2 <= len(results) <= seconds / 0.25 + 2, (len(results), seconds)  # throttled + the final one
    assert len(results) < 50  # not one per iteration (200)
    first, final = results[0], results[-1]
    assert first.model is not build.models[-1] and final.final
    assert not np.array_equal(first.X_mean, final.X_mean)  # the fit moved on; the early copy did not
    np.testing.assert_array_equal(first.model.X_mean, first.X_mean)
    assert not first.X_mean.flags.writeable
    assert first.iteration < final.iteration == 200


def test_notifications_are_throttled_but_status_changes_are_immediate(fake_build):
    calls = []
    job = TrainingJob(1, Y, CFG, build=fake_build(delay=0.004), limiter=Limiter(1),
                      notify=lambda: calls.append(time.monotonic()), notify_interval=0.2)
    events = run_job(job)
    assert len(calls) <= 20, f"{len(calls)} notifications for 200 iterations"
    assert any(isinstance(e, StatusEvent) and e.status == Status.FINISHED for e in events)


def test_many_millisecond_fits_in_a_row_all_report_their_end(fake_build):
    limiter = Limiter(1)
    for run in range(1, 41):
        job = TrainingJob(run, Y, ModelConfig(model="gplvm", latent_dim=2, optimizer="adam", max_iters=2),
                          build=fake_build(), limiter=limiter)
        events = run_job(job)
        statuses = [e.status for e in events if isinstance(e, StatusEvent)]
        assert statuses[-1] == Status.FINISHED and Status.RUNNING in statuses, statuses
        assert all(e.run_id == run for e in events)
    assert limiter.active == 0


def test_pause_resume_stop_within_a_second(fake_build):
    job = TrainingJob(1, Y, ModelConfig(model="gplvm", latent_dim=2, optimizer="adam", max_iters=100_000),
                      build=fake_build(delay=0.002), limiter=Limiter(1))
    job.start()
    time.sleep(0.1)
    job.pause()
    assert job.status == Status.PAUSED
    n1 = len(np.concatenate([e.iterations for e in job.drain() if isinstance(e, ProgressEvent)] or [[]]))
    time.sleep(0.2)
    paused = [e for e in job.drain() if isinstance(e, ProgressEvent)]
    assert sum(len(e.iterations) for e in paused) <= 1 and n1 > 0
    job.resume()
    time.sleep(0.1)
    assert any(isinstance(e, ProgressEvent) for e in job.drain())
    t0 = time.monotonic()
    job.stop()
    assert job.join(1.0) and time.monotonic() - t0 < 1.0
    assert [e.status for e in job.drain() if isinstance(e, StatusEvent)][-1] == Status.STOPPED


def test_queue_positions_and_release(fake_build):
    limiter = Limiter(1)
    long = TrainingJob(1, Y, ModelConfig(model="gplvm", latent_dim=2, optimizer="adam", max_iters=100_000),
                       build=fake_build(delay=0.002), limiter=limiter)
    waiting = TrainingJob(2, Y, CFG, build=fake_build(), limiter=limiter)
    cancelled = TrainingJob(3, Y, CFG, build=fake_build(), limiter=limiter)
    long.start()
    time.sleep(0.05)
    waiting.start()
    time.sleep(0.05)
    cancelled.start()
    time.sleep(0.1)
    q2 = [e for e in waiting.drain() if isinstance(e, StatusEvent)]
    q3 = [e for e in cancelled.drain() if isinstance(e, StatusEvent)]
    assert q2[-1].status == Status.QUEUED and q2[-1].position == 1
    assert q3[-1].status == Status.QUEUED and q3[-1].position == 2
    cancelled.stop()  # leaving the queue is quick
    assert cancelled.join(1.0)
    assert [e.status for e in cancelled.drain() if isinstance(e, StatusEvent)][-1] == Status.STOPPED
    long.stop()
    assert long.join(2.0) and waiting.join(10.0)
    assert [e.status for e in waiting.drain() if isinstance(e, StatusEvent)][-1] == Status.FINISHED
    assert limiter.active == 0 and limiter.waiting == 0


def test_failure_becomes_a_message_keeps_the_last_model_and_frees_the_slot(fake_build):
    limiter = Limiter(1)
    job = TrainingJob(1, Y, CFG, limiter=limiter,
                      build=fake_build(fail_at=20, exc=OptimizationError("The objective became NaN")))
    events = run_job(job)
    last = events[-1]
    assert last.status == Status.FAILED and "NaN" in last.message and "standardise" in last.message
    assert "Traceback" in last.details
    assert any(isinstance(e, ResultEvent) and e.result.final for e in events)  # the page stays usable
    assert limiter.active == 0


def test_numbers_that_end_a_fit_midway_stop_it_early_with_its_best_point(fake_build):
    """A factorisation that fails even at the largest jitter after some iterations: the best point
    reached is the result, and the run says it stopped early and why (it does not fail)."""
    limiter = Limiter(1)
    job = TrainingJob(1, Y, CFG, limiter=limiter,
                      build=fake_build(fail_at=20, exc=NumericalError("The inducing-point kernel matrix Kmm could "
                                                                      "not be factorised even with jitter 1.01. Try "
                                                                      "standardising the data.")))
    events = run_job(job)
    last = events[-1]
    assert last.status == Status.STOPPED, last.message
    assert last.message.startswith("Stopped early at iteration ") and "jitter 1.01" in last.message
    assert "best point" in last.message and "Try standardising" not in last.message
    finals = [e.result for e in events if isinstance(e, ResultEvent) and e.result.final]
    assert len(finals) == 1 and finals[0].iteration >= 1
    assert limiter.active == 0
    # at the very start there is no point to keep: that is still a failure (after the fallbacks)
    job = TrainingJob(2, Y, CFG, limiter=limiter, build=fake_build(fail_at=1, exc=NumericalError("Kmm: no.")))
    assert run_job(job)[-1].status == Status.FAILED

    def broken(Y, config):
        raise ValueError("no such kernel")
    events = run_job(TrainingJob(2, Y, CFG, build=broken, limiter=limiter))
    assert events[-1].status == Status.FAILED and "no such kernel" in events[-1].message


def test_the_fit_runs_off_the_calling_thread(fake_build):
    build = fake_build()
    run_job(TrainingJob(1, Y, CFG, build=build, limiter=Limiter(1)))
    assert threading.current_thread().name not in build.models[-1].fit_threads


def test_results_of_big_data_come_at_most_every_row_scaled_interval(fake_build):
    """At 5,000 rows frozen results come at most every 0.5 s, however small publish_interval is."""
    from gplvm_explorer.training.job import PUBLISH_SECONDS_PER_ROW

    big = np.random.default_rng(1).standard_normal((5000, 3))
    build = fake_build(delay=0.004)  # ~0.9 s of fitting
    job = TrainingJob(1, big, CFG, build=build, limiter=Limiter(1), publish_interval=0.0)
    t0 = time.monotonic()
    events = run_job(job)
    seconds = time.monotonic() - t0  # ~0.9 s, longer on a loaded machine
    results = [e.result for e in events if isinstance(e, ResultEvent)]
    assert 5000 * PUBLISH_SECONDS_PER_ROW == pytest.approx(0.5)
    # at most one per 0.5 s while fitting + the final one, not one per iteration (200)
    assert 1 <= len(results) <= seconds / 0.5 + 2, (len(results), seconds)
    assert results[-1].final and results[-1].iteration == 200


# ---- a start prepared before the Train click ----------------------------------------------------

SMALL = np.random.default_rng(2).standard_normal((60, 5))
BAYES = ModelConfig(model="bayesian", latent_dim=2, num_inducing=8, optimizer="lbfgs", max_iters=4)


def recording(build=None):
    """A build that remembers what it made (the catalog's by default)."""
    made = []

    def wrapped(Y, config):
        made.append((build or config.spec.build)(Y, config))
        return made[-1]
    wrapped.made = made
    return wrapped


def test_a_prepared_start_is_iteration_0_of_the_run_and_the_true_objective(caplog):
    import engine

    build = recording()
    prepared = PreparedStart(SMALL, BAYES, build=build, limiter=Limiter(1), delay=0.0).start()
    assert prepared.wait(60) and prepared.ready
    # the objective of the same model, built independently, at the start of a fit
    alone = BAYES.spec.build(SMALL, BAYES)
    assert prepared.value == engine.fit(alone, max_iters=0).objective
    job_build = recording()
    job = TrainingJob(1, SMALL, BAYES, build=job_build, limiter=Limiter(1), prepared=prepared)
    with caplog.at_level("WARNING", logger="gplvm_explorer.training.start"):
        events = run_job(job, timeout=60)
    progress = [e for e in events if isinstance(e, ProgressEvent)]
    assert progress[0].iterations[0] == 0 and progress[0].objectives[0] == prepared.value
    assert job_build.made == []  # the job trained the prepared model instead of building one
    assert [e for e in events if isinstance(e, ResultEvent)][-1].result.model is build.made[0]
    # the fit's own first evaluation agreed with the prepared value (else a warning is logged)
    assert not [r for r in caplog.records if "differs" in r.getMessage()]
    assert [e.status for e in events if isinstance(e, StatusEvent)][-1] == Status.FINISHED
    assert prepared.take(threading.Event()) is None  # taken once


def test_a_prepared_start_serves_a_click_with_other_iterations_and_keeps_them():
    """The prepared start was made for the iterations shown when it was prepared; the click's count rules."""
    import dataclasses

    prepared = PreparedStart(SMALL, BAYES, build=recording(), limiter=Limiter(1), delay=0.0).start()
    assert prepared.wait(60) and prepared.ready
    click = dataclasses.replace(BAYES, max_iters=BAYES.max_iters + 3)
    events = run_job(TrainingJob(1, SMALL, click, limiter=Limiter(1), prepared=prepared), timeout=60)
    final = [e for e in events if isinstance(e, ResultEvent)][-1].result
    assert final.config == click and final.iteration == click.max_iters


def test_a_prepared_start_serves_only_its_data_and_settings_and_cancels(fake_build):
    build = fake_build(delay=0.05)
    prepared = PreparedStart(Y, CFG, build=build, limiter=Limiter(1), delay=0.0)
    assert prepared.matches(Y, CFG) and prepared.matches(Y, ModelConfig(**{**CFG.__dict__, "max_iters": 7}))
    assert not prepared.matches(Y.copy(), CFG)  # other data (identity: the array the page trains on)
    assert not prepared.matches(Y, ModelConfig(**{**CFG.__dict__, "latent_dim": 3}))
    prepared.start()
    prepared.cancel()
    assert prepared.wait(10) and not prepared.ready and not prepared.matches(Y, CFG)
    assert prepared.take(threading.Event()) is None
    # a job given a cancelled start builds its own model and still starts at iteration 0
    events = run_job(TrainingJob(1, Y, CFG, build=build, limiter=Limiter(1), prepared=prepared))
    assert [e for e in events if isinstance(e, ProgressEvent)][0].iterations[0] == 0
    assert [e.status for e in events if isinstance(e, StatusEvent)][-1] == Status.FINISHED


def test_a_prepared_start_waits_while_the_trainings_fill_the_limiter(fake_build):
    limiter = Limiter(1)
    build = fake_build()
    limiter.acquire(object(), threading.Event())  # another session trains
    prepared = PreparedStart(Y, CFG, build=build, limiter=limiter, delay=0.0).start()
    assert not prepared.wait(0.3) and build.models == []  # nothing computed meanwhile
    taken = prepared.take(threading.Event())  # a Train click of this page wants it now
    assert taken is not None and taken[0] is build.models[0] and taken[1] == build.models[0].objective()
    limiter.release()


def test_a_failing_preparation_leaves_the_job_to_build_and_report(fake_build):
    def broken(Y, config):
        raise ValueError("no such kernel")
    prepared = PreparedStart(Y, CFG, build=broken, limiter=Limiter(1), delay=0.0).start()
    assert prepared.wait(10) and not prepared.ready
    events = run_job(TrainingJob(1, Y, CFG, build=broken, limiter=Limiter(1), prepared=prepared))
    assert events[-1].status == Status.FAILED and "no such kernel" in events[-1].message


def test_models_are_built_with_blas_on_one_thread(fake_build):
    """A build's small products ran ~10x slower with BLAS's threads on a busy two-core machine."""
    from engine._threads import blas_thread_counts

    seen = []
    build = fake_build()

    def counting(Y, config):
        seen.append(blas_thread_counts())
        return build(Y, config)
    prepared = PreparedStart(Y, CFG, build=counting, limiter=Limiter(1), delay=0.0).start()
    assert prepared.wait(10) and prepared.ready
    run_job(TrainingJob(1, Y, CFG, build=counting, limiter=Limiter(1)))
    assert len(seen) == 2 and all(counts and max(counts) == 1 for counts in seen), seen
