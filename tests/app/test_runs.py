"""The runs table's view-model without a browser: rows, scores, PCA row, cap, CSV, restoring a run."""
from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from engine.metrics import most_relevant_dims, one_nn_errors
from gplvm_explorer.state.runs import COLUMNS, dims_in_use, pca_record

pytestmark = pytest.mark.timeout(300)


def train_to_end(ex, pump, **settings):
    for key, value in settings.items():
        setattr(ex.settings, key, value)
    assert ex.train(), ex.training.message
    assert pump(ex, lambda: ex.training.status in ("finished", "stopped"), timeout=240), ex.training.status
    return ex.training.result


def scored(ex, pump, count):
    """Wait until ``count`` rows have their 1-NN errors."""
    assert pump(ex, lambda: len(ex.runs.table) == count and ex.runs.table["nn_errors_all"].notna().all(),
                timeout=60), ex.runs.table


def test_three_runs_give_three_rows_and_a_pca_row_with_their_settings_and_scores(make_explorer, pump):
    ex = make_explorer()
    assert ex.data.load_sample("three-phase-flow")
    ds = ex.data.dataset
    ex.settings.max_iters = 15
    runs = [dict(model="bayesian", kernel="rbf", latent_dim=2, num_inducing=12),
            dict(model="bayesian", kernel="linear", latent_dim=3, num_inducing=3),
            dict(model="gplvm", kernel="matern32", latent_dim=4)]
    results = [train_to_end(ex, pump, **r) for r in runs]
    scored(ex, pump, 4)
    table = ex.runs.table
    assert list(table.columns) == [k for k, _ in COLUMNS]
    assert table["model"].tolist() == ["PCA", "Bayesian GP-LVM", "Bayesian GP-LVM", "GP-LVM (exact)"]
    assert table["Q"].tolist() == [2, 2, 3, 4]
    assert table["kernel"].iloc[2].startswith("Linear (ARD)") and table["kernel"].iloc[3].startswith("Matérn 3/2")
    assert table["M"].iloc[1] == 12 and table["M"].iloc[3] is None
    assert set(table["data"]) == {ds.name}
    for row, result in zip(table.iloc[1:].itertuples(), results):
        assert row.iterations == result.iteration and row.objective == result.objective
        assert row.bound_per_row == pytest.approx(result.objective / ds.n)
        assert row.dims_in_use == dims_in_use(result.relevance)
        shown = most_relevant_dims(result.relevance, 2)
        assert row.nn_errors_2d == one_nn_errors(result.X_mean[:, shown], ds.labels)
        assert row.nn_errors_all == one_nn_errors(result.X_mean, ds.labels)
        assert row.likelihood == "gaussian" and row.status == "finished" and row.time_s >= 0


def test_pca_row_is_probabilistic_pca_of_the_data():
    """The bound of the PCA row: the exact log-likelihood of PPCA with two components at its maximum
    (Tipping & Bishop 1999), computed here densely from its parameters."""
    from gplvm_explorer.data.frames import from_array

    rng = np.random.default_rng(0)
    Y = rng.normal(size=(60, 2)) @ rng.normal(size=(2, 5)) + 0.3 * rng.normal(size=(60, 5))
    labels = (Y[:, 0] > 0).astype(int)
    ds = from_array(Y, labels, name="toy", standardize=False, drop_constant=False)
    cells = pca_record(ds).cells
    Yc = Y - Y.mean(0)
    S = Yc.T @ Yc / 60
    lam, U = np.linalg.eigh(S)
    lam, U = lam[::-1], U[:, ::-1]
    sigma2 = lam[2:].mean()
    W = U[:, :2] * np.sqrt(lam[:2] - sigma2)
    C = W @ W.T + sigma2 * np.eye(5)
    from scipy.stats import multivariate_normal

    ref = multivariate_normal(np.zeros(5), C).logpdf(Yc).sum()
    assert cells["objective"] == pytest.approx(ref, rel=1e-10)
    assert cells["bound_per_row"] == pytest.approx(ref / 60, rel=1e-10)
    assert cells["nn_errors_all"] == one_nn_errors(Y, labels)
    assert cells["nn_errors_2d"] == one_nn_errors(Yc @ U[:, :2], labels)
    assert cells["model"] == "PCA" and cells["Q"] == 2


def test_clicking_a_run_restores_its_result_and_curve_without_training(make_explorer, pump):
    ex = make_explorer()
    assert ex.data.load_sample("three-phase-flow")
    ex.settings.max_iters = 12
    first = train_to_end(ex, pump, model="bayesian", latent_dim=2, num_inducing=10)
    first_trace = ex.training.trace.data.copy()
    assert ex.latent.wait(60)
    first_grid = np.array(ex.latent.view.grid.values)
    train_to_end(ex, pump, model="gplvm", latent_dim=3)
    assert ex.training.result is not first
    run_id = ex.training.run_id
    assert ex.runs.restore(1)
    assert pump(ex, lambda: ex.training.restored == "Run 1", timeout=60), ex.runs.note
    restored = ex.training.result
    assert restored.X_mean is first.X_mean and restored.objective == first.objective
    assert restored.model is not first.model  # built again from the run's parameters ...
    np.testing.assert_array_equal(restored.model.get_free(), first.model.get_free())
    assert restored.model.objective() == pytest.approx(first.objective, rel=1e-9)  # ... and the same model
    assert ex.training.status == "finished" and ex.training.status == "finished" and ex.training.restored == "Run 1"
    assert ex.training.run_id == run_id + 1 and not ex.training.active  # nothing trained
    pd.testing.assert_frame_equal(ex.training.trace.data.reset_index(drop=True), first_trace.reset_index(drop=True))
    assert pump(ex, lambda: ex.latent.view is not None and ex.latent.view.result is restored, timeout=60)
    np.testing.assert_array_equal(np.array(ex.latent.view.grid.values), first_grid)
    ex.dispatcher.flush()
    assert len(ex.runs.table) == 3  # a restored run is not a new row
    assert not ex.result_is_stale


def test_the_cap_drops_the_oldest_runs_with_a_note_and_csv_has_every_column(make_explorer, fake_build, pump):
    ex = make_explorer(build=fake_build())
    ex.runs.cap = 3
    ex.settings.model, ex.settings.optimizer, ex.settings.max_iters = "gplvm", "adam", 2
    kept = []
    for _ in range(5):
        assert ex.train(), ex.training.message
        assert ex.training.join(10)
        ex.dispatcher.flush()
        kept.append(ex.training.result)
    pump(ex, lambda: ex.runs.table["nn_errors_all"].notna().all(), timeout=30)
    runs = [r for r in ex.runs.records if not r.is_pca]
    assert [r.number for r in runs] == [3, 4, 5]
    assert [r.result.X_mean for r in runs] == [k.X_mean for k in kept[2:]]
    assert ex.runs.note.startswith("Run 2 dropped")
    assert not ex.runs.restore(1) and "no longer kept" in ex.runs.note
    # a kept run holds its latents and parameters, not its model (which holds a centred copy of the data)
    n, d = ex.data.dataset.values.shape
    for r in runs:
        assert r.result.dataset is ex.data.dataset and r.result.model is None
        arrays = [r.state[0], r.result.X_mean, *r.trace, *r.result.parameters.values()]
        assert sum(np.asarray(a).size for a in arrays) < n * d / 4
    frame = pd.read_csv(io.BytesIO(ex.runs.csv()))
    assert list(frame.columns) == [h for _, h in COLUMNS]
    assert len(frame) == 4 and frame["Run"].tolist() == [0, 3, 4, 5]


def test_held_out_rows_are_never_trained_on_and_score_every_run(make_explorer, pump):
    from engine.metrics import held_out

    ex = make_explorer()
    assert ex.data.load_sample("three-phase-flow")
    loaded = ex.data.dataset
    ex.held_out.enabled = True
    result = train_to_end(ex, pump, model="bayesian", latent_dim=2, num_inducing=10, max_iters=15)
    trained = result.dataset
    test = ex.held_out.test_rows(trained)
    assert trained.n == loaded.n - 45 and test.shape == (45, loaded.d)
    # the held-out rows and the training rows are the loaded rows, split
    rows = {r.tobytes() for r in loaded.values}
    assert {r.tobytes() for r in trained.values} | {r.tobytes() for r in test} == rows
    assert not {r.tobytes() for r in trained.values} & {r.tobytes() for r in test}
    assert pump(ex, lambda: ex.runs.table["held_out_rmse"].notna().all(), timeout=120), ex.runs.table
    row = ex.runs.table.iloc[1]
    score = held_out(result.model, test, seed=0)
    assert row.held_out_log_density == pytest.approx(score.mean_log_density, rel=1e-6)
    assert row.held_out_rmse == pytest.approx(score.rmse, rel=1e-6)
    assert row.data.endswith("(405 of 450 rows)")
    # the same data and seed: the next run trains on the very same rows (one copy, shared)
    again = train_to_end(ex, pump, model="gplvm", latent_dim=2)
    assert again.dataset is trained
    # a model with its own inputs (times) trains on every row, and the card says so
    from gplvm_explorer.catalog import spec

    assert ex.held_out.training_rows(loaded, spec("gpds")) is loaded and "every row" in ex.held_out.note
    ex.held_out.enabled = False
    assert ex._training_input(loaded)[0] is loaded


def test_pca_row_held_out_scores_are_the_gaussian_of_probabilistic_pca():
    from scipy.stats import multivariate_normal

    from engine.metrics import half_observed
    from gplvm_explorer.data.frames import from_array

    rng = np.random.default_rng(3)
    Y = rng.normal(size=(80, 2)) @ rng.normal(size=(2, 6)) + 0.3 * rng.normal(size=(80, 6))
    train, test = Y[:70], Y[70:]
    cells = pca_record(from_array(train, None, name="toy", standardize=False, drop_constant=False), test).cells
    mean = train.mean(0)
    lam, U = np.linalg.eigh(np.cov(train.T, bias=True))
    lam, U = lam[::-1], U[:, ::-1]
    sigma2 = lam[2:].mean()
    C = U[:, :2] @ np.diag(lam[:2] - sigma2) @ U[:, :2].T + sigma2 * np.eye(6)
    assert cells["held_out_log_density"] == pytest.approx(multivariate_normal(mean, C).logpdf(test).mean(), rel=1e-9)
    seen = half_observed(np.ones(test.shape, bool), 0)
    sq = []
    for y, o in zip(test, seen):
        h = ~o
        pred = mean[h] + C[np.ix_(h, o)] @ np.linalg.solve(C[np.ix_(o, o)], y[o] - mean[o])
        sq.extend((pred - y[h]) ** 2)
    assert cells["held_out_rmse"] == pytest.approx(np.sqrt(np.mean(sq)), rel=1e-9)
