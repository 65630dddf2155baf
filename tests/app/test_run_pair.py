"""Two runs side by side without a browser: which runs pair, and their maps' points row by row."""
from __future__ import annotations

import numpy as np
import pytest

from engine.metrics import most_relevant_dims
from gplvm_explorer.state.run_pair import RunPair

from .test_runs import train_to_end as train

pytestmark = pytest.mark.timeout(300)


def train_to_end(ex, pump, **settings):
    result = train(ex, pump, **settings)
    ex.dispatcher.flush()  # the runs table's row, and the pair's choices, follow the status
    return result


def test_two_runs_of_the_same_rows_pair_row_by_row_in_their_most_relevant_dims(make_explorer, pump):
    ex = make_explorer()
    pair = RunPair(ex.runs)
    assert ex.data.load_sample("three-phase-flow")
    ex.settings.max_iters = 10
    pair.shown = True
    assert pair.points is None and "Choose two runs" in pair.message
    a = train_to_end(ex, pump, model="bayesian", latent_dim=4, num_inducing=10)
    assert pair.points is None  # one run: nothing to pair yet
    b = train_to_end(ex, pump, model="gplvm", latent_dim=3)
    # shown with nothing chosen: the two latest runs, as soon as there are two; kept while more come
    assert (pair.left, pair.right) == (1, 2) and pair.points is not None
    c = train_to_end(ex, pump, model="bayesian", latent_dim=2, num_inducing=8)
    assert (pair.left, pair.right) == (1, 2) and set(pair.choices) == {1, 2, 3}
    assert pair.choices[1].startswith("Run 1: Bayesian GP-LVM") and "Q=4" in pair.choices[1]
    pair.choose(1, 3)
    p = pair.points
    dims_a = most_relevant_dims(a.relevance, 2)
    dims_c = most_relevant_dims(c.relevance, 2)
    assert pair.dims == (tuple(dims_a), tuple(dims_c)) and pair.dataset is a.dataset and not pair.message
    assert pair.titles == ("Run 1: Bayesian GP-LVM, Q=4", "Run 3: Bayesian GP-LVM, Q=2")
    np.testing.assert_array_equal(p["row"], np.arange(a.dataset.n))
    np.testing.assert_array_equal(p["x_left"], a.X_mean[:, dims_a[0]])
    np.testing.assert_array_equal(p["y_left"], a.X_mean[:, dims_a[1]])
    np.testing.assert_array_equal(p["x_right"], c.X_mean[:, dims_c[0]])
    np.testing.assert_array_equal(p["y_right"], c.X_mean[:, dims_c[1]])
    pair.right = 2
    dims_b = most_relevant_dims(b.relevance, 2)
    np.testing.assert_array_equal(pair.points["y_right"], b.X_mean[:, dims_b[1]])
    pair.shown = False
    assert pair.points is None


def test_runs_of_different_rows_do_not_pair_and_a_dropped_run_says_so(make_explorer, fake_build, pump):
    ex = make_explorer(build=fake_build())
    pair = RunPair(ex.runs)
    ex.settings.model, ex.settings.optimizer, ex.settings.max_iters = "gplvm", "adam", 2
    train_to_end(ex, pump)
    assert ex.data.load_sample("three-phase-flow")  # other rows
    train_to_end(ex, pump)
    pair.choose(1, 2)
    assert pair.points is None and "different rows" in pair.message
    assert ex.data.load_sample("three-phase-flow")  # the same rows again, loaded anew: they pair
    train_to_end(ex, pump)
    assert ex.runs.record(3).result.dataset is not ex.runs.record(2).result.dataset
    pair.choose(2, 3)
    assert pair.points is not None and not pair.message
    ex.runs.cap = 1  # the next run drops runs 2 and 3
    train_to_end(ex, pump)
    assert pair.points is None and pair.message == "Run 2 is no longer kept: choose another."
    assert set(pair.choices) == {4}


def test_a_one_dimensional_latent_space_is_drawn_on_a_line():
    from types import SimpleNamespace

    from gplvm_explorer.state.run_pair import pair_points

    X1, X3 = np.arange(5.0)[:, None], np.arange(15.0).reshape(5, 3)
    p = pair_points(SimpleNamespace(X_mean=X1, relevance=np.ones(1)),
                    SimpleNamespace(X_mean=X3, relevance=np.array([0.1, 3.0, 2.0])))
    np.testing.assert_array_equal(p["x_left"], X1[:, 0])
    np.testing.assert_array_equal(p["y_left"], np.zeros(5))
    np.testing.assert_array_equal(p["x_right"], X3[:, 1])  # the most relevant first
    np.testing.assert_array_equal(p["y_right"], X3[:, 2])
