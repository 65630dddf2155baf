"""Training with missing outputs: the bound summed over output dimensions on their observed rows."""
import numpy as np
import pytest

import engine
from engine import psi
from engine.backends import LocalBackend
from engine.missing import observation_groups
from modelcheck import dense_psi_bound, titsias_sparse_bound


def manifold(N=40, D=6, seed=0):
    rng = np.random.default_rng(seed)
    T = rng.uniform(-1.5, 1.5, size=(N, 2))
    return np.sin(T @ rng.normal(size=(2, D)) + rng.uniform(0, 6, D)) + 0.05 * rng.normal(size=(N, D))


def with_holes(Y, rate, seed=1, shared_pattern=True):
    """Y with a fraction ``rate`` of entries set to NaN; columns 0 and 1 share their pattern."""
    rng = np.random.default_rng(seed)
    holes = rng.random(Y.shape) < rate
    holes[np.arange(Y.shape[0]), rng.integers(0, Y.shape[1], Y.shape[0])] = False  # every row observed somewhere
    if shared_pattern:
        holes[:, 1] = holes[:, 0]
    holes[0] = False
    Y = Y.copy()
    Y[holes] = np.nan
    return Y


def random_parameters(model, seed=2):
    rng = np.random.default_rng(seed)
    v = model.parameters
    new = {"X_mean": v["X_mean"] + 0.3 * rng.normal(size=v["X_mean"].shape),
           "Z": v["Z"] + 0.2 * rng.normal(size=v["Z"].shape), "noise_variance": 0.15}
    if "X_variance" in v:
        new["X_variance"] = rng.uniform(0.05, 0.6, size=v["X_variance"].shape)
    model.set_parameters(**new)


def dense_missing_bound(model, Y_with_nan):
    """Per output dimension d: eq. 14 on the rows where d is observed, by determinants and solves;
    summed over d, minus the KL once."""
    v = model.parameters
    k = model.kernel
    Kmm = k.K(v["Z"]) + model.jitter * np.eye(v["Z"].shape[0])
    beta = 1.0 / v["noise_variance"]
    total = 0.0
    for d in range(Y_with_nan.shape[1]):
        rows = ~np.isnan(Y_with_nan[:, d])
        y = Y_with_nan[rows, d:d + 1]
        y = y - np.mean(y)
        stats = psi.compute(k, v["Z"], v["X_mean"][rows], v["X_variance"][rows])
        total += dense_psi_bound(y, stats.psi0, stats.Psi1, stats.Psi2, Kmm, beta)
    return total - model.kl()


@pytest.mark.parametrize("rate", [0.1, 0.3, 0.6])
def test_bayesian_bound_equals_the_per_dimension_dense_reference(rate):
    Y = with_holes(manifold(), rate)
    model = engine.BayesianGPLVM(Y, 2, num_inducing=8)
    random_parameters(model)
    assert model.observed is not None
    assert model.objective() == pytest.approx(dense_missing_bound(model, Y), rel=1e-10)


def test_sparse_bound_equals_the_per_dimension_titsias_form():
    Y = with_holes(manifold(), 0.3)
    model = engine.SparseGPLVM(Y, 2, num_inducing=6)
    random_parameters(model)
    v = model.parameters
    k = model.kernel
    Kmm = k.K(v["Z"]) + model.jitter * np.eye(6)
    expected = -0.5 * np.sum(v["X_mean"] ** 2) - 0.5 * v["X_mean"].size * np.log(2 * np.pi)
    for d in range(Y.shape[1]):
        rows = ~np.isnan(Y[:, d])
        X = v["X_mean"][rows]
        y = Y[rows, d:d + 1] - np.mean(Y[rows, d])
        expected += titsias_sparse_bound(y, k.K(X), k.K(X, v["Z"]), Kmm, v["noise_variance"])
    assert model.objective() == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("kind", ["bayesian", "sparse"])
def test_missing_data_gradients_match_finite_differences(kind):
    Y = with_holes(manifold(N=30), 0.3)
    cls = engine.BayesianGPLVM if kind == "bayesian" else engine.SparseGPLVM
    model = cls(Y, 2, num_inducing=6)
    random_parameters(model)
    assert model.checkgrad() < 1e-4


def test_columns_are_grouped_by_pattern_and_use_the_smaller_row_set():
    mask = np.ones((10, 4), bool)
    mask[[1, 2], 0] = False
    mask[[1, 2], 2] = False  # same pattern as column 0
    mask[:7, 3] = False  # mostly missing: its observed rows are the smaller set
    groups = observation_groups(mask)
    cols = [g.cols.tolist() for g in groups]
    assert cols == [[0, 2], [1], [3]]
    g0, g1, g3 = groups
    assert g0.complement and g0.subset.tolist() == [1, 2]
    assert g1.complement and g1.subset.size == 0
    assert not g3.complement and g3.subset.tolist() == [7, 8, 9]


def test_nan_and_observed_mask_mean_the_same():
    Y = manifold()
    Y_nan = with_holes(Y, 0.25)
    by_nan = engine.BayesianGPLVM(Y_nan, 2, num_inducing=8)
    by_mask = engine.BayesianGPLVM(Y, 2, num_inducing=8, observed=~np.isnan(Y_nan), X=by_nan.X_mean)
    by_mask.set_parameters(**by_nan.parameters)
    assert by_mask.objective() == pytest.approx(by_nan.objective(), rel=1e-12)


def test_fully_observed_data_takes_exactly_the_complete_data_path():
    Y = manifold()
    plain = engine.BayesianGPLVM(Y, 2, num_inducing=8)
    masked = engine.BayesianGPLVM(Y, 2, num_inducing=8, observed=np.ones(Y.shape, bool))
    assert masked.observed is None
    assert masked.objective() == plain.objective()


def test_impute_keeps_observed_entries_and_predicts_missing_ones():
    Y = manifold(N=60)
    Y_nan = with_holes(Y, 0.2)
    missing = np.isnan(Y_nan)
    model = engine.BayesianGPLVM(Y_nan, 2, num_inducing=10)
    engine.fit(model, max_iters=200)
    filled, std = model.impute()
    assert filled.shape == std.shape == Y.shape
    np.testing.assert_array_equal(filled[~missing], Y_nan[~missing])
    assert np.all(std[~missing] == 0.0)
    assert np.all(std[missing] > 0.0) and np.all(np.isfinite(filled))
    # better than filling each column with its observed mean
    col_mean = np.nanmean(Y_nan, axis=0)
    rmse_model = np.sqrt(np.mean((filled[missing] - Y[missing]) ** 2))
    rmse_mean = np.sqrt(np.mean((np.broadcast_to(col_mean, Y.shape)[missing] - Y[missing]) ** 2))
    assert rmse_model < 0.7 * rmse_mean


def test_predictions_differ_per_column_group():
    Y_nan = with_holes(manifold(), 0.4)
    model = engine.BayesianGPLVM(Y_nan, 2, num_inducing=8)
    mean, var = model.predict(np.zeros((3, 2)))
    assert mean.shape == var.shape == (3, Y_nan.shape[1])
    np.testing.assert_array_equal(var[:, 0], var[:, 1])  # one group: same posterior
    assert not np.allclose(var[:, 0], var[:, 3])  # other groups: their own rows


def test_columns_or_rows_with_nothing_observed_are_refused():
    Y = manifold()
    Y[:, 2] = np.nan
    with pytest.raises(engine.ShapeError, match=r"Column\(s\) \[2\]"):
        engine.BayesianGPLVM(Y, 2, num_inducing=5)
    Y = manifold()
    Y[4] = np.nan
    with pytest.raises(engine.ShapeError, match=r"Row\(s\) \[4\]"):
        engine.SparseGPLVM(Y, 2, num_inducing=5)
    Y = manifold()
    Y[0, 0] = np.inf
    with pytest.raises(engine.ShapeError, match="infinite"):
        engine.BayesianGPLVM(Y, 2, num_inducing=5)


def test_the_exact_model_says_it_cannot_handle_missing_values():
    Y = with_holes(manifold(), 0.1)
    with pytest.raises(engine.ShapeError, match="BayesianGPLVM or SparseGPLVM"):
        engine.GPLVM(Y, 2)
    with pytest.raises(engine.ConfigurationError, match="missing values"):
        engine.GPLVM(manifold(), 2, observed=np.ones((40, 6), bool))


def test_local_backend_gives_the_same_bound_and_gradients():
    Y = manifold()
    direct = engine.BayesianGPLVM(Y, 2, num_inducing=8)
    backed = engine.BayesianGPLVM(Y, 2, num_inducing=8, backend=LocalBackend())
    random_parameters(direct)
    backed.set_parameters(**direct.parameters)
    assert backed.objective() == pytest.approx(direct.objective(), rel=1e-12)
    g1, g2 = direct.objective_gradients(), backed.objective_gradients()
    for name in g1:
        np.testing.assert_allclose(g2[name], g1[name], rtol=1e-10, atol=1e-12)
    # missing outputs: the column groups' weighted sums, computed by the backend
    holes = with_holes(Y, 0.1)
    direct = engine.BayesianGPLVM(holes, 2, num_inducing=8)
    backed = engine.BayesianGPLVM(holes, 2, num_inducing=8, backend=LocalBackend())
    random_parameters(direct)
    backed.set_parameters(**direct.parameters)
    assert backed.backend.weights.shape == (holes.shape[0], len(direct.observation_groups))
    assert backed.objective() == pytest.approx(direct.objective(), rel=1e-12)
    g1, g2 = direct.objective_gradients(), backed.objective_gradients()
    for name in g1:
        np.testing.assert_allclose(g2[name], g1[name], rtol=1e-10, atol=1e-12)


def test_missing_data_model_round_trips_through_its_file(tmp_path):
    from engine.io import load_model, save_model

    model = engine.BayesianGPLVM(with_holes(manifold(), 0.3), 2, num_inducing=8)
    random_parameters(model)
    save_model(model, tmp_path / "m.npz")
    loaded = load_model(tmp_path / "m.npz")
    np.testing.assert_array_equal(loaded.observed, model.observed)
    assert loaded.objective() == model.objective()
