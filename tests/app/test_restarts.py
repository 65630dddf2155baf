"""Best of K restarts without a browser: K rows with consecutive seeds, the best objective shown again,
a Stop ends the series."""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.timeout(300)


def runs_of(ex):
    return [r for r in ex.runs.records if not r.is_pca]


def test_best_of_three_real_fits_gives_three_rows_and_shows_the_best_again(make_explorer, pump):
    ex = make_explorer()
    assert ex.data.load_sample("three-phase-flow")
    ex.settings.model, ex.settings.init, ex.settings.latent_dim = "bayesian", "random", 2
    ex.settings.num_inducing, ex.settings.max_iters, ex.settings.seed = 8, 10, 4
    ex.restarts.count = 3
    assert ex.restarts.start()
    assert pump(ex, lambda: not ex.restarts.active and ex.training.restored, timeout=240), ex.restarts.message
    runs = runs_of(ex)
    assert [r.cells["seed"] for r in runs] == [4, 5, 6]
    assert all(r.cells["status"].startswith("finished") for r in runs)
    objectives = [r.cells["objective"] for r in runs]
    assert len(set(objectives)) == 3  # different seeds, different fits
    best = runs[int(np.argmax(objectives))]
    assert ex.restarts.best == best.number and ex.training.restored == f"Run {best.number}"
    # the model on show is the best run's, built again at its final parameters (no training)
    assert ex.training.result.objective == max(objectives)
    assert ex.training.result.model.objective() == pytest.approx(max(objectives), rel=1e-9)
    np.testing.assert_array_equal(ex.training.result.model.get_free(), best.state[0])
    assert best.cells["status"] == "finished, best of 3"
    assert [r.cells["status"] for r in runs].count("finished, best of 3") == 1
    assert ex.settings.seed == best.cells["seed"]  # Train again reproduces it
    assert f"run {best.number}" in ex.restarts.message and ex.restarts.done == 3
    ex.dispatcher.flush()
    assert len(ex.runs.table) == 4  # three runs and the PCA row; the restore is not a row


def seeded_build(fake_build, scale):
    """FakeModels whose start (and so final objective after a few steps) depends on the seed."""
    inner = fake_build()

    def build(Y, config):
        m = inner(Y, config)
        m._free = m._free * scale[config.seed]
        return m
    build.models = inner.models
    return build


def test_the_best_is_shown_again_when_it_is_not_the_last(make_explorer, fake_build, pump):
    # objective -|x|^2 / 2: the smallest start is the best fit after two Adam steps
    ex = make_explorer(build=seeded_build(fake_build, {0: 2.0, 1: 0.5, 2: 1.0, 3: 3.0}))
    ex.settings.model, ex.settings.optimizer, ex.settings.max_iters = "gplvm", "adam", 2
    ex.restarts.count = 4
    assert ex.restarts.start()
    assert pump(ex, lambda: not ex.restarts.active and ex.training.restored, timeout=60), ex.restarts.message
    runs = runs_of(ex)
    assert [r.cells["seed"] for r in runs] == [0, 1, 2, 3]
    assert ex.restarts.best == runs[1].number and ex.training.restored == f"Run {runs[1].number}"
    assert ex.training.result.objective == runs[1].cells["objective"] == max(r.cells["objective"] for r in runs)
    assert [r.cells["status"] for r in runs] == ["finished", "finished, best of 4", "finished", "finished"]
    assert ex.settings.seed == 1
    # a second series starts from the card's seed (the best's) and numbers its own rows
    ex.restarts.count = 2
    assert ex.restarts.start()
    assert pump(ex, lambda: not ex.restarts.active and ex.training.restored, timeout=60), ex.restarts.message
    assert [r.cells["seed"] for r in runs_of(ex)][4:] == [1, 2]
    assert ex.restarts.best == 5


def test_stop_ends_the_series_and_keeps_the_best_so_far(make_explorer, fake_build, pump):
    ex = make_explorer(build=fake_build(delay=0.01))
    ex.settings.model, ex.settings.optimizer, ex.settings.max_iters = "gplvm", "adam", 100000
    ex.settings.seed = 7
    ex.restarts.count = 4
    assert ex.restarts.start()
    assert pump(ex, lambda: ex.training.status == "running" and ex.training.iteration > 2, timeout=30)
    ex.training.stop()
    assert pump(ex, lambda: not ex.restarts.active and ex.training.restored, timeout=30), ex.restarts.message
    ex.dispatcher.flush()
    runs = runs_of(ex)
    assert len(runs) == 1 and ex.restarts.done == 1  # no restart after the user's Stop
    assert runs[0].cells["status"] == "stopped, best of 1" and ex.settings.seed == 7
    assert not ex.training.active and ex.training.run_id == 2  # one training, one restore


def test_a_restart_that_cannot_start_ends_the_series_with_the_reason(make_explorer, fake_build, pump):
    ex = make_explorer(build=fake_build())
    ex.settings.model, ex.settings.optimizer, ex.settings.max_iters = "gplvm", "adam", 2
    ex.data.dataset = None
    assert not ex.restarts.start()
    assert not ex.restarts.active and "could not start" in ex.restarts.message
    assert "Load data first" in ex.restarts.message and not runs_of(ex)


def test_a_series_cannot_start_while_a_training_runs(make_explorer, fake_build, pump):
    ex = make_explorer(build=fake_build(delay=0.01))
    ex.settings.model, ex.settings.optimizer, ex.settings.max_iters = "gplvm", "adam", 100000
    assert ex.train()
    assert not ex.restarts.start() and "training is running" in ex.restarts.message
    ex.training.stop()
    assert pump(ex, lambda: not ex.training.active, timeout=30)
    assert not ex.restarts.active and ex.restarts.done == 0
